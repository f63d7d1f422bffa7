"""The tensor cache's `check --workers N`: `run_check` in each worker of the crew
(`cacheproof.check.workers`, which every kind shares), and the merged report.

The merged report sums every worker's examples and steps, counts the first failure among all the
examples run before it, and names the winner and its seed; the winner's counterexamples are
reported. When every worker conforms, the report conforms with the sums, the scopes reached
merged. Ctrl-C before any failure raises CheckInterrupted with the partial report, as `run_check` does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from cacheproof.check.phases import shares
from cacheproof.check.sequential.machine import Tally
from cacheproof.check.sequential.run import CheckInterrupted, CheckOptions, CheckReport, ScopeCovered, run_check
from cacheproof.check.sequential.scope import SMALL, Phase
from cacheproof.check.workers import CrewResult, Hooks, ParentHooks, WorkersSummary, run_crew
from cacheproof.cmdline.databases import DatabaseChoice, open_database
from cacheproof.sandbox.factories import check_impl_syntax, load_factory


@dataclass(frozen=True)
class MergedReport(CheckReport):
    """`run_check`'s report over `workers` processes; `winner` (0-based) found the first failure, with `winner_seed`."""

    workers: int = 1
    winner: int | None = None
    winner_seed: int | None = None

    @property
    def crew(self) -> WorkersSummary:
        return WorkersSummary(self.workers, self.winner, self.winner_seed)


def worker_rows(report: Any) -> dict[str, str]:
    """The `workers` row of a merged report; none for a report of one process."""
    crew = getattr(report, "crew", None)
    return {} if crew is None else crew.row()


def worker_json(report: Any) -> dict[str, Any]:
    """The `workers` field of a merged report's JSON; none for a report of one process."""
    crew = getattr(report, "crew", None)
    return {} if crew is None else crew.to_json()


def workers_check(workers: int, phases: tuple[Phase, ...], database: DatabaseChoice | None) -> Callable[..., CheckReport]:
    """`run_check` over `workers` processes (`cacheproof check --workers`), called as `run_check` is
    (its `factory` is unused: each worker loads `impl`). ValueError when a phase of `phases` has
    fewer examples than workers."""
    shares(phases, workers)

    def check(factory: Callable[[int], Any], **fields: Any) -> CheckReport:
        return run_workers(CheckOptions(**fields), workers, database)

    return check


def run_workers(options: CheckOptions, workers: int, database: DatabaseChoice | None = None) -> MergedReport:
    """The check `options` describes, over `workers` processes sharing the example database of
    `database`. `options.on_example` gets a Tally of the summed examples and steps,
    `options.on_shrink` and `options.on_counterexample` the winner's; `options.database` and
    `options.seed` are replaced by each worker's. UsageAbort when a worker reports one or dies."""
    phases = tuple(options.phases) if options.phases is not None else (
        Phase(SMALL, options.examples, options.steps_per_example),)
    seeds = [None if options.seed is None else options.seed + index for index in range(workers)]
    own = [replace(options, seed=seed, phases=share, examples=sum(phase.examples for phase in share),
                   on_example=None, on_shrink=None, on_counterexample=None, database=None)
           for seed, share in zip(seeds, shares(phases, workers))]
    result = run_crew(_work, own, seeds, database, ParentHooks(
        None if options.on_example is None else lambda examples, steps: options.on_example(_tally(examples, steps)),
        options.on_shrink, options.on_counterexample,
    ))
    return merged(result, phases)


def merged(result: CrewResult, phases: tuple[Phase, ...]) -> MergedReport:
    """One report of every worker's (see the module); CheckInterrupted when interrupted before any failure."""
    reports = result.in_order
    winning = result.winning
    scope = _merged_scope([report.scope for report in reports]) if reports else ScopeCovered.of(Tally(), phases, None)
    common = dict(
        examples=result.examples, steps=result.steps, seconds=result.seconds, scope=scope,
        coverage=result.coverage(), workers=result.workers, interrupted=result.interrupted,
    )
    if winning is None:
        report = MergedReport(ok=not result.interrupted, counterexample=None, **common)
        if result.interrupted:
            raise CheckInterrupted(report)
        return report
    return MergedReport(
        ok=False, counterexample=winning.counterexample, counterexamples=winning.counterexamples,
        shrinking_interrupted=winning.shrinking_interrupted, first_failure_example=result.first_failure[0],
        first_failure_seconds=result.first_failure[1], first_report_seconds=winning.first_report_seconds,
        winner=result.winner, winner_seed=result.seeds[result.winner], **common,
    )


def _tally(examples: int, steps: int) -> Tally:
    tally = Tally()
    tally.examples, tally.steps = examples, steps
    return tally


def _merged_scope(scopes: list[ScopeCovered]) -> ScopeCovered:
    """What the workers' examples reached together: the largest of each measure, every scope and key type."""
    return ScopeCovered(
        tuple(dict.fromkeys(name for scope in scopes for name in scope.scopes)),
        max(scope.most_live_entries for scope in scopes),
        max(scope.most_distinct_keys for scope in scopes),
        tuple(sorted({key_type for scope in scopes for key_type in scope.key_types})),
        max(scope.largest_capacity for scope in scopes),
        max(scope.longest_sequence for scope in scopes),
        next((scope.capacity_cap for scope in scopes if scope.capacity_cap is not None), None),
    )


def _work(options: CheckOptions, database: DatabaseChoice | None, hooks: Hooks) -> CheckReport:
    """One worker of the crew: `run_check` on its share; Ctrl-C's partial report is its report."""
    factory = check_impl_syntax(options.impl) if options.isolate else load_factory(options.impl)
    try:
        return run_check(factory, replace(
            options, database=None if database is None else open_database(database),
            on_example=lambda tally: hooks.progress(tally.examples + tally.rejected, tally.steps),
            on_shrink=hooks.shrink, on_counterexample=lambda example, seconds: hooks.counterexample(example),
        ))
    except CheckInterrupted as interrupted:
        return interrupted.report
