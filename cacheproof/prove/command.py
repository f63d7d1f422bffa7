"""`cacheproof prove`: z3 proofs that every operation keeps the invariants, from the spec's rules.

Three models, all calling `cacheproof.spec.rules` (and the per-entry one `cacheproof.spec.steps`)
at proof time: the aggregate model (byte counts, unbounded, any number of entries), the liveness
facts L1-L3 over it, and the per-entry model of N symbolic slots. One line per (model, invariant,
operation), summing its outcomes' times; a failed proof prints its counterexample as runnable
Python. Then the bounded refinement check (refinement.py): on every small state and call,
`CacheSpec` does what the per-entry model says; one line, and a runnable snippet per
disagreement. Exit 0 when everything is proved and the spec refines the model, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cacheproof.check.flag_types import integer_at_least, positive_integer
from cacheproof.check.output_paths import first_problem, write_atomically
from cacheproof.prove import aggregate_model
from cacheproof.prove import entry_model
from cacheproof.prove import liveness
from cacheproof.prove import refinement
from cacheproof.prove.induction import ProofResult

__all__ = ["ProofResult", "add_arguments", "prove_all", "run"]

DEFAULT_SLOTS = 8


def prove_all(slots: int = DEFAULT_SLOTS) -> list[ProofResult]:
    """Every proof obligation: aggregate, liveness, then the per-entry model with `slots` slots."""
    return aggregate_model.prove() + liveness.prove() + entry_model.prove(slots)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--slots", type=positive_integer, default=DEFAULT_SLOTS, help="slots of the per-entry model (default 8)")
    parser.add_argument(
        "--refine-capacity",
        type=positive_integer,
        default=refinement.DEFAULT_BOUND.max_capacity,
        help=f"refinement check: capacities 1..N (default {refinement.DEFAULT_BOUND.max_capacity})",
    )
    parser.add_argument(
        "--refine-entries",
        type=integer_at_least(0),
        default=refinement.DEFAULT_BOUND.max_entries,
        help=f"refinement check: states of at most N entries (default {refinement.DEFAULT_BOUND.max_entries})",
    )
    parser.add_argument("--no-refine", action="store_true", help="skip the bounded refinement check")
    parser.add_argument("--json", type=Path, help="write every result, with counterexamples, to this file")
    parser.add_argument("--quiet", action="store_true", help="print only counterexamples and the verdict")


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof prove: {problem}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = prove_all(args.slots)
    bound = refinement.DEFAULT_BOUND._replace(max_capacity=args.refine_capacity, max_entries=args.refine_entries)
    refined = None if args.no_refine else refinement.check_refinement(bound)
    wall = time.perf_counter() - started
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        write_atomically(args.json, json.dumps(report_json(results, args.slots, wall, refined), indent=2) + "\n")
    if not args.quiet:
        for line in summary_lines(results):
            print(line)
    for result in results:
        if result.counterexample is not None:
            print(f"\n# counterexample: {result.invariant} / {result.operation} -> {result.outcome} ({result.model})")
            print(result.counterexample.python(), end="")
    if refined is not None:
        for disagreement in refined.disagreements:
            print(f"\n# spec and model disagree: {disagreement.describe()}")
            print(disagreement.python(), end="")
    totals = model_seconds(results)
    failed = sum(not r.proved for r in results)
    print(
        f"\n{len(results) - failed}/{len(results)} obligations proved; solver seconds: "
        + ", ".join(f"{model} {seconds:.3f}" for model, seconds in totals.items())
        + f" (slots={args.slots}); wall {wall:.2f} s"
    )
    if refined is not None:
        print(refined.line())
    return 0 if failed == 0 and (refined is None or refined.agrees) else 1


def summary_lines(results: list[ProofResult]) -> list[str]:
    """One line per (model, invariant, operation): proved, or the outcomes with a counterexample."""
    groups: dict[tuple[str, str, str], list[ProofResult]] = {}
    for result in results:
        groups.setdefault((result.model, result.invariant, result.operation), []).append(result)
    lines = []
    for (model, invariant, operation), group in groups.items():
        failed = [r.outcome for r in group if not r.proved]
        verdict = "proved" if not failed else "COUNTEREXAMPLE (" + ", ".join(failed) + ")"
        seconds = sum(r.seconds for r in group)
        lines.append(f"{model:<10} {invariant:<6} {operation:<17} {verdict:<40} {seconds * 1000:8.1f} ms")
    return lines


def model_seconds(results: list[ProofResult]) -> dict[str, float]:
    """Solver seconds per model."""
    totals: dict[str, float] = {}
    for result in results:
        totals[result.model] = totals.get(result.model, 0.0) + result.seconds
    return totals


def report_json(
    results: list[ProofResult], slots: int, wall_seconds: float, refined: refinement.RefinementReport | None = None
) -> dict:
    """The JSON report: overall verdict, times, every result, and the refinement check (None if skipped)."""
    return {
        "ok": all(r.proved for r in results) and (refined is None or refined.agrees),
        "refinement": None if refined is None else refined.to_json(),
        "slots": slots,
        "wall_seconds": round(wall_seconds, 3),
        "solver_seconds": {model: round(s, 4) for model, s in model_seconds(results).items()},
        "results": [
            {
                "model": r.model,
                "invariant": r.invariant,
                "operation": r.operation,
                "outcome": r.outcome,
                "proved": r.proved,
                "seconds": round(r.seconds, 5),
                "counterexample": None if r.counterexample is None else r.counterexample.to_json(),
            }
            for r in results
        ],
    }
