"""`monitor(target, kind=KIND)`: run a spec kind's model beside a live implementation (a block pool)
and raise `DivergenceError` at the first mismatch (docs/block-traces.md).

Every call of one of the kind's operations goes to the implementation, then to the model with the
same arguments, and the two outcomes are compared by the one rule of `contract.steps` (a result of
the same type and equal, or a contract error of the same class anywhere in the MRO). The kind's
views (`SpecKind.views`: snapshot, tables, ...) are compared every `views_every` calls, 1 (the
default) after every call; with k > 1 a view difference is found up to k - 1 calls after the call
that caused it, and `cacheproof replay TRACE --impl ...` (which compares every call) names that call.
A view costs O(state) on both sides, so k trades the delay for speed. A call whose arguments do
not fit the operation table (a wrong count, an unknown keyword) is not a contract call: it goes to
the implementation alone. Every other attribute passes through to the implementation.

The calls are recorded with the model's outcomes: in memory since the model was last in a fresh
state (checked when the views are compared, by `state_key`: a fresh model's future is the same from
there), and in `trace_path`, if given, every call, line-buffered. The diverging call ends both,
with the spec's outcome, so the trace replays clean on the spec and `replay --impl` diverges at its
last call; the log is flushed and fsync'd before `DivergenceError` propagates. After a divergence
the monitor only forwards calls. One lock serializes the calls, as the cache's monitor does.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, TextIO

from cacheproof.cmdline.output_paths import check_output_path
from cacheproof.contract.calls import Call, invoke
from cacheproof.contract.steps import differential_step
from cacheproof.spec.errors import CacheError, InvalidArgumentError
from cacheproof.trace.monitor import DivergenceError
from cacheproof.contract.record import Trace, TracedCall, call_line, call_problem, header_line
from cacheproof.spec.kinds import get_kind


class _Answered:
    """`target`, except that its operation `op` answers what it already did (returns `result`, or
    raises `error`) rather than run again; so a call made once on each side goes through
    `differential_step`'s one rule. Every other attribute is the target's."""

    def __init__(self, target: Any, op: str, result: Any, error: BaseException | None) -> None:
        self._target, self._op, self._result, self._error = target, op, result, error

    def _answer(self, *args: Any, **kwargs: Any) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def __getattr__(self, name: str) -> Any:
        return self._answer if name == self._op else getattr(self._target, name)

    def __contains__(self, item: object) -> Any:
        return self._answer()


def _run(target: Any, call: Call) -> tuple[Any, BaseException | None]:
    """(result, None), or (None, the exception) when the call raised."""
    try:
        return invoke(target, call), None
    except Exception as error:  # noqa: BLE001 - the implementation's own failure is an outcome
        return None, error


class MonitoredProgram:
    """An implementation with its kind's model running beside it; make one with `monitor(target,
    kind=KIND)` (see the module docstring)."""

    def __init__(self, target: Any, kind_name: str, size: int, *, profile: str, semantics: Any,
                 trace_path: str | Path | None, views_every: int) -> None:
        self._target = target
        self._kind = get_kind(kind_name)
        self._names = self._kind.names
        self._size, self._profile, self._semantics = size, profile, semantics
        self._model = self._kind.new(size, semantics)
        self._fresh = self._model.state_key()
        self._views_every = views_every
        self._unchecked = 0
        self._calls: list[TracedCall] = []
        self._diverged = False
        self._lock = threading.Lock()
        self._log: TextIO | None = None
        if trace_path is not None:
            check_output_path(trace_path, "monitor: trace_path")
            self._log = open(trace_path, "w", buffering=1)
            self._log.write(header_line(size, kind=self._kind.name, profile=profile, semantics=semantics) + "\n")

    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("_names", ()):
            return lambda *args, **kwargs: self._checked(Call(name, args, kwargs))
        return getattr(self.__dict__["_target"], name)

    def __contains__(self, item: object) -> Any:
        contains = next((row.name for row in self._kind.operations if row.form == "contains"), None)
        return item in self._target if contains is None else self._checked(Call(contains, (item,), {}))

    def __repr__(self) -> str:
        return f"monitor({self._target!r}, kind={self._kind.name!r})"

    @property
    def target(self) -> Any:
        """The monitored implementation itself."""
        return self._target

    @property
    def trace(self) -> Trace:
        """The calls since the model was last fresh, with the spec's outcomes."""
        with self._lock:
            return self._trace()

    def close(self) -> None:
        """Close the trace file, if any."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "MonitoredProgram":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _checked(self, call: Call) -> Any:
        """Call the implementation, then the model; compare and record. The hot path."""
        if call_problem(self._kind, call) is not None:
            return invoke(self._target, call)
        with self._lock:
            result, error = _run(self._target, call)
            raised_at = None if error is None else error.__traceback__
            if not self._diverged:
                self._compare(call, result, error)
        if error is not None:
            raise error.with_traceback(raised_at)
        return result

    def _compare(self, call: Call, result: Any, error: BaseException | None) -> None:
        wanted, wanted_error = _run(self._model, call)
        self._unchecked += 1
        due = self._unchecked >= self._views_every
        difference = differential_step(
            _Answered(self._model, call.op, wanted, wanted_error), _Answered(self._target, call.op, result, error),
            call, self._kind.views if due else (), error_names=self._kind.error_names,
        )
        if wanted_error is not None and not isinstance(wanted_error, CacheError):
            raise wanted_error  # the model itself failed: a bug of cacheproof's, not a divergence
        traced = TracedCall(call, wanted, None if wanted_error is None else type(wanted_error).__name__)
        unchecked = self._unchecked
        if due:
            self._unchecked = 0
        if due and difference is None and self._model.state_key() == self._fresh:
            self._calls.clear()  # a fresh model replays the same from here on
        else:
            self._calls.append(traced)
        if self._log is not None:
            self._log.write(call_line(traced) + "\n")
        if difference is not None:
            message = f"{difference.describe()} (call {len(self._calls)} of the trace)"
            if difference.views and unchecked > 1:
                message += (f"; the views last matched {unchecked} calls earlier: replay the trace with --impl "
                            "to find the call")
            self._diverge(message)

    def _trace(self) -> Trace:
        return Trace(self._kind.name, self._size, tuple(self._calls), self._profile, self._semantics,
                     self._kind.profiles[self._profile].operations)

    def _diverge(self, message: str) -> None:
        """Stop checking; flush and fsync the log, then raise with the trace up to the bad call."""
        self._diverged = True
        if self._log is not None:
            self._log.flush()
            os.fsync(self._log.fileno())
        target_type = type(self._target)
        raise DivergenceError(message, self._trace(), None if self._log is None else self._log.name,
                              f"{target_type.__module__}:{target_type.__qualname__}")


def monitor_program(target: Any, kind: str, *, size: int | None = None, trace_path: str | Path | None = None,
                    views_every: int = 1, profile: str | None = None, semantics: Any = None) -> MonitoredProgram:
    """Wrap a fresh `target` of spec kind `kind` so that every operation is checked against the model.

    The size is `size`, else `target.<kind.size_name>`. `profile` (default: the kind's default)
    names the semantics; `semantics` replaces them whole. `trace_path` logs every call as a trace
    that `cacheproof replay` reads. `views_every=k` compares the views after every k-th call. The
    target must be fresh: its views must be a fresh model's (ValueError otherwise).
    """
    spec_kind = get_kind(kind)
    profile = spec_kind.default_profile if profile is None else profile
    if profile not in spec_kind.profiles:
        raise InvalidArgumentError(f"monitor: profile {profile!r}: spec kind {kind!r} has {', '.join(spec_kind.profiles)}")
    semantics = spec_kind.profiles[profile].semantics if semantics is None else semantics
    if type(views_every) is not int or views_every < 1:
        raise ValueError(f"monitor: views_every must be an int >= 1, got {views_every!r}")
    size = getattr(target, spec_kind.size_name, None) if size is None else size
    if type(size) is not int:
        raise ValueError(f"monitor: pass size= (the {spec_kind.size_name}); the target has no int {spec_kind.size_name}")
    fresh = spec_kind.new(size, semantics)
    for view in spec_kind.views:
        if callable(getattr(target, view, None)) and getattr(target, view)() != getattr(fresh, view)():
            raise ValueError(f"monitor: the target's {view}() is not a fresh {kind} spec's; monitor it from fresh")
    return MonitoredProgram(target, kind, size, profile=profile, semantics=semantics, trace_path=trace_path,
                            views_every=views_every)
