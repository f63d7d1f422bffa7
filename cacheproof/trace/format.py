"""Traces: a recorded sequence of calls on one model of any spec kind and what each call did, as
JSON lines: the reading half (`cacheproof.contract.record` writes them and defines their types).

Line 1 is the header `{"cacheproof_trace": 2, "version": ..., "spec": KIND, "<size_name>": N,
"profile": NAME}`, plus, where the trace is not checked under the kind's default profile with every
operation, `"semantics"` (the fields that differ from the contract, values as `--semantics` writes
them) and `"ops"`. Every other line is one call `{"op", "args", "kwargs"}` (an operation of the
kind's table) plus either `"result"` or `"error"` (the contract name of the error class).
Arguments follow `cacheproof.contract.calls`' JSON rules (a value recipe is `{"nbytes": n, "tag":
t}`, a tuple `{"tuple": [...]}`, a bytes key `{"bytes": "<hex>"}`); anything JSON cannot hold is
written as `{"repr": "..."}` and read back as that string. A stored value's result is its recipe
when the trace knows it, else `{"value": true}`. The call at which a monitor saw the implementation
diverge also holds `"observed"` (`DivergentOutcome`). See docs/traces.md.

Older headers still read (docs/traces.md, Older formats): `{"cacheproof_trace": 1, ...,
"capacity_bytes": N}` (the tensor cache's, kind "cache", calls as above) and `{"format":
"cacheproof-program-trace", "format_version": 1, "spec": KIND, ...}` (the other kinds', whose
errors name the field as well as the line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from cacheproof.cmdline.reports import REPORT_SCHEMA
from cacheproof.contract.calls import Call, ValueRecipe, decode_value, from_json
from cacheproof.contract.record import (  # noqa: F401  (re-exported: the trace format's public names)
    SOME_VALUE,
    TRACE_FORMAT,
    DivergentOutcome,
    Trace,
    TracedCall,
    call_line,
    call_problem,
    header_line,
    spec_trace,
    trace_text,
    write_counterexample_trace,
    write_trace,
)
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind, kind_names

CACHE_FORMAT_V1 = 1
"""The tensor cache's header before traces named their kind (`"cacheproof_trace": 1`)."""

PROGRAM_FORMAT_V1 = "cacheproof-program-trace"
"""The other kinds' header before format 2 (`"format": ..., "format_version": 1`)."""


class TraceFormatError(InvalidArgumentError):
    """A trace that cannot be read; the message names the file and line (and, where known, the
    field: `line` and `field` hold them)."""

    def __init__(self, message: str, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.field = field


def _field_error(source: str, line: int, field: str, problem: str) -> TraceFormatError:
    return TraceFormatError(f"{source} line {line}, field {field!r}: {problem}", line, field)


# Reading ------------------------------------------------------------------------------------

def read_trace(path: str | Path) -> Trace:
    """Parse a trace file of any kind and format. `TraceFormatError` names the line of the first problem."""
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
    try:
        header = _json_object(line, source, number)
    except TraceFormatError as error:
        raise TraceFormatError(_what_else_it_is(text, source) or str(error), number) from None
    if "cacheproof_trace" not in header and "spec" in header and "schema" not in header:
        return _program_v1_trace(header, numbered, source)
    try:
        kind, size, version = _header(header, source, number)
    except TraceFormatError as error:
        raise TraceFormatError(_what_else_it_is(text, source) or str(error), number) from None
    profile, semantics, operations = _checked_under(kind, header, f"{source} line {number}")
    calls = []
    for number, line in numbered[1:]:
        traced = _traced_call(kind, _json_object(line, source, number), source, number)
        if traced.call.op not in operations:
            raise TraceFormatError(
                f"{source} line {number}: {traced.call.op} is outside the trace's ops ({','.join(operations)})", number
            )
        calls.append(traced)
    return Trace(kind.name, size, tuple(calls), profile, semantics, operations, version)


def _what_else_it_is(text: str, source: str) -> str | None:
    """What a file without a trace header is, when it is one JSON document rather than JSON lines:
    a `cacheproof check --json` report (say what to write instead), another --json report, or any
    other document. None when it is not one JSON document (the line-by-line message stands)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    report = isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA
    if report and data.get("command") == "check" and data.get("threads") is None:
        return (f"{source}: this is a `cacheproof check --json` report, not a trace; to replay its "
                "counterexample, rerun the same check with `--trace-out PATH` and replay PATH (docs/traces.md)")
    if report and data.get("command") == "check":
        return (f"{source}: this is a `cacheproof check --threads --json` report, not a trace; a concurrent "
                "counterexample is rerun with the script `check --threads` prints (docs/concurrency.md)")
    if report or isinstance(data, dict) and "ok" in data:
        return f"{source}: this is a cacheproof --json report, not a trace (a trace is JSON lines; docs/traces.md)"
    if len(text.strip().splitlines()) > 1:
        return (f"{source}: one JSON document over several lines, not a trace: a trace has one JSON object "
                f"per line, the first {{\"cacheproof_trace\": {TRACE_FORMAT}, ...}} (docs/traces.md)")
    return None


def _json_object(line: str, source: str, number: int) -> dict:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{source} line {number}: not JSON: {error.msg}", number) from error
    except RecursionError:
        raise TraceFormatError(f"{source} line {number}: nested too deeply to be a call", number) from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise TraceFormatError(f"{source} line {number}: not JSON: {error}", number) from None
    if not isinstance(data, dict):
        raise TraceFormatError(f"{source} line {number}: expected a JSON object, got {type(data).__name__}", number)
    return data


def _header(data: dict, source: str, number: int) -> tuple[SpecKind, int, str]:
    """The kind, size and version of a format 2 header, or of a format 1 (tensor cache) one."""
    where = f"{source} line {number}"
    if "cacheproof_trace" not in data:
        raise TraceFormatError(f"{where}: expected the header {{\"cacheproof_trace\": {TRACE_FORMAT}, ...}}")
    written = data["cacheproof_trace"]
    if type(written) is not int or written not in (CACHE_FORMAT_V1, TRACE_FORMAT):
        raise TraceFormatError(f"{where}: unsupported trace format {written!r}, expected {TRACE_FORMAT} "
                               f"(or {CACHE_FORMAT_V1}, the tensor cache's before format {TRACE_FORMAT})")
    name = "cache" if written == CACHE_FORMAT_V1 else data.get("spec")
    if not isinstance(name, str) or name not in kind_names():
        raise TraceFormatError(f"{where}: spec must be a spec kind, one of {', '.join(kind_names())}; got {name!r}")
    kind = get_kind(name)
    size = data.get(kind.size_name)
    if type(size) is not int or size < 1:
        raise TraceFormatError(f"{where}: {kind.size_name} must be an int >= 1, got {size!r}")
    version = data.get("version")
    if not isinstance(version, str):
        raise TraceFormatError(f"{where}: version must be a string, got {version!r}")
    return kind, size, version


def _checked_under(kind: SpecKind, data: dict, where: str) -> tuple[str, Any, tuple[str, ...]]:
    """The header's profile, semantics and operations. Without "semantics" the profile's are used,
    without "ops" the profile's operations; no field at all is the default profile."""
    profile_name = data.get("profile", kind.default_profile)
    fields = data.get("semantics")
    operations = data.get("ops")
    try:
        if not isinstance(profile_name, str):
            raise InvalidArgumentError(f"profile must be a string, got {profile_name!r}")
        if profile_name not in kind.profiles:
            raise InvalidArgumentError(f"unknown profile {profile_name!r}; profiles: {', '.join(kind.profiles)}")
        profile = kind.profiles[profile_name]
        semantics = profile.semantics
        if fields is not None:
            if not isinstance(fields, dict) or not all(isinstance(value, str) for value in fields.values()):
                raise InvalidArgumentError(f"semantics must be an object of FIELD: \"VALUE\" strings, got {fields!r}")
            contract = kind.profiles[kind.default_profile].semantics
            semantics = contract.with_overrides(",".join(f"{name}={value}" for name, value in fields.items()))
        if operations is None:
            operations = profile.operations
        elif not isinstance(operations, list) or not all(isinstance(name, str) for name in operations):
            raise InvalidArgumentError(f"ops must be a list of operation names, got {operations!r}")
        else:
            operations = checked_operations(kind, operations)
    except InvalidArgumentError as error:
        raise TraceFormatError(f"{where}: {error}") from None
    return profile_name, semantics, tuple(operations)


def checked_operations(kind: SpecKind, names: Sequence[str]) -> tuple[str, ...]:
    """Operation names as given to --ops or a header's "ops", in table order; InvalidArgumentError
    naming the unknown ones and the kind's operations."""
    unknown = [name for name in names if name not in kind.names]
    if unknown or not names:
        raise InvalidArgumentError(f"--ops {','.join(names) or '(empty)'}: unknown {', '.join(unknown) or 'empty list'}; "
                                   f"operations: {', '.join(kind.names)}")
    return tuple(name for name in kind.names if name in names)


def _traced_call(kind: SpecKind, data: dict, source: str, number: int) -> TracedCall:
    where = f"{source} line {number}"
    op = data.get("op")
    if op not in kind.names:
        raise TraceFormatError(f"{where}: unknown op {op!r}; expected one of {', '.join(kind.names)}", number)
    if not isinstance(data.get("args", []), list):
        raise TraceFormatError(f"{where}: args must be a list", number)
    if not isinstance(data.get("kwargs", {}), dict):
        raise TraceFormatError(f"{where}: kwargs must be an object", number)
    if ("result" in data) == ("error" in data):
        raise TraceFormatError(f"{where}: a call needs exactly one of \"result\" and \"error\"", number)
    operation = kind.operation(op)
    if len(data.get("args", [])) != len(operation.positional):
        raise TraceFormatError(
            f"{where}: {op} takes {len(operation.positional)} positional arguments, got {len(data['args'])}", number
        )
    unknown = sorted(set(data.get("kwargs", {})) - operation.keywords)
    if unknown:
        raise TraceFormatError(f"{where}: {op} takes no keyword argument {', '.join(map(repr, unknown))}", number)
    try:
        call = from_json(data)
        call = Call(op, tuple(_unrepr(a) for a in call.args), {k: _unrepr(v) for k, v in call.kwargs.items()})
        result, error = _outcome(data, where)
        observed = _observed(data.get("observed"), where)
        recipe_problem = _recipe_problem((*call.args, *call.kwargs.values(), result, observed and observed.result))
    except RecursionError:
        raise TraceFormatError(f"{where}: nested too deeply to be a call", number) from None
    except (TypeError, ValueError) as error:  # e.g. {"tuple": 3}, {"bytes": "not hex"}
        raise TraceFormatError(f"{where}: malformed argument or result: {error}", number) from None
    if recipe_problem is not None:
        raise TraceFormatError(f"{where}: {recipe_problem}", number)
    return TracedCall(call, result, error, observed)


def _recipe_problem(values: tuple) -> str | None:
    """What is wrong with the first value recipe in `values` or inside their tuples and lists that
    is none (`ValueRecipe.problem`: nbytes, tag, element size), or None."""
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, ValueRecipe):
            problem = value.problem()
            if problem is not None:
                return problem
        elif isinstance(value, (tuple, list)):
            pending.extend(value)
    return None


def _outcome(data: dict, where: str) -> tuple[Any, str | None]:
    """(result, None) or (None, error name) from an object with exactly one of "result" and "error"."""
    if "error" in data:
        if not isinstance(data["error"], str) or not data["error"]:
            raise TraceFormatError(f"{where}: error must be the name of an error class")
        return None, data["error"]
    return _decoded_result(data["result"]), None


def _observed(data: Any, where: str) -> DivergentOutcome | None:
    """The optional "observed" object of the call where a monitor saw the implementation diverge."""
    if data is None:
        return None
    if not isinstance(data, dict) or ("result" in data) == ("error" in data):
        raise TraceFormatError(f"{where}: observed must be an object with exactly one of \"result\" and \"error\"")
    why = data.get("why", "")
    if not isinstance(why, str):
        raise TraceFormatError(f"{where}: observed.why must be a string, got {why!r}")
    result, error = _outcome(data, f"{where} (observed)")
    return DivergentOutcome(result, error, why)


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


# The other kinds' format before format 2 (its errors name the field) ------------------------

def _program_v1_trace(header: dict, numbered: list[tuple[int, str]], source: str) -> Trace:
    number = numbered[0][0]
    kind, size, profile, semantics, version = _program_v1_header(header, source, number)
    calls = tuple(_program_v1_call(kind, _field_json_object(line, source, number), source, number)
                  for number, line in numbered[1:])
    return Trace(kind.name, size, calls, profile, semantics, kind.profiles[profile].operations, version)


def _field_json_object(line: str, source: str, number: int) -> dict:
    try:
        return _json_object(line, source, number)
    except TraceFormatError as error:
        problem = str(error).partition(f"line {number}: ")[2]
        raise _field_error(source, number, "line", problem) from None


def _program_v1_header(data: dict, source: str, number: int) -> tuple[SpecKind, int, str, Any, str]:
    def fail(name: str, problem: str) -> TraceFormatError:
        return _field_error(source, number, name, problem)

    if data.get("format") != PROGRAM_FORMAT_V1:
        raise fail("format", f"expected {PROGRAM_FORMAT_V1!r}, got {data.get('format')!r}")
    if data.get("format_version") != 1 or type(data.get("format_version")) is not int:
        raise fail("format_version", f"unsupported version {data.get('format_version')!r}, expected 1")
    if not isinstance(data.get("version"), str):
        raise fail("version", f"must be a string, got {data.get('version')!r}")
    name = data.get("spec")
    if name == "cache":
        raise fail("spec", "the tensor cache's traces had their own header before format 2 (docs/traces.md)")
    if not isinstance(name, str) or name not in kind_names():
        raise fail("spec", f"unknown spec kind {name!r}; known kinds are {', '.join(kind_names())}")
    kind = get_kind(name)
    size = data.get(kind.size_name)
    if type(size) is not int or size < 1:
        raise fail(kind.size_name, f"must be an int >= 1, got {size!r}")
    profile = data.get("profile")
    if profile not in kind.profiles:
        raise fail("profile", f"spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}; got {profile!r}")
    semantics = kind.profiles[profile].semantics
    if "semantics" in data:
        fields = data["semantics"]
        if not isinstance(fields, dict):
            raise fail("semantics", f"must be an object of FIELD: VALUE, got {fields!r}")
        contract = type(kind.profiles[kind.default_profile].semantics)
        try:
            semantics = contract(**{name: decode_value(value) for name, value in fields.items()})
        except (InvalidArgumentError, TypeError, ValueError) as error:
            raise fail("semantics", str(error)) from None
    return kind, size, profile, semantics, data["version"]


_JSON_TYPES = {str: "string", list: "array", dict: "object"}


def _program_v1_call(kind: SpecKind, data: dict, source: str, number: int) -> TracedCall:
    for name, wanted in (("op", str), ("args", list), ("kwargs", dict)):
        if name not in data:
            raise _field_error(source, number, name, "missing")
        if not isinstance(data[name], wanted):
            raise _field_error(source, number, name, f"must be a JSON {_JSON_TYPES[wanted]}, got {data[name]!r}")
    if ("result" in data) == ("error" in data):
        raise _field_error(source, number, "result", "a call needs exactly one of \"result\" and \"error\"")
    try:
        call = from_json(data)
    except (TypeError, ValueError, RecursionError) as error:
        raise _field_error(source, number, "args", f"malformed argument: {error}") from None
    problem = call_problem(kind, call)
    if problem is not None:
        raise _field_error(source, number, *problem)
    if "error" in data:
        if data["error"] not in kind.error_names:
            raise _field_error(source, number, "error", f"expected a {kind.name} contract error's name, "
                               f"one of {', '.join(sorted(kind.error_names))}")
        return TracedCall(call, error=data["error"])
    try:
        return TracedCall(call, decode_value(data["result"]))
    except (TypeError, ValueError, RecursionError) as error:
        raise _field_error(source, number, "result", f"malformed result: {error}") from None


def recorded_calls(trace: Trace) -> Sequence[Call]:
    """The calls of a trace, without their outcomes."""
    return [traced.call for traced in trace.calls]
