"""A plain byte-bounded LRU of tensors, as TensorRT-LLM's upstream TensorLRUCache and SGLang's
MultiModalStaticCache are: put/get/pop/clear only, no reservations, no references.

Written from their public descriptions (docs/profiles.md cites the files): one OrderedDict, oldest
first; `put` of a present key replaces it and makes it newest; a value larger than the whole cache
is refused with False and changes nothing; `get`/`pop` of an absent key return None; `get` makes
the entry newest; eviction drops the oldest entries until the new value fits. snapshot() reads the
table with `cacheproof.adapt.snapshot_from_table`, so the checker compares the LRU order too.

It conforms to the `plain-lru` profile:

    cacheproof check --impl examples.plain_lru_cache:PlainLRUCache --profile plain-lru
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable, NamedTuple

from cacheproof.adapt import snapshot_from_table
from cacheproof.spec import EntryView
from cacheproof.spec.cache.values import value_size


class _Item(NamedTuple):
    value: Any
    nbytes: int


class PlainLRUCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._items: OrderedDict[Hashable, _Item] = OrderedDict()
        self._used = 0

    def put(self, key: Hashable, value: Any) -> bool:
        """Store value as the newest entry, evicting the oldest; False if it can never fit."""
        size = value_size(value)
        if size > self.capacity_bytes:
            return False  # checked before anything is evicted
        if key in self._items:
            self._remove(key)
        while self._used + size > self.capacity_bytes:
            self._remove(next(iter(self._items)))
        self._items[key] = _Item(value, size)
        self._used += size
        return True

    def get(self, key: Hashable) -> Any:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key].value

    def pop(self, key: Hashable) -> Any:
        if key not in self._items:
            return None
        return self._remove(key)

    def clear(self) -> None:
        self._items.clear()
        self._used = 0

    def snapshot(self) -> tuple[EntryView, ...]:
        """Every entry, oldest first: idle, READY, retained (a plain LRU has no references)."""
        return snapshot_from_table(self._items, nbytes="nbytes")

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _remove(self, key: Hashable) -> Any:
        item = self._items.pop(key)
        self._used -= item.nbytes
        return item.value
