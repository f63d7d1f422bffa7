"""One differential step of any spec kind: a call on the model and on the implementation, what each
did, and everything that differs.

The rule, the same for every kind and every checker: an implementation conforms at a call iff it
returns what the model returns or raises an error of the same contract class (`results_match` and
`error_matches`, the one outcome matcher, below), and afterwards its `snapshot()` equals the
model's. Errors are matched by class name: an error is a contract error when some class of its MRO
is named as one of the kind's errors (`SpecKind.error_names`), so an implementation's own classes
count as the contract's; anything else it raises is a crash and differs from every outcome.
Invariants of the model's step are checked by the model itself (`check_invariants`).
"""

from __future__ import annotations

import enum
import re
import threading
from types import MappingProxyType
from typing import Any, Callable, Collection, Iterable, Mapping, NamedTuple

from cacheproof.cmdline.reports import plain
from cacheproof.contract.calls import Call, invoke, to_python
from cacheproof.contract.faults import CONTROL_EXCEPTIONS, UserCodeError, error_text
from cacheproof.contract.values import values_equal
from cacheproof.spec.kind import LookupRaised, ViewReader, outcome_name

EMPTY: Mapping[str, ViewReader] = MappingProxyType({})
"""No view readers: every view is its method's answer."""


class StepOutcome(NamedTuple):
    """What a call did: its result, or the contract error it raised (`error`, the class name, and
    `error_classes`, every class name of its MRO), or for any other error `crash` (class and message)."""

    result: Any = None
    error: str | None = None
    crash: str | None = None
    error_classes: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.crash is not None:
            return f"crashed with {self.crash}"
        if self.error is not None:
            return f"raised {self.error}"
        return f"returned {shown(self.result)}"


def shown(result: Any) -> str:
    """repr(result) without the memory address an object's default repr has ("<Handle object at
    0x7f...>" shows as "<Handle object>"), so that the same outcome reads the same on every run
    (a divergence is replayed to see that it repeats)."""
    return _ADDRESS.sub("", repr(result))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def outcome_of(target: Any, call: Call, error_names: Collection[str], values_from: Any = None, *,
               spec: bool = False) -> StepOutcome:
    """Run `call` on `target` and say what it did (see `StepOutcome`); an error is a contract error
    when a class of its MRO is named in `error_names` (`is_contract_error`). The call's
    value recipes are made by `values_from` (default: `target`; `contract.calls.invoke`). With
    `spec`, `target` is a spec: any other error it raises is a bug of the spec and propagates."""
    try:
        return StepOutcome(result=invoke(target, call, values_from))
    except CONTROL_EXCEPTIONS:
        raise
    except BaseException as error:  # noqa: BLE001 - the implementation's own failure is an outcome
        if not isinstance(error, Exception) and _users_interrupt(error):
            raise
        classes = error_classes(error)
        if is_contract_error(classes, error_names):
            return StepOutcome(error=type(error).__name__, error_classes=classes)
        if spec:
            raise
        return StepOutcome(crash=f"{type(error).__name__}: {error}")


def _users_interrupt(error: BaseException) -> bool:
    """Whether `error` is the user's Ctrl-C: a KeyboardInterrupt in the main thread, which signals
    reach (in the supervised worker thread it was raised by the implementation: an outcome, as
    SystemExit and GeneratorExit always are)."""
    return isinstance(error, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()


def outcomes_agree(operation: str, expected: StepOutcome, actual: StepOutcome) -> bool:
    """The implementation's outcome `actual` is the model's `expected`, by the one rule
    (`error_matches`, `results_match`); a result whose comparison raises does not agree
    (`comparison_failure` says what it raised)."""
    return comparison_failure(operation, expected, actual) is None and _agree(operation, expected, actual)


def _agree(operation: str, expected: StepOutcome, actual: StepOutcome) -> bool:
    if actual.crash is not None:
        return False
    if expected.error is not None:
        return error_matches(expected.error, actual.error_classes)
    return actual.error is None and results_match(operation, expected.result, actual.result)


def comparison_failure(operation: str, expected: StepOutcome, actual: StepOutcome) -> str | None:
    """What comparing `actual` with `expected` raised ("TypeError: a lazy tensor cannot be
    compared": the implementation's result has an == that raises), None when it did not."""
    try:
        _agree(operation, expected, actual)
    except Exception as error:  # noqa: BLE001 - the implementation's result may fail to compare
        return f"{type(error).__name__}: {error_text(error)}"
    return None


def _equal(expected: Any, actual: Any) -> bool:
    try:
        return bool(expected == actual)
    except Exception:  # noqa: BLE001 - a result that cannot be compared does not agree
        return False


class StepDifference(NamedTuple):
    """Everything that differs at one call: the outcomes, and each compared view after it, as
    (view, the spec's answer, the implementation's) for the views that differ; or `user_code`, the
    implementation's own code failing while the call's values were made ("make_value(5, 1) raised
    MemoryError: ..."), when neither side could make the call. `unread`: the compared views the
    implementation lacks (`missing_view`), whose state is therefore unknown."""

    call: Call
    expected: StepOutcome
    actual: StepOutcome
    views: tuple[tuple[str, Any, Any], ...] = ()
    user_code: str | None = None
    unread: tuple[str, ...] = ()

    @property
    def outcome_differs(self) -> bool:
        return not outcomes_agree(self.call.op, self.expected, self.actual)

    @property
    def view_differs(self) -> bool:
        return bool(self.views)

    def describe(self) -> str:
        """The call and what differs in one short line: the two outcomes when they differ, then
        the views that differ by name (`contract.explaining.steps` says how each differs, and why)."""
        if self.user_code is not None:
            return f"{self.user_code}, making a value for {to_python(self.call)}"
        parts = []
        if self.outcome_differs:
            parts.append(f"the spec {self.expected.describe()}, the implementation {self.actual.describe()}")
            failure = comparison_failure(self.call.op, self.expected, self.actual)
            if failure is not None:
                parts.append(f"comparing the implementation's outcome with the spec's raised {failure}")
        raised = [answer[1:-1] for view, _, answer in self.views if view_failed(view, answer)
                  and answer != missing_view(view)]  # "snapshot() raised ...", "stats() returned None, ..."
        if raised and not parts:  # the user's inspection failed after the call: it first, as docs/contract.md says
            return f"{'; '.join(raised)}, after {to_python(self.call)}"
        if raised:  # a view that raised says what it raised ("snapshot() raised RuntimeError: ...")
            parts += raised
        elif self.views:
            named = [f"{view}()" for view, _, _ in self.views]
            listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
            parts.append(f"{listed} differ{'s' if len(named) == 1 else ''} from the spec's")
        return f"{to_python(self.call)}: " + "; ".join(parts)

    def view_diff(self) -> dict[str, Any]:
        """The state diff of a report (`view_diff` of cacheproof/schemas/report-v1.json): each view
        that differs, the spec's answer and the implementation's, as JSON can hold them."""
        return {"views": [{"view": view, "spec": plain(expected), "implementation": plain(actual)}
                          for view, expected, actual in self.views]}


class FailedView(str):
    """What `view_of` answers for a view that raised or whose result its reader cannot read: the
    failure in words between angle brackets ("<snapshot() raised RuntimeError: lost>", "<0 in cache
    raised RuntimeError: ...>"), which differs from any answer."""


def view_of(target: Any, view: str, readers: Mapping[str, ViewReader] = EMPTY, model: Any = None) -> Any:
    """`target.view()`, or as `readers[view].read(target, model)` reads it (a kind's `view_readers`), or
    a text saying it is missing or failed (`FailedView`; a reader's question that raised,
    `spec.kind.LookupRaised`, is named as the reader asked it)."""
    return _answer(target, view, readers.get(view), model)


AGREES = object()
"""What `_answer` answers, when asked to, for a view whose reader's `compared` part of the
implementation's result equals the model's: the view agrees, and no answer was made."""


def _answer(target: Any, view: str, reader: ViewReader | None, model: Any, agreeing: bool = False) -> Any:
    """`view_of` with the view's reader (None: none) looked up; with `agreeing`, `AGREES` where the
    reader's `compared` parts of `target`'s and the model's results are equal (`_parts_agree`)."""
    method = getattr(target, view if reader is None or reader.method is None else reader.method, None)
    if method is None or not callable(method):
        return missing_view(view)
    try:
        if reader is None:
            return method()
        if reader.answer is None:
            return reader.read(target, model)
        result = method()
    except LookupRaised as failed:  # the reader's own question raised: named as it was asked
        return FailedView(f"<{failed.where} raised {type(failed.error).__name__}: {error_text(failed.error)}>")
    except Exception as error:  # noqa: BLE001 - a view that raises differs
        return FailedView(f"<{view}() raised {type(error).__name__}: {error_text(error)}>")
    if agreeing and reader.compared is not None and _parts_agree(reader, view, result, model):
        return AGREES
    try:
        return reader.answer(result, model)
    except Exception as error:  # noqa: BLE001 - an answer of another shape differs (a usage problem: `shapes`)
        text = repr(result)
        return FailedView(f"<{view}() returned {text if len(text) <= 60 else text[:57] + '...'}, {error_text(error)}>")


def _parts_agree(reader: ViewReader, view: str, result: Any, model: Any) -> bool:
    """Whether `reader.compared` of an implementation's `result` equals that of the model's own (False
    when either cannot be read: the answers are then made and compared)."""
    try:
        if reader.model_compared is not None:
            return reader.compared(result) == reader.model_compared(model)
        return reader.compared(result) == reader.compared(getattr(model, reader.method or view)())
    except Exception:  # noqa: BLE001 - a result of another shape: its answer says how
        return False


def missing_view(view: str) -> str:
    """What `view_of` answers for an implementation without the view."""
    return f"<no {view}()>"


def view_failed(view: str, answer: Any) -> bool:
    """Whether `answer` is what `view_of` answers for a view the implementation lacks, that raised, or
    whose result its reader cannot read."""
    return isinstance(answer, FailedView) or isinstance(answer, str) and answer == missing_view(view)


def differing_views(
    model: Any, seen: dict[str, Any], views: tuple[str, ...], readers: Mapping[str, ViewReader] = EMPTY,
) -> tuple[tuple[str, Any, Any], ...]:
    """(view, the spec's answer, the implementation's) for each view in `views` that differs; `seen`
    holds the implementation's answers (`view_of`), each view read as `readers` says (`view_of`). A
    view the implementation lacks counts only while the spec's answer is not empty (a pool-level
    implementation shows no request tables), except `snapshot`, which every implementation has, and
    never where its reader is `optional`."""
    return tuple(found for view in views if (found := _difference(model, view, readers.get(view), seen[view])) is not None)


def _difference(model: Any, view: str, reader: ViewReader | None, answer: Any) -> tuple[str, Any, Any] | None:
    """(view, the spec's answer, the implementation's `answer`) when they differ (`differing_views`), else None."""
    wanted = getattr(model, view)() if reader is None else reader.read(model, model)
    if answer is not wanted and not _equal(wanted, answer) and not _excused(view, reader, wanted, answer):
        return view, wanted, answer
    return None


def _excused(view: str, reader: ViewReader | None, wanted: Any, answer: Any) -> bool:
    """Whether an implementation's `answer` that is not the spec's `wanted` is excused: the view is
    missing and optional, or missing where the spec's answer is empty (`differing_views`)."""
    return type(answer) is str and answer == missing_view(view) and (
        reader is not None and reader.optional or not wanted and view != "snapshot")


def differential_step(
    model: Any, implementation: Any, call: Call, views: tuple[str, ...] = ("snapshot",),
    seen: Callable[[str, str], None] | None = None, *, error_names: Collection[str],
    readers: Mapping[str, ViewReader] = EMPTY,
) -> StepDifference | None:
    """Run `call` on both and compare the outcomes and `views` (`view_differences`, each read as
    `readers` says: the kind's `view_readers`); None when the implementation conforms at it, else
    what differs. The call's value recipes are made by the implementation for both, so that the
    model holds values equal to the implementation's; its make_value failing is the difference. `error_names`: the kind's contract errors
    (`SpecKind.error_names`). `seen(operation, outcome)` is told the model's outcome
    (`spec.kind.outcome_name`)."""
    try:
        expected, actual = step_outcomes(model, implementation, call, error_names, seen)
    except UserCodeError as error:  # the implementation's make_value failed making the call's value
        return StepDifference(call, StepOutcome(), StepOutcome(), user_code=str(error))
    differing, unread = view_differences(model, implementation, views, readers)
    if differing or not outcomes_agree(call.op, expected, actual):
        return StepDifference(call, expected, actual, differing, unread=unread)
    return None


def step_outcomes(
    model: Any, implementation: Any, call: Call, error_names: Collection[str],
    seen: Callable[[str, str], None] | None = None,
) -> tuple[StepOutcome, StepOutcome]:
    """The model's and the implementation's outcomes of `call` (`outcome_of`), the call's values made
    by the implementation for both; `seen` as `differential_step` says. `UserCodeError` when the
    implementation's make_value fails making a value of the call."""
    expected = outcome_of(model, call, error_names, values_from=implementation)
    if seen is not None:
        seen(call.op, outcome_name(expected.result, expected.error))
    return expected, outcome_of(implementation, call, error_names)


def view_differences(
    model: Any, implementation: Any, views: tuple[str, ...], readers: Mapping[str, ViewReader] = EMPTY,
) -> tuple[tuple[tuple[str, Any, Any], ...], tuple[str, ...]]:
    """(the views that differ, as `differing_views` lists them, the views the implementation lacks):
    `views` read now on both (`view_of`), a view at a time."""
    differing, unread = (), ()
    for view in views:
        reader = readers.get(view)
        answer = _answer(implementation, view, reader, model, True)
        if answer is AGREES:
            continue
        if type(answer) is str and answer == missing_view(view):
            unread += (view,)
        found = _difference(model, view, reader, answer)
        if found is not None:
            differing += (found,)
    return differing, unread


def error_classes(error: BaseException) -> tuple[str, ...]:
    """The class names of `error`'s MRO, what `error_matches` compares."""
    return tuple(c.__name__ for c in type(error).__mro__)


def error_matches(wanted: str, classes: Iterable[str]) -> bool:
    """The rule for errors, for every kind and every checker: an error matches the spec's error
    class `wanted` when that class name is anywhere in its MRO (an engine's subclass passes)."""
    return wanted in classes


def is_contract_error(classes: Iterable[str], error_names: Collection[str]) -> bool:
    """Whether an error whose MRO has the class names `classes` (`error_classes`) is a contract
    error: some class of it bears one of `error_names` (a kind's `SpecKind.error_names`), whoever
    defined it. Any other error is the implementation crashing."""
    return any(name in error_names for name in classes)


def results_match(operation: str, expected: Any, actual: Any) -> bool:
    """The rule for results, for every kind and every checker (docs/contract.md, How results are
    compared): a stored value by `values_equal`, an enum by name, otherwise the same type and ==."""
    if operation in ("get", "pop"):
        return values_equal(expected, actual)
    if isinstance(expected, enum.Enum):
        return _name(actual) == expected.name
    if isinstance(expected, list):
        return isinstance(actual, list) and actual == expected
    try:
        return type(actual) is type(expected) and bool(actual == expected)
    except Exception:  # noqa: BLE001 - a result that cannot be compared does not match
        return False


def _name(state: Any) -> Any:
    return state.name if isinstance(state, enum.Enum) else state
