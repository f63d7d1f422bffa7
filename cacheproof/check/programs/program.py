"""One program of a spec kind: drawn and run on a fresh model and implementation side by side
(`run_program`), replayed (`replay_program`) and shrunk (`shrink_program`).

A program is read whole out of its draws (`draws.ProgramDraws`): its swarm of operations
(`draws.swarm`), its size, then each call, drawn by the kind's generator from the model's state.
After each call the outcomes and the kind's views are compared (`contract.steps.differential_step`)
and the model's invariants checked; the first difference ends the program. The checker
(`run.run_program_check`) and the pytest test of a kind (`cacheproof.testing.kind_functions`) run
programs through here alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cacheproof.check.programs.draws import Draws, swarm
from cacheproof.check.programs.generators import CallGenerator
from cacheproof.contract.calls import Call
from cacheproof.contract.steps import StepDifference, differential_step
from cacheproof.sandbox.fault_search import DIVERGENCE, Failure, shrink_failure
from cacheproof.spec.kind import SpecKind

SHRINK_SECONDS = 10.0
"""The budget of the checker's own shrinking of one counterexample."""


@dataclass(frozen=True)
class ProgramCounterexample:
    """A program that diverges at its last call."""

    size: int
    calls: tuple[Call, ...]
    difference: StepDifference

    def kind_of(self) -> tuple:
        return divergence_kind(self.difference)


@dataclass(frozen=True)
class ProgramRun:
    """What one program did: its size, the calls it made, and the difference at its last call (None:
    every call agreed)."""

    size: int
    calls: tuple[Call, ...]
    difference: StepDifference | None


@dataclass(frozen=True)
class ProgramSetup:
    """What running a kind's programs needs: the kind, a fresh model of a size (`new_model`), the
    implementation's `factory`, the kind's call `generator`, the `operations` programs may call,
    whether misuse calls are made, and at most `steps` calls per program."""

    kind: SpecKind
    new_model: Callable[[int], Any]
    factory: Callable[[int], Any]
    generator: CallGenerator
    operations: tuple[str, ...]
    misuse: bool
    steps: int


def divergence_kind(difference: StepDifference) -> tuple:
    """Which divergence this is, for telling distinct ones apart: the operation, the spec's outcome,
    the implementation's, whether the outcome differs, and which views differ."""
    return (
        difference.call.op,
        difference.expected.error or "returns",
        difference.actual.crash and "crash" or difference.actual.error or "returns",
        difference.outcome_differs,
        tuple(view for view, _, _ in difference.views),
    )


def run_program(
    setup: ProgramSetup, draws: Draws, record: Callable[[str, str], None] | None = None,
) -> ProgramRun:
    """Draw one program from `draws` and run it to its end or its first difference; `record(operation,
    outcome)` is told each call's outcome on the model, and the call's case (the generator's
    `case_of`) when it returns."""
    plan = swarm(draws, setup.operations)
    size = setup.generator.size(draws)
    model, implementation = setup.new_model(size), setup.factory(size)
    calls: list[Call] = []
    for _ in range(setup.steps):
        call = setup.generator.draw_call(draws, model, plan, setup.misuse)
        calls.append(call)
        seen = record if record is None else _with_case(record, setup.generator.case_of(call))
        difference = differential_step(model, implementation, call, setup.kind.views, seen)
        if difference is not None:
            return ProgramRun(size, tuple(calls), difference)
        model.check_invariants()
    return ProgramRun(size, tuple(calls), None)


def _with_case(record: Callable[[str, str], None], case: str | None) -> Callable[[str, str], None]:
    """`record`, also told `case` when the call returns (a call that raises never reached its case)."""
    if case is None:
        return record

    def seen(operation: str, outcome: str) -> None:
        record(operation, outcome)
        if outcome.startswith("returns"):
            record(operation, case)
    return seen


def replay_program(setup: ProgramSetup, size: int, calls: list[Call]) -> tuple[int, StepDifference] | None:
    """Where `calls` on a fresh model and implementation of `size` first differ, and how; None if nowhere."""
    model, implementation = setup.new_model(size), setup.factory(size)
    for step, call in enumerate(calls):
        difference = differential_step(model, implementation, call, setup.kind.views)
        if difference is not None:
            return step, difference
        model.check_invariants()
    return None


def shrink_program(setup: ProgramSetup, example: ProgramCounterexample) -> ProgramCounterexample:
    """`example` with every call dropped, and every argument simplified, that its divergence (of the
    same kind) does not need (`sandbox.fault_search.shrink_failure`, SHRINK_SECONDS at most)."""
    def attempt(candidate: list[Call]) -> Failure | None:
        found = replay_program(setup, example.size, candidate)
        if found is None or divergence_kind(found[1]) != example.kind_of():
            return None
        return Failure(found[0], found[1].describe(), DIVERGENCE)

    first = Failure(len(example.calls) - 1, example.difference.describe(), DIVERGENCE)
    calls, _, _ = shrink_failure(attempt, example.calls, first, SHRINK_SECONDS)
    found = replay_program(setup, example.size, calls)
    return example if found is None else ProgramCounterexample(example.size, tuple(calls), found[1])
