"""`cacheproof check`: hold a cache to the spec. Exit 0 conforms, 1 counterexample, 2 usage error,
130 interrupted by Ctrl-C (docs/robustness.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cacheproof.check.sequential.run import DEFAULT_EXAMPLES, DEFAULT_STEPS_PER_EXAMPLE, REAL_VALUE_CAPACITY, CheckInterrupted
from cacheproof.check.sequential.run import CheckReport, Counterexample, run_check
from cacheproof.check.sequential.scope import SMALL, THOROUGH, Phase
from cacheproof.check.sequential.workers import worker_json, worker_rows, workers_check
from cacheproof.cmdline.databases import DatabaseError, add_database_arguments, chosen_database, database_row
from cacheproof.contract.values import MAX_VALUE_BYTES
from cacheproof.contract.faults import UsageAbort
from cacheproof.cmdline.flag_types import non_negative_seconds, any_integer, positive_integer, positive_seconds
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.cmdline.output_paths import OutputPathError, first_problem, write_atomically
from cacheproof.cmdline.reports import write_report
from cacheproof.contract.explaining.broken import report_breaking_first
from cacheproof.contract.explaining.shapes import inspection_problem
from cacheproof.check.report import check_body, conforms_line, counterexample_line, divergence_lines, examples_row
from cacheproof.check.report import divergence_fields, first_ready_line, interrupted_line, timing_rows
from cacheproof.check.concurrent import command as concurrent_command
from cacheproof.check.concurrent.command import thread_count
from cacheproof.check.concurrent.run import DEFAULT_RUNS
from cacheproof.sandbox.factories import DEFAULT_IMPL, FactoryError, TimedFactory, check_impl_syntax, load_factory, probe_factory
from cacheproof.cmdline.budget import BUDGET_VARIABLE, DEFAULT_BUDGET_SECONDS, max_divergences_help
from cacheproof.cmdline.budget import more_divergences_line, resolve_budget, resolve_max_divergences
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.adapt import AdapterError, factory_profile
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names
from cacheproof.cmdline.kind_words import every_kind, key_domain_problem, key_domains, per_kind
from cacheproof.check.programs.command import DEFAULT_IMPLS
from cacheproof.check.programs import exhaustive_command
from cacheproof.check.programs.generators import exhaustive_scopes
from cacheproof.spec.cache.profiles import DEFAULT_PROFILE, check_operations, profile_named
from cacheproof.spec.cache.semantics import Semantics


EXIT_STATUSES = {0: "the cache conforms (under --threads: every history tried is linearizable)",
                 1: "a counterexample: printed with a runnable snippet, and in --json"}
EXAMPLE = ("cacheproof check --impl mypackage.cache:make_cache --examples 500 --seed 3 --json report.json\n"
           "cacheproof check --spec blocks --impl mypackage.pool:make_pool --threads 3")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default=DEFAULT_KIND, choices=kind_names(),
                        help=f"the spec kind to check against (default {DEFAULT_KIND}): "
                        f"{per_kind(lambda kind: kind.summary)}")
    parser.add_argument("--impl", metavar="MODULE:FACTORY", default=DEFAULT_IMPL,
                        help="MODULE:FACTORY of the implementation; default "
                        f"{per_kind(lambda kind: DEFAULT_IMPLS.get(kind.name, DEFAULT_IMPL))}")
    parser.add_argument("--examples", metavar="N", type=positive_integer,
                        help=f"run exactly N programs (call sequences) instead of a time budget (default "
                        f"{DEFAULT_EXAMPLES} under CI=true or with --budget 0); with --threads, scenarios")
    parser.add_argument("--budget", metavar="SECONDS", type=non_negative_seconds,
                        help=f"search for SECONDS (default {DEFAULT_BUDGET_SECONDS:g}, or ${BUDGET_VARIABLE}; "
                        "0: no budget); a counterexample ends it at once (docs/search-power.md)")
    parser.add_argument("--steps", metavar="N", type=positive_integer, default=DEFAULT_STEPS_PER_EXAMPLE,
                        help=f"calls per sequence, at most (default {DEFAULT_STEPS_PER_EXAMPLE})")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="random seed (same seed, same run; default 0)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the report as JSON to this path (docs/reports.md)")
    parser.add_argument("--trace-out", metavar="PATH", type=Path, help="write the shrunk counterexample as a trace (JSON lines)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict line, without the table and the snippet")
    parser.add_argument("--isolate", action="store_true",
                        help="run the cache in a child process: crashes and hangs become counterexamples")
    parser.add_argument("--call-timeout", type=positive_seconds, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                        help=f"a call not returning within SECONDS is a counterexample (default {DEFAULT_CALL_TIMEOUT:g})")
    parser.add_argument("--threads", metavar="N", type=thread_count, help="check linearizability under N threads (2-4); "
                        "--examples counts scenarios (docs/concurrency.md)")
    parser.add_argument("--profile", metavar="NAME",
                        help="semantics of a shipped implementation, per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.profiles))} (default: the kind's "
                        f"{' or '.join(dict.fromkeys(kind.default_profile for kind in every_kind()))}, a cache "
                        "factory's own `profile` first; `cacheproof profiles` lists them)")
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...",
                        help="override fields of the profile's semantics (docs/profiles.md)")
    parser.add_argument("--ops", metavar="OP,...",
                        help="check only these operations (default: the profile's), per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.names))}")
    parser.add_argument("--no-bad-arguments", action="store_true", help="make no calls with bad arguments")
    parser.add_argument("--max-divergences", type=positive_integer, metavar="N", help=max_divergences_help())
    parser.add_argument("--runs", metavar="N", type=positive_integer, default=DEFAULT_RUNS, help=f"with --threads: runs per scenario (default {DEFAULT_RUNS})")
    parser.add_argument("--thorough", action="store_true",
                        help="the kind's wide scopes too (the tensor cache: up to 16 keys of mixed types, capacities "
                        "to 2**41, lives of 500-2,000 calls; the block pool: pools to 512 blocks, 8 requests, "
                        "token runs of 24, lives of 1,000 calls); about two minutes (docs/scope.md); sets its own "
                        "--examples and --steps")
    parser.add_argument("--keys", choices=key_domains(), metavar="|".join(key_domains()),
                        help="the key domain calls draw keys from, per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.key_domains) + ' (' + kind.keys_are + ')')}. "
                        "The tensor cache's: int (0..5), str (hash strings such as engines "
                        "key by), bytes, tuple ((request, position) pairs), mixed (1, \"1\", b\"1\", (1,) ...); "
                        "default: the profile's, else int, and under --thorough mixed in the wide scopes "
                        "(docs/scope.md)")
    parser.add_argument("--max-capacity", type=value_capacity, metavar="BYTES",
                        help=f"with --thorough, the capacity cap for a cache whose values hold memory (default "
                        f"{REAL_VALUE_CAPACITY}, at most {MAX_VALUE_BYTES})")
    parser.add_argument("--workers", type=positive_integer, metavar="N",
                        help="search with N processes on seeds SEED..SEED+N-1, --examples divided among them; the "
                        "first failure stops the others; every kind (default 1; docs/scale.md); with --exhaustive, "
                        "each level's states are split among them")
    parser.add_argument("--exhaustive", action="store_true",
                        help="search every state of the kind's declared small scope breadth first, every call from "
                        "every state, instead of random programs: no divergence within the scope, or the shortest "
                        "counterexample; --budget bounds it, --workers splits each level (docs/exhaustive.md)")
    parser.add_argument("--depth", type=positive_integer, metavar="D",
                        help="with --exhaustive: calls per path at most (default: the scope's, docs/exhaustive.md)")
    parser.add_argument("--scope", metavar="NAME",
                        help="with --exhaustive: the scope searched, per kind: "
                        f"{per_kind(lambda kind: ', '.join(exhaustive_scopes(kind.name)))} (default: the first)")
    add_database_arguments(parser)


def run(args: argparse.Namespace) -> int:
    refused = exhaustive_command.refusal(args, DEFAULT_STEPS_PER_EXAMPLE)
    if refused is not None:
        print(f"cacheproof check: {refused}", file=sys.stderr)
        return 2
    if args.exhaustive:
        return exhaustive_command.run(args)
    thorough_examples = args.examples is not None
    try:
        resolve_budget(args, DEFAULT_EXAMPLES)
        resolve_max_divergences(args)
    except ValueError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.threads is not None and (args.workers is not None or args.database or args.database_read_only):
        print("cacheproof check: --workers and --database are for sequential checks; not with --threads", file=sys.stderr)
        return 2
    problem = key_domain_problem(get_kind(args.spec), args.keys)
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    if args.thorough and (args.threads is not None or thorough_examples or args.budget is not None
                          or args.steps != DEFAULT_STEPS_PER_EXAMPLE):
        print("cacheproof check: --thorough sets its own budget; drop --examples, --budget, --steps and --threads",
              file=sys.stderr)
        return 2
    if args.spec != DEFAULT_KIND:
        from cacheproof.check.programs import command as program_command

        return program_command.run(args)  # its factory's profile, else the built object's, else the kind's default
    problem = first_problem({"--json": args.json, "--trace-out": args.trace_out})
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    try:
        semantics, operations = chosen_semantics(args)
    except InvalidArgumentError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.threads is not None:
        return _run_threads(args, semantics, operations)
    try:
        factory = check_impl_syntax(args.impl) if args.isolate else load_factory(args.impl)
    except FactoryError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    phases = THOROUGH if args.thorough else (Phase(SMALL, args.examples, args.steps),)
    try:
        args.database_choice, database = chosen_database(args)
        check = run_check if args.workers in (None, 1) else workers_check(args.workers, phases, args.database_choice)
    except (DatabaseError, ValueError) as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    try:
        total = None if args.budget is not None else sum(phase.examples for phase in phases)
        with Progress("check", total=total, quiet=args.quiet) as progress:
            report = check(
                factory,
                budget_seconds=args.budget,
                on_counterexample=lambda example, seconds: _print_first(args, example, seconds),
                database=database,
                examples=args.examples,
                seed=args.seed,
                steps_per_example=args.steps,
                on_example=lambda tally: progress.update(tally.examples + tally.rejected, tally.steps),
                on_shrink=progress.shrinking,
                keys=args.keys,
                call_timeout=args.call_timeout,
                impl=args.impl,
                isolate=args.isolate,
                semantics=semantics,
                operations=operations,
                bad_arguments=not args.no_bad_arguments,
                phases=phases,
                max_capacity=args.max_capacity,
                max_divergences=args.max_divergences,
            )
    except UsageAbort as abort:
        print(f"cacheproof check: {abort.message}", file=sys.stderr)
        if abort.details:
            print(abort.details, file=sys.stderr)
        return 2
    except CheckInterrupted as interrupted:
        report = interrupted.report
        print(f"interrupted: {report.examples} examples, {report.steps} steps in {report.seconds:.2f} s; no verdict")
        _write_json(args, report, semantics, operations, phases)
        return INTERRUPTED_STATUS
    report = report_breaking_first(report, lambda example: example.why)
    problem = inspection_problem(args.impl, [example.message for example in report.counterexamples])
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    try:
        _write_json(args, report, semantics, operations, phases)  # the files first: a closed output pipe cannot lose them
        if args.trace_out is not None and report.counterexample is not None:
            from cacheproof.contract.record import spec_trace, trace_text

            example = report.counterexample
            trace = spec_trace(
                example.capacity_bytes, example.trace_calls(), semantics, profile=args.profile, operations=operations
            )
            write_atomically(args.trace_out, trace_text(trace))
    except OutputPathError as error:  # the disk filled up during the run, say: the verdict is still printed
        _print_report(args, report, phases)
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    _print_report(args, report, phases)
    return 0 if report.ok else 1


def value_capacity(text: str) -> int:
    """An argparse type: a capacity cap of 1..MAX_VALUE_BYTES bytes (no value ever holds more)."""
    number = positive_integer(text)
    if number > MAX_VALUE_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_VALUE_BYTES} bytes (64 MiB), got {text!r}")
    return number


def _run_threads(args: argparse.Namespace, semantics: Semantics, operations: tuple[str, ...]) -> int:
    """`--threads N` on a tensor cache: its factory loaded and probed for the checked operations, then
    the one concurrent checker of every kind (`cacheproof.check.concurrent.command`)."""
    refused = concurrent_command.refusal(args)
    if refused is not None:
        print(f"cacheproof check: {refused}", file=sys.stderr)
        return 2
    try:
        factory = TimedFactory(load_factory(args.impl), args.impl, args.call_timeout)
        probe_factory(factory, args.impl, operations)
    except FactoryError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:
        print(abort.said_by("cacheproof check"), file=sys.stderr)
        return 2
    return concurrent_command.run(args, get_kind(DEFAULT_KIND), factory, args.impl, semantics, operations,
                                  args.profile, not args.no_bad_arguments)


def chosen_semantics(args: argparse.Namespace) -> tuple[Semantics, tuple[str, ...]]:
    """The semantics and operations of --profile, --semantics and --ops (InvalidArgumentError if bad).
    Without --profile: the profile the factory carries (an engine adapter's `profile`), else the
    contract; args.profile is set to the name chosen, and without --keys args.keys to its key domain."""
    if args.profile is None:
        args.profile = _factory_profile(args) or DEFAULT_PROFILE
    profile = profile_named(args.profile)
    args.keys = getattr(args, "keys", None) or profile.keys
    semantics = profile.semantics.with_overrides(args.semantics)
    operations = profile.operations if args.ops is None else check_operations(
        [name.strip() for name in args.ops.split(",") if name.strip()]
    )
    return semantics, operations


def _factory_profile(args: argparse.Namespace) -> str | None:
    """The `profile` of --impl's factory (cacheproof.adapt.factory_profile); None when it has none,
    does not load (the run reports that), or runs isolated (its module is imported in the child only)."""
    if args.isolate:
        return None
    try:
        factory = load_factory(args.impl)
    except FactoryError:
        return None
    try:
        return factory_profile(factory)
    except (ImportError, AdapterError) as error:
        raise InvalidArgumentError(f"{args.impl}: {error}") from None


def _write_json(args: argparse.Namespace, report: CheckReport, semantics: Semantics, operations: tuple[str, ...],
                phases: tuple[Phase, ...]) -> None:
    if args.json is None:
        return
    examples = report.counterexamples or ((report.counterexample,) if report.counterexample is not None else ())
    body = check_body(
        args, spec=DEFAULT_KIND, impl=args.impl, profile=args.profile, semantics=semantics, operations=operations,
        budget_examples=sum(phase.examples for phase in phases), budget_steps=max(phase.steps for phase in phases),
        examples=report.examples, steps=report.steps,
        seconds=report.seconds, first_failure_example=report.first_failure_example,
        first_failure_seconds=report.first_failure_seconds,
        ok=None if report.interrupted and report.counterexample is None else report.ok,
        interrupted=report.interrupted,
        divergences=[sequential_divergence(example, example.to_python(args.impl)) for example in examples],
        scope=report.scope.to_json(), shrinking_interrupted=report.shrinking_interrupted,
        budget_seconds=args.budget,
        first_report_seconds=None if report.first_report_seconds is None else round(report.first_report_seconds, 3),
        coverage=None if report.coverage is None else report.coverage.to_json(),
        database=None if args.database_choice is None else args.database_choice.describe(), **worker_json(report),
    )
    write_report(args.json, "check", body, ran_hypothesis=True)


def _print_first(args: argparse.Namespace, example: Counterexample, seconds: float) -> None:
    """The first counterexample's line as soon as it is shrunk, before the search for further ones
    (the whole report follows at the end)."""
    if not args.quiet and args.max_divergences > 1:
        print(first_ready_line(len(example.calls), seconds, example.message), file=sys.stderr, flush=True)


def _print_report(args: argparse.Namespace, report: CheckReport, phases: tuple[Phase, ...]) -> None:
    example = report.counterexample
    if not args.quiet:
        summary_table(
            "cacheproof check",
            {
                "impl": args.impl,
                "profile": args.profile + (f" + {args.semantics}" if args.semantics else ""),
                "examples": examples_row(report.examples, sum(phase.examples for phase in phases),
                                         report.first_failure_example, args.budget),
                "steps": report.steps,
                "seconds": f"{report.seconds:.2f}",
                "steps/s": f"{report.steps_per_second:.0f}",
                **report.scope.rows(),
                **timing_rows(report.first_failure_seconds, report.first_report_seconds),
                "outcomes reached": "-" if report.coverage is None else report.coverage.summary(),
                "shrunk length": "-" if example is None else len(example.calls),
                "divergences": len(report.counterexamples),
                "database": database_row(args.database_choice),
                **worker_rows(report),
                "result": "conforms" if report.ok else "COUNTEREXAMPLE",
            },
        )
    if example is None:
        print(conforms_line(report.examples, report.steps, report.seconds))
        return
    if report.interrupted:  # even under --quiet: the verdict is partial
        print(interrupted_line(report.shrinking_interrupted, len(report.counterexamples),
                               len(report.counterexamples[-1].calls)))
    for line in report_lines(report, args.impl, args.quiet):
        print(line)
    more = more_divergences_line(args, len(report.counterexamples))
    if more is not None:
        print(more, file=sys.stderr)


def report_lines(report: CheckReport, impl: str, quiet: bool = False) -> list[str]:
    """Each counterexample's first difference (all `quiet` prints), its kind, every difference at the
    diverging call and why; then their snippets, so that everything from the first snippet on is
    Python (run it all, and it stops at the first snippet's failure)."""
    examples = report.counterexamples or (report.counterexample,)
    count = len(examples)
    lines: list[str] = []
    for number, example in enumerate(examples, 1):
        lines.append(counterexample_line(number, count, len(example.calls), example.message))
        if quiet:
            continue
        if example.kind is not None:
            texts = [difference.text for difference in example.differences]
            lines += divergence_lines(example.kind, texts, example.why, listed=len(texts) > 1)  # else the line is it
    if quiet:
        return lines
    if count > 1:
        lines.append(f"{count} distinct divergences, each shrunk; their snippets follow")
    for number, example in enumerate(examples, 1):
        title = "cacheproof counterexample" + ("" if count == 1 else f" {number} of {count}")
        lines.append(example.to_python(impl, title))
    return lines


def sequential_divergence(example: Counterexample, snippet: str) -> dict[str, Any]:
    """A tensor cache's counterexample (`check`), with its snippet."""
    return divergence_fields(
        example.kind, example.message, example.capacity_bytes, example.calls, example.ending,
        [difference.text for difference in example.differences], list(example.why),
        None if example.state_diff is None else example.state_diff.to_json(), snippet,
    )
