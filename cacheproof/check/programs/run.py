"""`run_program_check`: Hypothesis draws programs of calls from a kind's generator; each call runs
on the model and the implementation side by side; the first difference fails the example, and
Hypothesis shrinks it (fewer calls, smaller arguments).

Every distinct divergence is reported: after the first, further runs reject examples whose
divergence is of a kind already reported (operation, the spec's outcome, the implementation's
outcome, whether only the snapshot differs), up to `max_divergences`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from cacheproof.check.programs.generators import CallGenerator
from cacheproof.check.sequential.draws import seeded_draws
from cacheproof.contract.calls import Call
from cacheproof.contract.steps import StepDifference, differential_step
from cacheproof.spec.kind import SpecKind

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS = 40


@dataclass(frozen=True)
class ProgramOptions:
    """One check of a spec kind: `examples` programs of up to `steps` calls from `seed`, the model
    under `semantics` (None: the kind's contract), calls among `operations` (None: all), misuse
    calls when `misuse`, up to `max_divergences` distinct divergences; `on_example(examples,
    steps)` after each program."""

    examples: int = DEFAULT_EXAMPLES
    steps: int = DEFAULT_STEPS
    seed: int = 0
    semantics: Any = None
    operations: tuple[str, ...] | None = None
    misuse: bool = True
    max_divergences: int = 1
    on_example: Callable[[int, int], None] | None = None


@dataclass(frozen=True)
class ProgramCounterexample:
    """A shrunk program that diverges at its last call."""

    size: int
    calls: tuple[Call, ...]
    difference: StepDifference

    def kind_of(self) -> tuple:
        return _kind_of(self.difference)


@dataclass
class ProgramReport:
    """The verdict: ok when no program diverged; the counterexamples found, shrunk, first first."""

    kind: str
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    seconds_to_failure: float | None = None
    counterexamples: list[ProgramCounterexample] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.counterexamples

    @property
    def counterexample(self) -> ProgramCounterexample | None:
        return self.counterexamples[0] if self.counterexamples else None


class ProgramDivergence(AssertionError):
    """Raised inside an example at the first difference (Hypothesis then shrinks the program)."""


def _kind_of(difference: StepDifference) -> tuple:
    return (
        difference.call.op,
        difference.expected.error or "returns",
        difference.actual.crash and "crash" or difference.actual.error or "returns",
        difference.outcome_differs,
        tuple(view for view, _, _ in difference.views),
    )


def run_program_check(
    kind: SpecKind, factory: Callable[[int], Any], generator: CallGenerator, options: ProgramOptions | None = None, **fields: Any
) -> ProgramReport:
    """Check `factory(size)` against `kind`'s model; see the module docstring."""
    options = replace(options or ProgramOptions(), **fields)
    operations = options.operations or kind.names
    report = ProgramReport(kind.name)
    started = time.perf_counter()
    last: list[ProgramCounterexample] = []

    def new_model(size: int) -> Any:
        return kind.new(size) if options.semantics is None else kind.new(size, options.semantics)

    def program(data: st.DataObject) -> None:
        size = data.draw(generator.sizes(), label="size")
        length = data.draw(st.integers(1, options.steps), label="calls")
        model, implementation = new_model(size), factory(size)
        calls: list[Call] = []
        for _ in range(length):
            call = generator.draw_call(data.draw, model, operations, options.misuse)
            calls.append(call)
            report.steps += 1
            difference = differential_step(model, implementation, call, kind.views)
            if difference is not None:
                if any(_kind_of(difference) == found.kind_of() for found in report.counterexamples):
                    hypothesis.reject()
                last[:] = [ProgramCounterexample(size, tuple(calls), difference)]
                if report.seconds_to_failure is None:
                    report.seconds_to_failure = time.perf_counter() - started
                raise ProgramDivergence(difference.describe())
            model.check_invariants()
        report.examples += 1
        if options.on_example is not None:
            options.on_example(report.examples, report.steps)

    for run in range(options.max_divergences):
        test = settings(
            max_examples=options.examples, deadline=None, database=None, derandomize=False,
            phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck), print_blob=False,
        )(hypothesis.given(st.data())(program))
        test = hypothesis.seed(options.seed + run)(test)
        last.clear()
        try:
            with seeded_draws():
                test()
        except ProgramDivergence:
            report.counterexamples.append(last[0])
            continue
        except Unsatisfiable:  # every example diverged in a kind already reported
            break
        break
    report.seconds = time.perf_counter() - started
    return report
