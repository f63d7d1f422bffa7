"""`cacheproof replay TRACE [--impl MODULE:FACTORY]` for program traces (spec kinds other than the
tensor cache; docs/block-traces.md).

Without --impl every call runs on a fresh model of the header's kind, size and semantics, and its
outcome must be the recorded one (the one rule of `contract.steps.outcomes_agree`). With --impl the
implementation also runs beside a second model (`contract.steps.differential_step`: the outcome and
every view of the kind after every call), and its first divergence is reported with a runnable
snippet (`contract.snippet.program_snippet`). The first call where either fails is the divergence;
at one call the implementation is checked first. O(calls x views) time. Exit 0 no divergence, 1
divergence, 2 usage error (bad flag, unreadable or malformed trace, factory not importable).
The implementation's calls are not guarded: one that hangs hangs the replay.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.contract.calls import Call, to_json, to_python
from cacheproof.contract.snippet import program_snippet
from cacheproof.contract.steps import differential_step, outcome_of, outcomes_agree
from cacheproof.sandbox.factories import FactoryError, load_factory
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT
from cacheproof.spec.overrides import written_differences
from cacheproof.spec.kinds import get_kind
from cacheproof.contract.record import HEADER_LINES, Trace

RECORDING = "recording"
IMPLEMENTATION = "implementation"


@dataclass(frozen=True)
class ProgramReplayDivergence:
    """The first call that fails: `against` is "recording" when the spec does not give the recorded
    outcome, "implementation" when the implementation differs from the spec (`snippet` then
    reproduces it)."""

    step: int  # 1-based call number
    call: Call
    against: str
    message: str
    snippet: str | None = None
    state_diff: dict | None = None  # with the implementation: the views that differ after the call

    @property
    def line(self) -> int:
        """The line of the trace file that holds the call."""
        return self.step + HEADER_LINES

    def to_json(self) -> dict:
        """As `replay_divergence` of cacheproof/schemas/report-v1.json: a program trace records no
        snapshots, and its message says both outcomes."""
        return {"step": self.step, "line": self.line, "call": to_json(self.call), "against": self.against,
                "expected": None, "actual": None, "message": self.message, "snippet": self.snippet,
                "state_diff": self.state_diff, "spec_snapshot": None, "cache_snapshot": None}


def replay_program(trace: Trace, factory: Callable[[int], Any] | None = None,
                   impl: str = "MODULE:FACTORY") -> ProgramReplayDivergence | None:
    """The first divergence of `trace` (see the module docstring), or None. `impl` names `factory`
    in the snippet."""
    kind = get_kind(trace.kind)
    spec = kind.new(trace.size, trace.semantics)
    beside = None if factory is None else (kind.new(trace.size, trace.semantics), factory(trace.size))
    spec_errors: list[str | None] = []
    for step, traced in enumerate(trace.calls, start=1):
        if beside is not None:
            difference = differential_step(*beside, traced.call, kind.views, error_names=kind.error_names)
            if difference is not None:
                calls = [earlier.call for earlier in trace.calls[:step]]
                snippet = program_snippet(impl, trace.size, calls, spec_errors, difference, kind.name)
                return ProgramReplayDivergence(step, traced.call, IMPLEMENTATION, difference.describe(), snippet,
                                               difference.view_diff())
        outcome = outcome_of(spec, traced.call, kind.error_names)
        if not outcomes_agree(traced.call.op, traced.outcome(), outcome):
            message = f"{to_python(traced.call)}: recorded {traced.outcome().describe()}; the spec {outcome.describe()}"
            return ProgramReplayDivergence(step, traced.call, RECORDING, message)
        spec_errors.append(outcome.error)
    return None


def run(args: argparse.Namespace, trace: Trace) -> int:
    """`cacheproof replay` of a program trace (the arguments of `cacheproof.trace.replay`)."""
    unsupported = [flag for flag, given in (
        ("--profile", args.profile is not None), ("--semantics", bool(args.semantics)),
        ("--ops", args.ops is not None), ("--call-timeout", args.call_timeout != DEFAULT_CALL_TIMEOUT),
    ) if given]
    if unsupported:
        print(f"cacheproof replay: {', '.join(unsupported)} not yet for program traces "
              "(the header says the kind, profile and semantics)", file=sys.stderr)
        return 2
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof replay: {problem}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        factory = None if args.impl is None else load_factory(args.impl)
    except FactoryError as error:
        print(f"cacheproof replay: {error}", file=sys.stderr)
        return 2
    divergence = replay_program(trace, factory, args.impl or "MODULE:FACTORY")
    against = "the spec" if args.impl is None else f"{args.impl} beside the spec"
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        write_report(args.json, "replay", {
            "trace": str(args.trace), "spec": trace.kind, "impl": args.impl, "profile": trace.profile,
            "semantics": written_differences(trace.semantics),
            "calls": len(trace.calls), "seconds": round(time.perf_counter() - started, 3), "ok": divergence is None,
            "divergence": None if divergence is None else divergence.to_json(),
        })
    if not args.quiet:
        summary_table("cacheproof replay", {
            "trace": str(args.trace), "spec": trace.kind, "against": against, "profile": trace.profile,
            "calls": len(trace.calls),
            "result": "no divergence" if divergence is None else f"DIVERGES at step {divergence.step}",
        })
    if divergence is None:
        print(f"no divergence: {len(trace.calls)} calls replayed against {against}")
        return 0
    print(f"divergence at step {divergence.step} of {len(trace.calls)} (trace line {divergence.line}): "
          f"{to_python(divergence.call)}")
    if not args.quiet:
        print(f"  difference ({divergence.against}): {divergence.message}")
        if divergence.snippet is not None:
            print(divergence.snippet)
    return 1
