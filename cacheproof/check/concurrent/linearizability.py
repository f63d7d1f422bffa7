"""Is a recorded concurrent history of any spec kind linearizable with respect to its spec?

The rule: the history is correct iff some total order of the thread calls
1. respects real-time order: a call that returned before another was invoked comes first
   (so each thread's own calls stay in program order), and
2. replayed on the kind's model after the prefix, gives every call the outcome it was observed to
   have (`contract.steps.outcomes_agree`, the differential step's one rule: the same result, or an
   error of the same contract class by name), and
3. leaves the model in the state the final views show (`contract.steps.differing_views`, every
   view of the kind read as its `view_readers` say: what the sequential check compares).

Failures that need no search: a thread or a prefix call that never returned (deadlock or lost
wake-up), a call that crashed (an exception that is not a contract error), views that never
returned, and a prefix whose sequential outcomes already differ from the spec's.

The search is `search.linearize_parts` (iterative Wing & Gong with memoised (placed calls, model
state) pairs, part by part where the kind's `parts` splits the history, a time budget that answers
"unknown"); this module supplies the sequential model: the kind's model stepped on a copy, its
`state_key()` as the memo key. The calls' values are made once per history by a model of the
scenario, so that the model's copies share them, and each comparison of an observed outcome with
the model's is made once per (call, model result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, NamedTuple

from cacheproof.check.concurrent.history import Event, History
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.check.concurrent.search import linearize_parts
from cacheproof.contract.calls import Call, ValueRecipe, to_python
from cacheproof.contract.steps import StepOutcome, differing_views, outcome_of, outcomes_agree
from cacheproof.spec.kind import SpecKind

DEFAULT_SEARCH_SECONDS = 20.0
"""The search budget per history; past it the verdict is "unknown"."""


@dataclass(frozen=True)
class Verdict:
    """ok (True), not linearizable (False, with the reason), or unknown (None: the search ran past its
    budget); `order` is a witness when ok."""

    ok: bool | None
    reason: str = ""
    order: tuple[tuple[int, int], ...] = ()  # (thread, index) in linearization order


def check_history(kind: SpecKind, scenario: Scenario, history: History,
                  budget_seconds: float | None = DEFAULT_SEARCH_SECONDS) -> Verdict:
    """Whether `history` (a run of `scenario` on an implementation of `kind`) is linearizable with
    respect to the kind's spec; see the module doc."""
    calls = sum(len(calls) for calls in scenario.threads)
    complete = len(history.events) == calls or (history.stuck and len(history.events) < calls)
    if history.stuck_making is not None:
        complete = not history.prefix and not history.events
    elif history.prefix_stuck:
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
    model = scenario.new_model(kind)
    for position, (call, seen) in enumerate(zip(scenario.prefix, history.prefix)):
        expected = _unwrapped(outcome_of(model, _with_values(call, history.values), kind.error_names))
        if not outcomes_agree(call.op, expected, seen):
            return Verdict(False, (
                f"the prefix alone diverges: call {position + 1}, {to_python(call)}, {seen.describe()}; "
                f"the spec {expected.describe()}"
            ))
    events = history.events
    parts = kind.parts(model, [(e.call.op, e.call.args) for e in events])
    search = linearize_parts(_HistoryModel(kind, history), model, [e.invoked for e in events],
                             [e.responded for e in events], parts, budget_seconds)
    if search.ok:
        return Verdict(True, order=tuple((events[i].thread, events[i].index) for i in search.order))
    if search.ok is None:
        return Verdict(None, (
            f"unknown: the search ran past its {budget_seconds:g} s budget after {search.expanded} expansions "
            "without finding an order or ruling every order out"
        ))
    reason = _reason(scenario, events, search.deepest, search.why)
    if search.part:
        reason += (f" (searched part by part, as the kind's calls on different parts could not change each "
                   f"other's outcomes: the order above is of the {len(search.part)} calls of one part, and no "
                   "order of them explains what they returned)")
    return Verdict(False, reason)


def _failure_without_search(scenario: Scenario, history: History) -> str | None:
    if history.stuck_making is not None:
        return (f"{history.stuck_making} never returned while the scenario's values were made, before any call "
                "(making a value for a call of the scenario)")
    if history.prefix_stuck:
        position = len(history.prefix)
        return (f"prefix call {position + 1}, {to_python(scenario.prefix[position])}, never returned "
                "(a deadlock, or a call that never returns, with no other thread running)")
    for event in history.events:
        if event.responded is None:
            return f"thread {event.thread} never returned from {to_python(event.call)} (a deadlock, or a call that never returns)"
    for position, outcome in enumerate(history.prefix):
        if outcome.crash is not None:
            return f"prefix call {position + 1} crashed: it raises {outcome.crash}, which is not a contract error"
    for event in history.events:
        if event.outcome.crash is not None:
            return (f"thread {event.thread} crashed: {to_python(event.call)} raises {event.outcome.crash} "
                    f"({event.outcome.crash.partition(':')[0]} is not a contract error)")
    if history.final_error is not None:
        return f"inspecting the implementation after the threads joined failed: {history.final_error}"
    return None


class _Mismatch(NamedTuple):
    """Why the spec does not explain a call there, written out (`str`) only when a reason shows it:
    the search meets many more mismatches than it reports."""

    event: Event
    expected: StepOutcome

    def __str__(self) -> str:
        event = self.event
        return (f"thread {event.thread}'s {to_python(event.call)} {event.outcome.describe()}, "
                f"but there the spec {self.expected.describe()}")


class _HistoryModel:
    """The kind's model as `search.SequentialModel` over the thread calls of one history."""

    def __init__(self, kind: SpecKind, history: History) -> None:
        self.kind, self.events, self.final = kind, history.events, history.final
        self.calls = [_with_values(event.call, history.values) for event in history.events]
        self.agreed: dict[tuple[int, int], tuple[Any, bool]] = {}

    def step(self, model: Any, index: int) -> tuple[Any, "_Mismatch | str"]:
        event = self.events[index]
        after = model.copy()
        expected = outcome_of(after, self.calls[index], self.kind.error_names)
        if self._agree(index, expected, event.outcome):
            return after, ""
        return None, _Mismatch(event, _unwrapped(expected))

    def _agree(self, index: int, expected: StepOutcome, seen: StepOutcome) -> bool:
        """`outcomes_agree`, once per (call, model result): the results the model gives are few and
        shared between its copies (values made once, `_with_values`); the result is kept with the
        answer so that its id is not reused."""
        if expected.error is not None or expected.result is None or isinstance(expected.result, (bool, int, str)):
            return outcomes_agree(self.events[index].call.op, expected, seen)
        memo = (index, id(expected.result))
        known = self.agreed.get(memo)
        if known is None:
            agree = outcomes_agree(self.events[index].call.op, _unwrapped(expected), seen)
            known = self.agreed[memo] = (expected.result, agree)
        return known[1]

    def key(self, model: Any) -> Hashable:
        return model.state_key()

    def final_difference(self, model: Any) -> str | None:
        differing = differing_views(model, self.final, self.kind.views, self.kind.view_readers)
        return "; ".join(f"{view}() is {seen!r}, the spec's {wanted!r}" for view, wanted, seen in differing) or None

    def describe(self, model: Any) -> str:
        return f"the spec's snapshot {model.snapshot()!r}"


class _MadeValue(bytes):
    """A value recipe's value as the implementation made it, handed to the model in its place: bytes
    of the recipe's size (so that the model sizes it as the implementation's), that hash and compare
    by the recipe, so that the model's `state_key()` tells the recipe an entry holds (an
    implementation's tensor neither hashes by content nor compares to one truth value)."""

    recipe: ValueRecipe
    value: Any

    def __new__(cls, recipe: ValueRecipe, value: Any) -> "_MadeValue":
        made = super().__new__(cls, recipe.nbytes)
        made.recipe, made.value = recipe, value
        return made

    def __hash__(self) -> int:
        return hash(self.recipe)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MadeValue) and other.recipe == self.recipe

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return self.recipe.python()


def _with_values(call: Call, values: dict[ValueRecipe, Any]) -> Call:
    """`call` with each value recipe replaced by the implementation's value for it (`History.values`,
    as a `_MadeValue`), made once per history instead of at every step of the search; a recipe
    without one is left for the model to make."""
    def concrete(argument: Any) -> Any:
        if isinstance(argument, ValueRecipe) and argument in values:
            return _MadeValue(argument, values[argument])
        return argument
    return Call(call.op, tuple(concrete(a) for a in call.args), {name: concrete(a) for name, a in call.kwargs.items()})


def _unwrapped(outcome: StepOutcome) -> StepOutcome:
    """`outcome` with a `_MadeValue` result replaced by the implementation's value it stands for."""
    if isinstance(outcome.result, _MadeValue):
        return outcome._replace(result=outcome.result.value)
    return outcome


def _reason(scenario: Scenario, events: tuple[Event, ...], order: tuple[int, ...], why: Any) -> str:
    """Why no order explains the history, from the deepest dead end of the search."""
    depth, count = len(order), len(events)
    placed = ", then ".join(f"thread {events[i].thread}'s {to_python(events[i].call)}" for i in order)
    if len(scenario.threads) == 1:
        after = f"after {placed}, " if order else ""
        state = "the implementation's " if depth == count else ""
        return f"one thread alone diverges from the spec (a sequential bug, `cacheproof check` finds it too): {after}{state}{why}"
    if depth == count:
        return (f"no order of the {count} concurrent calls that respects their real-time order explains the "
                f"state they left: the orders that explain every outcome, e.g. {placed}, leave the spec in "
                f"another state, where the implementation's {why}")
    head = f"no order of the {count} concurrent calls that respects their real-time order explains what they returned"
    if depth <= 0:
        return f"{head}: whichever call goes first, {why}"
    return f"{head}: the longest order that explains the outcomes is {placed}; after it {why}"
