"""`cacheproof bench throughput`: the checker's steps per second against the bare loop's, side by
side in one run, for both spec kinds.

The bare loop is the floor of what a differential step costs: the same generator picks each call
from a `random.Random` (no Hypothesis), the call runs on the spec and on the implementation, the
outcomes and the compared views are compared and the spec's invariants checked — what a step of
the checker must do, and nothing else. The checker is `run_check` (the tensor cache) or
`run_program_check` (the block pool) on the same pair, Hypothesis drawing and counting the
programs. The ratio is checker over bare loop (1.0: no framework cost at all).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import DEFAULT_STEPS, run_program_check
from cacheproof.check.sequential.machine import Tally, machine_for
from cacheproof.check.sequential.programs import Plan, program_operations, run_program
from cacheproof.check.sequential.run import DEFAULT_STEPS_PER_EXAMPLE, run_check
from cacheproof.check.sequential.scope import SMALL
from cacheproof.cmdline.flag_types import any_integer, positive_integer
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.contract.steps import differential_step
from cacheproof.spec.kinds import get_kind, new_spec

RATIO_TARGET = 0.5
"""The checker's steps/s over the bare loop's that the project holds itself to (docs/search-power.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=positive_integer, default=300, metavar="N",
                        help="programs per measurement (default 300)")
    parser.add_argument("--seed", type=any_integer, default=0, metavar="N", help="random seed (default 0)")
    parser.add_argument("--repeats", type=positive_integer, default=3, metavar="N",
                        help="measurements of each; the best counts (default 3)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--impl", action="append", metavar="MODULE:FACTORY",
                        help="a broken cache whose first failure and first report are timed; again for several "
                        "(default: model_tests.broken_caches' caches, from a checkout)")


def _built_in_cache(capacity_bytes: int) -> Any:
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="meta")


def _built_in_pool(num_blocks: int) -> Any:
    from cacheproof.impl.kv_cache_manager import kv_cache_manager

    return kv_cache_manager(num_blocks)


def cache_bare_loop(factory: Callable[[int], Any], examples: int, seed: int) -> tuple[int, float]:
    """(steps, seconds) of `examples` programs of the checker's own generator on `factory`, picked by
    a `random.Random(seed)`: every call compared and the invariants checked, no Hypothesis."""
    tally = Tally()
    machine = machine_for(factory, tally)
    operations = program_operations(machine)
    rng = random.Random(seed)
    started = time.perf_counter()
    for _ in range(examples):
        capacity = rng.randint(1, 8 if rng.random() < 0.5 else 64)  # the small scope's capacities
        run_program(machine(), capacity, SMALL.key_pool, Plan(operations, SMALL.max_keys), rng,
                    DEFAULT_STEPS_PER_EXAMPLE)
    return tally.steps, time.perf_counter() - started


def blocks_bare_loop(factory: Callable[[int], Any], examples: int, seed: int) -> tuple[int, float]:
    """The same for the block pool kind: its generator, `differential_step`, `check_invariants`."""
    kind, generator, rng = get_kind("blocks"), generator_for("blocks"), random.Random(seed)
    steps = 0
    started = time.perf_counter()
    for _ in range(examples):
        size = generator.size(rng)
        model, implementation = kind.new(size), factory(size)
        for _ in range(DEFAULT_STEPS):
            call = generator.draw_call(rng, model, kind.names, True)
            steps += 1
            if differential_step(model, implementation, call, kind.views, error_names=kind.error_names) is not None:
                break
            model.check_invariants()
    return steps, time.perf_counter() - started


def cache_checker(factory: Callable[[int], Any], examples: int, seed: int) -> tuple[int, float]:
    report = run_check(factory, examples=examples, seed=seed, call_timeout=None)
    return report.steps, report.seconds


def blocks_checker(factory: Callable[[int], Any], examples: int, seed: int) -> tuple[int, float]:
    report = run_program_check(get_kind("blocks"), factory, generator_for("blocks"), examples=examples, seed=seed)
    return report.steps, report.seconds


PAIRS: dict[str, tuple[Callable[[int], Any], Callable, Callable]] = {
    "cache: spec vs spec": (new_spec, cache_bare_loop, cache_checker),
    "cache: spec vs TensorLRUCache (meta)": (_built_in_cache, cache_bare_loop, cache_checker),
    "blocks: spec vs spec": (lambda size: get_kind("blocks").new(size), blocks_bare_loop, blocks_checker),
    "blocks: spec vs KVCacheManager": (_built_in_pool, blocks_bare_loop, blocks_checker),
}
"""Each measured pair: the implementation's factory, its bare loop, its checker."""


REPORTED_CACHES = tuple(f"model_tests.broken_caches:{name}" for name in (
    "AcquireIgnoresConflicts", "ClearDropsBusyEntries", "CommitEvictsBeforeSizeCheck", "EvictsNewestFirst",
    "EvictsPinnedEntries", "GetDoesNotPromote", "GetTakesReference", "OffByOneCapacity",
    "PutEvictsBeforeCheckingFit", "ReleaseOfIdleIsNoop", "RepinsWithoutFitCheck", "ReservationEvictable",
    "StalePinnedCounter", "TransientSurvivesRelease",
))
"""The broken caches timed by default (importable from a checkout of cacheproof)."""

REPORT_TARGET_SECONDS = 2.0
"""The first shrunk counterexample is due within this long of the first failing example."""


def report_times(impls: tuple[str, ...], seed: int) -> dict[str, dict]:
    """For each cache: seconds to the first failing example, to the first shrunk counterexample, the
    gap between them and the counterexample's length (`run_check`, one divergence)."""
    from cacheproof.sandbox.factories import load_factory

    figures = {}
    for impl in impls:
        report = run_check(load_factory(impl), seed=seed, impl=impl, max_divergences=1)
        if report.ok:
            figures[impl] = {"found": False}
            continue
        figures[impl] = {"found": True, "first_failure_seconds": round(report.first_failure_seconds, 3),
                         "first_report_seconds": round(report.first_report_seconds, 3),
                         "gap_seconds": round(report.first_report_seconds - report.first_failure_seconds, 3),
                         "calls": len(report.counterexample.calls)}
    return figures


def _best_rate(measure: Callable, factory: Callable, examples: int, seed: int, repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        steps, seconds = measure(factory, examples, seed)
        best = max(best, steps / seconds)
    return best


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench throughput: {problem}", file=sys.stderr)
        return 2
    figures = {}
    for name, (factory, bare_loop, checker) in PAIRS.items():
        bare = _best_rate(bare_loop, factory, args.examples, args.seed, args.repeats)
        checked = _best_rate(checker, factory, args.examples, args.seed, args.repeats)
        figures[name] = {"bare_loop_steps_per_second": round(bare), "checker_steps_per_second": round(checked),
                         "ratio": round(checked / bare, 3)}
    summary_table(
        f"checker vs bare loop: steps/s, best of {args.repeats} (target ratio >= {RATIO_TARGET})",
        {name: f"checker {f['checker_steps_per_second']}  bare loop {f['bare_loop_steps_per_second']}  "
               f"ratio {f['ratio']:.2f}" for name, f in figures.items()},
    )
    reports = report_times(tuple(args.impl or REPORTED_CACHES), args.seed)
    summary_table(
        f"time to a report (seed {args.seed}): first failing example, first shrunk counterexample "
        f"(target: within {REPORT_TARGET_SECONDS:g} s of the failure)",
        {impl.rpartition(":")[2]: "not found" if not f["found"] else
         f"failure {f['first_failure_seconds']:.2f} s  report {f['first_report_seconds']:.2f} s  "
         f"gap {f['gap_seconds']:.2f} s  {f['calls']} calls" for impl, f in reports.items()},
    )
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "throughput", "figures": {"throughput": figures, "reports": reports}},
                     ran_hypothesis=True)
    return 0
