"""Every distinct divergence, every difference at the diverging call, and why (issues 10 and 11):
a run goes on past its first counterexample to other kinds, each counterexample lists all that
differs at its last call, and the report names the rule involved from the spec's own tables."""

from __future__ import annotations

import json

import pytest

from cacheproof.contract.calls import Call, ValueRecipe, invoke
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.sequence import first_divergence
from cacheproof.check.report import program_kind
from cacheproof.cli import main
from cacheproof.spec import CacheError, CacheSpec
from cacheproof.spec.cache.invariants import INVARIANTS_BY_NAME
from cacheproof.spec.cache.profiles import profile_named
from cacheproof.spec.cache.semantics import CONTRACT
from cacheproof.spec.kinds import get_kind
from model_tests.broken_caches import EvictsPinnedEntries, GetDoesNotPromote, ReleaseOfIdleIsNoop
from model_tests.broken_profile_caches import OversizedSetEvictsAllCache
from model_tests.cache_checks import check_cache, replayed, snippet
from model_tests.snippet_runs import assert_fails_where_it_diverges, on_cache, run_snippet

PLAIN_OPERATIONS = ("put", "get", "pop", "clear", "contains")


class TwoBugs(ReleaseOfIdleIsNoop, GetDoesNotPromote):
    """Both bugs at once: releasing an idle entry returns False, and get does not promote."""


def _value(nbytes: int) -> ValueRecipe:
    return ValueRecipe(nbytes, 0)


def _explained(factory, size: int, calls: list[Call]):
    """The difference at the last of `calls` (it must be the first that diverges) and its explanation,
    as check and replay give them (`contract.sequence.first_divergence`, `contract.explaining.steps`)."""
    found = first_divergence(factory, size, calls)
    assert found is not None and found.step == len(calls) - 1
    kind = get_kind("cache")
    (explained,) = explain_all(kind, [diverging_call(kind, size, CONTRACT, calls, found.difference)])
    return found.difference, explained.lines()


def _views(difference) -> dict:
    return {view: (spec, implementation) for view, spec, implementation in difference.views}


def test_an_oversized_put_that_evicts_everything_shows_the_result_and_the_state():
    calls = [Call("put", (0, _value(1))), Call("put", (1, _value(1))), Call("put", (2, _value(3)))]
    difference, lines = _explained(OversizedSetEvictsAllCache, 2, calls)
    assert lines[0] == "outcome: spec raised TooLargeError; this implementation returned False", \
        "the result difference comes first, as the checker compares"
    views = _views(difference)
    assert views["len"] == (2, 0), "the entries it evicted on the way are reported too"
    assert views["membership"] == ((0, 1), ())


def test_every_state_difference_of_an_eviction_of_an_entry_in_use():
    calls = [Call("reserve", (0, 1), {"retain": False}), Call("commit", (0, _value(1))), Call("put", (1, _value(1))),
             Call("evict", (1,))]
    difference, _ = _explained(EvictsPinnedEntries, 2, calls)
    assert difference.outcome_differs
    views = _views(difference)
    assert {"stats", "snapshot", "membership"} <= set(views)
    spec_stats, cache_stats = views["stats"]
    assert {field for field in spec_stats if spec_stats[field] != cache_stats[field]} == {"pinned_bytes", "idle_bytes"}


def test_the_why_names_the_broken_invariant_and_the_snapshot_diff():
    calls = [Call("reserve", (0, 1), {"retain": False}), Call("commit", (0, _value(1))), Call("put", (1, _value(1))),
             Call("evict", (1,))]
    _, lines = _explained(EvictsPinnedEntries, 2, calls)
    # the spec keeps key 0 (in use), the cache evicted it and kept idle key 1
    assert "snapshot(): spec ((0, 'READY', 1, 1, False),); this implementation ((1, 'READY', 0, 1, True),)" in lines
    # first the invariant the cache's own step breaks, with its witness: key 0 (in use) went, idle key 1 stayed
    assert lines[0] == "your implementation breaks I5: evict evicted key 0, in use (refcount 1)"
    assert f"I5: {INVARIANTS_BY_NAME['I5'].rule}" in lines, "the rule text is the invariant table's"


def test_the_why_names_the_spec_rule_of_the_call():
    calls = [Call("put", (0, _value(1))), Call("release", (0,))]
    _, lines = _explained(ReleaseOfIdleIsNoop, 1, calls)
    spec = CacheSpec(1)
    invoke(spec, calls[0])
    with pytest.raises(CacheError) as refused:
        invoke(spec, calls[1])
    assert lines == ("outcome: spec raised WrongStateError; this implementation returned False",
                     f"the spec's rule for release: {refused.value}"), \
        "the spec's own rule in its words; no state difference (the states agree) and no invariant the cache breaks"


@pytest.fixture(scope="module")
def two_bugs_report():
    return check_cache(TwoBugs, examples=200, steps=20, max_divergences=4)


def test_a_run_goes_on_to_the_second_bug(two_bugs_report):
    report = two_bugs_report
    kinds = [program_kind(example.difference) for example in report.counterexamples]
    assert len(kinds) == len(set(kinds)) >= 2
    assert {kind.split(":")[0] for kind in kinds} >= {"release", "get"}
    assert report.counterexample == report.counterexamples[0]
    for example in report.counterexamples:
        assert replayed(CacheSpec, example.size, example.calls) is None
        found = replayed(TwoBugs, example.size, example.calls)
        assert found is not None and found[0] == len(example.calls) - 1
        assert program_kind(found[1]) == program_kind(example.difference)


def test_every_snippet_of_a_run_fails_where_it_diverges_and_passes_on_the_spec(two_bugs_report):
    for example in two_bugs_report.counterexamples:
        printed = snippet(example, "model_tests.test_divergences:TwoBugs")
        assert_fails_where_it_diverges(printed)
        assert run_snippet(on_cache(printed, "cacheproof.spec", "CacheSpec")).returncode == 0


def test_the_first_divergence_alone_is_the_default_of_the_check():
    assert len(check_cache(TwoBugs, examples=200, steps=20).counterexamples) == 1


def test_sglang_oversized_set_under_its_profile_is_a_state_divergence(capsys):
    profile = profile_named("plain-lru")
    report = check_cache(OversizedSetEvictsAllCache, examples=100, steps=20, semantics=profile.semantics,
                         operations=profile.operations, max_divergences=3)
    example = report.counterexample
    assert example.calls[-1].op == "put"
    assert program_kind(example.difference).startswith("put: spec returns; this implementation the same outcome")
    assert any(view == "len" for view, _, _ in example.difference.views)
    printed = snippet(example, "model_tests.broken_profile_caches:OversizedSetEvictsAllCache", profile.semantics)
    assert "assert len(cache) ==" in printed and "print(" not in printed
    assert_fails_where_it_diverges(printed)
    assert run_snippet(on_cache(printed, "examples.plain_lru_cache", "PlainLRUCache")).returncode == 0


def test_json_lists_every_counterexample_and_the_table_counts_them(tmp_path, capsys):
    path = tmp_path / "report.json"
    impl = "model_tests.test_divergences:TwoBugs"
    argv = ["check", "--impl", impl, "--examples", "200", "--steps", "20", "--max-divergences", "3",
            "--json", str(path)]
    assert main(argv) == 1
    output = capsys.readouterr().out
    report = json.loads(path.read_text())
    listed = report["divergences"]
    assert len(listed) >= 2 and len({entry["kind"] for entry in listed}) == len(listed)
    assert report["examples"] <= 200, "the search for further kinds spends the one budget"
    for entry in listed:  # the headline names the diverging call and what differs first, as its first difference
        call, _, headline = entry["message"].partition(": ")
        first = entry["differences"][0]
        assert call.startswith("cache.") and headline, entry
        assert headline in first or first.split(": ", 1)[0] in headline, entry
    assert f"{len(listed)} distinct divergences" in output
    assert f"\ncounterexample 2 of {len(listed)} (" in output
    assert output.index(f"\ncounterexample {len(listed)} of") < output.index("# cacheproof counterexample 1 of")
    assert output.count("# cacheproof counterexample") == len(listed)
    assert "  the spec's rule for release: release(0): the entry has no reference to release (refcount 0)" in output, \
        "the why is printed"


def test_max_divergences_one_stops_at_the_first(tmp_path, capsys):
    path = tmp_path / "report.json"
    impl = "model_tests.test_divergences:TwoBugs"
    argv = ["check", "--impl", impl, "--examples", "200", "--steps", "20", "--max-divergences", "1",
            "--json", str(path)]
    assert main(argv) == 1
    assert len(json.loads(path.read_text())["divergences"]) == 1
    assert main(["check", "--max-divergences", "0"]) == 2


def test_replay_leads_with_the_difference_when_the_outcomes_agree(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([
        '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 2}',
        '{"op": "put", "args": [0, {"nbytes": 1, "tag": 0}], "kwargs": {}, "result": true}',
        '{"op": "put", "args": [1, {"nbytes": 1, "tag": 0}], "kwargs": {}, "result": true}',
        '{"op": "get", "args": [0], "kwargs": {}, "result": {"nbytes": 1, "tag": 0}}',
    ]) + "\n")
    assert main(["replay", str(path), "--impl", "model_tests.broken_caches:GetDoesNotPromote"]) == 1
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("divergence at step 3"))
    assert lines[start + 1] == "  difference: cache.get(0): snapshot() differs from the spec's"
    assert "  outcome:  the same (spec returned b'\\x00'; implementation returned b'\\x00'); the state differs" in lines
    assert not any("why:" in line for line in lines)
    # every difference and why: the spec's recency order has 0 newest (the get), the cache's kept it oldest
    assert ("    snapshot(): spec ((1, 'READY', 0, 1, True), (0, 'READY', 0, 1, True)); this implementation "
            "((0, 'READY', 0, 1, True), (1, 'READY', 0, 1, True))") in lines
