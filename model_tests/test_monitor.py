"""The runtime monitor: silent on conforming caches, DivergenceError with the trace at the first bad
call on broken ones, and a log that `cacheproof replay` accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cacheproof.cli import main
from cacheproof.impl import TensorLRUCache
from cacheproof.trace.monitor import DivergenceError, monitor
from cacheproof.spec import Acquired, CacheSpec, UnknownKeyError, WrongStateError
from cacheproof.trace.format import SOME_VALUE, DivergentOutcome, read_trace
from model_tests.broken_caches import GetDoesNotPromote, ReleaseOfIdleIsNoop


def test_outcome_divergence_raises_at_the_bad_call_with_the_trace():
    cache = monitor(ReleaseOfIdleIsNoop(8))
    assert cache.put("a", b"xy") is True
    with pytest.raises(DivergenceError) as raised:
        cache.release("a")  # idle entry: the spec raises WrongStateError, this cache returns False
    error = raised.value
    assert "the spec raised WrongStateError, the implementation returned False" in error.message
    # the bad call is recorded with the spec's outcome, and the cache's own as `observed`
    assert [(t.call.op, t.result, t.error) for t in error.trace.calls] == [("put", True, None), ("release", None, "WrongStateError")]
    why = "cache.release('a'): the spec raised WrongStateError, the implementation returned False"
    assert error.message.startswith(why + " (call 2 of the trace)")
    assert error.trace.calls[1].observed == DivergentOutcome(False, None, why)
    assert error.trace.calls[0].call.args == ("a", (2, 0, 1))  # the value recorded by size, bytes: 1 byte per element


def test_state_divergence_raises_at_the_bad_call_when_checked_every_call():
    cache = monitor(GetDoesNotPromote(8), state_every=1)
    cache.put(0, b"a")
    cache.put(1, b"b")
    with pytest.raises(DivergenceError, match=r"cache.get\(0\): snapshot\(\) differs from the spec's \(call 3 of the "
                       r"trace\)\n  snapshot\(\): spec \(\(1, 'READY', .*\(0, 'READY', .*\)\); this implementation "
                       r"\(\(0, 'READY', .*\(1, 'READY', .*\)\)") as raised:
        cache.get(0)
    assert len(raised.value.trace.calls) == 3


def test_default_state_check_finds_it_within_the_period():
    cache = monitor(GetDoesNotPromote(8))
    cache.put(0, b"a")
    cache.put(1, b"b")
    cache.get(0)  # diverges in recency only; the full check is due after 16 calls
    with pytest.raises(DivergenceError, match="replay the trace with --impl"):
        for _ in range(16):
            assert 0 in cache


def test_the_default_period_grows_with_the_entries():
    # ten entries: the state is compared every max(16, 2 x 10) = 20 calls, the first time at call 20
    cache = monitor(GetDoesNotPromote(16))
    for key in range(10):
        cache.put(key, b"a")
    cache.get(0)  # call 11 diverges in recency only
    for call in range(12, 20):
        assert 1 in cache
    with pytest.raises(DivergenceError, match=r"snapshot\(\) differs from the spec's \(call 20 of the trace\); the "
                       r"views last matched 20 calls earlier"):
        assert 1 in cache


def test_conforming_cache_passes_silently_and_errors_reach_the_caller():
    cache = monitor(TensorLRUCache(64, device="cpu"), state_every=1)
    value = torch.arange(4, dtype=torch.int32)
    assert cache.acquire("k", 16) is Acquired.NEW_RESERVATION
    assert cache.commit("k", value) == []
    assert torch.equal(cache.get("k"), value)
    assert cache.release("k") is False
    assert cache.put("b", b"12345678") is True
    assert bytes(cache.get("b").numpy()) == b"12345678"  # stored as a uint8 tensor: same bytes
    with pytest.raises(UnknownKeyError):
        cache.pop("missing")
    with pytest.raises(WrongStateError):
        cache.release("k")
    assert cache.evict(64) == ["k", "b"]
    assert len(cache) == 0 and "k" not in cache
    assert cache.stats().ready_bytes == 0  # non-operations go straight to the cache


def test_trace_restarts_when_the_cache_is_empty():
    cache = monitor(CacheSpec(8))
    cache.put(0, b"a")
    cache.pop(0)
    cache.put(1, b"b")
    assert [t.call.op for t in cache.trace.calls] == ["put"]
    assert cache.trace.calls[0].call.args[0] == 1


def test_logged_trace_replays(tmp_path, capsys):
    path = tmp_path / "log.jsonl"
    with monitor(TensorLRUCache(32, device="cpu"), trace_path=path) as cache:
        cache.acquire(1, 8, retain=False)
        cache.commit(1, torch.zeros(2, dtype=torch.float32))
        cache.put(2, torch.ones(8, dtype=torch.uint8))
        cache.get(2)
        cache.release(1)
        with pytest.raises(UnknownKeyError):
            cache.get(1)
    trace = read_trace(path)
    assert trace.size == 32 and len(trace.calls) == 6
    assert trace.calls[3].result is SOME_VALUE and trace.calls[5].error == "UnknownKeyError"
    assert main(["replay", str(path), "--quiet"]) == 0
    assert main(["replay", str(path), "--impl", "cacheproof.spec:CacheSpec", "--quiet"]) == 0


def test_monitor_refuses_a_non_empty_cache_or_bad_period():
    cache = CacheSpec(8)
    cache.put(0, b"a")
    with pytest.raises(ValueError, match=r"the target's len\(\) is 1, a fresh cache spec's 0; monitor it from fresh"):
        monitor(cache)
    with pytest.raises(ValueError, match="state_every"):
        monitor(CacheSpec(8), state_every=0)


_DIES_AFTER_DIVERGING = """
import os, sys
from cacheproof.trace.monitor import DivergenceError, monitor
from model_tests.broken_caches import {cache}
cache = monitor({cache}(8), trace_path=sys.argv[1], state_every=1)
{calls}
try:
    {last}
except DivergenceError:
    os._exit(0)  # no close(), no interpreter shutdown: only what reached the file counts
os._exit(3)
"""


@pytest.mark.parametrize(
    "cache, calls, last, line",
    [
        ("ReleaseOfIdleIsNoop", 'cache.put("a", b"xy")', 'cache.release("a")', "cache.release('a')"),
        ("GetDoesNotPromote", "cache.put(0, b'a'); cache.put(1, b'b')", "cache.get(0)", "cache.get(0)"),
    ],
)
def test_logged_trace_holds_the_diverging_call_when_the_process_dies_right_after(tmp_path, capsys, cache, calls, last, line):
    path = tmp_path / "live.trace"
    script = _DIES_AFTER_DIVERGING.format(cache=cache, calls=calls, last=last)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", script, str(path)], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    trace = read_trace(path)
    assert trace.calls[-1].observed is not None and trace.calls[-1].observed.why
    capsys.readouterr()
    assert main(["replay", str(path), "--impl", f"model_tests.broken_caches:{cache}"]) == 1
    out = capsys.readouterr().out
    assert f"divergence at step {len(trace.calls)} of {len(trace.calls)}" in out and line in out
    assert main(["replay", str(path)]) == 1  # the spec alone: the recorded divergence is reported
    assert "recorded by the monitor" in capsys.readouterr().out


def test_monitor_is_safe_from_several_threads_and_its_logged_trace_replays(tmp_path, capsys):
    from concurrent.futures import ThreadPoolExecutor
    import random

    path = tmp_path / "threads.jsonl"
    cache = monitor(TensorLRUCache(512, device="cpu"), trace_path=path, state_every=1)

    def worker(seed: int) -> int:
        rng = random.Random(seed)
        calls = 0
        for _ in range(300):
            key = rng.randrange(6)
            try:
                if rng.random() < 0.4:
                    if cache.acquire(key, 64) is Acquired.NEW_RESERVATION:
                        cache.commit(key, cache.make_value(64, key))
                    cache.release(key)
                elif rng.random() < 0.5:
                    cache.get(key)
                else:
                    cache.put(key, cache.make_value(64, seed))
            except (UnknownKeyError, WrongStateError):
                pass
            calls += 1
        return calls

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sum(pool.map(worker, range(4))) == 4 * 300
    cache.check_state()
    cache.close()
    assert main(["replay", str(path), "--impl", "model_tests.test_monitor:cpu_cache", "--quiet"]) == 0, capsys.readouterr().out


def cpu_cache(capacity_bytes: int) -> TensorLRUCache:
    return TensorLRUCache(capacity_bytes, device="cpu")


def test_the_error_gives_the_replay_command_of_its_log_and_that_command_finds_the_divergence(tmp_path, capsys):
    import re
    import shlex

    path = tmp_path / "live.trace"
    cache = monitor(ReleaseOfIdleIsNoop(8), trace_path=path)
    cache.put("a", b"xy")
    with pytest.raises(DivergenceError) as raised:
        cache.release("a")
    cache.close()
    command = re.search(r"`(cacheproof replay [^`]+)`", str(raised.value)).group(1)
    assert command == f"cacheproof replay {path} --impl model_tests.broken_caches:ReleaseOfIdleIsNoop"
    assert main(shlex.split(command)[1:]) == 1
    assert "divergence at step 2 of 2" in capsys.readouterr().out
    unlogged = monitor(ReleaseOfIdleIsNoop(8))
    unlogged.put("a", b"xy")
    with pytest.raises(DivergenceError, match=r"write_trace\(path, error.trace\), then `cacheproof replay path "
                       r"--impl model_tests.broken_caches:ReleaseOfIdleIsNoop`"):
        unlogged.release("a")
