"""Program traces, the writing half (`cacheproof.trace.program_format` reads them): the calls made on
one model of a spec kind other than the tensor cache, each with the spec's outcome, as JSON lines.
The format is described in cacheproof/trace/program_format.py and docs/block-traces.md; the checker
(`check --spec KIND --trace-out`) and the monitor both write through this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from cacheproof.cmdline.output_paths import write_atomically
from cacheproof.contract.calls import Call, encode_value, to_json
from cacheproof.contract.steps import StepOutcome, outcome_of
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names
from cacheproof.version import __version__

FORMAT = "cacheproof-program-trace"
FORMAT_VERSION = 1
"""The header's "format" and "format_version" this module writes and reads."""

HEADER_LINES = 1


class ProgramTraceError(InvalidArgumentError):
    """A program trace that cannot be read or written: `line` (1 is the header; for a trace being
    written, the line it would have) and `field` name where."""

    def __init__(self, source: str, line: int, field_name: str, problem: str) -> None:
        super().__init__(f"{source} line {line}, field {field_name!r}: {problem}")
        self.line = line
        self.field = field_name


class RecordedCall(NamedTuple):
    """One call and the spec's outcome of it: `result`, or `error` (a contract error's class name)."""

    call: Call
    result: Any = None
    error: str | None = None

    def outcome(self) -> StepOutcome:
        """The recorded outcome as `contract.steps` compares outcomes."""
        if self.error is not None:
            return StepOutcome(error=self.error, error_classes=(self.error,))
        return StepOutcome(result=self.result)

    def describe(self) -> str:
        return self.outcome().describe()


@dataclass(frozen=True)
class ProgramTrace:
    """The calls made, in order, on a fresh model `kind.new(size, semantics)`; `profile` names the
    profile the semantics started from."""

    kind: str
    size: int
    calls: tuple[RecordedCall, ...]
    profile: str
    semantics: Any
    version: str = field(default_factory=lambda: __version__)


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


def recorded(call: Call, outcome: StepOutcome) -> RecordedCall:
    """The spec's `outcome` of `call` as a trace keeps it (InvalidArgumentError if the spec crashed)."""
    if outcome.crash is not None:
        raise InvalidArgumentError(f"the spec crashed on {call.op}{call.args!r}: {outcome.crash}")
    return RecordedCall(call, outcome.result, outcome.error)


def spec_program_trace(kind_name: str, size: int, calls: Iterable[Call], profile: str | None = None,
                       semantics: Any = None) -> ProgramTrace:
    """Run `calls` on a fresh model of `kind_name` and record its outcomes. `profile` defaults to
    the kind's default profile, `semantics` to the profile's. InvalidArgumentError, naming the
    call, for a call that does not fit the kind's table."""
    kind = program_kind(kind_name)
    profile = kind.default_profile if profile is None else profile
    if profile not in kind.profiles:
        raise InvalidArgumentError(f"profile {profile!r}: spec kind {kind.name!r} has {', '.join(kind.profiles)}")
    semantics = kind.profiles[profile].semantics if semantics is None else semantics
    model = kind.new(size, semantics)
    traced = []
    for number, call in enumerate(calls, start=1):
        problem = call_problem(kind, call)
        if problem is not None:
            raise ProgramTraceError("call", number, *problem)
        traced.append(recorded(call, outcome_of(model, call, kind.error_names)))
    return ProgramTrace(kind.name, size, tuple(traced), profile, semantics)


def program_kind(name: Any) -> SpecKind:
    """The registered kind `name`, other than the tensor cache (whose traces have their own format)."""
    if name == DEFAULT_KIND:
        raise InvalidArgumentError(f"spec kind {DEFAULT_KIND!r} traces have their own header (docs/traces.md)")
    if not isinstance(name, str) or name not in kind_names():
        raise InvalidArgumentError(f"unknown spec kind {name!r}; known kinds are {', '.join(kind_names())}")
    return get_kind(name)


# Writing ------------------------------------------------------------------------------------

def header_line(kind_name: str, size: int, profile: str, semantics: Any, version: str | None = None) -> str:
    """The header; `semantics` is written (as its differences from the contract) only when it is
    not the profile's."""
    kind = get_kind(kind_name)
    header: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                              "version": __version__ if version is None else version,
                              "spec": kind.name, kind.size_name: size, "profile": profile}
    if semantics != kind.profiles[profile].semantics:
        header["semantics"] = {name: encode_value(value) for name, value in semantics.differences().items()}
    return json.dumps(header)


def call_line(traced: RecordedCall) -> str:
    """One call line; TypeError if an argument or the result is not JSON."""
    data = to_json(traced.call)
    data.update({"error": traced.error} if traced.error is not None else {"result": encode_value(traced.result)})
    return json.dumps(data)


def program_trace_text(trace: ProgramTrace) -> str:
    """The whole trace as JSON lines; ProgramTraceError naming the line and field JSON cannot hold."""
    try:
        lines = [header_line(trace.kind, trace.size, trace.profile, trace.semantics, trace.version)]
    except TypeError as error:
        raise ProgramTraceError("trace", 1, "semantics", f"not JSON: {error}") from None
    for number, traced in enumerate(trace.calls, start=HEADER_LINES + 1):
        try:
            lines.append(call_line(traced))
        except TypeError as error:
            where = "error" if traced.error is not None else "result"
            try:
                json.dumps(to_json(traced.call))
            except TypeError:
                where = "args"
            raise ProgramTraceError("trace", number, where, f"not JSON: {error}") from None
    return "\n".join(lines) + "\n"


def write_program_trace(path: str | Path, trace: ProgramTrace) -> None:
    """Write `trace` to `path` atomically; a trace that cannot be written leaves `path` untouched."""
    write_atomically(path, program_trace_text(trace))
