"""Program traces of the block pool kind (docs/block-traces.md): the format round-trips, a trace of
the spec's outcomes replays clean, an edited outcome is found at its line, `check --trace-out` then
`replay --impl` finds the broken pool's divergence, bad traces are usage errors naming the line
and field, and the runtime monitor stops a broken pool at its bad call and lets a correct one run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproof.check.programs.generators.block_calls import BlockCalls
from cacheproof.check.programs.draws import DataDraws
from cacheproof.cli import main
from cacheproof.contract.calls import Call, invoke
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.semantics import BlockSemantics
from cacheproof.spec.errors import CacheError, InvalidArgumentError
from cacheproof.trace.monitor import DivergenceError, monitor
from cacheproof.contract.record import DivergentOutcome, TracedCall, spec_trace, trace_text, write_trace
from cacheproof.trace.format import TraceFormatError, parse_trace, read_trace
from model_tests.block_pools import DoubleFreePool, HeadFreePool, ListBlockPool

HEADER = ('{"format": "cacheproof-program-trace", "format_version": 1, "version": "0.1.0", "spec": "blocks", '
          '"num_blocks": 4, "profile": "contract"}')
"""The header of the block pool's traces before format 2 (still read; the bad-trace table uses it)."""
HEADER_V2 = '{"cacheproof_trace": 2, "version": "0.1.0", "spec": "blocks", "num_blocks": 4, "profile": "contract"}'

# A pool of 4 blocks: block 0 is the null block, the free queue starts [1, 2, 3].
CALLS = (
    Call("allocate", (1, 2)),              # (1, 2); queue [3]
    Call("cache_blocks", (1, (1,), (7,))),  # block 1 carries hash 7
    Call("lookup", ((7,),)),               # (1,)
    Call("free", (1, (2, 1))),             # 2 (unhashed) to the head, 1 (hashed) to the tail: [2, 3, 1]
    Call("num_free", ()),                  # 3
    Call("free", (1, (1,))),               # a double free: WrongStateError
    Call("allocate", (2, 5)),              # 5 > 3 free: CapacityError
)
OUTCOMES = [((1, 2), None), (None, None), ((1,), None), (None, None), (3, None), (None, "WrongStateError"),
            (None, "CapacityError")]


def test_spec_outcomes_are_recorded_and_round_trip():
    trace = spec_trace(4, CALLS, kind="blocks")
    assert [(t.result, t.error) for t in trace.calls] == OUTCOMES
    text = trace_text(trace)
    assert text.splitlines()[0] == HEADER_V2
    assert json.loads(text.splitlines()[2]) == {"op": "cache_blocks", "args": [1, {"tuple": [1]}, {"tuple": [7]}],
                                                "kwargs": {}, "result": None}
    assert json.loads(text.splitlines()[6]) == {"op": "free", "args": [1, {"tuple": [1]}], "kwargs": {},
                                                "error": "WrongStateError"}
    assert parse_trace(text) == trace


def test_semantics_other_than_the_profiles_travel_in_the_header(tmp_path):
    skip = BlockSemantics(null_block="skip")
    trace = spec_trace(4, [Call("allocate", (1, 1)), Call("free", (1, (0, 1)))], skip, kind="blocks")
    assert [t.error for t in trace.calls] == [None, None]  # the null block is skipped, not an error
    path = tmp_path / "skip.jsonl"
    write_trace(path, trace)
    assert json.loads(path.read_text().splitlines()[0])["semantics"] == {"null_block": "skip"}
    assert read_trace(path) == trace
    assert main(["replay", str(path), "--quiet"]) == 0  # under the contract, free(1, (0, 1)) would raise


def test_a_trace_of_the_spec_replays_clean_with_and_without_a_correct_pool(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_trace(path, spec_trace(4, CALLS, kind="blocks"))
    assert main(["replay", str(path), "--quiet"]) == 0
    assert main(["replay", str(path), "--quiet", "--impl", "model_tests.block_pools:ListBlockPool"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "no divergence: 7 calls replayed against model_tests.block_pools:ListBlockPool beside the spec")


def test_an_edited_outcome_is_reported_at_its_line(tmp_path, capsys):
    lines = trace_text(spec_trace(4, CALLS, kind="blocks")).splitlines()
    assert lines[5] == '{"op": "num_free", "args": [], "kwargs": {}, "result": 3}'
    lines[5] = lines[5].replace('"result": 3', '"result": 2')
    path, report = tmp_path / "edited.jsonl", tmp_path / "report.json"
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path), "--json", str(report)]) == 1
    out = capsys.readouterr().out
    assert "divergence at step 5 of 7 (trace line 6): cache.num_free()" in out
    assert "recorded returns 2; the spec returned 3" in out
    divergence = json.loads(report.read_text())["divergence"]
    assert (divergence["step"], divergence["line"], divergence["against"]) == (5, 6, "recording")


def test_a_call_that_hangs_is_a_divergence_at_that_call_under_the_call_timeout(tmp_path, capsys):
    path, report = tmp_path / "trace.jsonl", tmp_path / "report.json"
    write_trace(path, spec_trace(4, CALLS, kind="blocks"))
    assert main(["replay", str(path), "--impl", "model_tests.faulty_pools:LookupHangs", "--call-timeout", "0.5",
                 "--json", str(report)]) == 1
    assert "divergence at step 3 of 7 (trace line 4): cache.lookup((7,))" in capsys.readouterr().out
    divergence = json.loads(report.read_text())["divergence"]
    assert divergence["message"] == "cache.lookup((7,)) did not return within 0.5 s"


class NoLookupPool(ListBlockPool):
    """A pool without `lookup`, which the trace calls."""

    lookup = None


def test_an_implementation_without_an_operation_of_the_trace_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "trace.jsonl"
    write_trace(path, spec_trace(4, CALLS, kind="blocks"))
    assert main(["replay", str(path), "--impl", "model_tests.test_block_traces:NoLookupPool"]) == 2
    assert "returned a NoLookupPool, which lacks lookup" in capsys.readouterr().err


def test_check_trace_out_then_replay_impl_reports_the_divergence_with_a_failing_snippet(tmp_path, capsys):
    path = tmp_path / "double-free.jsonl"
    impl = "model_tests.block_pools:DoubleFreePool"
    status = main(["check", "--spec", "blocks", "--impl", impl, "--examples", "40", "--max-divergences", "1",
                   "--quiet", "--trace-out", str(path)])
    assert status == 1
    trace = read_trace(path)
    last = trace.calls[-1]
    assert last.call.op == "free" and last.error == "WrongStateError"  # the double free, the spec's outcome
    capsys.readouterr()
    assert main(["replay", str(path), "--quiet"]) == 0  # the spec's outcomes: clean on the spec
    report = tmp_path / "report.json"
    assert main(["replay", str(path), "--impl", impl, "--json", str(report)]) == 1
    assert f"divergence at step {len(trace.calls)} of {len(trace.calls)}" in capsys.readouterr().out
    divergence = json.loads(report.read_text())["divergence"]
    assert divergence["against"] == "implementation"
    assert "the spec raised WrongStateError, the implementation returned None" in divergence["message"]
    with pytest.raises(AssertionError, match="expected WrongStateError"):
        exec(compile(divergence["snippet"], "snippet", "exec"), {})


@pytest.mark.parametrize("lines, line, field", [
    ([HEADER, '{"op": "allocate", "args": [1, 2'], 2, "line"),
    ([HEADER.replace('"blocks"', '"pagers"')], 1, "spec"),
    ([HEADER.replace('"blocks"', '"cache"')], 1, "spec"),
    ([HEADER.replace(', "num_blocks": 4', "")], 1, "num_blocks"),
    ([HEADER.replace('"contract"', '"lru"')], 1, "profile"),
    ([HEADER, '{"args": [1, 2], "kwargs": {}, "result": null}'], 2, "op"),
    ([HEADER, '{"op": "num_free", "kwargs": {}, "result": 3}'], 2, "args"),
    ([HEADER, '{"op": "num_free", "args": [], "kwargs": {}}'], 2, "result"),
    ([HEADER, '{"op": "allocate", "args": [1], "kwargs": {}, "result": null}'], 2, "args"),
    ([HEADER, '{"op": "evict_all", "args": [], "kwargs": {}, "result": null}'], 2, "op"),
    ([HEADER, '{"op": "num_free", "args": [], "kwargs": {}, "result": 3}', '{"op": "reset", "args": [], '
      '"kwargs": {}, "error": "Oops"}'], 3, "error"),
])
def test_bad_traces_are_usage_errors_naming_the_line_and_field(tmp_path, capsys, lines, line, field):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"cacheproof replay: {path} line {line}, field {field!r}: ")


def test_a_call_outside_the_table_is_refused_and_an_unencodable_result_is_written_as_its_repr(tmp_path):
    with pytest.raises(InvalidArgumentError, match="no operation 'evict_all'"):
        spec_trace(4, [Call("num_free", ()), Call("evict_all", ())], kind="blocks")
    trace = spec_trace(4, CALLS[:1], kind="blocks")
    odd = trace.__class__(trace.kind, trace.size, trace.calls + (TracedCall(Call("num_free", ()), object()),),
                          trace.profile, trace.semantics, trace.operations)
    path = tmp_path / "odd.jsonl"
    write_trace(path, odd)  # what JSON cannot hold is written as its repr, for every kind
    assert json.loads(path.read_text().splitlines()[2])["result"]["repr"].startswith("<object object")


# The runtime monitor -------------------------------------------------------------------------

def test_monitor_raises_at_the_double_free_and_its_log_replays(tmp_path, capsys):
    log = tmp_path / "monitored.jsonl"
    pool = monitor(DoubleFreePool(2), kind="blocks", trace_path=log)  # one usable block: the queue is [1]
    assert pool.allocate(1, 1) == (1,)
    assert pool.free(1, (1,)) is None  # the queue is [1] again, in the spec and in this pool
    with pytest.raises(DivergenceError) as raised:
        pool.free(1, (1,))  # the spec raises WrongStateError; this pool frees block 1 again
    error = raised.value
    assert error.message.startswith("cache.free(1, (1,)): the spec raised WrongStateError, the implementation "
                                    "returned None")
    assert f"cacheproof replay {log} --impl model_tests.block_pools:DoubleFreePool" in str(error)
    # after the first free the spec is in a fresh pool's state, so the trace in memory restarted there
    assert [(t.call.op, t.error) for t in error.trace.calls] == [("free", "WrongStateError")]
    first, *explained = error.message.splitlines()
    assert first.endswith("(call 1 of the trace)")
    # then every difference and why, as `cacheproof check` prints them: block 1 freed twice has ref -1
    assert "  snapshot(), block 1: spec ref 0, no hash; this implementation ref -1, no hash (concerns B1, B3, B7)" in explained
    assert "  your implementation breaks B3: block 1 has ref -1" in explained, explained
    assert any(line.startswith("  the spec's rule for free: ") and "double free" in line for line in explained)
    assert pool.free(1, (1,)) is None  # after the divergence, calls are only forwarded
    pool.close()
    assert read_trace(log).calls[-1].observed == DivergentOutcome(None, None, first.removesuffix(" (call 1 of the trace)"))
    assert main(["replay", str(log)]) == 1  # the spec alone: the recorded divergence is reported
    assert "recorded by the monitor" in capsys.readouterr().out
    assert main(["replay", str(log), "--quiet", "--impl", "model_tests.block_pools:DoubleFreePool"]) == 1
    assert "divergence at step 3 of 3 (trace line 4): cache.free(1, (1,))" in capsys.readouterr().out


def test_monitor_compares_the_views_and_names_the_writer_without_a_log():
    pool = monitor(HeadFreePool(4), kind="blocks")
    assert pool.allocate(1, 2) == (1, 2)
    pool.cache_blocks(1, (1,), (5,))
    with pytest.raises(DivergenceError, match=r"cache.free\(1, \(1,\)\): snapshot\(\) differs ") as raised:
        pool.free(1, (1,))  # same outcome, but hashed block 1 joins the head of the queue, not the tail
    # block 3 was free; hashed block 1 belongs behind it at the tail
    assert "snapshot(), free queue (head first): spec blocks 3, 1; this implementation blocks 1, 3" in str(raised.value)
    assert "cacheproof.trace.format.write_trace(path, error.trace)" in str(raised.value)
    assert len(raised.value.trace.calls) == 3


def test_monitor_with_views_every_k_finds_the_difference_later_and_says_so():
    pool = monitor(HeadFreePool(4), kind="blocks", state_every=4)
    pool.allocate(1, 2)
    pool.cache_blocks(1, (1,), (5,))
    pool.free(1, (1,))  # the third call: views not compared yet
    with pytest.raises(DivergenceError, match="the views last matched 4 calls earlier"):
        pool.num_free()


def test_check_state_and_cache_are_every_kinds():
    pool = monitor(HeadFreePool(4), kind="blocks", state_every=100)
    assert pool.cache is pool.target and bool(pool)  # a pool has no len(): the monitor is true, as the pool is
    pool.allocate(1, 2)
    pool.cache_blocks(1, (1,), (5,))
    pool.free(1, (1,))  # hashed block 1 joins the head of the queue: the snapshot differs, not compared yet
    with pytest.raises(DivergenceError, match=r"^check_state\(\) after call 3 of the trace: snapshot\(\): spec "
                       r".*; the views last matched 3 calls earlier: replay the trace with --impl"):
        pool.check_state()


@settings(max_examples=3, deadline=None, database=None, derandomize=True)
@given(st.data())
def test_monitor_lets_a_correct_pool_run_and_passes_other_attributes_through(data):
    target, model = ListBlockPool(6), BLOCK_KIND.new(6)  # the model only drives the call generator
    pool = monitor(target, kind="blocks", state_every=3)
    generator = BlockCalls()
    for _ in range(100):
        call = generator.draw_call(DataDraws(data), model, BLOCK_KIND.default_operations, True)
        for side in (pool, model):
            try:
                invoke(side, call)
            except CacheError:
                pass
    assert pool.block_size == target.block_size and pool.target is target
    assert pool.snapshot() == target.snapshot()


def test_monitor_rejects_a_used_pool_and_cache_only_arguments():
    used = ListBlockPool(4)
    used.allocate(1, 1)
    with pytest.raises(ValueError, match="from fresh"):
        monitor(used, kind="blocks")
    with pytest.raises(ValueError, match="pass size="):
        monitor(ListBlockPool(4), kind="blocks", capacity_bytes=4)
