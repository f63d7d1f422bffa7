"""Every difference at the step where a cache diverges, not only the first.

The checker's loop (`differential.step_difference`) stops at the first difference of a step, which
is what it needs to decide. Once a counterexample is shrunk, its last call is replayed here and
every observation the contract's Conformance section compares is listed, in the same order: the
outcome, len(), `in` for every key, each compared stats() field, the snapshot.
An oversized put that returns False where the spec raises TooLargeError, and evicts every entry
on the way, is then one outcome difference and several state differences.

A divergence's *kind* (`kind_of`) is what makes two counterexamples different bugs rather than
two sightings of one: the operation, the spec's outcome and the cache's outcome, each as a
category (`outcome_category`: "raises WrongStateError", "returns False", "returns a list"), with
", and another state" added when the state differs too, and "the same outcome, another state"
when only the state differs. An oversized put that returns False instead of raising is thus one
kind on an empty cache and another where it also evicts entries.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable, Iterable, NamedTuple, Sequence

from cacheproof.contract.calls import Call, ValueRecipe, to_python
from cacheproof.contract.outcomes import (
    STATS_FIELDS,
    Outcome,
    comparable_snapshot,
    inspection_failure,
    normalize_snapshot,
    outcome_difference,
    run_call,
    run_spec_call,
    snapshot_entries,
    stats_fields,
)
from cacheproof.contract.faults import UserCodeError
from cacheproof.contract.sequence import compared_keys
from cacheproof.contract.values import values_equal

from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.kinds import new_spec
from cacheproof.spec.kind import Model

OUTCOME = "outcome"
LEN = "len()"
CONTAINS = "in"
STATS = "stats()"
SNAPSHOT = "snapshot()"
INSPECTION = "inspection"
USER_CODE = "user code"
SAME_OUTCOME = "the same outcome, but another state"
STATE_TOO = ", and another state"


class Difference(NamedTuple):
    """One observation where the cache is not the spec, as plain data.

    `observation` is one of OUTCOME, LEN, CONTAINS, STATS, SNAPSHOT, INSPECTION (len/in/stats/
    snapshot itself raised), USER_CODE (make_value or the like raised). `expected` is the spec's
    value (the error's class name or the result for OUTCOME, an int, a bool, comparable snapshot
    entries); `subject` the spec's outcome in words for OUTCOME, the key for CONTAINS, the field for STATS,
    (order, retain_flags) for SNAPSHOT, the inspection's name for INSPECTION.
    """

    observation: str
    text: str
    expected: Any = None
    subject: Any = None


@dataclass(frozen=True)
class DivergingStep:
    """The last call of a sequence, replayed: both outcomes, every difference, both snapshots."""

    call: Call
    expected: Outcome
    actual: Outcome | None  # None when making the call's value failed in the user's code
    differences: tuple[Difference, ...]
    spec_before: tuple  # normalized snapshots (key, state name, refcount, nbytes, retain)
    spec_after: tuple
    cache_before: tuple | None  # None when the cache has no snapshot() or it failed
    cache_after: tuple | None
    stored_recipe: ValueRecipe | None = None  # for a value the spec's get/pop returns: the recipe it was stored as

    @property
    def kind(self) -> str:
        """The divergence's kind (see the module docstring)."""
        return kind_of(self.call, self.expected, self.actual, self.differences)


def outcome_category(outcome: Outcome | None) -> str:
    """An outcome as the kind sees it: the error's class name, or the result's value or type."""
    if outcome is None:
        return "fails in the user's code"
    if outcome.error is not None:
        return f"raises {type(outcome.error).__name__}"
    result = outcome.result
    if result is None or isinstance(result, bool):
        return f"returns {result}"
    if isinstance(result, enum.Enum):
        return f"returns {result.name}"
    return f"returns {type(result).__name__}"


def kind_of(call: Call, expected: Outcome, actual: Outcome | None, differences: Sequence[Difference]) -> str:
    """`op: spec <category>; this cache <category>`, "and another state" added when the state differs
    too, SAME_OUTCOME when only the state differs."""
    outcome_differs = any(d.observation in (OUTCOME, USER_CODE) for d in differences)
    state_differs = any(d.observation not in (OUTCOME, USER_CODE) for d in differences)
    observed = outcome_category(actual) if outcome_differs else SAME_OUTCOME
    if outcome_differs and state_differs:
        observed += STATE_TOO
    return f"{call.op}: spec {outcome_category(expected)}; this cache {observed}"


def diverging_step(
    factory: Callable[[int], Any], capacity_bytes: int, calls: Sequence[Call], semantics: Semantics = CONTRACT
) -> DivergingStep | None:
    """Replay `calls` on a fresh spec and a fresh `factory(capacity_bytes)` and list every difference
    at the last call (the earlier calls are made as the checker makes them, without comparing);
    `in` is compared for every key, as `sequence.first_divergence` does.
    None when the last call agrees in everything."""
    spec = new_spec(capacity_bytes, semantics)
    cache = factory(capacity_bytes)
    for call in calls[:-1]:
        run_spec_call(spec, call, values_from=cache)
        run_call(cache, call)
    step = step_differences(spec, cache, calls[-1], compared_keys(calls))
    if not step.differences:
        return None
    if step.expected.error is None and step.call.op in ("get", "pop") and step.expected.result is not None:
        return replace(step, stored_recipe=recipe_of(step.expected.result, calls[:-1], cache))
    return step


def recipe_of(value: Any, calls: Sequence[Call], cache: Any) -> ValueRecipe | None:
    """The recipe, among those `calls` store (latest first), whose value for `cache` equals `value`."""
    for call in reversed(calls):
        if call.op in ("commit", "put") and len(call.args) == 2 and isinstance(call.args[1], ValueRecipe):
            recipe = call.args[1]
            if values_equal(value, recipe.value(cache)):
                return recipe
    return None


def step_differences(spec: Model, cache: Any, call: Call, keys: Iterable[Hashable]) -> DivergingStep:
    """Make `call` on the spec and the cache and list every difference, in the Conformance order."""
    spec_before, cache_before = normalize_snapshot(spec.snapshot()), _snapshot(cache)
    expected = Outcome()
    try:
        expected = run_spec_call(spec, call, values_from=cache)
        actual = run_call(cache, call)
    except UserCodeError as error:  # make_value failed: for the spec's value, or in the cache's process
        spec_after = normalize_snapshot(spec.snapshot())
        difference = Difference(USER_CODE, f"{error}, making a value for {to_python(call)}")
        return DivergingStep(call, expected, None, (difference,), spec_before, spec_after, cache_before, cache_before)
    differences = []
    text = outcome_difference(call, expected, actual)
    if text is not None:
        wanted = type(expected.error).__name__ if expected.error is not None else expected.result
        differences.append(Difference(OUTCOME, text, wanted, expected.describe()))
    differences.extend(state_differences(spec, cache, call, keys))
    return DivergingStep(
        call, expected, actual, tuple(differences), spec_before, normalize_snapshot(spec.snapshot()),
        cache_before, _snapshot(cache),
    )


def state_differences(spec: Model, cache: Any, call: Call, keys: Iterable[Hashable]) -> list[Difference]:
    """Every state difference: len(), `in` over `keys`, each compared stats() field, the snapshot.
    An inspection that raises is one difference and ends that inspection only."""
    found: list[Difference] = []
    for inspect in (_len_difference, _contains_differences, _stats_differences, _snapshot_difference):
        try:
            found.extend(inspect(spec, cache, keys))
        except UserCodeError as error:
            found.append(Difference(INSPECTION, f"{error}, after {to_python(call)}", subject=_inspected(inspect)))
        except Exception as error:  # a broken cache's len/in/stats/snapshot may itself fail
            found.append(Difference(INSPECTION, inspection_failure(error), subject=_inspected(inspect)))
    return found


def _len_difference(spec: Model, cache: Any, keys) -> list[Difference]:
    expected, actual = len(spec), len(cache)
    return [] if actual == expected else [Difference(LEN, f"len(): spec {expected}, this cache {actual}", expected)]


def _contains_differences(spec: Model, cache: Any, keys) -> list[Difference]:
    found = []
    for key in keys:
        expected, actual = key in spec, key in cache
        if actual != expected:
            found.append(Difference(CONTAINS, f"{key!r} in cache: spec {expected}, this cache {actual}", expected, key))
    return found


def _stats_differences(spec: Model, cache: Any, keys) -> list[Difference]:
    if not hasattr(cache, "stats"):
        return []
    expected, actual = spec.stats(), stats_fields(cache.stats())
    found = []
    for field in STATS_FIELDS:
        wanted, got = getattr(expected, field), actual[field]
        if got != wanted:
            found.append(Difference(STATS, f"stats().{field}: spec {wanted}, this cache {got}", wanted, field))
    return found


def _snapshot_difference(spec: Model, cache: Any, keys) -> list[Difference]:
    if not hasattr(cache, "snapshot"):
        return []
    order, flags = spec.semantics.snapshot_order, spec.semantics.transient_entries
    expected = comparable_snapshot(normalize_snapshot(spec.snapshot()), order, flags)
    actual = comparable_snapshot(snapshot_entries(cache.snapshot()), order, flags)
    if actual == expected:
        return []
    level = "" if order == "full" else f" ({order} order)"
    return [Difference(SNAPSHOT, f"snapshot(){level}: spec {expected}, this cache {actual}", expected, (order, flags))]


def _inspected(inspect: Callable) -> str:
    return {_len_difference: LEN, _contains_differences: CONTAINS, _stats_differences: STATS}.get(inspect, SNAPSHOT)


def _snapshot(cache: Any) -> tuple | None:
    if not hasattr(cache, "snapshot"):
        return None
    try:
        return normalize_snapshot(cache.snapshot())
    except Exception:  # reported as an inspection difference; the snapshot is then unknown
        return None
