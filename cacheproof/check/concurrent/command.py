"""`cacheproof check [--spec KIND] --threads N`: hold an implementation of any spec kind to its spec
under N threads (linearizability of its answers and its views), through the one concurrent checker
(`cacheproof.check.concurrent.run`).

Exit 0: every history tried is linearizable; 1: a counterexample (printed with the observed history,
the reason and a runnable script); 2: a usage error; 130: interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable

from cacheproof.check.concurrent.run import ConcurrentReport, run_concurrent_check
from cacheproof.check.concurrent.scenarios import MAX_THREADS
from cacheproof.check.programs.generators import default_scope, generator_for
from cacheproof.check.report import check_body, concurrent_divergence
from cacheproof.cmdline.interrupts import last_words
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.contract.faults import UsageAbort
from cacheproof.sandbox.factories import TimedFactory
from cacheproof.spec.kind import SpecKind

MIN_CLI_THREADS = 2


def thread_count(text: str) -> int:
    """argparse type of --threads: an int in 2..MAX_THREADS."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in {MIN_CLI_THREADS}..{MAX_THREADS}, got {text!r}") from None
    if not MIN_CLI_THREADS <= number <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"must be in {MIN_CLI_THREADS}..{MAX_THREADS}, got {number}")
    return number


def refusal(args: argparse.Namespace) -> str | None:
    """The one line refusing a flag that cannot go with --threads, naming why; None when all can."""
    if args.trace_out is not None:
        return "--trace-out records sequential runs; it cannot be used with --threads"
    if args.isolate:
        return "--isolate runs sequential checks; it cannot be used with --threads"
    return None


def run(args: argparse.Namespace, kind: SpecKind, factory: Callable[[int], Any], impl: str, semantics: Any,
        operations: tuple[str, ...], profile: str, misuse: bool) -> int:
    """`--threads N` for `kind`: `factory` loaded (each build bounded by --call-timeout, unless it is
    a `TimedFactory` already, whose count of builds goes on), `semantics`, `operations` and `profile`
    chosen by the caller (the check command of the kind); `misuse` whether calls the contract
    rejects are drawn."""
    refused = refusal(args)
    if refused is not None:
        print(f"cacheproof check: {refused}", file=sys.stderr)
        return 2
    scope = default_scope(kind.name)
    keys = getattr(args, "keys", None)
    generator = generator_for(kind.name, scope.with_keys(keys) if keys and hasattr(scope, "with_keys") else scope)
    timed = factory if isinstance(factory, TimedFactory) else TimedFactory(factory, impl, args.call_timeout)
    done = [0, 0]
    started = time.perf_counter()

    def body(**fields: Any) -> dict:
        return check_body(args, spec=kind.name, impl=impl, profile=profile, semantics=semantics, operations=operations,
                          budget_examples=args.examples, **fields)

    def on_scenario(scenarios: int, runs: int) -> None:
        done[:] = [scenarios, runs]
        progress.update(scenarios, runs)

    def interrupted() -> int:
        """The partial report: from the main thread after its KeyboardInterrupt, or from the Ctrl-C
        watch when the main thread could not answer (`cacheproof.cmdline.interrupts`)."""
        print(f"interrupted: {done[0]} scenarios, {done[1]} runs; no verdict", flush=True)
        if args.json is not None:
            write_report(args.json, "check", body(
                examples=done[0], steps=done[1], seconds=time.perf_counter() - started, first_failure_example=None,
                first_failure_seconds=None, ok=None, divergences=[], unknown_histories=0))
        return INTERRUPTED_STATUS

    try:
        with last_words(interrupted), \
                Progress("check --threads", total=args.examples, quiet=args.quiet, unit="scenarios") as progress:
            report = run_concurrent_check(
                kind, timed, generator=generator, threads=args.threads, scenarios=args.examples, runs=args.runs,
                seed=args.seed, timeout=args.call_timeout, on_scenario=on_scenario, semantics=semantics,
                operations=operations, misuse=misuse,
            )
    except UsageAbort as abort:
        print(abort.said_by("cacheproof check"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted()
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        example = report.counterexample
        write_report(args.json, "check", {**body(
            examples=report.scenarios, steps=report.runs, seconds=report.seconds,
            first_failure_example=None if report.ok else report.scenarios,
            first_failure_seconds=report.seconds_to_failure, ok=report.ok,
            divergences=[] if example is None else [concurrent_divergence(example, kind, impl)],
            unknown_histories=report.unknown,
        ), "seed": report.seed})
    print_report(kind, impl, report, quiet=args.quiet)
    return 0 if report.ok else 1


def print_report(kind: SpecKind, impl: str, report: ConcurrentReport, *, quiet: bool) -> None:
    example = report.counterexample
    if not quiet:
        summary_table("cacheproof check --threads", {
            "spec": kind.name, "impl": impl, "threads": report.threads, "seed": report.seed,
            "scenarios": report.scenarios, "runs": report.runs, "seconds": f"{report.seconds:.2f}",
            "scenarios/s": f"{report.scenarios_per_second:.1f}",
            "result": "linearizable" if report.ok else "NOT LINEARIZABLE",
        })
    if example is None:
        print(f"linearizable: {report.scenarios} scenarios of {report.threads} threads, {report.runs} runs, "
              f"{report.scenarios_per_second:.1f} scenarios/s"
              + (f", {report.unknown} histories unknown (search budget)" if report.unknown else ""))
        return
    threads, calls, prefix = example.scenario.shape
    print(f"not linearizable ({threads} thread{'s' if threads != 1 else ''}, {calls} concurrent "
          f"call{'s' if calls != 1 else ''}, prefix of {prefix}): {example.reason}")
    if quiet:
        return
    print("observed history:")
    for line in example.history.lines():
        print(f"  {line}")
    print(example.to_python(kind, impl))
