"""Caches that break their profile the way the shipped ones were seen to: the checker, given the
matching profile, must find each (model_tests/test_profiles.py)."""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.adapt import References
from cacheproof.spec import EntryState
from cacheproof.spec.cache.values import value_size
from examples.minimal_cache import _Entry
from examples.plain_lru_cache import PlainLRUCache
from examples.trtllm_tensor_lru_cache import TrtllmTensorLRUCache
from examples.vllm_style_encoder_cache import ProfileEncoderCacheAdapter


class PutEvictsItselfCache(TrtllmTensorLRUCache):
    """TensorRT-LLM (seed 003): put inserts first, then its eviction pass walks every idle entry,
    the new one included; with the space held by in-use entries, put(b) returns True and b is gone."""

    def put(self, key: Hashable, value: Any) -> bool:
        if key in self._entries:
            return super().put(key, value)
        size = value_size(value)
        if size > self.capacity_bytes:
            return super().put(key, value)
        self._entries[key] = _Entry(EntryState.READY, size, 0, True, value)
        for idle in [k for k, e in self._entries.items() if e.state is EntryState.READY and e.refcount == 0]:
            if self._ready() <= self.capacity_bytes:
                break
            del self._entries[idle]
        return True


class OversizedSetEvictsAllCache(PlainLRUCache):
    """SGLang MultiModalStaticCache: an oversized set first evicts every entry, then returns False."""

    def put(self, key: Hashable, value: Any) -> bool:
        if value_size(value) > self.capacity_bytes:
            self.clear()
            return False
        return super().put(key, value)


class GetRefreshesCache(PlainLRUCache):
    """A plain LRU whose get forgets to make the entry newest."""

    def get(self, key: Hashable) -> Any:
        item = self._items.get(key)
        return None if item is None else item.value


class _OneRequestReferences(References):
    """Every acquire of a key comes from one request: vLLM holds a set of request ids per entry."""

    def take(self, key: Hashable) -> str:
        super().take(key)
        return "req-same"

    def give_back(self, key: Hashable) -> str | None:
        return None if super().give_back(key) is None else "req-same"


class SameRequestTwiceAdapter(ProfileEncoderCacheAdapter):
    """vLLM #54284: the same image twice in one request. The reference is "request id in the entry's
    set", so the second occurrence adds nothing and freeing the first drops the only reference:
    after acquire, acquire, release the entry is idle (evictable) while one user still reads it."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._refs = _OneRequestReferences()


def same_request_twice(capacity_bytes: int) -> SameRequestTwiceAdapter:
    return SameRequestTwiceAdapter(capacity_bytes)
