"""The KV-cache block pool as a spec kind: `BlockPoolSpec`, its operation table, invariants and
profiles (docs/block-pool-contract.md)."""

from __future__ import annotations

from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS
from cacheproof.spec.blocks.operations import BLOCK_OPERATIONS, BLOCK_TYPES
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_PROFILES
from cacheproof.spec.blocks.views import BLOCK_READINGS, BLOCK_SHAPES, BLOCK_VIEW_READERS, block_step
from cacheproof.spec.kind import SpecKind

BLOCK_KIND = SpecKind(
    name="blocks",
    summary="a ref-counted KV-cache block pool with a free queue and prefix caching, and a request "
    "level on top (docs/block-pool-contract.md)",
    operations=BLOCK_OPERATIONS,
    size_name="num_blocks",
    new=BlockPoolSpec,
    invariants=BLOCK_INVARIANTS,
    profiles=BLOCK_PROFILES,
    views=("snapshot", "tables", "contents", "cached_tokens"),
    announcements=("events", "reused", "prefix_cache_stats", "boundary_states"),  # what the last call announced (spec/blocks/events.py)
    key_domains=("int",),  # the contract's request ids are ints (docs/decisions.md, Key domains per spec kind)
    keys_are="request ids",
    readings=BLOCK_READINGS,
    judge=block_step,
    types=BLOCK_TYPES,
    shapes=BLOCK_SHAPES,
    view_readers=BLOCK_VIEW_READERS,
    partitioning=None,  # never per request: the block ids a request gets come from one shared free queue, so even when
    # the free count never limits, two requests' allocations change each other's results (docs/decisions.md)
)
