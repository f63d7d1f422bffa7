"""Is a recorded concurrent history linearizable with respect to `CacheSpec`?

The rule: the history is correct iff some total order of the thread calls
1. respects real-time order: a call that returned before another was invoked comes first
   (so each thread's own calls stay in program order), and
2. replayed on `CacheSpec` after the prefix, gives every call the outcome it was observed to have
   (the same result, or an error of the same contract class), and
3. leaves the spec in the state of the final observation (len, stats, snapshot or `in`).

Failures that need no search: a thread that never returned (deadlock or lost wake-up), a call that
raised an exception that is not a contract error (a crash), a final observation that raised, and a
prefix whose sequential outcomes already differ from the spec's.

The search is Wing & Gong's: extend the order one call at a time with any call whose real-time
predecessors are all placed and whose spec outcome matches, backtracking on a mismatch. As in
Porcupine (checker.go, memoising (placed calls, model state) pairs) and Lincheck, every
(set of placed calls, spec state) pair is visited at most once, so a history of n calls costs at
most 2^n distinct spec states per set, and far fewer in practice: the spec's state is small.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Hashable

from cacheproof.check import calls as call_format
from cacheproof.check.calls import Call, ValueRecipe
from cacheproof.check.concurrent_history import (
    CONTRACT_ERRORS,
    Event,
    History,
    Observation,
    Observed,
    comparable_result,
    observe,
    observed_error,
)
from cacheproof.check.concurrent_scenarios import Scenario
from cacheproof.check.differential import STATS_FIELDS, run_spec_call
from cacheproof.spec import CacheSpec, EntryState



@dataclass(frozen=True)
class Verdict:
    """ok, or the reason no sequential order explains the history; `order` is a witness when ok."""

    ok: bool
    reason: str = ""
    order: tuple[tuple[int, int], ...] = ()  # (thread, index) in linearization order


class _RecipeValue(bytes):
    """The spec's value for a recipe: bytes of the recipe's size that remember the recipe."""

    recipe: ValueRecipe


class _SpecValues:
    """The value maker handed to the spec: `make_value` gives a `_RecipeValue`."""

    def make_value(self, nbytes: int, tag: int) -> _RecipeValue:
        value = _RecipeValue(bytes([tag % 256]) * nbytes)
        value.recipe = ValueRecipe(nbytes, tag)
        return value


_SPEC_VALUES = _SpecValues()


def check_history(scenario: Scenario, history: History) -> Verdict:
    """Whether `history` (a run of `scenario`) is linearizable w.r.t. `CacheSpec`; see the module doc."""
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
    spec = CacheSpec(scenario.capacity_bytes)
    values: dict[Hashable, ValueRecipe] = {}
    for position, (call, observed) in enumerate(zip(scenario.prefix, history.prefix)):
        expected = _spec_step(spec, call, values)
        if not _matches(expected, observed):
            return Verdict(False, (
                f"the prefix alone diverges: call {position + 1}, {call_format.to_python(call)}, "
                f"{observed.describe()}; the spec {expected.describe()}"
            ))
    return _Search(scenario, history, spec, values).run()


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


def _spec_step(spec: CacheSpec, call: Call, values: dict[Hashable, ValueRecipe]) -> Observed:
    """Run `call` on the spec (values made as `_RecipeValue`s); update `values`, the recipe stored per key."""
    outcome = run_spec_call(spec, call, values_from=_SPEC_VALUES)
    if outcome.error is not None:
        return observed_error(outcome.error)
    if call.op in ("commit", "put") and outcome.result is not False:
        values[call.args[0]] = call.args[1]
    if call.op in ("get", "pop"):
        return Observed(("value", (outcome.result.recipe,)))
    return Observed(comparable_result(call.op, outcome.result))


def _matches(expected: Observed, observed: Observed) -> bool:
    """The spec's outcome `expected` explains `observed`: the same contract error class (by name,
    anywhere in the observed MRO), or the same result (a value among those the observed one equals)."""
    if expected.error is not None:
        return expected.error in observed.error_classes
    if observed.error is not None:
        return False
    if expected.result[0] == "value":
        return observed.result[0] == "value" and expected.result[1][0] in observed.result[1]
    return expected.result == observed.result


def _final_difference(spec: CacheSpec, observation: Observation) -> str | None:
    expected = observe(spec, ())
    if observation.length != expected.length:
        return f"len() is {observation.length}, the spec's {expected.length}"
    if observation.stats is not None and observation.stats != expected.stats:
        for field, seen, wanted in zip(STATS_FIELDS, observation.stats, expected.stats):
            if seen != wanted:
                return f"stats().{field} is {seen}, the spec's {wanted}"
    if observation.snapshot is not None and observation.snapshot != expected.snapshot:
        return f"snapshot() is {_entries(observation.snapshot)}, the spec's {_entries(expected.snapshot)}"
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


def _state_key(spec: CacheSpec, values: dict[Hashable, ValueRecipe]) -> tuple:
    """The spec's whole state as far as any later outcome can tell: entries in order, and the
    recipe each READY entry holds. (hits/misses counters are informative and never compared.)"""
    snapshot = spec.snapshot()
    return snapshot, tuple(values.get(e.key) for e in snapshot if e.state is EntryState.READY)


def _bytes_line(spec: CacheSpec) -> str:
    stats = spec.stats()
    return (
        f"capacity {stats.capacity_bytes} bytes: reserved {stats.reserved_bytes}, pinned {stats.pinned_bytes}, "
        f"idle {stats.idle_bytes}"
    )


class _Search:
    """Wing & Gong's search with memoisation; remembers the deepest dead end to explain a failure."""

    def __init__(self, scenario: Scenario, history: History, spec: CacheSpec, values: dict) -> None:
        self.scenario = scenario
        self.history = history
        self.events: tuple[Event, ...] = history.events
        self.start = spec
        self.start_values = values
        count = len(self.events)
        self.all_placed = (1 << count) - 1
        self.predecessors = [
            sum(1 << j for j, other in enumerate(self.events) if other.responded < event.invoked)
            for event in self.events
        ]
        self.seen: set[tuple[int, tuple]] = set()
        self.deepest: tuple[int, tuple[int, ...], str] = (-1, (), "")

    def run(self) -> Verdict:
        order = self._extend(0, self.start, self.start_values, ())
        if order is not None:
            return Verdict(True, order=tuple((self.events[i].thread, self.events[i].index) for i in order))
        return Verdict(False, self._reason())

    def _extend(self, placed: int, spec: CacheSpec, values: dict, order: tuple[int, ...]):
        if placed == self.all_placed:
            difference = _final_difference(spec, self.history.final)
            if difference is None:
                return order
            self._dead_end(order, difference)
            return None
        memo = (placed, _state_key(spec, values))
        if memo in self.seen:
            return None
        self.seen.add(memo)
        mismatches: list[str] = []
        for index, event in enumerate(self.events):
            bit = 1 << index
            if placed & bit or self.predecessors[index] & ~placed:
                continue
            after = copy.deepcopy(spec)
            after_values = dict(values)
            expected = _spec_step(after, event.call, after_values)
            if not _matches(expected, event.observed):
                mismatches.append(
                    f"thread {event.thread}'s {call_format.to_python(event.call)} {event.observed.describe()}, "
                    f"but there the spec {expected.describe()}"
                )
                continue
            found = self._extend(placed | bit, after, after_values, order + (index,))
            if found is not None:
                return found
        if mismatches:
            self._dead_end(order, "; ".join(mismatches) + f" ({_bytes_line(spec)})")
        return None

    def _dead_end(self, order: tuple[int, ...], why: str) -> None:
        if len(order) > self.deepest[0]:
            self.deepest = (len(order), order, why)

    def _reason(self) -> str:
        depth, order, why = self.deepest
        count = len(self.events)
        placed = ", then ".join(
            f"thread {self.events[i].thread}'s {call_format.to_python(self.events[i].call)}" for i in order
        )
        if len(self.scenario.threads) == 1:
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
