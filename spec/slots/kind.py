"""The encoder slot budget as a spec kind: `SlotBudgetSpec`, its operation table, invariants and
profiles (docs/slots-contract.md)."""

from __future__ import annotations

from cacheproof.spec.kind import SpecKind
from cacheproof.spec.slots.budget import SlotBudgetSpec
from cacheproof.spec.slots.invariants import SLOT_INVARIANTS
from cacheproof.spec.slots.operations import SLOT_OPERATIONS, SLOT_TYPES
from cacheproof.spec.slots.semantics import SLOT_PROFILES
from cacheproof.spec.slots.views import SLOT_READINGS, SLOT_SHAPES, SLOT_VIEW_READERS, slot_step

SLOTS_KIND = SpecKind(
    name="slots",
    summary="an encoder's slot budget: a scheduled input holds its slots until freed, and the items of a step "
    "are named again at the second step's end (vLLM's EncoderDecoderCacheManager); under caching \"lru\" an "
    "item's output is cached and shared until evicted (vLLM's EncoderCacheManager; docs/slots-contract.md)",
    operations=SLOT_OPERATIONS,
    size_name="num_slots",
    new=SlotBudgetSpec,
    invariants=SLOT_INVARIANTS,
    profiles=SLOT_PROFILES,
    views=("free_slots", "pending_items", "cached_items", "holding_requests"),
    view_readers=SLOT_VIEW_READERS,
    key_domains=("int",),  # request ids are ints, as the block pool's and the radix cache's
    keys_are="request ids",
    readings=SLOT_READINGS,
    judge=slot_step,
    types=SLOT_TYPES,
    shapes=SLOT_SHAPES,
    # never per request: every request draws on the one budget, and end_step names all requests' items
    partitioning=None,
)
