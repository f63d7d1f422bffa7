"""A byte-bounded cache on `cachetools.LRUCache`, with reservations and refcounts layered on top.

Idle READY entries (refcount 0) live in an `LRUCache(maxsize=capacity, getsizeof=value size)`,
which keeps them in access order and evicts the least recently used. Entries that must not be
evicted, RESERVED ones and READY ones in use, live beside it in a plain dict with their refcount.
An entry moves into the LRUCache at its last release and out of it at its first acquire. Room for
a commit or put is made by popping the LRUCache's oldest items until the ready bytes fit.

The LRUCache only inserts at its newest end, so an entry released into it becomes the newest
idle entry: eviction order is by release time for entries that were in use. docs/adapters.md
explains how the checker sees this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from cachetools import LRUCache

from cacheproof.adapt import stats_from_snapshot
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
from cacheproof.spec.cache.values import value_size


@dataclass
class _Held:
    """An entry outside the LRUCache: reserved (value None) or ready and in use."""

    nbytes: int
    refcount: int
    retain: bool
    value: Any = None

    @property
    def state(self) -> EntryState:
        return EntryState.RESERVED if self.value is None else EntryState.READY


class ReservingLRUCache:
    """Reservations and pinned entries in a dict; idle entries in a `cachetools.LRUCache`."""

    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = arguments.check_capacity(capacity_bytes)
        self._idle: LRUCache = LRUCache(maxsize=capacity_bytes, getsizeof=value_size)
        self._idle_sizes: dict[Hashable, int] = {}  # an LRUCache read, items() included, reorders it
        self._held: dict[Hashable, _Held] = {}
        self._last_used: dict[Hashable, int] = {}  # recency of every entry, for snapshot()
        self._clock = 0

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        arguments.check_key("reserve", key)
        arguments.check_nbytes("reserve", key, nbytes, self._capacity)
        arguments.check_retain("reserve", key, retain)
        if key in self:
            raise WrongStateError(f"reserve({key!r}): the key is present")
        if self._protected_bytes() + nbytes > self._capacity:
            return False
        self._held[key] = _Held(nbytes, 1, retain)
        self._touch(key)
        return True

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        arguments.check_key("acquire", key)
        arguments.check_nbytes("acquire", key, nbytes, self._capacity)
        arguments.check_retain("acquire", key, retain)
        if key not in self:
            return Acquired.NEW_RESERVATION if self.reserve(key, nbytes, retain=retain) else Acquired.BLOCKED
        held = self._held.get(key)
        current = (held.nbytes, held.retain) if held is not None else (self._idle_sizes[key], True)
        if current != (nbytes, retain):
            raise ConflictError(f"acquire({key!r}): the entry has nbytes={current[0]}, retain={current[1]}")
        if held is None:
            if self._protected_bytes() + nbytes > self._capacity:
                return Acquired.BLOCKED
            held = self._held[key] = _Held(nbytes, 0, True, self._take_idle(key))
        held.refcount += 1
        self._touch(key)
        return Acquired.RESERVATION_HIT if held.state is EntryState.RESERVED else Acquired.READY_HIT

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        arguments.check_key("commit", key)
        size = arguments.check_value("commit", key, value)
        held = self._held.get(key)
        if held is None and key not in self._idle:
            raise UnknownKeyError(f"commit({key!r}): the key is absent")
        if held is None or held.state is EntryState.READY:
            raise WrongStateError(f"commit({key!r}): the entry is already READY")
        if size != held.nbytes:
            raise ConflictError(f"commit({key!r}): the value has {size} bytes, the reservation {held.nbytes}")
        evicted = self._evict_until_room(held.nbytes)
        held.value = value
        self._touch(key)
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        arguments.check_key("put", key)
        size = arguments.check_value("put", key, value)
        arguments.check_put_size(key, size, self._capacity)
        if key in self:
            raise WrongStateError(f"put({key!r}): the key is present")
        if self._pinned_bytes() + size > self._capacity:
            return False
        self._evict_until_room(size)
        self._add_idle(key, value, size)
        return True

    def get(self, key: Hashable) -> Any:
        arguments.check_key("get", key)
        held = self._held.get(key)
        if held is None:
            if key not in self._idle:
                raise UnknownKeyError(f"get({key!r}): the key is absent")
            value = self._idle[key]  # an LRUCache read makes the item its newest
        elif held.state is EntryState.RESERVED:
            raise WrongStateError(f"get({key!r}): the entry is RESERVED")
        else:
            value = held.value
        self._touch(key)
        return value

    def release(self, key: Hashable) -> bool:
        """Drop one reference; at the last one the entry leaves, or enters the LRUCache as its newest item."""
        arguments.check_key("release", key)
        held = self._held.get(key)
        if held is None:
            if key in self._idle:
                raise WrongStateError(f"release({key!r}): the entry has refcount 0")
            raise UnknownKeyError(f"release({key!r}): the key is absent")
        held.refcount -= 1
        if held.refcount > 0:
            return False
        del self._held[key]
        if held.state is EntryState.RESERVED or not held.retain:
            del self._last_used[key]
            return True
        self._add_idle(key, held.value, held.nbytes)
        return False

    def evict(self, nbytes: int) -> list[Hashable]:
        arguments.check_evict_nbytes(nbytes, self._capacity)
        if self._pinned_bytes() + nbytes > self._capacity:
            raise CapacityError(f"evict({nbytes}): evicting every idle entry is not enough")
        return self._evict_until_room(nbytes)

    def pop(self, key: Hashable) -> Any:
        arguments.check_key("pop", key)
        if key in self._held:
            raise WrongStateError(f"pop({key!r}): the entry is reserved or in use")
        if key not in self._idle:
            raise UnknownKeyError(f"pop({key!r}): the key is absent")
        del self._last_used[key]
        return self._take_idle(key)

    def clear(self) -> None:
        if self._held:
            raise WrongStateError(f"clear: {len(self._held)} entries are reserved or in use")
        self._idle.clear()
        self._idle_sizes.clear()
        self._last_used.clear()

    def snapshot(self) -> tuple[EntryView, ...]:
        """Every entry, least recently used first."""
        views = [EntryView(key, held.state, held.refcount, held.nbytes, held.retain) for key, held in self._held.items()]
        views += [EntryView(key, EntryState.READY, 0, self._idle_sizes[key], True) for key in self._idle]
        return tuple(sorted(views, key=lambda view: self._last_used[view.key]))

    def stats(self) -> CacheStats:
        """The contract's byte counts, from snapshot() (cacheproof.adapt.stats_from_snapshot)."""
        return stats_from_snapshot(self._capacity, self.snapshot())

    def __len__(self) -> int:
        return len(self._held) + len(self._idle)

    def __contains__(self, key: object) -> bool:
        arguments.check_key("in", key)
        return key in self._held or key in self._idle

    def _protected_bytes(self) -> int:
        return sum(held.nbytes for held in self._held.values())

    def _pinned_bytes(self) -> int:
        return sum(held.nbytes for held in self._held.values() if held.state is EntryState.READY)

    def _evict_until_room(self, incoming: int) -> list[Hashable]:
        """Pop the LRUCache's least recently used items until ready bytes plus `incoming` fit."""
        evicted = []
        while self._pinned_bytes() + self._idle.currsize + incoming > self._capacity:
            key, _ = self._idle.popitem()
            del self._last_used[key], self._idle_sizes[key]
            evicted.append(key)
        return evicted

    def _add_idle(self, key: Hashable, value: Any, nbytes: int) -> None:
        """The entry becomes the LRUCache's newest item (the only place an LRUCache inserts)."""
        self._idle[key] = value
        self._idle_sizes[key] = nbytes
        self._touch(key)

    def _take_idle(self, key: Hashable) -> Any:
        del self._idle_sizes[key]
        return self._idle.pop(key)

    def _touch(self, key: Hashable) -> None:
        self._clock += 1
        self._last_used[key] = self._clock


def factory(capacity_bytes: int) -> ReservingLRUCache:
    """A fresh cachetools-backed reserving cache of `capacity_bytes`."""
    return ReservingLRUCache(capacity_bytes)
