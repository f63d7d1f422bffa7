"""An adapter over SGLang's `MultiModalStaticCache`, for the `sglang-mm-cache` profile.

    pip install sglang      # the class is python/sglang/srt/mem_cache/multimodal_cache.py
    cacheproof check --impl examples.sglang_adapter:factory --profile sglang-mm-cache

Written against the public class (docs/adapters.md cites it): `MultiModalStaticCache(max_size)`
in bytes (element_size x numel); `set(mm_hash, EmbeddingResult(embedding=tensor)) -> bool`;
`get(mm_hashes)` looks up the *combined* hash of a list of item hashes
(`MultimodalCache.combine_hashes`) and returns the EmbeddingResult or None, making it newest;
`has(mm_hash)`, `free(mm_hash, allocator) -> bool`, `clear()`, `len()`. So one contract key k is
the one-item list [k]: stored under combine_hashes([k]), read with get([k]). pop reads the entry
from the class's OrderedDict `mm_cache` (no public read that leaves the order alone), then frees it.

`set` of a hash that is present keeps the old embedding and makes it newest; the profile says
put_present=keep but cannot say "and refresh" (Semantics.refresh_on has no entry for it yet), so
the adapter answers a put of a present key itself and never reaches that branch of `set`:
True, nothing changed, except for an embedding larger than the whole cache, which the contract
refuses (False) before it looks at the key while `set` looks at the key first. docs/profiles.md
lists both as not checked. `cache_class`/`result_class` let the
adapter run over stand-ins where SGLang is not installed (model_tests/engine_stand_ins.py).
"""

from __future__ import annotations

from typing import Any, Hashable

import torch  # noqa: F401  (imported with the module: a first import inside a timed call can exceed its timeout)

from cacheproof.adapt import as_tensor, make_tensor, snapshot_from_table
from cacheproof.spec import EntryView
from cacheproof.spec.cache.values import value_size

try:
    from sglang.srt.mem_cache.multimodal_cache import EmbeddingResult, MultiModalStaticCache
except ImportError:  # not installed: factory() says so; the adapter still runs over a stand-in
    EmbeddingResult = MultiModalStaticCache = None


class SglangStaticCacheAdapter:
    def __init__(self, capacity_bytes: int, cache_class: Any = None, result_class: Any = None) -> None:
        self.capacity_bytes = capacity_bytes
        self._cache = (cache_class or MultiModalStaticCache)(capacity_bytes)
        self._result = result_class or EmbeddingResult
        self._keys: dict[int, Hashable] = {}  # combined hash -> contract key, for snapshot()

    def make_value(self, nbytes: int, tag: int) -> Any:
        return make_tensor(nbytes, tag)

    def put(self, key: Hashable, value: Any) -> bool:
        stored = self._hash(key)
        if self._cache.has(stored):  # set would keep the old embedding and refresh it: see the module docstring
            return value_size(value) <= self.capacity_bytes
        self._keys[stored] = key
        return self._cache.set(stored, self._result(embedding=as_tensor(value)))

    def get(self, key: Hashable) -> Any:
        result = self._cache.get([key])
        return None if result is None else result.embedding

    def pop(self, key: Hashable) -> Any:
        result = self._cache.mm_cache.get(self._hash(key))
        if result is None:
            return None
        self._cache.free(self._hash(key), None)
        return result.embedding

    def clear(self) -> None:
        self._cache.clear()

    def snapshot(self) -> tuple[EntryView, ...]:
        entries = ((self._keys[stored], result) for stored, result in self._cache.mm_cache.items())
        return snapshot_from_table(entries, nbytes=lambda result: value_size(result.embedding))

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return self._cache.has(self._hash(key))

    def _hash(self, key: Any) -> int:
        return self._cache.combine_hashes([key])


def factory(capacity_bytes: int) -> SglangStaticCacheAdapter:
    """SGLang's MultiModalStaticCache of `capacity_bytes`, adapted."""
    if MultiModalStaticCache is None:
        raise ModuleNotFoundError(
            "sglang is not installed (pip install sglang); without it, check the stand-in "
            "model_tests.engine_stand_ins:sglang_stand_in under --profile sglang-mm-cache"
        )
    return SglangStaticCacheAdapter(capacity_bytes)
