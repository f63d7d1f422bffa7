"""`cacheproof replay TRACE [--impl MODULE:FACTORY]`: re-run a trace and report its first divergence.

A trace is a claim about what happened. Without --impl the claim is checked against the spec: every
recorded outcome must be the one the spec gives. With --impl the cache runs beside the spec
(`lockstep`: outcomes, len and `in` after every call, stats, snapshot and the spec's I1-I4
periodically, the call that broke the state located by bisection) and its outcomes must also match
the recorded ones. Both are O(1) amortized per call. Exit 0 no divergence, 1 divergence, 2 usage
error (bad flag, unreadable or malformed trace, factory not importable). A trace whose header
names a spec kind (`"spec": "blocks"`) is replayed by `program_replay` (docs/block-traces.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call, ValueRecipe, to_json, to_python
from cacheproof.contract.outcomes import Outcome, error_classes, error_matches, normalize_snapshot, outcome_difference
from cacheproof.contract.outcomes import run_spec_call
from cacheproof.contract.explain import SnapshotDiff, snapshot_diff
from cacheproof.sandbox.factories import FactoryError, load_factory, probe_factory
from cacheproof.sandbox.fault_search import first_failure
from cacheproof.contract.faults import CacheFault, UsageAbort, UserCodeError
from cacheproof.cmdline.flag_types import positive_seconds
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT, GuardedFactory, Watch, supervised
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.cache.profiles import PROFILES, check_operations, profile_named
from cacheproof.spec.cache.semantics import describe_value, field_names
from cacheproof.spec.overrides import written_differences
from cacheproof.spec.cache.values import value_size
from cacheproof.trace.lockstep import Lockstep, first_state_divergence
from cacheproof.trace import program_replay
from cacheproof.trace.format import (
    SOME_VALUE,
    Trace,
    TracedCall,
    TraceFormatError,
    read_trace,
    recorded_calls,
)
from cacheproof.contract.record import recorded_result
from cacheproof.contract.values import value_for, values_equal
from cacheproof.spec.kinds import new_spec

SPEC = "spec"
RECORDING = "recording"
OBSERVED = "observed"

_HEADER_LINES = 1


@dataclass(frozen=True)
class ReplayDivergence:
    """The first call whose outcome or state disagrees.

    `against` is "spec" when the spec disagrees (with the recording, or with the cache),
    "recording" when the cache matches the spec but not the recorded outcome, and "observed" when,
    replayed on the spec alone, the trace holds a divergence a monitor saw (`TracedCall.observed`).
    """

    step: int  # 1-based call number
    call: Call
    against: str
    expected: str
    actual: str
    message: str
    spec_snapshot: tuple
    cache_snapshot: tuple | None

    @property
    def line(self) -> int:
        """The line of the trace file that holds the call."""
        return self.step + _HEADER_LINES

    def snapshot_diff(self) -> SnapshotDiff | None:
        if self.cache_snapshot is None:
            return None
        return snapshot_diff(self.spec_snapshot, self.cache_snapshot)

    def to_json(self) -> dict:
        diff = self.snapshot_diff()
        return {
            "step": self.step,
            "line": self.line,
            "call": to_json(self.call),
            "against": self.against,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
            "snippet": None,
            "state_diff": None if diff is None else diff.to_json(),
            "spec_snapshot": [list(e) for e in self.spec_snapshot],
            "cache_snapshot": None if self.cache_snapshot is None else [list(e) for e in self.cache_snapshot],
        }


def replay_against_spec(trace: Trace) -> ReplayDivergence | None:
    """The first call whose recorded outcome is not the spec's (under `trace.semantics`), or None."""
    spec = new_spec(trace.size, trace.semantics)
    for index, traced in enumerate(trace.calls):
        outcome = run_spec_call(spec, traced.call)
        difference = recorded_difference(traced, outcome, spec)
        if difference is not None:
            return ReplayDivergence(
                index + 1, traced.call, SPEC, f"spec {outcome.describe()}", f"recorded {traced.describe()}",
                difference, normalize_snapshot(spec.snapshot()), None,
            )
        if traced.observed is not None:
            return ReplayDivergence(
                index + 1, traced.call, OBSERVED, f"spec {outcome.describe()}",
                f"the monitored cache {traced.observed.describe()}",
                f"{traced.observed.why} (recorded by the monitor; replay with --impl to run the cache)",
                normalize_snapshot(spec.snapshot()), None,
            )
    return None


def replay_against_cache(trace: Trace, factory: Callable[[int], Any]) -> ReplayDivergence | None:
    """The first call where `factory(capacity)` disagrees with the spec or with the recording, or None.

    One pass, O(1) amortized per call (see `cacheproof.trace.lockstep`): outcomes and the recording
    after every call, the whole state periodically and at the end; a state difference is traced
    back to the call after which it first appears.
    """
    calls = recorded_calls(trace)
    lockstep = Lockstep(factory, trace.size, trace.semantics)
    for traced in trace.calls:
        try:
            expected, actual = lockstep.step(traced.call)
        except UserCodeError as error:  # the cache's make_value failed making the call's value
            message = f"{error}, making a value for {to_python(traced.call)}"
            return ReplayDivergence(lockstep.steps + 1, traced.call, SPEC, "the call is made", message, message, (), None)
        found = _step_divergence(lockstep, traced, expected, actual)
        if found is not None:
            return _earliest(lockstep, calls, found)
    if lockstep.steps > lockstep.matched_at:
        difference = lockstep.full_difference()
        if difference is not None:
            found = ReplayDivergence(
                lockstep.steps, calls[-1], SPEC, "spec state", "cache state", difference, *lockstep.snapshots()
            )
            return _earliest(lockstep, calls, found)
    return None


def _step_divergence(lockstep: Lockstep, traced: TracedCall, expected: Outcome, actual: Outcome) -> ReplayDivergence | None:
    """This step's outcome against the spec, then against the recording, then the quick state check."""
    step, call = lockstep.steps, traced.call
    difference = outcome_difference(call, expected, actual)
    if difference is not None:
        return _beside_spec(step, call, expected, actual, difference, lockstep)
    difference = recorded_difference(traced, actual, lockstep.cache)
    if difference is not None:
        return ReplayDivergence(
            step, call, RECORDING, f"recorded {traced.describe()}", f"cache {actual.describe()}", difference,
            *lockstep.snapshots(),
        )
    difference = lockstep.quick_difference(call)
    if difference is not None:
        return _beside_spec(step, call, expected, actual, difference, lockstep)
    return None


def _beside_spec(
    step: int, call: Call, expected: Outcome, actual: Outcome, difference: str, lockstep: Lockstep
) -> ReplayDivergence:
    return ReplayDivergence(
        step, call, SPEC, f"spec {expected.describe()}", f"cache {actual.describe()}", difference, *lockstep.snapshots()
    )


def _earliest(lockstep: Lockstep, calls: Sequence[Call], found: ReplayDivergence) -> ReplayDivergence:
    """`found` (at the lockstep's last call), unless the state already differed after an earlier call
    that no full check had looked at yet: then that call, located by re-running, is the divergence."""
    if lockstep.steps - lockstep.matched_at <= 1 or lockstep.full_difference() is None:
        return found
    state = first_state_divergence(
        lockstep.factory, lockstep.capacity_bytes, calls, lockstep.matched_at, lockstep.steps, lockstep.semantics
    )
    if state is None or state.step == found.step:
        return found
    return ReplayDivergence(
        state.step, calls[state.step - 1], SPEC, f"spec {state.expected.describe()}",
        f"cache {state.actual.describe()}", state.message, state.spec_snapshot, state.cache_snapshot,
    )


def recorded_difference(traced: TracedCall, outcome: Outcome, target: Any) -> str | None:
    """Why `outcome` (of running the call on `target`) is not the recorded one, or None.

    Errors match by name anywhere in the raised class's MRO; an `Acquired` by name; lists in order;
    a recorded value recipe is made for `target` and compared with `values_equal`.
    """
    call = traced.call
    try:
        if traced.error is not None:
            if outcome.error is not None and error_matches(traced.error, error_classes(outcome.error)):
                return None
        elif outcome.error is None and _result_matches(traced.result, outcome.result, target):
            return None
        return f"{to_python(call)}: recorded {traced.describe()}; replayed {outcome.describe()}"
    except Exception as error:  # the cache's result or error object may fail to compare or print
        return f"{to_python(call)}: comparing the replayed outcome with the recording raised {type(error).__name__}: {error}"


def _result_matches(recorded: Any, result: Any, target: Any) -> bool:
    if recorded is SOME_VALUE:
        return True
    if isinstance(recorded, ValueRecipe):  # sizes first: a recorded recipe is built only if it can match
        return value_size(result) == recorded.nbytes and values_equal(
            value_for(target, recorded.nbytes, recorded.tag), result
        )
    replayed = recorded_result(result)
    return type(replayed) is type(recorded) and replayed == recorded


# Command line -------------------------------------------------------------------------------

def checked_under(trace: Trace, profile: str | None, overrides: str = "", ops: str | None = None) -> Trace:
    """`trace` with the semantics and operations of the flags: `profile` (None: the header's) replaces
    the header's profile, its semantics and operations; `overrides` (FIELD=VALUE,...) then applies;
    `ops` (OP,...) replaces the operations. InvalidArgumentError for a bad name or a call outside them."""
    if profile is not None:
        chosen = profile_named(profile)
        trace = replace(trace, profile=profile, semantics=chosen.semantics, operations=chosen.operations)
    if overrides:
        trace = replace(trace, semantics=trace.semantics.with_overrides(overrides))
    if ops is not None:
        trace = replace(trace, operations=check_operations([name.strip() for name in ops.split(",") if name.strip()]))
    for step, traced in enumerate(trace.calls, start=1):
        if traced.call.op not in trace.operations:
            raise InvalidArgumentError(
                f"step {step} (trace line {step + _HEADER_LINES}) calls {traced.call.op}, outside the replayed "
                f"operations {','.join(trace.operations)}"
            )
    return trace


@dataclass(frozen=True)
class ReplayReport:
    trace: str
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
            "spec": "cache",
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
    parser.add_argument("trace", type=Path, help="the trace file (JSON lines, see docs/traces.md; "
                        "of another spec kind, docs/block-traces.md)")
    parser.add_argument("--impl", metavar="MODULE:FACTORY", help="MODULE:FACTORY of a cache to run beside the spec (default: the spec alone)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the report as JSON to this path (docs/reports.md)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict")
    parser.add_argument("--call-timeout", type=positive_seconds, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                        help=f"a call not returning within SECONDS is a divergence (default {DEFAULT_CALL_TIMEOUT:g})")
    parser.add_argument("--profile", metavar="NAME",
                        help=f"replay under this profile, of {', '.join(PROFILES)} (default: the trace header's)")
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...",
                        help="override fields of the semantics (docs/profiles.md)")
    parser.add_argument("--ops", metavar="OP,...", help="the operations the cache has (default: the trace header's)")


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof replay: {problem}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        trace = read_trace(args.trace)
        if trace.kind != "cache":  # a trace of another spec kind (docs/block-traces.md)
            return program_replay.run(args, trace)
        trace = checked_under(trace, args.profile, args.semantics, args.ops)
        factory = None if args.impl is None else load_factory(args.impl)
        divergence = replay_against_spec(trace) if factory is None else _guarded_replay(trace, factory, args)
    except (TraceFormatError, FactoryError, InvalidArgumentError) as error:
        print(f"cacheproof replay: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:
        print(f"cacheproof replay: {abort.message}", file=sys.stderr)
        if abort.details:
            print(abort.details, file=sys.stderr)
        return 2
    named = profile_named(trace.profile).semantics
    differences = ",".join(f"{name}={describe_value(getattr(trace.semantics, name))}" for name in field_names()
                           if getattr(trace.semantics, name) != getattr(named, name))
    profile = trace.profile + (f" + {differences}" if differences else "")
    semantics = written_differences(trace.semantics)
    report = ReplayReport(str(args.trace), args.impl, len(trace.calls), divergence, profile, semantics,
                          time.perf_counter() - started)
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        write_report(args.json, "replay", report.to_json())
    _print_report(args, report)
    return 0 if report.ok else 1


def _guarded_replay(trace: Trace, factory: Callable[[int], Any], args: argparse.Namespace) -> ReplayDivergence | None:
    """`replay_against_cache` with the cache guarded (docs/robustness.md): a call that hangs is a divergence."""
    watch = Watch(args.call_timeout)
    guarded = GuardedFactory(factory, watch, args.impl)
    supervised(lambda: probe_factory(guarded, args.impl, trace.operations), watch)
    try:
        return supervised(lambda: replay_against_cache(trace, guarded), watch)
    except CacheFault:
        failure = first_failure(guarded, trace.size, recorded_calls(trace), watch, trace.semantics)
    if failure is None:
        return ReplayDivergence(len(trace.calls), trace.calls[-1].call, SPEC, "the same run twice",
                                "a hang once, then none", "not deterministic: the replay hung once, then did not", (), None)
    call = trace.calls[failure.step].call
    return ReplayDivergence(failure.step + 1, call, SPEC, "the call returns", failure.message, failure.message, (), None)


def _print_report(args: argparse.Namespace, report: ReplayReport) -> None:
    divergence = report.divergence
    against = "the spec" if report.impl is None else f"{report.impl} beside the spec"
    if not args.quiet:
        summary_table(
            "cacheproof replay",
            {
                "trace": report.trace,
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


def divergence_lines(divergence: ReplayDivergence) -> list[str]:
    """The divergence for a reader, the difference first: what differs, then the two outcomes (or
    that they agree, when only the state differs), then the snapshot diff."""
    lines = [f"difference: {divergence.message}"]
    expected, actual = divergence.expected, divergence.actual
    if expected.partition(" ")[2] == actual.partition(" ")[2]:
        lines.append(f"outcome:  the same ({expected}; {actual}); the state differs")
    else:
        lines += [f"expected: {expected}", f"actual:   {actual}"]
    diff = divergence.snapshot_diff()
    if diff is None:
        lines.append(f"spec snapshot after the call: {divergence.spec_snapshot}")
    elif diff.empty:
        lines.append("snapshots agree")
    else:
        lines += diff.lines()
    return lines
