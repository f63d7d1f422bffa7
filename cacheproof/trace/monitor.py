"""`monitor(cache)`: run the spec beside a live cache and raise `DivergenceError` at the first mismatch.

Every operation on the `MonitoredCache` (`key in cache` included) goes to the cache and then to the
spec, with the same arguments (a commit/put value as a stand-in of its size, see "Values" below). After each call the monitor compares the outcome (the result,
or the error class by name anywhere in the MRO, as the checker does) and `len()`.
`stats()` and the full `snapshot()`, when the cache has them, cost O(entries) on both sides, so they
are compared every `state_every` calls (1: after every call), by default every max(16, 2 * entries)
calls, which bounds their cost per call.

The calls are recorded as a trace (see cacheproof.trace.format): a value passed to commit/put as
`{"nbytes": size, "tag": 0}` (its size, not its contents: the lifecycle depends on sizes only),
a get/pop result as `{"value": true}`. The trace in memory restarts whenever the cache becomes
empty (an empty cache replays the same from there on); `trace_path` logs every call, line-buffered.
The call that diverges ends both, with the spec's outcome and the cache's as `observed`; the log is
flushed and fsync'd before `DivergenceError` propagates.

Threads: safe to call from several threads. One lock is held across each call to the cache and
its replay on the spec, so the spec sees the calls in the order the cache ran them and the trace is
that order; the cache is then never called by two threads at once, so the monitor cannot expose a
race inside it (`cacheproof check --threads` does; docs/concurrency.md).

Values: the spec beside the cache holds what the cache is obliged to hold, the value as it was at
commit/put, not the caller's object (which an engine reuses): a storage-free stand-in of the
value's size, and per key a digest of its bytes at call time, which a get/pop result must match
(`cacheproof.trace.held_values`). So the monitor keeps 16 bytes per entry, not the callers' values;
it costs a digest of the value's bytes per commit/put and get/pop (`cacheproof bench monitor`).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Hashable, Sequence, TextIO

from cacheproof.contract.calls import Call, ValueRecipe, to_python
from cacheproof.cmdline.output_paths import check_output_path
from cacheproof.contract.outcomes import STATS_FIELDS, Outcome, outcome_difference, state_difference
from cacheproof.spec import CacheError
from cacheproof.spec.cache.profiles import ALL_OPERATIONS, DEFAULT_PROFILE, check_operations, profile_named
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.values import value_size
from cacheproof.trace.held_values import HeldValues
from cacheproof.contract.record import SOME_VALUE, DivergentOutcome, Trace, TracedCall, call_line, error_name, header_line, recorded_result
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, new_spec
from cacheproof.spec.kind import Model

_VALUE_OPERATIONS = ("get", "pop")
_CONTRACT_ERRORS = get_kind(DEFAULT_KIND).error_names
_VALUE_ARGUMENT_OPERATIONS = ("commit", "put")  # the value is the second argument

ADAPTIVE_MINIMUM = 16
ADAPTIVE_CALLS_PER_ENTRY = 2
"""With state_every=None, stats() and snapshot() are compared every max(16, 2 * entries) calls."""


class DivergenceError(AssertionError):
    """The monitored cache (or implementation of another kind) disagreed with the spec. `.trace`
    holds the calls up to the bad one, included."""

    def __init__(self, message: str, trace: Trace, logged_to: str | None = None, impl: str = "MODULE:FACTORY") -> None:
        if logged_to is None:
            how = (f"the trace so far holds {len(trace.calls)} calls: cacheproof.trace.format.write_trace("
                   f"path, error.trace), then `cacheproof replay path --impl {impl}`")
        else:
            how = f"every call is logged in {logged_to}: `cacheproof replay {logged_to} --impl {impl}` replays it"
        super().__init__(f"{message}\n({how})")
        self.message = message
        self.trace = trace


class MonitoredCache:
    """A cache with the spec running beside it; make one with `monitor(cache)`.

    Operations are serialized by one lock so that the spec sees them in the cache's order. After the
    first divergence the monitor only forwards calls. Anything that is not an operation (stats,
    snapshot, make_value, other attributes) goes straight to the cache.
    """

    def __init__(
        self, cache: Any, capacity_bytes: int, *, trace_path: str | Path | None, state_every: int | None,
        semantics: Semantics = CONTRACT, profile: str = DEFAULT_PROFILE, operations: tuple[str, ...] = ALL_OPERATIONS,
    ) -> None:
        self._cache = cache
        self._profile = profile
        self._operations = operations
        self._spec = new_spec(capacity_bytes, semantics)
        self._capacity_bytes = capacity_bytes
        self._state_every = state_every
        self._unchecked_calls = 0
        self._compares_state = hasattr(cache, "stats") or hasattr(cache, "snapshot")
        self._records: list[tuple] = []  # (op, args, kwargs, result, error name): see `_traced`
        self._held = HeldValues()  # the digest of each stored value, for get/pop
        self._diverged = False
        self._lock = threading.Lock()
        self._log: TextIO | None = None
        if trace_path is not None:
            check_output_path(trace_path, "monitor: trace_path")
            self._log = open(trace_path, "w", buffering=1)
            self._log.write(header_line(capacity_bytes, profile=profile, semantics=semantics, operations=operations) + "\n")

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

    @property
    def trace(self) -> Trace:
        """The calls since the cache was last empty, with the spec's outcomes."""
        with self._lock:
            return self._trace()

    def check_state(self) -> None:
        """Compare stats() and snapshot() now; `DivergenceError` if they differ."""
        with self._lock:
            if self._diverged:
                return
            difference = _state_difference(self._spec, self._cache)
            if difference is not None:
                self._diverge(f"check_state() after {len(self._records)} calls: {difference}")

    def close(self) -> None:
        """Close the trace file, if any."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "MonitoredCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
                self._diverge(difference, _diverging_call(op, args, kwargs, wanted, wanted_error, result, error, difference))
            if op in _VALUE_ARGUMENT_OPERATIONS or wanted_error is not None:
                record = _record(op, args, kwargs, wanted, wanted_error)
            else:
                record = (op, args, kwargs, wanted, None)
            if entries:
                self._records.append(record)
            else:
                self._records.clear()  # an empty cache replays the same from here on
            if self._log is not None:
                self._log.write(call_line(_traced(record)) + "\n")
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

    def _trace(self) -> Trace:
        return Trace(DEFAULT_KIND, self._capacity_bytes, tuple(_traced(record) for record in self._records),
                     self._profile, self._spec.semantics, self._operations)

    def _diverge(self, message: str, diverging: TracedCall | None = None) -> None:
        """Stop checking and raise. The diverging call (the spec's outcome, the cache's as `observed`)
        ends the trace and the log, which is flushed and fsync'd first: the file replays to the
        divergence even if the process dies right after."""
        self._diverged = True
        trace = self._trace()
        if diverging is not None:
            trace = replace(trace, calls=trace.calls + (diverging,))
        if self._log is not None:
            if diverging is not None:
                self._log.write(call_line(diverging) + "\n")
            self._log.flush()
            os.fsync(self._log.fileno())
        cache_type = type(self._cache)
        impl = f"{cache_type.__module__}:{cache_type.__qualname__}"
        raise DivergenceError(message, trace, None if self._log is None else self._log.name, impl)


def monitor(
    cache: Any,
    *,
    trace_path: str | Path | None = None,
    capacity_bytes: int | None = None,
    state_every: int | None = None,
    profile: str = DEFAULT_PROFILE,
    semantics: str | Semantics = "",
    ops: Sequence[str] | None = None,
    kind: str = DEFAULT_KIND,
    size: int | None = None,
) -> Any:
    """Wrap an empty `cache` so that every call is checked against the spec.

    With another spec `kind` ("blocks"), `cache` is an implementation of that kind and the
    `MonitoredProgram` of `cacheproof.trace.program_monitor` wraps it: `size` (default the target's
    `<size_name>` attribute) sizes the model, `state_every=k` compares the kind's views every k calls
    (None: every call), `profile` and a semantics object apply as below; capacity_bytes, ops and
    FIELD=VALUE overrides are the tensor cache's (ValueError).

    The capacity is `capacity_bytes`, else `cache.capacity_bytes`, else `cache.stats().capacity_bytes`.
    `trace_path` logs every call as a trace that `cacheproof replay` reads. `state_every=n` compares
    stats() and snapshot() after every n-th call; None: every max(16, 2 * entries) calls.
    `profile` names the semantics the spec runs with (docs/profiles.md; InvalidArgumentError if unknown);
    `semantics` overrides fields of it, as `--semantics` does ("FIELD=VALUE,..."), or replaces it
    whole (a `Semantics`); `ops` names the operations the cache has (default: the profile's): calling
    another on the monitored cache raises AttributeError. The trace header records all three, so
    the trace file replays under them with no flags.
    """
    if kind != DEFAULT_KIND:
        if capacity_bytes is not None or ops is not None or isinstance(semantics, str) and semantics:
            raise ValueError(f"monitor: capacity_bytes=, ops= and semantics overrides are the tensor cache's; "
                             f"for kind={kind!r} pass size= and a semantics object")
        from cacheproof.trace.program_monitor import monitor_program  # it imports DivergenceError from here

        return monitor_program(cache, kind, size=size, trace_path=trace_path, views_every=state_every or 1,
                               profile=profile, semantics=semantics or None)
    chosen = profile_named(profile)
    if isinstance(semantics, Semantics):
        spec_semantics = semantics
    else:
        spec_semantics = chosen.semantics.with_overrides(semantics)
    operations = chosen.operations if ops is None else check_operations(list(ops))
    if state_every is not None and (not isinstance(state_every, int) or isinstance(state_every, bool) or state_every < 1):
        raise ValueError(f"monitor: state_every must be an int >= 1 or None, got {state_every!r}")
    if capacity_bytes is None:
        capacity_bytes = getattr(cache, "capacity_bytes", None)
    if capacity_bytes is None and hasattr(cache, "stats"):
        capacity_bytes = cache.stats().capacity_bytes
    if capacity_bytes is None:
        raise ValueError("monitor: pass capacity_bytes=; the cache has neither capacity_bytes nor stats()")
    if len(cache):
        raise ValueError(f"monitor: the cache already holds {len(cache)} entries; monitor it from empty")
    return MonitoredCache(
        cache, capacity_bytes, trace_path=trace_path, state_every=state_every, semantics=spec_semantics,
        profile=profile, operations=operations,
    )


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


def _record(op: str, args: tuple, kwargs: dict, result: Any, error: Exception | None) -> tuple:
    """What the trace keeps of a call: a value argument as its size (never the value itself)."""
    if error is not None:
        error = error_name(error, _CONTRACT_ERRORS)
    if op in _VALUE_ARGUMENT_OPERATIONS and len(args) == 2:
        size = _size(args[1])
        if size is not None:
            args = (args[0], ValueRecipe(size, 0))
    return (op, args, kwargs, result, error)


def _size(value: Any) -> int | None:
    """`value_size`, with a shortcut for plain tensors and bytes."""
    torch = sys.modules.get("torch")
    if torch is not None and type(value) is torch.Tensor:
        return value.numel() * value.element_size()
    if type(value) is bytes:
        return len(value)
    return value_size(value)


def _diverging_call(
    op: str, args: tuple, kwargs: dict, wanted: Any, wanted_error: Any, result: Any, error: Any, why: str
) -> TracedCall:
    """The call the cache diverged at: the spec's outcome as the recorded one, the cache's as `observed`."""
    if error is not None:
        observed = DivergentOutcome(error=error_name(error, _CONTRACT_ERRORS), why=why)
    elif op in _VALUE_OPERATIONS:
        observed = DivergentOutcome(SOME_VALUE, why=why)
    else:
        observed = DivergentOutcome(recorded_result(result), why=why)
    return _traced(_record(op, args, kwargs, wanted, wanted_error))._replace(observed=observed)


def _traced(record: tuple) -> TracedCall:
    op, args, kwargs, result, error = record
    call = Call(op, args, kwargs)
    if error is not None:
        return TracedCall(call, error=error)
    if op in _VALUE_OPERATIONS:
        return TracedCall(call, SOME_VALUE)
    return TracedCall(call, recorded_result(result))
