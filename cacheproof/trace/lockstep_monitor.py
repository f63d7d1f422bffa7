"""The tensor cache's runtime monitor (its `SpecKind.state_every` is None): `MonitoredCache`, made by
`cacheproof.trace.monitor.monitor(cache)`, on the shell every monitor shares (`trace.monitored`).

Every operation on the `MonitoredCache` (`key in cache` included) goes to the cache and then to the
spec, with the same arguments (a commit/put value as a stand-in of its size, see "Values" below).
After each call the monitor compares the outcome (the result, or the error class by name anywhere
in the MRO, as the checker does) and `len()`. `stats()` and the full `snapshot()`, when the cache
has them, cost O(entries) on both sides, so they are compared every `state_every` calls (1: after
every call), by default every max(16, 2 * entries) calls, which bounds their cost per call.

The calls are recorded as a trace (cacheproof.contract.record): a value passed to commit/put as
`{"nbytes": size, "tag": 0, "element_size": e}` (its size and bytes per element, not its contents:
the lifecycle depends on sizes only), a get/pop result as `{"value": true}`. The trace in memory
restarts whenever the cache becomes empty (an empty cache replays the same from there on);
`trace_path` logs every call, line-buffered. The call that diverges ends both, with the spec's outcome and the cache's as `observed`.

Values: the spec beside the cache holds what the cache is obliged to hold, the value as it was at
commit/put, not the caller's object (which an engine reuses): a storage-free stand-in of the
value's size, and per key a digest of its bytes at call time, which a get/pop result must match
(`cacheproof.trace.held_values`). So the monitor keeps 16 bytes per entry, not the callers' values;
it costs a digest of the value's bytes per commit/put and get/pop (`cacheproof bench monitor`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Hashable

from cacheproof.contract.calls import Call, ValueRecipe, to_python
from cacheproof.contract.outcomes import STATS_FIELDS, Outcome, outcome_difference, state_difference
from cacheproof.contract.record import SOME_VALUE, DivergentOutcome, TracedCall, error_name, recorded_result
from cacheproof.spec import CacheError
from cacheproof.spec.cache.values import element_sizes_dividing, value_size
from cacheproof.spec.kind import Model, SpecKind
from cacheproof.trace.held_values import HeldValues
from cacheproof.trace.monitored import Monitored

_VALUE_OPERATIONS = ("get", "pop")
_VALUE_ARGUMENT_OPERATIONS = ("commit", "put")  # the value is the second argument

ADAPTIVE_MINIMUM = 16
ADAPTIVE_CALLS_PER_ENTRY = 2
"""With state_every=None, stats() and snapshot() are compared every max(16, 2 * entries) calls."""


class MonitoredCache(Monitored):
    """A cache with the spec running beside it; make one with `monitor(cache)`.

    Operations are serialized by one lock so that the spec sees them in the cache's order. After the
    first divergence the monitor only forwards calls. Anything that is not an operation (stats,
    snapshot, make_value, other attributes) goes straight to the cache.
    """

    def __init__(self, cache: Any, kind: SpecKind, capacity_bytes: int, *, profile: str, semantics: Any,
                 operations: tuple[str, ...], trace_path: str | Path | None, state_every: int | None) -> None:
        super().__init__(cache, kind, capacity_bytes, profile=profile, semantics=semantics, operations=operations,
                         trace_path=trace_path)
        self._cache = cache
        self._error_names = kind.error_names
        self._state_every = state_every
        self._unchecked_calls = 0
        self._compares_state = hasattr(cache, "stats") or hasattr(cache, "snapshot")
        self._records: list[tuple] = []  # (op, args, kwargs, result, error name): see `_traced`
        self._held = HeldValues()  # the digest of each stored value, for get/pop

    # Operations ---------------------------------------------------------------------------

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Any:
        return self._checked("reserve", (key, nbytes), {} if retain is True else {"retain": retain})

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Any:
        return self._checked("acquire", (key, nbytes), {} if retain is True else {"retain": retain})

    def commit(self, key: Hashable, value: Any) -> Any:
        return self._checked("commit", (key, value), {})

    def put(self, key: Hashable, value: Any) -> Any:
        return self._checked("put", (key, value), {})

    def get(self, key: Hashable) -> Any:
        return self._checked("get", (key,), {})

    def release(self, key: Hashable) -> Any:
        return self._checked("release", (key,), {})

    def evict(self, nbytes: int) -> Any:
        return self._checked("evict", (nbytes,), {})

    def pop(self, key: Hashable) -> Any:
        return self._checked("pop", (key,), {})

    def clear(self) -> Any:
        return self._checked("clear", (), {})

    def __contains__(self, key: object) -> bool:
        if "contains" not in self._operations:  # outside the subset: answered by the cache, unchecked
            return key in self._cache
        return self._checked("contains", (key,), {})

    def __len__(self) -> int:
        return len(self._cache)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)

    def __repr__(self) -> str:
        return f"monitor({self._cache!r})"

    # Monitoring ---------------------------------------------------------------------------

    @property
    def cache(self) -> Any:
        """The monitored cache itself."""
        return self._cache

    def check_state(self) -> None:
        """Compare stats() and snapshot() now; `DivergenceError` if they differ."""
        with self._lock:
            if self._diverged:
                return
            difference = _state_difference(self._spec, self._cache)
            if difference is not None:
                self._diverge(f"check_state() after {len(self._records)} calls: {difference}")

    def _checked(self, op: str, args: tuple, kwargs: dict) -> Any:
        """Call the cache, then the spec; compare and record. This is the hot path."""
        if op not in self._operations:
            raise AttributeError(
                f"monitor: {op} is outside the monitored operations ({','.join(self._operations)}); "
                "pass ops= to monitor() to include it"
            )
        with self._lock:
            try:
                result = args[0] in self._cache if op == "contains" else getattr(self._cache, op)(*args, **kwargs)
                error = None
            except Exception as raised:
                result, error = None, raised
            if self._diverged:
                if error is not None:
                    raise error
                return result
            spec = self._spec
            kept = False  # a put the spec answers True without storing (put_present="keep")
            try:
                spec_args = self._held.spec_arguments(op, args)
                kept = op == "put" and spec.semantics.put_present == "keep" and args[0] in spec
                wanted = args[0] in spec if op == "contains" else getattr(spec, op)(*spec_args, **kwargs)
                wanted_error = None
            except CacheError as raised:
                wanted, wanted_error = None, raised
            self._held.note(op, args, wanted_error is None and wanted is not False and not kept, spec)
            difference = None
            if op in _VALUE_OPERATIONS and error is None and wanted_error is None and wanted is not None:
                difference = self._held.difference(Call(op, args, kwargs), result, wanted)
            elif not (result is wanted and error is None and wanted_error is None) and not _same_outcome(
                wanted, wanted_error, result, error
            ):
                difference = outcome_difference(
                    Call(op, args, kwargs), Outcome(wanted, wanted_error), Outcome(result, error)
                )
            entries = len(spec)
            if difference is None:
                self._unchecked_calls += 1
                due = self._compares_state and self._unchecked_calls >= (
                    self._state_every or max(ADAPTIVE_MINIMUM, ADAPTIVE_CALLS_PER_ENTRY * entries)
                )
                difference = self._state_difference_after(op, args, kwargs, entries, due)
            if difference is not None:
                self._diverge(difference, _diverging_call(op, args, kwargs, wanted, wanted_error, result, error, difference,
                                                          self._error_names))
            if op in _VALUE_ARGUMENT_OPERATIONS or wanted_error is not None:
                record = _record(op, args, kwargs, wanted, wanted_error, self._error_names)
            else:
                record = (op, args, kwargs, wanted, None)
            if entries:
                self._records.append(record)
            else:
                self._records.clear()  # an empty cache replays the same from here on
            if self._log is not None:
                self._log_call(_traced(record))
            if error is not None:
                raise error
            return result

    def _state_difference_after(self, op: str, args: tuple, kwargs: dict, entries: int, due: bool) -> str | None:
        """len() now; stats() and snapshot() when a full check is `due`."""
        try:
            cache_entries = len(self._cache)
            if cache_entries != entries:
                return f"after {to_python(Call(op, args, kwargs))}: len(): spec {entries}, this cache {cache_entries}"
            if not due:
                return None
            unchecked, self._unchecked_calls = self._unchecked_calls, 0
            difference = _state_difference(self._spec, self._cache)
        except Exception as raised:  # a broken cache's len/stats/snapshot may itself fail
            return f"after {to_python(Call(op, args, kwargs))}: inspecting the cache raised {type(raised).__name__}: {raised}"
        if difference is None:
            return None
        if unchecked == 1:
            return f"after {to_python(Call(op, args, kwargs))}: {difference}"
        return (
            f"{difference}; found after {to_python(Call(op, args, kwargs))}, the state last matched "
            f"{unchecked} calls earlier: replay the trace with --impl to find the call"
        )

    def _recorded(self) -> tuple[TracedCall, ...]:
        return tuple(_traced(record) for record in self._records)

def _same_outcome(wanted: Any, wanted_error: Any, result: Any, error: Any) -> bool:
    """The common cases of a matching outcome, decided without building a message; False means "look closer"."""
    if wanted_error is not None or error is not None:
        return type(error) is type(wanted_error)
    return result is wanted or (type(result) is type(wanted) and result == wanted)


def _state_difference(spec: Model, cache: Any) -> str | None:
    """stats() and snapshot() compared: as tuples first (a cache using the spec's types), then as the checker does."""
    if hasattr(cache, "stats"):
        expected, actual = spec.stats(), cache.stats()
        if any(getattr(actual, field) != getattr(expected, field) for field in STATS_FIELDS):
            return state_difference(spec, cache, ())
    if hasattr(cache, "snapshot") and cache.snapshot() != spec.snapshot():
        return state_difference(spec, cache, ())
    return None


def _record(op: str, args: tuple, kwargs: dict, result: Any, error: Exception | None,
            error_names: frozenset[str]) -> tuple:
    """What the trace keeps of a call: a value argument as its size and element size (never the
    value itself)."""
    if error is not None:
        error = error_name(error, error_names)
    if op in _VALUE_ARGUMENT_OPERATIONS and len(args) == 2:
        size = _size(args[1])
        if size is not None:
            args = (args[0], ValueRecipe(size, 0, _element_size(args[1], size)))
    return (op, args, kwargs, result, error)


def _element_size(value: Any, size: int) -> int:
    """Bytes per element of a sized value (`itemsize` of an array or tensor; 1 for bytes, and for
    an element size no recipe has)."""
    itemsize = getattr(value, "itemsize", 1)
    return itemsize if type(itemsize) is int and itemsize in element_sizes_dividing(size) else 1


def _size(value: Any) -> int | None:
    """`value_size`, with a shortcut for plain tensors and bytes."""
    torch = sys.modules.get("torch")
    if torch is not None and type(value) is torch.Tensor:
        return value.numel() * value.element_size()
    if type(value) is bytes:
        return len(value)
    return value_size(value)


def _diverging_call(
    op: str, args: tuple, kwargs: dict, wanted: Any, wanted_error: Any, result: Any, error: Any, why: str,
    error_names: frozenset[str],
) -> TracedCall:
    """The call the cache diverged at: the spec's outcome as the recorded one, the cache's as `observed`."""
    if error is not None:
        observed = DivergentOutcome(error=error_name(error, error_names), why=why)
    elif op in _VALUE_OPERATIONS:
        observed = DivergentOutcome(SOME_VALUE, why=why)
    else:
        observed = DivergentOutcome(recorded_result(result), why=why)
    return _traced(_record(op, args, kwargs, wanted, wanted_error, error_names))._replace(observed=observed)


def _traced(record: tuple) -> TracedCall:
    op, args, kwargs, result, error = record
    call = Call(op, args, kwargs)
    if error is not None:
        return TracedCall(call, error=error)
    if op in _VALUE_OPERATIONS:
        return TracedCall(call, SOME_VALUE)
    return TracedCall(call, recorded_result(result))
