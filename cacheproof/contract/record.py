"""A call sequence recorded with what each call did: the writing half of the trace format.

The checker writes its counterexamples as traces (`check --trace-out`) and must not import
`cacheproof.trace`, so the data types of a trace and their JSON-lines writer live here, beside the
calls they record; `cacheproof.trace.format` reads what this module writes and re-exports it.
The format itself is described in `cacheproof.trace.format` and docs/traces.md.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from cacheproof.version import __version__
from cacheproof.contract.calls import Call, ValueRecipe, encode_value, to_json
from cacheproof.contract.outcomes import Outcome, run_spec_call
from cacheproof.cmdline.output_paths import write_atomically
from cacheproof.spec.cache.profiles import ALL_OPERATIONS, DEFAULT_PROFILE
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.overrides import written_differences
from cacheproof.spec.kinds import get_kind, new_spec

TRACE_FORMAT = 1
"""The value of the header's "cacheproof_trace" field this module writes and reads."""

VALUE_OPERATIONS = ("get", "pop")
"""Operations whose result is a cached value."""

STORING_OPERATIONS = ("commit", "put")
"""Operations that store their second argument (put only when it returns True)."""

CONTRACT_ERRORS = get_kind("cache").error_names
"""The tensor cache's contract errors by name (`SpecKind.error_names`): a cache's error is the
contract's when a class of its MRO bears one of them."""


class _SomeValue:
    """The recorded result of a get/pop whose value the trace does not hold."""

    def __repr__(self) -> str:
        return "SOME_VALUE"


SOME_VALUE = _SomeValue()
"""A get/pop result recorded as `{"value": true}`: a value was returned, its contents unknown."""


class DivergentOutcome(NamedTuple):
    """What the cache under test did at the call where a monitor saw it diverge from the spec.

    `result` or `error` (an error class name) is the cache's outcome, recorded as a call's outcome
    is; `why` is the monitor's description of the difference (which may be in the state, with the
    same outcome). In a trace line: `"observed": {"result": ..., "why": "..."}` or
    `{"error": "Name", "why": "..."}`.
    """

    result: Any = None
    error: str | None = None
    why: str = ""

    def describe(self) -> str:
        return describe_outcome(self.result, self.error)


class TracedCall(NamedTuple):
    """One call and what it did: `result` (decoded from the trace), or `error` (an error class name).

    `observed` is set only on the call where a monitor saw the cache diverge: `result`/`error` are
    then the spec's outcome and `observed` the cache's.
    """

    call: Call
    result: Any = None
    error: str | None = None
    observed: DivergentOutcome | None = None

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
    """The calls made on a cache of `capacity_bytes`, from empty, in order, under `semantics` with
    only `operations` callable; `profile` names the profile the semantics started from."""

    capacity_bytes: int
    calls: tuple[TracedCall, ...]
    version: str = field(default_factory=lambda: __version__)
    profile: str = DEFAULT_PROFILE
    semantics: Semantics = CONTRACT
    operations: tuple[str, ...] = ALL_OPERATIONS


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


def spec_trace(
    capacity_bytes: int, calls: Iterable[Call], semantics: Semantics = CONTRACT, *,
    profile: str = DEFAULT_PROFILE, operations: tuple[str, ...] = ALL_OPERATIONS,
) -> Trace:
    """Run `calls` on a fresh `new_spec(capacity_bytes, semantics)` and record its outcomes, get/pop
    values as their recipes; the header records `profile`, `semantics` and `operations`.

    O(1) per call: the recipe of a get/pop result is the one the key's latest stored value was
    made from, kept per key. (Looking the value up by identity would be ambiguous: equal small
    values such as `b"\\x05"` are one object in CPython, whatever recipe made them.)
    """
    spec = new_spec(capacity_bytes, semantics)
    stored: dict[Any, ValueRecipe | None] = {}  # key -> recipe of its latest stored value
    traced = []
    for call in calls:
        outcome = run_spec_call(spec, call)
        recipe = None
        if outcome.error is None and call.op in STORING_OPERATIONS and outcome.result is not False:
            value = call.args[1]
            stored[call.args[0]] = value if isinstance(value, ValueRecipe) else None
        elif outcome.error is None and call.op in VALUE_OPERATIONS:
            recipe = stored.get(call.args[0])
        traced.append(traced_call(call, outcome, recipe))
    return Trace(capacity_bytes, tuple(traced), profile=profile, semantics=semantics, operations=operations)


def write_counterexample_trace(path: str | Path, counterexample: Any) -> None:
    """Write a checker counterexample (`capacity_bytes`, `calls`) as a trace of the spec's outcomes."""
    write_trace(path, spec_trace(counterexample.capacity_bytes, counterexample.calls))


# Writing ------------------------------------------------------------------------------------

def header_line(
    capacity_bytes: int, version: str | None = None, *, profile: str = DEFAULT_PROFILE,
    semantics: Semantics = CONTRACT, operations: tuple[str, ...] = ALL_OPERATIONS,
) -> str:
    """The header; `version` defaults to the running cacheproof's.

    Rule: what the trace is checked under travels with it. Beside a profile other than the default,
    or semantics or operations other than the contract's, the header holds all three: `profile`,
    `semantics` as the fields that differ from the contract (all of them, whatever the profile says
    today, so the trace replays the same if a profile is redefined) and `ops`. A contract trace
    keeps the three-field header.
    """
    version = __version__ if version is None else version
    header: dict[str, Any] = {"cacheproof_trace": TRACE_FORMAT, "version": version, "capacity_bytes": capacity_bytes}
    if profile != DEFAULT_PROFILE or semantics != CONTRACT or tuple(operations) != ALL_OPERATIONS:
        header["profile"] = profile
    if profile != DEFAULT_PROFILE or semantics != CONTRACT:
        header["semantics"] = written_differences(semantics)
    if profile != DEFAULT_PROFILE or tuple(operations) != ALL_OPERATIONS:
        header["ops"] = list(operations)
    return json.dumps(header)


def call_line(traced: TracedCall) -> str:
    data = to_json(traced.call)
    data.update(_outcome_json(traced.result, traced.error))
    if traced.observed is not None:
        data["observed"] = dict(_outcome_json(traced.observed.result, traced.observed.error), why=traced.observed.why)
    return json.dumps(data, default=_unencodable)


def _outcome_json(result: Any, error: str | None) -> dict:
    return {"error": error} if error is not None else {"result": _encoded_result(result)}


def trace_text(trace: Trace) -> str:
    """The whole trace as JSON lines, newline-terminated."""
    lines = [header_line(trace.capacity_bytes, trace.version, profile=trace.profile, semantics=trace.semantics,
                         operations=trace.operations)]
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
