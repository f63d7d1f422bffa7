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
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import ExampleDatabase
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.programs.draws import ProgramDraws
from cacheproof.check.programs.generators import CallGenerator
from cacheproof.check.programs.program import (
    ProgramCounterexample, ProgramSetup, divergence_kind, run_program, shrink_program,
)
from cacheproof.check.sequential.draws import seeded_draws
from cacheproof.cmdline.databases import RunStop, namespaced
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


@dataclass(frozen=True)
class ProgramOptions:
    """One check of a spec kind: `examples` programs of up to `steps` calls from `seed`, the model
    under `semantics` (None: the kind's contract), calls among `operations` (None: all), misuse
    calls when `misuse`, up to `max_divergences` distinct divergences; `on_example(examples,
    steps)` after each program. `database` (None: none) keeps the failing programs of the first run
    and replays them first, apart for each kind, semantics, operations and length (the caller keeps
    implementations apart: `cacheproof.cmdline.databases.namespaced(database, impl)`)."""

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


@dataclass
class ProgramReport:
    """The verdict: ok when no program diverged; the counterexamples found, shrunk, first first.
    `examples` counts the programs the budget counts (see the module docstring), `first_failure_example`
    the ordinal among them of the first that diverged."""

    kind: str
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    seconds_to_failure: float | None = None
    first_failure_example: int | None = None
    counterexamples: list[ProgramCounterexample] = field(default_factory=list)
    coverage: OutcomeCoverage | None = None

    @property
    def ok(self) -> bool:
        return not self.counterexamples

    @property
    def counterexample(self) -> ProgramCounterexample | None:
        return self.counterexamples[0] if self.counterexamples else None


class ProgramDivergence(AssertionError):
    """Raised inside an example at the first difference (Hypothesis then shrinks the program)."""


class _HypothesisShrinkDone(RunStop):
    """Ends Hypothesis's shrinking after HYPOTHESIS_SHRINK_ATTEMPTS (not a failure to Hypothesis)."""


class _BudgetSpent(RunStop):
    """Ends a run whose programs, or time, have spent the budget (a BaseException: not a failure to
    Hypothesis)."""


def run_program_check(
    kind: SpecKind, factory: Callable[[int], Any], generator: CallGenerator, options: ProgramOptions | None = None, **fields: Any
) -> ProgramReport:
    """Check `factory(size)` against `kind`'s model; see the module docstring."""
    options = replace(options or ProgramOptions(), **fields)
    operations = options.operations or kind.names
    checked = (op for op in kind.operations if op.name in operations)
    coverage = OutcomeCoverage(checked, generator.cases(options.semantics))
    report = ProgramReport(kind.name, coverage=coverage)
    started = time.perf_counter()
    last: list[ProgramCounterexample] = []
    shrinking = [False]  # the run has failed: Hypothesis is shrinking, and its programs are not counted
    shrink_attempts = [0]

    def counted() -> None:
        if not shrinking[0]:
            report.examples += 1
            report.coverage.programs += 1

    def new_model(size: int) -> Any:
        return kind.new(size) if options.semantics is None else kind.new(size, options.semantics)

    setup = ProgramSetup(kind, new_model, factory, generator, operations, options.misuse, options.steps)
    deadline = None if options.budget_seconds is None else started + options.budget_seconds

    programs = {"blob": st.binary(min_size=options.steps * BYTES_PER_CALL, max_size=options.steps * BYTES_PER_CALL)}

    def cacheproof_program(blob: bytes) -> None:
        if shrinking[0]:
            shrink_attempts[0] += 1
            if shrink_attempts[0] > HYPOTHESIS_SHRINK_ATTEMPTS:
                raise _HypothesisShrinkDone()
        elif report.examples >= options.examples or deadline is not None and time.perf_counter() > deadline:
            raise _BudgetSpent()
        run_one(ProgramDraws(blob))

    def run_one(draws: Any) -> None:
        """One program; its divergence, unless of a kind already reported, fails the example."""
        program = run_program(setup, draws, report.coverage.record)
        report.steps += len(program.calls)
        counted()
        if program.difference is not None:
            if any(divergence_kind(program.difference) == found.kind_of() for found in report.counterexamples):
                hypothesis.reject()
            if not last or len(program.calls) < len(last[0].calls):  # the smallest failure of the run
                last[:] = [ProgramCounterexample(program.size, program.calls, program.difference)]
            if report.seconds_to_failure is None:
                report.seconds_to_failure = time.perf_counter() - started
                report.first_failure_example = report.examples
            shrinking[0] = True
            raise ProgramDivergence(program.difference.describe())
        if options.on_example is not None and not shrinking[0]:
            options.on_example(report.examples, report.steps)

    for run in range(options.max_divergences):
        if report.examples >= options.examples:
            break
        database = None if options.database is None or run > 0 else namespaced(
            options.database, kind.name, options.semantics, operations, options.misuse, options.steps,
        )
        test = hypothesis.seed(options.seed + run)(hypothesis.given(**programs)(cacheproof_program))
        test = settings(  # after @seed, which drops the database
            max_examples=options.examples - report.examples + 1, deadline=None, database=database, derandomize=False,
            phases=((Phase.reuse,) if database is not None else ()) + (Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck), print_blob=False,
        )(test)
        last.clear()
        shrinking[0] = False
        shrink_attempts[0] = 0
        try:
            with seeded_draws():
                test()
        except _BudgetSpent:
            break
        except (ProgramDivergence, _HypothesisShrinkDone):
            report.counterexamples.append(shrink_program(setup, last[0]))
            continue
        except Unsatisfiable:  # every example diverged in a kind already reported
            break
        break
    report.seconds = time.perf_counter() - started
    return report
