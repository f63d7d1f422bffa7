"""An adapter over TensorRT-LLM's own `TensorLRUCache` (the upstream byte LRU), for the `plain-lru` profile.

    pip install tensorrt_llm     # the class is tensorrt_llm/_torch/tensor_lru_cache.py
    cacheproof check --impl examples.trtllm_adapter:factory --profile plain-lru

Written against the public class (docs/adapters.md cites it): `TensorLRUCache(max_bytes)` with
`put(key, tensor) -> bool` (False, unchanged, for a tensor larger than max_bytes; a present key is
replaced and becomes newest), `get(key)` (None on a miss; a hit becomes newest), `pop(key)` (None
on a miss), `clear()`, `len()`, `max_bytes`; its entries sit in the OrderedDict `_items`, oldest
first, each with its `size_bytes`. It has no `in`, and its `stats()` has other fields: the adapter
reads membership and snapshot() from `_items` and maps the class's own byte counter
(`current_bytes`) and item count to the contract's stats, so the class's accounting is checked
against its table. `cache_class` lets the same adapter run over a stand-in of the class where
TensorRT-LLM is not installed (model_tests/engine_stand_ins.py).
"""

from __future__ import annotations

from typing import Any, Hashable

import torch  # noqa: F401  (imported with the module: a first import inside a timed call can exceed its timeout)

from cacheproof.adapt import as_tensor, make_tensor, snapshot_from_table
from cacheproof.spec import CacheStats, EntryView

try:
    from tensorrt_llm._torch.tensor_lru_cache import TensorLRUCache
except ImportError:  # not installed: factory() says so; the adapter still runs over a stand-in
    TensorLRUCache = None


class TrtllmTensorLRUAdapter:
    def __init__(self, capacity_bytes: int, cache_class: Any = None) -> None:
        self._cache = (cache_class or TensorLRUCache)(capacity_bytes)

    @property
    def capacity_bytes(self) -> int:
        return self._cache.max_bytes

    def make_value(self, nbytes: int, tag: int) -> Any:
        return make_tensor(nbytes, tag)

    def put(self, key: Hashable, value: Any) -> bool:
        return self._cache.put(key, as_tensor(value))

    def get(self, key: Hashable) -> Any:
        return self._cache.get(key)

    def pop(self, key: Hashable) -> Any:
        return self._cache.pop(key)

    def clear(self) -> None:
        self._cache.clear()

    def snapshot(self) -> tuple[EntryView, ...]:
        return snapshot_from_table(self._cache._items, nbytes="size_bytes")

    def stats(self) -> CacheStats:
        """The class's own counters in the contract's terms: every entry is idle and READY."""
        own = self._cache.stats()
        return CacheStats(
            capacity_bytes=own.max_bytes, ready_bytes=own.current_bytes, reserved_bytes=0, pinned_bytes=0,
            idle_bytes=own.current_bytes, free_bytes=own.max_bytes - own.current_bytes, entries=own.item_count,
        )

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache._items


def factory(capacity_bytes: int) -> TrtllmTensorLRUAdapter:
    """TensorRT-LLM's TensorLRUCache of `capacity_bytes`, adapted."""
    if TensorLRUCache is None:
        raise ModuleNotFoundError(
            "tensorrt_llm is not installed (pip install tensorrt_llm); without it, check the re-implementation "
            "examples.plain_lru_cache:PlainLRUCache under --profile plain-lru"
        )
    return TrtllmTensorLRUAdapter(capacity_bytes)
