"""`SlotSemantics`: the design choices on which slot budgets differ from the slot-budget contract.

One choice: whether misuse is checked. The profiles reuse `spec.kind.Profile`; what vLLM 0.34.0's
EncoderDecoderCacheManager does is written next to the field (docs/engines.md gives the evidence).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cacheproof.spec.kind import Profile
from cacheproof.spec.overrides import OptionSemantics
from cacheproof.spec.slots.operations import ALL_SLOT_OPERATIONS

SLOT_OPTIONS: dict[str, tuple[Any, ...]] = {"misuse": ("checked", "trusted")}
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
      index of `request.mm_features`, so such a free gives an input's slots back twice).
    """

    OPTIONS: ClassVar[dict[str, tuple[Any, ...]]] = SLOT_OPTIONS
    misuse: str = "checked"


SLOT_CONTRACT = SlotSemantics()
"""The slot-budget contract's semantics."""

SLOT_PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("contract", SLOT_CONTRACT, ALL_SLOT_OPERATIONS,
                "the encoder slot-budget contract of docs/slots-contract.md (default)"),
        Profile("vllm-encoder-decoder", SlotSemantics(misuse="trusted"), ALL_SLOT_OPERATIONS,
                "vLLM 0.34.0 EncoderDecoderCacheManager (can_allocate + allocate, free_encoder_input, free, "
                "get_freed_mm_hashes, reset), the scheduler's frees trusted "
                "(cacheproof.engines.vllm:encoder_decoder_slots)"),
    )
}
"""Every named slot-budget profile, by name."""
