"""`cacheproof replay TRACE [--impl MODULE:FACTORY]`: re-run a trace of any spec kind and report its
first divergence.

A trace is a claim about what happened. Without --impl the claim is checked against the spec: every
recorded outcome must be the one a fresh model of the header's kind, size and semantics gives. With
--impl the implementation runs beside a second model and its outcomes must also match the recorded
ones; how often the whole state is compared is the kind's `SpecKind.state_every`:

- 1 (the block pool, and any kind by default): the outcome and every view of the kind after every
  call (`contract.steps.differential_step`), the divergence reported with every difference and
  why (`contract.explaining.steps`, as `check` prints them) and a runnable snippet
  (`contract.snippet.program_snippet`). O(calls x views).
- None (the tensor cache): `lockstep`: outcomes, len and `in` after every call, stats, snapshot
  and the spec's invariants every max(16, 2 x entries) calls, the call that broke the state located
  by bisection; each call guarded by --call-timeout. O(1) amortized per call.

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

from cacheproof.contract.calls import Call, ValueRecipe, to_json, to_python
from cacheproof.contract.outcomes import Outcome, normalize_snapshot, outcome_difference
from cacheproof.contract.steps import error_classes, error_matches
from cacheproof.contract.outcomes import run_spec_call
from cacheproof.contract.explain import SnapshotDiff, snapshot_diff
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.snippet import program_snippet
from cacheproof.contract.steps import differential_step
from cacheproof.sandbox.factories import FactoryError, load_factory, probe_factory
from cacheproof.sandbox.fault_search import first_failure
from cacheproof.contract.faults import CacheFault, UsageAbort, UserCodeError
from cacheproof.cmdline.flag_types import positive_seconds
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT, GuardedFactory, Watch, supervised
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.overrides import written_differences
from cacheproof.spec.cache.values import value_size
from cacheproof.trace.lockstep import Lockstep, first_state_divergence
from cacheproof.trace.format import (
    SOME_VALUE,
    Trace,
    TracedCall,
    TraceFormatError,
    checked_operations,
    read_trace,
    recorded_calls,
)
from cacheproof.contract.explaining.broken import named as named_broken
from cacheproof.contract.record import HEADER_LINES, recorded_result
from cacheproof.contract.values import values_equal

RECORDING = "recording"
IMPLEMENTATION = "implementation"
OBSERVED = "observed"


@dataclass(frozen=True)
class ReplayDivergence:
    """The first call whose outcome or state disagrees; `against` says who disagrees (see the
    module docstring). `expected` and `actual` are the two outcomes in words (None when only a
    message says them); the snapshots are the tensor cache's, normalized (None for other kinds);
    `snippet` reproduces an implementation's divergence found call by call, `state_diff` says which
    of the kind's views differ after it, and `explanation` says every difference and why
    (`contract.explaining.steps`, as `check` prints them)."""

    step: int  # 1-based call number
    call: Call
    against: str
    expected: str | None
    actual: str | None
    message: str
    spec_snapshot: tuple | None = None
    cache_snapshot: tuple | None = None
    snippet: str | None = None
    state_diff: dict | None = None
    explanation: tuple[str, ...] = ()  # call by call, with the implementation: every difference and why, in words

    @property
    def line(self) -> int:
        """The line of the trace file that holds the call."""
        return self.step + HEADER_LINES

    def snapshot_diff(self) -> SnapshotDiff | None:
        if self.cache_snapshot is None or self.spec_snapshot is None:
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
            "snippet": self.snippet,
            "state_diff": self.state_diff if diff is None else diff.to_json(),
            "spec_snapshot": None if self.spec_snapshot is None else [list(e) for e in self.spec_snapshot],
            "cache_snapshot": None if self.cache_snapshot is None else [list(e) for e in self.cache_snapshot],
            "broken_invariants": named_broken(self.explanation),
            "why": list(self.explanation),
        }


def _compared_in_lockstep(kind: SpecKind) -> bool:
    """Whether `kind` compares its whole state periodically, in lockstep (`SpecKind.state_every` None)."""
    return kind.state_every is None


def _spec_state(kind: SpecKind, spec: Any) -> tuple | None:
    """The spec's normalized snapshot where the lockstep compares snapshots, else None."""
    return normalize_snapshot(spec.snapshot()) if _compared_in_lockstep(kind) else None


def replay_against_spec(trace: Trace) -> ReplayDivergence | None:
    """The first call whose recorded outcome is not the spec's (under `trace.semantics`), or the
    call a monitor marked as diverging; None when there is neither."""
    kind = trace.spec_kind
    spec = kind.new(trace.size, trace.semantics)
    for index, traced in enumerate(trace.calls):
        outcome = run_spec_call(spec, traced.call)
        difference = recorded_difference(traced, outcome, spec)
        if difference is not None:
            return ReplayDivergence(
                index + 1, traced.call, RECORDING, f"spec {outcome.describe()}", f"recorded {traced.describe()}",
                difference, _spec_state(kind, spec),
            )
        if traced.observed is not None:
            return ReplayDivergence(
                index + 1, traced.call, OBSERVED, f"spec {outcome.describe()}",
                f"the monitored cache {traced.observed.describe()}",
                f"{traced.observed.why} (recorded by the monitor; replay with --impl to run the cache)",
                _spec_state(kind, spec),
            )
    return None


def replay_beside(trace: Trace, factory: Callable[[int], Any], impl: str = "MODULE:FACTORY") -> ReplayDivergence | None:
    """The first call where `factory(size)` disagrees with the spec or the recording, or None; the
    state compared as the kind's `state_every` says (the module docstring). `impl` names the
    factory in a snippet."""
    if _compared_in_lockstep(trace.spec_kind):
        return _replay_in_lockstep(trace, factory)
    return _replay_call_by_call(trace, factory, impl)


def _replay_call_by_call(trace: Trace, factory: Callable[[int], Any], impl: str) -> ReplayDivergence | None:
    """Every call on a model and the implementation (outcome and every view), and on a second model
    against the recording; at one call the implementation is checked first."""
    kind = trace.spec_kind
    spec = kind.new(trace.size, trace.semantics)
    model, implementation = kind.new(trace.size, trace.semantics), factory(trace.size)
    spec_errors: list[str | None] = []
    for step, traced in enumerate(trace.calls, start=1):
        difference = differential_step(model, implementation, traced.call, kind.compared_views, error_names=kind.error_names,
                                        readers=kind.view_readers)
        if difference is not None:
            calls = [earlier.call for earlier in trace.calls[:step]]
            snippet = program_snippet(impl, trace.size, calls, spec_errors, difference, kind.name, kind.view_readers,
                                      kind.new(trace.size, trace.semantics))
            (explained,) = explain_all(kind, [diverging_call(kind, trace.size, trace.semantics, calls, difference)])
            return ReplayDivergence(step, traced.call, IMPLEMENTATION, f"spec {difference.expected.describe()}",
                                    f"implementation {difference.actual.describe()}", difference.describe(),
                                    snippet=snippet, state_diff=difference.view_diff(),
                                    explanation=explained.lines())
        outcome = run_spec_call(spec, traced.call)
        mismatch = recorded_difference(traced, outcome, spec)
        if mismatch is not None:
            return ReplayDivergence(step, traced.call, RECORDING, f"spec {outcome.describe()}",
                                    f"recorded {traced.describe()}", mismatch)
        spec_errors.append(None if outcome.error is None else type(outcome.error).__name__)
    return None


def _replay_in_lockstep(trace: Trace, factory: Callable[[int], Any]) -> ReplayDivergence | None:
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
            return ReplayDivergence(lockstep.steps + 1, traced.call, IMPLEMENTATION, "the call is made", message, message, (), None)
        found = _step_divergence(lockstep, traced, expected, actual)
        if found is not None:
            return _earliest(lockstep, calls, found)
    if lockstep.steps > lockstep.matched_at:
        difference = lockstep.full_difference()
        if difference is not None:
            found = ReplayDivergence(
                lockstep.steps, calls[-1], IMPLEMENTATION, "spec state", "cache state", difference, *lockstep.snapshots()
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
        step, call, IMPLEMENTATION, f"spec {expected.describe()}", f"cache {actual.describe()}", difference, *lockstep.snapshots()
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
        state.step, calls[state.step - 1], IMPLEMENTATION, f"spec {state.expected.describe()}",
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
        if not _compared_in_lockstep(trace.spec_kind) and args.call_timeout != DEFAULT_CALL_TIMEOUT:
            raise InvalidArgumentError(f"--call-timeout: the calls of a {trace.kind} trace are not guarded yet "
                                       "(docs/block-traces.md)")
        factory = None if args.impl is None else load_factory(args.impl)
        if factory is None:
            divergence = replay_against_spec(trace)
        elif _compared_in_lockstep(trace.spec_kind):
            divergence = _guarded_replay(trace, factory, args)
        else:
            divergence = replay_beside(trace, factory, args.impl)
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
    """`replay_beside` in lockstep with the cache guarded (docs/robustness.md): a call that hangs is a divergence."""
    watch = Watch(args.call_timeout)
    guarded = GuardedFactory(factory, watch, args.impl)
    supervised(lambda: probe_factory(guarded, args.impl, trace.operations), watch)
    try:
        return supervised(lambda: replay_beside(trace, guarded, args.impl), watch)
    except CacheFault:
        failure = first_failure(guarded, trace.size, recorded_calls(trace), watch, trace.semantics)
    if failure is None:
        return ReplayDivergence(len(trace.calls), trace.calls[-1].call, IMPLEMENTATION, "the same run twice",
                                "a hang once, then none", "not deterministic: the replay hung once, then did not", (), None)
    call = trace.calls[failure.step].call
    return ReplayDivergence(failure.step + 1, call, IMPLEMENTATION, "the call returns", failure.message, failure.message, (), None)


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
    """The divergence for a reader, the difference first: what differs (and, found call by call,
    every difference and why), then the two outcomes (or that they agree, when only the state
    differs), then the snapshot diff."""
    lines = [f"difference: {divergence.message}"]
    lines += [f"  {line}" for line in divergence.explanation]
    expected, actual = divergence.expected, divergence.actual
    if expected is None or actual is None:
        pass
    elif expected.partition(" ")[2] == actual.partition(" ")[2]:
        lines.append(f"outcome:  the same ({expected}; {actual}); the state differs")
    else:
        lines += [f"expected: {expected}", f"actual:   {actual}"]
    diff = divergence.snapshot_diff()
    if diff is None and divergence.spec_snapshot is not None:
        lines.append(f"spec snapshot after the call: {divergence.spec_snapshot}")
    elif diff is None:
        pass
    elif diff.empty:
        lines.append("snapshots agree")
    else:
        lines += diff.lines()
    return lines
