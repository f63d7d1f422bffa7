"""Program traces: the calls made on one model of a spec kind other than the tensor cache, with what
each did, as JSON lines (docs/block-traces.md).

Line 1 is the header: `{"format": "cacheproof-program-trace", "format_version": 1, "version":
"<cacheproof's>", "spec": KIND, "<size_name>": SIZE, "profile": NAME}`, plus `"semantics"` when the
semantics are not the profile's: every field that differs from the contract, so the trace replays
the same if the profile is later redefined. Every other line is one call, `contract.calls.to_json`'s
`{"op", "args", "kwargs"}`, plus exactly one of `"result"` (the spec's result, `encode_value`'s
form) and `"error"` (the class name of the contract error the spec raised). The outcome recorded is
always the spec's, so every trace replays on the spec.

A file is a program trace when its first line is a JSON object naming a `"spec"`; the tensor
cache's traces (`cacheproof.trace.format`) name none. Reading a bad trace raises
`ProgramTraceError` (an InvalidArgumentError) naming the line and the field; writing validates the
whole trace before the file is touched, so a bad trace writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cacheproof.contract.calls import decode_value, from_json
from cacheproof.contract.program_record import (
    FORMAT,
    FORMAT_VERSION,
    ProgramTraceError,
    RecordedCall,
    ProgramTrace,
    call_problem,
    program_kind,
)
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind

# Reading ------------------------------------------------------------------------------------

def names_a_kind(path: str | Path) -> bool:
    """Whether the file's first non-blank line is a JSON object naming a "spec" (a program trace), and
    not a report (whose object names its `schema`, and a spec too)."""
    try:
        with open(path) as file:
            first = next((line for line in file if line.strip()), "")
        header = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(header, dict) and "spec" in header and "schema" not in header


def read_program_trace(path: str | Path) -> ProgramTrace:
    """Parse a program trace file; ProgramTraceError names the line and field of the first problem."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ProgramTraceError(str(path), 1, "file", f"cannot read the trace: {error}") from None
    return parse_program_trace(text, str(path))


def parse_program_trace(text: str, source: str = "<trace>") -> ProgramTrace:
    numbered = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not numbered:
        raise ProgramTraceError(source, 1, "format", "empty trace, expected a header line")
    number, line = numbered[0]
    kind, size, profile, semantics, version = _header(_json_object(line, source, number), source, number)
    calls = tuple(_call(kind, _json_object(line, source, number), source, number) for number, line in numbered[1:])
    return ProgramTrace(kind.name, size, calls, profile, semantics, version)


def _json_object(line: str, source: str, number: int) -> dict:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as error:
        raise ProgramTraceError(source, number, "line", f"not JSON: {getattr(error, 'msg', error)}") from None
    if not isinstance(data, dict):
        raise ProgramTraceError(source, number, "line", f"expected a JSON object, got {type(data).__name__}")
    return data


def _header(data: dict, source: str, number: int) -> tuple[SpecKind, int, str, Any, str]:
    def fail(name: str, problem: str) -> ProgramTraceError:
        return ProgramTraceError(source, number, name, problem)

    if data.get("format") != FORMAT:
        raise fail("format", f"expected {FORMAT!r}, got {data.get('format')!r}")
    if data.get("format_version") != FORMAT_VERSION or type(data.get("format_version")) is not int:
        raise fail("format_version", f"unsupported version {data.get('format_version')!r}, expected {FORMAT_VERSION}")
    if not isinstance(data.get("version"), str):
        raise fail("version", f"must be a string, got {data.get('version')!r}")
    try:
        kind = program_kind(data.get("spec"))
    except InvalidArgumentError as error:
        raise fail("spec", str(error)) from None
    size = data.get(kind.size_name)
    if type(size) is not int or size < 1:
        raise fail(kind.size_name, f"must be an int >= 1, got {size!r}")
    profile = data.get("profile")
    if profile not in kind.profiles:
        raise fail("profile", f"spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}; got {profile!r}")
    semantics = kind.profiles[profile].semantics
    if "semantics" in data:
        semantics = _semantics(kind, data["semantics"], fail)
    return kind, size, profile, semantics, data["version"]


def _semantics(kind: SpecKind, fields: Any, fail) -> Any:
    """The semantics of the header's "semantics" object: the contract's, with these fields."""
    if not isinstance(fields, dict):
        raise fail("semantics", f"must be an object of FIELD: VALUE, got {fields!r}")
    contract = type(kind.profiles[kind.default_profile].semantics)
    try:
        return contract(**{name: decode_value(value) for name, value in fields.items()})
    except (InvalidArgumentError, TypeError, ValueError) as error:
        raise fail("semantics", str(error)) from None


def _call(kind: SpecKind, data: dict, source: str, number: int) -> RecordedCall:
    for name, wanted in (("op", str), ("args", list), ("kwargs", dict)):
        if name not in data:
            raise ProgramTraceError(source, number, name, "missing")
        if not isinstance(data[name], wanted):
            raise ProgramTraceError(source, number, name, f"must be a JSON {_JSON_TYPES[wanted]}, got {data[name]!r}")
    if ("result" in data) == ("error" in data):
        raise ProgramTraceError(source, number, "result", "a call needs exactly one of \"result\" and \"error\"")
    try:
        call = from_json(data)
    except (TypeError, ValueError, RecursionError) as error:
        raise ProgramTraceError(source, number, "args", f"malformed argument: {error}") from None
    problem = call_problem(kind, call)
    if problem is not None:
        raise ProgramTraceError(source, number, *problem)
    if "error" in data:
        if data["error"] not in kind.error_names:
            raise ProgramTraceError(source, number, "error", f"expected a {kind.name} contract error's name, "
                                    f"one of {', '.join(sorted(kind.error_names))}")
        return RecordedCall(call, error=data["error"])
    try:
        return RecordedCall(call, decode_value(data["result"]))
    except (TypeError, ValueError, RecursionError) as error:
        raise ProgramTraceError(source, number, "result", f"malformed result: {error}") from None


_JSON_TYPES = {str: "string", list: "array", dict: "object"}
