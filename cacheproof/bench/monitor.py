"""`cacheproof bench monitor`: calls per second on TensorLRUCache, bare and under `monitor`, in one run.

The workload is a fixed, seeded sequence of lifecycle calls (acquire, commit, get, release, put,
pop, evict) over a pool of keys, planned on the spec so that almost every call succeeds; values
are tensors made before timing. Each configuration runs the same sequence on a fresh cache; the
best of `--repeats` runs counts. The ratio is bare calls/s over monitored calls/s; "spec alone" (the
spec running the workload by itself) shows the floor, since the monitor runs the spec too.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cacheproof.cmdline.flag_types import add_seed_flag, positive_integer, torch_device
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.trace.monitor import monitor
from cacheproof.cmdline.progress import summary_table
from cacheproof.spec import CacheError, EntryState
from cacheproof.spec.kinds import new_spec
from cacheproof.spec.kind import Model

_SIZES = (64, 256, 1024)


@dataclass(frozen=True)
class Workload:
    capacity_bytes: int
    calls: list[tuple[str, tuple]]
    mean_entries: float


@dataclass(frozen=True)
class Measurement:
    name: str
    seconds: float
    calls: int

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0


def plan_workload(calls: int, keys: int, seed: int, make_value: Callable[[int, int], Any]) -> Workload:
    """A call sequence that keeps about `keys` / 2 entries resident, planned on the spec."""
    rng = random.Random(seed)
    capacity = keys * sum(_SIZES) // len(_SIZES) // 2
    spec = new_spec(capacity)
    values = {(n, tag): make_value(n, tag) for n in _SIZES for tag in range(4)}
    sizes = {key: rng.choice(_SIZES) for key in range(keys)}
    planned: list[tuple[str, tuple]] = []
    resident = 0
    while len(planned) < calls:
        key = rng.randrange(keys)
        nbytes = sizes[key]
        value = values[nbytes, rng.randrange(4)]
        call = _next_call(spec, key, nbytes, value, rng)
        try:
            getattr(spec, call[0])(*call[1])
        except CacheError:
            continue
        planned.append(call)
        resident += len(spec)
    return Workload(capacity, planned, resident / calls)


def _next_call(spec: Model, key: int, nbytes: int, value: Any, rng: random.Random) -> tuple[str, tuple]:
    entry = next((e for e in spec.snapshot() if e.key == key), None)
    roll = rng.random()
    if entry is None:
        return ("acquire", (key, nbytes)) if roll < 0.6 else ("put", (key, value))
    if entry.state is EntryState.RESERVED:
        return ("commit", (key, value))
    if entry.refcount > 0:
        return ("get", (key,)) if roll < 0.4 else ("release", (key,))
    if roll < 0.4:
        return ("get", (key,))
    if roll < 0.8:
        return ("acquire", (key, nbytes))
    if roll < 0.95:
        return ("pop", (key,))
    return ("evict", (nbytes,))


def time_calls(name: str, cache: Any, calls: list[tuple[str, tuple]]) -> Measurement:
    """Make every call on `cache` (BLOCKED and contract errors are part of the workload)."""
    started = time.perf_counter()
    for op, args in calls:
        try:
            getattr(cache, op)(*args)
        except CacheError:
            pass
    return Measurement(name, time.perf_counter() - started, len(calls))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", metavar="N", type=positive_integer, default=20000, help="calls in the workload")
    parser.add_argument("--keys", metavar="N", type=positive_integer, default=64, help="size of the key pool (about half stay resident)")
    parser.add_argument("--repeats", metavar="N", type=positive_integer, default=3, help="runs per configuration; the best counts")
    parser.add_argument("--state-every", metavar="N", type=positive_integer, default=None,
                        help="also time the monitor comparing stats/snapshot every N calls")
    parser.add_argument("--device", metavar="DEVICE", type=torch_device, default="cpu", help="TensorLRUCache device (default cpu)")
    add_seed_flag(parser)
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the results as JSON to this path")
    parser.add_argument("--quiet", action="store_true", help="print only the ratio line")


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench monitor", {"--json": args.json}):
        return 2
    try:
        from cacheproof.impl import TensorLRUCache
    except ImportError as error:
        print(f"cacheproof bench monitor: cannot import TensorLRUCache: {error}", file=sys.stderr)
        return 2

    def fresh() -> Any:
        return TensorLRUCache(workload.capacity_bytes, device=args.device)

    workload = plan_workload(args.calls, args.keys, args.seed, TensorLRUCache(1, device=args.device).make_value)
    configurations: list[tuple[str, Callable[[], Any]]] = [
        ("bare", fresh),
        ("spec alone", lambda: new_spec(workload.capacity_bytes)),
        ("monitor", lambda: monitor(fresh())),
    ]
    if args.state_every is not None:
        configurations.append(
            (f"monitor state_every={args.state_every}", lambda: monitor(fresh(), state_every=args.state_every))
        )
    best = {
        name: min((time_calls(name, make(), workload.calls) for _ in range(args.repeats)), key=lambda m: m.seconds)
        for name, make in configurations
    }
    bare = best["bare"].calls_per_second
    ratios = {name: bare / m.calls_per_second for name, m in best.items() if name != "bare"}
    if not args.quiet:
        rows: dict[str, Any] = {
            "device": args.device,
            "calls": args.calls,
            "mean entries": f"{workload.mean_entries:.1f}",
        }
        for name, measurement in best.items():
            rows[f"{name} calls/s"] = f"{measurement.calls_per_second:,.0f}"
        for name, ratio in ratios.items():
            rows[f"{name} slowdown"] = f"{ratio:.2f}x"
        summary_table("cacheproof bench monitor (TensorLRUCache)", rows)
    print("; ".join(f"{name}: {ratio:.2f}x the time per call of the bare cache" for name, ratio in ratios.items()))
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "monitor", "figures": {
            "device": args.device,
            "calls": args.calls,
            "mean_entries": round(workload.mean_entries, 2),
            "calls_per_second": {name: round(m.calls_per_second, 1) for name, m in best.items()},
            "slowdown": {name: round(ratio, 3) for name, ratio in ratios.items()},
        }})
    return 0
