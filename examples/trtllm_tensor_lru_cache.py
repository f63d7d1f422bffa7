"""TensorRT-LLM's TensorLRUCache with reservations (the design of PR #17876, seed 003), from its
public description, held to the `trtllm-tensor-lru` profile.

The design differs from the contract in five deliberate ways (docs/profiles.md):
- `put` of a present idle key replaces its value (the entry becomes newest);
- `put` of a tensor larger than the whole cache returns False, changing nothing;
- `get` of an absent or RESERVED key returns None; `pop` of an absent key returns None and of a
  RESERVED (always referenced) one raises;
- sizes and flags are trusted, not type-checked;
- a reservation hit (`acquire` of a RESERVED key, an in-flight dedup) does not move the entry to
  newest; a READY hit and `get` do.
Everything else (states, reference counts, retain flags, LRU eviction of idle READY entries at
commit/put, the protected-bytes limit on reservations) is the contract's, so it starts from
`MinimalCache` and overrides only those five.

    cacheproof check --impl examples.trtllm_tensor_lru_cache:TrtllmTensorLRUCache --profile trtllm-tensor-lru
"""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.spec import Acquired, EntryState, WrongStateError
from cacheproof.spec.cache.values import value_size
from examples.minimal_cache import MinimalCache, _Entry

RESERVED, READY = EntryState.RESERVED, EntryState.READY


class TrtllmTensorLRUCache(MinimalCache):
    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        entry = self._entries.get(key)
        if entry is None or entry.state is READY:
            return super().acquire(key, nbytes, retain=retain)
        if (entry.nbytes, entry.retain) != (nbytes, retain):
            return super().acquire(key, nbytes, retain=retain)  # the same ConflictError
        entry.refcount += 1  # a reservation hit: recency unchanged
        return Acquired.RESERVATION_HIT

    def put(self, key: Hashable, value: Any) -> bool:
        size = value_size(value)
        if size > self.capacity_bytes:
            return False  # refused before anything is looked at
        present = self._entries.get(key)
        if present is None:
            return super().put(key, value)
        if present.state is RESERVED or present.refcount > 0:
            raise WrongStateError(f"put({key!r}): the entry is {present.state.name} and referenced; only an idle one is replaced")
        if self._pinned() + size > self.capacity_bytes:
            return False
        del self._entries[key]
        self._make_room(size)
        self._entries[key] = _Entry(READY, size, 0, True, value)
        return True

    def get(self, key: Hashable) -> Any:
        entry = self._entries.get(key)
        if entry is None or entry.state is RESERVED:
            return None
        return super().get(key)

    def pop(self, key: Hashable) -> Any:
        """None for an absent key; a RESERVED one is referenced, so it raises (PR #17876 at 533f124)."""
        if self._entries.get(key) is None:
            return None
        return super().pop(key)

    def _check_reservation(self, operation: str, key: Any, nbytes: Any, retain: Any) -> None:
        """Trusted: the engine passes sizes it computed itself."""
