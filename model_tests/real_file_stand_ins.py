"""Stand-ins for the engine classes that do not install here, written (not copied) from the real
files, with the public API of each recorded as read from the file (SIGNATURES), so that
model_tests/test_engines_stand_ins.py fails when a stand-in drifts from its record:

- TensorRT-LLM `tensorrt_llm/_torch/tensor_lru_cache.py` at PR #17876 commit 533f124
  (`TensorLRUCache`: acquire, commit, ensure_capacity, release, put, get, pop, clear, stats;
  the private `_CacheEntryState`, the public `CacheAcquireResult`);
- SGLang 0.5.23 `python/sglang/srt/mem_cache/multimodal_cache.py` (`MultiModalStaticCache`,
  `EmbeddingResult`), the earlier `set` whose oversized embedding flushed the cache first, and a
  `set` without its type check (`SetWithoutTypeCheck`, also mixed into the real class by
  model_tests/sglang_broken_mm.py):
  the project's only SGLang stand-in (model_tests/engine_stand_ins.py runs the example adapter
  over these classes; model_tests/engines/test_sglang_mm_cache.py checks `SIGNATURES` against the
  installed class where sglang imports).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import Enum, auto
from typing import Any, Hashable, NamedTuple

SIGNATURES = {
    "TensorLRUCache": {
        "__init__": "(self, max_bytes, *, name='tensor_lru_cache', cuda_stream_aware=False)",
        "acquire": "(self, key, expected_bytes, *, retain_after_release=True)",
        "get": "(self, key, *, record_stats=True)",
        "put": "(self, key, value)",
        "commit": "(self, key, value)",
        "ensure_capacity": "(self, incoming_bytes)",
        "release": "(self, key)",
        "pop": "(self, key)",
        "clear": "(self)",
        "stats": "(self)",
    },
    "MultiModalStaticCache": {
        "__init__": "(self, max_size)",
        "get": "(self, mm_hashes, combined_hash=None)",
        "set": "(self, mm_hash, embedding, loc=None)",
        "get_single": "(self, mm_hash)",
        "has": "(self, mm_hash)",
        "free": "(self, mm_hash, mm_embedding_allocator)",
        "clear": "(self)",
        "available_size": "(self)",
    },
}
"""The public methods of each real class, as `inspect.signature` writes them (annotations left out)."""


def _nbytes(tensor: Any) -> int:
    return tensor.numel() * tensor.element_size()


# TensorRT-LLM at 533f124 --------------------------------------------------------------------------


class _CacheEntryState(Enum):
    RESERVED = auto()
    READY = auto()


class CacheAcquireResult(Enum):
    READY_HIT = auto()
    NEW_RESERVATION = auto()
    RESERVATION_HIT = auto()


@dataclass
class _Entry:
    state: _CacheEntryState
    size_bytes: int
    reference_count: int
    retain_after_release: bool
    value: Any = None


class TensorLRUCacheStats(NamedTuple):
    max_bytes: int
    current_bytes: int
    reserved_bytes: int
    in_use_bytes: int
    item_count: int


class TensorLRUCache:
    """The reserving cache as the file has it: a put is refused (False) unless it fits beside the
    reserved and in-use bytes together; commit never evicts (ensure_capacity first); release
    returns None."""

    def __init__(self, max_bytes: int, *, name: str = "tensor_lru_cache", cuda_stream_aware: bool = False) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self._max_bytes = max_bytes
        self._current_bytes = self._reserved_bytes = self._in_use_bytes = 0
        self._items: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.RLock()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def _claimed(self) -> int:
        return self._reserved_bytes + self._in_use_bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def acquire(self, key: Hashable, expected_bytes: int, *, retain_after_release: bool = True) -> Any:
        if expected_bytes <= 0:
            raise ValueError("expected_bytes must be positive")
        if expected_bytes > self._max_bytes:
            raise ValueError(f"expected_bytes ({expected_bytes}) exceeds cache capacity ({self._max_bytes})")
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                if self._claimed + expected_bytes > self._max_bytes:
                    return None
                self._items[key] = _Entry(_CacheEntryState.RESERVED, expected_bytes, 1, retain_after_release)
                self._reserved_bytes += expected_bytes
                return CacheAcquireResult.NEW_RESERVATION
            if entry.size_bytes != expected_bytes:
                raise ValueError("existing cache entry size does not match expected_bytes")
            if entry.retain_after_release != retain_after_release:
                raise ValueError("existing cache entry retention policy does not match")
            if entry.state is _CacheEntryState.RESERVED:
                entry.reference_count += 1
                return CacheAcquireResult.RESERVATION_HIT
            if entry.reference_count == 0:
                if self._claimed + entry.size_bytes > self._max_bytes:
                    return None
                self._in_use_bytes += entry.size_bytes
            entry.reference_count += 1
            self._items.move_to_end(key)
            return CacheAcquireResult.READY_HIT

    def get(self, key: Hashable, *, record_stats: bool = True) -> Any:
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry.state is not _CacheEntryState.READY:
                return None
            self._items.move_to_end(key)
            return entry.value

    def put(self, key: Hashable, value: Any) -> bool:
        size = _nbytes(value)
        if size > self._max_bytes:
            return False
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                if old.state is not _CacheEntryState.READY:
                    raise RuntimeError("cannot replace a reserved cache entry")
                if old.reference_count:
                    raise RuntimeError("cannot replace a referenced cache entry")
            if self._claimed + size > self._max_bytes:
                return False
            if old is not None:
                del self._items[key]
                self._current_bytes -= old.size_bytes
            self.ensure_capacity(size)
            self._items[key] = _Entry(_CacheEntryState.READY, size, 0, True, value.detach().clone())
            self._current_bytes += size
            return True

    def commit(self, key: Hashable, value: Any) -> None:
        size = _nbytes(value)
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry.state is not _CacheEntryState.RESERVED:
                raise RuntimeError("cache commit requires a reserved entry")
            if size != entry.size_bytes:
                raise ValueError(f"tensor size ({size}) does not match reserved bytes ({entry.size_bytes})")
            if self._current_bytes + size > self._max_bytes:
                raise RuntimeError("reserved entry does not have enough cache space")
            entry.state, entry.value = _CacheEntryState.READY, value.detach().clone()
            self._reserved_bytes -= size
            self._in_use_bytes += size
            self._current_bytes += size
            self._items.move_to_end(key)

    def ensure_capacity(self, incoming_bytes: int) -> None:
        if incoming_bytes < 0:
            raise ValueError("incoming_bytes must be non-negative")
        with self._lock:
            needed = max(0, self._current_bytes + incoming_bytes - self._max_bytes)
            if not needed:
                return
            victims, freed = [], 0
            for key, entry in self._items.items():
                if entry.state is _CacheEntryState.READY and entry.reference_count == 0:
                    victims.append(key)
                    freed += entry.size_bytes
                    if freed >= needed:
                        break
            if freed < needed:
                raise RuntimeError("cache does not have enough removable space")
            for key in victims:
                self._current_bytes -= self._items.pop(key).size_bytes

    def release(self, key: Hashable) -> None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry.reference_count == 0:
                raise RuntimeError("cannot release an unreferenced cache entry")
            entry.reference_count -= 1
            if entry.reference_count:
                return None
            if entry.state is _CacheEntryState.RESERVED:
                self._reserved_bytes -= entry.size_bytes
                del self._items[key]
                return None
            self._in_use_bytes -= entry.size_bytes
            if not entry.retain_after_release:
                self._current_bytes -= entry.size_bytes
                del self._items[key]
            return None

    def pop(self, key: Hashable) -> Any:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            if entry.reference_count:
                raise RuntimeError("cannot remove a referenced cache entry")
            del self._items[key]
            self._current_bytes -= entry.size_bytes
            return entry.value

    def clear(self) -> None:
        with self._lock:
            if self._claimed:
                raise RuntimeError("cannot clear cache with live references or reservations")
            self._items.clear()
            self._current_bytes = 0

    def stats(self) -> TensorLRUCacheStats:
        with self._lock:
            return TensorLRUCacheStats(self._max_bytes, self._current_bytes, self._reserved_bytes,
                                       self._in_use_bytes, len(self._items))


# SGLang 0.5.23 --------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class EmbeddingResult:
    embedding: Any


class MultiModalStaticCache:
    """An OrderedDict LRU in bytes. `set` asserts it is given an EmbeddingResult; `set` of a present
    hash makes it newest and answers True; an embedding larger than the whole cache is refused
    (False) before anything is evicted; otherwise the oldest entries are popped until it fits."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self.mm_cache: OrderedDict[int, EmbeddingResult] = OrderedDict()
        self.current_size = 0

    @staticmethod
    def combine_hashes(mm_hashes: list) -> int | None:
        return hash(tuple(mm_hashes)) if mm_hashes else None

    def get(self, mm_hashes: list, combined_hash: int | None = None) -> EmbeddingResult | None:
        stored = self.combine_hashes(mm_hashes)
        result = self.mm_cache.get(stored)
        if result is not None:
            self.mm_cache.move_to_end(stored)
        return result

    def set(self, mm_hash: int, embedding: EmbeddingResult, loc: Any = None) -> bool:
        assert isinstance(embedding, EmbeddingResult), embedding
        if mm_hash in self.mm_cache:
            self.mm_cache.move_to_end(mm_hash)
            return True
        size = _nbytes(embedding.embedding)
        if self._refuses(size):
            return False
        while self.current_size + size > self.max_size:
            if not self.mm_cache:
                return False
            self.current_size -= _nbytes(self.mm_cache.popitem(last=False)[1].embedding)
        self.mm_cache[mm_hash] = replace(embedding, embedding=embedding.embedding.clone())
        self.current_size += size
        return True

    def _refuses(self, size: int) -> bool:
        return size > self.max_size

    def get_single(self, mm_hash: int) -> EmbeddingResult | None:
        result = self.mm_cache.get(mm_hash)
        if result is not None:
            self.mm_cache.move_to_end(mm_hash)
        return result

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

    def available_size(self) -> int:
        return len(self)


class FlushingMultiModalStaticCache(MultiModalStaticCache):
    """The earlier `set` (before 0.5.23's size check): an oversized embedding first pops every entry."""

    def _refuses(self, size: int) -> bool:
        return False


class SetWithoutTypeCheck:
    """A mixin over a MultiModalStaticCache whose EmbeddingResult is `result_class`: `set` without
    its `assert isinstance(embedding, EmbeddingResult)` (mutant #17 of docs/mutation-duel.md). A
    value that is no EmbeddingResult is accepted for a present hash (True) and, for a new one,
    fails a line later at `.embedding` with AttributeError instead of the assertion."""

    result_class: type = EmbeddingResult

    def set(self, mm_hash: int, embedding: Any, loc: Any = None) -> bool:
        if mm_hash in self.mm_cache:
            self.mm_cache.move_to_end(mm_hash)
            return True
        if not isinstance(embedding, self.result_class):
            raise AttributeError(f"{type(embedding).__name__!r} object has no attribute 'embedding'")
        return super().set(mm_hash, embedding, loc)


class UncheckedSetMultiModalStaticCache(SetWithoutTypeCheck, MultiModalStaticCache):
    """The stand-in with `set`'s type check removed."""


# Factories: the installed adapters over the stand-ins, with their profiles --------------------------


def trtllm_533f124(capacity_bytes: int) -> Any:
    from cacheproof.engines.trtllm import tensor_lru_cache

    return tensor_lru_cache(capacity_bytes, cache_class=TensorLRUCache)


trtllm_533f124.profile = "trtllm-tensor-lru"


def sglang_0_5_23(capacity_bytes: int) -> Any:
    from cacheproof.engines.sglang import mm_cache

    return mm_cache(capacity_bytes, cache_class=MultiModalStaticCache)


def sglang_flushing(capacity_bytes: int) -> Any:
    from cacheproof.engines.sglang import mm_cache

    return mm_cache(capacity_bytes, cache_class=FlushingMultiModalStaticCache)


def sglang_unchecked_set(capacity_bytes: int) -> Any:
    from cacheproof.engines.sglang import mm_cache

    return mm_cache(capacity_bytes, cache_class=UncheckedSetMultiModalStaticCache)


sglang_0_5_23.profile = sglang_flushing.profile = sglang_unchecked_set.profile = "sglang-mm-cache"
