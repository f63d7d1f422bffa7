"""`cacheproof prove`: z3 proofs that every operation of the spec's model keeps the invariants, from
the spec's rules; never about a user's cache (`cacheproof.prove.report.PROVES` says what, per kind).

Three models, all calling `cacheproof.spec.cache.rules` (and the per-entry one `cacheproof.spec.cache.steps`)
at proof time: the aggregate model (byte counts, unbounded, any number of entries), the liveness
facts L1-L3 over it, and the per-entry model of N symbolic slots. One line per (model, invariant,
operation), summing its outcomes' times; a failed proof prints its counterexample as runnable
Python. Then the bounded refinement check (refinement.py): on every small state and call,
the spec does what the per-entry model says; one line, and a runnable snippet per
disagreement. Exit 0 when everything is proved and the spec refines the model, 1 otherwise.

Semantics (spec/cache/semantics.py) are proved one at a time, as concrete data: `--profile NAME` and
`--semantics FIELD=VALUE,...` pick one (default: the contract); `--all-semantics` runs every
profile and every single option. Under each, the models take their branches from the same
`Semantics` object the spec runs, and the refinement check runs under it too. An invariant that
does not hold under an option (spec/cache/invariants.py `WAIVERS`) is still proved and reported as
"does not hold under field=value" with its counterexample; a waiver the proofs cannot confirm
fails the run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from cacheproof.cmdline.flag_types import integer_at_least, positive_integer
from cacheproof.cmdline.kind_words import per_kind
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.prove import block_ids
from cacheproof.prove.cache import aggregate_model
from cacheproof.prove.cache import entry_model
from cacheproof.prove.cache import liveness
from cacheproof.prove.cache import refinement
from cacheproof.prove.induction import ProofResult
from cacheproof.prove.option_targets import Target
from cacheproof.prove.report import PROVES, obligation, prove_body
from cacheproof.prove.report import target as target_json
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import DEFAULT_KIND, kind_names
from cacheproof.spec.cache.invariants import waivers
from cacheproof.spec.cache.profiles import DEFAULT_PROFILE, PROFILES, profile_named
from cacheproof.spec.cache.semantics import CONTRACT, OPTIONS, REFRESHING_CALLS, Semantics, describe_value, field_names

__all__ = ["ProofResult", "Target", "add_arguments", "prove_all", "run", "semantic_targets"]

DEFAULT_SLOTS = 8

_KIND_PROVERS = {"blocks": "cacheproof.prove.blocks.command", "radix": "cacheproof.prove.radix.command"}
"""The prover of each spec kind other than the cache (whose proofs this module runs)."""

SPEC_INDEPENDENT_FIELDS = ("snapshot_order",)
"""`Semantics` fields the spec never reads (they tell the checker what to compare): no proof varies them."""

UNMODELLED_FIELDS = ("abandoned_reservation", "commit_size")
"""`Semantics` fields the z3 models do not have (vLLM 0.34's encoder cache as shipped: an idle
reservation, an output's size unchecked); `cacheproof check` holds a cache to them, and a proof
under semantics that set one is of those semantics with it at the contract's value, its label
saying so (`modelled`)."""


def modelled(label: str, semantics: Semantics) -> Target:
    """The target proved for `semantics`: the unmodelled fields it sets put back to the contract's
    values, and the label naming them."""
    dropped = {name: getattr(CONTRACT, name) for name in UNMODELLED_FIELDS if getattr(semantics, name) != getattr(CONTRACT, name)}
    if not dropped:
        return Target(label, semantics)
    left_out = ", ".join(f"{name}={describe_value(getattr(semantics, name))}" for name in dropped)
    return Target(f"{label} without {left_out} (not modelled: checked only)", replace(semantics, **dropped))


def prove_all(slots: int = DEFAULT_SLOTS, semantics: Semantics = CONTRACT) -> list[ProofResult]:
    """Every proof obligation under `semantics`: aggregate, liveness, then the per-entry model
    with `slots` slots. Counterexamples to a waived invariant are marked (`ProofResult.waived`)."""
    return aggregate_model.prove(semantics) + liveness.prove(semantics) + entry_model.prove(slots, semantics)


def semantic_targets() -> list[Target]:
    """Every named profile, then every single option: the contract with one field changed to
    each of its other values (refresh_on: one call added or removed), in field order."""
    targets = [modelled(name, profile.semantics) for name, profile in PROFILES.items()]
    for name in field_names():
        if name in SPEC_INDEPENDENT_FIELDS or name in UNMODELLED_FIELDS:
            continue
        default = getattr(CONTRACT, name)
        if name == "refresh_on":
            values = [default ^ {call} for call in REFRESHING_CALLS]
        else:
            values = [value for value in OPTIONS[name] if value != default]
        targets += [Target(f"{name}={describe_value(value)}", replace(CONTRACT, **{name: value})) for value in values]
    return targets


def unconfirmed_waivers(results: list[ProofResult], semantics: Semantics) -> list[str]:
    """Invariants waived under `semantics` that no obligation found a counterexample to: the
    waiver table (spec/cache/invariants.py `WAIVERS`) says more than the proofs show."""
    broken = {r.invariant for r in results if not r.proved}
    return [
        f"{name} is waived under {', '.join(w.option for w in found)} (spec/cache/invariants.py WAIVERS), "
        "yet every obligation proved it"
        for name, found in waivers(semantics).items()
        if name not in broken
    ]


EXIT_STATUSES = {0: "every obligation is proved (or does not hold exactly as waived) and the spec refines the model",
                 1: "a counterexample to an obligation, a disagreement of spec and model, or a waiver not confirmed"}
EXAMPLE = "cacheproof prove --all-semantics --json proofs.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "\n\n".join(
        textwrap.fill(f"{what}: proves {PROVES[kind]}", width=100) for kind, what in (
            ("cache", "cacheproof prove"), ("blocks", "--spec blocks"), ("radix", "--spec radix"),
            ("block-table", "--block-table")))
    parser.add_argument(
        "--spec", default=DEFAULT_KIND, choices=kind_names(),
        help=f"the spec kind to prove (default {DEFAULT_KIND}): {per_kind(lambda kind: kind.summary)}",
    )
    parser.add_argument(
        "--block-table", action="store_true",
        help="prove the block-table kernels' index arithmetic instead (cacheproof.prove.block_ids)",
    )
    parser.add_argument("--slots", metavar="N", type=positive_integer, default=DEFAULT_SLOTS, help="slots of the per-entry model (default 8)")
    parser.add_argument(
        "--profile", metavar="NAME",
        default=DEFAULT_PROFILE,
        help=f"prove under this profile's semantics, per kind: {per_kind(lambda kind: ', '.join(kind.profiles))} "
        f"(default {DEFAULT_PROFILE})",
    )
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...", help="override fields of the profile's semantics")
    parser.add_argument(
        "--all-semantics",
        action="store_true",
        help="prove under every profile and every single option (one run each), with the refinement check under each",
    )
    parser.add_argument(
        "--refine-capacity", metavar="N",
        type=positive_integer,
        default=refinement.DEFAULT_BOUND.max_capacity,
        help=f"refinement check: capacities 1..N (default {refinement.DEFAULT_BOUND.max_capacity})",
    )
    parser.add_argument(
        "--refine-entries", metavar="N",
        type=integer_at_least(0),
        default=refinement.DEFAULT_BOUND.max_entries,
        help=f"refinement check: states of at most N entries (default {refinement.DEFAULT_BOUND.max_entries})",
    )
    parser.add_argument("--no-refine", action="store_true", help="skip the bounded refinement check")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write every obligation and its verdict, with counterexamples, as JSON to this path (docs/reports.md)")
    parser.add_argument("--quiet", action="store_true", help="print only counterexamples and the verdict")


def _targets(args: argparse.Namespace) -> list[Target]:
    """The semantics the flags ask for; InvalidArgumentError on an unknown profile or field."""
    if args.all_semantics:
        if args.profile != DEFAULT_PROFILE or args.semantics:
            raise InvalidArgumentError("--all-semantics proves every profile and option; leave out --profile and --semantics")
        return semantic_targets()
    semantics = profile_named(args.profile).semantics.with_overrides(args.semantics)
    label = args.profile + (f" with {args.semantics}" if args.semantics else "")
    return [modelled(label, semantics)]


class TargetReport(NamedTuple):
    """The proofs and the refinement check under one target."""

    target: Target
    results: list[ProofResult]
    refined: refinement.RefinementReport | None
    unconfirmed: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        proved = not any(r.failed for r in self.results) and not self.unconfirmed
        return proved and (self.refined is None or self.refined.agrees)


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("prove", {"--json": args.json}):
        return 2
    if args.block_table:
        return block_ids.main(args.json, quiet=args.quiet)
    if args.spec != DEFAULT_KIND:
        if args.spec not in _KIND_PROVERS:
            print(f"cacheproof prove: --spec {args.spec} has no z3 model of its invariants yet; "
                  f"check it with `cacheproof check --spec {args.spec}`", file=sys.stderr)
            return 2
        return importlib.import_module(_KIND_PROVERS[args.spec]).run(args)
    try:
        targets = _targets(args)
    except InvalidArgumentError as error:
        print(f"cacheproof prove: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(textwrap.fill(f"proving {PROVES[DEFAULT_KIND]}", width=100))
    started = time.perf_counter()
    bound = refinement.DEFAULT_BOUND._replace(max_capacity=args.refine_capacity, max_entries=args.refine_entries)
    reports = []
    for target in targets:
        target_started = time.perf_counter()
        pending = None if args.no_refine else refinement.PendingRefinement(bound, target.semantics)
        try:
            results = prove_all(args.slots, target.semantics)
            refined = None if pending is None else pending.report()
        finally:
            if pending is not None:
                pending.cancel()
        report = TargetReport(
            target, results, refined, unconfirmed_waivers(results, target.semantics), time.perf_counter() - target_started
        )
        reports.append(report)
    wall = time.perf_counter() - started
    if args.json is not None:  # the file first: a closed output pipe cannot lose it
        refine = {"refine_capacity": args.refine_capacity, "refine_entries": args.refine_entries}
        bound_json = {"slots": args.slots, **({} if args.no_refine else refine)}
        write_report(args.json, "prove", prove_body(DEFAULT_KIND, bound_json, wall, [
            target_json(r.target.label, r.target.semantics, r.ok, r.seconds, [obligation(p) for p in r.results],
                   r.refined, r.unconfirmed)
            for r in reports
        ]))
    for report in reports:
        _print_target(args, report, several=len(reports) > 1)
    if len(reports) > 1:
        print(f"\n{sum(r.ok for r in reports)}/{len(reports)} semantics proved and refined; wall {wall:.2f} s")
    return 0 if all(r.ok for r in reports) else 1


def _print_target(args: argparse.Namespace, report: TargetReport, several: bool) -> None:
    target, results, refined = report.target, report.results, report.refined
    if several or target.semantics != CONTRACT:
        print(f"\n== semantics: {target.label} ({describe_semantics(target.semantics)})")
    if not args.quiet and not several:
        for line in summary_lines(results):
            print(line)
    for result in results:
        if result.counterexample is not None and (result.failed or not several or not args.quiet):
            print(f"\n# {_verdict_word(result)}: {result.invariant} / {result.operation} -> {result.outcome} ({result.model})")
            print(result.counterexample.python(), end="")
    if refined is not None:
        for disagreement in refined.disagreements:
            print(f"\n# spec and model disagree: {disagreement.describe()}")
            print(disagreement.python(), end="")
    for problem in report.unconfirmed:
        print(f"\n# waiver not confirmed: {problem}")
    totals = model_seconds(results)
    failed = sum(r.failed for r in results)
    waived = [r for r in results if r.waived is not None]
    print(
        f"\n{len(results) - failed - len(waived)}/{len(results)} obligations proved"
        + (f", {len(waived)} do not hold as waived ({_waived_summary(waived)})" if waived else "")
        + (f", {failed} FAILED" if failed else "")
        + "; solver seconds: "
        + ", ".join(f"{model} {seconds:.3f}" for model, seconds in totals.items())
        + f" (slots={args.slots}); wall {report.seconds:.2f} s"
    )
    if refined is not None:
        print(refined.line())


def _verdict_word(result: ProofResult) -> str:
    return f"does not hold under {result.waived}: counterexample" if result.waived else "counterexample"


def _waived_summary(waived: list[ProofResult]) -> str:
    by_invariant: dict[str, str] = {}
    for r in waived:
        by_invariant.setdefault(r.invariant, r.waived or "")
    return "; ".join(f"{name} under {options}" for name, options in by_invariant.items())


def describe_semantics(semantics: Semantics) -> str:
    """The fields that differ from the contract, as `field=value` (or "the contract")."""
    differences = semantics.differences()
    return ", ".join(f"{name}={describe_value(value)}" for name, value in differences.items()) or "the contract"


def summary_lines(results: list[ProofResult]) -> list[str]:
    """One line per (model, invariant, operation): proved, does not hold (waived), or the outcomes
    with a counterexample."""
    groups: dict[tuple[str, str, str], list[ProofResult]] = {}
    for result in results:
        groups.setdefault((result.model, result.invariant, result.operation), []).append(result)
    lines = []
    for (model, invariant, operation), group in groups.items():
        failed = [r.outcome for r in group if r.failed]
        waived = [r for r in group if r.waived is not None]
        if failed:
            verdict = "COUNTEREXAMPLE (" + ", ".join(failed) + ")"
        elif waived:
            verdict = f"does not hold under {waived[0].waived} (" + ", ".join(r.outcome for r in waived) + ")"
        else:
            verdict = "proved"
        seconds = sum(r.seconds for r in group)
        lines.append(f"{model:<10} {invariant:<6} {operation:<17} {verdict:<40} {seconds * 1000:8.1f} ms")
    return lines


def model_seconds(results: list[ProofResult]) -> dict[str, float]:
    """Solver seconds per model."""
    totals: dict[str, float] = {}
    for result in results:
        totals[result.model] = totals.get(result.model, 0.0) + result.seconds
    return totals
