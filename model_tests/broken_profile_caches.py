"""Caches that break their profile the way the shipped ones were seen to: the checker, given the
matching profile, must find each (model_tests/test_profiles.py)."""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.spec import EntryState
from cacheproof.spec.values import value_size
from examples.minimal_cache import _Entry
from examples.plain_lru_cache import PlainLRUCache
from examples.trtllm_tensor_lru_cache import TrtllmTensorLRUCache


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
        return self._values.get(key)
