"""An adapter over TensorRT-LLM's `TensorLRUCache` with reservations (the design of PR #17876), for
the `trtllm-tensor-lru` profile.

    cacheproof check --impl examples.trtllm_reserving_adapter:factory --profile trtllm-tensor-lru \\
        --ops acquire,commit,put,get,release,clear,contains

Written against the class of the PR branch (tensorrt_llm/_torch/tensor_lru_cache.py; docs/adapters.md
cites it): `allocate(key, expected_bytes, retain_after_release=)` returns a `CacheAllocationResult`
(READY_HIT, NEW_RESERVATION, RESERVATION_HIT) or None (blocked) and raises ValueError for a size or
retention conflict; `put(key, tensor, expected_state=RESERVED)` stores a reservation's tensor and
raises RuntimeError when it does not fit; `make_space_for(key)` evicts idle entries for a reserved
one and returns their keys; `put(key, tensor)` inserts or replaces an idle entry (False for a
tensor over max_bytes); `get` (None for absent or reserved), `release(key)` (the key when it
removed a stored tensor), `pop`, `clear()` (RuntimeError while anything is in use), `stats()`;
entries in the OrderedDict `_items` (`state`, `size_bytes`, `reference_count`,
`retain_after_release`).

The operations the checker makes are the ones the class has: no `reserve` (allocate is acquire)
and no `evict(n)` (make_space_for needs a reserved key); `pop` is left out of --ops because the
class raises for a reserved key where the profile's get_missing=none answers None (Semantics does
not split get and pop). The contract's commit is the engine's sequence: the strict put, and only
when it reports no room, make_space_for then the strict put again. `cache_class` lets the adapter
run over a stand-in (model_tests/engine_stand_ins.py); the class is not in a TensorRT-LLM release.
"""

from __future__ import annotations

from typing import Any, Hashable

import torch  # noqa: F401  (imported with the module: a first import inside a timed call can exceed its timeout)

from cacheproof.adapt import ErrorRule, as_tensor, make_tensor, snapshot_from_table, translated_errors
from cacheproof.spec import (
    Acquired,
    CacheStats,
    ConflictError,
    EntryView,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)

try:
    from tensorrt_llm._torch.tensor_lru_cache import CacheEntryState, TensorLRUCache
except ImportError:  # not installed, or a release without reservations: factory() says so
    CacheEntryState = TensorLRUCache = None

CONFLICTS = ErrorRule(ValueError, ConflictError, "does not match")
BAD_SIZES = ErrorRule(ValueError, InvalidArgumentError, "positive|exceeds")
BUSY = ErrorRule(RuntimeError, WrongStateError, "cannot (replace|remove|clear)")


class TrtllmReservingAdapter:
    def __init__(self, capacity_bytes: int, cache_class: Any = None, states: Any = None) -> None:
        self._cache = (cache_class or TensorLRUCache)(capacity_bytes)
        self._states = states or CacheEntryState

    @property
    def capacity_bytes(self) -> int:
        return self._cache.max_bytes

    def make_value(self, nbytes: int, tag: int) -> Any:
        return make_tensor(nbytes, tag)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Any:
        with translated_errors((CONFLICTS, BAD_SIZES), "acquire", key):
            result = self._cache.allocate(key, nbytes, retain_after_release=retain)
        return Acquired.BLOCKED if result is None else result  # compared with Acquired by name

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        entry = self._cache._items.get(key)
        rules = (ErrorRule(RuntimeError, UnknownKeyError, "found ABSENT"), ErrorRule(RuntimeError, WrongStateError,
                 "found READY"), CONFLICTS)
        tensor = as_tensor(value)
        with translated_errors(rules, "commit", key):
            try:
                self._cache.put(key, tensor, expected_state=self._states.RESERVED)
                return []
            except RuntimeError as error:
                if entry is None or "enough cache space" not in str(error):
                    raise
            evicted = self._cache.make_space_for(key)
            self._cache.put(key, tensor, expected_state=self._states.RESERVED)
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        with translated_errors((BUSY,), "put", key):
            return self._cache.put(key, as_tensor(value))

    def get(self, key: Hashable) -> Any:
        return self._cache.get(key)

    def release(self, key: Hashable) -> bool:
        missing = UnknownKeyError if key not in self._cache._items else WrongStateError
        with translated_errors((ErrorRule(RuntimeError, missing, "unreferenced"),), "release", key):
            removed = self._cache.release(key)
        return removed is not None or key not in self._cache._items  # an abandoned reservation: None, gone

    def pop(self, key: Hashable) -> Any:
        with translated_errors((BUSY,), "pop", key):
            return self._cache.pop(key)

    def clear(self) -> None:
        with translated_errors((BUSY,), "clear"):
            self._cache.clear()

    def snapshot(self) -> tuple[EntryView, ...]:
        return snapshot_from_table(
            self._cache._items, nbytes="size_bytes", refcount="reference_count", retain="retain_after_release",
            state=lambda entry: entry.state is self._states.READY,
        )

    def stats(self) -> CacheStats:
        own = self._cache.stats()
        return CacheStats(
            capacity_bytes=own.max_bytes, ready_bytes=own.current_bytes, reserved_bytes=own.reserved_bytes,
            pinned_bytes=own.pinned_bytes, idle_bytes=own.current_bytes - own.pinned_bytes,
            free_bytes=own.max_bytes - own.current_bytes, entries=own.item_count,
        )

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache._items


def factory(capacity_bytes: int) -> TrtllmReservingAdapter:
    """TensorRT-LLM's TensorLRUCache with reservations, of `capacity_bytes`, adapted."""
    if TensorLRUCache is None or not hasattr(TensorLRUCache, "allocate"):
        raise ModuleNotFoundError(
            "tensorrt_llm with the reserving TensorLRUCache (PR #17876) is not installed (pip install tensorrt_llm); "
            "without it, check the re-implementation examples.trtllm_tensor_lru_cache:TrtllmTensorLRUCache"
        )
    return TrtllmReservingAdapter(capacity_bytes)
