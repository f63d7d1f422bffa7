"""`cacheproof check --spec KIND --workers N` for the kinds other than the tensor cache: their check
(`run_program_phases`) in each worker of the crew (`cacheproof.check.workers`, which every kind
shares), and the merged report.

The merged report sums every worker's programs and steps, counts the first failure among all the
programs run before it, reports the winner's counterexamples, and names the winner and its seed
(`ProgramReport.workers`); what the programs reached (scopes, largest pool, longest program) is the
most any worker reached. Ctrl-C before any worker reported a failure raises KeyboardInterrupt, as
the check does in one process: the command then reports the programs counted so far.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.phases import Phase, shares
from cacheproof.check.programs.run import ProgramOptions, ProgramReport, merged_measures, run_program_phases
from cacheproof.check.workers import CrewResult, Hooks, ParentHooks, run_crew
from cacheproof.cmdline.databases import DatabaseChoice, namespaced, open_database
from cacheproof.sandbox.factories import load_factory
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind


@dataclass(frozen=True)
class ProgramWork:
    """One worker's check: the kind's name, its share of the phases, and the options (no callbacks
    and no database: the worker opens the database itself; `options.impl` names the implementation)."""

    kind: str
    phases: tuple[Phase, ...]
    options: ProgramOptions


def run_program_workers(
    kind: SpecKind, phases: tuple[Phase, ...], options: ProgramOptions, workers: int,
    database: DatabaseChoice | None = None,
) -> ProgramReport:
    """The check of `options.impl` on `phases` over `workers` processes on seeds `options.seed`..,
    sharing the example database of `database` (its examples kept apart per implementation, as in
    one process). `options.on_example` is told the summed counts, `options.on_shrink` the winner's
    first failure. ValueError when a phase has fewer examples than workers; UsageAbort when a worker
    reports one or dies."""
    seeds = [options.seed + index for index in range(workers)]
    own = [ProgramWork(kind.name, share, replace(options, seed=seed, on_example=None, on_shrink=None,
                                                        on_counterexample=None, database=None))
           for seed, share in zip(seeds, shares(phases, workers))]
    result = run_crew(_work, own, seeds, database, ParentHooks(options.on_example, options.on_shrink))
    return merged(kind, result, options)


def merged(kind: SpecKind, result: CrewResult, options: ProgramOptions) -> ProgramReport:
    """One report of every worker's (see the module)."""
    winning = result.winning
    if winning is None and result.interrupted:
        raise KeyboardInterrupt
    reports = result.in_order
    operations = options.operations or kind.default_operations
    report = ProgramReport(
        kind.name, examples=result.examples, steps=result.steps, seconds=result.seconds,
        coverage=OutcomeCoverage.merged(report.coverage for report in reports)
        or OutcomeCoverage(op for op in kind.operations if op.name in operations),
        scopes=tuple(dict.fromkeys(name for report in reports for name in report.scopes)),
        largest_size=max((report.largest_size for report in reports), default=0),
        longest_sequence=max((report.longest_sequence for report in reports), default=0),
        measures=merged_measures(report.measures for report in reports),
        workers=result.summary,
    )
    if winning is not None:
        report.counterexamples = list(winning.counterexamples)
        report.first_failure_example, report.seconds_to_failure = result.first_failure
        report.first_report_seconds = winning.first_report_seconds  # on the winner's clock, from its start
    return report


def _work(work: ProgramWork, database: DatabaseChoice | None, hooks: Hooks) -> ProgramReport:
    """One worker of the crew: the kind's check on its share, the implementation loaded here."""
    options = work.options
    factory = None if options.isolate else load_factory(options.impl)
    return run_program_phases(
        get_kind(work.kind), factory, work.phases, options,
        database=None if database is None else namespaced(open_database(database), options.impl),
        on_example=hooks.progress, on_shrink=hooks.shrink,
    )
