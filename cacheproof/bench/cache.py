"""`cacheproof bench cache`: checker steps per second, side by side in one run, on the same seed.

For the spec and for TensorLRUCache: the bare state machine (no guard: the checker before the
call timeout existed), the default run (every call guarded, see docs/robustness.md), and
`--isolate` (the cache in a child process). Ratios are to the bare machine on the spec.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from cacheproof.check.flag_types import any_integer, positive_integer
from cacheproof.check.faults import UsageAbort
from cacheproof.check.machine import Tally, machine_for
from cacheproof.check.output_paths import first_problem, write_atomically
from cacheproof.check.run import DEFAULT_STEPS_PER_EXAMPLE, check_settings, run_check
from cacheproof.progress import summary_table
from cacheproof.spec import CacheSpec

TARGETS = {"CacheSpec": 3000, "TensorLRUCache (cpu)": 500}
CACHES = {"CacheSpec": "cacheproof.spec:CacheSpec", "TensorLRUCache (cpu)": "cacheproof.bench.cache:tensor_cache_on_cpu"}
MODES = ("bare machine", "guarded", "isolated")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=positive_integer, default=100, help="examples per cache and mode (default 100)")
    parser.add_argument("--seed", type=any_integer, default=0)
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    parser.add_argument("--quiet", action="store_true")


def tensor_cache_on_cpu(capacity_bytes: int):
    """TensorLRUCache on the CPU (a factory a child process can import)."""
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


def bare_machine(factory: Callable[[int], Any], examples: int, seed: int) -> tuple[bool, int, float]:
    """The state machine alone, no guard and no supervision: (ok, steps, seconds)."""
    tally = Tally()
    machine = machine_for(factory, tally)
    machine._hypothesis_internal_use_seed = seed
    started = time.perf_counter()
    ok = True
    try:
        with with_reporter(lambda message: None):
            run_state_machine_as_test(machine, settings=check_settings(examples, DEFAULT_STEPS_PER_EXAMPLE))
    except AssertionError:
        ok = False
    return ok, tally.steps, time.perf_counter() - started


def _measure(name: str, mode: str, examples: int, seed: int) -> dict:
    factory = CacheSpec if name == "CacheSpec" else tensor_cache_on_cpu
    if mode == "bare machine":
        ok, steps, seconds = bare_machine(factory, examples, seed)
    else:
        report = run_check(factory, examples=examples, seed=seed, impl=CACHES[name], isolate=mode == "isolated")
        ok, steps, seconds = report.ok, report.steps, report.seconds
    return {"ok": ok, "steps": steps, "seconds": round(seconds, 3), "steps_per_second": round(steps / seconds, 1)}


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench cache: {problem}", file=sys.stderr)
        return 2
    try:
        figures = {name: {mode: _measure(name, mode, args.examples, args.seed) for mode in MODES} for name in CACHES}
    except UsageAbort as abort:  # a cache that could not be built (in its child process, say)
        print(f"cacheproof bench cache: {abort.message}", file=sys.stderr)
        return 2
    for name, by_mode in figures.items():
        bare = by_mode["bare machine"]["steps_per_second"]
        for figure in by_mode.values():
            figure["ratio_to_bare"] = round(figure["steps_per_second"] / bare, 3)
        by_mode["target_steps_per_second"] = TARGETS[name]
    if not args.quiet:
        summary_table(
            "checker throughput (same seed, same call sequences): steps/s, ratio to the bare machine",
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
        "the bare machine's steps/s"
        for name, by_mode in figures.items()
    ))
    if args.json is not None:
        write_atomically(args.json, json.dumps(figures, indent=2) + "\n")
    return 0 if all(f["ok"] for by_mode in figures.values() for mode, f in by_mode.items() if mode in MODES) else 1
