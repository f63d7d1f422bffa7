"""A call sequence recorded with what each call did, for any spec kind: the writing half of the
trace format (`cacheproof.trace.format` reads it; docs/traces.md describes it).

The checker writes its counterexamples as traces (`check --trace-out`) and must not import
`cacheproof.trace`, so the data types of a trace and their JSON-lines writer live here, beside the
calls they record; the monitor writes through this module too. Nothing here names a kind or an
operation: what a kind's calls store and return is read from its operation table
(`Operation.stores_value`, `Operation.returns_value`), its size from `SpecKind.size_name`.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, NamedTuple

from cacheproof.cmdline.output_paths import write_atomically
from cacheproof.contract.calls import Call, ValueRecipe, encode_value, invoke, to_json
from cacheproof.contract.steps import StepOutcome
from cacheproof.spec.errors import CacheError, InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind
from cacheproof.spec.overrides import written_differences
from cacheproof.version import __version__

TRACE_FORMAT = 2
"""The header's "cacheproof_trace" this module writes: 2 names the kind (`"spec"`); 1 was the
tensor cache's header, and `"format": "cacheproof-program-trace"` the other kinds' (both still read)."""

HEADER_LINES = 1


class _SomeValue:
    """The recorded result of a get/pop whose value the trace does not hold."""

    def __repr__(self) -> str:
        return "SOME_VALUE"


SOME_VALUE = _SomeValue()
"""A stored value's result recorded as `{"value": true}`: a value was returned, its contents unknown."""


class DivergentOutcome(NamedTuple):
    """What the implementation did at the call where a monitor saw it diverge from the spec.

    `result` or `error` (an error class name) is its outcome, recorded as a call's outcome is; `why`
    is the monitor's description of the difference (which may be in the state, with the same
    outcome). In a trace line: `"observed": {"result": ..., "why": "..."}` or `{"error": "Name", "why": "..."}`.
    """

    result: Any = None
    error: str | None = None
    why: str = ""

    def describe(self) -> str:
        return describe_outcome(self.result, self.error)


class TracedCall(NamedTuple):
    """One call and the spec's outcome of it: `result` (decoded from the trace), or `error` (an
    error class name).

    `observed` is set only on the call where a monitor saw the implementation diverge: `result` /
    `error` are then the spec's outcome and `observed` the implementation's.
    """

    call: Call
    result: Any = None
    error: str | None = None
    observed: DivergentOutcome | None = None

    def outcome(self) -> StepOutcome:
        """The recorded outcome as `contract.steps` compares outcomes."""
        if self.error is not None:
            return StepOutcome(error=self.error, error_classes=(self.error,))
        return StepOutcome(result=self.result)

    def describe(self) -> str:
        return describe_outcome(self.result, self.error)


def describe_outcome(result: Any, error: str | None) -> str:
    """A recorded outcome in words: "raises NAME", "returns a value", "returns [1]"."""
    if error is not None:
        return f"raises {error}"
    if isinstance(result, ValueRecipe):
        size = "" if result.element_size is None else f", element_size={result.element_size}"
        return f"returns the value of recipe (nbytes={result.nbytes}, tag={result.tag}{size})"
    if result is SOME_VALUE:
        return "returns a value"
    return f"returns {result!r}"


@dataclass(frozen=True)
class Trace:
    """The calls made, in order, on a fresh model of spec kind `kind` of `size` (its `size_name`:
    the tensor cache's capacity_bytes, the block pool's num_blocks), under `semantics` with only
    `operations` callable; `profile` names the profile the semantics started from."""

    kind: str
    size: int
    calls: tuple[TracedCall, ...]
    profile: str
    semantics: Any
    operations: tuple[str, ...]
    version: str = field(default_factory=lambda: __version__)

    @property
    def spec_kind(self) -> SpecKind:
        return get_kind(self.kind)


class TraceCallError(InvalidArgumentError):
    """A call that does not fit its kind's operation table; `field` names what is wrong."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field_name


def call_problem(kind: SpecKind, call: Call) -> tuple[str, str] | None:
    """(field, problem) when `call` does not fit `kind`'s operation table (an unknown operation, a
    wrong count of positional arguments, a keyword the operation does not take), else None."""
    if call.op not in kind.names:
        return "op", f"spec kind {kind.name!r} has no operation {call.op!r}; it has {', '.join(kind.names)}"
    operation = kind.operation(call.op)
    if len(call.args) != len(operation.positional):
        return "args", f"{call.op} takes {len(operation.positional)} positional arguments, got {len(call.args)}"
    unknown = sorted(set(call.kwargs) - operation.keywords)
    if unknown:
        return "kwargs", f"{call.op} takes no keyword argument {', '.join(map(repr, unknown))}"
    return None


def error_name(error: BaseException, error_names: Collection[str]) -> str:
    """The contract name of an error: the first class in its MRO named in `error_names` (a kind's
    `SpecKind.error_names`), else its own class name."""
    for cls in type(error).__mro__:
        if cls.__name__ in error_names:
            return cls.__name__
    return type(error).__name__


def recorded_result(result: Any) -> Any:
    """A result as a trace holds it: an enum by name, a list copied, anything else as is."""
    if isinstance(result, enum.Enum):
        return result.name
    if isinstance(result, list):
        return list(result)
    return result


def spec_trace(
    size: int, calls: Iterable[Call], semantics: Any = None, *, kind: str = DEFAULT_KIND,
    profile: str | None = None, operations: Iterable[str] | None = None,
) -> Trace:
    """Run `calls` on a fresh model of `kind` and record its outcomes. `profile` defaults to the
    kind's default profile, `semantics` to the profile's, `operations` to the profile's. A result
    that is a stored value (`Operation.returns_value`) is recorded as the recipe of the key's latest
    stored value, kept per key: O(1) per call (looking a value up by identity would be ambiguous:
    CPython shares small equal bytes). InvalidArgumentError, naming the call, for a call that does
    not fit the kind's table or on which the spec crashed.
    """
    spec_kind = get_kind(kind)
    profile = spec_kind.default_profile if profile is None else profile
    if profile not in spec_kind.profiles:
        raise InvalidArgumentError(f"profile {profile!r}: spec kind {spec_kind.name!r} has {', '.join(spec_kind.profiles)}")
    chosen = spec_kind.profiles[profile]
    semantics = chosen.semantics if semantics is None else semantics
    operations = chosen.operations if operations is None else tuple(operations)
    model = spec_kind.new(size, semantics)
    error_names = spec_kind.error_names
    # op -> (positional count, keywords, returns a stored value, stores a value): the table read once
    shapes = {row.name: (len(row.positional), row.keywords, row.returns_value, row.stores_value)
              for row in spec_kind.operations}
    stored: dict[Any, ValueRecipe | None] = {}  # key -> recipe of its latest stored value
    traced = []
    for number, call in enumerate(calls, start=1):
        shape = shapes.get(call.op)
        if shape is None or len(call.args) != shape[0] or (call.kwargs and not shape[1].issuperset(call.kwargs)):
            field_name, problem = call_problem(spec_kind, call) or ("call", "does not fit the table")
            raise InvalidArgumentError(f"call {number}, field {field_name!r}: {problem}")
        try:
            result = invoke(model, call)
        except CacheError as error:
            traced.append(TracedCall(call, error=error_name(error, error_names)))
            continue
        except Exception as error:  # noqa: BLE001 - a bug of the spec's, said with the call
            raise InvalidArgumentError(f"the spec crashed on {call.op}{call.args!r}: "
                                       f"{type(error).__name__}: {error}") from error
        if shape[2]:
            traced.append(TracedCall(call, stored.get(call.args[0]) or SOME_VALUE))
            continue
        if shape[3] and result is not False:
            value = call.args[1]
            stored[call.args[0]] = value if isinstance(value, ValueRecipe) else None
        traced.append(TracedCall(call, recorded_result(result)))
    return Trace(spec_kind.name, size, tuple(traced), profile, semantics, operations)


def write_counterexample_trace(path: str | Path, counterexample: Any) -> None:
    """Write a tensor cache checker counterexample (`size`, the capacity in bytes, and `calls`: a
    `check.programs.program.ProgramCounterexample`) as a trace of the spec's outcomes."""
    write_trace(path, spec_trace(counterexample.size, counterexample.calls))


# Writing ------------------------------------------------------------------------------------

def header_line(
    size: int, version: str | None = None, *, kind: str = DEFAULT_KIND, profile: str | None = None,
    semantics: Any = None, operations: Iterable[str] | None = None,
) -> str:
    """The header; `version` defaults to the running cacheproof's, the rest as `spec_trace`'s.

    Rule: what the trace is checked under travels with it. Beside the kind's default profile with
    the contract's semantics and every operation, the header holds `semantics` (the fields that
    differ from the contract: all of them, whatever the profile says today, so the trace replays
    the same if a profile is redefined) and `ops`.
    """
    spec_kind = get_kind(kind)
    profile = spec_kind.default_profile if profile is None else profile
    chosen = spec_kind.profiles[profile]
    semantics = chosen.semantics if semantics is None else semantics
    operations = chosen.operations if operations is None else tuple(operations)
    header: dict[str, Any] = {"cacheproof_trace": TRACE_FORMAT, "version": __version__ if version is None else version,
                              "spec": spec_kind.name, spec_kind.size_name: size, "profile": profile}
    contract = spec_kind.profiles[spec_kind.default_profile].semantics
    if profile != spec_kind.default_profile or semantics != contract or operations != spec_kind.default_operations:
        header["semantics"] = written_differences(semantics)
        header["ops"] = list(operations)
    return json.dumps(header)


def call_line(traced: TracedCall) -> str:
    """One call line; anything JSON cannot hold is written as `{"repr": "..."}`."""
    data = to_json(traced.call)
    data.update(_outcome_json(traced.result, traced.error))
    if traced.observed is not None:
        data["observed"] = dict(_outcome_json(traced.observed.result, traced.observed.error), why=traced.observed.why)
    return json.dumps(data, default=_unencodable)


def _outcome_json(result: Any, error: str | None) -> dict:
    return {"error": error} if error is not None else {"result": _encoded_result(result)}


def trace_text(trace: Trace) -> str:
    """The whole trace as JSON lines, newline-terminated."""
    lines = [header_line(trace.size, trace.version, kind=trace.kind, profile=trace.profile,
                         semantics=trace.semantics, operations=trace.operations)]
    lines += [call_line(traced) for traced in trace.calls]
    return "\n".join(lines) + "\n"


def write_trace(path: str | Path, trace: Trace) -> None:
    """Write `trace` to `path` atomically (a temporary file renamed over it: never half a trace)."""
    write_atomically(path, trace_text(trace))


def _encoded_result(result: Any) -> Any:
    if result is SOME_VALUE:
        return {"value": True}
    return encode_value(result)


def _unencodable(value: Any) -> dict:
    return {"repr": repr(value)}
