"""Subclasses of vLLM's REAL `EncoderDecoderCacheManager` and `EncoderCacheManager`, broken ones (one
bug each) and a correct one of each, and factories that pass each through
`cacheproof.engines.vllm:encoder_decoder_slots(num_slots, manager_class=...)` or `:encoder_cache_slots`.

The EncoderCacheManager classes are the duel's mutants of that class that only vLLM's tests killed
while the manager was checked key by key alone (the tensor-cache kind has no compute budget and no
requests): #27, #28, #92, #93. Under `vllm-encoder-cache-requests` the unmodified class and
`FreedFilteredOnce` conform, and the checker must find every class of CACHING_BROKEN
(model_tests/engines/test_vllm_slots.py).

Each broken class is one mutant of vLLM 0.34.0's encoder_cache_manager.py in that class that the
mutation duel's cacheproof side missed before the slot-budget kind existed (docs/mutation-duel.md:
#124, #129, #134, #139, #144), or a bug of the tests' own (`NamesHashesAtOnce`). Under the
adapter's profile `vllm-encoder-decoder` the unmodified class and `CountsFromTheTop` conform, and
the checker must find every class of BROKEN (model_tests/engines/test_vllm_slots.py).
Importing this module needs vLLM (the engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from vllm.v1.core.encoder_cache_manager import EncoderCacheManager, EncoderDecoderCacheManager

from cacheproof.engines.vllm import encoder_cache_slots, encoder_decoder_slots


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


class OverBudgetAdmitted(EncoderCacheManager):
    """#27: an input over the encoder's compute budget is admitted at once (`return True`), without
    asking for room either."""

    def can_allocate(self, request, input_id, encoder_compute_budget, num_embeds_to_schedule):
        if request.get_num_encoder_embeds(input_id) > encoder_compute_budget:
            return True
        return super().can_allocate(request, input_id, encoder_compute_budget, num_embeds_to_schedule)


class PendingSubtracted(EncoderCacheManager):
    """#28: the embeddings already scheduled in this pass are subtracted from the input's, not added,
    so the pass admits more than the cache holds."""

    def can_allocate(self, request, input_id, encoder_compute_budget, num_embeds_to_schedule):
        return super().can_allocate(request, input_id, encoder_compute_budget, -num_embeds_to_schedule)


class CachedIdsKept(EncoderCacheManager):
    """#92: the emptied `request_cached_ids` entry of a request whose last cached input was freed
    stays: one empty set per finished request, for ever."""

    def free_encoder_input(self, request, input_id):
        had = request.request_id in self.request_cached_ids
        super().free_encoder_input(request, input_id)
        if had:
            self.request_cached_ids.setdefault(request.request_id, set())


class HashRefsKept(EncoderCacheManager):
    """#93: the emptied `request_hash_refs` entry stays, as #92's does."""

    def free_encoder_input(self, request, input_id):
        had = request.request_id in self.request_hash_refs
        super().free_encoder_input(request, input_id)
        if had:
            self.request_hash_refs.setdefault(request.request_id, {})


class FreedFilteredOnce(EncoderCacheManager):
    """Correct: the evicted hashes still cached are filtered out against a set built once."""

    def get_freed_mm_hashes(self):
        cached = set(self.cached)
        named, self.freed = [item for item in self.freed if item not in cached], []
        return named


CACHING_BROKEN = {OverBudgetAdmitted: "#27", PendingSubtracted: "#28", CachedIdsKept: "#92", HashRefsKept: "#93"}
"""Each broken EncoderCacheManager, with the duel's mutant it stands for."""

BROKEN = {FreeSlotsNeverSet: "#124", EmbedsNeverCounted: "#129", RefusesTheLastSlots: "#134",
          HashNeverAllocated: "#139", ToFreeNeverRefilled: "#144", NamesHashesAtOnce: "own"}
"""Each broken class, with the duel's mutant it stands for."""


def _factory(manager_class: type, adapter):
    def factory(num_slots: int):
        return adapter(num_slots, manager_class=manager_class)

    factory.__name__ = manager_class.__name__
    factory.profile = adapter.profile  # checked under the real class's profile
    return factory


FACTORIES = {
    **{cls.__name__: _factory(cls, encoder_decoder_slots) for cls in (*BROKEN, CountsFromTheTop)},
    **{cls.__name__: _factory(cls, encoder_cache_slots) for cls in (*CACHING_BROKEN, FreedFilteredOnce)},
}
"""Each class's factory, by class name (`--impl model_tests.vllm_broken_slots:NAME`)."""
globals().update(FACTORIES)
