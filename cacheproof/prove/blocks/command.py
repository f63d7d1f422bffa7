"""`cacheproof prove --spec blocks`: the block pool's proofs and the refinement check.

Runs, under each semantics asked for (`--profile` of spec/blocks/semantics.py, `--semantics
FIELD=VALUE,...`, `--all-semantics`): the generic-block proofs (any number of blocks and
requests), the bounded induction proofs at N blocks (`--slots N`; the prove command's default
of 8 slots means the blocks default, 5), the simulation of the bounded model by the generic one at
N, and the bounded refinement check (`--refine-capacity`: blocks of the refined pool, default 3;
`--refine-entries`: the largest sum of ref counts of a reached state, default 3; `--no-refine`
skips it). One line per (model, invariant, operation); a counterexample prints as runnable
Python. Exit 0 when every obligation is proved and the spec refines the model, 1 otherwise, 2 on
a bad flag.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time

from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.prove.blocks import generic, proofs, refinement
from cacheproof.prove.induction import ProofResult
from cacheproof.prove.option_targets import Target, TargetReport, option_targets
from cacheproof.prove.report import PROVES, obligation, prove_body
from cacheproof.prove.report import target as target_json
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BLOCK_OPTIONS, BLOCK_PROFILES
from cacheproof.spec.errors import InvalidArgumentError

PROVE_DEFAULT_SLOTS = 8
"""`cacheproof prove`'s default --slots (the tensor cache's): read as "the blocks default"."""


def targets(args: argparse.Namespace) -> list[Target]:
    """The semantics the flags ask for (cacheproof.prove.option_targets); InvalidArgumentError on an
    unknown profile or field."""
    return option_targets(args, "block", BLOCK_PROFILES, BLOCK_OPTIONS, BLOCK_CONTRACT)


def num_blocks(args: argparse.Namespace) -> int:
    slots = getattr(args, "slots", PROVE_DEFAULT_SLOTS)
    return proofs.DEFAULT_BLOCKS if slots == PROVE_DEFAULT_SLOTS else slots


def prove_target(target: Target, blocks: int, bound: refinement.Bound | None) -> TargetReport:
    started = time.perf_counter()
    results = generic.prove(target.semantics) + proofs.prove(blocks, target.semantics) + generic.simulation(blocks, target.semantics)
    refined = None if bound is None else refinement.check_refinement(bound, semantics=target.semantics)
    return TargetReport(target, blocks, results, refined, time.perf_counter() - started)


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": getattr(args, "json", None)})
    if problem is not None:
        print(f"cacheproof prove: {problem}", file=sys.stderr)
        return 2
    try:
        chosen = targets(args)
        blocks = num_blocks(args)
        if blocks < 2:
            raise InvalidArgumentError(f"--slots {blocks}: the block model needs >= 2 blocks (the null block and one usable)")
    except InvalidArgumentError as error:
        print(f"cacheproof prove: {error}", file=sys.stderr)
        return 2
    bound = None if getattr(args, "no_refine", False) else refinement.Bound(
        num_blocks=max(2, getattr(args, "refine_capacity", refinement.DEFAULT_BOUND.num_blocks)),
        max_refs=getattr(args, "refine_entries", refinement.DEFAULT_BOUND.max_refs),
    )
    quiet = getattr(args, "quiet", False)
    if not quiet:
        print(textwrap.fill(f"proving {PROVES['blocks']}", width=100))
    started = time.perf_counter()
    reports = [prove_target(one, blocks, bound) for one in chosen]
    wall = time.perf_counter() - started
    if getattr(args, "json", None) is not None:
        refine = {} if bound is None else {"refine_blocks": bound.num_blocks, "refine_refs": bound.max_refs}
        write_report(args.json, "prove", prove_body("blocks", {"blocks": blocks, **refine}, wall, [
            target_json(r.target.label, r.target.semantics, r.ok, r.seconds, [obligation(p) for p in r.results], r.refined)
            for r in reports
        ]))
    for report in reports:
        print_report(report, quiet, several=len(reports) > 1)
    if len(reports) > 1:
        print(f"\n{sum(r.ok for r in reports)}/{len(reports)} semantics proved and refined; wall {wall:.2f} s")
    return 0 if all(r.ok for r in reports) else 1


def summary_lines(results: list[ProofResult]) -> list[str]:
    """One line per (model, invariant, operation), its outcomes' times summed."""
    groups: dict[tuple[str, str, str], list[ProofResult]] = {}
    for r in results:
        groups.setdefault((r.model, r.invariant, r.operation), []).append(r)
    lines = []
    for (model, invariant, operation), group in groups.items():
        failed = [r.outcome for r in group if not r.proved]
        verdict = "COUNTEREXAMPLE (" + ", ".join(failed) + ")" if failed else "proved"
        seconds = sum(r.seconds for r in group)
        lines.append(f"{model:<8} {invariant:<4} {operation:<13} {verdict:<40} {seconds * 1000:8.1f} ms")
    return lines


def print_report(report: TargetReport, quiet: bool, several: bool) -> None:
    results = report.results
    if several or report.target.semantics != BLOCK_CONTRACT:
        differences = ", ".join(f"{k}={v}" for k, v in report.target.semantics.differences().items()) or "the contract"
        print(f"\n== semantics: {report.target.label} ({differences})")
    if not quiet:
        for line in summary_lines(results):
            print(line)
        print("generic  B1   (every operation): follows from Q for every block: the queue's blocks are the non-null blocks at ref 0")
    shown: set[tuple[str, str]] = set()
    for r in results:
        if not r.proved and r.counterexample is not None and (r.invariant, r.operation) not in shown:
            shown.add((r.invariant, r.operation))
            print(f"\n# counterexample: {r.invariant} / {r.operation} -> {r.outcome} ({r.model})")
            print(r.counterexample.python(), end="")
    if report.refined is not None:
        for disagreement in report.refined.disagreements:
            print(f"\n# spec and model disagree: {disagreement.describe()}")
            print(disagreement.python(), end="")
    failed = sum(not r.proved for r in results)
    seconds: dict[str, float] = {}
    for r in results:
        seconds[r.model] = seconds.get(r.model, 0.0) + r.seconds
    print(
        f"\n{len(results) - failed}/{len(results)} obligations proved" + (f", {failed} FAILED" if failed else "")
        + "; solver seconds: " + ", ".join(f"{m} {s:.3f}" for m, s in seconds.items())
        + f" (blocks={report.size}); wall {report.seconds:.2f} s"
    )
    if report.refined is not None:
        print(report.refined.line())
