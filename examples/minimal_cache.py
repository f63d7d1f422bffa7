"""A minimal cache that conforms to docs/contract.md: copy it and start from here.

Entries live in one OrderedDict, oldest first ("move to newest" is `move_to_end`). Byte counts are
recounted from the entries when needed: slow, but nothing can get out of step. The argument checks
are the spec's own (`cacheproof.spec.cache.arguments`), so errors come in the contract's order.

Check it against the spec (exit status 0: it conforms; the factory is called as
`MinimalCache(capacity_bytes)`, once per call sequence):

    cacheproof check --impl examples.minimal_cache:MinimalCache
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable

from cacheproof.spec import (
    Acquired,
    CacheStats,
    CapacityError,
    ConflictError,
    EntryState,
    EntryView,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.cache import arguments

RESERVED, READY = EntryState.RESERVED, EntryState.READY


@dataclass
class _Entry:
    state: EntryState
    nbytes: int
    refcount: int
    retain: bool
    value: Any = None  # READY only


class MinimalCache:
    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = arguments.check_capacity(capacity_bytes)
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        self._check_reservation("reserve", key, nbytes, retain)
        if key in self._entries:
            raise WrongStateError(f"reserve({key!r}): the key is already present")
        return self._reserve_new(key, nbytes, retain)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        self._check_reservation("acquire", key, nbytes, retain)
        entry = self._entries.get(key)
        if entry is None:
            return Acquired.NEW_RESERVATION if self._reserve_new(key, nbytes, retain) else Acquired.BLOCKED
        if (entry.nbytes, entry.retain) != (nbytes, retain):
            raise ConflictError(f"acquire({key!r}): nbytes and retain must match the entry's")
        if entry.state is READY and entry.refcount == 0 and self._protected() + nbytes > self.capacity_bytes:
            return Acquired.BLOCKED  # pinning this idle entry would break a reservation
        entry.refcount += 1
        self._entries.move_to_end(key)
        return Acquired.RESERVATION_HIT if entry.state is RESERVED else Acquired.READY_HIT

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        arguments.check_key("commit", key)
        size = arguments.check_value("commit", key, value)
        entry = self._entry("commit", key)
        if entry.state is READY:
            raise WrongStateError(f"commit({key!r}): the entry is already READY")
        if size != entry.nbytes:
            raise ConflictError(f"commit({key!r}): {size} bytes, but {entry.nbytes} were reserved")
        evicted = self._make_room(size)  # always enough: the reservation was protected
        entry.state, entry.value = READY, value
        self._entries.move_to_end(key)
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        arguments.check_key("put", key)
        size = arguments.check_value("put", key, value)
        arguments.check_put_size(key, size, self.capacity_bytes)
        if key in self._entries:
            raise WrongStateError(f"put({key!r}): the key is already present; put never replaces")
        if self._pinned() + size > self.capacity_bytes:
            return False
        self._make_room(size)
        self._entries[key] = _Entry(READY, size, 0, True, value)
        return True

    def get(self, key: Hashable) -> Any:
        entry = self._ready_entry("get", key)
        self._entries.move_to_end(key)
        return entry.value

    def release(self, key: Hashable) -> bool:
        entry = self._entry("release", key)
        if entry.refcount == 0:
            raise WrongStateError(f"release({key!r}): the entry holds no reference")
        entry.refcount -= 1  # recency is unchanged
        if entry.refcount == 0 and (entry.state is RESERVED or not entry.retain):
            del self._entries[key]
            return True
        return False

    def evict(self, nbytes: int) -> list[Hashable]:
        arguments.check_evict_nbytes(nbytes, self.capacity_bytes)
        if self._pinned() + nbytes > self.capacity_bytes:
            raise CapacityError(f"evict({nbytes}): evicting every idle entry is not enough")
        return self._make_room(nbytes)

    def pop(self, key: Hashable) -> Any:
        entry = self._ready_entry("pop", key)
        if entry.refcount > 0:
            raise WrongStateError(f"pop({key!r}): the entry is in use")
        return self._entries.pop(key).value

    def clear(self) -> None:
        if any(e.refcount > 0 for e in self._entries.values()):
            raise WrongStateError("clear: some entries are reserved or in use")
        self._entries.clear()

    def snapshot(self) -> tuple[EntryView, ...]:
        return tuple(EntryView(k, e.state, e.refcount, e.nbytes, e.retain) for k, e in self._entries.items())

    def stats(self) -> CacheStats:  # the counters (hits, misses, ...) are informative: left at 0 here
        ready, pinned = self._ready(), self._pinned()
        return CacheStats(
            capacity_bytes=self.capacity_bytes, ready_bytes=ready, reserved_bytes=self._protected() - pinned,
            pinned_bytes=pinned, idle_bytes=ready - pinned, free_bytes=self.capacity_bytes - ready,
            entries=len(self._entries),
        )

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return arguments.check_key("in", key) in self._entries  # recency is untouched

    # Byte counts: READY entries are held; RESERVED and in-use READY entries are protected.
    def _ready(self) -> int:
        return sum(e.nbytes for e in self._entries.values() if e.state is READY)

    def _pinned(self) -> int:
        return sum(e.nbytes for e in self._entries.values() if e.state is READY and e.refcount > 0)

    def _protected(self) -> int:
        return sum(e.nbytes for e in self._entries.values() if e.state is RESERVED or e.refcount > 0)

    def _check_reservation(self, operation: str, key: Any, nbytes: Any, retain: Any) -> None:
        arguments.check_key(operation, key)
        arguments.check_nbytes(operation, key, nbytes, self.capacity_bytes)
        arguments.check_retain(operation, key, retain)

    def _reserve_new(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        if self._protected() + nbytes > self.capacity_bytes:
            return False
        self._entries[key] = _Entry(RESERVED, nbytes, 1, retain)
        return True

    def _entry(self, operation: str, key: Any) -> _Entry:
        if arguments.check_key(operation, key) not in self._entries:
            raise UnknownKeyError(f"{operation}({key!r}): the key is absent")
        return self._entries[key]

    def _ready_entry(self, operation: str, key: Any) -> _Entry:
        entry = self._entry(operation, key)
        if entry.state is RESERVED:
            raise WrongStateError(f"{operation}({key!r}): the entry is RESERVED; it has no value yet")
        return entry

    def _make_room(self, incoming: int) -> list[Hashable]:
        """Evict idle READY entries, oldest first, until ready bytes + incoming fit the capacity."""
        evicted: list[Hashable] = []
        idle = [key for key, e in self._entries.items() if e.state is READY and e.refcount == 0]
        for key in idle:  # oldest first
            if self._ready() + incoming <= self.capacity_bytes:
                break
            del self._entries[key]
            evicted.append(key)
        return evicted
