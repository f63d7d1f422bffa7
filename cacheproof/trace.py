"""Traces: a recorded sequence of calls on one cache and what each call did, as JSON lines.

Line 1 is the header `{"cacheproof_trace": 1, "version": ..., "capacity_bytes": N}`; every other
line is one call `{"op", "args", "kwargs"}` plus either `"result"` or `"error"` (the contract name
of the error class). Arguments follow `cacheproof.calls`' JSON rules (a value recipe is
`{"nbytes": n, "tag": t}`, a tuple `{"tuple": [...]}`); anything JSON cannot hold is written as
`{"repr": "..."}` and read back as that string. Results: an `Acquired` by name, evicted keys as
a list, bools and null as themselves; get/pop write the value's recipe when the trace knows it,
else `{"value": true}` ("returned a value", contents not recorded). See docs/traces.md.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import cacheproof
from cacheproof.calls import OPERATIONS, Call, ValueRecipe, decode_value, encode_value, from_json, to_json
from cacheproof.differential import Outcome, run_spec_call
from cacheproof.spec import CacheSpec, errors
from cacheproof.values import value_for

TRACE_FORMAT = 1
"""The value of the header's "cacheproof_trace" field this module writes and reads."""

VALUE_OPERATIONS = ("get", "pop")
"""Operations whose result is a cached value."""

CONTRACT_ERRORS = frozenset(
    cls.__name__ for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.CacheError)
)


class _SomeValue:
    """The recorded result of a get/pop whose value the trace does not hold."""

    def __repr__(self) -> str:
        return "SOME_VALUE"


SOME_VALUE = _SomeValue()
"""A get/pop result recorded as `{"value": true}`: a value was returned, its contents unknown."""


class TracedCall(NamedTuple):
    """One call and what it did: `result` (decoded from the trace), or `error` (an error class name)."""

    call: Call
    result: Any = None
    error: str | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"raises {self.error}"
        if isinstance(self.result, ValueRecipe):
            return f"returns the value of recipe (nbytes={self.result.nbytes}, tag={self.result.tag})"
        if self.result is SOME_VALUE:
            return "returns a value"
        return f"returns {self.result!r}"


@dataclass(frozen=True)
class Trace:
    """The calls made on a cache of `capacity_bytes`, from empty, in order."""

    capacity_bytes: int
    calls: tuple[TracedCall, ...]
    version: str = field(default_factory=lambda: cacheproof.__version__)


class TraceFormatError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


def error_name(error: BaseException) -> str:
    """The contract name of an error: the first class in its MRO named like a contract error."""
    for cls in type(error).__mro__:
        if cls.__name__ in CONTRACT_ERRORS:
            return cls.__name__
    return type(error).__name__


def traced_call(call: Call, outcome: Outcome, value_recipe: ValueRecipe | None = None) -> TracedCall:
    """Record `outcome` of `call`; a get/pop value is recorded as `value_recipe`, or SOME_VALUE if None."""
    if outcome.error is not None:
        return TracedCall(call, error=error_name(outcome.error))
    if call.op in VALUE_OPERATIONS:
        return TracedCall(call, value_recipe or SOME_VALUE)
    return TracedCall(call, recorded_result(outcome.result))


def recorded_result(result: Any) -> Any:
    """A non-value result as a trace holds it: an enum by name, a list copied, anything else as is."""
    if isinstance(result, enum.Enum):
        return result.name
    if isinstance(result, list):
        return list(result)
    return result


def spec_trace(capacity_bytes: int, calls: Iterable[Call]) -> Trace:
    """Run `calls` on a fresh `CacheSpec` and record its outcomes, get/pop values as their recipes."""
    spec = CacheSpec(capacity_bytes)
    recipes: list[tuple[Any, ValueRecipe]] = []  # (value object, its recipe); identity lookup
    traced = []
    for call in calls:
        concrete = Call(call.op, tuple(_made(spec, a, recipes) for a in call.args),
                        {name: _made(spec, a, recipes) for name, a in call.kwargs.items()})
        outcome = run_spec_call(spec, concrete)
        recipe = next((r for value, r in recipes if value is outcome.result), None)
        traced.append(traced_call(call, outcome, recipe))
    return Trace(capacity_bytes, tuple(traced))


def _made(spec: CacheSpec, argument: Any, recipes: list[tuple[Any, ValueRecipe]]) -> Any:
    if not isinstance(argument, ValueRecipe):
        return argument
    value = value_for(spec, argument.nbytes, argument.tag)
    recipes.append((value, argument))
    return value


def write_counterexample_trace(path: str | Path, counterexample: Any) -> None:
    """Write a checker counterexample (`capacity_bytes`, `calls`) as a trace of the spec's outcomes."""
    write_trace(path, spec_trace(counterexample.capacity_bytes, counterexample.calls))


# Writing ------------------------------------------------------------------------------------

def header_line(capacity_bytes: int, version: str | None = None) -> str:
    """The header; `version` defaults to the running cacheproof's."""
    version = cacheproof.__version__ if version is None else version
    return json.dumps({"cacheproof_trace": TRACE_FORMAT, "version": version, "capacity_bytes": capacity_bytes})


def call_line(traced: TracedCall) -> str:
    data = to_json(traced.call)
    if traced.error is not None:
        data["error"] = traced.error
    else:
        data["result"] = _encoded_result(traced.result)
    return json.dumps(data, default=_unencodable)


def trace_text(trace: Trace) -> str:
    """The whole trace as JSON lines, newline-terminated."""
    lines = [header_line(trace.capacity_bytes, trace.version)]
    lines += [call_line(traced) for traced in trace.calls]
    return "\n".join(lines) + "\n"


def write_trace(path: str | Path, trace: Trace) -> None:
    Path(path).write_text(trace_text(trace))


def _encoded_result(result: Any) -> Any:
    if result is SOME_VALUE:
        return {"value": True}
    return encode_value(result)


def _unencodable(value: Any) -> dict:
    return {"repr": repr(value)}


# Reading ------------------------------------------------------------------------------------

def read_trace(path: str | Path) -> Trace:
    """Parse a trace file. `TraceFormatError` names the line of the first problem."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"{path}: cannot read the trace: {error}") from error
    return parse_trace(text, str(path))


def parse_trace(text: str, source: str = "<trace>") -> Trace:
    numbered = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not numbered:
        raise TraceFormatError(f"{source}: empty trace, expected a header line")
    number, line = numbered[0]
    capacity_bytes, version = _header(_json_object(line, source, number), source, number)
    calls = tuple(_traced_call(_json_object(line, source, number), source, number) for number, line in numbered[1:])
    return Trace(capacity_bytes, calls, version)


def _json_object(line: str, source: str, number: int) -> dict:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{source} line {number}: not JSON: {error.msg}") from error
    if not isinstance(data, dict):
        raise TraceFormatError(f"{source} line {number}: expected a JSON object, got {type(data).__name__}")
    return data


def _header(data: dict, source: str, number: int) -> tuple[int, str]:
    where = f"{source} line {number}"
    if "cacheproof_trace" not in data:
        raise TraceFormatError(f"{where}: expected the header {{\"cacheproof_trace\": {TRACE_FORMAT}, ...}}")
    if data["cacheproof_trace"] != TRACE_FORMAT:
        raise TraceFormatError(f"{where}: unsupported trace format {data['cacheproof_trace']!r}, expected {TRACE_FORMAT}")
    capacity = data.get("capacity_bytes")
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise TraceFormatError(f"{where}: capacity_bytes must be an int >= 1, got {capacity!r}")
    version = data.get("version")
    if not isinstance(version, str):
        raise TraceFormatError(f"{where}: version must be a string, got {version!r}")
    return capacity, version


def _traced_call(data: dict, source: str, number: int) -> TracedCall:
    where = f"{source} line {number}"
    op = data.get("op")
    if op not in OPERATIONS:
        raise TraceFormatError(f"{where}: unknown op {op!r}; expected one of {', '.join(OPERATIONS)}")
    if not isinstance(data.get("args", []), list):
        raise TraceFormatError(f"{where}: args must be a list")
    if not isinstance(data.get("kwargs", {}), dict):
        raise TraceFormatError(f"{where}: kwargs must be an object")
    if ("result" in data) == ("error" in data):
        raise TraceFormatError(f"{where}: a call needs exactly one of \"result\" and \"error\"")
    call = from_json(data)
    call = Call(op, tuple(_unrepr(a) for a in call.args), {k: _unrepr(v) for k, v in call.kwargs.items()})
    if "error" in data:
        if not isinstance(data["error"], str) or not data["error"]:
            raise TraceFormatError(f"{where}: error must be the name of an error class")
        return TracedCall(call, error=data["error"])
    return TracedCall(call, _decoded_result(data["result"]))


def _decoded_result(data: Any) -> Any:
    if data == {"value": True}:
        return SOME_VALUE
    return _unrepr(decode_value(data))


def _unrepr(value: Any) -> Any:
    """`{"repr": text}` (a value JSON could not hold) becomes the string `text`."""
    if isinstance(value, dict) and set(value) == {"repr"}:
        return value["repr"]
    if isinstance(value, ValueRecipe):
        return value
    if isinstance(value, tuple):
        return tuple(_unrepr(v) for v in value)
    if isinstance(value, list):
        return [_unrepr(v) for v in value]
    return value


def recorded_calls(trace: Trace) -> Sequence[Call]:
    """The calls of a trace, without their outcomes."""
    return [traced.call for traced in trace.calls]
