"""Broken subclasses of SGLang's REAL `MultiModalStaticCache`, one bug each, and factories that pass
each through `cacheproof.engines.sglang:mm_cache(capacity_bytes, cache_class=...)`.

Each bug is one of the mutants of SGLang 0.5.23's multimodal_cache.py that cacheproof missed in the
mutation duel before the adapter read through both of SGLang's reads, took `free`'s answer and
handed out batch slices (docs/mutation-duel.md: #45, #47, #55, #50 and #39), and before the profile
checked a stored value's type (#17, argument_checks=value_type). Under the adapter's profile `sglang-mm-cache` the
unmodified class conforms and the checker must find every class here
(model_tests/engines/test_sglang_mm_cache.py). Importing this module needs SGLang (the engines
venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from sglang.srt.mem_cache.multimodal_cache import EmbeddingResult, MultiModalStaticCache

from cacheproof.engines.sglang import SglangMultiModalCache, mm_cache
from model_tests.real_file_stand_ins import SetWithoutTypeCheck


class SingleReadMissesMultiModal(MultiModalStaticCache):
    """`get_single` answers None for a stored hash (#45: its lookup line lost), so the single-item
    call site recomputes every embedding."""

    def get_single(self, mm_hash):
        return None


class SingleReadKeepsOrderMultiModal(MultiModalStaticCache):
    """`get_single` reads without making the entry newest (#47: its `move_to_end` lost), so an
    embedding read through the single-item call site is evicted as if never used."""

    def get_single(self, mm_hash):
        return self.mm_cache.get(mm_hash)


class FreeAnswersFalseMultiModal(MultiModalStaticCache):
    """`free` removes the entry but answers False (#55), so its caller believes nothing was freed."""

    def free(self, mm_hash, mm_embedding_allocator):
        super().free(mm_hash, mm_embedding_allocator)
        return False


class FreeAnswersTrueForAbsentMultiModal(MultiModalStaticCache):
    """`free` of a hash it does not hold answers True (#50), so its caller believes it freed one."""

    def free(self, mm_hash, mm_embedding_allocator):
        return super().free(mm_hash, mm_embedding_allocator) or mm_hash not in self.mm_cache


class KeepsTheBatchMultiModal(MultiModalStaticCache):
    """`set` stores an admitted slice as it is (#39: the clone lost): the entry keeps its whole
    batch alive and `current_size` counts the batch's storage, not the item's bytes."""

    def set(self, mm_hash, embedding, loc=None):
        if mm_hash in self.mm_cache:
            self.mm_cache.move_to_end(mm_hash)
            return True
        tensor = embedding.embedding
        data_size = tensor.element_size() * tensor.numel()
        if data_size > self.max_size:
            return False
        while self.current_size + data_size > self.max_size:
            if not self.mm_cache:
                return False
            _, oldest = self.mm_cache.popitem(last=False)
            self.current_size -= oldest.embedding.untyped_storage().nbytes()
        self.mm_cache[mm_hash] = EmbeddingResult(embedding=tensor)
        self.current_size += tensor.untyped_storage().nbytes()
        return True


class SetTakesAnyValueMultiModal(SetWithoutTypeCheck, MultiModalStaticCache):
    """`set` without its `assert isinstance(embedding, EmbeddingResult)` (#17): a value that is no
    EmbeddingResult is accepted for a present hash (True) and, for a new one, fails a line later
    with AttributeError instead of the assertion."""

    result_class = EmbeddingResult


BROKEN_MM_CLASSES = (SingleReadMissesMultiModal, SingleReadKeepsOrderMultiModal, FreeAnswersFalseMultiModal,
                     FreeAnswersTrueForAbsentMultiModal, KeepsTheBatchMultiModal, SetTakesAnyValueMultiModal)


def single_read_misses(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=SingleReadMissesMultiModal)


def single_read_keeps_order(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=SingleReadKeepsOrderMultiModal)


def free_answers_false(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=FreeAnswersFalseMultiModal)


def free_answers_true_for_absent(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=FreeAnswersTrueForAbsentMultiModal)


def keeps_the_batch(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=KeepsTheBatchMultiModal)


def set_takes_any_value(capacity_bytes: int) -> SglangMultiModalCache:
    return mm_cache(capacity_bytes, cache_class=SetTakesAnyValueMultiModal)


FACTORIES = {"single_read_misses": single_read_misses, "single_read_keeps_order": single_read_keeps_order,
             "free_answers_false": free_answers_false, "free_answers_true_for_absent": free_answers_true_for_absent,
             "keeps_the_batch": keeps_the_batch, "set_takes_any_value": set_takes_any_value}
"""Each broken class's factory, by name (`--impl model_tests.sglang_broken_mm:NAME`)."""
