"""`cacheproof profiles`: list every spec kind's named profiles, grouped by kind, with their
operations and the semantics fields where they differ from the kind's contract (docs/profiles.md
says what each peer's code does and where; docs/block-pool-contract.md the block pool's)."""

from __future__ import annotations

import argparse

from cacheproof.cmdline.kind_words import every_kind
from cacheproof.spec.kind import Profile, SpecKind

EXIT_STATUSES = {0: "the profiles are listed"}
EXAMPLE = "cacheproof profiles --all-fields"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all-fields", action="store_true", help="print every field, not only those that differ")


def run(args: argparse.Namespace) -> int:
    for kind in every_kind():
        print(f"--spec {kind.name}: {kind.summary}")
        for profile in kind.profiles.values():
            print("\n".join(profile_lines(kind, profile, args.all_fields)))
    return 0


def profile_lines(kind: SpecKind, profile: Profile, all_fields: bool) -> list[str]:
    """One profile of `kind`: its name and summary, operations, key domain, and its semantics
    fields (those that differ from the kind's contract, or all of them)."""
    contract = kind.profiles[kind.default_profile].semantics.as_written()
    lines = [f"  {profile.name}: {profile.summary}", f"    operations: {','.join(profile.operations)}"]
    if profile.keys is not None:
        lines.append(f"    keys: {profile.keys} (check --keys overrides)")
    lines += [f"    {name}={value}" for name, value in profile.semantics.as_written().items()
              if all_fields or value != contract[name]]
    return lines
