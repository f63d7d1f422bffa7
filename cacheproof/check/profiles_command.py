"""`cacheproof profiles`: list the named profiles, their operations and the semantics fields where
they differ from the contract (docs/profiles.md says what each peer's code does and where)."""

from __future__ import annotations

import argparse

from cacheproof.spec.cache.profiles import PROFILES
from cacheproof.spec.cache.semantics import CONTRACT, describe_value, field_names


EXIT_STATUSES = {0: "the profiles are listed"}
EXAMPLE = "cacheproof profiles --all-fields"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all-fields", action="store_true", help="print every field, not only those that differ")


def run(args: argparse.Namespace) -> int:
    for profile in PROFILES.values():
        print(f"{profile.name}: {profile.summary}")
        print(f"  operations: {','.join(profile.operations)}")
        if profile.keys is not None:
            print(f"  keys: {profile.keys} (check --keys overrides)")
        for name in field_names():
            value = getattr(profile.semantics, name)
            if args.all_fields or value != getattr(CONTRACT, name):
                print(f"  {name}={describe_value(value)}")
    return 0
