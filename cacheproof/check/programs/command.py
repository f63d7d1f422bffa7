"""`cacheproof check --spec KIND` for the kinds other than the tensor cache: their implementation
(`--impl MODULE:FACTORY`, default the kind's built-in), profile, budget, seed, distinct divergences,
JSON report, runnable snippets and the first counterexample as a program trace (`--trace-out`,
docs/block-traces.md). Exit 0 conforms, 1 counterexample, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from typing import Any

from cacheproof.adapt import AdapterError, factory_profile
from cacheproof.check.concurrent import command as concurrent_command
from cacheproof.check.phases import Phase, shares
from cacheproof.check.programs.generators import default_scope, thorough_phases
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.check.programs.run import ProgramOptions, ProgramReport, run_program_phases
from cacheproof.check.programs.workers import run_program_workers
from cacheproof.check.report import check_body, conforms_line, counterexample_line, divergence_lines, examples_row
from cacheproof.check.report import first_ready_line, interrupted_line, timing_rows
from cacheproof.check.report import program_divergence, program_kind
from cacheproof.cmdline.budget import more_divergences_line
from cacheproof.cmdline.databases import DatabaseError, chosen_database, database_row, namespaced
from cacheproof.cmdline.output_paths import OutputPathError, first_problem, write_atomically
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.interrupts import last_words
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.contract.explaining.broken import ordered as ordered_breaking_first
from cacheproof.contract.explaining.shapes import inspection_problem, shape_problem
from cacheproof.contract.explaining.steps import Explanation, diverging_call, explain_all
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.contract.faults import UsageAbort
from cacheproof.contract.snippet import failed_inspection, program_snippet, render
from cacheproof.contract.steps import outcome_of
from cacheproof.contract.values import REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import DEFAULT_IMPL, FactoryError, TimedFactory, capacity_cap_of, load_factory
from cacheproof.sandbox.guarded_call import Watch, supervised
from cacheproof.sandbox.guarded_program import WatchedFactory, missing_operations
from cacheproof.sandbox.program_isolation import ChildFailure, IsolatedProgramFactory
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind

SNIPPET_TITLE = "# cacheproof counterexample"
"""How each snippet begins; numbered "1 of 3" when a run prints several."""

DEFAULT_IMPLS = {
    "cache": DEFAULT_IMPL,
    "blocks": "cacheproof.impl.kv_cache_manager:kv_cache_manager",
    "radix": "cacheproof.impl.radix_cache:radix_cache",
}
"""The built-in implementation each kind is checked against when no --impl is given (a kind without
one, the encoder slot budget, needs --impl: `default_impl_refusal`)."""


def default_impl_refusal(args: argparse.Namespace) -> str | None:
    """The one line refusing a check with no --impl of a kind that has no built-in implementation."""
    if args.impl == DEFAULT_IMPL and args.spec not in DEFAULT_IMPLS:
        return (f"--spec {args.spec} has no built-in implementation to check by default: name yours with "
                "--impl MODULE:FACTORY")
    return None


def refusal(kind: SpecKind, args: argparse.Namespace) -> str | None:
    """The one line refusing a flag `kind` cannot have, naming why; None when every flag given suits it.
    `--max-capacity` is for a kind whose wide scopes can be `capped` (`cache_calls.CacheScope`)."""
    if getattr(args, "max_capacity", None) is not None and not any(
            hasattr(phase.scope, "capped") for phase in thorough_phases(kind.name) or ()):
        return (f"--max-capacity is not for --spec {kind.name}: it caps the byte capacity of a tensor cache whose "
                f"values hold memory, and a {kind.name} implementation stores no values of the checker's")
    if args.thorough and thorough_phases(kind.name) is None:
        return (f"--thorough is not for --spec {kind.name}: its call generator declares no wide scope "
                "(THOROUGH in its module) to search beyond the default one")
    return None



def run(args: argparse.Namespace) -> int:
    kind = get_kind(args.spec)
    refused = refusal(kind, args)
    if refused is not None:
        print(f"cacheproof check: {refused}", file=sys.stderr)
        return 2
    problem = first_problem({"--json": args.json, "--trace-out": args.trace_out})
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    impl = DEFAULT_IMPLS[kind.name] if args.impl == DEFAULT_IMPL else args.impl
    watch = Watch(args.call_timeout)
    try:
        factory = IsolatedProgramFactory(impl, kind.names + kind.compared_views, watch) if args.isolate else load_factory(impl)
    except (InvalidArgumentError, FactoryError) as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.threads is not None and concurrent_command.refusal(args) is not None:
        print(f"cacheproof check: {concurrent_command.refusal(args)}", file=sys.stderr)
        return 2
    probed = factory if args.isolate else WatchedFactory(factory, watch, impl)
    try:
        carried = None if args.isolate else factory_profile(factory)  # an adapter's imports its engine here, untimed
        if args.profile is None:
            if carried is None and not args.isolate:
                carried = supervised(lambda: built_profile(kind, probed), watch)
            args.profile = carried or kind.default_profile
        profile = chosen_profile(kind, args.profile)
        semantics = profile.semantics.with_overrides(args.semantics) if args.semantics else profile.semantics
        operations = chosen_operations(kind, args.ops, profile.operations)
    except (InvalidArgumentError, ImportError, AdapterError) as error:
        print(f"cacheproof check: {impl}: {error}" if not isinstance(error, InvalidArgumentError)
              else f"cacheproof check: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:  # the factory hung or raised
        print(abort_line(impl, abort), file=sys.stderr)
        return 2
    try:
        built, missing = supervised(lambda: missing_operations(kind, probed, operations), watch)
    except ChildFailure as failure:
        print(child_failure_line(impl, failure), file=sys.stderr)
        return 2
    except AdapterError as error:  # an engine adapter refusing the class it was given, when first built
        print(f"cacheproof check: {impl}: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:  # the factory hung or raised
        print(abort_line(impl, abort), file=sys.stderr)
        return 2
    if missing:
        print(lacks_line(kind, impl, built, missing, operations), file=sys.stderr)
        return 2
    if args.threads is not None:
        timed = TimedFactory(factory, impl, args.call_timeout)
        timed.calls = watch.factory_calls  # the probes' builds count: "on its call number 5"
        return concurrent_command.run(args, kind, timed, impl, semantics, operations, profile.name,
                                      misuse_checked(semantics) and not args.no_bad_arguments)
    try:
        args.database_choice, database = chosen_database(args)
    except DatabaseError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    args.keys = args.keys or profile.keys
    phases = thorough_phases(kind.name) if args.thorough else (Phase(default_scope(kind.name), args.examples, args.steps),)
    try:
        cap = capacity_cap(kind, probed, phases, args.max_capacity, watch)
    except ChildFailure as failure:
        print(child_failure_line(impl, failure), file=sys.stderr)
        return 2
    phases = tuple(replace(phase, scope=scoped(phase.scope, args.keys, cap)) for phase in phases)
    workers = args.workers or 1
    try:
        shares(phases, workers)
    except ValueError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.isolate:
        factory.close()  # the probe's child; the run starts its own
    args.examples = sum(phase.examples for phase in phases)
    done = _Done()
    try:
        with last_words(lambda: done.interrupted(args, kind, impl, profile.name, semantics, operations)), \
                Progress("check", total=None if args.budget is not None else args.examples, quiet=args.quiet) as progress:
            progress.update(0, 0)  # the search has started: before the first program, which may be slow
            options = ProgramOptions(
                seed=args.seed, budget_seconds=args.budget, semantics=semantics, operations=operations,
                misuse=misuse_checked(semantics) and not args.no_bad_arguments,
                max_divergences=args.max_divergences, on_example=done.counting(progress.update),
                on_shrink=progress.shrinking,
                call_timeout=args.call_timeout, isolate=args.isolate, impl=impl, factory_calls=watch.factory_calls,
                on_counterexample=lambda example, seconds: _print_first(args, kind, impl, example, seconds),
            )
            if workers > 1:
                report = run_program_workers(kind, phases, options, workers, args.database_choice)
            else:
                report = run_program_phases(kind, None if args.isolate else factory, phases, options,
                                            database=None if database is None else namespaced(database, impl))
    except UsageAbort as abort:  # the factory hung or ended its process: no call sequence shows it
        print(abort.said_by("cacheproof check"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return done.interrupted(args, kind, impl, profile.name, semantics, operations)
    problem = shape_problem(kind, impl, [example.difference for example in report.counterexamples]) or \
        inspection_problem(impl, [example.message for example in report.counterexamples])
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    explanations = explanations_of(kind, semantics, report.counterexamples)
    report.counterexamples[:], explanations = ordered_breaking_first(report.counterexamples, explanations)
    snippets = [snippet_of(kind, impl, example, semantics) for example in report.counterexamples]
    try:
        if args.json is not None:
            write_report(args.json, "check", check_body(
                args, spec=kind.name, impl=impl, profile=profile.name, semantics=semantics, operations=operations,
                budget_examples=args.examples, examples=report.examples, steps=report.steps, seconds=report.seconds,
                first_failure_example=report.first_failure_example, first_failure_seconds=report.seconds_to_failure,
                ok=report.ok, divergences=[program_divergence(example, snippet, explanation) for example, snippet, explanation
                                           in zip(report.counterexamples, snippets, explanations)],
                database=None if args.database_choice is None else args.database_choice.describe(),
                budget_seconds=args.budget, coverage=report.coverage.to_json(), scope=report.scope_json(),
                budget_steps=max(phase.steps for phase in phases),
                first_report_seconds=None if report.first_report_seconds is None else round(report.first_report_seconds, 3),
                interrupted=report.interrupted, shrinking_interrupted=report.shrinking_interrupted,
                **({} if report.workers is None else report.workers.to_json()),
            ), ran_hypothesis=True)
        if args.trace_out is not None and report.counterexample is not None:
            example = report.counterexample
            trace = spec_trace(example.size, example.calls, semantics, kind=kind.name, profile=profile.name)
            write_atomically(args.trace_out, trace_text(trace))
    except OutputPathError as error:  # the disk filled up during the run, say: the verdict is still printed
        _print(args, report, impl, profile.name, snippets, explanations)
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    _print(args, report, impl, profile.name, snippets, explanations)
    return 0 if report.ok else 1


def scoped(scope: Any, keys: str | None, cap: int | None) -> Any:
    """`scope` drawing its keys from the domain `keys` and its sizes capped at `cap` bytes, where the
    kind's scope has them (`with_keys`, `capped`; None: unchanged)."""
    if keys is not None and hasattr(scope, "with_keys"):
        scope = scope.with_keys(keys)
    return scope.capped(cap) if cap is not None and hasattr(scope, "capped") else scope


def capacity_cap(kind: SpecKind, factory, phases: tuple[Phase, ...], asked: int | None, watch: Watch) -> int | None:
    """The byte cap of the sizes the `phases` draw: `asked` (default REAL_VALUE_CAPACITY) when some
    phase's scope can be `capped` and the values the checker makes for the implementation hold memory
    (`contract.values.values_hold_memory`: making them costs time per byte), or when making the probe's
    value hangs (as when it raises, the check's own calls then find and report it), the probe
    supervised by `watch` (`sandbox.factories.capacity_cap_of`); None otherwise."""
    if not any(hasattr(phase.scope, "capped") for phase in phases):
        return None
    return capacity_cap_of(factory, asked or REAL_VALUE_CAPACITY, watch, kind.probe_size)


def built_profile(kind: SpecKind, factory) -> str | None:
    """The profile an object `factory(kind.probe_size)` carries (its `profile` attribute, as an engine
    adapter's object does), so that a user's wrapper or subclass factory keeps its adapter's
    profile; None when it carries none or cannot be built (the probe that follows reports why)."""
    try:
        profile = getattr(factory(kind.probe_size), "profile", None)
    except Exception:  # noqa: BLE001 - missing_operations builds it again and reports the failure
        return None
    return profile if isinstance(profile, str) else None


def misuse_checked(semantics) -> bool:
    """Whether the semantics hold the implementation to rejecting misuse (a kind whose semantics
    have no `misuse` field always do); under "trusted" the checker makes no misuse call."""
    return getattr(semantics, "misuse", "checked") == "checked"


def abort_line(impl: str, abort: UsageAbort) -> str:
    """The usage error of the factory failing before any example ran (with the user's traceback),
    naming `impl` once."""
    said = abort.said_by("cacheproof check")
    return said if abort.message.startswith(impl) else said.replace("cacheproof check: ", f"cacheproof check: {impl}: ", 1)


def child_failure_line(impl: str, failure: ChildFailure) -> str:
    """The usage error of the implementation's child failing before any example ran, naming `impl` once."""
    said = str(failure)
    return f"cacheproof check: {said}" if said.startswith(impl) else f"cacheproof check: {impl}: {said}"


def lacks_line(kind: SpecKind, impl: str, built: str, missing: list[str], operations: tuple[str, ...]) -> str:
    """The usage error of an implementation without some of the checked `operations`; `built` is
    what the factory returned ("a NoEvict", "None")."""
    needed = (f"a {kind.name} implementation needs every operation of its contract (or check a subset with --ops)"
              if set(operations) == set(kind.default_operations) else f"the checked operations are --ops {','.join(operations)}")
    return f"cacheproof check: {impl}({kind.probe_size}) returned {built}, which lacks {', '.join(missing)}: {needed}"


def chosen_profile(kind: SpecKind, name: str):
    """The profile of `kind` named `name` (InvalidArgumentError naming its profiles otherwise)."""
    if name not in kind.profiles:
        raise InvalidArgumentError(f"--profile {name!r}: spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}")
    return kind.profiles[name]


def chosen_operations(kind: SpecKind, ops: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """The operations --ops names (`default` without it); InvalidArgumentError naming the kind's operations for an unknown one."""
    if ops is None:
        return default
    chosen = tuple(name.strip() for name in ops.split(",") if name.strip())
    unknown = [name for name in chosen if name not in kind.names]
    if unknown or not chosen:
        raise InvalidArgumentError(f"--ops {ops!r}: spec kind {kind.name!r} has the operations {', '.join(kind.names)}")
    return chosen


def snippet_of(kind: SpecKind, impl: str, example: ProgramCounterexample, semantics) -> str:
    """The example as runnable Python (the spec's outcome of each earlier call decides its `raises`).
    A hang or a crash ends with the call that hangs or kills the process, and an inspection that
    failed after the last call with that inspection (`contract.snippet.render`): running it hangs,
    dies or raises there."""
    model = kind.new(example.size, semantics)
    errors = [outcome_of(model, call, kind.error_names).error for call in example.calls]
    if example.fault is not None or failed_inspection(example.message) is not None:  # it ends with the failing inspection
        return render(impl, example.size, example.calls, example.message, errors, example.ending,
                      title=f"{SNIPPET_TITLE[2:]} ({kind.name})")
    return program_snippet(impl, example.size, example.calls, errors[:-1], example.difference, kind.name,
                           kind.view_readers, kind.new(example.size, semantics))


def explanations_of(kind: SpecKind, semantics, examples) -> list[Explanation | None]:
    """Each counterexample's diverging call explained (`contract.explaining.steps`), the values of all
    of them named alike; None for a hang, a crash or make_value failing, which have no difference to explain."""
    diverging = [example for example in examples if _explainable(example)]
    explained = iter(explain_all(kind, [diverging_call(kind, example.size, semantics, example.calls, example.difference)
                                        for example in diverging]))
    return [next(explained) if _explainable(example) else None for example in examples]


def _explainable(example: ProgramCounterexample) -> bool:
    return example.fault is None and example.difference.user_code is None


def explained_lines(difference, explanation: Explanation) -> list[str]:
    """The lines under a counterexample's line: its kind, every difference (unless only the outcome
    differs, which the line says), why."""
    return divergence_lines(program_kind(difference), explanation.differences, explanation.reasons,
                            listed=bool(difference.views))


def _print(args: argparse.Namespace, report: ProgramReport, impl: str, profile: str, snippets: list[str],
           explanations: list[Explanation | None]) -> None:
    if not args.quiet:
        summary_table("cacheproof check", {
            "spec": report.kind, "impl": impl, "profile": profile,
            "examples": examples_row(report.examples, args.examples, report.first_failure_example, args.budget), "steps": report.steps,
            "seconds": f"{report.seconds:.2f}", "steps/s": f"{report.steps_per_second:.0f}",
            **timing_rows(report.seconds_to_failure, report.first_report_seconds),
            "outcomes reached": report.coverage.summary(),
            **report.scope_rows(),
            "divergences": len(report.counterexamples),
            "database": database_row(args.database_choice),
            **({} if report.workers is None else report.workers.row()),
            "result": "conforms" if report.ok else "COUNTEREXAMPLE",
        })
    if report.ok:
        print(conforms_line(report.examples, report.steps, report.seconds))
        return
    if report.interrupted:  # even under --quiet: the verdict is partial
        print(interrupted_line(report.shrinking_interrupted, len(report.counterexamples),
                               len(report.counterexamples[-1].calls)))
    for number, (example, explanation) in enumerate(zip(report.counterexamples, explanations), 1):
        print(counterexample_line(number, len(report.counterexamples), len(example.calls), example.message))
        if explanation is not None and not args.quiet:
            for line in explained_lines(example.difference, explanation):
                print(line)
    if not args.quiet:
        count = len(snippets)
        if count > 1:
            print(f"{count} distinct divergences, each shrunk; their snippets follow")
        for number, snippet in enumerate(snippets, 1):
            print(snippet if count == 1 else snippet.replace(SNIPPET_TITLE, f"{SNIPPET_TITLE} {number} of {count}", 1))
    more = more_divergences_line(args, len(report.counterexamples))
    if more is not None:
        print(more, file=sys.stderr)


def _print_first(args: argparse.Namespace, kind: SpecKind, impl: str, example: ProgramCounterexample,
                 seconds: float) -> None:
    """The first counterexample's line as soon as it is shrunk, when further divergences are searched
    for; none for a view answered in another shape (a usage problem, said alone at the end)."""
    if not args.quiet and args.max_divergences > 1 and shape_problem(kind, impl, [example.difference]) is None \
            and inspection_problem(impl, [example.message]) is None:
        print(first_ready_line(len(example.calls), seconds, example.message), file=sys.stderr, flush=True)


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
        """Say so, write the partial report (no verdict) where --json asks, and return exit 130: from
        the main thread after its KeyboardInterrupt, or from the Ctrl-C watch when the main thread
        could not answer (`cacheproof.cmdline.interrupts`)."""
        seconds = time.perf_counter() - self.started
        print(f"interrupted: {self.examples} examples, {self.steps} steps in {seconds:.2f} s; no verdict")
        if args.json is not None:
            write_report(args.json, "check", check_body(
                args, spec=kind.name, impl=impl, profile=profile, semantics=semantics, operations=operations,
                budget_examples=args.examples, examples=self.examples, steps=self.steps, seconds=seconds,
                first_failure_example=None, first_failure_seconds=None, ok=None, divergences=[],
            ), ran_hypothesis=True)
        return INTERRUPTED_STATUS
