"""SGLang's `MultiModalStaticCache` (`python/sglang/srt/mem_cache/multimodal_cache.py`) behind the contract.

    cacheproof check --impl cacheproof.engines.sglang:mm_cache

(SGLang's RadixCache is `radix_cache` here too, written in cacheproof.engines.sglang_radix.)

`mm_cache(capacity_bytes, *, cache_class=None)` builds the installed class (or `cache_class`)
with `max_size=capacity_bytes` and takes `EmbeddingResult` from the class's own module. Profile
`sglang-mm-cache` (every design choice is there: a `set` of a present hash keeps the old
embedding and makes it newest, whatever the new one's size). Translations, call by call (SGLang
0.5.23's names):
- a contract key k <-> the combined hash `combine_hashes([k])` (the class's own static method),
  under which `set` stores and `get([k])` reads;
- `put(k, v)` -> `set(hash, EmbeddingResult(embedding=tensor))`, its bool as it is; a value of no
  sizable type (a misuse: nothing to build an EmbeddingResult of) goes to `set` as it is, so SGLang's
  own type check meets it, and the AssertionError of that check (`assert isinstance(embedding,
  EmbeddingResult)`) is named the contract's InvalidArgumentError (argument_checks=value_type);
- `get(k)` -> SGLang's two reads, call by call in turn: `get([k])` (the multi-item call site's read,
  odd calls) and `get_single(combine_hashes([k]))` (the single-item call site's read, even calls),
  its embedding or its None; both make the entry newest, so either one answers a contract `get`;
- a value from `make_value` is one item of a batch embedding: a view of the first half of a tensor
  holding it and a second item, as SGLang's encoder hands out slices of one output (so `set`
  clones an admitted slice and counts the item's bytes, not the batch's);
- `pop(k)` -> the entry read from `mm_cache` (no public read leaves the order alone) and
  `free(hash, None)`, in one critical section (`Atomic`): None when `free` answers False, the
  entry's embedding when it answers True, and its True as it is when it answers True with no
  entry to remove (no contract value equals it, so the check reports SGLang's answer);
- `clear()`, `len()`, `k in cache` -> `clear()`, `len()`, `has(hash)`;
- snapshot() from `mm_cache` (oldest first); stats() from the class's `current_size` and
  `available_size()` (its entry count), so its byte accounting is checked against its table.
The class keeps no lock (SGLang's scheduler drives it from one thread): the adapter's own lock
serialises its calls as that thread does. A member it lacks, or a call that does not fit a
signature, is `cacheproof.adapt.AdapterError`: a usage error (exit 2) naming it.
"""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.adapt import Atomic, as_tensor, engine_call, engine_member, make_tensor, module_names, require_members
from cacheproof.adapt import snapshot_from_table
from cacheproof.spec import CacheStats, EntryView, InvalidArgumentError
from cacheproof.engines.sglang_radix import SglangRadixCache, radix_cache
from cacheproof.spec.cache.values import value_size

__all__ = ["SglangMultiModalCache", "SglangRadixCache", "mm_cache", "radix_cache"]

_MISSING = (
    "cacheproof.engines.sglang needs SGLang (`pip install sglang`; docs/engines.md says why its module "
    "may not import on a CPU-only machine), or pass cache_class= a class with its API"
)
MEMBERS = ("combine_hashes", "get", "get_single", "set", "has", "free", "clear", "__len__", "available_size")


def mm_cache(capacity_bytes: int, *, cache_class: Any = None) -> "SglangMultiModalCache":
    """SGLang's MultiModalStaticCache of `capacity_bytes` bytes, adapted. ImportError naming the
    package when it is not installed and no `cache_class` is given."""
    if cache_class is None:
        try:
            from sglang.srt.mem_cache.multimodal_cache import MultiModalStaticCache as cache_class
        except ImportError as error:
            raise ImportError(f"{_MISSING} ({error})") from error
    require_members(cache_class, MEMBERS)
    (result,) = module_names(cache_class, "EmbeddingResult")
    return SglangMultiModalCache(cache_class(capacity_bytes), result, capacity_bytes)


def _profile() -> str:
    """The profile; imports SGLang's module first (seconds), before any timed call."""
    try:
        import sglang.srt.mem_cache.multimodal_cache  # noqa: F401
    except ImportError as error:
        raise ImportError(f"{_MISSING} ({error})") from error
    return "sglang-mm-cache"


mm_cache.profile = _profile


class SglangMultiModalCache:
    """A MultiModalStaticCache speaking the contract; `cache` is SGLang's object."""

    def __init__(self, cache: Any, result_class: Any, capacity_bytes: int) -> None:
        self.cache = cache
        self.capacity_bytes = capacity_bytes
        self._result = result_class
        self._keys: dict[Any, Hashable] = {}  # combined hash -> contract key, for snapshot()
        self._reads = 0  # gets so far: odd ones read through get([k]), even ones through get_single
        self._atomic = Atomic(cache)

    def make_value(self, nbytes: int, tag: int, element_size: int | None = None) -> Any:
        """The recipe's tensor as one item of a batch: a view of the first half of the recipe's
        tensor followed by a second item (tag + 1), so its storage holds both."""
        import torch

        item = make_tensor(nbytes, tag, element_size)
        batch = torch.cat((item, make_tensor(nbytes, tag + 1, element_size).to(item.dtype)))
        return batch[:item.numel()]

    def _hash(self, key: Hashable) -> Any:
        return engine_call(self.cache, "combine_hashes", [key])

    def put(self, key: Hashable, value: Any) -> bool:
        with self._atomic:
            stored = self._hash(key)
            self._keys.setdefault(stored, key)
            if value_size(value) is None:
                return self._set_misused(key, stored, value)
            return engine_call(self.cache, "set", stored, self._result(embedding=as_tensor(value)))

    def _set_misused(self, key: Hashable, stored: Any, value: Any) -> bool:
        """`set` of a value that is no embedding, handed over as it is: the AssertionError of
        SGLang's type check is the contract's InvalidArgumentError; anything else passes through."""
        try:
            return engine_call(self.cache, "set", stored, value)
        except AssertionError as error:
            raise InvalidArgumentError(
                f"put({key!r}): SGLang's set refuses a {type(value).__name__}, not an EmbeddingResult "
                f"(AssertionError{': ' + str(error) if str(error) else ''})"
            ) from error

    def get(self, key: Hashable) -> Any:
        with self._atomic:
            self._reads += 1
            if self._reads % 2:
                result = engine_call(self.cache, "get", [key])
            else:
                result = engine_call(self.cache, "get_single", self._hash(key))
            return None if result is None else engine_member(result, "embedding")

    def pop(self, key: Hashable) -> Any:
        with self._atomic:
            stored = self._hash(key)
            result = engine_member(self.cache, "mm_cache").get(stored)
            freed = engine_call(self.cache, "free", stored, None)
            if not freed:
                return None
            return freed if result is None else engine_member(result, "embedding")

    def clear(self) -> None:
        with self._atomic:
            engine_call(self.cache, "clear")

    def _table(self) -> tuple:
        return tuple((self._keys.get(stored, stored), result) for stored, result in engine_member(self.cache, "mm_cache").items())

    def snapshot(self) -> tuple[EntryView, ...]:
        with self._atomic:
            return snapshot_from_table(self._table(), nbytes=lambda result: value_size(result.embedding))

    def stats(self) -> CacheStats:
        """The class's own byte counter (`current_size`) and entry count (`available_size()`);
        every entry idle READY."""
        with self._atomic:
            used, entries = engine_member(self.cache, "current_size"), engine_call(self.cache, "available_size")
        return CacheStats(capacity_bytes=self.capacity_bytes, ready_bytes=used, reserved_bytes=0, pinned_bytes=0,
                          idle_bytes=used, free_bytes=self.capacity_bytes - used, entries=entries)

    def __len__(self) -> int:
        with self._atomic:
            return len(self.cache)

    def __contains__(self, key: object) -> bool:
        with self._atomic:
            return engine_call(self.cache, "has", self._hash(key))
