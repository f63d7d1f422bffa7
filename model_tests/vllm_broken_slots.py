"""Subclasses of vLLM's REAL `EncoderDecoderCacheManager`, broken ones (one bug each) and a correct one,
and factories that pass each through `cacheproof.engines.vllm:encoder_decoder_slots(num_slots,
manager_class=...)`.

Each broken class is one mutant of vLLM 0.34.0's encoder_cache_manager.py in that class that the
mutation duel's cacheproof side missed before the slot-budget kind existed (docs/mutation-duel.md:
#124, #129, #134, #139, #144), or a bug of the tests' own (`NamesHashesAtOnce`). Under the
adapter's profile `vllm-encoder-decoder` the unmodified class and `CountsFromTheTop` conform, and
the checker must find every class of BROKEN (model_tests/engines/test_vllm_encoder_decoder.py).
Importing this module needs vLLM (the engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from vllm.v1.core.encoder_cache_manager import EncoderDecoderCacheManager

from cacheproof.engines.vllm import encoder_decoder_slots
from cacheproof.engines.vllm_slots import VllmEncoderDecoderSlots


class FreeSlotsNeverSet(EncoderDecoderCacheManager):
    """#124: `__init__` never sets `num_free_slots`, so the first `can_allocate` raises AttributeError."""

    def __init__(self, cache_size: int):
        self.cache_size = cache_size
        self.allocated: list[str] = []
        self.to_free: list[str] = []


class EmbedsNeverCounted(EncoderDecoderCacheManager):
    """#129: `can_allocate` never reads the input's embeddings, so its first comparison raises
    UnboundLocalError."""

    def can_allocate(self, request, input_id, encoder_compute_budget, num_embeds_to_schedule):
        if num_encoder_embeds > encoder_compute_budget:  # noqa: F821 - the mutant's unassigned name
            return False
        num_encoder_embeds += num_embeds_to_schedule  # noqa: F821
        return num_encoder_embeds <= self.num_free_slots


class RefusesTheLastSlots(EncoderDecoderCacheManager):
    """#134: `<` for `<=`, so an input that needs exactly the free slots is refused."""

    def can_allocate(self, request, input_id, encoder_compute_budget, num_embeds_to_schedule):
        num_encoder_embeds = request.get_num_encoder_embeds(input_id)
        if num_encoder_embeds > encoder_compute_budget:
            return False
        return num_encoder_embeds + num_embeds_to_schedule < self.num_free_slots


class HashNeverAllocated(EncoderDecoderCacheManager):
    """#139: `allocate` never puts the hash in `allocated`, so the runner never drops the output."""

    def allocate(self, request, input_id):
        self.num_free_slots -= request.get_num_encoder_embeds(input_id)


class ToFreeNeverRefilled(EncoderDecoderCacheManager):
    """#144: `get_freed_mm_hashes` never moves `allocated` to `to_free`, so no hash is ever named."""

    def get_freed_mm_hashes(self):
        to_free = self.to_free
        self.allocated = []
        return to_free


class NamesHashesAtOnce(EncoderDecoderCacheManager):
    """The tests' own: the hashes of this step are named at its end, not a step later, so the runner
    drops an encoder output before the model ran with it (the delay vLLM's comment explains)."""

    def get_freed_mm_hashes(self):
        named, self.allocated = self.allocated, []
        return named


class CountsFromTheTop(EncoderDecoderCacheManager):
    """Correct: the same budget, its admission written as the room left after the pending slots."""

    def can_allocate(self, request, input_id, encoder_compute_budget, num_embeds_to_schedule):
        needed = request.get_num_encoder_embeds(input_id)
        return needed <= encoder_compute_budget and self.num_free_slots - num_embeds_to_schedule >= needed


BROKEN = {FreeSlotsNeverSet: "#124", EmbedsNeverCounted: "#129", RefusesTheLastSlots: "#134",
          HashNeverAllocated: "#139", ToFreeNeverRefilled: "#144", NamesHashesAtOnce: "own"}
"""Each broken class, with the duel's mutant it stands for."""


def _factory(manager_class: type):
    def factory(num_slots: int) -> VllmEncoderDecoderSlots:
        return encoder_decoder_slots(num_slots, manager_class=manager_class)

    factory.__name__ = manager_class.__name__
    factory.profile = encoder_decoder_slots.profile  # checked under vllm-encoder-decoder, as the real class
    return factory


FACTORIES = {cls.__name__: _factory(cls) for cls in (*BROKEN, CountsFromTheTop)}
"""Each class's factory, by class name (`--impl model_tests.vllm_broken_slots:NAME`)."""
globals().update(FACTORIES)
