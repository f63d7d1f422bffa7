"""`cacheproof bench throughput`: the checker's steps per second against two loops without
Hypothesis, side by side in one run, for every spec kind, on the spec against itself and against
the kind's built-in implementation.

- The minimal loop is the floor of what a differential step costs: the kind's generator picks each
  call from a `random.Random`, the call runs on the spec and on the implementation, the outcomes
  are compared, one snapshot of each side compared (as the kind reads it) and the spec's
  invariants checked once; nothing else. The project holds the checker to `RATIO_TARGET` of it.
- The bare loop is the checker's own step (`check.programs.program.run_program`: every view, the
  outcome coverage, the watch on the implementation) on the same `random.Random` draws: what the
  checker costs beyond it is Hypothesis's.
- The checker is `run_program_check` on the same pair, Hypothesis drawing and counting the programs.

All three run programs of the same length: by default `cacheproof check`'s (`--steps`); a
shorter program spreads Hypothesis's fixed cost per example (its saving and reseeding of the
registered random generators, its bookkeeping of the example) over fewer calls, so `--steps 40`
(`cache_test`'s length) gives the checker a lower ratio on the kinds whose step is cheapest.

A ratio is the checker's rate over a loop's (1.0: no cost beyond the loop).
Rates are steps per second of this process's CPU time (`time.process_time`, every thread of it): on
a shared machine the wall clock also counts the other jobs' turns, and the ratios moved by half
between runs.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.programs.draws import swarm
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramSetup, run_program
from cacheproof.check.command import DEFAULT_STEPS_PER_EXAMPLE
from cacheproof.check.programs.run import DEFAULT_STEPS, run_program_check
from cacheproof.cmdline.flag_types import any_integer, positive_integer
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.contract.steps import outcome_of, outcomes_agree
from cacheproof.sandbox.guarded_call import Watch
from cacheproof.sandbox.guarded_program import WatchedFactory
from cacheproof.spec.kinds import get_kind, new_spec

RATIO_TARGET = 0.5
"""The checker's steps/s over the minimal loop's that the project holds itself to (docs/search-power.md)."""

Measure = Callable[[str, Callable[[int], Any], int, int, int], tuple[int, float]]
"""(kind, factory, examples, seed, calls per program) -> (steps, seconds)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=positive_integer, default=120, metavar="N",
                        help="programs per measurement (default 120)")
    parser.add_argument("--steps", type=positive_integer, default=DEFAULT_STEPS_PER_EXAMPLE, metavar="N",
                        help="calls per program, in all three loops (default: cacheproof check's, "
                        f"{DEFAULT_STEPS_PER_EXAMPLE}; cache_test's are {DEFAULT_STEPS})")
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


def _built_in_radix(num_slots: int) -> Any:
    from cacheproof.impl.radix_cache import radix_cache

    return radix_cache(num_slots)


def _reference_slots(num_slots: int) -> Any:
    """The slot budget's reference (standard library, written apart from the spec), importable from a
    checkout of cacheproof as REPORTED_CACHES are: the kind has no built-in implementation."""
    from model_tests.slot_budgets import SlotBudget

    return SlotBudget(num_slots)


def minimal_loop(kind_name: str, factory: Callable[[int], Any], examples: int, seed: int, calls: int) -> tuple[int, float]:
    """(steps, seconds) of `examples` programs of `kind_name`'s generator picked by a
    `random.Random(seed)`, each call compared by its outcome and one snapshot of each side (the
    kind's reader of it, if any; a kind without a snapshot view: its first view), the invariants checked once; a program ends at its first difference."""
    kind, generator, rng = get_kind(kind_name), generator_for(kind_name), random.Random(seed)
    names, error_names = kind.names, kind.error_names
    view = "snapshot" if "snapshot" in kind.views else kind.views[0]  # a kind without a snapshot: its first view

    def read(target: Any, model: Any) -> Any:
        return kind.read_view(target, view, model)

    steps = 0
    started = time.process_time()
    for _ in range(examples):
        operations = swarm(rng, names)
        size = generator.size(rng)
        model, implementation = kind.new(size), factory(size)
        for _ in range(calls):
            call = generator.draw_call(rng, model, operations, True)
            steps += 1
            expected = outcome_of(model, call, error_names, values_from=implementation)
            actual = outcome_of(implementation, call, error_names)
            if not outcomes_agree(call.op, expected, actual) or read(model, model) != read(implementation, model):
                break
            model.check_invariants()
    return steps, time.process_time() - started


def bare_loop(kind_name: str, factory: Callable[[int], Any], examples: int, seed: int, calls: int) -> tuple[int, float]:
    """The same programs through the checker's own step (`run_program`, the implementation watched
    as the checker watches it, the outcomes counted), no Hypothesis."""
    kind, generator, rng = get_kind(kind_name), generator_for(kind_name), random.Random(seed)
    setup = ProgramSetup(kind, kind.new, WatchedFactory(factory, Watch()), generator, kind.names, True, calls)
    coverage = OutcomeCoverage(kind.operations, generator.cases(None))
    steps = 0
    started = time.process_time()
    for _ in range(examples):
        steps += len(run_program(setup, rng, coverage.record).calls)
    return steps, time.process_time() - started


def checker(kind_name: str, factory: Callable[[int], Any], examples: int, seed: int, calls: int) -> tuple[int, float]:
    started = time.process_time()
    report = run_program_check(get_kind(kind_name), factory, generator_for(kind_name), examples=examples, seed=seed,
                               steps=calls)
    return report.steps, time.process_time() - started


PAIRS: dict[str, tuple[str, Callable[[int], Any]]] = {
    "cache: spec vs spec": ("cache", new_spec),
    "cache: spec vs TensorLRUCache (meta)": ("cache", _built_in_cache),
    "blocks: spec vs spec": ("blocks", lambda size: get_kind("blocks").new(size)),
    "blocks: spec vs KVCacheManager": ("blocks", _built_in_pool),
    "radix: spec vs spec": ("radix", lambda size: get_kind("radix").new(size)),
    "radix: spec vs TorchRadixCache": ("radix", _built_in_radix),
    "slots: spec vs spec": ("slots", lambda size: get_kind("slots").new(size)),
    "slots: spec vs SlotBudget (model_tests)": ("slots", _reference_slots),
}
"""Each measured pair: its kind and the implementation's factory."""

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
    gap between them and the counterexample's length (`run_program_check` of the tensor cache's
    kind, one divergence)."""
    from cacheproof.sandbox.factories import load_factory

    figures = {}
    kind = get_kind("cache")
    for impl in impls:
        report = run_program_check(kind, load_factory(impl), generator_for(kind.name), seed=seed, impl=impl)
        if report.ok:
            figures[impl] = {"found": False}
            continue
        figures[impl] = {"found": True, "first_failure_seconds": round(report.seconds_to_failure, 3),
                         "first_report_seconds": round(report.first_report_seconds, 3),
                         "gap_seconds": round(report.first_report_seconds - report.seconds_to_failure, 3),
                         "calls": len(report.counterexample.calls)}
    return figures


def best_rates(measures: dict[str, Measure], kind_name: str, factory: Callable, examples: int, seed: int,
               repeats: int, calls: int = DEFAULT_STEPS_PER_EXAMPLE) -> dict[str, int]:
    """Each measure's best steps/s of `repeats`, the measures taken in turn within each repeat, so
    that the ratios between them see the same load on a shared machine."""
    best = dict.fromkeys(measures, 0.0)
    for _ in range(repeats):
        for label, measure in measures.items():
            steps, seconds = measure(kind_name, factory, examples, seed, calls)
            best[label] = max(best[label], steps / seconds)
    return {label: round(rate) for label, rate in best.items()}


LOOPS: dict[str, Measure] = {"minimal_loop": minimal_loop, "bare_loop": bare_loop, "checker": checker}


def throughput(examples: int, seed: int, repeats: int, calls: int = DEFAULT_STEPS_PER_EXAMPLE) -> dict[str, dict]:
    """Steps/s of each pair's minimal loop, bare loop and checker (`best_rates`, programs of `calls`
    calls) and the checker's ratios to the two loops."""
    figures = {}
    for name, (kind_name, factory) in PAIRS.items():
        rates = best_rates(LOOPS, kind_name, factory, examples, seed, repeats, calls)
        row: dict[str, Any] = {f"{label}_steps_per_second": rate for label, rate in rates.items()}
        row["minimal_ratio"] = round(rates["checker"] / rates["minimal_loop"], 3)
        row["bare_ratio"] = round(rates["checker"] / rates["bare_loop"], 3)
        figures[name] = row
    return figures


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench throughput: {problem}", file=sys.stderr)
        return 2
    figures = throughput(args.examples, args.seed, args.repeats, args.steps)
    summary_table(
        f"checker vs minimal loop and bare loop: steps/s, programs of {args.steps} calls, best of {args.repeats} "
        f"(target: minimal-loop ratio >= {RATIO_TARGET})",
        {name: f"checker {f['checker_steps_per_second']}  minimal {f['minimal_loop_steps_per_second']}  "
               f"bare {f['bare_loop_steps_per_second']}  minimal-loop ratio {f['minimal_ratio']:.2f}  "
               f"bare-loop ratio {f['bare_ratio']:.2f}" for name, f in figures.items()},
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
        write_report(args.json, "bench", {"bench": "throughput", "figures": {
            "calls_per_program": args.steps, "throughput": figures, "reports": reports}},
                     ran_hypothesis=True)
    return 0
