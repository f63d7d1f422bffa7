"""`cacheproof bench trace`: cost per call of writing and replaying traces, at growing trace lengths.

For each length (default 1e3, 1e4, 1e5, 1e6 calls) one seeded engine-like workload (`plan_calls`)
is planned on the spec over a key pool that grows with the length (calls / 8 keys, about a quarter
resident), so the live entries grow too: a cost per call that stays flat down the table is linear
in both. The
workload runs once under `monitor(TensorLRUCache)` with a trace file, which is the trace measured:
a monitor trace as a production run writes it. Columns, in microseconds per call: `spec_trace` (the
checker's writer, values as recipes), `replay` (read the file and check it against the spec) and
`replay --impl` (read it and run TensorLRUCache beside the spec). The last row also gives the
total seconds of `replay --impl` of the longest trace, wall clock and CPU time of the process (on
a shared machine the wall clock also counts the time other processes hold the cores).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.cmdline.flag_types import add_seed_flag, positive_integer, torch_device
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.contract.record import spec_trace
from cacheproof.cmdline.progress import summary_table
from cacheproof.spec import Acquired, CacheError
from cacheproof.trace.format import read_trace
from cacheproof.trace.monitor import monitor
from cacheproof.trace.replay import replay_beside, replay_against_spec
from cacheproof.spec.kinds import new_spec

_SIZES = (64, 256, 1024)
_KEYS_PER_CALL = 1 / 8
IN_FLIGHT = 32
"""Requests in flight at most (entries reserved or in use), as an engine's batch bounds them."""
DEFAULT_LENGTHS = (1_000, 10_000, 100_000, 1_000_000)


@dataclass(frozen=True)
class Row:
    calls: int
    mean_entries: float
    spec_trace_seconds: float
    replay_seconds: float
    replay_impl_seconds: float
    replay_impl_cpu_seconds: float  # CPU time of this process: what the machine's load does not inflate

    def per_call_us(self, seconds: float) -> float:
        return seconds / self.calls * 1e6


def plan_calls(calls: int, seed: int) -> tuple[int, list[Call], float]:
    """(capacity, calls, mean live entries): an engine-like workload planned on the spec.

    Up to `IN_FLIGHT` requests are in flight at a time, each an acquire, then a commit (on a miss)
    or gets, then a release; between them, puts, gets, pops and evictions of idle entries. Keys
    are drawn from a pool of calls / 8 keys; the capacity holds about a quarter of them, so
    commits and puts evict. Each key's state is tracked from the spec's outcomes; an idle entry
    may have been evicted, so its presence is asked of the spec (`in`, O(1)).
    """
    rng = random.Random(seed)
    keys = max(64, int(calls * _KEYS_PER_CALL))
    capacity = keys * sum(_SIZES) // len(_SIZES) // 4
    spec = new_spec(capacity)
    sizes = [rng.choice(_SIZES) for _ in range(keys)]
    state: dict[int, str] = {}  # key -> "reserved" | "pinned" | "idle"; absent: no entry
    in_flight: list[int] = []
    planned: list[Call] = []
    resident = 0
    while len(planned) < calls:
        if in_flight and (len(in_flight) >= IN_FLIGHT or rng.random() < 0.5):
            key = in_flight[rng.randrange(len(in_flight))]
        else:
            key = rng.randrange(keys)
            if state.get(key) in ("reserved", "pinned"):
                continue
            if state.get(key) == "idle" and key not in spec:
                del state[key]  # evicted
        call = _next_call(state.get(key), key, sizes[key], rng)
        args = tuple(bytes(a.nbytes) if isinstance(a, ValueRecipe) else a for a in call.args)
        try:
            result = getattr(spec, call.op)(*args, **call.kwargs)
        except CacheError:
            continue
        _track(state, call, result)
        if state.get(key) in ("reserved", "pinned") and key not in in_flight:
            in_flight.append(key)
        elif state.get(key) not in ("reserved", "pinned") and key in in_flight:
            in_flight.remove(key)
        planned.append(call)
        resident += len(spec)
    return capacity, planned, resident / calls


def _next_call(state: str | None, key: int, nbytes: int, rng: random.Random) -> Call:
    roll = rng.random()
    if state is None:
        return Call("acquire", (key, nbytes)) if roll < 0.6 else Call("put", (key, ValueRecipe(nbytes, 0)))
    if state == "reserved":
        return Call("commit", (key, ValueRecipe(nbytes, 0)))
    if state == "pinned":
        return Call("get", (key,)) if roll < 0.3 else Call("release", (key,))
    if roll < 0.4:
        return Call("get", (key,))
    if roll < 0.8:
        return Call("acquire", (key, nbytes))
    if roll < 0.95:
        return Call("pop", (key,))
    return Call("evict", (nbytes,))


def _track(state: dict[int, str], call: Call, result: Any) -> None:
    """The planner's view of each key after a call that succeeded."""
    key = call.args[0] if call.args else None
    if call.op == "acquire" and result is Acquired.NEW_RESERVATION:
        state[key] = "reserved"
    elif call.op == "acquire" and result is Acquired.READY_HIT:
        state[key] = "pinned"
    elif call.op == "commit":
        state[key] = "pinned"
    elif call.op == "put" and result:
        state[key] = "idle"
    elif call.op == "release":
        state[key] = "idle"
    elif call.op == "pop":
        del state[key]
    for evicted in result if call.op in ("commit", "evict") else ():
        state.pop(evicted, None)


def write_monitor_trace(path: Path, capacity: int, calls: list[Call], device: str) -> None:
    """Run `calls` under `monitor(TensorLRUCache)` logging to `path` (values made before running)."""
    from cacheproof.impl import TensorLRUCache

    cache = TensorLRUCache(capacity, device=device)
    values = {nbytes: cache.make_value(nbytes, 0) for nbytes in _SIZES}
    with monitor(cache, trace_path=path) as monitored:
        for call in calls:
            args = tuple(values[a.nbytes] if isinstance(a, ValueRecipe) else a for a in call.args)
            getattr(monitored, call.op)(*args, **call.kwargs)


def measure(calls: int, seed: int, device: str, folder: Path) -> Row:
    """One row of the table."""
    from cacheproof.impl import TensorLRUCache

    capacity, planned, mean_entries = plan_calls(calls, seed)
    path = folder / f"monitor-{calls}.jsonl"
    write_monitor_trace(path, capacity, planned, device)
    started = time.perf_counter()
    spec_trace(capacity, planned)
    spec_trace_seconds = time.perf_counter() - started
    started = time.perf_counter()
    divergence = replay_against_spec(read_trace(path))
    replay_seconds = time.perf_counter() - started
    if divergence is not None:
        raise AssertionError(f"the monitor trace of {calls} calls diverges from the spec: {divergence.message}")
    started, cpu_started = time.perf_counter(), time.process_time()
    divergence = replay_beside(read_trace(path), lambda c: TensorLRUCache(c, device=device))
    replay_impl_seconds = time.perf_counter() - started
    replay_impl_cpu_seconds = time.process_time() - cpu_started
    if divergence is not None:
        raise AssertionError(f"the monitor trace of {calls} calls diverges with --impl: {divergence.message}")
    return Row(calls, mean_entries, spec_trace_seconds, replay_seconds, replay_impl_seconds, replay_impl_cpu_seconds)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lengths", metavar="N", type=positive_integer, nargs="+", default=list(DEFAULT_LENGTHS),
                        help="trace lengths in calls (default 1000 10000 100000 1000000)")
    parser.add_argument("--device", metavar="DEVICE", type=torch_device, default="cpu", help="TensorLRUCache device (default cpu)")
    add_seed_flag(parser)
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the results as JSON to this path")
    parser.add_argument("--quiet", action="store_true", help="print only the summary line")


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench trace", {"--json": args.json}):
        return 2
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(calls, args.seed, args.device, Path(folder)) for calls in sorted(args.lengths)]
    first, last = rows[0], rows[-1]
    if not args.quiet:
        table = {"device": args.device, "columns": "mean entries | spec_trace | replay | replay --impl (us/call)"}
        for row in rows:
            table[f"{row.calls:,} calls"] = (
                f"{row.mean_entries:9,.0f} | {row.per_call_us(row.spec_trace_seconds):6.1f} | "
                f"{row.per_call_us(row.replay_seconds):6.1f} | {row.per_call_us(row.replay_impl_seconds):6.1f}"
            )
        table[f"replay --impl of {last.calls:,} calls"] = (
            f"{last.replay_impl_seconds:.1f} s wall, {last.replay_impl_cpu_seconds:.1f} s CPU"
        )
        summary_table("cacheproof bench trace (monitor traces of TensorLRUCache)", table)
    growth = {
        name: getattr(last, attribute) / last.calls / (getattr(first, attribute) / first.calls)
        for name, attribute in (("spec_trace", "spec_trace_seconds"), ("replay", "replay_seconds"),
                                ("replay --impl", "replay_impl_seconds"))
    }
    print(f"cost per call at {last.calls:,} calls vs {first.calls:,}: "
          + "; ".join(f"{name} {ratio:.2f}x" for name, ratio in growth.items()))
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "trace", "figures": {
            "device": args.device,
            "rows": [{
                "calls": row.calls,
                "replay_impl_seconds": round(row.replay_impl_seconds, 2),
                "replay_impl_cpu_seconds": round(row.replay_impl_cpu_seconds, 2),
                "mean_entries": round(row.mean_entries, 1),
                "us_per_call": {
                    "spec_trace": round(row.per_call_us(row.spec_trace_seconds), 2),
                    "replay": round(row.per_call_us(row.replay_seconds), 2),
                    "replay_impl": round(row.per_call_us(row.replay_impl_seconds), 2),
                },
            } for row in rows],
            "growth": {name: round(ratio, 3) for name, ratio in growth.items()},
        }})
    return 0
