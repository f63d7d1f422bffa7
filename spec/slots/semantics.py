"""`SlotSemantics`: the design choices on which slot budgets differ from the slot-budget contract.

Two choices: whether misuse is checked, and whether an item's output is cached. The profiles reuse
`spec.kind.Profile`; what vLLM 0.34.0's EncoderDecoderCacheManager and EncoderCacheManager do is
written next to each field (docs/engines.md gives the evidence).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cacheproof.spec.kind import Profile
from cacheproof.spec.overrides import OptionSemantics
from cacheproof.spec.slots.operations import ALL_SLOT_OPERATIONS

SLOT_OPTIONS: dict[str, tuple[Any, ...]] = {"misuse": ("checked", "trusted"), "caching": ("none", "lru")}
"""The valid values of every field."""


@dataclass(frozen=True)
class SlotSemantics(OptionSemantics):
    """One slot budget's design choices; the default is the contract's.

    - misuse: a call that breaks the contract (a free of an input the request does not hold, an
      argument of the wrong type or range) raises a typed error and changes nothing ("checked"), or
      is the caller's fault ("trusted": the budget need not check, and a checker never makes such a
      call; the spec still refuses it, having no other answer). Under "trusted" a `free(request)`
      of a request that freed one of its inputs already is misuse too: vLLM 0.34.0's
      EncoderDecoderCacheManager is "trusted" (`free_encoder_input` adds the input's embeddings to
      `num_free_slots` whether the request holds it or not, and `free(request)` calls it for every
      index of `request.mm_features`, so such a free gives an input's slots back twice). A caching
      budget ("lru") frees what the request holds, so that rule is not its.
    - caching: an item's slots are taken per input and given back when the input is freed, the item
      named by end_step a step after it was scheduled ("none": vLLM's EncoderDecoderCacheManager),
      or its encoder output is cached ("lru": vLLM's EncoderCacheManager as the scheduler drives
      it, `check_and_update_cache` before `can_allocate`): one entry per item, shared by every input
      that names it; a schedule of a cached item is a hit that needs no budget; an item no input
      holds stays cached, idle, until a schedule that does not fit evicts it (the first idle
      first), and end_step names the items evicted since the last one.
    """

    OPTIONS: ClassVar[dict[str, tuple[Any, ...]]] = SLOT_OPTIONS
    misuse: str = "checked"
    caching: str = "none"


SLOT_CONTRACT = SlotSemantics()
"""The slot-budget contract's semantics."""

SLOT_PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("contract", SLOT_CONTRACT, ALL_SLOT_OPERATIONS,
                "the encoder slot-budget contract of docs/slots-contract.md (default)"),
        Profile("contract-caching", SlotSemantics(caching="lru"), ALL_SLOT_OPERATIONS,
                "the slot-budget contract with cached encoder outputs (docs/slots-contract.md, Caching)"),
        Profile("vllm-encoder-decoder", SlotSemantics(misuse="trusted"), ALL_SLOT_OPERATIONS,
                "vLLM 0.34.0 EncoderDecoderCacheManager (can_allocate + allocate, free_encoder_input, free, "
                "get_freed_mm_hashes, reset), the scheduler's frees trusted "
                "(cacheproof.engines.vllm:encoder_decoder_slots)"),
        Profile("vllm-encoder-cache-requests", SlotSemantics(misuse="trusted", caching="lru"), ALL_SLOT_OPERATIONS,
                "vLLM 0.34.0 EncoderCacheManager as the scheduler drives it, request by request (the embeddings "
                "guard, check_and_update_cache, can_allocate + allocate, free_encoder_input, free, "
                "get_freed_mm_hashes, reset), the scheduler's frees trusted "
                "(cacheproof.engines.vllm:encoder_cache_slots)"),
    )
}
"""Every named slot-budget profile, by name."""
