"""`RadixSemantics`: the design choices on which radix caches differ from the radix contract.

One choice: the page size, the granularity at which the tree matches, inserts and splits
(SGLang's `page_size`; 1 is its token-level RadixCache). The profiles reuse `spec.kind.Profile`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cacheproof.spec.kind import Profile
from cacheproof.spec.overrides import OptionSemantics
from cacheproof.spec.radix.operations import ALL_RADIX_OPERATIONS, TREE_OPERATIONS

RADIX_OPTIONS: dict[str, tuple[Any, ...]] = {"page_size": (1, 2, 4)}
"""The valid values of every field."""


@dataclass(frozen=True)
class RadixSemantics(OptionSemantics):
    """One radix cache's design choices; every default is the contract's.

    - page_size: node keys, matches and inserts are whole pages of this many tokens; a match ending
      inside a page stops at the page's start, and a node is split only at a page boundary.
    """

    OPTIONS: ClassVar[dict[str, tuple[Any, ...]]] = RADIX_OPTIONS
    page_size: int = 1


RADIX_CONTRACT = RadixSemantics()
"""The radix contract's semantics (page size 1)."""

RADIX_PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("contract", RADIX_CONTRACT, ALL_RADIX_OPERATIONS,
                "the radix-cache contract of docs/radix-contract.md (default), tree and request level, page size 1"),
        Profile("tree", RADIX_CONTRACT, TREE_OPERATIONS,
                "the radix-cache contract at the tree level only, for a tree with no request level"),
        Profile("paged", RadixSemantics(page_size=2), ALL_RADIX_OPERATIONS,
                "the radix-cache contract with pages of 2 tokens (SGLang's paged RadixCache, page_size=2)"),
    )
}
"""Every named radix profile, by name."""
