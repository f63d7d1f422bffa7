"""`cacheproof check --threads N`: hold a cache to the spec under N threads (linearizability).

Exit 0: every history tried is linearizable; 1: a counterexample (printed as a runnable script,
with the observed history and the reason); 2: a usage error; 130: interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time

from cacheproof.check.concurrent.run import ConcurrentReport, run_concurrent_check
from cacheproof.check.report import check_body, concurrent_divergence
from cacheproof.check.concurrent.scenarios import MAX_THREADS
from cacheproof.sandbox.factories import FactoryError, TimedFactory, load_factory, probe_factory
from cacheproof.contract.faults import UsageAbort
from cacheproof.cmdline.interrupts import last_words
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import Progress, summary_table
from cacheproof.check.sequential.scope import SMALL, with_key_domain
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.cache.semantics import CONTRACT

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


def run(args: argparse.Namespace) -> int:
    if args.trace_out is not None:
        print("cacheproof check: --trace-out records sequential runs; it cannot be used with --threads",
              file=sys.stderr)
        return 2
    try:
        factory = TimedFactory(load_factory(args.impl), args.impl, args.call_timeout)
        probe_factory(factory, args.impl, getattr(args, "operations_chosen", None))
    except FactoryError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    except UsageAbort as abort:
        return _usage_abort(abort)
    done = [0, 0]
    started = time.perf_counter()

    def on_scenario(scenarios: int, runs: int) -> None:
        done[:] = [scenarios, runs]
        progress.update(scenarios, runs)

    def interrupted() -> int:
        """The partial report: from the main thread after its KeyboardInterrupt, or from the Ctrl-C
        watch when the main thread could not answer (`cacheproof.cmdline.interrupts`)."""
        print(f"interrupted: {done[0]} scenarios, {done[1]} runs; no verdict", flush=True)
        if args.json is not None:
            write_report(args.json, "check", _body(
                args, examples=done[0], steps=done[1], seconds=time.perf_counter() - started, seconds_to_failure=None,
                ok=None, divergences=[], unknown_histories=0))
        return INTERRUPTED_STATUS

    try:
        with last_words(interrupted), \
                Progress("check --threads", total=args.examples, quiet=args.quiet, unit="scenarios") as progress:
            report = run_concurrent_check(
                factory,
                threads=args.threads,
                scenarios=args.examples,
                runs=args.runs,
                seed=args.seed,
                timeout=args.call_timeout,
                on_scenario=on_scenario,
                semantics=getattr(args, "semantics_chosen", None) or CONTRACT,
                operations=getattr(args, "operations_chosen", None) or ALL_OPERATIONS,
                keys=with_key_domain(SMALL, getattr(args, "keys", None)).key_pool,
            )
    except UsageAbort as abort:
        return _usage_abort(abort)
    except KeyboardInterrupt:
        return interrupted()
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        write_report(args.json, "check", report_body(args, report))
    print_report(args.impl, report, quiet=args.quiet)
    return 0 if report.ok else 1


def report_body(args: argparse.Namespace, report: ConcurrentReport) -> dict:
    """The JSON report's body (`cacheproof.check.report`); its seed is the one drawn when none was given."""
    example = report.counterexample
    body = _body(
        args, examples=report.scenarios, steps=report.runs, seconds=report.seconds,
        seconds_to_failure=report.seconds_to_failure, ok=report.ok,
        divergences=[] if example is None else [concurrent_divergence(example, args.impl)],
        unknown_histories=report.unknown,
    )
    return {**body, "seed": report.seed}


def _body(args: argparse.Namespace, *, examples: int, steps: int, seconds: float, seconds_to_failure: float | None,
          ok: bool | None, divergences: list[dict], unknown_histories: int) -> dict:
    """The check body of a run of `examples` scenarios and `steps` runs (ok None: interrupted, no verdict)."""
    return check_body(
        args, spec="cache", impl=args.impl, profile=args.profile,
        semantics=getattr(args, "semantics_chosen", None) or CONTRACT,
        operations=getattr(args, "operations_chosen", None) or ALL_OPERATIONS, budget_examples=args.examples,
        examples=examples, steps=steps, seconds=seconds,
        first_failure_example=examples if divergences else None,
        first_failure_seconds=seconds_to_failure, ok=ok, divergences=divergences, unknown_histories=unknown_histories,
    )


def _usage_abort(abort: UsageAbort) -> int:
    print(f"cacheproof check: {abort.message}", file=sys.stderr)
    if abort.details:
        print(abort.details, file=sys.stderr)
    return 2


def print_report(impl: str, report: ConcurrentReport, *, quiet: bool) -> None:
    example = report.counterexample
    if not quiet:
        summary_table(
            "cacheproof check --threads",
            {
                "impl": impl,
                "threads": report.threads,
                "seed": report.seed,
                "scenarios": report.scenarios,
                "runs": report.runs,
                "seconds": f"{report.seconds:.2f}",
                "scenarios/s": f"{report.scenarios_per_second:.1f}",
                "result": "linearizable" if report.ok else "NOT LINEARIZABLE",
            },
        )
    if example is None:
        print(
            f"linearizable: {report.scenarios} scenarios of {report.threads} threads, {report.runs} runs, "
            f"{report.scenarios_per_second:.1f} scenarios/s"
        )
        return
    threads, calls, prefix = example.scenario.size
    print(
        f"not linearizable ({threads} thread{'s' if threads != 1 else ''}, {calls} concurrent "
        f"call{'s' if calls != 1 else ''}, prefix of {prefix}): {example.reason}"
    )
    if quiet:
        return
    print("observed history:")
    for line in example.history.lines():
        print(f"  {line}")
    print(example.to_python(impl))
