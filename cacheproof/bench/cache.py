"""`cacheproof bench cache`: checker steps per second, side by side in one run, on the same seed.

For the spec and for TensorLRUCache, the checker of every kind (`check.programs.run_program_check`)
on the tensor cache's kind: bare (no call timeout, so no guard: the checker before the call
timeout existed), the default run (every call guarded, see docs/robustness.md), and `--isolate`
(the cache in a child process). Ratios are to the bare checker on the same cache.

Then steps/s per scope (docs/scope.md), side by side: the bare checker on the spec and on
TensorLRUCache on the meta device, in the small, wide and long scopes (the long scope's examples
are a tenth of --examples: each is a life of `LONG_CALLS` calls). `--scopes-only` measures only that.

Then the cache itself against the floor (`--ops-only` measures only that): TensorLRUCache and
`PlainTensorLRU`, a plain OrderedDict + threading.Lock LRU of tensors with a byte capacity, on
64-byte CPU tensors, in alternating rounds (the best of `OPS_ROUNDS` each): an evicting `put`,
a `get` hit, and one lifecycle iteration (TensorLRUCache: acquire of a new key, commit, get,
release, evicting on commit; the plain LRU: a get that misses, put, get). The ratios are
TensorLRUCache's time per call over the plain LRU's; the targets are 1.5x for put and get and
3x for the lifecycle (issue 26).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from cacheproof.check.phases import Phase
from cacheproof.check.programs.generators.cache_calls import LONG, LONG_CALLS, SMALL, WIDE
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.cmdline.flag_types import add_seed_flag, positive_integer
from cacheproof.contract.faults import UsageAbort
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, new_spec


TARGETS = {"the spec": 3000, "TensorLRUCache (cpu)": 500}
CACHES = {"the spec": "cacheproof.spec.kinds:new_spec", "TensorLRUCache (cpu)": "cacheproof.bench.cache:tensor_cache_on_cpu"}
MODES = ("bare", "guarded", "isolated")
STEPS = 100
"""Calls per program of the small and wide scopes (as `check --thorough`'s)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", metavar="N", type=positive_integer, default=100, help="examples per cache and mode (default 100)")
    add_seed_flag(parser)
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")
    parser.add_argument("--quiet", help="print only the last line (use with --json)", action="store_true")
    parser.add_argument("--scopes-only", action="store_true", help="measure only steps/s per scope")
    parser.add_argument("--ops-only", action="store_true", help="measure only TensorLRUCache against a plain OrderedDict LRU")
    parser.add_argument(
        "--calls", metavar="N", type=positive_integer, default=20_000, help="calls per round of the operation figures (default 20000)"
    )
    parser.add_argument(
        "--keys", metavar="N", type=positive_integer, action="append",
        help="values the caches hold in the operation figures; again for several (default 1000 and 100000)"
    )


def tensor_cache_on_cpu(capacity_bytes: int):
    """TensorLRUCache on the CPU (a factory a child process can import)."""
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


def tensor_cache_on_meta(capacity_bytes: int):
    """TensorLRUCache on the meta device: values without memory, any capacity."""
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="meta")


def checker_run(factory: Callable[[int], Any], examples: int, seed: int, phase: Phase | None = None,
                mode: str = "bare", impl: str = "factory") -> tuple[bool, int, float]:
    """(ok, steps, seconds) of the tensor cache's check of `factory` in `mode`: "bare" (no call
    timeout, so no guard and no supervision), "guarded" (the default call timeout) or "isolated" (the
    cache built from `impl` in a child process). `phase`: the scope and steps (default: the small
    scope, STEPS calls); `examples` are its examples."""
    phase = phase or Phase(SMALL, examples, STEPS)
    guard = {"call_timeout": None} if mode == "bare" else {}
    report = run_program_check(
        get_kind(DEFAULT_KIND), factory, generator_for(DEFAULT_KIND, phase.scope), examples=examples, steps=phase.steps,
        seed=seed, seeded=not phase.shrink, isolate=mode == "isolated", impl=impl, **guard,
    )
    return report.ok, report.steps, report.seconds


def _measure(name: str, mode: str, examples: int, seed: int) -> dict:
    factory = new_spec if name == "the spec" else tensor_cache_on_cpu
    ok, steps, seconds = checker_run(factory, examples, seed, mode=mode, impl=CACHES[name])
    return {"ok": ok, "steps": steps, "seconds": round(seconds, 3), "steps_per_second": round(steps / seconds, 1)}


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench cache", {"--json": args.json}):
        return 2
    if args.scopes_only:
        return _run_scopes(args)
    if args.ops_only:
        operations = _operation_figures(args)
        if args.json is not None:
            write_report(args.json, "bench", {"bench": "cache", "figures": {"operations": operations}})
        return 0
    try:
        figures = {name: {mode: _measure(name, mode, args.examples, args.seed) for mode in MODES} for name in CACHES}
    except UsageAbort as abort:  # a cache that could not be built (in its child process, say)
        print(f"cacheproof bench cache: {abort.message}", file=sys.stderr)
        return 2
    for name, by_mode in figures.items():
        bare = by_mode["bare"]["steps_per_second"]
        for figure in by_mode.values():
            figure["ratio_to_bare"] = round(figure["steps_per_second"] / bare, 3)
        by_mode["target_steps_per_second"] = TARGETS[name]
    if not args.quiet:
        summary_table(
            "checker throughput (same seed, same call sequences): steps/s, ratio to the bare checker",
            {
                f"{name} ({mode})": f"{f['steps_per_second']:.0f} steps/s  ({f['ratio_to_bare']:.2f}x bare, "
                f"{f['steps']} steps, ok={f['ok']})"
                for name, by_mode in figures.items()
                for mode, f in by_mode.items()
                if mode in MODES
            },
        )
    print("; ".join(
        f"{name}: guarded {by_mode['guarded']['ratio_to_bare']:.2f}x, isolated {by_mode['isolated']['ratio_to_bare']:.2f}x "
        "the bare checker's steps/s"
        for name, by_mode in figures.items()
    ))
    scoped = _scope_figures(args)
    operations = _operation_figures(args)
    if args.json is not None:
        write_report(
            args.json, "bench", {"bench": "cache", "figures": {**figures, "per_scope": scoped, "operations": operations}},
            ran_hypothesis=True,
        )
    modes_ok = all(f["ok"] for by_mode in figures.values() for mode, f in by_mode.items() if mode in MODES)
    return 0 if modes_ok and all(f["ok"] for by_scope in scoped.values() for f in by_scope.values()) else 1


def scope_phases(examples: int) -> tuple[Phase, ...]:
    """The phases of the per-scope figures: `examples` small and wide examples, a tenth as many lives."""
    return (
        Phase(SMALL, examples, STEPS),
        Phase(WIDE, examples, STEPS, shrink=False),
        Phase(LONG, max(1, examples // 10), LONG_CALLS, shrink=False),
    )


def _scope_figures(args: argparse.Namespace) -> dict:
    """Bare checker steps/s per cache and scope, printed side by side (ratios to the spec's small scope)."""
    factories = {"the spec": new_spec, "TensorLRUCache (meta)": tensor_cache_on_meta}
    figures: dict = {}
    for name, factory in factories.items():
        figures[name] = {}
        for phase in scope_phases(args.examples):
            ok, steps, seconds = checker_run(factory, phase.examples, args.seed, phase)
            figures[name][phase.scope.name] = {
                "ok": ok, "steps": steps, "seconds": round(seconds, 3), "steps_per_second": round(steps / seconds, 1),
            }
    base = figures["the spec"]["small"]["steps_per_second"]
    if not args.quiet:
        summary_table(
            "checker throughput per scope (bare checker, same seed): steps/s, ratio to the spec small",
            {
                f"{name} ({scope})": f"{f['steps_per_second']:.0f} steps/s  ({f['steps_per_second'] / base:.2f}x, "
                f"{f['steps']} steps, ok={f['ok']})"
                for name, by_scope in figures.items()
                for scope, f in by_scope.items()
            },
        )
    print("; ".join(
        f"{name}: " + ", ".join(f"{scope} {f['steps_per_second']:.0f}" for scope, f in by_scope.items()) + " steps/s"
        for name, by_scope in figures.items()
    ))
    return figures


def _run_scopes(args: argparse.Namespace) -> int:
    figures = _scope_figures(args)
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "cache", "figures": {"per_scope": figures}}, ran_hypothesis=True)
    return 0 if all(f["ok"] for by_scope in figures.values() for f in by_scope.values()) else 1


# TensorLRUCache against a plain LRU ---------------------------------------------------------------

OPS_ROUNDS = 7
OPS_TARGETS = {"put": 1.5, "get": 1.5, "lifecycle": 3.0}
"""The most TensorLRUCache's time per call may be, as a multiple of the plain LRU's (issue 26)."""
VALUE_BYTES = 64
KEY_COUNTS = (1_000, 100_000)
"""The caches hold this many values (`--keys`, default both): each round fills them first, untimed,
so that every timed put and every lifecycle commit evicts."""


class PlainTensorLRU:
    """The floor: a byte-capacity LRU of tensors, an OrderedDict under one lock. `put` stores its own
    copy, `value.detach().clone()` (as the contract asks of a cache), and evicts the oldest values
    until the new one fits; `get` returns a value and makes it the newest, None when absent."""

    def __init__(self, capacity_bytes: int) -> None:
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity, self._used = capacity_bytes, 0

    def put(self, key: Any, value: Any) -> bool:
        stored = value.detach().clone()
        nbytes = stored.nbytes
        with self._lock:
            if key in self._values or nbytes > self._capacity:
                return False
            self._values[key] = stored
            self._used += nbytes
            while self._used > self._capacity:
                self._used -= self._values.popitem(last=False)[1].nbytes
            return True

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value


def _operation_rounds(calls: int, keys: int) -> dict[str, dict[str, float]]:
    """CPU seconds of this thread per call, the best of OPS_ROUNDS rounds, per operation and cache,
    each cache holding `keys` values (CPU time, not wall: other processes on a loaded machine do not
    count; rounds alternate between the caches, so what remains of the noise slows both)."""
    import torch

    from cacheproof.impl import TensorLRUCache

    value = torch.arange(VALUE_BYTES // 4, dtype=torch.float32)
    capacity = VALUE_BYTES * keys
    makers = {"TensorLRUCache": lambda: TensorLRUCache(capacity, device="cpu"), "plain LRU": lambda: PlainTensorLRU(capacity)}
    best: dict[str, dict[str, float]] = {operation: {} for operation in OPS_TARGETS}
    for _ in range(OPS_ROUNDS):
        for name, make in makers.items():
            for operation, seconds in _one_round(make(), name == "TensorLRUCache", value, calls, keys).items():
                best[operation][name] = min(best[operation].get(name, seconds), seconds)
    return best


def _one_round(cache: Any, lifecycle: bool, value: Any, calls: int, keys: int) -> dict[str, float]:
    """Seconds per call, on `cache` filled with `keys` values first (untimed), of `calls` evicting
    puts, `calls` gets of resident keys and `calls` lifecycle iterations on new keys (`lifecycle`:
    TensorLRUCache's acquire/commit/get/release, else the plain LRU's get/put/get)."""
    put, get = cache.put, cache.get
    for key in range(-keys, 0):
        put(key, value)
    started = time.thread_time()
    for key in range(calls):
        put(key, value)
    put_seconds = time.thread_time() - started
    resident = [calls - keys + (at * 7919) % keys for at in range(calls)]  # spread over the keys still held
    started = time.thread_time()
    for key in resident:
        get(key)
    get_seconds = time.thread_time() - started
    fresh = range(calls, 2 * calls)
    started = time.thread_time()
    if lifecycle:
        acquire, commit, release = cache.acquire, cache.commit, cache.release
        for key in fresh:
            acquire(key, VALUE_BYTES)
            commit(key, value)
            get(key)
            release(key)
    else:
        for key in fresh:
            get(key)
            put(key, value)
            get(key)
    lifecycle_seconds = time.thread_time() - started
    return {"put": put_seconds / calls, "get": get_seconds / calls, "lifecycle": lifecycle_seconds / calls}


def _operation_figures(args: argparse.Namespace) -> dict:
    """TensorLRUCache's calls per second against the plain LRU's, and the ratio of their times, at
    each count of held keys (`--keys`)."""
    figures: dict[str, dict] = {}
    for keys in args.keys or KEY_COUNTS:
        best = _operation_rounds(args.calls, keys)
        figures[f"{keys} keys"] = {
            operation: {
                "tensor_lru_cache_per_second": round(1 / by_cache["TensorLRUCache"]),
                "plain_lru_per_second": round(1 / by_cache["plain LRU"]),
                "ratio": round(by_cache["TensorLRUCache"] / by_cache["plain LRU"], 2),
                "target_ratio": OPS_TARGETS[operation],
            }
            for operation, by_cache in best.items()
        }
    if not args.quiet:
        summary_table(
            f"TensorLRUCache vs a plain OrderedDict + lock LRU ({VALUE_BYTES}-byte CPU tensors, "
            f"best of {OPS_ROUNDS} rounds of {args.calls} calls): calls/s, time ratio",
            {
                f"{operation} ({held})": f"{f['tensor_lru_cache_per_second']:,} vs {f['plain_lru_per_second']:,} /s: "
                f"{f['ratio']:.2f}x the plain LRU's time (target <= {f['target_ratio']}x)"
                for held, by_operation in figures.items() for operation, f in by_operation.items()
            },
        )
    print("ratios to the plain LRU: " + "; ".join(
        f"{held}: " + ", ".join(f"{operation} {f['ratio']:.2f}x" for operation, f in by_operation.items())
        for held, by_operation in figures.items()
    ))
    return figures
