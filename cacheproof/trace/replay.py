"""`cacheproof replay TRACE [--impl MODULE:FACTORY]`: re-run a trace of any spec kind and report its
first divergence.

A trace is a claim about what happened. Without --impl the claim is checked against the spec: every
recorded outcome must be the one a fresh model of the header's kind, size and semantics gives
(`contract.steps.outcome_of`; a spec raising an error outside its contract is a bug of the spec and
propagates). With --impl the implementation runs beside a model, one replay for every kind
(`replay_beside`): after every call the two outcomes are compared by the one rule
(`contract.steps.step_outcomes`, `outcomes_agree`), and so is the recorded outcome with the spec's;
the kind's views (`SpecKind.compared_views`) are compared every `state_every` calls and after the
last one (`SpecKind.state_every`: 1 for the block pool, so after every call; None for the tensor
cache: every max(16, 2 x entries) calls, entries being `len(model)`, so a comparison that costs
O(entries) is paid O(1) amortized per call), and the kind's `announcements` after every call.

When a comparison fails, the calls since the last one that agreed are searched by bisection for the
first after which the views differ (a fresh model and implementation re-run from empty to each
midpoint: both are deterministic from empty), and that call's differential step with every view
(`contract.steps.differential_step`) is the divergence: every difference and why
(`contract.explaining.steps`, as `check` prints them) and a runnable snippet
(`contract.snippet.program_snippet`). The calls are guarded by --call-timeout for every kind
(`sandbox.guarded_program`): a call that hangs is a divergence at that call
(`sandbox.fault_search.first_failure`).

`against` says who disagrees: "recording" (the spec does not give the recorded outcome),
"implementation" (the implementation does not give the spec's), "observed" (replayed on the spec
alone, a divergence a monitor saw and marked, `TracedCall.observed`). Exit 0 no divergence, 1
divergence, 2 usage error (bad flag, unreadable or malformed trace, factory not importable).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cacheproof.cmdline.flag_types import positive_seconds
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.progress import summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.contract.calls import Call, ValueRecipe, to_json, to_python
from cacheproof.contract.explaining.broken import named as named_broken
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.faults import CacheFault, UsageAbort, UserCodeError
from cacheproof.contract.record import HEADER_LINES, recorded_result
from cacheproof.contract.snippet import program_snippet
from cacheproof.contract.steps import StepDifference, StepOutcome, differential_step, error_matches, outcome_of
from cacheproof.contract.steps import outcomes_agree, step_outcomes, view_differences
from cacheproof.contract.values import values_equal
from cacheproof.sandbox.factories import FactoryError, load_factory
from cacheproof.sandbox.fault_search import DIVERGENCE, first_failure
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT, Watch, supervised
from cacheproof.sandbox.guarded_program import WatchedFactory, missing_operations
from cacheproof.spec.cache.values import value_size
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.overrides import written_differences
from cacheproof.trace.format import (
    SOME_VALUE,
    Trace,
    TracedCall,
    TraceFormatError,
    checked_operations,
    read_trace,
    recorded_calls,
)

RECORDING = "recording"
IMPLEMENTATION = "implementation"
OBSERVED = "observed"

STATE_EVERY_MINIMUM = 16
STATE_EVERY_PER_ENTRY = 2
"""A kind whose `state_every` is None has its views compared every max(16, 2 x len(model)) calls."""

SNIPPET_CALLS = 500
"""A divergence at a later call has no snippet: the trace and `cacheproof replay` reproduce it (a
snippet of thousands of calls is no reading)."""


@dataclass(frozen=True)
class ReplayDivergence:
    """The first call whose outcome or state disagrees; `against` says who disagrees (see the
    module docstring). `expected` and `actual` are the two outcomes in words (None when only a
    message says them); for an implementation's divergence, `snippet` reproduces it (None after
    SNIPPET_CALLS calls), `state_diff` says which of the kind's views differ after it, and
    `explanation` says every difference and why (`contract.explaining.steps`, as `check` prints them)."""

    step: int  # 1-based call number
    call: Call
    against: str
    expected: str | None
    actual: str | None
    message: str
    snippet: str | None = None
    state_diff: dict | None = None
    explanation: tuple[str, ...] = ()  # with the implementation: every difference and why, in words

    @property
    def line(self) -> int:
        """The line of the trace file that holds the call."""
        return self.step + HEADER_LINES

    def to_json(self) -> dict:
        """The divergence of the JSON report; `spec_snapshot` and `cache_snapshot` are null for every
        kind (the views that differ are in `state_diff`; docs/decisions.md, One replay for every kind)."""
        return {
            "step": self.step,
            "line": self.line,
            "call": to_json(self.call),
            "against": self.against,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
            "snippet": self.snippet,
            "state_diff": self.state_diff,
            "spec_snapshot": None,
            "cache_snapshot": None,
            "broken_invariants": named_broken(self.explanation),
            "why": list(self.explanation),
        }


def replay_against_spec(trace: Trace) -> ReplayDivergence | None:
    """The first call whose recorded outcome is not the spec's (under `trace.semantics`), or the
    call a monitor marked as diverging; None when there is neither."""
    kind = trace.spec_kind
    spec = kind.new(trace.size, trace.semantics)
    for step, traced in enumerate(trace.calls, start=1):
        outcome = outcome_of(spec, traced.call, kind.error_names, spec=True)
        difference = recorded_difference(traced, outcome, spec)
        if difference is not None:
            return ReplayDivergence(step, traced.call, RECORDING, f"spec {outcome.describe()}",
                                    f"recorded {traced.describe()}", difference)
        if traced.observed is not None:
            return ReplayDivergence(
                step, traced.call, OBSERVED, f"spec {outcome.describe()}",
                f"the monitored cache {traced.observed.describe()}",
                f"{traced.observed.why} (recorded by the monitor; replay with --impl to run the cache)",
            )
    return None


def state_period(kind: SpecKind, model: Any) -> int:
    """How many calls after the last comparison of the views the next one comes: the kind's
    `state_every`, or where that is None, max(STATE_EVERY_MINIMUM, STATE_EVERY_PER_ENTRY x
    len(model)) (the entries the model holds now, O(1) to read)."""
    every = kind.state_every
    return every if every is not None else max(STATE_EVERY_MINIMUM, STATE_EVERY_PER_ENTRY * len(model))


def replay_beside(trace: Trace, factory: Callable[[int], Any], impl: str = "MODULE:FACTORY") -> ReplayDivergence | None:
    """The first call where `factory(size)` disagrees with the spec, or the spec with the recording,
    or None: the outcomes after every call, the views as the kind's `state_every` says (the module
    docstring). `impl` names the factory in a snippet."""
    kind = trace.spec_kind
    calls = recorded_calls(trace)
    model, implementation = kind.new(trace.size, trace.semantics), factory(trace.size)
    error_names, readers = kind.error_names, kind.view_readers
    spec_errors: list[str | None] = []  # the spec's error of each call made, for the snippet's `raises`
    matched, due = 0, state_period(kind, model)  # calls made when the views last agreed; calls until the next comparison
    for step, traced in enumerate(trace.calls, start=1):
        call = traced.call
        try:
            expected, actual = step_outcomes(model, implementation, call, error_names)
        except UserCodeError as error:  # the implementation's make_value failed making the call's value
            difference = StepDifference(call, StepOutcome(), StepOutcome(), user_code=str(error))
            return _implementation_divergence(trace, calls[:step], spec_errors, difference, impl)
        spec_errors.append(expected.error)
        whole = step - matched >= due or step == len(calls)  # the whole state compared after this call
        compared = kind.compared_views if whole else kind.announcements
        differing, unread = view_differences(model, implementation, compared, readers) if compared else ((), ())
        if differing or not outcomes_agree(call.op, expected, actual):
            if not whole:
                differing, unread = view_differences(model, implementation, kind.compared_views, readers)
            difference = StepDifference(call, expected, actual, differing, unread=unread)
            return _earliest(trace, factory, calls, matched, step, difference, spec_errors, impl)
        mismatch = recorded_difference(traced, expected, implementation)
        if mismatch is not None:
            return ReplayDivergence(step, call, RECORDING, f"spec {expected.describe()}",
                                    f"recorded {traced.describe()}", mismatch)
        if whole:
            matched, due = step, state_period(kind, model)
    return None


def _earliest(trace: Trace, factory: Callable[[int], Any], calls: Sequence[Call], matched: int, step: int,
              difference: StepDifference, spec_errors: list[str | None], impl: str) -> ReplayDivergence:
    """The divergence `difference` at call `step`, unless the state already differed after an earlier
    call that no comparison had looked at yet (the views agreed after call `matched`): then that call,
    located by bisection, with its differential step re-run with every view."""
    kind = trace.spec_kind
    if step - matched > 1 and _state_differs(trace, factory, calls[:step]):
        low, high = matched, step
        while high - low > 1:
            middle = (low + high) // 2
            if _state_differs(trace, factory, calls[:middle]):
                high = middle
            else:
                low = middle
        if high < step:
            model, implementation = _replayed(trace, factory, calls[:high - 1])
            earlier = differential_step(model, implementation, calls[high - 1], kind.compared_views,
                                        error_names=kind.error_names, readers=kind.view_readers)
            if earlier is not None:  # None: a re-run that does not part there (not deterministic); the later one stands
                step, difference = high, earlier
    return _implementation_divergence(trace, calls[:step], spec_errors, difference, impl)


def _replayed(trace: Trace, factory: Callable[[int], Any], calls: Sequence[Call]) -> tuple[Any, Any]:
    """A fresh model and `factory(size)` after `calls` (their outcomes not compared)."""
    kind = trace.spec_kind
    model, implementation = kind.new(trace.size, trace.semantics), factory(trace.size)
    for call in calls:
        step_outcomes(model, implementation, call, kind.error_names)
    return model, implementation


def _state_differs(trace: Trace, factory: Callable[[int], Any], calls: Sequence[Call]) -> bool:
    """Whether a fresh model and implementation differ in their state (the kind's `views` and
    `lookups`: what a call leaves, not what it announced) after `calls`."""
    kind = trace.spec_kind
    model, implementation = _replayed(trace, factory, calls)
    return bool(view_differences(model, implementation, kind.views + kind.lookups, kind.view_readers)[0])


def _implementation_divergence(trace: Trace, calls: Sequence[Call], spec_errors: Sequence[str | None],
                               difference: StepDifference, impl: str) -> ReplayDivergence:
    """The implementation's divergence at the last of `calls`: every difference and why, and (within
    SNIPPET_CALLS calls) the snippet."""
    kind = trace.spec_kind
    snippet = None
    if len(calls) <= SNIPPET_CALLS:
        snippet = program_snippet(impl, trace.size, calls, spec_errors[:len(calls) - 1], difference, kind.name,
                                  kind.view_readers, kind.new(trace.size, trace.semantics))
    (explained,) = explain_all(kind, [diverging_call(kind, trace.size, trace.semantics, calls, difference)])
    if difference.user_code is not None:
        expected, actual = "the call is made", difference.describe()
    else:
        expected, actual = f"spec {difference.expected.describe()}", f"implementation {difference.actual.describe()}"
    return ReplayDivergence(len(calls), calls[-1], IMPLEMENTATION, expected, actual, difference.describe(),
                            snippet=snippet, state_diff=difference.view_diff(), explanation=explained.lines())


def recorded_difference(traced: TracedCall, outcome: StepOutcome, target: Any) -> str | None:
    """Why `outcome` (of running the call on `target`, `contract.steps.outcome_of`) is not the
    recorded one, or None.

    Errors match by name anywhere in the raised class's MRO; an `Acquired` by name; lists in order;
    a recorded value recipe is made for `target` and compared with `values_equal`.
    """
    call = traced.call
    try:
        if traced.error is not None:
            if outcome.error is not None and error_matches(traced.error, outcome.error_classes):
                return None
        elif outcome.error is None and outcome.crash is None and _result_matches(traced.result, outcome.result, target):
            return None
        return f"{to_python(call)}: recorded {traced.describe()}; the spec {outcome.describe()}"
    except Exception as error:  # the implementation's result may fail to compare or print
        return f"{to_python(call)}: comparing the replayed outcome with the recording raised {type(error).__name__}: {error}"


def _result_matches(recorded: Any, result: Any, target: Any) -> bool:
    if recorded is SOME_VALUE:
        return True
    if isinstance(recorded, ValueRecipe):  # sizes first: a recorded recipe is built only if it can match
        return value_size(result) == recorded.nbytes and values_equal(
            recorded.value(target), result
        )
    replayed = recorded_result(result)
    return type(replayed) is type(recorded) and replayed == recorded


# Command line -------------------------------------------------------------------------------

def checked_under(trace: Trace, profile: str | None, overrides: str = "", ops: str | None = None) -> Trace:
    """`trace` with the semantics and operations of the flags: `profile` (None: the header's) replaces
    the header's profile, its semantics and operations; `overrides` (FIELD=VALUE,...) then applies;
    `ops` (OP,...) replaces the operations. InvalidArgumentError for a bad name or a call outside them."""
    kind = trace.spec_kind
    if profile is not None:
        if profile not in kind.profiles:
            raise InvalidArgumentError(f"unknown profile {profile!r}; profiles: {', '.join(kind.profiles)}")
        chosen = kind.profiles[profile]
        trace = replace(trace, profile=profile, semantics=chosen.semantics, operations=chosen.operations)
    if overrides:
        trace = replace(trace, semantics=trace.semantics.with_overrides(overrides))
    if ops is not None:
        names = [name.strip() for name in ops.split(",") if name.strip()]
        trace = replace(trace, operations=checked_operations(kind, names))
    for step, traced in enumerate(trace.calls, start=1):
        if traced.call.op not in trace.operations:
            raise InvalidArgumentError(
                f"step {step} (trace line {step + HEADER_LINES}) calls {traced.call.op}, outside the replayed "
                f"operations {','.join(trace.operations)}"
            )
    return trace


@dataclass(frozen=True)
class ReplayReport:
    trace: str
    spec: str  # the kind's name
    impl: str | None
    calls: int
    divergence: ReplayDivergence | None
    profile: str = "contract"  # with the semantics overrides, as the summary table shows it
    semantics: dict[str, str] | None = None  # the fields that differ from the contract, as --semantics writes them
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def to_json(self) -> dict:
        """The body of the JSON report (`replay` in cacheproof/schemas/report-v1.json)."""
        return {
            "trace": self.trace,
            "spec": self.spec,
            "impl": self.impl,
            "profile": self.profile.partition(" + ")[0],
            "semantics": self.semantics or {},
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
        }


EXIT_STATUSES = {0: "no divergence: every recorded outcome (and --impl's) is the spec's",
                 1: "a divergence: its step, trace line and difference are printed, and in --json"}
EXAMPLE = "cacheproof replay counterexample.jsonl --impl mypackage.cache:make_cache --json replay.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", type=Path, help="the trace file of any spec kind (JSON lines, see docs/traces.md)")
    parser.add_argument("--impl", metavar="MODULE:FACTORY", help="MODULE:FACTORY of an implementation (a cache, a "
                        "block pool) to run beside the spec (default: the spec alone)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the report as JSON to this path (docs/reports.md)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict")
    parser.add_argument("--call-timeout", type=positive_seconds, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                        help=f"a call not returning within SECONDS is a divergence (default {DEFAULT_CALL_TIMEOUT:g})")
    parser.add_argument("--profile", metavar="NAME",
                        help="replay under this profile of the trace's kind (`cacheproof profiles`; default: the "
                        "trace header's)")
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...",
                        help="override fields of the semantics (docs/profiles.md)")
    parser.add_argument("--ops", metavar="OP,...", help="the operations the cache has (default: the trace header's)")


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("replay", {"--json": args.json}):
        return 2
    started = time.perf_counter()
    try:
        trace = checked_under(read_trace(args.trace), args.profile, args.semantics, args.ops)
        factory = None if args.impl is None else load_factory(args.impl)
        divergence = replay_against_spec(trace) if factory is None else _guarded_replay(trace, factory, args)
    except (TraceFormatError, FactoryError, InvalidArgumentError) as error:
        print(f"cacheproof replay: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:
        print(abort.said_by("cacheproof replay"), file=sys.stderr)
        return 2
    named = trace.spec_kind.profiles[trace.profile].semantics.as_written()
    differences = ",".join(f"{name}={value}" for name, value in trace.semantics.as_written().items() if named[name] != value)
    profile = trace.profile + (f" + {differences}" if differences else "")
    semantics = written_differences(trace.semantics)
    report = ReplayReport(str(args.trace), trace.kind, args.impl, len(trace.calls), divergence, profile, semantics,
                          time.perf_counter() - started)
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        write_report(args.json, "replay", report.to_json())
    _print_report(args, report)
    return 0 if report.ok else 1


def _guarded_replay(trace: Trace, factory: Callable[[int], Any], args: argparse.Namespace) -> ReplayDivergence | None:
    """`replay_beside` with the implementation guarded by --call-timeout (docs/robustness.md): a call
    that hangs is a divergence at that call, found by replaying the calls once more
    (`fault_search.first_failure`). An implementation without an operation the trace calls is a
    usage error, before any call."""
    kind = trace.spec_kind
    watch = Watch(args.call_timeout)
    guarded = WatchedFactory(factory, watch, args.impl)
    built, missing = supervised(lambda: missing_operations(kind, guarded, trace.operations), watch)
    if missing:
        raise UsageAbort(f"{args.impl}({kind.probe_size}) returned {built}, which lacks {', '.join(missing)}: the "
                         f"trace's operations are --ops {','.join(trace.operations)}")
    try:
        return supervised(lambda: replay_beside(trace, guarded, args.impl), watch)
    except CacheFault:
        failure = first_failure(guarded, trace.size, recorded_calls(trace), watch, trace.semantics, kind)
    if failure is None:
        return ReplayDivergence(len(trace.calls), trace.calls[-1].call, IMPLEMENTATION, "the same run twice",
                                "a hang once, then none", "not deterministic: the replay hung once, then did not")
    call = trace.calls[failure.step].call
    if failure.kind == DIVERGENCE:  # a difference the periodic comparison had not reached before the hang
        return ReplayDivergence(failure.step + 1, call, IMPLEMENTATION, None, None, failure.message)
    return ReplayDivergence(failure.step + 1, call, IMPLEMENTATION, "the call returns", failure.message, failure.message)


def _print_report(args: argparse.Namespace, report: ReplayReport) -> None:
    divergence = report.divergence
    against = "the spec" if report.impl is None else f"{report.impl} beside the spec"
    if not args.quiet:
        summary_table(
            "cacheproof replay",
            {
                "trace": report.trace,
                "spec": report.spec,
                "against": against,
                "profile": report.profile,
                "calls": report.calls,
                "result": "no divergence" if divergence is None else f"DIVERGES at step {divergence.step}",
            },
        )
    if divergence is None:
        print(f"no divergence: {report.calls} calls replayed against {against}")
        return
    print(f"divergence at step {divergence.step} of {report.calls} (trace line {divergence.line}): {to_python(divergence.call)}")
    if args.quiet:
        return
    for line in divergence_lines(divergence):
        print(f"  {line}")
    if divergence.snippet is not None:
        print(divergence.snippet)


def divergence_lines(divergence: ReplayDivergence) -> list[str]:
    """The divergence for a reader, the difference first: what differs (and, with the implementation,
    every difference and why), then the two outcomes, or that they agree when only the state differs."""
    lines = [f"difference: {divergence.message}"]
    lines += [f"  {line}" for line in divergence.explanation]
    expected, actual = divergence.expected, divergence.actual
    if expected is None or actual is None:
        pass
    elif expected.partition(" ")[2] == actual.partition(" ")[2]:
        lines.append(f"outcome:  the same ({expected}; {actual}); the state differs")
    else:
        lines += [f"expected: {expected}", f"actual:   {actual}"]
    return lines
