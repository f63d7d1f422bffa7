"""The body of `cacheproof check`'s JSON report, for every spec kind, sequential or under --threads.

One shape (`check` in cacheproof/schemas/report-v1.json, docs/reports.md): what was asked (spec
kind, implementation, profile, semantics, operations, seed, key domain, threads, budget), what ran
(examples counted against the budget, steps, seconds, the first failing example and its time) and
each distinct divergence, shrunk, as one `divergence` each: its calls, message, the invariants the
implementation's own state breaks (`broken_invariants`: name and witness), every difference, the
why, the state diff and the runnable snippet. `cacheproof.cmdline.reports.write_report` adds
the envelope.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from cacheproof.check.concurrent.run import ConcurrentCounterexample
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.contract.calls import Call, to_json
from cacheproof.contract.explaining.broken import named as named_broken, split as split_broken
from cacheproof.contract.explaining.steps import Explanation
from cacheproof.contract.steps import StepDifference
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.overrides import written_differences

DEFAULT_KEY_DOMAIN = "int"
"""The key domain a check draws from when no --keys names another."""

NOT_LINEARIZABLE = "not linearizable"


def check_body(
    args: argparse.Namespace, *, spec: str, impl: str, profile: str, semantics: Any, operations: Sequence[str],
    budget_examples: int, budget_steps: int | None = None, examples: int, steps: int, seconds: float, first_failure_example: int | None,
    first_failure_seconds: float | None, ok: bool | None, divergences: Sequence[dict], interrupted: bool = False,
    **more: Any,
) -> dict[str, Any]:
    """The report body of one check: what `args` asked, what ran, the divergences (`*_divergence`).
    `ok` None is a run interrupted before any divergence (no verdict); an interrupted run that found
    one has `ok` False. `more` adds fields of the mode (scope, unknown_histories, ...)."""
    return {
        "spec": spec,
        "impl": impl,
        "profile": profile,
        "semantics": written_differences(semantics),
        "operations": list(operations),
        "seed": args.seed,
        "keys": getattr(args, "keys", None) or DEFAULT_KEY_DOMAIN,
        "threads": args.threads,
        **({} if args.threads is None else {"runs_per_scenario": args.runs}),
        "budget": {"examples": budget_examples, "steps": budget_steps or args.steps},
        "examples": examples,
        "steps": steps,
        "seconds": round(seconds, 3),
        "first_failure_example": first_failure_example,
        "first_failure_seconds": None if first_failure_seconds is None else round(first_failure_seconds, 3),
        "ok": ok,
        "interrupted": interrupted or ok is None,
        **more,
        "divergences": list(divergences),
    }


def examples_row(examples: int, budget: int, first_failure: int | None, seconds: float | None = None) -> str:
    """The examples run against the budget, and which failed first: "200 of 200", "133 of 200; the
    12th failed first"; under a time budget of `seconds`, "5210 in a 30 s budget"."""
    row = f"{examples} of {budget}" if seconds is None else f"{examples} in a {seconds:g} s budget"
    return row if first_failure is None else f"{row}; the {ordinal(first_failure)} failed first"


def conforms_line(examples: int, steps: int, seconds: float) -> str:
    """The verdict of a check that found nothing, for every spec kind: "conforms: 200 examples,
    20000 steps, 5400 steps/s"."""
    rate = steps / seconds if seconds > 0 else 0.0
    return f"conforms: {examples} examples, {steps} steps, {rate:.0f} steps/s"


def counterexample_line(number: int, count: int, calls: int, message: str) -> str:
    """The line of the `number`th of `count` counterexamples, for every spec kind: the first is
    "counterexample (3 calls): MESSAGE", a further one "counterexample 2 of 3 (5 calls): MESSAGE"."""
    which = "" if number == 1 else f" {number} of {count}"
    return f"counterexample{which} ({calls} calls): {message}"


def interrupted_line(shrinking_interrupted: bool, found: int, last_calls: int) -> str:
    """What a Ctrl-C after a failure stopped, for every kind: the shrinking of the last counterexample
    (`last_calls` long: a real failing sequence, not the smallest), or the search for further
    divergences after `found`."""
    if shrinking_interrupted:
        return (f"shrinking interrupted by Ctrl-C: the last counterexample ({last_calls} "
                "calls) is the smallest failing sequence found so far; its snippet fails when run")
    return f"search for further divergences interrupted by Ctrl-C after {found} found"


def first_ready_line(calls: int, seconds: float, message: str) -> str:
    """The line that says the first counterexample is shrunk while further divergences are searched
    for (to stderr; the whole report follows at the end), for every kind."""
    return (f"counterexample ({calls} calls) ready at {seconds:.2f} s: {message}; "
            "searching for further divergences (Ctrl-C reports what is found)")


def timing_rows(first_failure_seconds: float | None, first_report_seconds: float | None) -> dict[str, str]:
    """The summary table's rows of the first failing example's time and the first shrunk
    counterexample's, from the start (none when nothing failed)."""
    if first_failure_seconds is None:
        return {}
    rows = {"first failure": f"{first_failure_seconds:.2f} s"}
    if first_report_seconds is not None:
        rows["first report"] = f"{first_report_seconds:.2f} s (shrunk)"
    return rows


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ..."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def program_divergence(example: ProgramCounterexample, snippet: str, explanation: Explanation | None = None) -> dict[str, Any]:
    """Another kind's counterexample (`check --spec KIND`), with its snippet; the differences and
    the state diff (the views that differ after the call; none: only the outcome does) hold the
    values whole, `why` the `explanation` in words (each difference with what it concerns, then
    why). A hang or a crash has no kind, no differences and no state diff (as the tensor cache's)."""
    if example.fault is not None:
        return divergence_fields(None, example.message, example.size, example.calls, example.ending, [], [], None, snippet)
    difference = example.difference
    return divergence_fields(
        program_kind(difference), example.message, example.size, example.calls, "diverges here",
        program_differences(difference), [] if explanation is None else list(explanation.lines()),
        difference.view_diff(), snippet,
    )


def concurrent_divergence(example: ConcurrentCounterexample, kind: SpecKind, impl: str) -> dict[str, Any]:
    """A concurrent counterexample of any kind (`check --threads`), with its script."""
    scenario = example.scenario
    return divergence_fields(
        NOT_LINEARIZABLE, example.reason, scenario.size, _scenario_calls(scenario.prefix, scenario.threads),
        "is not linearizable", [example.reason], [], None, example.to_python(kind, impl),
        scenario=scenario.to_json(), history=example.history.lines(), recorded_history=example.history.to_json(),
    )


def program_kind(difference: StepDifference) -> str:
    """What makes a divergence of another kind another bug: the operation, both outcomes' categories,
    the views that differ."""
    def category(outcome: Any) -> str:
        if outcome.crash is not None:
            return "crashes"
        return f"raises {outcome.error}" if outcome.error is not None else "returns"

    observed = category(difference.actual) if difference.outcome_differs else "the same outcome"
    views = [view for view, _, _ in difference.views]
    state = f", and another {', '.join(views)}" if views else ""
    return f"{difference.call.op}: spec {category(difference.expected)}; this implementation {observed}{state}"


def divergence_lines(kind: str, differences: Sequence[str], why: Sequence[str], listed: bool) -> list[str]:
    """What a check prints under a counterexample's line, for every spec kind: the invariants the
    implementation's own state breaks (`contract.explaining.broken`, wherever `why` names them),
    its kind, every difference at the diverging call when `listed` (the line does not say them
    all), then the rest of why, indented under it."""
    broken, why = split_broken(why)
    lines = [f"  {line}" for line in broken] + [f"  kind: {kind}"]
    if listed and differences:
        lines.append("  every difference at that call:")
        lines += [f"    {text}" for text in differences]
    return lines + [f"  {line}" for line in why]


def program_differences(difference: StepDifference) -> list[str]:
    """Every difference at the call, one line each: the outcomes, then each view."""
    lines = []
    if difference.outcome_differs:
        lines.append(f"outcome: the spec {difference.expected.describe()}, the implementation {difference.actual.describe()}")
    lines += [f"{view}(): the spec's {expected!r}, the implementation's {actual!r}"
              for view, expected, actual in difference.views]
    return lines


def divergence_fields(
    kind: str | None, message: str, size: int, calls: Sequence[Call], ending: str, differences: list[str],
    why: list[str], state_diff: dict | None, snippet: str | None, **more: Any,
) -> dict[str, Any]:
    """One `divergence` of the report (report-v1.json): its fields as given, the calls as JSON, and
    the invariants the implementation's own state breaks read out of `why` (`broken_invariants`)."""
    return {
        "kind": kind, "message": message, "size": size, "calls": [to_json(call) for call in calls],
        "ending": ending, "broken_invariants": named_broken(why), "differences": differences, "why": why,
        "state_diff": state_diff, "snippet": snippet, **more,
    }


def _scenario_calls(prefix: Sequence[Call], threads: Sequence[Sequence[Call]]) -> list[Call]:
    return [*prefix, *(call for calls in threads for call in calls)]
