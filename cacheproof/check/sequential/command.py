"""`cacheproof check`: hold a cache to the spec. Exit 0 conforms, 1 counterexample, 2 usage error,
130 interrupted by Ctrl-C (docs/robustness.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cacheproof.check.sequential.run import DEFAULT_EXAMPLES, DEFAULT_STEPS_PER_EXAMPLE, REAL_VALUE_CAPACITY, CheckInterrupted
from cacheproof.check.sequential.run import CheckReport, run_check
from cacheproof.check.sequential.scope import SMALL, THOROUGH, Phase
from cacheproof.contract.values import MAX_VALUE_BYTES
from cacheproof.check.sequential.distinct import MAX_DIVERGENCES
from cacheproof.contract.faults import UsageAbort
from cacheproof.cmdline.flag_types import any_integer, positive_integer, positive_seconds
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.cmdline.output_paths import OutputPathError, first_problem, write_atomically
from cacheproof.cmdline.reports import write_report
from cacheproof.check.report import check_body, examples_row, sequential_divergence
from cacheproof.check.concurrent import command as concurrent_command
from cacheproof.check.concurrent.command import thread_count
from cacheproof.check.concurrent.run import DEFAULT_RUNS
from cacheproof.sandbox.factories import DEFAULT_IMPL, FactoryError, check_impl_syntax, load_factory
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.adapt import AdapterError, factory_profile
from cacheproof.spec.kinds import DEFAULT_KIND, kind_names
from cacheproof.spec.cache.profiles import ALL_OPERATIONS, DEFAULT_PROFILE, PROFILES, check_operations, profile_named
from cacheproof.spec.cache.semantics import Semantics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default=DEFAULT_KIND, choices=kind_names(),
                        help=f"the spec kind to check against (default {DEFAULT_KIND}: the tensor cache; "
                        "blocks: a KV block pool, docs/block-pool-contract.md)")
    parser.add_argument("--impl", default=DEFAULT_IMPL, help=f"MODULE:FACTORY of the cache (default {DEFAULT_IMPL})")
    parser.add_argument("--examples", type=positive_integer, default=DEFAULT_EXAMPLES,
                        help=f"call sequences to run to their end (default {DEFAULT_EXAMPLES}); "
                        "with --threads, scenarios")
    parser.add_argument("--steps", type=positive_integer, default=DEFAULT_STEPS_PER_EXAMPLE,
                        help=f"calls per sequence, at most (default {DEFAULT_STEPS_PER_EXAMPLE})")
    parser.add_argument("--seed", type=any_integer, default=0, help="random seed (same seed, same run; default 0)")
    parser.add_argument("--json", type=Path, help="write the report as JSON to this path")
    parser.add_argument("--trace-out", type=Path, help="write the shrunk counterexample as a trace (JSON lines)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict line, without the table and the snippet")
    parser.add_argument("--isolate", action="store_true",
                        help="run the cache in a child process: crashes and hangs become counterexamples")
    parser.add_argument("--call-timeout", type=positive_seconds, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                        help=f"a call not returning within SECONDS is a counterexample (default {DEFAULT_CALL_TIMEOUT:g})")
    parser.add_argument("--threads", type=thread_count, help="check linearizability under N threads (2-4); "
                        "--examples counts scenarios (docs/concurrency.md)")
    parser.add_argument("--profile", metavar="NAME",
                        help=f"semantics of a shipped cache: {', '.join(PROFILES)} (default: the factory's own "
                        f"`profile`, else {DEFAULT_PROFILE}; `cacheproof profiles` lists them)")
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...",
                        help="override fields of the profile's semantics (docs/profiles.md)")
    parser.add_argument("--ops", metavar="OP,...",
                        help=f"check only these operations (default: the profile's); of {','.join(ALL_OPERATIONS)}")
    parser.add_argument("--no-bad-arguments", action="store_true", help="make no calls with bad arguments")
    parser.add_argument("--max-divergences", type=positive_integer, default=MAX_DIVERGENCES, metavar="N",
                        help=f"report up to N distinct divergences, each shrunk (default {MAX_DIVERGENCES}; "
                        "1 stops at the first)")
    parser.add_argument("--runs", type=positive_integer, default=DEFAULT_RUNS, help=f"with --threads: runs per scenario (default {DEFAULT_RUNS})")
    parser.add_argument("--thorough", action="store_true",
                        help="the wide scope too: up to 16 keys of mixed types, capacities to 2**41, lives of "
                        "500-2,000 calls; about two minutes (docs/scope.md); sets its own --examples and --steps")
    parser.add_argument("--max-capacity", type=value_capacity, metavar="BYTES",
                        help=f"with --thorough, the capacity cap for a cache whose values hold memory (default "
                        f"{REAL_VALUE_CAPACITY}, at most {MAX_VALUE_BYTES})")


def run(args: argparse.Namespace) -> int:
    if args.spec != DEFAULT_KIND:
        from cacheproof.check.programs import command as program_command

        if args.profile is None:
            args.profile = DEFAULT_PROFILE

        return program_command.run(args)
    problem = first_problem({"--json": args.json, "--trace-out": args.trace_out})
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    if args.threads is not None and args.isolate:
        print("cacheproof check: --isolate runs sequential checks; it cannot be used with --threads", file=sys.stderr)
        return 2
    try:
        semantics, operations = chosen_semantics(args)
    except InvalidArgumentError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.thorough and (args.threads is not None or args.examples != DEFAULT_EXAMPLES
                          or args.steps != DEFAULT_STEPS_PER_EXAMPLE):
        print("cacheproof check: --thorough sets its own budget; drop --examples, --steps and --threads",
              file=sys.stderr)
        return 2
    if args.threads is not None:
        args.semantics_chosen, args.operations_chosen = semantics, operations
        return concurrent_command.run(args)
    try:
        factory = check_impl_syntax(args.impl) if args.isolate else load_factory(args.impl)
    except FactoryError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    try:
        phases = THOROUGH if args.thorough else (Phase(SMALL, args.examples, args.steps),)
        with Progress("check", total=sum(phase.examples for phase in phases), quiet=args.quiet) as progress:
            report = run_check(
                factory,
                examples=args.examples,
                seed=args.seed,
                steps_per_example=args.steps,
                on_example=lambda tally: progress.update(tally.examples, tally.steps),
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


def chosen_semantics(args: argparse.Namespace) -> tuple[Semantics, tuple[str, ...]]:
    """The semantics and operations of --profile, --semantics and --ops (InvalidArgumentError if bad).
    Without --profile: the profile the factory carries (an engine adapter's `profile`), else the
    contract; args.profile is set to the name chosen."""
    if args.profile is None:
        args.profile = _factory_profile(args) or DEFAULT_PROFILE
    profile = profile_named(args.profile)
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
        first_failure_seconds=report.first_failure_seconds, ok=None if report.interrupted else report.ok,
        divergences=[sequential_divergence(example, example.to_python(args.impl)) for example in examples],
        scope=report.scope.to_json(),
    )
    write_report(args.json, "check", body, ran_hypothesis=True)


def _print_report(args: argparse.Namespace, report: CheckReport, phases: tuple[Phase, ...]) -> None:
    example = report.counterexample
    if not args.quiet:
        summary_table(
            "cacheproof check",
            {
                "impl": args.impl,
                "profile": args.profile + (f" + {args.semantics}" if args.semantics else ""),
                "examples": examples_row(report.examples, sum(phase.examples for phase in phases),
                                         report.first_failure_example),
                "steps": report.steps,
                "seconds": f"{report.seconds:.2f}",
                "steps/s": f"{report.steps_per_second:.0f}",
                **report.scope.rows(),
                "shrunk length": "-" if example is None else len(example.calls),
                "divergences": len(report.counterexamples),
                "result": "conforms" if report.ok else "COUNTEREXAMPLE",
            },
        )
    if example is None:
        print(f"conforms: {report.examples} examples, {report.steps} steps, {report.steps_per_second:.0f} steps/s")
        return
    for line in report_lines(report, args.impl, args.quiet):
        print(line)


def report_lines(report: CheckReport, impl: str, quiet: bool = False) -> list[str]:
    """Each counterexample's first difference (all `quiet` prints), its kind, every difference at the
    diverging call and why; then their snippets, so that everything from the first snippet on is
    Python (run it all, and it stops at the first snippet's failure)."""
    examples = report.counterexamples or (report.counterexample,)
    count = len(examples)
    lines: list[str] = []
    for number, example in enumerate(examples, 1):
        which = "" if number == 1 else f" {number} of {count}"
        lines.append(f"counterexample{which} ({len(example.calls)} calls): {example.message}")
        if quiet:
            continue
        if example.kind is not None:
            lines.append(f"  kind: {example.kind}")
            if len(example.differences) > 1:
                lines.append("  every difference at that call:")
                lines += [f"    {difference.text}" for difference in example.differences]
            lines += [f"  {line}" for line in example.why]
    if quiet:
        return lines
    if count > 1:
        lines.append(f"{count} distinct divergences, each shrunk; their snippets follow")
    for number, example in enumerate(examples, 1):
        title = "cacheproof counterexample" + ("" if count == 1 else f" {number} of {count}")
        lines.append(example.to_python(impl, title))
    return lines
