"""`cacheproof report`: the figures over the calls, the state diff, the inputs it reads and refuses.

The page in a real browser is model_tests/test_report_browser.py; here the parts, on calls whose
figures are worked out by hand from the contract, and on traces written by the real monitors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cacheproof.cli import main
from cacheproof.contract.calls import Call, ValueRecipe, to_json
from cacheproof.report.command import page_of
from cacheproof.report.inputs import read_input
from cacheproof.report.series import MAX_POINTS, implementation_row, replay_series
from cacheproof.report.state_diff import DIFFERS, SAME, UNKNOWN, state_diff
from cacheproof.spec import Acquired, CacheSpec
from cacheproof.spec.cache.semantics import CONTRACT
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT
from cacheproof.trace.monitor import DivergenceError, monitor
from model_tests.block_pools import DoubleFreePool
from model_tests.broken_caches import ReleaseOfIdleIsNoop


def lifecycle(cache, rounds: int, keys: int = 10, nbytes: int = 8) -> None:
    """A cache's life: each round acquires a key (committing it when new), reads it, releases it;
    ten keys of 8 bytes in a smaller capacity, so idle entries are evicted."""
    for round_ in range(rounds):
        key = round_ % keys
        acquired = cache.acquire(key, nbytes, retain=True)
        if acquired is Acquired.BLOCKED:
            continue
        if acquired is Acquired.NEW_RESERVATION:
            cache.commit(key, bytes([key]) * nbytes)
        cache.get(key)
        cache.release(key)


def monitored_divergence(path: Path, rounds: int = 12) -> int:
    """Write a monitor's trace of `lifecycle` on ReleaseOfIdleIsNoop ending in its divergence (a
    release of an idle entry: the spec raises WrongStateError, this cache returns False); the
    number of calls."""
    cache = monitor(ReleaseOfIdleIsNoop(48), trace_path=path)
    lifecycle(cache, rounds)
    with pytest.raises(DivergenceError):
        cache.release((rounds - 1) % 10)
    return len(path.read_text().splitlines()) - 1


def test_the_tensor_caches_figures_are_the_byte_counts_after_each_call():
    calls = [
        Call("reserve", ("a", 4)),
        Call("acquire", ("b", 3), {"retain": True}),
        Call("commit", ("a", ValueRecipe(4, 0))),
        Call("release", ("a",)),
        Call("commit", ("b", ValueRecipe(3, 0))),
        Call("put", ("c", ValueRecipe(5, 0))),  # 4 + 3 + 5 > 10: the idle "a" is evicted
        Call("get", ("a",)),  # the contract: an absent key raises UnknownKeyError, nothing changes
    ]
    series = replay_series("cache", 10, CONTRACT, calls, marked=6)
    assert [figure.name for figure in series.figures] == ["capacity", "in use", "idle", "reserved", "ready"]
    assert series.steps == (0, 1, 2, 3, 4, 5, 6, 7)
    assert series.rows == (
        (10, 0, 0, 0, 0),
        (10, 0, 0, 4, 0),
        (10, 0, 0, 7, 0),
        (10, 4, 0, 3, 4),
        (10, 0, 4, 3, 4),
        (10, 3, 4, 0, 7),
        (10, 3, 5, 0, 8),
        (10, 3, 5, 0, 8),
    )
    assert series.outcomes == {1: "returns True", 2: "returns NEW_RESERVATION", 3: "returns []", 4: "returns False",
                               5: "returns []", 6: "returns True"}  # the calls up to the marked one
    assert series.errors[-1] == "UnknownKeyError"
    assert series.state.stats().idle_bytes == 5 and len(series.state) == 2  # the state right after call 6


def test_the_block_pools_figures_are_free_in_use_and_cached_blocks():
    calls = [
        Call("allocate", (1, 2)),
        Call("cache_blocks", (1, (1,), (7,))),
        Call("free", (1, (1, 2))),
        Call("free", (1, (1,))),  # a double free: WrongStateError, nothing changes
    ]
    series = replay_series("blocks", 4, BLOCK_CONTRACT, calls, marked=4)
    assert [figure.name for figure in series.figures] == ["usable", "in use", "free", "cached"]
    assert series.rows == ((3, 0, 3, 0), (3, 2, 1, 0), (3, 2, 1, 1), (3, 0, 3, 1), (3, 0, 3, 1))
    assert series.errors == (None, None, None, "WrongStateError")


def test_a_long_trace_keeps_at_most_max_points_rows_and_the_marked_call(tmp_path):
    path = tmp_path / "long.jsonl"
    cache = monitor(CacheSpec(48), trace_path=path)
    lifecycle(cache, 2000)
    report = read_input(path)
    calls = report.cases[0].calls
    assert len(calls) > 2 * MAX_POINTS
    marked = MAX_POINTS + 7  # not a multiple of the stride
    series = replay_series("cache", 48, CONTRACT, calls, marked)
    assert series.stride > 1 and len(series.rows) <= MAX_POINTS + 2
    assert marked in series.steps and series.steps[-1] == len(calls)
    everything = replay_series("cache", 48, CONTRACT, calls[:marked], None)
    assert series.rows[series.steps.index(marked)] == everything.rows[-1]
    page = page_of(report)
    assert f"one point per {series.stride} calls" in page and "calls 1 to" in page


def test_a_monitor_trace_marks_the_call_it_observed_and_the_caches_outcome(tmp_path):
    path = tmp_path / "monitor.jsonl"
    calls = monitored_divergence(path)
    report = read_input(path)
    (case,) = report.cases
    assert case.marked == calls and case.observed == "the monitored cache returns False"
    series = replay_series(report.kind, case.size, report.semantics, case.calls, case.marked)
    diff = state_diff(report.kind, case, series)
    outcome = diff.rows[0]
    assert outcome.field.startswith("outcome of cache.release(") and outcome.status == DIFFERS
    assert (outcome.spec, outcome.cache) == ("raises WrongStateError", "the monitored cache returns False")
    assert {row.status for row in diff.rows[1:]} == {UNKNOWN}  # a trace holds nothing of the cache's state


def test_a_check_report_without_a_state_difference_lists_the_others_as_the_specs(tmp_path):
    """The unversioned block report's one description: the outcome differs, the snapshot not."""
    path = tmp_path / "blocks.json"
    call = Call("free", (1, (1,)))
    path.write_text(json.dumps({
        "ok": False, "spec": "blocks", "impl": "model_tests.block_pools:DoubleFreePool", "profile": "contract", "seed": 0,
        "counterexamples": [{"size": 2, "calls": [to_json(call)],
                             "difference": "cache.free(1, (1,)): the spec raised WrongStateError, the implementation returned None; "
                                           "snapshot() is ((1,), ((0, None), (-1, None)), ()), the spec's ((1,), ((0, None), (0, None)), ())"}],
    }))
    report = read_input(path)
    (case,) = report.cases
    series = replay_series("blocks", 2, BLOCK_CONTRACT, case.calls, case.marked)
    rows = {row.field: row for row in state_diff("blocks", case, series).rows}
    assert rows["outcome of cache.free(1, (1,))"][1:] == ("raised WrongStateError", "returned None", DIFFERS)
    assert rows["snapshot(), block 1"][1:] == ("ref 0, no hash", "ref -1, no hash", DIFFERS)  # as check explains it
    assert "snapshot(), free queue (head first)" not in rows  # the same on both sides
    assert rows["free blocks"][1:] == ("1", "1", SAME)
    pool = DoubleFreePool(2)  # the report's claim about the implementation is true
    pool.free(1, (1,))
    assert pool.snapshot() == ((1,), ((0, None), (-1, None)), ())


def test_a_block_pool_trace_from_the_monitor_draws_free_blocks(tmp_path):
    path = tmp_path / "pool.jsonl"
    pool = monitor(DoubleFreePool(4), kind="blocks", trace_path=path)
    pool.allocate(1, 2)
    with pytest.raises(DivergenceError):
        pool.free(1, (1,))  # this pool queues the freed block at the wrong end
    report = read_input(path)
    assert report.kind == "blocks" and len(report.cases[0].calls) == 2
    page = page_of(report)
    # the monitor records the pool's own outcome at the diverging call, as it does for every kind
    assert 'data-figure="free"' in page and "the monitored cache diverges at call 2" in page
    assert report.cases[0].observed == "the monitored cache returns None"
    assert "<code>cacheproof prove --spec blocks</code> proves them" in page  # the kind's own prove command


def test_a_cache_trace_page_points_at_the_plain_prove_command(tmp_path):
    path = tmp_path / "cache.jsonl"
    cache = monitor(CacheSpec(8), capacity_bytes=8, trace_path=path)
    cache.put(1, b"ab")
    cache.close()
    page = page_of(read_input(path))
    assert "<code>cacheproof prove</code> proves them" in page


BAD_INPUTS = {
    "not JSON": ("this is not json\n", "neither a `cacheproof check --json` report nor a trace"),
    "a replay report": (json.dumps({"schema": "cacheproof/report/v1", "command": "replay", "ok": True}),
                        "cacheproof report TRACE"),
    "a threads report": (json.dumps({"ok": False, "threads": 4, "divergences": []}), "concurrent histories"),
    "an interrupted check": (json.dumps({"ok": None, "interrupted": True, "divergences": []}), "interrupted"),
    "another schema": (json.dumps({"schema": "cacheproof/report/v9", "ok": True}), "cacheproof/report/v9"),
    "an unknown operation": (json.dumps({"ok": False, "divergences": [{"size": 4, "calls": [{"op": "explode", "args": [], "kwargs": {}}]}]}),
                             "divergences[0].calls[0].op"),
    "a bad size": (json.dumps({"ok": False, "divergences": [{"size": 0, "calls": [{"op": "clear", "args": [], "kwargs": {}}]}]}),
                   "divergences[0].size"),
    "a bad recipe": (json.dumps({"ok": False, "divergences": [{"size": 4, "calls": [
        {"op": "put", "args": [1, {"nbytes": "4", "tag": 0}], "kwargs": {}}]}]}), "int nbytes"),
    "a bad trace line": ('{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 8}\n{"op": "fly", "args": [], "kwargs": {}, "result": null}\n',
                         "line 2"),
    "a bad program trace": ('{"format": "cacheproof-program-trace", "format_version": 1, "version": "0.1.0", "spec": "blocks", "num_blocks": 0, "profile": "contract"}\n',
                            "num_blocks"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_a_bad_input_is_a_usage_error_naming_the_path_and_the_problem(name, tmp_path, capsys):
    text, problem = BAD_INPUTS[name]
    source = tmp_path / "input.json"
    source.write_text(text)
    out = tmp_path / "page.html"
    assert main(["report", str(source), "-o", str(out)]) == 2
    error = capsys.readouterr().err
    assert str(source) in error and problem in error, error
    assert not out.exists()


def test_a_missing_input_and_an_unwritable_output_are_usage_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "absent.json"), "-o", str(tmp_path / "page.html")]) == 2
    assert "absent.json: cannot read it" in capsys.readouterr().err
    trace = tmp_path / "t.jsonl"
    monitored_divergence(trace)
    assert main(["report", str(trace), "-o", str(tmp_path / "no-such-folder" / "page.html")]) == 2
    assert "--out" in capsys.readouterr().err


def test_without_out_the_page_is_the_input_with_the_suffix_html(tmp_path, monkeypatch, capsys):
    """`cacheproof report r.json` writes r.html beside it (issue 35), from any folder."""
    report = tmp_path / "r.json"
    assert main(["check", "--impl", "cacheproof.spec.cache.model:CacheSpec", "--examples", "2", "--steps", "5",
                 "--seed", "1", "--json", str(report), "--quiet"]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(["report", "r.json"]) == 0
    assert "wrote r.html" in capsys.readouterr().out
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    trace = tmp_path / "cache.trace"
    monitored_divergence(trace)
    assert main(["report", str(trace), "--quiet"]) == 0
    assert (tmp_path / "cache.html").is_file()


def test_without_out_an_input_ending_in_html_is_a_usage_error_that_writes_nothing(tmp_path, capsys):
    page = tmp_path / "page.html"
    page.write_text("a page of one's own")
    assert main(["report", str(page)]) == 2
    error = capsys.readouterr().err
    assert "already ends in .html" in error and "-o OUT.html" in error
    assert page.read_text() == "a page of one's own"


def test_a_trace_without_calls_gives_a_page(tmp_path):
    trace = tmp_path / "empty.jsonl"
    trace.write_text('{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 8}\n')
    out = tmp_path / "empty.html"
    assert main(["report", str(trace), "-o", str(out), "--quiet"]) == 0
    assert "The trace holds no call." in out.read_text()


def test_a_conforming_check_report_draws_its_outcome_coverage_and_figures(tmp_path, capsys):
    report = tmp_path / "ok.json"
    assert main(["check", "--impl", "cacheproof.spec.cache.model:CacheSpec", "--examples", "2", "--steps", "5",
                 "--seed", "1", "--json", str(report), "--quiet"]) == 0
    data = json.loads(report.read_text())
    out = tmp_path / "ok.html"
    assert main(["report", str(report), "-o", str(out)]) == 0
    page = out.read_text()
    assert "conforms" in page and 'id="invariant-I1"' in page
    assert 'class="chart"' not in page  # no call sequence to draw, but what the run reached is drawn
    assert '<svg class="coverage"' in page
    for operation, outcomes in data["coverage"]["operations"].items():
        for outcome, count in outcomes.items():
            mark = (f'<rect class="reached" data-operation="{operation}" data-outcome="{outcome}"' if count
                    else f'<text class="not-reached" data-operation="{operation}" data-outcome="{outcome}"')
            assert mark in page, (operation, outcome, count)
    # only 10 steps: some outcomes are not reached, and the page says so
    assert any(count == 0 for outcomes in data["coverage"]["operations"].values() for count in outcomes.values())
    assert ">not reached</text>" in page
    run = page[page.index('<table class="figures">'):]
    for label in ("examples", "steps", "seconds"):
        assert f"<tr><th>{label}</th><td>{data[label]}</td></tr>" in run


def test_the_implementation_row_is_read_from_the_report_state_diff():
    # the tensor cache: the spec released its transient entry; the cache kept it, idle (1 byte)
    calls = [Call("reserve", (0, 1), {"retain": False}), Call("commit", (0, ValueRecipe(1, 0))), Call("release", (0,))]
    series = replay_series("cache", 4, CONTRACT, calls, marked=3)
    kept = {"only_in_spec": [], "only_in_cache": [[0, "READY", 0, 1, False]], "differing": [], "spec_order": [],
            "cache_order": []}
    # capacity, in use, idle, reserved, ready
    assert implementation_row("cache", series, kept, complete=True) == (4, 0, 1, 0, 1)
    assert implementation_row("cache", series, None, complete=False) is None  # the report does not say
    # the block pool: usable, in use, free, cached, from the implementation's snapshot
    pool = replay_series("blocks", 3, BLOCK_CONTRACT, [Call("allocate", (2, 1))], marked=1)
    views = {"views": [{"view": "snapshot", "spec": [], "implementation": [[1, 2], [[0, None], [0, None], [0, None]],
                                                                           [[2, [1]]]]}]}
    assert implementation_row("blocks", pool, views, complete=True) == (2, 0, 2, 0)
    assert implementation_row("blocks", pool, {"views": []}, complete=True) == (2, 1, 1, 0)  # agreed with the spec
