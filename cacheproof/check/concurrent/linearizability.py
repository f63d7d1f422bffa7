"""Is a recorded concurrent history linearizable with respect to the spec?

The rule: the history is correct iff some total order of the thread calls
1. respects real-time order: a call that returned before another was invoked comes first
   (so each thread's own calls stay in program order), and
2. replayed on the spec after the prefix, gives every call the outcome it was observed to have
   (the same result, or an error of the same contract class), and
3. leaves the spec in the state of the final observation (len, stats, snapshot or `in`).

Failures that need no search: a thread that never returned (deadlock or lost wake-up), a call that
raised an exception that is not a contract error (a crash), a final observation that raised, and a
prefix whose sequential outcomes already differ from the spec's.

The search is `search.linearize_parts` (iterative Wing & Gong with memoised (placed calls, spec
state) pairs, per key when the kind's `parts` splits the history, a time budget that answers
"unknown"); this module supplies the sequential model: the spec of the scenario's kind, stepped on
a copy, its `state_key()` as the memo key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, NamedTuple

from cacheproof.contract import calls as call_format
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.check.concurrent.history import (
    CONTRACT_ERRORS,
    Event,
    History,
    Observation,
    Observed,
    comparable_result,
    observe,
    observed_error,
)
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.check.concurrent.search import linearize_parts
from cacheproof.contract.outcomes import STATS_FIELDS, comparable_snapshot, error_matches, run_spec_call
from cacheproof.spec.kinds import get_kind, new_spec
from cacheproof.spec.kind import Model



@dataclass(frozen=True)
class Verdict:
    """ok (True), not linearizable (False, with the reason), or unknown (None: the search ran past its
    budget); `order` is a witness when ok."""

    ok: bool | None
    reason: str = ""
    order: tuple[tuple[int, int], ...] = ()  # (thread, index) in linearization order


class _RecipeValue(bytes):
    """The spec's value for a recipe: bytes of the recipe's size that remember the recipe."""

    recipe: ValueRecipe


class _SpecValues:
    """The value maker handed to the spec: `make_value` gives a `_RecipeValue`."""

    def make_value(self, nbytes: int, tag: int, element_size: int | None = None) -> _RecipeValue:
        value = _RecipeValue(bytes([tag % 256]) * nbytes)
        value.recipe = ValueRecipe(nbytes, tag, element_size)
        return value


_SPEC_VALUES = _SpecValues()


DEFAULT_SEARCH_SECONDS = 20.0
"""The search budget per history; past it the verdict is "unknown"."""


def check_history(scenario: Scenario, history: History, budget_seconds: float | None = DEFAULT_SEARCH_SECONDS) -> Verdict:
    """Whether `history` (a run of `scenario`) is linearizable w.r.t. the spec; see the module doc."""
    calls = sum(len(calls) for calls in scenario.threads)
    complete = len(history.events) == calls or (history.stuck and len(history.events) < calls)
    if history.prefix_stuck:
        complete = len(history.prefix) < len(scenario.prefix) and not history.events
    elif len(history.prefix) != len(scenario.prefix):
        complete = False
    if not complete:
        raise ValueError(
            f"the history ({len(history.prefix)} prefix outcomes, {len(history.events)} thread calls) is not one "
            f"of this scenario ({len(scenario.prefix)} prefix calls, {calls} thread calls)"
        )
    failure = _failure_without_search(scenario, history)
    if failure is not None:
        return Verdict(False, failure)
    spec = new_spec(scenario.capacity_bytes, scenario.semantics)
    for position, (call, observed) in enumerate(zip(scenario.prefix, history.prefix)):
        expected = _spec_step(spec, call)
        if not _matches(expected, observed):
            return Verdict(False, (
                f"the prefix alone diverges: call {position + 1}, {call_format.to_python(call)}, "
                f"{observed.describe()}; the spec {expected.describe()}"
            ))
    model = _HistoryModel(history, scenario.capacity_bytes)
    parts = get_kind("cache").parts(spec, [(e.call.op, e.call.args) for e in history.events])
    search = linearize_parts(model, spec, [e.invoked for e in history.events], [e.responded for e in history.events],
                             parts, budget_seconds)
    if search.ok:
        return Verdict(True, order=tuple((history.events[i].thread, history.events[i].index) for i in search.order))
    if search.ok is None:
        return Verdict(None, (
            f"unknown: the search ran past its {budget_seconds:g} s budget after {search.expanded} expansions "
            "without finding an order or ruling every order out"
        ))
    reason = _reason(scenario, history.events, search.deepest, search.why)
    if search.part:
        reason += (f" (searched per key, as no call could evict another key's entry: the order above is of the "
                   f"{len(search.part)} calls on one key, and no order of them explains what they returned)")
    return Verdict(False, reason)


def _failure_without_search(scenario: Scenario, history: History) -> str | None:
    if history.prefix_stuck:
        position = len(history.prefix)
        return (
            f"prefix call {position + 1}, {call_format.to_python(scenario.prefix[position])}, never returned "
            "(a deadlock, or a call that never returns, with no other thread running)"
        )
    for event in history.events:
        if event.responded is None:
            return (
                f"thread {event.thread} never returned from {call_format.to_python(event.call)} "
                "(a deadlock, or a call that never returns)"
            )
    for position, observed in enumerate(history.prefix):
        if observed.error is not None and not CONTRACT_ERRORS.intersection(observed.error_classes):
            return f"prefix call {position + 1} crashed: it {observed.describe()}, which is not a contract error"
    for event in history.events:
        observed = event.observed
        if observed.error is not None and not CONTRACT_ERRORS.intersection(observed.error_classes):
            return (
                f"thread {event.thread} crashed: {call_format.to_python(event.call)} {observed.describe()} "
                f"({observed.error} is not a contract error)"
            )
    if history.final is not None and history.final.error is not None:
        return f"inspecting the cache after the threads joined raised {history.final.error}"
    return None


def _spec_step(spec: Model, call: Call) -> Observed:
    """Run `call` on the spec, values made as `_RecipeValue`s (so the spec's `state_key()` tells
    the recipe each entry holds)."""
    outcome = run_spec_call(spec, call, values_from=_SPEC_VALUES)
    if outcome.error is not None:
        # Only the class is kept; the traceback would keep the spec's frames (and the spec copy)
        # alive in a cycle (a frame holding the error it raised) until the cycle collector runs.
        outcome.error.__traceback__ = None
        return _observed_spec_error(outcome.error)
    if call.op in ("get", "pop") and outcome.result is not None:  # None: a miss under get_missing=none
        return Observed(("value", (outcome.result.recipe,)))
    return Observed(comparable_result(call.op, outcome.result))


_CONTRACT_ERROR_OUTCOMES: dict[type, Observed] = {}
"""The outcome of each contract error class the spec raised: it is the class's names alone (no
message), so it is made once per class, not at every step of the search."""


def _observed_spec_error(error: BaseException) -> Observed:
    known = _CONTRACT_ERROR_OUTCOMES.get(type(error))
    if known is None:
        known = observed_error(error)
        if known.message:  # not a contract error: its message is part of the outcome
            return known
        _CONTRACT_ERROR_OUTCOMES[type(error)] = known
    return known


def _with_spec_values(call: Call, capacity_bytes: int) -> Call:
    """`call` with each value recipe replaced by the spec's value for it (`_SPEC_VALUES`), made once
    per history instead of at every step of the search."""
    def concrete(argument):
        return argument.value(_SPEC_VALUES, capacity_bytes) if isinstance(argument, ValueRecipe) else argument
    return Call(call.op, tuple(concrete(a) for a in call.args), {name: concrete(a) for name, a in call.kwargs.items()})


def _matches(expected: Observed, observed: Observed) -> bool:
    """The spec's outcome `expected` explains `observed`: the same contract error class (by name,
    anywhere in the observed MRO), or the same result (a value among those the observed one equals)."""
    if expected.error is not None:
        return error_matches(expected.error, observed.error_classes)
    if observed.error is not None:
        return False
    if expected.result[0] == "value":
        return observed.result[0] == "value" and expected.result[1][0] in observed.result[1]
    return expected.result == observed.result


def _final_difference(spec: Model, observation: Observation) -> str | None:
    expected = observe(spec, ())
    if observation.length != expected.length:
        return f"len() is {observation.length}, the spec's {expected.length}"
    if observation.stats is not None and observation.stats != expected.stats:
        for field, seen, wanted in zip(STATS_FIELDS, observation.stats, expected.stats):
            if seen != wanted:
                return f"stats().{field} is {seen}, the spec's {wanted}"
    if observation.snapshot is not None:  # compared as the semantics' snapshot_order says
        order, flags = spec.semantics.snapshot_order, spec.semantics.transient_entries
        seen, wanted = (comparable_snapshot(view, order, flags) for view in (observation.snapshot, expected.snapshot))
        if seen != wanted:
            return f"snapshot() is {_entries(seen)}, the spec's {_entries(wanted)}"
    if observation.present is not None:
        for key, seen in observation.present:
            if seen != (key in spec):
                return f"{key!r} in cache is {seen}, the spec's {key in spec}"
    return None


def _entries(snapshot: tuple) -> str:
    if not snapshot:
        return "empty"
    return "[" + ", ".join(f"{key!r}: {state} refcount={refcount} nbytes={nbytes}" + ("" if retain else " transient")
                           for key, state, refcount, nbytes, retain in snapshot) + "]"


def _bytes_line(spec: Model) -> str:
    stats = spec.stats()
    return (
        f"capacity {stats.capacity_bytes} bytes: reserved {stats.reserved_bytes}, pinned {stats.pinned_bytes}, "
        f"idle {stats.idle_bytes}"
    )


class _Mismatch(NamedTuple):
    """Why the spec does not explain a call there, written out (`str`) only when a reason shows it:
    the search meets many more mismatches than it reports."""

    event: Event
    expected: Observed

    def __str__(self) -> str:
        event = self.event
        return (f"thread {event.thread}'s {call_format.to_python(event.call)} {event.observed.describe()}, "
                f"but there the spec {self.expected.describe()}")


class _HistoryModel:
    """The spec as `search.SequentialModel` over the thread calls of one history."""

    def __init__(self, history: History, capacity_bytes: int) -> None:
        self.events = history.events
        self.final = history.final
        self.calls = [_with_spec_values(event.call, capacity_bytes) for event in history.events]

    def step(self, spec: Model, index: int) -> tuple[Model | None, "_Mismatch | str"]:
        event = self.events[index]
        after = spec.copy()
        expected = _spec_step(after, self.calls[index])
        if _matches(expected, event.observed):
            return after, ""
        return None, _Mismatch(event, expected)

    def key(self, spec: Model) -> Hashable:
        return spec.state_key()

    def final_difference(self, spec: Model) -> str | None:
        return _final_difference(spec, self.final)

    def describe(self, spec: Model) -> str:
        return _bytes_line(spec)


def _reason(scenario: Scenario, events: tuple[Event, ...], order: tuple[int, ...], why: str) -> str:
    """Why no order explains the history, from the deepest dead end of the search."""
    depth = len(order)
    count = len(events)
    placed = ", then ".join(f"thread {events[i].thread}'s {call_format.to_python(events[i].call)}" for i in order)
    if len(scenario.threads) == 1:
        after = f"after {placed}, " if order else ""
        state = "the cache's " if depth == count else ""
        return f"one thread alone diverges from the spec (a sequential bug, `cacheproof check` finds it too): {after}{state}{why}"
    if depth == count:
        return (
            f"no order of the {count} concurrent calls that respects their real-time order explains the "
            f"state they left: the orders that explain every outcome, e.g. {placed}, leave the spec in "
            f"another state, where the cache's {why}"
        )
    head = f"no order of the {count} concurrent calls that respects their real-time order explains what they returned"
    if depth <= 0:
        return f"{head}: whichever call goes first, {why}"
    return f"{head}: the longest order that explains the outcomes is {placed}; after it {why}"
