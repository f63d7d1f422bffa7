"""Programs: Hypothesis draws each example whole, up front, and the calls run with no framework work
between them.

An example is a capacity, a key universe and a byte string (`cacheproof.check.programs.draws.
ProgramDraws`). The byte string's first picks are the program's `Plan`, swarm testing
(`draws.swarm`): the operations it calls (all, or a few, an operation picked twice called twice as
often) and how many of the universe's keys it touches. A program of reserve and commit on two keys
piles up pending reservations; one of acquire and release on one key piles up holders of one entry,
retain=False among them. The rest gives each call's raw picks, read as the machine's bursts read
them from a `random.Random`: the same `do_` methods of `cacheproof.check.sequential.machine`, so
keys still suit their operations and sizes still sit on the boundaries. Past its end every pick is
0, the simplest: shrinking the bytes simplifies the program, and the checker's own shrinking then
drops calls.

The per-call cost is reading a few bytes, where a state machine asks Hypothesis for every argument
of every step (`python -m cacheproof.bench throughput` prints the checker's rate beside the bare
loop's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from cacheproof.check.programs.draws import ProgramDraws, integer, swarm
from cacheproof.check.sequential.machine import BAD_KINDS, BAD_OPERATIONS, CacheMachine, PICKS_PER_KEY
from cacheproof.check.programs.cache_calls import SMALL_SIZE_KINDS
from cacheproof.check.sequential.scope import Phase, Scope, capacities, universes

BYTES_PER_CALL = {True: 8, False: 16}
"""Bytes of the program's byte string per call, by whether the scope is the small one (its sizes
take one byte, the wide scope's eight): enough for the call with the most picks."""


@dataclass(frozen=True)
class Plan:
    """One program's swarm: the operations it calls (repeats weigh) and how many keys it uses."""

    operations: tuple[str, ...]
    keys: int


def _pick(draws: Any, scope: Scope) -> tuple[int, int]:
    return draws.randrange(100), draws.randrange(scope.max_keys * PICKS_PER_KEY)


def _size(draws: Any, scope: Scope) -> tuple[int, int]:
    small = scope.size_kinds == SMALL_SIZE_KINDS
    return draws.randrange(scope.size_kinds), draws.randrange(64 if small else 2**62)


def _tenth(draws: Any, scope: Scope) -> int:
    return draws.randrange(10)


def _tag(draws: Any, scope: Scope) -> int:
    return draws.randrange(256)


def _coin(draws: Any, scope: Scope) -> bool:
    return draws.randrange(2) == 1


def _bad_operation(draws: Any, scope: Scope) -> str:
    return BAD_OPERATIONS[draws.randrange(len(BAD_OPERATIONS))]


def _bad_kind(draws: Any, scope: Scope) -> str:
    return BAD_KINDS[draws.randrange(len(BAD_KINDS))]


def _burst_seed(draws: Any, scope: Scope) -> int:
    return draws.randrange(2**32)


def _burst_length(draws: Any, scope: Scope) -> int:
    return 1 + draws.randrange(scope.burst)


PICKS: dict[str, tuple[Callable[[Any, Scope], Any], ...]] = {
    "reserve": (_pick, _size, _tenth),
    "acquire": (_pick, _size, _tenth, _tenth),
    "commit": (_pick, _size, _tag, _tenth),
    "put": (_pick, _size, _tag),
    "get": (_pick,),
    "release": (_pick,),
    "evict": (_size, _coin),
    "pop": (_pick,),
    "clear": (),
    "contains": (_pick,),
    "bad_argument": (_bad_operation, _bad_kind, _pick, _tag),
    "burst": (_burst_seed, _burst_length),
}
"""The raw picks of each `do_` method of the machine, in its parameters' order."""


def program_operations(machine: type[CacheMachine]) -> tuple[str, ...]:
    """What a program of `machine`'s may call: its operations, bad arguments and bursts if it has them."""
    extra = ("bad_argument",) * machine.bad_arguments + ("burst",) * bool(machine.scope.burst)
    return (*machine.operations, *extra)


def run_program(machine: CacheMachine, capacity: int, universe: tuple, plan: Plan, draws: Any, length: int) -> None:
    """Run one program of `length` calls on a fresh spec and cache in `machine`; its tally counts it
    (as ended by whatever it raises)."""
    tally = machine.tally
    try:
        machine.start(capacity, universe[: plan.keys])
        scope = machine.scope
        operations = plan.operations
        for _ in range(length):
            op = operations[draws.randrange(len(operations))] if len(operations) > 1 else operations[0]
            getattr(machine, f"do_{op}")(*[pick(draws, scope) for pick in PICKS[op]])
    except BaseException as error:
        tally.example_ended(error)
        tally.note_example(tally.calls)
        raise
    tally.example_ended(None)
    tally.note_example(tally.calls)


def program_test(machine_class: type[CacheMachine], phase: Phase, max_capacity: int | None,
                 before_program: Callable[[], None] | None = None) -> Callable[[], None]:
    """The Hypothesis test of `phase`: each example one program on a fresh `machine_class()`;
    `before_program` runs first (it may end the run, raising a BaseException)."""
    scope = phase.scope
    blob_size = phase.steps * BYTES_PER_CALL[scope.size_kinds == SMALL_SIZE_KINDS]
    setups = st.tuples(capacities(scope, max_capacity), universes(scope))

    operations = program_operations(machine_class)

    @given(setup=setups, blob=st.binary(min_size=blob_size, max_size=blob_size))
    def cacheproof_program(setup: tuple[int, tuple], blob: bytes) -> None:
        if before_program is not None:
            before_program()
        draws = ProgramDraws(blob)
        plan = Plan(swarm(draws, operations), integer(draws, 1, scope.max_keys))
        run_program(machine_class(), setup[0], setup[1], plan, draws, phase.steps)

    return cacheproof_program
