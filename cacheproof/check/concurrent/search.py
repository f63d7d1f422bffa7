"""The linearizability search over any sequential model, with a time budget.

The rule (Herlihy & Wing): a history of calls is linearizable iff some total order of them
1. respects real-time order (a call that returned before another was invoked comes first), and
2. replayed one by one on the sequential model from its start state, explains every call's
   observed outcome, and ends in a state the final observation accepts.

The search is Wing & Gong's, made iterative, with Lowe's memoisation as Porcupine has it
(porcupine's checker.go, `checkSingle`: a cache of (linearized set, model state) pairs): every
(set of placed calls, model state) pair is expanded at most once, so the search never repeats work
and never recurses. The model is reached through `SequentialModel` alone (a start state, a step
that says whether a call's outcome is explained and gives the next state, a hashable key per
state, and a check of the final state), so one search serves every spec kind.

A search that runs past its budget answers "unknown" (`Search.ok is None`), never hangs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Generic, Hashable, Protocol, Sequence, TypeVar

State = TypeVar("State")

_CLOCK_EVERY = 256
"""Expansions between two looks at the clock."""


class SequentialModel(Protocol[State]):
    """What the search needs of a sequential specification."""

    def step(self, state: State, event: int) -> tuple[State | None, str]:
        """Apply call `event` to `state`: (the next state, "") when the model explains the call's
        observed outcome; (None, why not) otherwise. `state` itself is never changed."""

    def key(self, state: State) -> Hashable:
        """A hashable value equal for states with equal futures."""

    def final_difference(self, state: State) -> str | None:
        """None when the final observation agrees with `state`; otherwise what differs."""

    def describe(self, state: State) -> str:
        """A short account of `state`, added to a dead end's explanation."""


@dataclass
class Search(Generic[State]):
    """The result of `linearize`: `ok` True (with `order`), False (with the deepest dead end), or
    None when the budget ran out first ("unknown")."""

    ok: bool | None
    order: tuple[int, ...] = ()
    deepest: tuple[int, ...] = ()
    why: str = ""
    expanded: int = 0
    seconds: float = 0.0


def predecessors_of(invoked: Sequence[float], responded: Sequence[float]) -> list[int]:
    """Per call, the bit set of the calls that returned before it was invoked."""
    return [
        sum(1 << j for j, done in enumerate(responded) if done < start)
        for start in invoked
    ]


def linearize(
    model: SequentialModel[State], start: State, predecessors: Sequence[int], budget_seconds: float | None = None
) -> Search[State]:
    """Search for an order of the calls (indexed 0..n-1, `predecessors[i]` the bit set that must
    come before call i) that `model` explains from `start`; see the module docstring."""
    began = time.perf_counter()
    count = len(predecessors)
    everything = (1 << count) - 1
    seen: set[tuple[int, Hashable]] = {(0, model.key(start))}
    deepest: tuple[tuple[int, ...], str] = ((), "")
    deepest_length = -1
    expanded = 0
    # A frame: (placed bit set, state, order so far, next call index to try, mismatches met at this frame).
    stack: list[tuple[int, State, tuple[int, ...], int, list[str]]] = [(0, start, (), 0, [])]
    while stack:
        placed, state, order, next_index, mismatches = stack.pop()
        if placed == everything:
            difference = model.final_difference(state)
            if difference is None:
                return Search(True, order, order, "", expanded, time.perf_counter() - began)
            if len(order) > deepest_length:
                deepest, deepest_length = (order, difference), len(order)
            continue
        expanded += 1
        if budget_seconds is not None and expanded % _CLOCK_EVERY == 0 and time.perf_counter() - began > budget_seconds:
            return Search(None, (), deepest[0], deepest[1], expanded, time.perf_counter() - began)
        for index in range(next_index, count):
            bit = 1 << index
            if placed & bit or predecessors[index] & ~placed:
                continue
            after, why = model.step(state, index)
            if after is None:
                mismatches.append(why)
                continue
            memo = (placed | bit, model.key(after))
            if memo in seen:
                continue
            seen.add(memo)
            stack.append((placed, state, order, index + 1, mismatches))
            stack.append((placed | bit, after, order + (index,), 0, []))
            break
        else:
            if mismatches and len(order) > deepest_length:
                deepest = (order, "; ".join(mismatches) + f" ({model.describe(state)})")
                deepest_length = len(order)
    return Search(False, (), deepest[0], deepest[1], expanded, time.perf_counter() - began)
