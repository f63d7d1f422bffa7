"""`cacheproof check`: hold a cache to the spec. Exit 0 conforms, 1 counterexample, 2 usage error."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cacheproof.check.run import DEFAULT_EXAMPLES, DEFAULT_STEPS_PER_EXAMPLE, CheckReport, run_check
from cacheproof.check import concurrent_command
from cacheproof.check.concurrent_command import thread_count
from cacheproof.check.concurrent_run import DEFAULT_RUNS
from cacheproof.check.factories import DEFAULT_IMPL, FactoryError, load_factory
from cacheproof.progress import Progress, summary_table


def _positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {number}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--impl", default=DEFAULT_IMPL, help=f"MODULE:FACTORY of the cache (default {DEFAULT_IMPL})")
    parser.add_argument("--examples", type=_positive, default=DEFAULT_EXAMPLES, help="call sequences to try")
    parser.add_argument("--steps", type=_positive, default=DEFAULT_STEPS_PER_EXAMPLE, help="calls per sequence")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same run)")
    parser.add_argument("--json", type=Path, help="write the report as JSON to this path")
    parser.add_argument("--trace-out", type=Path, help="write the shrunk counterexample as a trace (JSON lines)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict")
    parser.add_argument("--threads", type=thread_count, help="check linearizability under N threads (2-4); "
                        "--examples counts scenarios (docs/concurrency.md)")
    parser.add_argument("--runs", type=_positive, default=DEFAULT_RUNS, help="with --threads: runs per scenario")


def run(args: argparse.Namespace) -> int:
    if args.threads is not None:
        return concurrent_command.run(args)
    try:
        factory = load_factory(args.impl)
    except FactoryError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    with Progress("check", total=args.examples, quiet=args.quiet) as progress:
        report = run_check(
            factory,
            examples=args.examples,
            seed=args.seed,
            steps_per_example=args.steps,
            on_example=lambda tally: progress.update(tally.examples, tally.steps),
        )
    _print_report(args, report)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if args.trace_out is not None and report.counterexample is not None:
        from cacheproof.check.record import write_counterexample_trace

        write_counterexample_trace(args.trace_out, report.counterexample)
    return 0 if report.ok else 1


def _print_report(args: argparse.Namespace, report: CheckReport) -> None:
    example = report.counterexample
    if not args.quiet:
        summary_table(
            "cacheproof check",
            {
                "impl": args.impl,
                "examples": report.examples,
                "steps": report.steps,
                "seconds": f"{report.seconds:.2f}",
                "steps/s": f"{report.steps_per_second:.0f}",
                "shrunk length": "-" if example is None else len(example.calls),
                "result": "conforms" if report.ok else "COUNTEREXAMPLE",
            },
        )
    if example is None:
        print(f"conforms: {report.examples} examples, {report.steps} steps, {report.steps_per_second:.0f} steps/s")
        return
    print(f"counterexample ({len(example.calls)} calls): {example.message}")
    print(example.to_python(args.impl))
