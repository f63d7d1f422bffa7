"""Stand-ins for the engines' own cache classes, with their public interfaces and behaviour as
docs/profiles.md and docs/adapters.md describe them (written here, not copied), so that the
adapters in examples/trtllm_adapter.py, vllm_adapter.py and sglang_adapter.py run in CI where
tensorrt_llm, vllm and sglang are not installed. Where an engine is installed, the adapters'
`factory` runs its real class instead (model_tests/test_engine_adapters.py)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable, NamedTuple

from examples.sglang_adapter import SglangStaticCacheAdapter
from examples.trtllm_adapter import TrtllmTensorLRUAdapter
from examples.vllm_adapter import VllmEncoderCacheAdapter


def _nbytes(tensor: Any) -> int:
    return tensor.numel() * tensor.element_size()


# TensorRT-LLM: tensorrt_llm/_torch/tensor_lru_cache.py, TensorLRUCache (upstream) --------------------


class _TrtllmEntry(NamedTuple):
    value: Any
    size_bytes: int


class _TrtllmStats(NamedTuple):
    max_bytes: int
    current_bytes: int
    item_count: int


class StandInTensorLRUCache:
    """Byte LRU: put refuses (False) a tensor over max_bytes, else replaces the key as newest and
    evicts oldest entries until within max_bytes; get/pop answer a miss with None; get promotes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.current_bytes = 0
        self._items: OrderedDict[Hashable, _TrtllmEntry] = OrderedDict()

    def put(self, key: Hashable, value: Any) -> bool:
        size = _nbytes(value)
        if size > self.max_bytes:
            return False
        old = self._items.pop(key, None)
        if old is not None:
            self.current_bytes -= old.size_bytes
        self._items[key] = _TrtllmEntry(value, size)
        self.current_bytes += size
        while self.current_bytes > self.max_bytes:
            self.current_bytes -= self._items.popitem(last=False)[1].size_bytes
        return True

    def get(self, key: Hashable) -> Any:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key].value

    def pop(self, key: Hashable) -> Any:
        entry = self._items.pop(key, None)
        if entry is None:
            return None
        self.current_bytes -= entry.size_bytes
        return entry.value

    def clear(self) -> None:
        self._items.clear()
        self.current_bytes = 0

    def stats(self) -> _TrtllmStats:
        return _TrtllmStats(self.max_bytes, self.current_bytes, len(self._items))

    def __len__(self) -> int:
        return len(self._items)


# vLLM: vllm/v1/core/encoder_cache_manager.py, EncoderCacheManager ((request, input_id) methods) -----


class StandInEncoderCacheManager:
    """Slots bookkeeping by request-id sets; idle entries in `freeable`, oldest idle first;
    can_allocate evicts from its front until the item fits; freed hashes collect in `freed`."""

    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.num_free_slots = self.num_freeable_slots = cache_size
        self.cached: dict[Hashable, set[str]] = {}
        self.freeable: OrderedDict[Hashable, int] = OrderedDict()
        self.freed: list[Hashable] = []

    def check_and_update_cache(self, request: Any, input_id: int) -> bool:
        key = request.mm_features[input_id].identifier
        if key not in self.cached:
            return False
        if not self.cached[key]:
            self.num_freeable_slots -= self.freeable.pop(key)
        self.cached[key].add(request.request_id)
        return True

    def can_allocate(self, request: Any, input_id: int, encoder_compute_budget: int, num_embeds_to_schedule: int,
                     ) -> bool:
        size = request.get_num_encoder_embeds(input_id)
        if size > encoder_compute_budget:
            return False
        size += num_embeds_to_schedule
        if size > self.num_freeable_slots:
            return False
        while size > self.num_free_slots:
            key, freed_size = self.freeable.popitem(last=False)
            del self.cached[key]
            self.freed.append(key)
            self.num_free_slots += freed_size
        return True

    def allocate(self, request: Any, input_id: int) -> None:
        size = request.get_num_encoder_embeds(input_id)
        assert self.num_free_slots >= size and self.num_freeable_slots >= size
        self.cached.setdefault(request.mm_features[input_id].identifier, set()).add(request.request_id)
        self.num_free_slots -= size
        self.num_freeable_slots -= size

    def free_encoder_input(self, request: Any, input_id: int) -> None:
        key = request.mm_features[input_id].identifier
        if not self.cached.get(key):
            return
        self.cached[key].discard(request.request_id)
        if not self.cached[key]:
            self.freeable[key] = request.get_num_encoder_embeds(input_id)
            self.num_freeable_slots += self.freeable[key]

    def get_freed_mm_hashes(self) -> list[Hashable]:
        freed, self.freed = self.freed, []
        return freed

    def reset(self) -> None:
        self.cached.clear()
        self.freeable.clear()
        self.freed.clear()
        self.num_free_slots = self.num_freeable_slots = self.cache_size


# SGLang: python/sglang/srt/mem_cache/multimodal_cache.py, MultiModalStaticCache -----------------------


@dataclass(kw_only=True)
class StandInEmbeddingResult:
    embedding: Any


class StandInMultiModalStaticCache:
    """OrderedDict LRU in bytes. set of a present hash keeps it and makes it newest; otherwise it
    pops the oldest entries until the embedding fits, returning False once none is left, so an
    embedding larger than the whole cache first evicts everything (the bug docs/profiles.md names)."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self.mm_cache: OrderedDict[int, StandInEmbeddingResult] = OrderedDict()
        self.current_size = 0

    @staticmethod
    def combine_hashes(mm_hashes: list) -> int | None:
        return hash(("stand-in seed", tuple(mm_hashes))) if mm_hashes else None

    def get(self, mm_hashes: list, combined_hash: int | None = None) -> StandInEmbeddingResult | None:
        stored = self.combine_hashes(mm_hashes)
        result = self.mm_cache.get(stored)
        if result is not None:
            self.mm_cache.move_to_end(stored)
        return result

    def set(self, mm_hash: int, embedding: StandInEmbeddingResult, loc: Any = None) -> bool:
        if mm_hash in self.mm_cache:
            self.mm_cache.move_to_end(mm_hash)
            return True
        size = _nbytes(embedding.embedding)
        while self.current_size + size > self.max_size:
            if not self.mm_cache:
                return False
            self.current_size -= _nbytes(self.mm_cache.popitem(last=False)[1].embedding)
        self.mm_cache[mm_hash] = embedding
        self.current_size += size
        return True

    def has(self, mm_hash: int) -> bool:
        return mm_hash in self.mm_cache

    def free(self, mm_hash: int, mm_embedding_allocator: Any) -> bool:
        if mm_hash not in self.mm_cache:
            return False
        self.current_size -= _nbytes(self.mm_cache.pop(mm_hash).embedding)
        return True

    def clear(self) -> None:
        self.mm_cache.clear()
        self.current_size = 0

    def __len__(self) -> int:
        return len(self.mm_cache)


class SizeCheckedMultiModalStaticCache(StandInMultiModalStaticCache):
    """The fix: an embedding larger than the whole cache is refused before anything is evicted."""

    def set(self, mm_hash: int, embedding: StandInEmbeddingResult, loc: Any = None) -> bool:
        if mm_hash not in self.mm_cache and _nbytes(embedding.embedding) > self.max_size:
            return False
        return super().set(mm_hash, embedding, loc)


# Factories: the examples' adapters over the stand-ins --------------------------------------------------


def trtllm_stand_in(capacity_bytes: int) -> TrtllmTensorLRUAdapter:
    return TrtllmTensorLRUAdapter(capacity_bytes, StandInTensorLRUCache)


def vllm_stand_in(capacity_bytes: int) -> VllmEncoderCacheAdapter:
    return VllmEncoderCacheAdapter(capacity_bytes, StandInEncoderCacheManager)


def sglang_stand_in(capacity_bytes: int) -> SglangStaticCacheAdapter:
    return SglangStaticCacheAdapter(capacity_bytes, StandInMultiModalStaticCache, StandInEmbeddingResult)


def sglang_fixed_stand_in(capacity_bytes: int) -> SglangStaticCacheAdapter:
    return SglangStaticCacheAdapter(capacity_bytes, SizeCheckedMultiModalStaticCache, StandInEmbeddingResult)
