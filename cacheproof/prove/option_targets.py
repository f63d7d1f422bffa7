"""The semantics a `cacheproof prove --spec KIND` run proves under, for the kinds whose semantics
are plain options (`spec.overrides.OptionSemantics`: the block pool, the radix cache).

Rule: `--profile NAME` with `--semantics FIELD=VALUE,...` is one target; `--all-semantics` is every
profile, then the contract with each field set to each of its other values, in field order, and
refuses --profile and --semantics beside it. An unknown profile, field or value is an
InvalidArgumentError naming it and the valid ones.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any, NamedTuple

from cacheproof.prove.induction import ProofResult

from cacheproof.spec.errors import InvalidArgumentError

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
