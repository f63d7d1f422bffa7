"""The tensor cache's lockstep step, as the lockstep replay and monitor (trace/lockstep) and
`cache_test_case` still take it: run a call on the spec and on a cache,
compare len, `in`, stats() and snapshot(), and describe the first difference. Outcomes are matched
by the one rule of every kind (`contract.steps`: `error_matches`, `results_match`); the step of
every other kind and checker is `contract.steps.differential_step`."""

from __future__ import annotations

import enum
import threading
from typing import Any, Callable, Hashable, Iterable, NamedTuple

from cacheproof.contract.calls import Call, invoke, to_python
from cacheproof.contract.faults import CONTROL_EXCEPTIONS, MalformedResult, UserCodeError, error_text
from cacheproof.spec import CacheError
from cacheproof.spec.kind import outcome_name
from cacheproof.spec.cache.invariants import InvariantViolation, Step, broken_invariants
from cacheproof.spec.cache.semantics import CONTRACT
from cacheproof.spec.cache.kind import STATS_FIELDS, comparable_snapshot, normalize_snapshot
from cacheproof.contract.steps import error_classes, error_matches, results_match



class Outcome(NamedTuple):
    """What a call did: its result, or the exception it raised."""

    result: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"raises {type(self.error).__name__}: {error_text(self.error)}"
        return f"returns {_describe(self.result)}"


class Divergence(AssertionError):
    """The cache under test disagrees with the spec."""


def run_call(cache: Any, call: Call, capacity_bytes: int | None = None) -> Outcome:
    """Run `call`; whatever it raises (any BaseException: SystemExit, GeneratorExit...) is its outcome.
    `capacity_bytes`: as in `invoke`.

    Only the checker's own control exceptions pass through, and a KeyboardInterrupt in the main
    thread, where it may be the user's Ctrl-C (signals reach only the main thread).
    """
    try:
        return Outcome(invoke(cache, call, capacity_bytes=capacity_bytes))
    except UserCodeError as error:
        if call.op == "contains" and error.where.endswith(" in cache"):  # `in` is the call under test
            return Outcome(error=error.error)
        raise
    except CONTROL_EXCEPTIONS:
        raise
    except BaseException as error:  # a broken cache may raise anything; it is reported, not hidden
        if isinstance(error, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            raise
        return Outcome(error=error)


def run_spec_call(spec: Any, call: Call, values_from: Any = None) -> Outcome:
    """Run `call` on the spec with values made as `values_from` (the cache under test) makes them.

    Only contract errors are outcomes; anything else is a spec bug and propagates.
    """
    try:
        return Outcome(invoke(spec, call, values_from))
    except CacheError as error:
        return Outcome(error=error)


def outcome_difference(call: Call, expected: Outcome, actual: Outcome) -> str | None:
    """Why `actual` does not match the spec's `expected`, or None when it does.

    A cache's result whose ==, or repr, or an error whose str, itself raises is a difference too.
    """
    try:
        return _outcome_difference(call, expected, actual)
    except Exception as error:  # the cache's result or error object may fail to compare or print
        return f"{to_python(call)}: comparing this cache's outcome with the spec's raised {type(error).__name__}: {error}"


def _outcome_difference(call: Call, expected: Outcome, actual: Outcome) -> str | None:
    if expected.error is not None:
        if actual.error is not None and error_matches(type(expected.error).__name__, error_classes(actual.error)):
            return None
    elif actual.error is None and results_match(call.op, expected.result, actual.result):
        return None
    return f"{to_python(call)}: spec {expected.describe()}; this cache {actual.describe()}"


def state_difference(spec: Any, cache: Any, keys: Iterable[Hashable]) -> str | None:
    """The first difference in len(), `in` over `keys`, stats() and snapshot(), or None."""
    if len(cache) != len(spec):
        return f"len(): spec {len(spec)}, this cache {len(cache)}"
    for key in keys:
        if (key in cache) != (key in spec):
            return f"{key!r} in cache: spec {key in spec}, this cache {key in cache}"
    if hasattr(cache, "stats"):
        expected, actual = spec.stats(), cache.stats()
        stats_fields(actual)
        for field in STATS_FIELDS:
            if getattr(actual, field) != getattr(expected, field):
                return f"stats().{field}: spec {getattr(expected, field)}, this cache {getattr(actual, field)}"
    if hasattr(cache, "snapshot"):
        order, flags = spec.semantics.snapshot_order, spec.semantics.transient_entries
        expected_entries = comparable_snapshot(normalize_snapshot(spec.snapshot()), order, flags)
        actual_entries = comparable_snapshot(snapshot_entries(cache.snapshot()), order, flags)
        if actual_entries != expected_entries:
            level = "" if order == "full" else f" ({order} order)"
            return f"snapshot(){level}: spec {expected_entries}, this cache {actual_entries}"
    return None


def stats_fields(result: Any) -> dict:
    """A cache's stats() result as {field: value}; `MalformedResult` when a field of the contract is missing."""
    for field in STATS_FIELDS:
        if not hasattr(result, field):
            raise MalformedResult("stats()", result, f"which has no field {field}")
    return {field: getattr(result, field) for field in STATS_FIELDS}


def snapshot_entries(result: Any) -> tuple:
    """A cache's snapshot() result normalized; `MalformedResult` when it is not entries with the contract's fields."""
    try:
        return normalize_snapshot(result)
    except Exception as error:  # noqa: BLE001 - any shape the user's snapshot() returns is reported
        raise MalformedResult(
            "snapshot()", result, f"which is not a list of entries with key, state, refcount, nbytes, retain ({error})"
        ) from None


def step_difference(
    spec: Any, cache: Any, call: Call, keys: Iterable[Hashable], seen: Callable[[str, str], None] | None = None
) -> str | None:
    """Make `call` on the spec and on the cache (values made by the cache's recipe); describe the
    first problem: an invariant the spec's own step breaks, a different outcome, or a different
    state (len, `in` over `keys`, stats, snapshot), or the user's code failing outside the call
    (`UserCodeError`: make_value, snapshot...). None when the step agrees. `seen(operation,
    outcome)` is told the spec's outcome (`spec.kind.outcome_name`)."""
    try:
        return _step_difference(spec, cache, call, keys, seen)
    except UserCodeError as error:
        when = "making a value for" if error.where.startswith("make_value") else "after"
        return f"{error}, {when} {to_python(call)}"


def _step_difference(
    spec: Any, cache: Any, call: Call, keys: Iterable[Hashable], seen: Callable[[str, str], None] | None
) -> str | None:
    before = spec.snapshot()
    expected = run_spec_call(spec, call, values_from=cache)
    if seen is not None:
        seen(call.op, outcome_name(expected.result, None if expected.error is None else type(expected.error).__name__))
    actual = run_call(cache, call)
    if spec.semantics == CONTRACT:
        step = Step(call.op, spec.capacity_bytes, before, spec.snapshot(), expected.error is not None)
        broken = broken_invariants(step)
    else:  # the step invariants (I5, I6) are the contract's; the state invariants hold under every option
        broken = state_invariants_broken(spec)
    if broken:
        names = ", ".join(f"{i.name} ({i.rule})" for i in broken)
        return f"the spec itself breaks {names} on {call.op}"
    difference = outcome_difference(call, expected, actual)
    if difference is not None:
        return difference
    try:
        return state_difference(spec, cache, keys)
    except UserCodeError:
        raise
    except Exception as error:  # a broken cache's len/in/stats/snapshot may itself fail
        return inspection_failure(error)


def state_invariants_broken(spec: Any) -> tuple:
    """I1-I4 and the byte counters on the spec's state, as a one-item tuple naming the failure, or ()."""
    try:
        spec.check_invariants()
    except InvariantViolation as violation:
        return (_Named("I1-I4", str(violation)),)
    return ()


class _Named(NamedTuple):
    name: str
    rule: str


def inspection_failure(error: Exception) -> str:
    """The message for len/in/stats/snapshot failing: the user's code by name when it is known."""
    if isinstance(error, UserCodeError):
        return str(error)
    return f"inspecting the cache raised {type(error).__name__}: {error_text(error)}"


def _describe(result: Any) -> str:
    if isinstance(result, enum.Enum):
        return result.name
    if hasattr(result, "shape") and hasattr(result, "dtype"):
        return f"a value of dtype {result.dtype}, shape {tuple(result.shape)}"
    text = repr(result)
    return text if len(text) <= 80 else text[:77] + "..."
