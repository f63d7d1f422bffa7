"""Broken caches whose one bug shows only when entries are shared, reservations pile up, releases
come in another order than the acquires, capacity is met exactly, or a counter wraps: the classes
model_tests/broken_caches.py lacks (issue 27, "search power").

Each is examples/minimal_cache.py's conforming `MinimalCache` with one rule changed. Its docstring
gives the shortest call sequence that exposes it, in the form model_tests/test_search_power.py
replays: `Shortest (capacity N): calls -> what differs`, sizes in bytes, `b` a value of the reserved
size, `30 × get(0)` one call made 30 times.

They are targets for the checker's generation: tools/search_power.py and
model_tests/test_search_power.py measure on how many seeds a default `cacheproof check --impl
model_tests.broken_sharing_caches:NAME` finds each, and how long it takes to report.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Hashable

from cacheproof.spec import Acquired, CacheStats
from cacheproof.spec.cache import arguments
from cacheproof.spec.cache.values import value_size
from examples.minimal_cache import READY, RESERVED, MinimalCache, _Entry

REFCOUNT_WRAP = 32
"""A reference count kept in 5 bits: the 32nd holder of one entry reads as none."""

CLOCK_WRAP = 32
"""A recency clock kept in 5 bits: the 33rd move to newest stamps an entry as the oldest."""


def _is_shared(entry: _Entry) -> bool:
    return getattr(entry, "shared", False)


class CommitMakesRoomForEveryReservation(MinimalCache):
    """commit makes room for every pending reservation, not only its own: it evicts idle entries
    until ready bytes + all reserved bytes fit. With one reservation pending that is the spec;
    with two it evicts an entry the spec keeps.
    Shortest (capacity 2): put(0, 1), reserve(1, 1), reserve(2, 1), commit(1, b) -> spec [], this cache [0]."""

    _committing = False

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        self._committing = True
        try:
            return super().commit(key, value)
        finally:
            self._committing = False

    def _make_room(self, incoming: int) -> list[Hashable]:
        if self._committing:  # the committed entry is still RESERVED here: its bytes are among these
            incoming = sum(e.nbytes for e in self._entries.values() if e.state is RESERVED)
        return super()._make_room(incoming)


class TransientDroppedAtFirstRelease(MinimalCache):
    """A retain=False entry is removed at the first release, though a second holder still reads it.
    Shortest (capacity 2): acquire(0, 1, retain=False), commit(0, b), acquire(0, 1, retain=False),
    release(0) -> spec False (one holder left), this cache True (the entry is gone)."""

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        if entry is not None and entry.state is READY and not entry.retain and entry.refcount > 1:
            del self._entries[key]
            return True
        return super().release(key)


class TransientKeptAfterSharing(MinimalCache):
    """A retain=False entry that ever had two holders is kept as an idle entry at its last release
    (the "shared entries are worth keeping" shortcut), where the spec drops it.
    Shortest (capacity 2): acquire(0, 1, retain=False), commit(0, b), acquire(0, 1, retain=False),
    release(0), release(0) -> spec True (removed), this cache False (kept idle, retain=False)."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        result = super().acquire(key, nbytes, retain=retain)
        entry = self._entries.get(key)
        if entry is not None and entry.refcount > 1:
            entry.shared = True
        return result

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        if entry is not None and entry.state is READY and not entry.retain and entry.refcount == 1 \
                and _is_shared(entry):
            entry.refcount = 0
            return False
        return super().release(key)


class ProducerReleaseAbandonsSharedReservation(MinimalCache):
    """A release of a RESERVED entry abandons the reservation even while other holders wait on it
    (the producer's release taken for the only one).
    Shortest (capacity 2): reserve(0, 1), acquire(0, 1), release(0) -> spec False (still reserved,
    one holder), this cache True (removed)."""

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        if entry is not None and entry.state is RESERVED and entry.refcount > 1:
            del self._entries[key]
            return True
        return super().release(key)


class FirstInFirstOutHolderIds(MinimalCache):
    """Holders of an entry are a set of ids, a new holder's id being the number of holders; a
    release drops the smallest id (first in, first out). Nested acquires and releases stay right;
    an acquire after a release while holders remain reuses a live id, so a holder is lost.
    Shortest (capacity 2): reserve(0, 1), acquire(0, 1), release(0), acquire(0, 1) -> spec refcount 2,
    this cache 1."""

    @staticmethod
    def _holders(entry: _Entry) -> set[int]:
        return getattr(entry, "holders", set(range(entry.refcount)))

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        entry = self._entries.get(arguments.check_key("acquire", key))
        holders = None if entry is None else self._holders(entry)
        result = super().acquire(key, nbytes, retain=retain)
        if holders is not None and result is not Acquired.BLOCKED:
            holders.add(len(holders))
            entry.holders, entry.refcount = holders, len(holders)
        return result

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        if entry is not None and entry.refcount > 0:
            holders = self._holders(entry)
            holders.discard(min(holders))
            entry.holders, entry.refcount = holders, len(holders) + 1  # the release below takes the 1
        return super().release(key)


class RefcountWrapsAt32(MinimalCache):
    """The reference count is kept in 5 bits: the 32nd holder of one entry wraps it to 0, so the
    entry reads as idle (a READY one becomes evictable under 32 readers).
    Shortest, 32 calls (capacity 1): reserve(0, 1), 31 × acquire(0, 1) -> spec refcount 32, this cache 0."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        result = super().acquire(key, nbytes, retain=retain)
        entry = self._entries.get(key)
        if entry is not None:
            entry.refcount %= REFCOUNT_WRAP
        return result


class RecencyClockWrapsAt32(MinimalCache):
    """Eviction picks the idle entry with the smallest recency stamp, and stamps are a 5-bit clock:
    after 32 moves to newest a fresh entry is stamped 0 and evicted as if it were the oldest. The
    snapshot keeps the true order; only the choice of victim is wrong.
    Shortest, 34 calls (capacity 2): put(0, 1), 30 × get(0), put(1, 1), get(0), put(2, 1) -> spec
    evicts 1, this cache evicts 0."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._clock = 0

    def _stamp(self, key: Hashable) -> None:
        self._entries[key].stamp = self._clock % CLOCK_WRAP
        self._clock += 1

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        reserved = super().reserve(key, nbytes, retain=retain)
        if reserved:
            self._stamp(key)
        return reserved

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        result = super().acquire(key, nbytes, retain=retain)
        if result is not Acquired.BLOCKED:
            self._stamp(key)
        return result

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        evicted = super().commit(key, value)
        self._stamp(key)
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        inserted = super().put(key, value)
        if inserted:
            self._stamp(key)
        return inserted

    def get(self, key: Hashable) -> Any:
        value = super().get(key)
        self._stamp(key)
        return value

    def _make_room(self, incoming: int) -> list[Hashable]:
        evicted: list[Hashable] = []
        idle = [key for key, e in self._entries.items() if e.state is READY and e.refcount == 0]
        for key in sorted(idle, key=lambda k: self._entries[k].stamp):
            if self._ready() + incoming <= self.capacity_bytes:
                break
            del self._entries[key]
            evicted.append(key)
        return evicted


class CommitEvictsAtExactFit(MinimalCache):
    """commit evicts until ready bytes + its own stay strictly below the capacity (< for <=), so a
    commit that exactly fills the cache evicts one idle entry too many.
    Shortest (capacity 2): put(0, 1), reserve(1, 1), commit(1, b) -> spec [], this cache [0]."""

    _committing = False

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        self._committing = True
        try:
            return super().commit(key, value)
        finally:
            self._committing = False

    def _make_room(self, incoming: int) -> list[Hashable]:
        return super()._make_room(incoming + 1 if self._committing else incoming)


class ReservationCountedPerHolder(MinimalCache):
    """The admission test counts a reservation's bytes once per holder: two holders of one pending
    reservation (a NEW_RESERVATION and a RESERVATION_HIT) claim its room twice, and a reservation
    that fits is refused. The stats count it once.
    Shortest (capacity 2): reserve(0, 1), acquire(0, 1), reserve(1, 1) -> spec True, this cache False."""

    def _reserve_new(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        claimed = sum(e.nbytes * e.refcount for e in self._entries.values() if e.state is RESERVED)
        if claimed + self._pinned() + nbytes > self.capacity_bytes:
            return False
        return super()._reserve_new(key, nbytes, retain)


class CommitForgetsWaiters(MinimalCache):
    """commit hands the entry to its producer alone: the refcount becomes 1, forgetting the holders
    that joined the reservation (RESERVATION_HIT) and wait for the value.
    Shortest (capacity 1): reserve(0, 1), acquire(0, 1), commit(0, b) -> spec refcount 2, this cache 1."""

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        evicted = super().commit(key, value)
        self._entries[key].refcount = 1
        return evicted


class SharedEntryNeverEvictable(MinimalCache):
    """An entry that once had two holders moves to a "shared" list that eviction does not walk and
    never moves back: idle again, it is never evicted, and the cache overfills.
    Shortest (capacity 1): put(0, 1), acquire(0, 1), acquire(0, 1), release(0), release(0), put(1, 1)
    -> spec evicts 0 (one entry), this cache keeps it (two entries)."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        result = super().acquire(key, nbytes, retain=retain)
        entry = self._entries.get(key)
        if entry is not None and entry.refcount > 1:
            entry.shared = True
        return result

    def _make_room(self, incoming: int) -> list[Hashable]:
        evicted: list[Hashable] = []
        idle = [k for k, e in self._entries.items() if e.state is READY and e.refcount == 0 and not _is_shared(e)]
        for key in idle:
            if self._ready() + incoming <= self.capacity_bytes:
                break
            del self._entries[key]
            evicted.append(key)
        return evicted


class EvictableAfterFirstOfTwoReleases(MinimalCache):
    """Eviction reads a per-entry pin flag that every release clears: after the first of two
    holders releases, the entry is evicted under the second. The refcount and the stats stay right.
    Shortest (capacity 2): acquire(0, 1), commit(0, b), acquire(0, 1), release(0), put(1, 1), put(2, 1)
    -> spec evicts 1, this cache evicts 0 (still held)."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        result = super().acquire(key, nbytes, retain=retain)
        if result is not Acquired.BLOCKED:
            self._entries[key].pinned = True
        return result

    def release(self, key: Hashable) -> bool:
        removed = super().release(key)
        if key in self._entries:
            self._entries[key].pinned = False
        return removed

    def _make_room(self, incoming: int) -> list[Hashable]:
        evicted: list[Hashable] = []
        idle = [k for k, e in self._entries.items() if e.state is READY and not getattr(e, "pinned", e.refcount > 0)]
        for key in idle:
            if self._ready() + incoming <= self.capacity_bytes:
                break
            del self._entries[key]
            evicted.append(key)
        return evicted


class FreeCounterDoublesSharedTransient(MinimalCache):
    """Free bytes are a counter, and every release of a READY retain=False entry gives its bytes
    back, not only the last one: a transient entry with two holders is given back twice, and
    stats().free_bytes runs above the truth for good.
    Shortest (capacity 2): acquire(0, 1, retain=False), commit(0, b), acquire(0, 1, retain=False),
    release(0) -> spec free_bytes 1, this cache 2."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._free = self.capacity_bytes

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        evicted = super().commit(key, value)
        self._free -= self._entries[key].nbytes
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        inserted = super().put(key, value)
        if inserted:
            self._free -= value_size(value)
        return inserted

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        removed = super().release(key)
        if entry is not None and entry.state is READY and not entry.retain:
            self._free += entry.nbytes
        return removed

    def pop(self, key: Hashable) -> Any:
        value = super().pop(key)
        self._free += value_size(value)
        return value

    def clear(self) -> None:
        super().clear()
        self._free = self.capacity_bytes

    def _make_room(self, incoming: int) -> list[Hashable]:
        sizes = {k: e.nbytes for k, e in self._entries.items()}
        evicted = super()._make_room(incoming)
        self._free += sum(sizes[k] for k in evicted)
        return evicted

    def stats(self) -> CacheStats:
        return replace(super().stats(), free_bytes=self._free)


class SecondHolderBlocked(MinimalCache):
    """acquire of an entry already in use is put through the reservation test, which counts its own
    bytes twice: a second reader of a pinned entry is BLOCKED where the spec's READY_HIT needs no
    room (the bytes are already protected).
    Shortest (capacity 1): acquire(0, 1), commit(0, b), acquire(0, 1) -> spec READY_HIT, this cache BLOCKED."""

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        self._check_reservation("acquire", key, nbytes, retain)
        entry = self._entries.get(key)
        if entry is not None and entry.state is READY and entry.refcount > 0 \
                and (entry.nbytes, entry.retain) == (nbytes, retain) \
                and self._protected() + nbytes > self.capacity_bytes:
            return Acquired.BLOCKED
        return super().acquire(key, nbytes, retain=retain)


class ReleaseUnpinsTheLastPinned(MinimalCache):
    """Pinned bytes are a counter fed by a stack of pins (a scoped-pin discipline): when an entry
    turns idle the counter drops by the size of the entry pinned last, not of the one released.
    Releases in last-pinned-first order, or of entries of one size, stay right.
    Shortest (capacity 3): put(0, 1), put(1, 2), acquire(0, 1), acquire(1, 2), release(0) -> spec
    pinned_bytes 2, this cache 1."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._pins: list[int] = []  # the sizes of the pinned entries, in the order they were pinned

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        entry = self._entries.get(arguments.check_key("acquire", key))
        idle = entry is not None and entry.state is READY and entry.refcount == 0
        result = super().acquire(key, nbytes, retain=retain)
        if idle and result is Acquired.READY_HIT:
            self._pins.append(nbytes)
        return result

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        evicted = super().commit(key, value)
        self._pins.append(self._entries[key].nbytes)
        return evicted

    def release(self, key: Hashable) -> bool:
        entry = self._entries.get(arguments.check_key("release", key))
        ready = entry is not None and entry.state is READY
        removed = super().release(key)
        if ready and entry.refcount == 0:
            self._pins.pop()
        return removed

    def stats(self) -> CacheStats:
        honest = super().stats()
        pinned = sum(self._pins)
        return replace(honest, pinned_bytes=pinned, idle_bytes=honest.ready_bytes - pinned)


BROKEN_SHARING_CACHES = (
    CommitMakesRoomForEveryReservation,
    TransientDroppedAtFirstRelease,
    TransientKeptAfterSharing,
    ProducerReleaseAbandonsSharedReservation,
    FirstInFirstOutHolderIds,
    RefcountWrapsAt32,
    RecencyClockWrapsAt32,
    CommitEvictsAtExactFit,
    ReservationCountedPerHolder,
    CommitForgetsWaiters,
    SharedEntryNeverEvictable,
    EvictableAfterFirstOfTwoReleases,
    FreeCounterDoublesSharedTransient,
    SecondHolderBlocked,
    ReleaseUnpinsTheLastPinned,
)
"""Every broken cache of this module, one bug each."""
