"""One program of a spec kind: drawn and run on a fresh model and implementation side by side
(`run_program`), replayed (`replay_program`; supervised, so that a hang or a crash is a failure at
its call: `program_failure`) and shrunk (`shrink_program`).

A program is read whole out of its draws (`draws.ProgramDraws`): its swarm of operations
(`draws.swarm`), its size, then each call, drawn by the kind's generator from the model's state.
After each call the outcomes and the kind's views are compared (`contract.steps.differential_step`)
and the model's invariants checked; the first difference ends the program. A model that breaks its
own invariant ends it too, even at a call that diverges (`SpecBroken`): that program is reported,
shrunk, as a counterexample saying the spec broke the invariant, a bug of the spec or its profile,
not of the implementation. The checker (`run.run_program_check`) and the pytest test of every kind
(`cacheproof.testing.functions`) run programs through here alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from cacheproof.check.programs.draws import Draws, swarm
from cacheproof.check.programs.generators import CallGenerator
from cacheproof.check.programs.renumbering import renumbered
from cacheproof.contract.calls import Call, ValueRecipe, to_python
from cacheproof.contract.faults import CacheFault
from cacheproof.contract.sequence import first_divergence
from cacheproof.contract.snippet import DIVERGES
from cacheproof.contract.steps import StepDifference, differential_step, outcome_of
from cacheproof.sandbox.fault_search import DIVERGENCE, NOT_DETERMINISTIC, SPEC_BROKEN, Failure, ending_of
from cacheproof.sandbox.fault_search import not_deterministic
from cacheproof.sandbox.fault_search import shrink_failure, shrink_seconds
from cacheproof.sandbox.guarded_call import Watch, hang_message, supervised
from cacheproof.sandbox.lowering import lowest_failing
from cacheproof.spec.kind import SpecKind

CUT_SHORT = " (shrinking stopped when its time budget ran out)"
"""Added to the message of a counterexample whose shrinking ran out of time."""
INTERRUPTED = " (shrinking interrupted)"
"""Added to the message of a counterexample whose shrinking the user's Ctrl-C stopped."""
NONDETERMINISM_REPLAYS = 4
"""Replays of a diverging program before it is shrunk: one that does not diverge the same way on
each is reported as not deterministic (`unrepeated`), unshrunk."""


class SpecBroken(Exception):
    """The model broke one of its kind's invariants (`SpecKind` models' `check_invariants` raised
    their `InvariantViolation`) after the call at index `step`: the spec, or the profile it runs
    under, is wrong, whatever the implementation does."""

    def __init__(self, step: int, call: Call, violation: AssertionError) -> None:
        rule = (str(violation).splitlines() or [type(violation).__name__])[0]
        super().__init__(f"the spec broke its own invariant after {to_python(call)}: {rule} "
                         "(a bug of the spec or its profile, not of the implementation)")
        self.step = step


def checked_model(model: Any, step: int, call: Call) -> None:
    """Check `model`'s invariants after the call `call` at index `step`; SpecBroken if one breaks."""
    try:
        model.check_invariants()
    except AssertionError as violation:
        raise SpecBroken(step, call, violation) from violation


@dataclass(frozen=True)
class ProgramCounterexample:
    """A program that fails at its last call: it diverges there (`difference`), or, with `fault`,
    that call hangs or kills the process running the implementation, or the spec breaks its own
    invariant after it (`SPEC_BROKEN`; `difference` is then None).
    `cut_short`: its shrinking ran out of time, `interrupted`: the user's Ctrl-C stopped it, so it
    may not be the smallest."""

    size: int
    calls: tuple[Call, ...]
    difference: StepDifference | None
    fault: Failure | None = None
    cut_short: bool = False
    interrupted: bool = False

    def kind_of(self) -> tuple:
        return (self.fault.kind,) if self.fault is not None else divergence_kind(self.difference)

    @property
    def message(self) -> str:
        said = self.fault.message if self.fault is not None else self.difference.describe()
        return said + (CUT_SHORT if self.cut_short else "") + (INTERRUPTED if self.interrupted else "")

    @property
    def ending(self) -> str:
        """What the last call does, as the snippet marks it: diverges here, does not return, kills the process."""
        return DIVERGES if self.fault is None else ending_of(self.fault)


@dataclass
class ProgramTrail:
    """The program running now, as far as it has gone: its size and the calls made so far, the one
    running last (what a hang or a crash, which ends the program inside a call, reports)."""

    size: int = 0
    calls: list[Call] = field(default_factory=list)


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
    trail: ProgramTrail | None = None,
) -> ProgramRun:
    """Draw one program from `draws` and run it to its end or its first difference; `record(operation,
    outcome)` is told each call's outcome on the model, and the call's case (the generator's
    `case_of`) when it returns; `trail` follows the program as it goes. SpecBroken when the model
    breaks its own invariant (the program so far is `trail`'s)."""
    plan = swarm(draws, setup.operations)
    size = setup.generator.size(draws)
    calls: list[Call] = []
    if trail is not None:
        trail.size, trail.calls = size, calls
    model, implementation = setup.new_model(size), setup.factory(size)
    draw_call, case_of, misuse = setup.generator.draw_call, setup.generator.case_of, setup.misuse
    views, error_names, readers = setup.kind.compared_views, setup.kind.error_names, setup.kind.view_readers
    for _ in range(setup.steps):
        call = draw_call(draws, model, plan, misuse)
        calls.append(call)
        seen = record if record is None else _with_case(record, case_of(call))
        difference = differential_step(model, implementation, call, views, seen, error_names=error_names, readers=readers)
        checked_model(model, len(calls) - 1, call)  # before the difference: a broken spec judges nothing
        if difference is not None:
            return ProgramRun(size, tuple(calls), difference)
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


def replay_program(
    setup: ProgramSetup, size: int, calls: Sequence[Call], on_step: Callable[[int], None] | None = None,
) -> tuple[int, StepDifference] | None:
    """Where `calls` on a fresh model and implementation of `size` first differ, and how; None if
    nowhere. `on_step(index)` is told each call's index before it runs; SpecBroken when the model
    breaks its own invariant."""
    found = first_divergence(setup.factory, size, calls, on_step, kind=setup.kind, model=setup.new_model(size),
                             after_call=checked_model)
    return None if found is None else (found.step, found.difference)


def program_failure(
    setup: ProgramSetup, size: int, calls: Sequence[Call], watch: Watch | None,
) -> tuple[Failure, StepDifference | None] | None:
    """How `calls` fail on a fresh model and implementation of `size`: the failure and, for a
    divergence, its difference; None if they do not. Supervised by `watch` when given, so that a
    call that hangs or kills its process is a failure of that kind at that call; a model that
    breaks its own invariant is a SPEC_BROKEN failure at the call after which it broke."""
    at = [0]

    def replay() -> tuple[int, StepDifference] | None:
        return replay_program(setup, size, calls, lambda step: at.__setitem__(0, step))

    try:
        if watch is None:
            found = replay()
        else:
            watch.last_call = lambda: calls[at[0]] if calls else None
            found = supervised(replay, watch, lambda name, args: hang_message(name, args, watch.timeout, calls[at[0]]))
    except CacheFault as fault:
        return Failure(at[0], fault.message, fault.kind), None
    except SpecBroken as broken:
        return Failure(broken.step, str(broken), SPEC_BROKEN), None
    if found is None:
        return None
    return Failure(found[0], found[1].describe(), DIVERGENCE), found[1]


def shrink_program(
    setup: ProgramSetup, example: ProgramCounterexample, watch: Watch | None = None, seconds: float | None = None,
    on_smallest: Callable[[int, Sequence[Call]], None] | None = None,
) -> ProgramCounterexample:
    """`example` with every call dropped, and every argument simplified, that its failure (a
    divergence of the same kind, or the same fault) does not need (`sandbox.fault_search.shrink_failure`),
    each candidate replayed supervised by `watch` when given; then, for a divergence or the spec
    breaking its own invariant, its numbers lowered together (`renumbering.renumbered`: keys, byte
    counts), its size lowered (`smaller_sizes`, bisected where only one less fails:
    `sandbox.lowering.lowest_failing`) while it fails the same way, and shrunk and
    renumbered once more at the smallest; `seconds` at most (default `fault_search.shrink_seconds`
    of the watch's call timeout). A shrunk divergence is replayed once more for its difference (a
    broken spec for its message at the size reached). `on_smallest(size, calls)` is told the smallest
    failing program so far as shrinking goes (what a Ctrl-C reports: `interrupted_program`)."""
    kind = example.kind_of()
    if example.fault is None:
        unrepeatable = unrepeated(setup, example, watch)
        if unrepeatable is not None:
            return unrepeatable
    noted = None if on_smallest is None else (lambda calls, _: on_smallest(size, calls))

    def attempt_at(size: int) -> Callable[[list[Call]], Failure | None]:
        def attempt(candidate: list[Call]) -> Failure | None:
            found = program_failure(setup, size, candidate, watch)
            if found is None:
                return None
            failure, difference = found
            found_kind = (failure.kind,) if difference is None else divergence_kind(difference)
            return failure if found_kind == kind else None
        return attempt

    first = example.fault or Failure(len(example.calls) - 1, example.difference.describe(), DIVERGENCE)
    budget = shrink_seconds(None if watch is None else watch.timeout) if seconds is None else seconds
    deadline = time.monotonic() + budget
    size = example.size
    calls, failure, cut_short = shrink_failure(attempt_at(size), example.calls, first, budget, noted,
                                               states=states_at(setup, size))
    if failure.kind not in (DIVERGENCE, SPEC_BROKEN):
        return ProgramCounterexample(size, tuple(calls), None, failure, cut_short)
    if not cut_short:
        calls = renumbered(attempt_at(size), calls)
    lowered = False
    while not cut_short:  # each smaller size found is lowered from in turn, then shrunk at once
        found, _ = lowest_failing(size, smaller_sizes(size), lambda smaller, size=size, calls=calls:
                                  attempt_at(smaller)([_rescaled(call, size, smaller) for call in calls]))
        if found is None:
            break
        smaller = found[0]
        calls, size, lowered = [_rescaled(call, size, smaller) for call in calls], smaller, True
        if on_smallest is not None:
            on_smallest(size, calls)
        cut_short = time.monotonic() > deadline
    if lowered and not cut_short:
        found = attempt_at(size)(calls)
        calls, failure, cut_short = shrink_failure(attempt_at(size), calls, found, max(deadline - time.monotonic(), 0.0),
                                                   noted, states=states_at(setup, size))
        if not cut_short:
            calls = renumbered(attempt_at(size), calls)
    replayed = program_failure(setup, size, calls, watch)
    if replayed is not None and replayed[0].kind == SPEC_BROKEN:
        return ProgramCounterexample(size, tuple(calls), None, replayed[0], cut_short=cut_short)
    if replayed is None or replayed[1] is None:  # it no longer diverges so (an implementation that is not deterministic)
        return example
    return ProgramCounterexample(size, tuple(calls), replayed[1], cut_short=cut_short)


def states_at(setup: ProgramSetup, size: int) -> Callable[[Sequence[Call]], list[tuple]]:
    """The model's states along a program at `size`, as shrinking compares them (`shrink_failure`'s
    `states`): its compared views on a fresh model before the first call and after each, the model
    alone (it makes its own values; a call that raises is an outcome, as in a step)."""
    views, error_names = setup.kind.compared_views, setup.kind.error_names

    def states(calls: Sequence[Call]) -> list[tuple]:
        model = setup.new_model(size)
        seen = [tuple(setup.kind.read_view(model, view, model) for view in views)]
        for call in calls:
            outcome_of(model, call, error_names)
            seen.append(tuple(setup.kind.read_view(model, view, model) for view in views))
        return seen
    return states


def unrepeated(setup: ProgramSetup, example: ProgramCounterexample, watch: Watch | None) -> ProgramCounterexample | None:
    """The diverging `example` reported as not deterministic when one of NONDETERMINISM_REPLAYS replays
    on a fresh implementation does not fail with the same difference (it agrees, or fails otherwise);
    None when every replay repeats it. The program is kept whole: shrinking needs a repeatable failure."""
    said = example.difference.describe()
    for _ in range(NONDETERMINISM_REPLAYS):
        found = program_failure(setup, example.size, example.calls, watch)
        if found is None or found[0].message != said:
            message = not_deterministic(example.calls, said, None if found is None else found[0])
            return ProgramCounterexample(example.size, example.calls, None,
                                         Failure(len(example.calls) - 1, message, NOT_DETERMINISTIC))
    return None


def interrupted_program(
    setup: ProgramSetup, example: ProgramCounterexample, size: int, calls: Sequence[Call], watch: Watch | None,
) -> ProgramCounterexample | None:
    """`example` as far as its shrinking had gone when the user's Ctrl-C stopped it: `calls` at
    `size`, the smallest failing program so far, marked interrupted. A divergence is replayed once
    more for its difference; None when it no longer diverges so (its snippet could not fail). A
    hang or a crash is reported as it was seen (a replay would cost the call timeout again)."""
    if example.fault is not None:
        return ProgramCounterexample(example.size, example.calls, None, example.fault, interrupted=True)
    found = program_failure(setup, size, calls, watch)
    if found is None or found[1] is None or divergence_kind(found[1]) != example.kind_of():
        return None
    return ProgramCounterexample(size, tuple(calls[: found[0].step + 1]), found[1], interrupted=True)


def smaller_sizes(size: int) -> list[int]:
    """The sizes a diverging program of `size` is tried at, smallest first: 1 to 4, a half, three
    quarters and one less than `size`; when one less is the only one that fails, the sizes between
    are bisected (`sandbox.lowering.lowest_failing`)."""
    return sorted(smaller for smaller in {1, 2, 3, 4, size // 2, size * 3 // 4, size - 1} if 1 <= smaller < size)


def _rescaled(call: Call, size: int, smaller: int) -> Call:
    """`call` in a program of `smaller` than `size`: each int argument equal to the size (a byte count
    of the whole capacity, every block) becomes `smaller`, each equal to the size less one
    `smaller` less one (when that is at least 1), and so does a value recipe's byte count (its
    element size then 1 where it no longer divides it); the other arguments are kept."""
    def rescale(argument: Any) -> Any:
        if type(argument) is int and argument == size:
            return smaller
        if type(argument) is int and argument == size - 1 and smaller > 1:
            return smaller - 1
        if isinstance(argument, ValueRecipe) and rescale(argument.nbytes) != argument.nbytes:
            return argument.resized(rescale(argument.nbytes))
        return argument
    return call._replace(args=tuple(rescale(argument) for argument in call.args))
