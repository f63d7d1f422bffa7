"""`cacheproof bench workers`: time to the first bug at 1 and at N workers, side by side in one run.

For each broken cache (`--impl`, repeatable; default: a few of model_tests/broken_caches.py, so
the default runs from a clone of cacheproof) and each of `--seeds` seeds: the tensor cache's check
(`run_program_phases`, the checker of every kind) as one process (`--workers 1`: in this process)
and as `--workers N` (`run_program_workers`: N processes, `--examples` divided among them), each
stopping at its first counterexample; `--thorough` checks as
`check --thorough` does, by default on broken caches only the wide and long scopes find, whose
searches take seconds where the default caches' take fractions of one. Two times are measured: to the
failure (the end of the first failing example, before shrinking) and to the report (the
counterexample shrunk); the medians over the seeds are printed side by side with their ratio
(1 worker / N workers: above 1, the workers find it sooner). The N workers' times include
starting their processes. No example database: every run searches from scratch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from cacheproof.check.phases import Phase
from cacheproof.check.programs.generators.cache_calls import SMALL, THOROUGH
from cacheproof.check.programs.run import DEFAULT_STEPS, ProgramOptions, ProgramReport, run_program_phases
from cacheproof.check.programs.workers import run_program_workers
from cacheproof.cmdline.flag_types import any_integer, integer_at_least, positive_integer
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.progress import summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.contract.faults import UsageAbort
from cacheproof.contract.values import REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import FactoryError, capacity_cap_of, load_factory
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind

DEFAULT_IMPLS = tuple(f"model_tests.broken_caches:{name}" for name in (
    "CommitEvictsBeforeSizeCheck", "EvictsPinnedEntries", "ReleaseOfIdleIsNoop", "RepinsWithoutFitCheck",
))
"""Broken caches that take more than a few examples to find (their modules live in the repository's tests)."""
THOROUGH_IMPLS = tuple(f"model_tests.broken_scope_caches:{name}" for name in (
    "FixedTableOfEight", "ByteCountersWrapAt32Bits", "MaintenancePassReorders",
))
"""Broken caches only the wide and long scopes find (`--thorough`): seconds of search, not fractions."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--impl", action="append", metavar="MODULE:FACTORY",
                        help="a broken cache to find; again for several (default: four of model_tests.broken_caches)")
    parser.add_argument("--workers", type=integer_at_least(2), default=2, metavar="N",
                        help="the workers compared with one process (default 2)")
    parser.add_argument("--seeds", metavar="N", type=positive_integer, default=3, help="seeds per cache (default 3)")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="the first seed (default 0)")
    parser.add_argument("--examples", metavar="N", type=positive_integer, default=1000,
                        help="the budget of each check (default 1000): a cache not found within it is reported")
    parser.add_argument("--thorough", action="store_true",
                        help="check as `check --thorough` does (the wide and long scopes; --examples is unused), "
                        "by default on the broken caches only those scopes find")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")
    parser.add_argument("--quiet", action="store_true", help="print only the last line")


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench workers", {"--json": args.json}):
        return 2
    impls = tuple(args.impl or (THOROUGH_IMPLS if args.thorough else DEFAULT_IMPLS))
    try:
        factories = {impl: load_factory(impl) for impl in impls}
    except FactoryError as error:
        print(f"cacheproof bench workers: {error} (the default caches need a clone of cacheproof: run it from "
              "the repository's folder, or name caches with --impl)", file=sys.stderr)
        return 2
    try:
        figures = {impl: _figures(factories[impl], impl, args) for impl in impls}
    except UsageAbort as abort:
        print(f"cacheproof bench workers: {abort.message}", file=sys.stderr)
        return 2
    if not args.quiet:
        summary_table(
            f"time to the first bug, median of {args.seeds} seeds: 1 worker vs {args.workers} workers",
            {impl.rpartition(":")[2]: _row(figure, args.workers) for impl, figure in figures.items()},
        )
    found = all(figure["found"] for figure in figures.values())
    ratios = [figure["to_failure_ratio"] for figure in figures.values() if figure["to_failure_ratio"] is not None]
    print(f"{args.workers} workers find the bugs {statistics.median(ratios):.2f}x sooner than 1 (median of "
          f"{len(ratios)} caches, to the failure before shrinking)" if ratios else "no bug was found")
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "workers", "figures": {
            "workers": args.workers, "seeds": args.seeds, "caches": figures}}, ran_hypothesis=True)
    return 0 if found else 1


def _figures(factory, impl: str, args: argparse.Namespace) -> dict:
    """The medians over the seeds of one cache, at 1 worker and at args.workers."""
    runs: dict[str, list[ProgramReport]] = {"one": [], "many": []}
    kind, phases = get_kind(DEFAULT_KIND), checked_phases(factory, args)
    for seed in range(args.seed, args.seed + args.seeds):
        options = ProgramOptions(seed=seed, impl=impl)
        started = time.perf_counter()
        runs["one"].append(_timed(run_program_phases(kind, factory, phases, options), started))
        started = time.perf_counter()
        runs["many"].append(_timed(run_program_workers(kind, phases, options, args.workers), started))
    figure: dict = {"found": all(not report.ok for reports in runs.values() for report in reports)}
    for name, reports in runs.items():
        figure[f"{name}_to_failure_seconds"] = _median([report.seconds_to_failure for report in reports])
        figure[f"{name}_to_report_seconds"] = _median([report.seconds for report in reports])
        figure[f"{name}_examples_to_failure"] = _median([report.first_failure_example for report in reports])
    for measure in ("to_failure", "to_report"):
        one, many = figure[f"one_{measure}_seconds"], figure[f"many_{measure}_seconds"]
        figure[f"{measure}_ratio"] = None if not one or not many else round(one / many, 2)
    return figure


def checked_phases(factory, args: argparse.Namespace) -> tuple[Phase, ...]:
    """The phases each check runs: `THOROUGH` with `--thorough` (capacities capped as `check
    --thorough` caps them for a cache whose values hold memory), else `--examples` programs of the
    small scope."""
    if not args.thorough:
        return (Phase(SMALL, args.examples, DEFAULT_STEPS),)
    cap = capacity_cap_of(factory, REAL_VALUE_CAPACITY)
    return tuple(replace(phase, scope=phase.scope.capped(cap)) for phase in THOROUGH)


def _timed(report: ProgramReport, started: float) -> ProgramReport:
    """`report`, its `seconds` the wall time from `started` (a worker run's includes starting the processes)."""
    return replace(report, seconds=time.perf_counter() - started)


def _median(values: list) -> float | None:
    present = [value for value in values if value is not None]
    return None if len(present) < len(values) else round(statistics.median(present), 3)


def _row(figure: dict, workers: int) -> str:
    def seconds(value: float | None) -> str:
        return "not found" if value is None else f"{value:.2f} s"

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}x"

    return (f"to the failure {seconds(figure['one_to_failure_seconds'])} vs {seconds(figure['many_to_failure_seconds'])} "
            f"({ratio(figure['to_failure_ratio'])}); to the report {seconds(figure['one_to_report_seconds'])} vs "
            f"{seconds(figure['many_to_report_seconds'])} ({ratio(figure['to_report_ratio'])}); examples to the "
            f"failure {figure['one_examples_to_failure']} vs {figure['many_examples_to_failure']} (all {workers} workers')")
