"""`cacheproof prove --spec KIND` for the kinds whose semantics are plain options
(`spec.overrides.OptionSemantics`: the block pool, the radix cache): which semantics a run proves
under, and the run itself, written once; each kind declares its `OptionProver` (its models, its
size, its refinement bound, its lines).

Rule: `--profile NAME` with `--semantics FIELD=VALUE,...` is one target; `--all-semantics` is every
profile, then the contract with each field set to each of its other values, in field order, and
refuses --profile and --semantics beside it. An unknown profile, field or value is an
InvalidArgumentError naming it and the valid ones.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from dataclasses import replace
from typing import Any, Callable, NamedTuple

from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.prove.induction import ProofResult
from cacheproof.prove.report import PROVES, obligation, prove_body
from cacheproof.prove.report import target as target_json
from cacheproof.spec.errors import InvalidArgumentError

PROVE_DEFAULT_SLOTS = 8
"""`cacheproof prove`'s default --slots (the tensor cache's): read as "the kind's default size"."""

CACHE_DEFAULT_PROFILE = "contract"
"""`cacheproof prove`'s default --profile (the tensor cache's), which every option kind also has."""


class Target(NamedTuple):
    """Semantics to prove under, and how to name them: a profile's name, or `field=value`."""

    label: str
    semantics: Any


def option_targets(args: argparse.Namespace, words: str, profiles: dict[str, Any], options: dict[str, tuple],
                   contract: Any) -> list[Target]:
    """The targets the flags ask for among `profiles` (named in errors as "the `words` profiles")."""
    profile = getattr(args, "profile", CACHE_DEFAULT_PROFILE)
    overrides = getattr(args, "semantics", "")
    if getattr(args, "all_semantics", False):
        if profile != CACHE_DEFAULT_PROFILE or overrides:
            raise InvalidArgumentError("--all-semantics proves every profile and option; leave out --profile and --semantics")
        found = [Target(name, p.semantics) for name, p in profiles.items()]
        for name, values in options.items():
            default = getattr(contract, name)
            found += [Target(f"{name}={v}", replace(contract, **{name: v})) for v in values if v != default]
        return found
    if profile not in profiles:
        raise InvalidArgumentError(f"--profile {profile!r}: the {words} profiles are {', '.join(profiles)}")
    semantics = profiles[profile].semantics.with_overrides(overrides)
    return [Target(profile + (f" with {overrides}" if overrides else ""), semantics)]


class TargetReport(NamedTuple):
    """The proofs under one target: `size` is the bounded model's (blocks, tree nodes), `refined`
    the refinement check's verdict (None: skipped); ok when every obligation is proved and the spec
    refines the model."""

    target: Target
    size: int
    results: list[ProofResult]
    refined: Any
    seconds: float

    @property
    def ok(self) -> bool:
        return all(r.proved for r in self.results) and (self.refined is None or self.refined.agrees)


class OptionProver(NamedTuple):
    """What `cacheproof prove --spec KIND` runs for one option kind.

    `words` names the kind in errors ("the block profiles"); `default_size` is the bounded model's
    size when --slots is left at `cacheproof prove`'s default, and a size below 2 is refused with
    `size_rule`; `size_field` names it in the JSON report. `bound(args)` is the refinement bound
    (None under --no-refine) and `bound_fields(bound)` its JSON fields. `prove(size, semantics)`
    gives every obligation, `refine(bound, semantics)` the refinement verdict. `result_lines` are
    the per-obligation lines (not under --quiet), `size_words(report)` closes the totals line."""

    kind: str
    words: str
    profiles: dict[str, Any]
    options: dict[str, tuple]
    contract: Any
    default_size: int
    size_rule: str
    size_field: str
    bound: Callable[[argparse.Namespace], Any]
    bound_fields: Callable[[Any], dict[str, int]]
    prove: Callable[[int, Any], list[ProofResult]]
    refine: Callable[[Any, Any], Any]
    result_lines: Callable[[list[ProofResult]], list[str]]
    size_words: Callable[["TargetReport"], str]


def run_option_kind(args: argparse.Namespace, prover: OptionProver) -> int:
    """Prove every target the flags ask for; exit 0 when each is proved and refined, 1 otherwise,
    2 on a bad flag (printed in one line, nothing proved)."""
    if refuse_unwritable("prove", {"--json": getattr(args, "json", None)}):
        return 2
    try:
        chosen = option_targets(args, prover.words, prover.profiles, prover.options, prover.contract)
        slots = getattr(args, "slots", PROVE_DEFAULT_SLOTS)
        size = prover.default_size if slots == PROVE_DEFAULT_SLOTS else slots
        if size < 2:
            raise InvalidArgumentError(f"--slots {size}: {prover.size_rule}")
    except InvalidArgumentError as error:
        print(f"cacheproof prove: {error}", file=sys.stderr)
        return 2
    bound = prover.bound(args)
    quiet = getattr(args, "quiet", False)
    if not quiet:
        print(textwrap.fill(f"proving {PROVES[prover.kind]}", width=100))
    started = time.perf_counter()
    reports = []
    for one in chosen:
        target_started = time.perf_counter()
        results = prover.prove(size, one.semantics)
        refined = None if bound is None else prover.refine(bound, one.semantics)
        reports.append(TargetReport(one, size, results, refined, time.perf_counter() - target_started))
    wall = time.perf_counter() - started
    if getattr(args, "json", None) is not None:
        refine = {} if bound is None else prover.bound_fields(bound)
        write_report(args.json, "prove", prove_body(prover.kind, {prover.size_field: size, **refine}, wall, [
            target_json(r.target.label, r.target.semantics, r.ok, r.seconds, [obligation(p) for p in r.results], r.refined)
            for r in reports
        ]))
    for report in reports:
        _print_report(report, prover, quiet, several=len(reports) > 1)
    if len(reports) > 1:
        print(f"\n{sum(r.ok for r in reports)}/{len(reports)} semantics proved and refined; wall {wall:.2f} s")
    return 0 if all(r.ok for r in reports) else 1


def _print_report(report: TargetReport, prover: OptionProver, quiet: bool, several: bool) -> None:
    results = report.results
    if several or report.target.semantics != prover.contract:
        differences = ", ".join(f"{k}={v}" for k, v in report.target.semantics.differences().items()) or "the contract"
        print(f"\n== semantics: {report.target.label} ({differences})")
    if not quiet:
        for line in prover.result_lines(results):
            print(line)
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
    print(f"\n{len(results) - failed}/{len(results)} obligations proved" + (f", {failed} FAILED" if failed else "")
          + f"{prover.size_words(report)}; wall {report.seconds:.2f} s")
    if report.refined is not None:
        print(report.refined.line())
