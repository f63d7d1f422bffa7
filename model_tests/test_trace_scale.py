"""Traces at scale: `spec_trace` and `replay` do O(1) work per call (counted, not timed), the call
that broke the state is still found exactly, sizes are checked before any value is built, and
malformed lines are usage errors naming the line."""

from __future__ import annotations

import json
import sys
import tracemalloc

import pytest

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.cli import main
from cacheproof.impl import TensorLRUCache
from cacheproof.spec import CacheSpec
from cacheproof.trace.format import parse_trace, spec_trace, trace_text, write_trace
from cacheproof.trace.replay import SNIPPET_CALLS, replay_beside, replay_against_spec
from model_tests.broken_caches import GetDoesNotPromote


def python_lines(function) -> int:
    """How many lines of Python `function()` executes: a count of work that does not depend on load."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        function()
    finally:
        sys.settrace(None)
    return count


def distinct_puts(n: int) -> list[Call]:
    """n puts of distinct keys into a cache that holds them all: the live entries grow to n."""
    return [Call("put", (key, ValueRecipe(4, key))) for key in range(n)]


def work_ratio(run, small: int, large: int) -> float:
    """Work per call at `large` calls over work per call at `small`: about 1 when linear."""
    return (python_lines(lambda: run(large)) / large) / (python_lines(lambda: run(small)) / small)


def test_spec_trace_does_constant_work_per_call():
    def run(n):
        calls = distinct_puts(n) + [Call("get", (key,)) for key in range(n)]
        spec_trace(4 * n, calls)

    assert work_ratio(run, 200, 1600) < 1.5  # a search of every value made so far: about 8x


def test_replay_with_impl_does_constant_work_per_call():
    traces = {n: spec_trace(4 * n, distinct_puts(n)) for n in (150, 1200)}

    def run(n):
        assert replay_beside(traces[n], lambda capacity: TensorLRUCache(capacity, device="cpu")) is None

    assert work_ratio(run, 150, 1200) < 1.5  # a snapshot compared after every call: about 8x


def test_replay_against_the_spec_does_constant_work_per_call():
    traces = {n: spec_trace(4 * n, distinct_puts(n) + [Call("get", (key,)) for key in range(n)]) for n in (200, 1600)}

    def run(n):
        assert replay_against_spec(traces[n]) is None

    assert work_ratio(run, 200, 1600) < 1.5


def test_recorded_get_values_are_their_recipes():
    trace = spec_trace(8, [Call("put", (0, ValueRecipe(1, 5))), Call("put", (1, ValueRecipe(1, 261))),
                           Call("get", (1,)), Call("get", (0,))])
    # b"\x05" is one object in CPython: only the key tells which recipe a value came from
    assert [traced.result for traced in trace.calls[2:]] == [ValueRecipe(1, 261), ValueRecipe(1, 5)]


def test_a_state_divergence_between_full_checks_is_traced_to_its_call():
    # GetDoesNotPromote breaks only the recency order: nothing but a snapshot shows it, and the
    # full snapshot comparison comes long after the get
    calls = distinct_puts(300) + [Call("get", (0,))] + distinct_puts(400)[300:]
    divergence = replay_beside(spec_trace(4 * 400, calls), GetDoesNotPromote)
    assert divergence is not None
    assert (divergence.step, divergence.call) == (301, Call("get", (0,)))
    (snapshots,) = divergence.state_diff["views"]  # the get's differential step with every view: only the order differs
    assert snapshots["view"] == "snapshot"
    assert snapshots["spec"][-1][0] == 0 and snapshots["implementation"][0][0] == 0
    assert divergence.snippet is not None and divergence.explanation


def test_a_divergence_after_the_snippets_calls_is_explained_without_a_snippet():
    calls = distinct_puts(SNIPPET_CALLS + 100) + [Call("get", (0,))]
    divergence = replay_beside(spec_trace(4 * len(calls), calls), GetDoesNotPromote)
    assert divergence.step == len(calls) and divergence.snippet is None and divergence.explanation


class SnapshotCountingCache(TensorLRUCache):
    """TensorLRUCache that counts the calls of its snapshot(), the whole state's O(entries) view."""

    snapshots = 0

    def snapshot(self):
        SnapshotCountingCache.snapshots += 1
        return super().snapshot()


def test_replay_with_impl_compares_the_whole_state_periodically_not_after_every_call():
    # 1000 puts, the entries growing to 1000: compared after 16 calls, then every 2 x entries calls
    # (16, 48, 144, 432) and after the last (1000), one snapshot() each; after every call it would be 1000
    trace = spec_trace(4 * 1000, distinct_puts(1000))
    SnapshotCountingCache.snapshots = 0
    assert replay_beside(trace, lambda capacity: SnapshotCountingCache(capacity, device="cpu")) is None
    assert SnapshotCountingCache.snapshots == 5


def test_an_outcome_divergence_after_an_unseen_state_divergence_reports_the_earlier_call():
    # after the missed promotion, eviction removes key 0 in the broken cache (key 1 in the spec):
    # the first outcome difference is at the put, but the state parted at the get
    calls = [Call("put", (key, ValueRecipe(4, key))) for key in range(8)] + [Call("get", (0,)), Call("put", (8, ValueRecipe(4, 8)))]
    divergence = replay_beside(spec_trace(32, calls), GetDoesNotPromote)
    assert (divergence.step, divergence.call.op) == (9, "get")


def test_a_conforming_cache_replays_a_long_trace_cleanly(tmp_path):
    calls = distinct_puts(500) + [Call("get", (key,)) for key in range(0, 500, 7)] + [Call("evict", (1000,))]
    path = tmp_path / "t.jsonl"
    write_trace(path, spec_trace(4 * 500, calls))
    assert main(["replay", str(path), "--impl", "cacheproof.impl:TensorLRUCache", "--quiet"]) == 0


HEADER = '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 8}'


class SizeRecordingCache(TensorLRUCache):
    """TensorLRUCache that notes every size make_value is asked for."""

    asked: list[int] = []

    def make_value(self, nbytes, tag):
        SizeRecordingCache.asked.append(nbytes)
        return super().make_value(nbytes, tag)


@pytest.mark.parametrize("nbytes", [3_000_000_000, 10**11])
def test_a_value_larger_than_the_capacity_is_never_built(tmp_path, nbytes):
    path = tmp_path / "huge.jsonl"
    path.write_text("\n".join([
        HEADER,
        json.dumps({"op": "put", "args": [0, {"nbytes": nbytes, "tag": 0}], "kwargs": {}, "error": "TooLargeError"}),
        json.dumps({"op": "acquire", "args": [1, 4], "kwargs": {}, "result": "NEW_RESERVATION"}),
        json.dumps({"op": "commit", "args": [1, {"nbytes": nbytes, "tag": 0}], "kwargs": {}, "error": "ConflictError"}),
        json.dumps({"op": "commit", "args": [2, {"nbytes": nbytes, "tag": 0}], "kwargs": {}, "error": "UnknownKeyError"}),
        json.dumps({"op": "put", "args": [3, {"nbytes": 8, "tag": 0}], "kwargs": {}, "result": True}),  # put ignores reservations
    ]) + "\n")
    SizeRecordingCache.asked = []
    tracemalloc.start()
    try:
        assert main(["replay", str(path), "--quiet"]) == 0
        assert main(["replay", str(path), "--quiet", "--impl", "model_tests.test_trace_scale:SizeRecordingCache"]) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000
    assert max(SizeRecordingCache.asked) == 8  # only the put that fits the capacity was built


def test_a_recorded_result_too_large_to_be_true_is_not_built():
    trace = parse_trace("\n".join([
        HEADER,
        json.dumps({"op": "put", "args": [0, {"nbytes": 4, "tag": 0}], "kwargs": {}, "result": True}),
        json.dumps({"op": "get", "args": [0], "kwargs": {}, "result": {"nbytes": 10**11, "tag": 0}}),
    ]))
    divergence = replay_against_spec(trace)
    assert divergence is not None and divergence.step == 2


MALFORMED = [
    ('{"op": "put", "args": [0], "kwargs": {}, "result": true}', "put takes 2 positional arguments, got 1"),
    ('{"op": "get", "args": [0, 1], "kwargs": {}, "result": true}', "get takes 1 positional arguments, got 2"),
    ('{"op": "reserve", "args": [0, 4], "kwargs": {"keep": true}, "result": true}', "no keyword argument 'keep'"),
    ('{"op": "get", "args": [0], "kwargs": {"retain": true}, "result": true}', "no keyword argument 'retain'"),
    ('{"op": "put", "args": [0, {"nbytes": "x", "tag": 0}], "kwargs": {}, "result": true}', "nbytes='x'"),
    ('{"op": "put", "args": [0, {"nbytes": 2.5, "tag": 0}], "kwargs": {}, "result": true}', "nbytes=2.5"),
    ('{"op": "put", "args": [0, {"nbytes": true, "tag": 0}], "kwargs": {}, "result": true}', "nbytes=True"),
    ('{"op": "put", "args": [0, {"nbytes": 4, "tag": -1.5}], "kwargs": {}, "result": true}', "tag=-1.5"),
    ('{"op": "get", "args": [0], "kwargs": {}, "result": {"nbytes": -1, "tag": 0}}', "nbytes=-1"),
    ('{"op": "get", "args": [' + "[" * 100_000 + "]" * 100_000 + '], "kwargs": {}, "result": true}', "nested too deeply"),
    ('{"op": "get", "args": [{"tuple": 3}], "kwargs": {}, "result": true}', "malformed argument"),
    ('{"op": "evict", "args": [' + "9" * 5000 + '], "kwargs": {}, "result": []}', "not JSON"),
]


@pytest.mark.parametrize("line, problem", MALFORMED)
def test_a_malformed_call_is_a_usage_error_naming_the_line(tmp_path, capsys, line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(HEADER + "\n" + '{"op": "clear", "args": [], "kwargs": {}, "result": null}\n' + line + "\n")
    assert main(["replay", str(path)]) == 2
    error = capsys.readouterr().err
    assert "line 3" in error and problem in error


@pytest.mark.parametrize("header", [
    '{"cacheproof_trace": true, "version": "0.1.0", "capacity_bytes": 8}',
    '{"cacheproof_trace": 1.0, "version": "0.1.0", "capacity_bytes": 8}',
    "[" * 100_000,
])
def test_a_malformed_header_is_a_usage_error(tmp_path, capsys, header):
    path = tmp_path / "bad.jsonl"
    path.write_text(header + "\n")
    assert main(["replay", str(path)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_every_trace_written_still_reads_back():
    calls = distinct_puts(3) + [Call("acquire", (9, 4), {"retain": False}), Call("clear"), Call("contains", (1,))]
    trace = spec_trace(16, calls)
    assert parse_trace(trace_text(trace)) == trace
    assert replay_against_spec(trace) is None
    assert replay_beside(trace, CacheSpec) is None
