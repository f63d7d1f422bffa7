"""TensorRT-LLM's `TensorLRUCache` (`tensorrt_llm/_torch/tensor_lru_cache.py`) behind the contract.

    cacheproof check --impl cacheproof.engines.trtllm:tensor_lru_cache

`tensor_lru_cache(capacity_bytes, *, cache_class=None)` builds the installed class (or
`cache_class`) and drives whichever of its two APIs the class has, detected from the class:
- the reserving API of PR #17876 (at commit 533f124): `acquire(key, expected_bytes, *,
  retain_after_release=)` -> a `CacheAcquireResult` or None (blocked), `commit(key, tensor)`,
  `ensure_capacity(incoming_bytes)` (evicts idle READY entries oldest first: the contract's
  `evict`), `release(key)`, `put`, `get`, `pop`, `clear`, `stats()` (with `reserved_bytes`,
  `in_use_bytes`); entries in the OrderedDict `_items` (`state`, `size_bytes`, `reference_count`,
  `retain_after_release`); profile `trtllm-tensor-lru`;
- the upstream byte LRU (#15734): `put`, `get`, `pop`, `clear`, `stats()`; profile `plain-lru`.

The adapter decides no outcome: results, errors and state are the class's, read back from it. Every
design choice is the profile's (spec/cache/profiles.py). Translations:
- errors: ValueError "does not match" -> ConflictError, other ValueErrors (sizes) ->
  InvalidArgumentError; RuntimeError "cannot (replace|remove|clear)" -> WrongStateError;
  `commit`'s "requires a reserved entry" -> UnknownKeyError for an absent key, WrongStateError
  for a READY one, and `release`'s "unreferenced" likewise (the class raises one message for
  both; the adapter reads `_items` in the same critical section as the call, `Atomic`);
- `acquire` None -> Acquired.BLOCKED; the class's CacheAcquireResult is returned as it is (the
  checker compares results by name);
- `commit(key, value)`: the class's protocol is `ensure_capacity` before `commit`; the adapter
  calls `commit`, and only when it answers "does not have enough cache space", `ensure_capacity`
  with the value's bytes and `commit` again; the evicted keys are those that left `_items`;
- `release(key)` -> True when the key left `_items` (the class returns None);
- `evict(n)` -> `ensure_capacity(n)`; its RuntimeError (not enough removable space) ->
  CapacityError; the victims are the keys that left `_items`, oldest first;
- snapshot() from `_items` (state by the enum member's name: the class's enum is private);
  stats() from the class's own counters, so its accounting is checked against its table.
A member the adapter expects and the class lacks, or a call that does not fit a signature, is
`cacheproof.adapt.AdapterError`: a usage error (exit 2) naming it.
"""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.adapt import (
    AdapterError,
    Atomic,
    ErrorRule,
    as_tensor,
    engine_call,
    engine_member,
    keys_removed,
    make_tensor,
    module_names,
    require_members,
    snapshot_from_table,
    translated_errors,
)
from cacheproof.spec import (
    Acquired,
    CacheStats,
    CapacityError,
    ConflictError,
    EntryView,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)

__all__ = ["TrtllmReservingCache", "TrtllmTensorLRUCache", "tensor_lru_cache"]

_MISSING = (
    "cacheproof.engines.trtllm needs TensorRT-LLM (`pip install tensorrt_llm`; the reserving cache is "
    "PR #17876), or pass cache_class= a class with its API"
)
RESERVING_MEMBERS = ("acquire", "commit", "ensure_capacity", "release", "put", "get", "pop", "clear", "stats")
UPSTREAM_MEMBERS = ("put", "get", "pop", "clear", "stats")

CONFLICTS = ErrorRule(ValueError, ConflictError, "does not match")
BAD_SIZES = ErrorRule(ValueError, InvalidArgumentError)
BUSY = ErrorRule(RuntimeError, WrongStateError, "cannot (replace|remove|clear)")
NO_ROOM = "enough cache space"


def _installed_class() -> type:
    try:
        from tensorrt_llm._torch.tensor_lru_cache import TensorLRUCache
    except ImportError as error:
        raise ImportError(f"{_MISSING} ({error})") from error
    return TensorLRUCache


def is_reserving(cls: type) -> bool:
    """Whether `cls` has the reserving API (PR #17876): it has `acquire`."""
    return hasattr(cls, "acquire")


def profile_of(cls: type) -> str:
    """The profile of a class: `trtllm-tensor-lru` (reserving) or `plain-lru` (upstream)."""
    return "trtllm-tensor-lru" if is_reserving(cls) else "plain-lru"


def tensor_lru_cache(capacity_bytes: int, *, cache_class: Any = None) -> "TrtllmTensorLRUCache":
    """TensorRT-LLM's TensorLRUCache of `capacity_bytes`, adapted to its API (see the module doc).
    ImportError naming the package when it is not installed and no `cache_class` is given."""
    cls = _installed_class() if cache_class is None else cache_class
    if is_reserving(cls):
        require_members(cls, RESERVING_MEMBERS, " (PR #17876 at 533f124)")
        module_names(cls, "CacheAcquireResult")
        return TrtllmReservingCache(cls(capacity_bytes))
    require_members(cls, UPSTREAM_MEMBERS)
    return TrtllmTensorLRUCache(cls(capacity_bytes))


tensor_lru_cache.profile = lambda: profile_of(_installed_class())


class TrtllmTensorLRUCache:
    """The upstream byte LRU (put/get/pop) as a contract cache; `cache` is the engine's object."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self._atomic = Atomic(cache)

    @property
    def capacity_bytes(self) -> int:
        return engine_member(self.cache, "max_bytes")

    def make_value(self, nbytes: int, tag: int, element_size: int | None = None) -> Any:
        return make_tensor(nbytes, tag, element_size)

    def put(self, key: Hashable, value: Any) -> bool:
        tensor = as_tensor(value)
        with self._atomic, translated_errors((BUSY,), "put", key):
            return engine_call(self.cache, "put", key, tensor)

    def get(self, key: Hashable) -> Any:
        with self._atomic:
            return engine_call(self.cache, "get", key)

    def pop(self, key: Hashable) -> Any:
        with self._atomic, translated_errors((BUSY,), "pop", key):
            return engine_call(self.cache, "pop", key)

    def clear(self) -> None:
        with self._atomic, translated_errors((BUSY,), "clear"):
            engine_call(self.cache, "clear")

    def _items(self) -> Any:
        return engine_member(self.cache, "_items")

    def snapshot(self) -> tuple[EntryView, ...]:
        with self._atomic:
            return snapshot_from_table(tuple(self._items().items()), nbytes="size_bytes")

    def stats(self) -> CacheStats:
        """The class's own counters; every entry is idle and READY."""
        with self._atomic:
            own = engine_call(self.cache, "stats")
        current, most = engine_member(own, "current_bytes"), engine_member(own, "max_bytes")
        return CacheStats(capacity_bytes=most, ready_bytes=current, reserved_bytes=0, pinned_bytes=0,
                          idle_bytes=current, free_bytes=most - current, entries=engine_member(own, "item_count"))

    def __len__(self) -> int:
        with self._atomic:
            return len(self.cache)

    def __contains__(self, key: object) -> bool:
        with self._atomic:
            return key in self._items()


class TrtllmReservingCache(TrtllmTensorLRUCache):
    """The reserving cache of PR #17876 (at 533f124) as a contract cache."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Any:
        with self._atomic, translated_errors((CONFLICTS, BAD_SIZES), "acquire", key):
            result = engine_call(self.cache, "acquire", key, nbytes, retain_after_release=retain)
        return Acquired.BLOCKED if result is None else result

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        tensor = as_tensor(value)
        with self._atomic:
            items = self._items()
            before = list(items)
            state = _state_name(items.get(key))
            missing = UnknownKeyError if state is None else WrongStateError
            rules = (ErrorRule(RuntimeError, missing, "requires a reserved entry"), CONFLICTS)
            with translated_errors(rules, "commit", key):
                try:
                    engine_call(self.cache, "commit", key, tensor)
                    return []
                except RuntimeError as error:
                    if NO_ROOM not in str(error):
                        raise
                engine_call(self.cache, "ensure_capacity", tensor.numel() * tensor.element_size())
                engine_call(self.cache, "commit", key, tensor)
            return keys_removed(before, self._items(), keep=key)

    def release(self, key: Hashable) -> bool:
        with self._atomic:
            items = self._items()
            missing = UnknownKeyError if key not in items else WrongStateError
            with translated_errors((ErrorRule(RuntimeError, missing, "unreferenced"),), "release", key):
                engine_call(self.cache, "release", key)
            return key not in self._items()

    def evict(self, nbytes: int) -> list[Hashable]:
        with self._atomic:
            before = list(self._items())
            rules = (ErrorRule(RuntimeError, CapacityError, "removable space"), BAD_SIZES)
            with translated_errors(rules, "evict"):
                engine_call(self.cache, "ensure_capacity", nbytes)
            return keys_removed(before, self._items())

    def snapshot(self) -> tuple[EntryView, ...]:
        with self._atomic:
            return snapshot_from_table(
                tuple(self._items().items()), nbytes="size_bytes", refcount="reference_count",
                retain="retain_after_release", state=lambda entry: _state_name(entry) == "READY",
            )

    def stats(self) -> CacheStats:
        with self._atomic:
            own = engine_call(self.cache, "stats")
        current, most = engine_member(own, "current_bytes"), engine_member(own, "max_bytes")
        in_use = engine_member(own, "in_use_bytes")
        return CacheStats(
            capacity_bytes=most, ready_bytes=current, reserved_bytes=engine_member(own, "reserved_bytes"),
            pinned_bytes=in_use, idle_bytes=current - in_use, free_bytes=most - current,
            entries=engine_member(own, "item_count"),
        )


def _state_name(entry: Any) -> str | None:
    """The name of an entry's state (RESERVED, READY), None for no entry: the enum is private."""
    if entry is None:
        return None
    state = engine_member(entry, "state")
    name = getattr(state, "name", None)
    if name not in ("RESERVED", "READY"):
        raise AdapterError(f"an entry's state {state!r} is neither RESERVED nor READY")
    return name
