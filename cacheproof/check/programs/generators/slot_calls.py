"""The encoder slot budget's call generator: calls drawn from the model's state.

Budgets are small (1 to 12 slots, one in four up to 40) and inputs take 1 to 6 slots, so that the
budget runs dry and schedules are refused; requests come from three ids and items from three
hashes, so that two requests schedule one item and one request schedules an item twice. A schedule
asks, one time in four, for exactly the free slots less what it says is pending (the boundary the
budget must admit), and its compute budget is drawn around its slots (one less refuses, equal
admits). Frees name a live request's held input, or a live request; a free of a request that
never scheduled is drawn too (it changes nothing). end_step comes as often as any other
operation, so that an item is named a step late while its request still holds it.

Misuse (an input freed twice or never scheduled, an argument of the wrong type or range) comes
one call in eight when misuse is checked. Without misuse (semantics misuse "trusted", or
--no-bad-arguments) no input is freed twice; under "trusted" without caching a request that freed
an input is never freed whole either (the contract's misuse there).

Those numbers are the small scope (`SMALL`), the one every check draws from; `--thorough` adds the
wide scope (budgets of up to 64 slots, one in four up to 200; six requests, five items; inputs of
up to 16 slots; programs of 100 calls). `check --exhaustive` enumerates instead
(`SlotCalls.enabled_calls`, the scopes `EXHAUSTIVE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacheproof.check.phases import Phase
from cacheproof.check.programs.draws import Draws, choice, coin, integer
from cacheproof.check.programs.generators import NOT_INTS, drawn_call, drawn_size
from cacheproof.contract.calls import Call


@dataclass(frozen=True)
class SlotScope:
    """What one program of the slot budget may reach: budgets of 1..`slots` slots, one in four of
    1..`more_slots`; the requests and items calls name; inputs of 1..`most_n` slots."""

    name: str
    slots: int
    more_slots: int
    requests: tuple[int, ...]
    items: tuple[str, ...]
    most_n: int


SMALL = SlotScope("small", 12, 40, (1, 2, 3), ("a", "b", "c"), 6)
WIDE = SlotScope("wide", 64, 200, tuple(range(1, 7)), ("a", "b", "c", "d", "e"), 16)
SCOPES = {scope.name: scope for scope in (SMALL, WIDE)}

THOROUGH = (Phase(SMALL, 1000, 50), Phase(WIDE, 300, 100, shrink=False))
"""`cacheproof check --spec slots --thorough`: 80,000 calls."""


@dataclass(frozen=True)
class ExhaustiveSlotScope:
    """What `check --exhaustive` tries from every state: budgets of each of `slots` slots; a schedule
    of each item of `items` by each request of `requests`, of 1..`most_n` slots, with the compute
    budget n - 1, n and the pending slots 0 and 1; a free of each held input and of each request
    (under trusted semantics without caching, none that freed an input); end_step and reset; where misuse is
    checked, a free of each freed input. `depth`: the calls per path a search goes to when no
    --depth is given."""

    name: str
    slots: tuple[int, ...]
    requests: tuple[int, ...]
    items: tuple[str, ...]
    most_n: int
    depth: int


EXHAUSTIVE = {scope.name: scope for scope in (
    ExhaustiveSlotScope("tiny", (1, 2), (1,), ("a",), 2, 4),
    ExhaustiveSlotScope("two-requests", (2, 3), (1, 2), ("a", "b"), 2, 4),
)}
"""The exhaustive scopes, the default first."""



class SlotCalls:
    """`CallGenerator` of the slot-budget kind, drawing from `scope` (see the module docstring)."""

    def __init__(self, scope: SlotScope = SMALL) -> None:
        self.scope = scope

    def size(self, draws: Draws) -> int:
        """1..`slots` slots (12 in the small scope), one budget in four up to `more_slots` (40)."""
        return drawn_size(draws, self.scope.slots, self.scope.more_slots)

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        return drawn_call(draws, _State(model, self.scope), operations, misuse, _SUITED, _MISUSE)

    def exhaustive_sizes(self, scope: ExhaustiveSlotScope) -> tuple[int, ...]:
        """The budgets (slots) of `scope`."""
        return scope.slots

    def enabled_calls(self, scope: ExhaustiveSlotScope, model: Any, operations: tuple[str, ...],
                      misuse: bool) -> tuple[Call, ...]:
        """Every call of `scope` among `operations` that suits the model's state, then (when
        `misuse`) its misuse calls (see `ExhaustiveSlotScope`), each operation in table order."""
        live = model.live_requests()
        inputs = {request: model.inputs_of(request) for request in live}
        every = {
            "schedule": [Call("schedule", (request, item, n), {"budget": n + less, "pending": pending})
                         for request in scope.requests for item in scope.items for n in range(1, scope.most_n + 1)
                         for less in (-1, 0) for pending in (0, 1)],
            "free_input": [Call("free_input", (request, index)) for request in live
                           for index, (_, _, held) in enumerate(inputs[request]) if held],
            "free": [Call("free", (request,)) for request in scope.requests
                     if not _frees_every_input(model) or all(held for _, _, held in inputs.get(request, ()))],
            "end_step": [Call("end_step", ())],
            "reset": [Call("reset", ())],
        }
        calls = [call for name in operations for call in every.get(name, ())]
        if misuse:
            wrong = {"free_input": [Call("free_input", (request, index)) for request in live
                                    for index, (_, _, held) in enumerate(inputs[request]) if not held]}
            calls += [call for name in operations for call in wrong.get(name, ())]
        return tuple({repr(call): call for call in calls}.values())

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """No argument cases beside the outcomes."""
        return ()

    def case_of(self, call: Call) -> str | None:
        return None


def _frees_every_input(model: Any) -> bool:
    """Whether the model's semantics trust the caller of a budget that caches nothing: a request that
    freed an input is then never freed whole (the contract's misuse there)."""
    return model.semantics.misuse == "trusted" and model.semantics.caching == "none"


class _State:
    """What the drawers read from the model."""

    def __init__(self, model: Any, scope: SlotScope) -> None:
        self.model, self.scope = model, scope
        self.live = model.live_requests()
        self.inputs = {request: model.inputs_of(request) for request in self.live}

    def held(self) -> list[tuple[int, int]]:
        return [(request, index) for request in self.live
                for index, (_, _, held) in enumerate(self.inputs[request]) if held]

    def freed(self) -> list[tuple[int, int]]:
        return [(request, index) for request in self.live
                for index, (_, _, held) in enumerate(self.inputs[request]) if not held]

    def freeable(self) -> list[int]:
        """The requests a free may name: every one, but under trusted semantics without caching none
        that freed an input already (when that leaves none, a request that never scheduled: a free
        that changes nothing)."""
        named = [request for request in self.scope.requests
                 if not _frees_every_input(self.model) or all(held for _, _, held in self.inputs.get(request, ()))]
        return named or [self.scope.requests[-1] + 1]


def _schedule(draws: Draws, s: _State) -> Call:
    free = s.model.free_slots()
    pending = integer(draws, 0, free) if coin(draws) and free else 0
    if free - pending >= 1 and draws.randrange(4) == 0:
        n = free - pending
    else:
        n = integer(draws, 1, s.scope.most_n)
    budget = max(0, n + integer(draws, -1, 2))
    request, item = choice(draws, s.scope.requests), choice(draws, s.scope.items)
    if s.model.semantics.caching == "lru":
        cached = {cached_item: slots for cached_item, slots, _ in s.model.cached_items()}
        if item in cached and draws.randrange(8):
            n = cached[item]
    return Call("schedule", (request, item, n), {"budget": budget, "pending": pending})


def _free_input(draws: Draws, s: _State) -> Call:
    held = s.held()
    return Call("free_input", choice(draws, held)) if held else _schedule(draws, s)


def _free(draws: Draws, s: _State) -> Call:
    return Call("free", (choice(draws, s.freeable()),))


def _end_step(draws: Draws, s: _State) -> Call:
    return Call("end_step", ())


def _reset(draws: Draws, s: _State) -> Call:
    return Call("reset", ())


_SUITED = {"schedule": _schedule, "free_input": _free_input, "free": _free, "end_step": _end_step, "reset": _reset}


def _misuse_schedule(draws: Draws, s: _State) -> Call:
    request, item, n, budget, pending = choice(draws, s.scope.requests), choice(draws, s.scope.items), 1, 1, 0
    pick = integer(draws, 0, 4)
    if pick == 0:
        request = choice(draws, NOT_INTS)
    elif pick == 1:
        item = choice(draws, (1, None, ("a",)))
    elif pick == 2:
        n = choice(draws, (0, -1, *NOT_INTS))
    elif pick == 3:
        budget = choice(draws, (-1, *NOT_INTS))
    else:
        pending = choice(draws, (-1, *NOT_INTS))
    return Call("schedule", (request, item, n), {"budget": budget, "pending": pending})


def _misuse_free_input(draws: Draws, s: _State) -> Call:
    freed = s.freed()
    if freed and coin(draws):
        return Call("free_input", choice(draws, freed))
    request = choice(draws, s.scope.requests)
    if coin(draws):
        return Call("free_input", (request, len(s.inputs.get(request, ())) + integer(draws, 0, 1)))
    return Call("free_input", (choice(draws, (request, *NOT_INTS)), choice(draws, (-1, *NOT_INTS))))


def _misuse_free(draws: Draws, s: _State) -> Call:
    return Call("free", (choice(draws, NOT_INTS),))


_MISUSE = {**_SUITED, "schedule": _misuse_schedule, "free_input": _misuse_free_input, "free": _misuse_free}
