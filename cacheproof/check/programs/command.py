"""`cacheproof check --spec KIND` for the kinds other than the tensor cache: their implementation
(`--impl MODULE:FACTORY`, default the kind's built-in), profile, budget, seed, distinct divergences,
JSON report, runnable snippets and the first counterexample as a program trace (`--trace-out`,
docs/block-traces.md). Exit 0 conforms, 1 counterexample, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import time

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.check.programs.run import ProgramReport, run_program_check
from cacheproof.check.report import check_body, examples_row, program_concurrent_divergence, program_divergence
from cacheproof.cmdline.budget import more_divergences_line
from cacheproof.cmdline.databases import DatabaseError, chosen_database, database_row, namespaced
from cacheproof.cmdline.output_paths import OutputPathError, first_problem, write_atomically
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.contract.faults import UsageAbort
from cacheproof.contract.snippet import program_snippet, render
from cacheproof.contract.steps import outcome_of
from cacheproof.sandbox.factories import DEFAULT_IMPL, FactoryError, load_factory
from cacheproof.sandbox.guarded_call import Watch, supervised
from cacheproof.sandbox.guarded_program import WatchedFactory
from cacheproof.sandbox.program_isolation import ChildFailure, IsolatedProgramFactory
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind

DEFAULT_IMPLS = {"blocks": "cacheproof.impl.kv_cache_manager:kv_cache_manager"}
"""The built-in implementation each kind is checked against when no --impl is given."""

_CACHE_ONLY = ("thorough", "max_capacity", "workers")
"""Flags of `cacheproof check` that only the tensor cache's checker has so far."""


def run(args: argparse.Namespace) -> int:
    kind = get_kind(args.spec)
    given = [f"--{name.replace('_', '-')}" for name in _CACHE_ONLY if getattr(args, name, None) not in (None, False)]
    if given:
        print(f"cacheproof check: {', '.join(given)} not yet for --spec {kind.name}", file=sys.stderr)
        return 2
    problem = first_problem({"--json": args.json, "--trace-out": args.trace_out})
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    impl = DEFAULT_IMPLS[kind.name] if args.impl == DEFAULT_IMPL else args.impl
    try:
        profile = _profile(kind, args.profile)
        semantics = profile.semantics.with_overrides(args.semantics) if args.semantics else profile.semantics
        operations = _operations(kind, args.ops, profile.operations)
        factory = IsolatedProgramFactory(impl, kind.names + kind.views, Watch(args.call_timeout)) if args.isolate \
            else load_factory(impl)
    except (InvalidArgumentError, FactoryError) as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.isolate and args.threads is not None:
        print("cacheproof check: --isolate runs sequential checks; it cannot be used with --threads", file=sys.stderr)
        return 2
    watch = Watch(args.call_timeout)
    probed = factory if args.isolate else WatchedFactory(factory, watch)
    try:
        missing = supervised(lambda: missing_operations(kind, probed, operations), watch)
    except ChildFailure as failure:
        print(f"cacheproof check: {impl}: {failure}", file=sys.stderr)
        return 2
    except UsageAbort as abort:  # the factory hung
        print(f"cacheproof check: {impl}: {abort.message}", file=sys.stderr)
        return 2
    if missing:
        print(f"cacheproof check: {impl} lacks {', '.join(missing)} of the {kind.name} contract; "
              f"check fewer operations with --ops or a profile that names them (--profile)", file=sys.stderr)
        return 2
    if args.threads is not None:
        return _run_threads(args, kind, factory, impl, semantics, operations, profile.name)
    try:
        args.database_choice, database = chosen_database(args)
    except DatabaseError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.isolate:
        factory.close()  # the probe's child; the run starts its own
    done = _Done()
    try:
        with Progress("check", total=None if args.budget is not None else args.examples, quiet=args.quiet) as progress:
            report = run_program_check(
                kind, None if args.isolate else factory, generator_for(kind.name), examples=args.examples,
                steps=args.steps, seed=args.seed, budget_seconds=args.budget,
                database=None if database is None else namespaced(database, impl),
                semantics=semantics, operations=operations,
                misuse=misuse_checked(semantics) and not args.no_bad_arguments,
                max_divergences=args.max_divergences, on_example=done.counting(progress.update),
                call_timeout=args.call_timeout, isolate=args.isolate, impl=impl,
            )
    except UsageAbort as abort:  # the factory hung or ended its process: no call sequence shows it
        print(f"cacheproof check: {abort.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return done.interrupted(args, kind, impl, profile.name, semantics, operations)
    snippets = [snippet_of(kind, impl, example, semantics) for example in report.counterexamples]
    try:
        if args.json is not None:
            write_report(args.json, "check", check_body(
                args, spec=kind.name, impl=impl, profile=profile.name, semantics=semantics, operations=operations,
                budget_examples=args.examples, examples=report.examples, steps=report.steps, seconds=report.seconds,
                first_failure_example=report.first_failure_example, first_failure_seconds=report.seconds_to_failure,
                ok=report.ok, divergences=[program_divergence(example, snippet)
                                           for example, snippet in zip(report.counterexamples, snippets)],
                database=None if args.database_choice is None else args.database_choice.describe(),
                budget_seconds=args.budget, coverage=report.coverage.to_json(),
            ), ran_hypothesis=True)
        if args.trace_out is not None and report.counterexample is not None:
            example = report.counterexample
            trace = spec_trace(example.size, example.calls, semantics, kind=kind.name, profile=profile.name)
            write_atomically(args.trace_out, trace_text(trace))
    except OutputPathError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    _print(args, report, impl, profile.name, snippets)
    return 0 if report.ok else 1


PROBE_SIZE = 4
"""The size of the implementation built to see which operations it has before any example runs."""


def missing_operations(kind: SpecKind, factory, operations: tuple[str, ...]) -> list[str]:
    """The operations among `operations` that `factory(PROBE_SIZE)` has no method for."""
    probe = factory(PROBE_SIZE)
    return [name for name in operations
            if kind.operation(name).form == "method" and not callable(getattr(probe, name, None))]


def misuse_checked(semantics) -> bool:
    """Whether the semantics hold the implementation to rejecting misuse (a kind whose semantics
    have no `misuse` field always do); under "trusted" the checker makes no misuse call."""
    return getattr(semantics, "misuse", "checked") == "checked"


def _profile(kind: SpecKind, name: str):
    if name not in kind.profiles:
        raise InvalidArgumentError(f"--profile {name!r}: spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}")
    return kind.profiles[name]


def _operations(kind: SpecKind, ops: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if ops is None:
        return default
    chosen = tuple(name.strip() for name in ops.split(",") if name.strip())
    unknown = [name for name in chosen if name not in kind.names]
    if unknown or not chosen:
        raise InvalidArgumentError(f"--ops {ops!r}: spec kind {kind.name!r} has the operations {', '.join(kind.names)}")
    return chosen


def snippet_of(kind: SpecKind, impl: str, example: ProgramCounterexample, semantics) -> str:
    """The example as runnable Python (the spec's outcome of each earlier call decides its `raises`).
    A hang or a crash ends with the call that hangs or kills the process, as the tensor cache's
    snippet does (`contract.snippet.render`): running it hangs or dies there."""
    model = kind.new(example.size, semantics)
    errors = [outcome_of(model, call, kind.error_names).error for call in example.calls]
    if example.fault is not None:
        return render(impl, example.size, example.calls, example.message, errors, example.ending,
                      title=f"cacheproof counterexample ({kind.name})")
    return program_snippet(impl, example.size, example.calls, errors[:-1], example.difference, kind.name)


def _print(args: argparse.Namespace, report: ProgramReport, impl: str, profile: str, snippets: list[str]) -> None:
    if not args.quiet:
        summary_table("cacheproof check", {
            "spec": report.kind, "impl": impl, "profile": profile,
            "examples": examples_row(report.examples, args.examples, report.first_failure_example, args.budget), "steps": report.steps,
            "seconds": f"{report.seconds:.2f}", "outcomes reached": report.coverage.summary(),
            "divergences": len(report.counterexamples),
            "database": database_row(args.database_choice), "result": "conforms" if report.ok else "COUNTEREXAMPLE",
        })
    if report.ok:
        print(f"conforms: {report.examples} examples, {report.steps} steps")
        return
    for number, example in enumerate(report.counterexamples, 1):
        print(f"counterexample {number} of {len(report.counterexamples)} ({len(example.calls)} calls): "
              f"{example.message}")
    if not args.quiet:
        for snippet in snippets:
            print(snippet)
    more = more_divergences_line(args, len(report.counterexamples))
    if more is not None:
        print(more, file=sys.stderr)


def _run_threads(args: argparse.Namespace, kind: SpecKind, factory, impl: str, semantics, operations, profile: str) -> int:
    """`--threads N`: linearizability of N threads' calls (cacheproof.check.concurrent.programs)."""
    from cacheproof.check.concurrent.programs import run_program_concurrent_check

    done = _Done()
    try:
        with Progress("check", total=args.examples, quiet=args.quiet) as progress:
            report = run_program_concurrent_check(
                kind, factory, generator_for(kind.name), threads=args.threads, scenarios=args.examples, runs=args.runs,
                seed=args.seed, semantics=semantics, operations=operations,
                misuse=misuse_checked(semantics) and not args.no_bad_arguments,
                on_scenario=done.counting(progress.update),
            )
    except KeyboardInterrupt:
        return done.interrupted(args, kind, impl, profile, semantics, operations)
    if args.json is not None:
        write_report(args.json, "check", check_body(
            args, spec=kind.name, impl=impl, profile=profile, semantics=semantics, operations=operations,
            budget_examples=args.examples, examples=report.scenarios, steps=report.runs, seconds=report.seconds,
            first_failure_example=None if report.ok else report.scenarios,
            first_failure_seconds=report.seconds_to_failure, ok=report.ok,
            divergences=[] if report.ok else [program_concurrent_divergence(report)], unknown_histories=report.unknown,
        ), ran_hypothesis=True)
    if report.ok:
        print(f"linearizable: {report.scenarios} scenarios of {report.threads} threads, {report.runs} runs"
              + (f", {report.unknown} histories unknown (search budget)" if report.unknown else ""))
        return 0
    print(f"NOT LINEARIZABLE: {report.reason}")
    if not args.quiet:
        print(report.counterexample.describe())
        print("\n".join(report.history))
    return 1


class _Done:
    """The examples (or scenarios) and steps (or runs) a check has done, for its report when Ctrl-C ends it."""

    def __init__(self) -> None:
        self.examples, self.steps, self.started = 0, 0, time.perf_counter()

    def counting(self, update):
        """A progress callback that notes the counts and passes them on to `update`."""
        def counted(examples: int, steps: int) -> None:
            self.examples, self.steps = examples, steps
            update(examples, steps)
        return counted

    def interrupted(self, args: argparse.Namespace, kind: SpecKind, impl: str, profile: str, semantics, operations) -> int:
        """Say so, write the partial report (no verdict) where --json asks, and return exit 130."""
        seconds = time.perf_counter() - self.started
        print(f"interrupted: {self.examples} examples, {self.steps} steps in {seconds:.2f} s; no verdict")
        if args.json is not None:
            write_report(args.json, "check", check_body(
                args, spec=kind.name, impl=impl, profile=profile, semantics=semantics, operations=operations,
                budget_examples=args.examples, examples=self.examples, steps=self.steps, seconds=seconds,
                first_failure_example=None, first_failure_seconds=None, ok=None, divergences=[],
            ), ran_hypothesis=True)
        return INTERRUPTED_STATUS
