"""Traces: a recorded sequence of calls on one cache and what each call did, as JSON lines.

Line 1 is the header `{"cacheproof_trace": 1, "version": ..., "capacity_bytes": N}`, plus what the
trace is checked under where that is not the contract: `"profile"`, `"semantics"` (the fields that
differ from the contract, values as `--semantics` writes them) and `"ops"`; every other
line is one call `{"op", "args", "kwargs"}` plus either `"result"` or `"error"` (the contract name
of the error class). Arguments follow `cacheproof.contract.calls`' JSON rules (a value recipe is
`{"nbytes": n, "tag": t}`, a tuple `{"tuple": [...]}`, a bytes key `{"bytes": "<hex>"}`); anything JSON cannot hold is written as
`{"repr": "..."}` and read back as that string. Results: an `Acquired` by name, evicted keys as
a list, bools and null as themselves; get/pop write the value's recipe when the trace knows it,
else `{"value": true}` ("returned a value", contents not recorded). The call at which a monitor saw
the cache diverge also holds `"observed"`: the cache's own outcome and why it differs (`DivergentOutcome`).
See docs/traces.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from cacheproof.cmdline.reports import REPORT_SCHEMA
from cacheproof.contract.calls import Call, ValueRecipe, decode_value, from_json
from cacheproof.spec.cache.operations import ALL_OPERATIONS as OPERATIONS, SIGNATURES
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.cache.profiles import ALL_OPERATIONS, DEFAULT_PROFILE, check_operations, profile_named
from cacheproof.spec.cache.semantics import Semantics, parse_value
from cacheproof.contract.record import (  # noqa: F401  (re-exported: the trace format's public names)
    CONTRACT_ERRORS,
    DivergentOutcome,
    SOME_VALUE,
    TRACE_FORMAT,
    VALUE_OPERATIONS,
    Trace,
    TracedCall,
    call_line,
    error_name,
    header_line,
    recorded_result,
    spec_trace,
    trace_text,
    traced_call,
    write_counterexample_trace,
    write_trace,
)


class TraceFormatError(ValueError):
    """A trace file that cannot be read; the message names the file and line."""


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
    try:
        header = _json_object(line, source, number)
        capacity_bytes, version = _header(header, source, number)
    except TraceFormatError as error:
        raise TraceFormatError(_what_else_it_is(text, source) or str(error)) from None
    profile, semantics, operations = _checked_under(header, f"{source} line {number}")
    calls = tuple(_traced_call(_json_object(line, source, number), source, number) for number, line in numbered[1:])
    for number, traced in zip((number for number, _ in numbered[1:]), calls):
        if traced.call.op not in operations:
            raise TraceFormatError(
                f"{source} line {number}: {traced.call.op} is outside the trace's ops ({','.join(operations)})"
            )
    return Trace(capacity_bytes, calls, version, profile, semantics, operations)


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
        raise TraceFormatError(f"{source} line {number}: not JSON: {error.msg}") from error
    except RecursionError:
        raise TraceFormatError(f"{source} line {number}: nested too deeply to be a call") from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise TraceFormatError(f"{source} line {number}: not JSON: {error}") from None
    if not isinstance(data, dict):
        raise TraceFormatError(f"{source} line {number}: expected a JSON object, got {type(data).__name__}")
    return data


def _header(data: dict, source: str, number: int) -> tuple[int, str]:
    where = f"{source} line {number}"
    if "cacheproof_trace" not in data:
        raise TraceFormatError(f"{where}: expected the header {{\"cacheproof_trace\": {TRACE_FORMAT}, ...}}")
    if type(data["cacheproof_trace"]) is not int or data["cacheproof_trace"] != TRACE_FORMAT:
        raise TraceFormatError(f"{where}: unsupported trace format {data['cacheproof_trace']!r}, expected {TRACE_FORMAT}")
    capacity = data.get("capacity_bytes")
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise TraceFormatError(f"{where}: capacity_bytes must be an int >= 1, got {capacity!r}")
    version = data.get("version")
    if not isinstance(version, str):
        raise TraceFormatError(f"{where}: version must be a string, got {version!r}")
    return capacity, version


def _checked_under(data: dict, where: str) -> tuple[str, Semantics, tuple[str, ...]]:
    """The header's profile, semantics and operations. Without "semantics" the profile's are used,
    without "ops" the profile's operations; no field at all is the contract with every operation."""
    profile_name = data.get("profile", DEFAULT_PROFILE)
    fields = data.get("semantics")
    operations = data.get("ops")
    try:
        if not isinstance(profile_name, str):
            raise InvalidArgumentError(f"profile must be a string, got {profile_name!r}")
        profile = profile_named(profile_name)
        semantics = profile.semantics
        if fields is not None:
            if not isinstance(fields, dict) or not all(isinstance(value, str) for value in fields.values()):
                raise InvalidArgumentError(f"semantics must be an object of FIELD: \"VALUE\" strings, got {fields!r}")
            semantics = Semantics(**{name: parse_value(name, value) for name, value in fields.items()})
        if operations is None:
            operations = profile.operations if "profile" in data else ALL_OPERATIONS
        elif not isinstance(operations, list) or not all(isinstance(name, str) for name in operations):
            raise InvalidArgumentError(f"ops must be a list of operation names, got {operations!r}")
        else:
            operations = check_operations(operations)
    except InvalidArgumentError as error:
        raise TraceFormatError(f"{where}: {error}") from None
    return profile_name, semantics, tuple(operations)


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
    positional, keywords = SIGNATURES[op]
    if len(data.get("args", [])) != positional:
        raise TraceFormatError(f"{where}: {op} takes {positional} positional arguments, got {len(data['args'])}")
    unknown = sorted(set(data.get("kwargs", {})) - keywords)
    if unknown:
        raise TraceFormatError(f"{where}: {op} takes no keyword argument {', '.join(map(repr, unknown))}")
    try:
        call = from_json(data)
        call = Call(op, tuple(_unrepr(a) for a in call.args), {k: _unrepr(v) for k, v in call.kwargs.items()})
        result, error = _outcome(data, where)
        observed = _observed(data.get("observed"), where)
        recipe_problem = _recipe_problem((*call.args, *call.kwargs.values(), result, observed and observed.result))
    except RecursionError:
        raise TraceFormatError(f"{where}: nested too deeply to be a call") from None
    except (TypeError, ValueError) as error:  # e.g. {"tuple": 3}, {"bytes": "not hex"}
        raise TraceFormatError(f"{where}: malformed argument or result: {error}") from None
    if recipe_problem is not None:
        raise TraceFormatError(f"{where}: {recipe_problem}")
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
    """The optional "observed" object of the call where a monitor saw the cache diverge."""
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


def recorded_calls(trace: Trace) -> Sequence[Call]:
    """The calls of a trace, without their outcomes."""
    return [traced.call for traced in trace.calls]
