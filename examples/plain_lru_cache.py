"""A plain byte-bounded LRU of tensors, as TensorRT-LLM's upstream TensorLRUCache and SGLang's
MultiModalStaticCache are: put/get/pop/clear only, no reservations, no references.

Written from their public descriptions (docs/profiles.md cites the files): one OrderedDict, oldest
first; `put` of a present key replaces it and makes it newest; a value larger than the whole cache
is refused with False and changes nothing; `get`/`pop` of an absent key return None; `get` makes
the entry newest; eviction drops the oldest entries until the new value fits.

It conforms to the `plain-lru` profile:

    cacheproof check --impl examples.plain_lru_cache:PlainLRUCache --profile plain-lru
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable

from cacheproof.spec.values import value_size


class PlainLRUCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._used = 0

    def put(self, key: Hashable, value: Any) -> bool:
        """Store value as the newest entry, evicting the oldest; False if it can never fit."""
        size = value_size(value)
        if size > self.capacity_bytes:
            return False  # checked before anything is evicted
        if key in self._values:
            self._remove(key)
        while self._used + size > self.capacity_bytes:
            self._remove(next(iter(self._values)))
        self._values[key] = value
        self._sizes[key] = size
        self._used += size
        return True

    def get(self, key: Hashable) -> Any:
        if key not in self._values:
            return None
        self._values.move_to_end(key)
        return self._values[key]

    def pop(self, key: Hashable) -> Any:
        if key not in self._values:
            return None
        value = self._values[key]
        self._remove(key)
        return value

    def clear(self) -> None:
        self._values.clear()
        self._sizes.clear()
        self._used = 0

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def _remove(self, key: Hashable) -> None:
        del self._values[key]
        self._used -= self._sizes.pop(key)
