"""A live implementation with its kind's model beside it: the runtime monitor of every spec kind
(`cacheproof.trace.monitor.monitor` makes one; docs/traces.md, docs/block-traces.md).

`Monitored` is what every monitor shares: one lock serializing the calls (so the model sees them in
the implementation's order and the trace is that order; the implementation is then never called by
two threads at once, so the monitor cannot expose a race inside it: `cacheproof check --threads`
does), the trace file (`trace_path`, a trace of the kind with the model's outcomes, line-buffered,
flushed and fsync'd before `DivergenceError` propagates), the trace in memory, and the stop at the
first divergence, after which calls are only forwarded. Every attribute that is not an operation
passes through to the implementation.

How a call is compared is the kind's `SpecKind.state_every`: `MonitoredImplementation` here
(1, the block pool's and any new kind's default: the outcome by the one rule of `contract.steps`,
the kind's views every `state_every` calls); `cacheproof.trace.lockstep_monitor.MonitoredCache`
(None, the tensor cache's: outcome and len after every call, stats and snapshot periodically, values
by digest).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, TextIO

from cacheproof.cmdline.output_paths import check_output_path
from cacheproof.contract.calls import Call, invoke
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.record import Trace, TracedCall, call_line, call_problem, header_line
from cacheproof.contract.steps import differential_step
from cacheproof.spec.errors import CacheError
from cacheproof.spec.kind import SpecKind


class DivergenceError(AssertionError):
    """The monitored implementation disagreed with the spec. `.trace` holds the calls up to the bad
    one, included."""

    def __init__(self, message: str, trace: Trace, logged_to: str | None = None, impl: str = "MODULE:FACTORY") -> None:
        if logged_to is None:
            how = (f"the trace so far holds {len(trace.calls)} calls: cacheproof.trace.format.write_trace("
                   f"path, error.trace), then `cacheproof replay path --impl {impl}`")
        else:
            how = f"every call is logged in {logged_to}: `cacheproof replay {logged_to} --impl {impl}` replays it"
        super().__init__(f"{message}\n({how})")
        self.message = message
        self.trace = trace


class Monitored:
    """The shell every monitor shares (see the module docstring): subclasses compare the calls."""

    def __init__(self, target: Any, kind: SpecKind, size: int, *, profile: str, semantics: Any,
                 operations: tuple[str, ...], trace_path: str | Path | None) -> None:
        self._target = target
        self._kind = kind
        self._size = size
        self._profile = profile
        self._operations = operations
        self._spec = kind.new(size, semantics)
        self._semantics = semantics
        self._diverged = False
        self._lock = threading.Lock()
        self._log: TextIO | None = None
        if trace_path is not None:
            check_output_path(trace_path, "monitor: trace_path")
            self._log = open(trace_path, "w", buffering=1)
            self._log.write(header_line(size, kind=kind.name, profile=profile, semantics=semantics,
                                        operations=operations) + "\n")

    @property
    def target(self) -> Any:
        """The monitored implementation itself."""
        return self._target

    @property
    def trace(self) -> Trace:
        """The calls since the model was last in a fresh state, with the spec's outcomes."""
        with self._lock:
            return self._trace()

    def close(self) -> None:
        """Close the trace file, if any."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Monitored":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _recorded(self) -> tuple[TracedCall, ...]:
        """The calls the trace in memory holds (subclasses keep them as suits their hot path)."""
        raise NotImplementedError

    def _trace(self) -> Trace:
        return Trace(self._kind.name, self._size, self._recorded(), self._profile, self._spec.semantics,
                     self._operations)

    def _log_call(self, traced: TracedCall) -> None:
        if self._log is not None:
            self._log.write(call_line(traced) + "\n")

    def _diverge(self, message: str, diverging: TracedCall | None = None) -> None:
        """Stop checking and raise. `diverging` (the spec's outcome, the implementation's as
        `observed`), if given, ends the trace and the log; the log is flushed and fsync'd first, so
        the file replays to the divergence even if the process dies right after."""
        self._diverged = True
        trace = self._trace()
        if diverging is not None:
            trace = Trace(trace.kind, trace.size, trace.calls + (diverging,), trace.profile, trace.semantics,
                          trace.operations)
            self._log_call(diverging)
        if self._log is not None:
            self._log.flush()
            os.fsync(self._log.fileno())
        target_type = type(self._target)
        raise DivergenceError(message, trace, None if self._log is None else self._log.name,
                              f"{target_type.__module__}:{target_type.__qualname__}")


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


class _NoKind:
    names: tuple[str, ...] = ()


_NO_KIND = _NoKind()


class MonitoredImplementation(Monitored):
    """A monitor comparing call by call (`SpecKind.state_every` an int): every call of one of the
    operations runs on the implementation, then on the model with the same arguments; the outcomes
    are compared by the one rule of `contract.steps`, the kind's views every `views_every` calls (1:
    after every call; with k > 1 a view difference is found up to k - 1 calls late, and `cacheproof
    replay TRACE --impl ...`, which compares every call, names the call). A call whose arguments do
    not fit the operation table goes to the implementation alone. The trace in memory restarts
    whenever the views are compared and the model is in a fresh model's state; the diverging call
    ends it with the spec's outcome, so the trace replays clean on the spec and `replay --impl`
    diverges at its last call. When the views were compared at the call before, the error's message
    goes on with every difference at the diverging call and why (`contract.explaining.steps`, as
    `cacheproof check` prints it).
    """

    def __init__(self, target: Any, kind: SpecKind, size: int, *, profile: str, semantics: Any,
                 operations: tuple[str, ...], trace_path: str | Path | None, views_every: int) -> None:
        super().__init__(target, kind, size, profile=profile, semantics=semantics, operations=operations,
                         trace_path=trace_path)
        self._fresh = self._spec.state_key()
        self._views_every = views_every
        self._unchecked = 0
        self._calls: list[TracedCall] = []

    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("_operations", ()):
            return lambda *args, **kwargs: self._checked(Call(name, args, kwargs))
        if name in self.__dict__.get("_kind", _NO_KIND).names:
            raise AttributeError(f"monitor: {name} is outside the monitored operations "
                                 f"({','.join(self._operations)}); pass ops= to monitor() to include it")
        return getattr(self.__dict__["_target"], name)

    def __contains__(self, item: object) -> Any:
        contains = next((row.name for row in self._kind.operations if row.form == "contains"), None)
        if contains is None or contains not in self._operations:
            return item in self._target
        return self._checked(Call(contains, (item,), {}))

    def __repr__(self) -> str:
        return f"monitor({self._target!r}, kind={self._kind.name!r})"

    def _recorded(self) -> tuple[TracedCall, ...]:
        return tuple(self._calls)

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
        wanted, wanted_error = _run(self._spec, call)
        self._unchecked += 1
        due = self._unchecked >= self._views_every
        difference = differential_step(
            _Answered(self._spec, call.op, wanted, wanted_error), _Answered(self._target, call.op, result, error),
            call, self._kind.compared_views if due else (), error_names=self._kind.error_names,
            readers=self._kind.view_readers,
        )
        if wanted_error is not None and not isinstance(wanted_error, CacheError):
            raise wanted_error  # the model itself failed: a bug of cacheproof's, not a divergence
        traced = TracedCall(call, wanted, None if wanted_error is None else type(wanted_error).__name__)
        unchecked = self._unchecked
        if due:
            self._unchecked = 0
        if due and difference is None and self._spec.state_key() == self._fresh:
            self._calls.clear()  # a fresh model replays the same from here on
        else:
            self._calls.append(traced)
        self._log_call(traced)
        if difference is not None:
            message = f"{difference.describe()} (call {len(self._calls)} of the trace)"
            if difference.views and unchecked > 1:
                message += (f"; the views last matched {unchecked} calls earlier: replay the trace with --impl "
                            "to find the call")
            else:  # the views agreed before this call: it can be explained from the spec's replay
                calls = [traced.call for traced in self._calls]
                (explained,) = explain_all(self._kind, [diverging_call(self._kind, self._size, self._semantics,
                                                                       calls, difference)])
                message += "".join(f"\n  {line}" for line in explained.lines())
            self._diverge(message)
