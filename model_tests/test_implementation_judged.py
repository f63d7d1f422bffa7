"""The implementation judged by the invariants too (issue 35): at a divergence, the kind's
invariants are evaluated on the implementation's own state, and the output names each one broken
with its witness before how the implementation differs from the spec, in the terminal and the JSON
report; divergences that leave the implementation breaking an invariant are reported first; a view
answered in another shape than the contract's is one usage problem, not divergences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cacheproof.cli import main
from cacheproof.contract.calls import from_json, invoke
from cacheproof.contract.explaining.broken import breaking_first, ordered, report_breaking_first
from cacheproof.contract.explaining.shapes import shape_problem
from cacheproof.contract.explaining.names import Names
from cacheproof.contract.explaining.steps import DivergingCall, Explanation, explain
from cacheproof.contract.steps import StepDifference, StepOutcome, view_of
from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS, BlockStep
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.cache.invariants import INVARIANTS, Step
from cacheproof.spec.cache.kind import CACHE_KIND
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import EntryState, EntryView
from cacheproof.spec.kind import broken_by
from model_tests.broken_caches import EvictsPinnedEntries, ReleaseOfIdleIsNoop

OWNER_BLIND = "model_tests.block_pools:OwnerBlindFreePool"


def test_the_witness_of_b7_names_the_block_its_ref_and_who_holds_it():
    # the state: request 1 freed block 1, which request 2 holds; ref 0, block 1 queued
    before = ((2,), ((0, None), (1, None), (0, None)), ((2, (1,)),))
    after = ((1, 2), ((0, None), (0, None), (0, None)), ((2, (1,)),))
    step = BlockStep("free", 3, before, after, False, (1, (1,)), None)
    assert [(found.name, found.witness) for found in broken_by(BLOCK_INVARIANTS, step)] == [
        ("B7", "block 1 has ref 0 while request 2 holds it")]


def test_the_witnesses_of_the_other_block_invariants_name_their_values():
    fresh = ((1, 2), ((0, None), (0, None), (0, None)), ())
    queued_twice = ((1, 1, 2), ((0, None), (0, None), (0, None)), ())
    negative = ((1, 2), ((0, None), (-1, None), (0, None)), ())
    raised_and_changed = BlockStep("allocate", 3, fresh, ((2,), ((0, None), (1, None), (0, None)), ((1, (1,)),)), True)

    def witnesses(step: BlockStep) -> dict[str, str]:
        return {found.name: found.witness for found in broken_by(BLOCK_INVARIANTS, step)}

    twice = witnesses(BlockStep(None, 3, queued_twice, queued_twice, False))
    assert twice == {"B1": "the free queue holds 3 blocks while 2 non-null blocks have ref count 0",
                     "B2": "block 1 is in the free queue twice"}
    below_zero = witnesses(BlockStep(None, 3, negative, negative, False))
    assert below_zero["B3"] == "block 1 has ref -1"
    assert below_zero["B7"] == "block 1 has ref -1 while no request holds it"
    found = witnesses(raised_and_changed)
    assert found["B8"] == "allocate raised and changed the free queue and the ref counts or hashes and the holdings"


def test_the_witnesses_of_the_cache_invariants_name_the_key():
    reserved = EntryView("a", EntryState.RESERVED, 0, 4, True)
    transient = EntryView("b", EntryState.READY, 0, 2, False)
    step = Step("release", 16, (), (reserved, transient), False)
    assert [(found.name, found.witness) for found in broken_by(INVARIANTS, step)] == [
        ("I3", "key 'a' is RESERVED with refcount 0"),
        ("I4", "key 'b' is READY with retain=False and refcount 0"),
    ]
    too_big = Step("reserve", 4, (), (EntryView("a", EntryState.RESERVED, 1, 6, True),), False)
    assert [(found.name, found.witness) for found in broken_by(INVARIANTS, too_big)] == [
        ("I1", "reserved 6 + in use 0 = 6 bytes, over the capacity of 4")]


def _holder(size: int, calls: list, block: int) -> int:
    """The request holding `block` after `calls` on the spec (what the implementation left holding it)."""
    spec = BlockPoolSpec(size)
    for call in calls:
        try:
            invoke(spec, call)
        except Exception:  # noqa: BLE001 - a call the spec rejects changes nothing
            pass
    (holder,) = [request for request, held in spec.snapshot()[2] if block in held]
    return holder


def test_check_names_the_invariant_the_pools_own_state_breaks_first(tmp_path: Path, capsys):
    report = tmp_path / "owner-blind.json"
    assert main(["check", "--spec", "blocks", "--impl", OWNER_BLIND, "--seed", "1", "--max-divergences", "1",
                 "--json", str(report)]) == 1
    out = capsys.readouterr().out.splitlines()
    (divergence,) = json.loads(report.read_text())["divergences"]
    calls = [from_json(call) for call in divergence["calls"]]
    last = calls[-1]
    assert last.op == "free"
    request, (block,) = last.args
    holder = _holder(divergence["size"], calls[:-1], block)
    assert holder != request  # one request freed another's block
    witness = f"block {block} has ref 0 while request {holder} holds it"
    assert divergence["broken_invariants"] == [{"name": "B7", "witness": witness}]
    assert divergence["why"][0] == f"your implementation breaks B7: {witness}"
    at = next(index for index, line in enumerate(out) if line.startswith("counterexample ("))
    assert out[at + 1] == f"  your implementation breaks B7: {witness}"
    assert out[at + 2].startswith("  kind: free: ")  # the spec-vs-implementation difference comes after


def test_replay_judges_the_pools_own_state_as_check_does(tmp_path: Path):
    trace, checked, replayed = tmp_path / "owner-blind.jsonl", tmp_path / "check.json", tmp_path / "replay.json"
    assert main(["check", "--spec", "blocks", "--impl", OWNER_BLIND, "--seed", "1", "--max-divergences", "1",
                 "--json", str(checked), "--trace-out", str(trace)]) == 1
    assert main(["replay", str(trace), "--impl", OWNER_BLIND, "--json", str(replayed)]) == 1
    (found,) = json.loads(checked.read_text())["divergences"]
    divergence = json.loads(replayed.read_text())["divergence"]
    assert divergence["against"] == "implementation"
    assert [broken["name"] for broken in divergence["broken_invariants"]] == ["B7"]
    assert divergence["broken_invariants"] == found["broken_invariants"]
    assert divergence["why"][0] == found["why"][0]


def test_divergences_breaking_an_invariant_come_first(tmp_path: Path, capsys):
    report = tmp_path / "two-bugs.json"
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:HeadFreeOwnerBlindPool", "--seed", "1",
                 "--max-divergences", "2", "--json", str(report), "--quiet"]) == 1
    breaking = [bool(divergence["broken_invariants"]) for divergence in json.loads(report.read_text())["divergences"]]
    assert True in breaking and False in breaking, breaking  # both bugs found
    assert breaking == sorted(breaking, reverse=True), breaking


@dataclass(frozen=True)
class _Report:
    counterexamples: tuple


def test_the_order_keeps_the_found_order_within_each_group():
    lines = {"a": ("outcome differs",), "b": ("your implementation breaks B7: block 1 has ref 0 while request 2 holds it",),
             "c": (), "d": ("your implementation breaks I3: key 1 is RESERVED with refcount 0",)}
    assert breaking_first(list("abcd"), lines.get) == ["b", "d", "a", "c"]
    assert report_breaking_first(_Report(tuple("abcd")), lines.get) == _Report(("b", "d", "a", "c"))
    explained = [Explanation(lines[name], ()) for name in "ab"] + [None]
    assert ordered(["a", "b", "fault"], explained) == (["b", "a", "fault"], [explained[1], explained[0], None])


def test_a_snapshot_of_another_shape_is_one_usage_problem_naming_the_shape(tmp_path: Path, capsys):
    report = tmp_path / "shape.json"
    status = main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:ListSnapshotPool", "--seed", "1",
                   "--max-divergences", "3", "--json", str(report)])
    captured = capsys.readouterr()
    assert status == 2  # as every usage error of `cacheproof check`
    (line,) = [said for said in captured.err.strip().splitlines() if not said.startswith("check: ")]  # progress aside
    assert line.startswith("cacheproof check: model_tests.block_pools:ListSnapshotPool: snapshot() answered [")
    assert "snapshot() returns a tuple (free queue, blocks, holdings)" in line
    assert "counterexample" not in captured.out and "not reached" not in captured.out
    assert not report.exists()


class IdleReleaseAndPinnedEviction(ReleaseOfIdleIsNoop, EvictsPinnedEntries):
    """Two bugs of the tensor cache: releasing an idle entry returns False (a wrong outcome, the
    state is the spec's) and eviction takes in-use entries (the cache's own step breaks I5)."""


def test_the_tensor_caches_divergences_breaking_an_invariant_come_first(tmp_path: Path, capsys):
    report = tmp_path / "two-cache-bugs.json"
    assert main(["check", "--impl", "model_tests.test_implementation_judged:IdleReleaseAndPinnedEviction", "--seed", "1",
                 "--max-divergences", "2", "--json", str(report)]) == 1
    out = capsys.readouterr().out.splitlines()
    divergences = json.loads(report.read_text())["divergences"]
    breaking = [[found["name"] for found in divergence["broken_invariants"]] for divergence in divergences]
    assert breaking[0] == ["I5"] and breaking[1] == [], breaking
    # in the terminal too: the first counterexample, and under it first the invariant its cache breaks
    at = next(index for index, line in enumerate(out) if line.startswith("counterexample ("))
    assert out[at + 1] == f"  your implementation breaks I5: {divergences[0]['broken_invariants'][0]['witness']}"
    assert out[at + 2].startswith("  kind: ")
    assert ", in use (refcount " in divergences[0]["broken_invariants"][0]["witness"]  # an in-use key evicted


@dataclass(frozen=True)
class _Difference:
    views: tuple


class _LostSnapshot:
    def snapshot(self):
        raise RuntimeError("lost")


def test_a_view_that_raised_or_is_missing_is_no_shape_problem():
    spec = ((1, 2), ((0, None), (0, None), (0, None)), ())
    answers = {view: view_of(_LostSnapshot(), view, BLOCK_KIND.view_readers) for view in ("snapshot", "tables")}
    assert answers == {"snapshot": "<snapshot() raised RuntimeError: lost>", "tables": "<no tables()>"}
    raised = _Difference((("snapshot", spec, answers["snapshot"]),))
    missing = _Difference((("tables", ((1, (1,)),), answers["tables"]),))
    assert shape_problem(BLOCK_KIND, "m:f", [raised, missing, None]) is None  # divergences, as before
    listed = _Difference((("snapshot", spec, [[1, 2], [[0, None]] * 3, []]),))
    problem = shape_problem(BLOCK_KIND, "m:f", [raised, listed])
    assert problem is not None and problem.startswith("m:f: snapshot() answered [[1, 2], ")


_PINNED = ("a", "READY", 1, 4, True)
_IDLE = ("b", "READY", 0, 4, True)
_ORPHANED = ("r", "RESERVED", 0, 4, True)


def _broken_names(semantics, before, after, unread=()):
    """The invariants named broken at a `put("c", ...)` whose implementation went from the snapshot
    view `before` to `after` (the spec's after: `before`), under `semantics`."""
    call = from_json({"op": "put", "args": ["c", 4]})
    expected = StepOutcome(result=True)
    difference = StepDifference(call, expected, StepOutcome(result=True), (("snapshot", before, after),), unread=unread)
    step = DivergingCall(8, difference, {"snapshot": before}, {"snapshot": before}, None, semantics)
    return [line.split(":")[0] for line in explain(CACHE_KIND, step, Names()).broken]


def test_the_tensor_caches_step_is_judged_whole_under_the_contract_and_its_state_alone_otherwise():
    evicts_pinned = ((_PINNED, _IDLE), (_IDLE, ("c", "READY", 0, 4, True)))
    assert _broken_names(CONTRACT, *evicts_pinned) == ["your implementation breaks I5"]
    assert _broken_names(Semantics(snapshot_order="idle"), *evicts_pinned) == []  # I5 is the contract's
    orphan = ((_IDLE,), (_IDLE, _ORPHANED))
    assert _broken_names(CONTRACT, *orphan) == ["your implementation breaks I3"]
    assert _broken_names(Semantics(snapshot_order="idle"), *orphan) == ["your implementation breaks I3"]
    # a retain flag the semantics do not compare (None) is no transient entry: I4 holds
    kept = ((), (("b", "READY", 0, 4, None),))
    assert _broken_names(Semantics(transient_entries=False), *kept) == []
    assert _broken_names(CONTRACT, (), (("b", "READY", 0, 4, False),)) == ["your implementation breaks I4"]


def test_an_implementation_without_the_judged_view_is_not_judged():
    evicts_pinned = ((_PINNED, _IDLE), (_IDLE, ("c", "READY", 0, 4, True)))
    assert _broken_names(CONTRACT, *evicts_pinned, unread=("snapshot",)) == []  # its entries are unknown
