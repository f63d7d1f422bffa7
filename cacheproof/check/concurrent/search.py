"""The linearizability search over any sequential model, with a time budget.

The rule (Herlihy & Wing): a history of calls is linearizable iff some total order of them
1. respects real-time order (a call that returned before another was invoked comes first), and
2. replayed one by one on the sequential model from its start state, explains every call's
   observed outcome, and ends in a state the final observation accepts.

`linearize` is Wing & Gong's search with Lowe's memoisation, as Porcupine's checker.go
(`checkSingle`) has it. The calls' invocations and responses are one list in time order (an
invocation before a response at the same time: those calls overlap). The calls that may go next
are the invocations before the list's first response: the search places the first one the model
explains, takes its two entries out of the list (`_lift`) and goes on from the list's head; when
it meets a response, that call must go before every later invocation and no call before it could
go next, so it puts the last placed call back (`_unlift`) and tries the one after it. Each (set
of placed calls, model state) pair, the set a bit set and the state `SequentialModel.key`, is
entered at most once, so the search never repeats work; each step looks at the calls that overlap
the earliest pending response only, never at the whole history. It never recurses.

`linearize_parts` is P-compositionality (Horn & Kroening; Porcupine's `Partition`): when the
kind declares that the calls fall into parts that never change each other's outcomes
(`SpecKind.parts`), each part is searched alone. A part that no order explains refutes the whole
history (an order of the whole would give one of the part); when every part has an order, the
orders merged by real time are replayed, and if they leave the state the final observation
shows, that is the witness; otherwise the whole history is searched.

The model is reached through `SequentialModel` alone, so one search serves every spec kind. A
search that runs past its budget answers "unknown" (`Search.ok is None`), never hangs.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Hashable, Iterator, Protocol, Sequence, TypeVar

State = TypeVar("State")

_CLOCK_EVERY = 256
"""Search steps between two looks at the clock."""


class SequentialModel(Protocol[State]):
    """What the search needs of a sequential specification."""

    def step(self, state: State, event: int) -> tuple[State | None, object]:
        """Apply call `event` to `state`: (the next state, "") when the model explains the call's
        observed outcome; (None, why not) otherwise, `why` a string or an object whose `str()` is
        one (written out only when a dead end is reported). `state` itself is never changed."""

    def key(self, state: State) -> Hashable:
        """A hashable value equal for states with equal futures."""

    def final_difference(self, state: State) -> str | None:
        """None when the final observation agrees with `state`; otherwise what differs."""

    def describe(self, state: State) -> str:
        """A short account of `state`, added to a dead end's explanation."""


@dataclass
class Search(Generic[State]):
    """The result of a search: `ok` True (with `order`, call indices in linearization order), False
    (with the deepest dead end: `deepest`, the longest order that explains the outcomes, and `why`
    nothing can follow it), or None when the budget ran out first ("unknown"). `part`: when one
    part of a split history was refuted (`linearize_parts`), its calls; empty otherwise."""

    ok: bool | None
    order: tuple[int, ...] = ()
    deepest: tuple[int, ...] = ()
    why: str = ""
    expanded: int = 0
    seconds: float = 0.0
    part: tuple[int, ...] = ()


class _Entry:
    """One invocation (`response` is its response's entry) or response (`response` None) of call
    `call`, a node of the doubly linked list of a history's entries."""

    __slots__ = ("call", "response", "before", "after")

    def __init__(self, call: int, response: "_Entry | None") -> None:
        self.call, self.response = call, response
        self.before: _Entry | None = None
        self.after: _Entry | None = None


def _entry_list(calls: Sequence[int], invoked: Sequence[float], responded: Sequence[float]) -> _Entry:
    """The head (a sentinel) of the list of `calls`' invocations and responses in time order, an
    invocation before a response at the same time."""
    timeline = sorted([(invoked[c], 0, c) for c in calls] + [(responded[c], 1, c) for c in calls])
    responses = {c: _Entry(c, None) for c in calls}
    head = previous = _Entry(-1, None)
    for _, is_response, call in timeline:
        entry = responses[call] if is_response else _Entry(call, responses[call])
        previous.after, entry.before = entry, previous
        previous = entry
    return head


def _lift(invocation: _Entry) -> None:
    """Take a call's invocation and response out of the list."""
    for entry in (invocation, invocation.response):
        entry.before.after = entry.after
        if entry.after is not None:
            entry.after.before = entry.before


def _unlift(invocation: _Entry) -> None:
    """Put back what `_lift` took out (in the reverse order)."""
    for entry in (invocation.response, invocation):
        entry.before.after = entry
        if entry.after is not None:
            entry.after.before = entry


class _Transitions:
    """`model` with its steps remembered. A state is (its number, the state): states with equal keys
    get one number, so a key is hashed once, when its state is first met. Stepping call i from a
    state whose number was stepped with call i before answers from memory: the search meets the
    same state at many sets of placed calls (a read that changes nothing, calls that commute)."""

    def __init__(self, model: SequentialModel) -> None:
        self.model = model
        self.numbers: dict[Hashable, int] = {}
        self.known: dict[tuple[int, int], tuple[tuple[int, object] | None, object]] = {}

    def numbered(self, state: object) -> tuple[int, object]:
        return self.numbers.setdefault(self.model.key(state), len(self.numbers)), state

    def step(self, numbered: tuple[int, object], call: int) -> tuple[tuple[int, object] | None, object]:
        """The step, from memory if it was made before (`known`, which the search reads first)."""
        known = self.known.get((numbered[0], call))
        if known is None:
            after, why = self.model.step(numbered[1], call)
            known = (None if after is None else self.numbered(after)), why
            self.known[numbered[0], call] = known
        return known


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cycle collector off while the search runs, as it was afterwards. The search makes
    hundreds of thousands of small containers (memo pairs, remembered steps) and no garbage cycle
    but its entry list, collected later; each full collection walks all of them, which took half
    the time of a long search. Reference counting still frees everything else at once."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def linearize(
    model: SequentialModel[State], start: State, invoked: Sequence[float], responded: Sequence[float],
    budget_seconds: float | None = None, *, calls: Sequence[int] | None = None, final: bool = True,
) -> Search[State]:
    """Search for an order of `calls` (default every call; call i was invoked at `invoked[i]` and
    responded at `responded[i]`) that `model` explains from `start`, the final state checked when
    `final`; see the module docstring."""
    with _cyclic_gc_paused():
        return _linearize(model, start, invoked, responded, budget_seconds, calls, final)


def _linearize(
    model: SequentialModel[State], start: State, invoked: Sequence[float], responded: Sequence[float],
    budget_seconds: float | None, calls: Sequence[int] | None, final: bool,
) -> Search[State]:
    began = time.perf_counter()
    transitions = _Transitions(model)
    calls = range(len(invoked)) if calls is None else calls
    head = _entry_list(calls, invoked, responded)
    remembered = transitions.known
    bits = {call: 1 << call for call in calls}
    placed, state = 0, transitions.numbered(start)
    seen: set[tuple[int, int]] = {(0, state[0])}
    # One frame per placed call: its invocation entry, the numbered state before it, the frame's mismatches.
    frames: list[tuple[_Entry, tuple[int, State], list[object]]] = []
    mismatches: list[object] = []
    deepest: tuple[tuple[int, ...], str] = ((), "")
    deepest_length = -1
    expanded = steps = 0
    entry = head.after
    while True:
        steps += 1
        if budget_seconds is not None and steps % _CLOCK_EVERY == 0 and time.perf_counter() - began > budget_seconds:
            return Search(None, (), deepest[0], deepest[1], expanded, time.perf_counter() - began)
        if head.after is None:  # every call placed
            difference = model.final_difference(state[1]) if final else None
            order = tuple(frame[0].call for frame in frames)
            if difference is None:
                return Search(True, order, order, "", expanded, time.perf_counter() - began)
            if len(order) > deepest_length:
                deepest, deepest_length = (order, difference), len(order)
            entry = None
        elif entry is not None and entry.response is not None:  # an invocation: may it go next?
            known = remembered.get((state[0], entry.call)) or transitions.step(state, entry.call)
            after = known[0]
            if after is None:
                mismatches.append(known[1])
            else:
                memo = (placed | bits[entry.call], after[0])
                if memo not in seen:
                    seen.add(memo)
                    expanded += 1
                    frames.append((entry, state, mismatches))
                    placed, state, mismatches = memo[0], after, []
                    _lift(entry)
                    entry = head.after
                    continue
            entry = entry.after
            continue
        # A response (or the end of a complete order): nothing placed here works; go back one call.
        if mismatches and len(frames) > deepest_length:
            deepest = (tuple(frame[0].call for frame in frames), "; ".join(map(str, mismatches)) + f" ({model.describe(state[1])})")
            deepest_length = len(frames)
        if not frames:
            return Search(False, (), deepest[0], deepest[1], expanded, time.perf_counter() - began)
        entry, state, mismatches = frames.pop()
        placed ^= bits[entry.call]
        _unlift(entry)
        entry = entry.after


def merged_order(orders: Sequence[Sequence[int]], invoked: Sequence[float]) -> tuple[int, ...]:
    """One order of every call of `orders` (each a valid linearization of its own calls) that keeps
    each one's order and real-time order: each call takes the point max(its invocation, its
    predecessor's point), which lies within its interval in a valid order, and calls go by point."""
    points = []
    for part, order in enumerate(orders):
        point = float("-inf")
        for position, call in enumerate(order):
            point = max(point, invoked[call])
            points.append((point, part, position, call))
    return tuple(call for *_, call in sorted(points))


def linearize_parts(
    model: SequentialModel[State], start: State, invoked: Sequence[float], responded: Sequence[float],
    parts: Sequence[Sequence[int]] | None, budget_seconds: float | None = None,
) -> Search[State]:
    """`linearize` over `parts` (lists of call indices whose calls never change another part's
    outcomes, or None: one part) one by one, then the merged order checked against the final
    observation; when it disagrees, the whole history is searched with what is left of the budget."""
    if parts is None or len(parts) < 2:
        return linearize(model, start, invoked, responded, budget_seconds)
    began = time.perf_counter()
    orders, expanded, unknown = [], 0, None
    for part in parts:
        left = None if budget_seconds is None else max(0.0, budget_seconds - (time.perf_counter() - began))
        search = linearize(model, start, invoked, responded, left, calls=part, final=False)
        expanded += search.expanded
        if search.ok is False:
            return Search(False, (), search.deepest, search.why, expanded, time.perf_counter() - began, tuple(part))
        if search.ok is None:
            unknown = search
        orders.append(search.order)
    if unknown is not None:
        return Search(None, (), unknown.deepest, unknown.why, expanded, time.perf_counter() - began)
    order = merged_order(orders, invoked)
    state = start
    for call in order:
        state, _ = model.step(state, call)
        if state is None:
            break
    if state is not None and model.final_difference(state) is None:
        return Search(True, order, order, "", expanded, time.perf_counter() - began)
    left = None if budget_seconds is None else max(0.0, budget_seconds - (time.perf_counter() - began))
    whole = linearize(model, start, invoked, responded, left)
    whole.expanded += expanded
    whole.seconds = time.perf_counter() - began
    return whole
