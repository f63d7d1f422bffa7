"""`run_program_check`: Hypothesis draws each program whole, as one byte string, and the kind's
generator reads the program's swarm of operations (`draws.swarm`), its size and every call's picks
out of it (`draws.ProgramDraws`), suited to the model's state; each call runs on the model and the
implementation side by side; the first difference fails the example, and Hypothesis shrinks the
byte string (fewer and simpler picks: simpler calls).

Every distinct divergence is reported: after the first, further runs reject examples whose
divergence is of a kind already reported (operation, the spec's outcome, the implementation's
outcome, whether only the snapshot differs), up to `max_divergences`. The runs share one budget of
`examples`: the programs run to their end or to their divergence, rejected ones included (a run's
shrinking is free).

The implementation runs as the tensor cache's does (docs/robustness.md): in-process, every call,
view and the factory noted on a `Watch` (`sandbox.guarded_program`) and the run supervised
(`guarded_call.supervised`), or, with `isolate`, in a child process (`sandbox.program_isolation`).
A call that does not return within `call_timeout`, or kills the child, ends the search: the program
so far is shrunk (each attempt supervised, a fresh implementation each) and reported with the
message the cache's check words (`cache.lookup((3,)) did not return within 1 s`). With a time
budget, a run ends at most its shrinking cap (`fault_search.shrink_seconds`) after the budget.

`run_program_phases` runs a check in phases (`check --thorough`: the kind's scopes, one after the
other, until one finds a counterexample). A phase that Hypothesis does not shrink (`Phase.shrink`
False: the long lives) draws each program from a `random.Random` seeded by the 8 bytes Hypothesis
draws, so a program may be longer than Hypothesis's own buffer; its failure is shrunk by the
checker's shrinking alone.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NoReturn

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import ExampleDatabase
from hypothesis import strategies as st
from hypothesis.errors import Flaky, Unsatisfiable

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.phases import Phase as ScopePhase
from cacheproof.check.programs.draws import ProgramDraws
from cacheproof.check.programs.generators import CallGenerator, generator_for
from cacheproof.check.workers import WorkersSummary
from cacheproof.check.programs.program import (
    ProgramCounterexample, ProgramSetup, ProgramTrail, SpecBroken, divergence_kind, interrupted_program, run_program,
    shrink_program,
)
from cacheproof.check.seeded_draws import seeded_draws
from cacheproof.cmdline.databases import RunStop, namespaced
from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox.fault_search import SPEC_BROKEN, Failure, shrink_seconds
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT, Watch, hang_message, supervised
from cacheproof.sandbox.guarded_program import WatchedFactory
from cacheproof.sandbox.program_isolation import IsolatedProgramFactory
from cacheproof.spec.kind import SpecKind

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS = 40
HYPOTHESIS_SHRINK_ATTEMPTS = 100
"""Hypothesis shrinks a failing program's byte string for this many attempts at most (a count, not
seconds, so that a seed gives the same counterexample on any machine); then the checker drops
the calls the divergence does not need (`sandbox.fault_search.shrink_failure`) from the smallest
failure found. Hypothesis alone took 4-17 s to a first report on model_tests' broken caches, and
kept programs of 33 repeated calls that its byte-level shrinking cannot shorten; the two together
report within 2 s, as short or shorter (docs/search-power.md)."""
BYTES_PER_CALL = 12
"""Bytes of a program's byte string per call: enough for the call with the most picks."""
SEED_BYTES = 8
"""Bytes Hypothesis draws for a seeded program (`ProgramOptions.seeded`): the seed of its `random.Random`."""


@dataclass(frozen=True)
class ProgramOptions:
    """One check of a spec kind: `examples` programs of up to `steps` calls from `seed`, the model
    under `semantics` (None: the kind's contract), calls among `operations` (None: all), misuse
    calls when `misuse`, up to `max_divergences` distinct divergences; `on_example(examples,
    steps)` after each program. `database` (None: none) keeps the failing programs of the first run
    and replays them first, apart for each kind, semantics, operations and length (the caller keeps
    implementations apart: `cacheproof.cmdline.databases.namespaced(database, impl)`). A call that
    does not return within `call_timeout` seconds (None: no limit) is a counterexample; `isolate`
    runs the implementation in a child process built from `impl` ("module:factory"; the factory
    passed is then unused); `factory_calls`: the calls of the factory made before the run (its
    probes), so that a factory failing later says which of its calls failed. With `budget_seconds`, programs are drawn until that time is spent.
    `seeded`: each program is drawn from a `random.Random` that Hypothesis seeds, and Hypothesis does
    not shrink it (long programs). `on_shrink(found_at, length)` is told when the first failure (at
    the `found_at`th program) is found, with its length; `on_counterexample(example, seconds)` the
    first counterexample as soon as it is shrunk, before any search for further ones."""

    examples: int = DEFAULT_EXAMPLES
    steps: int = DEFAULT_STEPS
    seed: int = 0
    semantics: Any = None
    operations: tuple[str, ...] | None = None
    misuse: bool = True
    max_divergences: int = 1
    on_example: Callable[[int, int], None] | None = None
    budget_seconds: float | None = None
    database: ExampleDatabase | None = None
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT
    isolate: bool = False
    impl: str = "factory"
    factory_calls: int = 0
    seeded: bool = False
    on_shrink: Callable[[int | None, int], None] | None = None
    on_counterexample: Callable[[ProgramCounterexample, float], None] | None = None


@dataclass
class ProgramReport:
    """The verdict: ok when no program diverged; the counterexamples found, shrunk, first first.
    `examples` counts the programs the budget counts (see the module docstring), `first_failure_example`
    the ordinal among them of the first that diverged, `first_report_seconds` the time from the start
    to its counterexample, shrunk. `interrupted`: the user's Ctrl-C stopped the run after a failure
    (before one, `run_program_check` raises KeyboardInterrupt: no verdict), `shrinking_interrupted`:
    while shrinking the last counterexample, reported as the smallest failing program so far. What the programs reached: the `scopes` they
    were drawn from, the `largest_size` of a model and the `longest_sequence` of calls. `workers`:
    the crew's summary when the check ran in several processes (`cacheproof.check.workers`)."""

    kind: str
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    seconds_to_failure: float | None = None
    first_failure_example: int | None = None
    first_report_seconds: float | None = None
    interrupted: bool = False
    shrinking_interrupted: bool = False
    counterexamples: list[ProgramCounterexample] = field(default_factory=list)
    coverage: OutcomeCoverage | None = None
    scopes: tuple[str, ...] = ()
    largest_size: int = 0
    longest_sequence: int = 0
    workers: WorkersSummary | None = None

    measures: dict[str, Any] = field(default_factory=dict)

    def scope_json(self) -> dict[str, Any]:
        """The JSON report's `scope`: what the programs reached; the generator's own `measures`
        (`CallGenerator.reached`) in place of `largest_size` where it has them."""
        reached = self.measures or {"largest_size": self.largest_size}
        return {"scopes": list(dict.fromkeys(self.scopes)), **reached, "longest_sequence": self.longest_sequence}

    def scope_rows(self) -> dict[str, str]:
        """The report table's rows of `scope_json`, one per measure ("largest capacity": "64")."""
        return {("scope" if name == "scopes" else name.replace("_", " ")): _row_text(value)
                for name, value in self.scope_json().items()}

    @property
    def ok(self) -> bool:
        return not self.counterexamples

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def counterexample(self) -> ProgramCounterexample | None:
        return self.counterexamples[0] if self.counterexamples else None


def _row_text(value: Any) -> str:
    if isinstance(value, list):
        return " + ".join(map(str, value)) or "-"
    return "-" if value is None else str(value)


def merged_measures(measures: Any) -> dict[str, Any]:
    """The generators' `reached` measures of several runs as one: the largest of each number, the
    union of each list, sorted (a phase's scope lists once), a None only where every run has one."""
    merged: dict[str, Any] = {}
    for reached in measures:
        for name, value in reached.items():
            known = merged.get(name)
            if isinstance(value, list):
                merged[name] = sorted(set(known or ()) | set(value))
            elif known is None or value is not None and value > known:
                merged[name] = value
    return merged


class ProgramDivergence(AssertionError):
    """Raised inside an example at the first difference (Hypothesis then shrinks the program)."""


class _HypothesisShrinkDone(RunStop):
    """Ends Hypothesis's shrinking after HYPOTHESIS_SHRINK_ATTEMPTS (not a failure to Hypothesis)."""


class _BudgetSpent(RunStop):
    """Ends a run whose programs, or time, have spent the budget (a BaseException: not a failure to
    Hypothesis)."""


def run_program_check(
    kind: SpecKind, factory: Callable[[int], Any] | None, generator: CallGenerator, options: ProgramOptions | None = None,
    **fields: Any,
) -> ProgramReport:
    """Check `factory(size)` against `kind`'s model; see the module docstring."""
    options = replace(options or ProgramOptions(), **fields)
    operations = options.operations or kind.default_operations
    checked = (op for op in kind.operations if op.name in operations)
    coverage = OutcomeCoverage(checked, generator.cases(options.semantics))
    report = ProgramReport(kind.name, coverage=coverage)
    started = time.perf_counter()
    last: list[ProgramCounterexample] = []
    shrinking = [False]  # the run has failed: Hypothesis is shrinking, and its programs are not counted
    shrink_attempts = [0]
    watch = Watch(options.call_timeout)
    watch.factory_calls = options.factory_calls
    trail = ProgramTrail()
    watch.last_call = lambda: trail.calls[-1] if trail.calls else None
    implementations = IsolatedProgramFactory(options.impl, kind.names + kind.compared_views, watch) if options.isolate \
        else WatchedFactory(factory, watch, options.impl or "factory")

    def counted() -> None:
        if not shrinking[0]:
            report.examples += 1
            report.coverage.programs += 1

    def new_model(size: int) -> Any:
        return kind.new(size) if options.semantics is None else kind.new(size, options.semantics)

    setup = ProgramSetup(kind, new_model, implementations, generator, operations, options.misuse, options.steps)
    deadline = None if options.budget_seconds is None else started + options.budget_seconds
    cap = shrink_seconds(options.call_timeout)
    end = None if deadline is None else deadline + cap  # the latest a run ends: its budget, then one shrinking

    def shrink_budget() -> float:
        return cap if end is None else max(min(cap, end - time.perf_counter()), 0.0)

    blob_bytes = SEED_BYTES if options.seeded else options.steps * BYTES_PER_CALL
    programs = {"blob": st.binary(min_size=blob_bytes, max_size=blob_bytes)}

    def cacheproof_program(blob: bytes) -> None:
        if shrinking[0]:
            shrink_attempts[0] += 1
            if shrink_attempts[0] > HYPOTHESIS_SHRINK_ATTEMPTS or end is not None and time.perf_counter() > end:
                raise _HypothesisShrinkDone()
        elif report.examples >= options.examples or (
                deadline is not None and time.perf_counter() > deadline and report.examples > 0):  # one at least
            raise _BudgetSpent()
        run_one(random.Random(blob) if options.seeded else ProgramDraws(blob))

    def run_one(draws: Any) -> None:
        """One program; its divergence, unless of a kind already reported, fails the example, and
        so does the spec breaking its own invariant."""
        try:
            program = run_program(setup, draws, report.coverage.record, trail)
        except SpecBroken as broken:
            spec_broke(broken)
        report.steps += len(program.calls)
        if not shrinking[0]:
            report.largest_size = max(report.largest_size, program.size)
            report.longest_sequence = max(report.longest_sequence, len(program.calls))
        counted()
        if program.difference is not None:
            if any(divergence_kind(program.difference) == found.kind_of() for found in report.counterexamples):
                hypothesis.reject()
            if not last or len(program.calls) < len(last[0].calls):  # the smallest failure of the run
                last[:] = [ProgramCounterexample(program.size, program.calls, program.difference)]
            note_failure(len(program.calls))
            shrinking[0] = True
            raise ProgramDivergence(program.difference.describe())
        if options.on_example is not None and not shrinking[0]:
            options.on_example(report.examples, report.steps)

    def spec_broke(broken: SpecBroken) -> NoReturn:
        """Fail the example with the program so far, which ends where the spec broke its invariant."""
        calls = tuple(trail.calls[: broken.step + 1])
        report.steps += len(calls)
        counted()
        if not last or len(calls) < len(last[0].calls):
            last[:] = [ProgramCounterexample(trail.size, calls, None, Failure(broken.step, str(broken), SPEC_BROKEN))]
        note_failure(len(calls))
        shrinking[0] = True
        raise ProgramDivergence(str(broken))

    def note_failure(length: int) -> None:
        if report.seconds_to_failure is None:
            report.seconds_to_failure = time.perf_counter() - started
            report.first_failure_example = report.examples
            if options.on_shrink is not None:
                options.on_shrink(report.first_failure_example, length)

    def shrunk(example: ProgramCounterexample) -> ProgramCounterexample | None:
        """`example` shrunk; after the user's Ctrl-C, the smallest failing program so far (None when it
        no longer fails so)."""
        smallest = [example.size, example.calls]
        try:
            return shrink_program(setup, example, watch, shrink_budget(),
                                  lambda size, calls: smallest.__setitem__(slice(None), [size, tuple(calls)]))
        except KeyboardInterrupt:
            return interrupted(example, *smallest)

    def interrupted(example: ProgramCounterexample, size: int, calls: tuple) -> ProgramCounterexample | None:
        report.interrupted = report.shrinking_interrupted = True
        try:
            return interrupted_program(setup, example, size, calls, watch)
        except KeyboardInterrupt:  # a second Ctrl-C: no replay
            return None

    def keep(example: ProgramCounterexample | None) -> bool:
        """Report `example` (unless None); whether the search may go on (no Ctrl-C stopped it)."""
        if example is not None:
            report.counterexamples.append(example)
            note_report()
        return not report.interrupted

    def note_report() -> None:
        if report.first_report_seconds is None:
            report.first_report_seconds = time.perf_counter() - started
            if options.on_counterexample is not None:
                options.on_counterexample(report.counterexamples[0], report.first_report_seconds)

    def describe_hang(name: str, args: tuple) -> str:
        return hang_message(name, args, watch.timeout, watch.last_call())

    def faulted(fault: CacheFault) -> ProgramCounterexample:
        """The program running when a call hung or killed its process, ending at that call."""
        if not shrinking[0]:
            report.examples += 1
            report.steps += len(trail.calls)
        note_failure(len(trail.calls))
        failure = Failure(len(trail.calls) - 1, fault.message, fault.kind)
        return ProgramCounterexample(trail.size, tuple(trail.calls), None, failure)

    try:
        for run in range(options.max_divergences):
            if report.examples >= options.examples:
                break
            database = None if options.database is None or run > 0 else namespaced(
                options.database, kind.name, options.semantics, operations, options.misuse, options.steps,
            )
            test = hypothesis.seed(options.seed + run)(hypothesis.given(**programs)(cacheproof_program))
            test = settings(  # after @seed, which drops the database
                max_examples=options.examples - report.examples + 1, deadline=None, database=database, derandomize=False,
                phases=((Phase.reuse,) if database is not None else ()) + (Phase.generate,)
                + (() if options.seeded else (Phase.shrink,)),
                suppress_health_check=list(HealthCheck), print_blob=False,
            )(test)
            last.clear()
            shrinking[0] = False
            shrink_attempts[0] = 0

            def search() -> None:
                with seeded_draws():
                    test()

            try:
                supervised(search, watch, describe_hang)
            except _BudgetSpent:
                break
            except (ProgramDivergence, _HypothesisShrinkDone, Flaky):
                if not last:  # Hypothesis saw a failure that no program of this run noted
                    raise
                if not keep(shrunk(last[0])) or report.counterexamples[-1].fault is not None:
                    break  # a fault (not deterministic, say) ends the search, as a hang or a crash does
                continue
            except CacheFault as fault:  # a hang or a crash ends the search: each further one would cost as much
                keep(shrunk(faulted(fault)))
                break
            except Unsatisfiable:  # every example diverged in a kind already reported
                break
            except KeyboardInterrupt:  # the user's Ctrl-C: while Hypothesis shrank, or in the search for more
                if not (shrinking[0] and last) and not report.counterexamples:
                    raise
                report.interrupted = True
                if shrinking[0] and last:
                    keep(interrupted(last[0], last[0].size, last[0].calls))
                break
            break
    finally:
        implementations.close()
    if report.interrupted and not report.counterexamples:  # nothing that fails again: no verdict
        raise KeyboardInterrupt
    report.seconds = time.perf_counter() - started
    report.measures = dict(getattr(generator, "reached", dict)())
    return report


def run_program_phases(
    kind: SpecKind, factory: Callable[[int], Any] | None, phases: tuple[ScopePhase, ...],
    options: ProgramOptions | None = None, **fields: Any,
) -> ProgramReport:
    """`run_program_check` on each of `phases` in turn (its scope given to the kind's generator, its
    examples and steps), until one finds a counterexample: one report, the counts summed (the
    first failure counted over every phase), `on_example` told the sums."""
    options = replace(options or ProgramOptions(), **fields)
    total = ProgramReport(kind.name)
    started = time.perf_counter()
    for phase in phases:
        done = (total.examples, total.steps)
        on_example = None if options.on_example is None else (
            lambda examples, steps, done=done: options.on_example(done[0] + examples, done[1] + steps))
        on_shrink = None if options.on_shrink is None else (
            lambda found_at, length, done=done: options.on_shrink(done[0] + found_at, length))
        report = run_program_check(
            kind, factory, generator_for(kind.name, phase.scope), options, examples=phase.examples, steps=phase.steps,
            seeded=not phase.shrink, on_example=on_example, on_shrink=on_shrink,
        )
        if report.first_failure_example is not None:
            total.first_failure_example = total.examples + report.first_failure_example
            total.seconds_to_failure = time.perf_counter() - started - report.seconds + report.seconds_to_failure
            if report.first_report_seconds is not None:
                total.first_report_seconds = time.perf_counter() - started - report.seconds + report.first_report_seconds
        total.examples += report.examples
        total.steps += report.steps
        total.scopes += (getattr(phase.scope, "name", "small"),)
        total.largest_size = max(total.largest_size, report.largest_size)
        total.longest_sequence = max(total.longest_sequence, report.longest_sequence)
        total.measures = merged_measures((total.measures, report.measures))
        total.counterexamples = report.counterexamples
        total.interrupted, total.shrinking_interrupted = report.interrupted, report.shrinking_interrupted
        total.coverage = OutcomeCoverage.merged((total.coverage, report.coverage))
        if not report.ok:
            break
    total.seconds = time.perf_counter() - started
    return total
