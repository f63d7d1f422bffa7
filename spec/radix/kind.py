"""The radix prefix cache as a spec kind: `RadixCacheSpec`, its operation table, invariants and
profiles (docs/radix-contract.md)."""

from __future__ import annotations

from cacheproof.spec.kind import SpecKind
from cacheproof.spec.radix.invariants import RADIX_INVARIANTS
from cacheproof.spec.radix.operations import RADIX_OPERATIONS, RADIX_TYPES
from cacheproof.spec.radix.semantics import RADIX_PROFILES
from cacheproof.spec.radix.tree import RadixCacheSpec
from cacheproof.spec.radix.views import RADIX_READINGS, RADIX_SHAPES, RADIX_VIEW_READERS, radix_step

RADIX_KIND = SpecKind(
    name="radix",
    summary="a radix tree of token runs owning KV slots, with lock counts and LRU eviction of unlocked "
    "leaves (SGLang's RadixAttention), and a request level on top (docs/radix-contract.md)",
    operations=RADIX_OPERATIONS,
    size_name="num_slots",
    new=RadixCacheSpec,
    invariants=RADIX_INVARIANTS,
    profiles=RADIX_PROFILES,
    views=("snapshot",),
    announcements=("events",),  # what the last call announced (spec/radix/events.py)
    view_readers=RADIX_VIEW_READERS,
    key_domains=("int",),  # request ids are ints, as the block pool's (docs/decisions.md)
    keys_are="request ids",
    readings=RADIX_READINGS,
    judge=radix_step,
    types=RADIX_TYPES,
    shapes=RADIX_SHAPES,
    partitioning=None,  # never per request: requests share the tree's nodes and slots, so one's insert splits or locks
    # what another's match returns (docs/decisions.md)
)
