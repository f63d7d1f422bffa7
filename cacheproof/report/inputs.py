"""What `cacheproof report` reads, as plain data: a `cacheproof check --json` report or a trace.

Two inputs, told apart by their first line or document:

- a check report (`cacheproof check --json`, of any spec kind; the versioned report of
  docs/reports.md, or the unversioned one written before it): one `Case` per divergence, the
  diverging call its last;
- a trace of any spec kind (`check --trace-out`, a monitor's `trace_path`; docs/traces.md).

A trace is one `Case`. Its diverging call is the one `cacheproof replay TRACE` (without --impl)
reports: the call a monitor marked with `observed`, or the first whose recorded outcome is not the
spec's; none when the trace records neither (a `check --trace-out` trace diverges only on the cache
it was checked against, which the trace does not name).

Only the calls, the size and what the input says about the cache are taken: the figures and the
spec's side of every comparison come from replaying the calls on the spec (`series`). Anything
unreadable is a `ReportInputError` naming the path and what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cacheproof.contract.calls import Call, ValueRecipe, from_json
from cacheproof.contract.explaining.broken import named as named_broken
from cacheproof.contract.record import Trace, call_problem
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind
from cacheproof.trace.format import TraceFormatError, parse_trace
from cacheproof.trace.replay import OBSERVED, replay_against_spec

REPORT_SCHEMA = "cacheproof/report/v1"
"""The versioned report schema this reader knows (cacheproof/schemas/report-v1.json)."""

CHECK_REPORT, TRACE = "check report", "trace"


class ReportInputError(ValueError):
    """An input a report cannot be made from; the message names the path and what is wrong."""


@dataclass(frozen=True)
class Case:
    """One call sequence on a fresh spec of `size`, and what the input says about its diverging call.

    `marked`: the 1-based step of the diverging call, None when none is known. `observed`: what the
    cache (or the recording) did there, in words, when the input says it beside the differences;
    `observed_differs` whether that outcome is not the spec's (a monitor also records a divergence
    in the state alone, with the spec's outcome).
    `differences`: the input's difference texts at the marked call; `complete` when they list every
    difference there (a check report's do), so that an observation they omit agreed. `state_diff`:
    the versioned report's structured state diff (`snapshot_diff` or `view_diff`), None without one.
    `heading`: the case in a few words (the title is the whole first difference); `broken`: (name,
    witness) of each invariant the implementation's own state breaks at the marked call.
    """

    title: str
    size: int
    calls: tuple[Call, ...]
    marked: int | None = None
    observed: str | None = None
    observed_differs: bool = True
    differences: tuple[str, ...] = ()
    complete: bool = False
    why: tuple[str, ...] = ()
    state_diff: dict | None = None
    snippet: str | None = None
    heading: str = ""
    broken: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReportInput:
    """Everything the page shows besides the replay: the input's form, the spec kind and semantics
    the calls replay under, (label, value) facts for the summary, the verdict and the cases; a check
    report's outcome coverage (its `coverage`: per operation, each outcome's count) and the run's
    figures, (label, value) (examples, steps, seconds, what its scope reached)."""

    source: str
    form: str
    kind: str
    semantics: Any
    impl: str | None
    facts: tuple[tuple[str, str], ...]
    verdict: str
    cases: tuple[Case, ...]
    coverage: dict | None = None
    figures: tuple[tuple[str, str], ...] = ()


def read_input(path: str | Path) -> ReportInput:
    """The input at `path` (see the module docstring); ReportInputError when it is none of them."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ReportInputError(f"{source}: cannot read it: {error}") from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    header = _json(first)
    if isinstance(header, dict) and ("spec" in header or "cacheproof_trace" in header) and "ok" not in header:
        try:
            trace = parse_trace(text, source)
        except TraceFormatError as error:
            raise ReportInputError(str(error)) from None
        return _trace(trace, source)
    document = _json(text)
    if isinstance(document, dict) and "ok" in document:
        return _check_report(document, source)
    raise ReportInputError(
        f"{source}: neither a `cacheproof check --json` report nor a trace: a report is one JSON object "
        "with \"ok\", a trace has a JSON header line with \"cacheproof_trace\" or \"spec\" (docs/reports.md)"
    )


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# Traces --------------------------------------------------------------------------------------

def _trace(trace: Trace, source: str) -> ReportInput:
    calls = tuple(traced.call for traced in trace.calls)
    divergence = replay_against_spec(trace)
    monitored = any(traced.observed is not None for traced in trace.calls)
    if divergence is None:
        case = Case(f"trace of {len(calls)} calls", trace.size, calls)
        verdict = "no divergence recorded"
    else:
        traced = trace.calls[divergence.step - 1]
        if divergence.against == OBSERVED:  # the monitor's why is a difference text of the implementation's
            observed = traced.observed
            same = (observed.result, observed.error) == (traced.result, traced.error)
            why, actual, differences = (observed.why,), f"the monitored cache {observed.describe()}", (observed.why,)
        else:
            same, why, actual, differences = False, (divergence.message,), f"recorded: {traced.describe()}", ()
        case = Case(f"call {divergence.step} of {len(calls)}: {why[0]}", trace.size, calls,
                    divergence.step, actual, not same, differences=differences, why=why,
                    heading=f"The divergence at call {divergence.step} of {len(calls)}", broken=_broken(why))
        verdict = (f"the monitored cache diverges at call {divergence.step}" if divergence.against == OBSERVED
                   else f"the recording parts from the spec at call {divergence.step}")
    kind = trace.spec_kind
    facts = (("input", f"{TRACE} ({'a monitor' if monitored else 'recorded'}; cacheproof {trace.version})"),
             ("spec", trace.kind), ("size", f"{kind.size_name} = {trace.size}"), ("profile", trace.profile),
             ("semantics", _described(trace.semantics)), ("calls", str(len(calls))),
             ("implementation", "not recorded in a trace"))
    return ReportInput(source, TRACE, trace.kind, trace.semantics, None, facts, verdict, (case,))


def _described(semantics: Any) -> str:
    fields = semantics.differences()
    return ", ".join(f"{name}={_value_text(value)}" for name, value in fields.items()) or "the contract's"


def _value_text(value: Any) -> str:
    if isinstance(value, frozenset):
        return "+".join(sorted(value)) or "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


# Check reports -------------------------------------------------------------------------------

def _check_report(data: dict, source: str) -> ReportInput:
    def fail(where: str, problem: str) -> ReportInputError:
        return ReportInputError(f"{source}: {where}: {problem}")

    schema = data.get("schema")
    if schema is not None and schema != REPORT_SCHEMA:
        raise fail("schema", f"{schema!r} is not a report schema this cacheproof reads ({REPORT_SCHEMA})")
    command = data.get("command", "check")
    if command != "check":
        hint = " ; make the page from the trace it replayed: cacheproof report TRACE" if command == "replay" else ""
        raise fail("command", f"a `cacheproof {command} --json` report has no call sequence to draw{hint}")
    if data.get("threads") is not None or "scenarios" in data:
        raise fail("threads", "a `check --threads` report holds concurrent histories, not one call sequence; "
                   "the page draws sequential check reports and traces")
    if data.get("ok") is None:
        raise fail("ok", "the check was interrupted: no verdict, nothing to draw")
    examples = data.get("divergences", data.get("counterexamples"))
    if not isinstance(examples, list):
        raise fail("divergences", f"expected a list of divergences, got {examples!r}")
    try:
        kind = get_kind(data.get("spec", DEFAULT_KIND))
    except InvalidArgumentError as error:
        raise fail("spec", str(error)) from None
    semantics = _semantics(kind, data.get("profile"), data.get("semantics"), fail)
    cases = tuple(_divergence(kind, example, f"divergences[{index}]", fail, number, len(examples))
                  for number, (index, example) in enumerate(enumerate(examples), start=1))
    impl = data.get("impl")
    facts = (("input", f"{CHECK_REPORT} ({schema or 'unversioned'})"), ("spec", kind.name),
             ("implementation", impl or "not recorded in this report"),
             ("profile", data.get("profile") or "not recorded (replayed under the contract)"),
             ("semantics", _described(semantics)), ("seed", _text(data.get("seed"), "not recorded")),
             ("examples", _text(data.get("examples"), "?")), ("steps", _text(data.get("steps"), "?")),
             ("seconds", _text(data.get("seconds"), "?")))
    count = len(cases)
    verdict = "conforms" if data["ok"] else f"{count} distinct divergence{'s' if count != 1 else ''}"
    coverage = data.get("coverage")
    if coverage is not None and not _is_coverage(coverage):
        raise fail("coverage", "expected {\"operations\": {OPERATION: {OUTCOME: count}}}")
    return ReportInput(source, CHECK_REPORT, kind.name, semantics, impl, facts, verdict, cases, coverage,
                       _run_figures(data))


def _is_coverage(coverage: Any) -> bool:
    operations = coverage.get("operations") if isinstance(coverage, dict) else None
    return isinstance(operations, dict) and all(
        isinstance(outcomes, dict) and all(type(count) is int for count in outcomes.values())
        for outcomes in operations.values())


def _run_figures(data: dict) -> tuple[tuple[str, str], ...]:
    """The run's figures a check report holds: examples, steps, seconds, steps per second, and what
    its scope reached."""
    figures = [(label, str(data[key])) for label, key in (("examples", "examples"), ("steps", "steps"),
                                                          ("seconds", "seconds")) if data.get(key) is not None]
    steps, seconds = data.get("steps"), data.get("seconds")
    if isinstance(steps, int) and isinstance(seconds, (int, float)) and seconds > 0:
        figures.append(("steps per second", f"{steps / seconds:.0f}"))
    scope = data.get("scope")
    if isinstance(scope, dict):
        figures += [(name.replace("_", " "), ", ".join(map(str, value)) if isinstance(value, list) else str(value))
                    for name, value in scope.items() if value is not None]
    return tuple(figures)


def _broken(why: Any) -> tuple[tuple[str, str], ...]:
    """(name, witness) of each invariant the lines say the implementation breaks."""
    return tuple((found["name"], found["witness"]) for found in named_broken([str(line) for line in why]))


def _text(value: Any, missing: str) -> str:
    return missing if value is None else str(value)


def _semantics(kind, profile: Any, fields: Any, fail) -> Any:
    """The semantics the check ran under: the profile's (the kind's default without one), with the
    report's `semantics` fields (those that differ from the contract) applied."""
    name = kind.default_profile if profile is None else profile
    if name not in kind.profiles:
        raise fail("profile", f"spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}; got {profile!r}")
    if not fields:
        return kind.profiles[name].semantics
    if not isinstance(fields, dict) or not all(isinstance(value, str) for value in fields.values()):
        raise fail("semantics", f"expected an object of FIELD: \"VALUE\" strings, got {fields!r}")
    contract = kind.profiles[kind.default_profile].semantics
    try:
        return contract.with_overrides(",".join(f"{field}={value}" for field, value in fields.items()))
    except (InvalidArgumentError, TypeError) as error:
        raise fail("semantics", str(error)) from None


def _divergence(kind, data: Any, where: str, fail, number: int, count: int) -> Case:
    if not isinstance(data, dict):
        raise fail(where, f"expected an object, got {type(data).__name__}")
    size = data.get("size", data.get("capacity_bytes"))
    if type(size) is not int or size < 1:
        raise fail(f"{where}.size", f"the {kind.size_name} must be an int >= 1, got {size!r}")
    raw_calls = data.get("calls")
    if not isinstance(raw_calls, list) or not raw_calls:
        raise fail(f"{where}.calls", f"expected a non-empty list of calls, got {raw_calls!r}")
    calls = tuple(_call(kind, call, f"{where}.calls[{index}]", fail) for index, call in enumerate(raw_calls))
    differences = data.get("differences")
    if differences is None:  # the unversioned block report: one description
        differences = [data["difference"]] if isinstance(data.get("difference"), str) else []
    if not isinstance(differences, list) or not all(isinstance(text, str) for text in differences):
        raise fail(f"{where}.differences", "expected a list of strings")
    message = data.get("message") or (differences[0] if differences else "diverges")
    state_diff = data.get("state_diff")
    if state_diff is not None and not isinstance(state_diff, dict):
        raise fail(f"{where}.state_diff", f"expected an object or null, got {state_diff!r}")
    ending = data.get("ending", "diverges here")
    title = f"divergence {number} of {count} ({len(calls)} calls, {ending}): {message}"
    why = tuple(str(line) for line in data.get("why") or ())
    broken = data.get("broken_invariants")
    if broken is None:  # a report written before the field: the lines say it, if anything
        found = _broken(why)
    elif isinstance(broken, list) and all(isinstance(item, dict) and isinstance(item.get("name"), str)
                                          and isinstance(item.get("witness"), str) for item in broken):
        found = tuple((item["name"], item["witness"]) for item in broken)
    else:
        raise fail(f"{where}.broken_invariants", f"expected a list of {{\"name\", \"witness\"}} strings, got {broken!r}")
    kind_text = data.get("kind")
    heading = f"Divergence {number} of {count}" + (f": {kind_text}" if isinstance(kind_text, str) else f", {ending}")
    return Case(title, size, calls, len(calls), differences=tuple(differences), complete=bool(differences),
                why=why, state_diff=state_diff, snippet=data.get("snippet"), heading=heading, broken=found)


def _call(kind, data: Any, where: str, fail) -> Call:
    if not isinstance(data, dict) or not isinstance(data.get("op"), str):
        raise fail(where, f"expected a call {{\"op\", \"args\", \"kwargs\"}}, got {data!r}")
    if not isinstance(data.get("args", []), list) or not isinstance(data.get("kwargs", {}), dict):
        raise fail(where, "args must be a list and kwargs an object")
    try:
        call = from_json(data)
    except (TypeError, ValueError, RecursionError) as error:
        raise fail(where, f"malformed argument: {error}") from None
    problem = call_problem(kind, call)
    if problem is not None:
        raise fail(f"{where}.{problem[0]}", problem[1])
    for value in (*call.args, *call.kwargs.values()):
        if isinstance(value, ValueRecipe) and value.problem() is not None:
            raise fail(where, value.problem())
    return call
