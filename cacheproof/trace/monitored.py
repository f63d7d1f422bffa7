"""A live implementation with its kind's model beside it: the runtime monitor of every spec kind
(`cacheproof.trace.monitor.monitor` makes one; docs/traces.md, docs/block-traces.md).

`Monitored` is the shell: one lock serializing the calls (so the model sees them in the
implementation's order and the trace is that order; the implementation is then never called by
two threads at once, so the monitor cannot expose a race inside it: `cacheproof check --threads`
does), the trace file (`trace_path`, a trace of the kind with the model's outcomes, line-buffered,
flushed and fsync'd before `DivergenceError` propagates), the trace in memory, and the stop at the
first divergence, after which calls are only forwarded. Every attribute that is not an operation
passes through to the implementation.

`MonitoredImplementation` compares the calls, by one set of rules for every kind, read from the
kind's tables (`SpecKind`): the outcome of every call by the one rule of `contract.steps`; the
kind's compared views (`SpecKind.compared_views`) every `state_every` calls, by default the kind's
`SpecKind.state_every` (an int: every n calls; None: every max(16, 2 x entries) calls, entries the
model's len()); values by digest (`trace.held_values`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from cacheproof.cmdline.output_paths import check_output_path
from cacheproof.contract.calls import Call, invoke, to_python
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.record import (SOME_VALUE, DivergentOutcome, Trace, TracedCall, call_line, error_name,
                                        header_line, recorded_result)
from cacheproof.contract.steps import (StepDifference, StepOutcome, differing_views, error_classes,
                                       is_contract_error, missing_view, outcomes_agree, shown, view_of)
from cacheproof.spec.errors import CacheError
from cacheproof.spec.kind import SpecKind
from cacheproof.trace.held_values import HeldValues, StoredValue

ADAPTIVE_MINIMUM = 16
ADAPTIVE_CALLS_PER_ENTRY = 2
"""With `state_every` None, the views are compared every max(16, 2 * entries) calls."""


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

    cache = target  # the same, by the name the tensor cache's monitor gave it

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


class _NoKind:
    names: tuple[str, ...] = ()


_NO_KIND = _NoKind()


class _Shape(NamedTuple):
    """What the hot path reads of one operation's table row, read once."""

    positional: int
    names: tuple[str, ...]  # the positional arguments' names, in order
    keywords: frozenset[str]
    values: tuple[int, ...]  # positions of the arguments of the domain "value"
    returns_value: bool
    contains: bool


class MonitoredImplementation(Monitored):
    """The monitor of every kind: every call of one of the operations runs on the implementation,
    then on the model with the same arguments (a value as a stand-in, `trace.held_values`).

    - The outcome of every call is compared by the one rule of `contract.steps` (`outcomes_agree`:
      the result, or the contract error by name anywhere in the MRO); a result the model gives as a
      stored value (`Operation.returns_value`) by the digest of the value handed over.
    - The kind's views and lookups (`SpecKind.views`, `SpecKind.lookups`, then its announcements:
      `compared_views`) every `state_every` calls (1: after every call; None: every max(16,
      2 x entries) calls, entries the model's len(), which bounds the O(entries) compare's cost per
      call), and after any call that leaves a model with a len() of 0 (a cheap compare, where the
      trace in memory may restart). With k > 1 a view difference is found up to k - 1 calls late:
      the message says how many calls ago the views last matched, and `cacheproof replay TRACE
      --impl ...`, which compares every call, names the call.
    - A call whose arguments do not fit the operation table goes to the implementation alone (a
      positional argument passed by name fits: it is passed by position to both).
    - The trace in memory restarts whenever the views were compared, matched, and the model is in a
      fresh model's state (nothing before it can matter). A value is recorded by its size and
      element size (`ValueRecipe(size, 0, e)`), a stored value returned as `{"value": true}`: the
      monitor keeps no caller's value. The diverging call ends the trace with the spec's outcome and
      the implementation's as `observed`, so the trace replays clean on the spec and `replay --impl`
      diverges at its last call.
    - The message names the call and what differs; when the views matched at the call before, it
      goes on with every difference at the diverging call and why (`contract.explaining.steps`, as
      `cacheproof check` prints it).
    """

    def __init__(self, target: Any, kind: SpecKind, size: int, *, profile: str, semantics: Any,
                 operations: tuple[str, ...], trace_path: str | Path | None, state_every: int | None) -> None:
        super().__init__(target, kind, size, profile=profile, semantics=semantics, operations=operations,
                         trace_path=trace_path)
        self._fresh = self._spec.state_key()
        self._state_every = state_every
        self._counts_entries = hasattr(type(self._spec), "__len__")
        self._unchecked = 0
        self._calls: list[tuple] = []  # (op, recorded args, kwargs, spec's result, error name): `_traced`
        self._held = HeldValues()
        self._shapes = {row.name: _Shape(len(row.positional), tuple(a.name for a in row.positional), row.keywords,
                                         tuple(i for i, a in enumerate(row.positional) if a.domain == "value"),
                                         row.returns_value, row.form == "contains")
                        for row in kind.operations if row.name in operations}
        self._contains = next((name for name, shape in self._shapes.items() if shape.contains), None)
        for row in kind.operations:
            if row.name in operations and row.form == "method":
                self.__dict__[row.name] = self._operation(row.name)

    def _operation(self, name: str) -> Any:
        checked = self._checked

        def operation(*args: Any, **kwargs: Any) -> Any:
            return checked(name, args, kwargs)

        operation.__name__ = operation.__qualname__ = name
        return operation

    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("_kind", _NO_KIND).names:
            raise AttributeError(f"monitor: {name} is outside the monitored operations "
                                 f"({','.join(self._operations)}); pass ops= to monitor() to include it")
        return getattr(self.__dict__["_target"], name)

    def __contains__(self, item: object) -> Any:
        if self._contains is None:
            return item in self._target
        return self._checked(self._contains, (item,), {})

    def __len__(self) -> int:
        return len(self._target)

    def __bool__(self) -> bool:
        return bool(self._target)

    def __repr__(self) -> str:
        return f"monitor({self._target!r}, kind={self._kind.name!r})"

    def check_state(self) -> None:
        """Compare the kind's views and lookups now (`SpecKind.views`, `SpecKind.lookups`: the
        state, not what the last call announced); `DivergenceError` if any differs."""
        with self._lock:
            if self._diverged:
                return
            differing, _ = self._differing_views(self._kind.views + self._kind.lookups)
            unchecked, self._unchecked = self._unchecked, 0
            if differing:
                listed = "; ".join(f"{view}(): spec {_short(wanted)}, this implementation {_short(answer)}"
                                   for view, wanted, answer in differing)
                self._diverge(f"check_state() after call {len(self._calls)} of the trace: {listed}; the views "
                              f"last matched {unchecked} calls earlier: replay the trace with --impl to find the call")

    def _recorded(self) -> tuple[TracedCall, ...]:
        return tuple(_traced(record) for record in self._calls)

    def _checked(self, op: str, args: tuple, kwargs: dict) -> Any:
        """Call the implementation, then the model; compare and record. The hot path."""
        shape = self._shapes[op]
        if len(args) != shape.positional or kwargs and not shape.keywords.issuperset(kwargs):
            bound = _bound(shape, args, kwargs)
            if bound is None:
                return invoke(self._target, Call(op, args, kwargs))
            args, kwargs = bound
        with self._lock:
            try:
                result = args[0] in self._target if shape.contains else getattr(self._target, op)(*args, **kwargs)
                error = None
            except Exception as raised:  # noqa: BLE001 - the implementation's own failure is an outcome
                result, error = None, raised
            raised_at = None if error is None else error.__traceback__
            if not self._diverged:
                self._compare(op, shape, args, kwargs, result, error)
        if error is not None:
            raise error.with_traceback(raised_at)
        return result

    def _compare(self, op: str, shape: _Shape, args: tuple, kwargs: dict, result: Any,
                 error: BaseException | None) -> None:
        spec = self._spec
        spec_args = recorded_args = args
        if shape.values:
            spec_args, recorded_args = list(args), list(args)
            for position in shape.values:
                spec_args[position], recorded_args[position] = self._held.hand_over(args[position])
            spec_args, recorded_args = tuple(spec_args), tuple(recorded_args)
        try:
            wanted = spec_args[0] in spec if shape.contains else getattr(spec, op)(*spec_args, **kwargs)
            wanted_error = None
        except CacheError as raised:
            wanted, wanted_error = None, raised
        value_difference = None
        if shape.returns_value and error is None and wanted_error is None and self._held.holds(wanted):
            value_difference = self._held.difference(result, wanted)
            if value_difference is None:
                result = wanted  # the stored value's bytes: the model's answer, for the one rule below
            else:
                wanted = StoredValue(wanted)
        elif shape.returns_value and error is not None and self._held.holds(wanted):
            wanted = StoredValue(wanted)
        agreed = value_difference is None and _agree(wanted, wanted_error, result, error)
        self._unchecked += 1
        entries = len(spec) if self._counts_entries else None
        period = self._state_every or max(ADAPTIVE_MINIMUM, ADAPTIVE_CALLS_PER_ENTRY * (entries or 0))
        due = self._unchecked >= period or entries == 0
        record = (op, recorded_args, kwargs,
                  SOME_VALUE if shape.returns_value and wanted_error is None else wanted,
                  None if wanted_error is None else error_name(wanted_error, self._kind.error_names))
        if agreed and not due:
            self._calls.append(record)
            if self._log is not None:
                self._log_call(_traced(record))
            return
        difference = self._difference(Call(op, recorded_args, kwargs), wanted, wanted_error, result, error,
                                      due, value_difference)
        unchecked = self._unchecked
        if due:
            self._unchecked = 0
        if difference is None:
            if due and spec.state_key() == self._fresh:
                self._calls.clear()  # a fresh model replays the same from here on
            else:
                self._calls.append(record)
            if self._log is not None:
                self._log_call(_traced(record))
            return
        why = difference.describe()
        self._diverge(self._message(difference, why, unchecked),
                      _traced(record)._replace(observed=self._observed(shape, result, error, why)))

    def _difference(self, call: Call, wanted: Any, wanted_error: BaseException | None, result: Any,
                    error: BaseException | None, due: bool, value_difference: str | None) -> "_Difference | None":
        """Everything that differs at `call`: the outcomes by the one rule (or the stored value's
        digest), and, when `due`, the kind's compared views; None when nothing does."""
        expected, actual = self._outcome(wanted, wanted_error), self._outcome(result, error)
        views, unread = self._differing_views(self._kind.compared_views) if due else ((), ())
        step = StepDifference(call, expected, actual, views, unread=unread)
        if value_difference is None and not views and outcomes_agree(call.op, expected, actual):
            return None
        return _Difference(step, value_difference)

    def _differing_views(self, views: tuple[str, ...]) -> tuple[tuple[tuple[str, Any, Any], ...], tuple[str, ...]]:
        """(view, the spec's answer, the implementation's) for each of `views` that differs
        (`contract.steps.differing_views`), and the views the implementation lacks. A view read
        from its method's answer (`ViewReader.answer`: the tensor cache's stats and snapshot)
        matches at once when both methods answer equal values of one type: only the others are
        read, which for a snapshot is most of the compare's cost."""
        readers = self._kind.view_readers
        target, spec = self._target, self._spec
        read = tuple(view for view in views if not _same_answer(target, spec, readers.get(view), view))
        seen = {view: view_of(target, view, readers, spec) for view in read}
        unread = tuple(view for view in read if seen[view] == missing_view(view))
        return differing_views(spec, seen, read, readers), unread

    def _outcome(self, result: Any, error: BaseException | None) -> StepOutcome:
        """A call's outcome as `contract.steps` compares outcomes (`outcome_of`'s rule)."""
        if error is None:
            return StepOutcome(result=result)
        classes = error_classes(error)
        if is_contract_error(classes, self._kind.error_names):
            return StepOutcome(error=type(error).__name__, error_classes=classes)
        return StepOutcome(crash=f"{type(error).__name__}: {error}")

    def _message(self, difference: "_Difference", why: str, unchecked: int) -> str:
        """What the `DivergenceError` says: `why` (the call and what differs), where in the trace;
        then how many calls ago the views last matched, or, when they matched at the call before,
        every difference and why."""
        step = difference.step
        message = f"{why} (call {len(self._calls) + 1} of the trace)"
        if difference.value is not None:
            return message
        if step.views and unchecked > 1:
            return (message + f"; the views last matched {unchecked} calls earlier: replay the trace with --impl "
                    "to find the call")
        calls = [traced.call for traced in self._recorded()] + [step.call]
        (explained,) = explain_all(self._kind, [diverging_call(self._kind, self._size, self._semantics, calls, step)])
        return message + "".join(f"\n  {line}" for line in explained.lines())

    def _observed(self, shape: _Shape, result: Any, error: BaseException | None, why: str) -> DivergentOutcome:
        """The implementation's outcome at the diverging call, as the trace records it, with `why`
        (what differs, in one line: `_Difference.describe`)."""
        if error is not None:
            return DivergentOutcome(error=error_name(error, self._kind.error_names), why=why)
        return DivergentOutcome(SOME_VALUE if shape.returns_value else recorded_result(result), why=why)


class _Difference(NamedTuple):
    """What differs at a call: the step's difference, and the stored value's digest mismatch in words."""

    step: StepDifference
    value: str | None

    def describe(self) -> str:
        """The call and what differs, in one line, as `cacheproof check` writes a difference
        (`StepDifference.describe`; a stored value by its digests)."""
        if self.value is not None:
            return f"{to_python(self.step.call)}: {self.value}"
        return self.step.describe()


def _agree(wanted: Any, wanted_error: BaseException | None, result: Any, error: BaseException | None) -> bool:
    """The common cases of agreeing outcomes, decided without building them: the same object, an
    equal result of the same type, or an error of the model's class. False means "look closer" (by
    the one rule, `outcomes_agree`), never "they differ"."""
    if wanted_error is not None or error is not None:
        return wanted_error is not None and type(error) is type(wanted_error)
    try:
        return result is wanted or type(result) is type(wanted) and (result == wanted) is True
    except Exception:  # noqa: BLE001 - a result whose == raises is looked at closer
        return False


def _bound(shape: _Shape, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """A call's arguments as the table writes them, where it passes some positional ones by name
    (`put(key, value=v)`): (args, kwargs); None when they do not fit the table."""
    missing = shape.names[len(args):]
    if len(args) > shape.positional or not all(name in kwargs for name in missing):
        return None
    rest = {name: value for name, value in kwargs.items() if name not in missing}
    if not shape.keywords.issuperset(rest):
        return None
    return args + tuple(kwargs[name] for name in missing), rest


def _same_answer(target: Any, spec: Any, reader: Any, view: str) -> bool:
    """Whether `view`, read by `reader` from its method's answer, has the same answer of the same
    type on both (then its readings are equal); False means "read it", never "it differs"."""
    if reader is None or reader.answer is None:
        return False
    method = reader.method or view
    try:
        answer, wanted = getattr(target, method)(), getattr(spec, method)()
        return type(answer) is type(wanted) and (answer == wanted) is True
    except Exception:  # noqa: BLE001 - a view that raises or fails to compare is read, and so reported
        return False


def _traced(record: tuple) -> TracedCall:
    """A recorded call (`MonitoredImplementation._calls`) as the trace holds it."""
    op, args, kwargs, result, error = record
    if error is not None:
        return TracedCall(Call(op, args, kwargs), error=error)
    return TracedCall(Call(op, args, kwargs), recorded_result(result))


def _short(answer: Any) -> str:
    text = shown(answer)
    return text if len(text) <= 200 else text[:197] + "..."
