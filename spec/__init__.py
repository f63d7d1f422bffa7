"""cacheproof.spec: the executable specification of the cache lifecycle (standard library only).

Lifecycle of one key:
1. ABSENT --reserve/acquire--> RESERVED (refcount 1): space is claimed before the value exists.
2. RESERVED --commit--> READY: the value arrives; idle entries are evicted, oldest first, to make room.
3. READY --acquire--> refcount + 1 ("in use", pinned: never evicted).
4. READY --get--> the value; only recency changes.
5. --release--> refcount - 1; at 0 a RESERVED entry (abandoned) or a retain=False entry is removed,
   a retained READY entry stays as an idle LRU entry.
6. idle READY --evict/commit/put (eviction), pop, clear--> ABSENT.
"""

from cacheproof.spec.cache.model import CacheSpec
from cacheproof.spec.errors import (
    CacheError,
    CapacityError,
    ConflictError,
    InvalidArgumentError,
    TooLargeError,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.cache.types import Acquired, CacheStats, EntryState, EntryView, Snapshot

__all__ = [
    "Acquired",
    "CacheSpec",
    "CacheError",
    "CacheStats",
    "CapacityError",
    "ConflictError",
    "EntryState",
    "EntryView",
    "InvalidArgumentError",
    "Snapshot",
    "TooLargeError",
    "UnknownKeyError",
    "WrongStateError",
]
