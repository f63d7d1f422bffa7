"""Deliberately broken caches, one bug each, drawn from the peers' bug histories.

Each is the spec with a single rule changed. `cacheproof check --impl model_tests.broken_caches:NAME`
must find every one (exit 1); model_tests/test_checker_bites.py holds it to that.
"""

from __future__ import annotations

from dataclasses import replace

from cacheproof.spec import Acquired, CacheSpec
from cacheproof.spec.cache import arguments, rules
from cacheproof.spec.cache.model import READY, RESERVED


class OffByOneCapacity(CacheSpec):
    """A reservation that exactly fills the capacity is refused (< instead of <=)."""

    def _try_reserve(self, key, nbytes, retain):
        if rules.protected(self._bytes) + nbytes >= self.capacity_bytes:
            return False
        return super()._try_reserve(key, nbytes, retain)


class EvictsPinnedEntries(CacheSpec):
    """Eviction takes any READY entry, in use or not (an evicted-while-in-use tensor)."""

    def _evict_until_room(self, incoming):
        evicted, evicted_bytes = [], 0
        for key, entry in list(self._entries.items()):
            if rules.ready(self._bytes) - evicted_bytes + incoming <= self.capacity_bytes:
                break
            if entry.state is READY:
                del self._entries[key]
                evicted.append(key)
                evicted_bytes += entry.nbytes
                if entry.refcount > 0:
                    self._bytes = self._bytes._replace(pinned=self._bytes.pinned - entry.nbytes,
                                                       idle=self._bytes.idle + entry.nbytes)
        return evicted, evicted_bytes


class TransientSurvivesRelease(CacheSpec):
    """The last release of a retain=False entry keeps it as an idle entry (a leak)."""

    def release(self, key):
        arguments.check_key("release", key)
        entry = self._entries.get(key)
        if entry is not None and entry.state is READY and not entry.retain and entry.refcount == 1:
            self._entries[key] = replace(entry, retain=True)
            super().release(key)
            return True
        return super().release(key)


class GetTakesReference(CacheSpec):
    """get increments the refcount (a read pins the entry forever)."""

    def get(self, key):
        value = super().get(key)
        entry = self._entries[key]
        if entry.refcount == 0:
            self._bytes = rules.after_pin(self._bytes, entry.nbytes)
        self._entries[key] = replace(entry, refcount=entry.refcount + 1)
        return value


class EvictsNewestFirst(CacheSpec):
    """Eviction walks the recency order from the newest end (MRU instead of LRU)."""

    def _evict_until_room(self, incoming):
        evicted, evicted_bytes = [], 0
        for key, entry in reversed(list(self._entries.items())):
            if rules.has_room(rules.after_evict(self._bytes, evicted_bytes), incoming):
                break
            if entry.state is READY and entry.refcount == 0:
                del self._entries[key]
                evicted.append(key)
                evicted_bytes += entry.nbytes
        return evicted, evicted_bytes


class RepinsWithoutFitCheck(CacheSpec):
    """acquire of an idle entry pins it without checking that reservations still fit (seed 003)."""

    def acquire(self, key, nbytes, *, retain=True):
        arguments.check_key("acquire", key)
        arguments.check_nbytes("acquire", key, nbytes, self.capacity_bytes)
        arguments.check_retain("acquire", key, retain)
        entry = self._entries.get(key)
        if entry is not None and entry.state is READY and entry.refcount == 0 and entry.nbytes == nbytes \
                and entry.retain == retain:
            self._bytes = rules.after_pin(self._bytes, nbytes)
            self._move_to_newest(key, replace(entry, refcount=1))
            return Acquired.READY_HIT
        return super().acquire(key, nbytes, retain=retain)


class PutEvictsBeforeCheckingFit(CacheSpec):
    """put evicts idle entries first and only then finds the value does not fit (mutates, returns False)."""

    def put(self, key, value):
        arguments.check_key("put", key)
        size = len(value) if isinstance(value, (bytes, bytearray)) else None
        if size is not None and key not in self._entries and size <= self.capacity_bytes:
            if not rules.eviction_can_make_room(self._bytes, size):
                _, evicted_bytes = self._evict_until_room(size)
                self._bytes = rules.after_evict(self._bytes, evicted_bytes)
                return False
        return super().put(key, value)


class ReleaseOfIdleIsNoop(CacheSpec):
    """release of an entry without references returns False instead of raising (vLLM #55733)."""

    def release(self, key):
        arguments.check_key("release", key)
        entry = self._entries.get(key)
        if entry is not None and entry.refcount == 0:
            return False
        return super().release(key)


class ClearDropsBusyEntries(CacheSpec):
    """clear removes reserved and in-use entries too."""

    def clear(self):
        self._entries.clear()
        self._bytes = rules.after_clear(self._bytes)


class GetDoesNotPromote(CacheSpec):
    """get leaves the entry where it is in the recency order."""

    def get(self, key):
        entry = self._ready_entry("get", key)
        return entry.value


class AcquireIgnoresConflicts(CacheSpec):
    """acquire of a present key with another nbytes or retain is accepted as a hit."""

    def acquire(self, key, nbytes, *, retain=True):
        arguments.check_key("acquire", key)
        entry = self._entries.get(key)
        if entry is not None and isinstance(nbytes, int) and 1 <= nbytes <= self.capacity_bytes \
                and isinstance(retain, bool):
            nbytes, retain = entry.nbytes, entry.retain
        return super().acquire(key, nbytes, retain=retain)


class StalePinnedCounter(CacheSpec):
    """The last release of a retained entry forgets to move its bytes from pinned to idle."""

    def release(self, key):
        arguments.check_key("release", key)
        entry = self._entries.get(key)
        removed = super().release(key)
        if entry is not None and entry.state is READY and entry.retain and entry.refcount == 1:
            self._bytes = self._bytes._replace(pinned=self._bytes.pinned + entry.nbytes,
                                               idle=self._bytes.idle - entry.nbytes)
        return removed


class CommitEvictsBeforeSizeCheck(CacheSpec):
    """commit evicts to make room before it checks the value's size, then raises (breaks I6)."""

    def commit(self, key, value):
        arguments.check_key("commit", key)
        entry = self._entries.get(key)
        if entry is not None and entry.state is RESERVED and isinstance(value, (bytes, bytearray)) \
                and len(value) != entry.nbytes:
            _, evicted_bytes = self._evict_until_room(entry.nbytes)
            self._bytes = rules.after_evict(self._bytes, evicted_bytes)
        return super().commit(key, value)


class ReservationEvictable(CacheSpec):
    """Eviction also drops RESERVED entries (a reservation vanishes under its producer)."""

    def _evict_until_room(self, incoming):
        evicted, evicted_bytes = [], 0
        for key, entry in list(self._entries.items()):
            if rules.has_room(rules.after_evict(self._bytes, evicted_bytes), incoming):
                break
            if entry.refcount == 0 or (entry.state is RESERVED and incoming > 1):
                del self._entries[key]
                evicted.append(key)
                if entry.state is READY:
                    evicted_bytes += entry.nbytes
                else:
                    self._bytes = rules.after_abandon(self._bytes, entry.nbytes)
        return evicted, evicted_bytes


class SizesByElementCount(CacheSpec):
    """Sizes a value by its element count (numel, len of an array) instead of its bytes: right for
    bytes and uint8 values, a half or an eighth of the truth for float16, float32 or float64 ones,
    so a commit of a reservation's bytes is refused and the byte counts fall short of what is held."""

    def _value_size(self, operation, key, value):
        size = super()._value_size(operation, key, value)
        itemsize = getattr(value, "itemsize", 1)
        return size // itemsize if size and itemsize > 1 else size


BROKEN_CACHES = (
    OffByOneCapacity,
    EvictsPinnedEntries,
    TransientSurvivesRelease,
    GetTakesReference,
    EvictsNewestFirst,
    RepinsWithoutFitCheck,
    PutEvictsBeforeCheckingFit,
    ReleaseOfIdleIsNoop,
    ClearDropsBusyEntries,
    GetDoesNotPromote,
    AcquireIgnoresConflicts,
    StalePinnedCounter,
    CommitEvictsBeforeSizeCheck,
    ReservationEvictable,
    SizesByElementCount,
)
