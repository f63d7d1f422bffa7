"""`cacheproof prove --spec radix`: the radix cache's proofs and the refinement check.

Runs, under the semantics asked for (`--profile` of spec/radix/semantics.py, `--semantics
FIELD=VALUE,...`; `--all-semantics`: every profile and option): the aggregate proofs (any number
of nodes), the induction proofs in trees of up to N nodes (`--slots N`; the prove command's
default of 8 slots means the radix default, 4), and the bounded refinement check of the spec as
written (`--refine-capacity`: KV slots 1..N, default 3; `--refine-entries`: states per size,
default 25; `--no-refine` skips it). The model is the tree level, whose steps none of the
semantics' fields change (the page size, misuse and access stamps change which calls happen and
what times they write, never a lock, a count or a slot): every target proves the same
obligations, and the refinement check runs the spec under each. One line per (model, invariant,
operation); a counterexample prints as its states. Exit 0 when every obligation is proved and
the spec refines the model, 1 otherwise, 2 on a bad flag.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time

from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.prove.cache.refinement_domain import DEFAULT_BOUND as CACHE_BOUND
from cacheproof.prove.option_targets import Target, TargetReport, option_targets
from cacheproof.prove.radix import proofs, refinement
from cacheproof.prove.report import PROVES, obligation, prove_body
from cacheproof.prove.report import target as target_json
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.radix.semantics import RADIX_CONTRACT, RADIX_OPTIONS, RADIX_PROFILES

PROVE_DEFAULT_SLOTS = 8
"""`cacheproof prove`'s default --slots (the tensor cache's): read as "the radix default"."""


def targets(args: argparse.Namespace) -> list[Target]:
    """The semantics the flags ask for (cacheproof.prove.option_targets); InvalidArgumentError on an
    unknown profile or field."""
    return option_targets(args, "radix", RADIX_PROFILES, RADIX_OPTIONS, RADIX_CONTRACT)


def tree_nodes(args: argparse.Namespace) -> int:
    slots = getattr(args, "slots", PROVE_DEFAULT_SLOTS)
    return proofs.DEFAULT_NODES if slots == PROVE_DEFAULT_SLOTS else slots


def bound_of(args: argparse.Namespace) -> refinement.Bound | None:
    if getattr(args, "no_refine", False):
        return None
    """The refinement bound: --refine-capacity KV slots and --refine-entries states per size, each
    left at `cacheproof prove`'s default (the tensor cache's) read as the radix default."""
    capacity = getattr(args, "refine_capacity", CACHE_BOUND.max_capacity)
    states = getattr(args, "refine_entries", CACHE_BOUND.max_entries)
    return refinement.DEFAULT_BOUND._replace(
        max_slots=refinement.DEFAULT_BOUND.max_slots if capacity == CACHE_BOUND.max_capacity else capacity,
        max_states=refinement.DEFAULT_BOUND.max_states if states == CACHE_BOUND.max_entries else max(1, states),
    )


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": getattr(args, "json", None)})
    if problem is not None:
        print(f"cacheproof prove: {problem}", file=sys.stderr)
        return 2
    try:
        chosen = targets(args)
        nodes = tree_nodes(args)
        if nodes < 2:
            raise InvalidArgumentError(f"--slots {nodes}: the radix model needs trees of >= 2 nodes (a split makes two)")
    except InvalidArgumentError as error:
        print(f"cacheproof prove: {error}", file=sys.stderr)
        return 2
    bound = bound_of(args)
    quiet = getattr(args, "quiet", False)
    if not quiet:
        print(textwrap.fill(f"proving {PROVES['radix']}", width=100))
    started = time.perf_counter()
    results = proofs.prove(nodes)  # the same obligations under every target (the module docstring says why)
    reports = []
    for one in chosen:
        target_started = time.perf_counter()
        refined = None if bound is None else refinement.check_refinement(bound, one.semantics)
        reports.append(TargetReport(one, nodes, results, refined, time.perf_counter() - target_started))
    wall = time.perf_counter() - started
    if getattr(args, "json", None) is not None:
        refine = {} if bound is None else {"refine_slots": bound.max_slots, "refine_states": bound.max_states}
        write_report(args.json, "prove", prove_body("radix", {"nodes": nodes, **refine}, wall, [
            target_json(r.target.label, r.target.semantics, r.ok, r.seconds, [obligation(p) for p in r.results], r.refined)
            for r in reports
        ]))
    for report in reports:
        print_report(report, quiet, several=len(reports) > 1)
    if len(reports) > 1:
        print(f"\n{sum(r.ok for r in reports)}/{len(reports)} semantics proved and refined; wall {wall:.2f} s")
    return 0 if all(r.ok for r in reports) else 1


def print_report(report: TargetReport, quiet: bool, several: bool) -> None:
    results = report.results
    if several or report.target.semantics != RADIX_CONTRACT:
        differences = ", ".join(f"{k}={v}" for k, v in report.target.semantics.differences().items()) or "the contract"
        print(f"\n== semantics: {report.target.label} ({differences})")
    if not quiet and not several:
        for r in results:
            verdict = "proved" if r.proved else "COUNTEREXAMPLE"
            print(f"{r.model:<10} {r.invariant:<6} {r.operation:<8} {verdict:<16} {r.seconds * 1000:8.1f} ms")
    for r in results:
        if not r.proved and r.counterexample is not None:
            print(f"\n# counterexample: {r.invariant} / {r.operation} ({r.model})")
            print(r.counterexample.python(), end="")
    if report.refined is not None:
        for disagreement in report.refined.disagreements:
            print(f"\n# spec and model disagree: {disagreement.describe()}")
            print(disagreement.python(), end="")
    failed = sum(not r.proved for r in results)
    print(f"\n{len(results) - failed}/{len(results)} obligations proved" + (f", {failed} FAILED" if failed else "")
          + f" (trees of up to {report.size} nodes, and any number in the aggregate model); wall {report.seconds:.2f} s")
    if report.refined is not None:
        print(report.refined.line())
