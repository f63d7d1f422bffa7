"""`cacheproof check --exhaustive [--depth D] [--scope NAME]`, for every spec kind: the breadth-first
search of `cacheproof.check.programs.exhaustive` over the kind's declared exhaustive scope, with the
implementation, profile (without --profile: the factory's own `profile`, else the one the object it
builds carries, else the kind's default),
semantics, operations, budget, workers, JSON report and trace of any check.

It ends with "exhaustive: no divergence in S states, C calls, depth D" (complete), the same cut by
the budget at the depth reached, or the shortest counterexample, printed, explained and written as
a check's counterexample is (its snippet runs and fails; its trace replays). The time budget is
--budget's alone (none without it: a declared scope is finite, and sized to end in minutes); flags
that belong to the random search (--examples, --steps, --thorough, --threads, --isolate, the example
database, --keys, --max-divergences) are refused, one line naming why. Exit 0 no divergence (complete
or cut), 1 a counterexample, 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys

from cacheproof.adapt import AdapterError, factory_profile
from cacheproof.check.programs.command import (
    DEFAULT_IMPLS, built_profile, chosen_operations, chosen_profile, lacks_line, explained_lines, explanations_of,
    misuse_checked, snippet_of,
)
from cacheproof.check.programs.exhaustive import SNAPSHOT_CAVEAT, ExhaustiveReport, ExhaustiveSetup, run_exhaustive
from cacheproof.check.programs.generators import exhaustive_scopes, generator_for
from cacheproof.check.report import check_body, program_divergence
from cacheproof.cmdline.output_paths import OutputPathError, first_problem, write_atomically
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.contract.explaining.shapes import shape_problem
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.sandbox.factories import DEFAULT_IMPL, FactoryError, load_factory
from cacheproof.sandbox.guarded_call import Watch
from cacheproof.sandbox.guarded_program import WatchedFactory, missing_operations
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import get_kind

_RANDOM_SEARCH_ONLY = {
    "examples": "the search tries every state of the scope, not a number of programs",
    "thorough": "--scope picks the exhaustive scope",
    "threads": "the search is sequential (linearizability is --threads' own check)",
    "isolate": "states are rebuilt by replay in this process",
    "database": "the search has no random examples to keep",
    "database_read_only": "the search has no random examples to keep",
    "keys": "the scope declares its keys",
    "max_capacity": "the scope declares its capacities",
}
"""The flags `--exhaustive` refuses, and why."""


def refusal(args: argparse.Namespace, default_steps: int) -> str | None:
    """The one line refusing a flag `--exhaustive` cannot have (or --depth/--scope without it), `default_steps`
    being --steps' default; None when all suit."""
    if not args.exhaustive:
        for flag in ("depth", "scope"):
            if getattr(args, flag) is not None:
                return f"--{flag} is for --exhaustive searches; add --exhaustive or drop --{flag}"
        return None
    for name, why in _RANDOM_SEARCH_ONLY.items():
        if getattr(args, name, None) not in (None, False):
            return f"--{name.replace('_', '-')} is not for --exhaustive: {why}"
    if args.steps != default_steps:
        return "--steps is not for --exhaustive: --depth sets the calls per path"
    if args.max_divergences not in (None, 1):
        return "--max-divergences is not for --exhaustive: it reports the one shortest counterexample"
    return None


def run(args: argparse.Namespace) -> int:
    kind = get_kind(args.spec)
    scopes = exhaustive_scopes(kind.name)
    if not scopes:
        print(f"cacheproof check: --exhaustive is not for --spec {kind.name}: its call generator declares no "
              "exhaustive scope (EXHAUSTIVE in its module) to enumerate", file=sys.stderr)
        return 2
    name = args.scope or next(iter(scopes))
    if name not in scopes:
        print(f"cacheproof check: --scope {name!r}: spec kind {kind.name!r} has the exhaustive scopes "
              f"{', '.join(scopes)} (docs/exhaustive.md)", file=sys.stderr)
        return 2
    scope = scopes[name]
    problem = first_problem({"--json": args.json, "--trace-out": args.trace_out})
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    impl = DEFAULT_IMPLS.get(kind.name, DEFAULT_IMPL) if args.impl == DEFAULT_IMPL else args.impl
    try:
        factory = load_factory(impl)
        profile = chosen_profile(kind, args.profile or factory_profile(factory) or built_profile(kind, factory)
                                 or kind.default_profile)
        semantics = profile.semantics.with_overrides(args.semantics) if args.semantics else profile.semantics
        operations = chosen_operations(kind, args.ops, profile.operations)
    except (ImportError, AdapterError) as error:  # the factory's own profile could not be read
        print(f"cacheproof check: {impl}: {error}", file=sys.stderr)
        return 2
    except (InvalidArgumentError, FactoryError) as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    built, missing = missing_operations(kind, WatchedFactory(factory, Watch(None)), operations)
    if missing:
        print(lacks_line(kind, impl, built, missing, operations), file=sys.stderr)
        return 2
    setup = ExhaustiveSetup(kind, factory, generator_for(kind.name), scope, operations,
                            misuse_checked(semantics) and not args.no_bad_arguments, args.depth or scope.depth, semantics)
    budget = args.budget or None  # --budget 0: none
    with Progress("check --exhaustive", total=None, quiet=args.quiet, unit="states") as progress:
        report = run_exhaustive(setup, budget, args.workers or 1, impl, on_level=progress.update)
    examples = [] if report.counterexample is None else [report.counterexample]
    problem = shape_problem(kind, impl, [example.difference for example in examples])
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    explanations = explanations_of(kind, semantics, examples)
    snippets = [snippet_of(kind, impl, example, semantics) for example in examples]
    try:
        if args.json is not None:
            write_report(args.json, "check", check_body(
                args, spec=kind.name, impl=impl, profile=profile.name, semantics=semantics, operations=operations,
                budget_examples=report.states, budget_steps=report.depth, examples=report.states, steps=report.calls,
                seconds=report.seconds, first_failure_example=None if report.ok else report.states,
                first_failure_seconds=None if report.ok else report.seconds, ok=report.ok,
                divergences=[program_divergence(example, snippet, explanation)
                             for example, snippet, explanation in zip(examples, snippets, explanations)],
                budget_seconds=budget, exhaustive=report.to_json(),
            ), ran_hypothesis=False)
        if args.trace_out is not None and examples:
            trace = spec_trace(examples[0].size, examples[0].calls, semantics, kind=kind.name, profile=profile.name)
            write_atomically(args.trace_out, trace_text(trace))
    except OutputPathError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    _print(args, report, kind.size_name, impl, profile.name, snippets, explanations)
    return 0 if report.ok else 1


def _print(args: argparse.Namespace, report: ExhaustiveReport, size_name: str, impl: str, profile: str,
           snippets: list[str], explanations: list) -> None:
    if not args.quiet:
        summary_table("cacheproof check --exhaustive", {
            "spec": report.kind, "impl": impl, "profile": profile,
            "scope": f"{report.scope}: {size_name} {', '.join(map(str, report.sizes))}",
            "depth": report.depth if report.complete else f"{report.frontier_depth} of {report.depth} (cut by the budget)",
            "states": report.states, "calls": report.calls,
            "states per depth": ", ".join(map(str, report.levels)),
            "merged on": report.to_json()["merge"],
            "workers": report.workers, "seconds": f"{report.seconds:.2f}",
            "result": "no divergence" if report.ok else "COUNTEREXAMPLE",
        })
    if report.unread_views:
        print(f"caveat: {SNAPSHOT_CAVEAT.format(missing=', '.join(f'{view}()' for view in report.unread_views))}")
    print(report.verdict)
    example = report.counterexample
    if example is None:
        return
    print(f"counterexample 1 of 1 ({len(example.calls)} calls, {size_name} {example.size}): {example.message}")
    if not args.quiet:
        if explanations[0] is not None:
            for line in explained_lines(example.difference, explanations[0]):
                print(line)
        print(snippets[0])
