"""Caches that are correct when called from one thread and racy under several.

`LockedCacheSpec` is the spec with one lock around every public operation: linearizable by
construction, the concurrent checker must never flag it. Each racy cache is `LockedCacheSpec` that
drops its lock for slow work in one place (allocating, cloning a value, bookkeeping) and acts on a
decision taken before: every sequential check passes, and so does a stress test that looks at the
invariants at the end most of the time. The slow work is a forced racy window
(model_tests/forced_interleaving.py): the thread waits there until another thread of the scenario
has completed a call, as a real copy or allocation releasing the GIL lets it, so the race shows
whenever the scenario has a call to race with, whatever the OS scheduler does.
`cacheproof check --threads 3 --impl model_tests.racy_caches:NAME` must find every one (exit 1);
model_tests/test_concurrent_check.py holds it to that.
"""

from __future__ import annotations

import functools
import threading

from cacheproof.spec import Acquired, CacheSpec
from cacheproof.spec.cache import arguments, rules
from cacheproof.impl import TensorLRUCache
from cacheproof.impl.tensor_values import sized
from cacheproof.spec.cache.model import READY, RESERVED, _Entry
from model_tests.forced_interleaving import RacyWindow, counts_completed_calls

_OPERATIONS = (
    "reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear",
    "snapshot", "stats", "__len__", "__contains__",
)


def _locked(method):
    @functools.wraps(method)
    def with_lock(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return with_lock


class LockedCacheSpec(CacheSpec):
    """The spec with one lock held across every operation and view: correct under any interleaving."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._lock = threading.Lock()
        self.racy_window = RacyWindow()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        counts_completed_calls(cls, tuple(name for name in _OPERATIONS if name in vars(cls)))

    def _slow_work_unlocked(self) -> None:
        """Drop the lock for slow work (the racy window), then take it again (what the racy caches do)."""
        self._lock.release()
        try:
            self.racy_window.open()
        finally:
            self._lock.acquire()


for _name in _OPERATIONS:
    setattr(LockedCacheSpec, _name, _locked(getattr(CacheSpec, _name)))
counts_completed_calls(LockedCacheSpec, _OPERATIONS)


class CheckThenActReservation(LockedCacheSpec):
    """A reservation checks that it fits, allocates its slot with the lock dropped, and then
    claims the bytes without checking again: two reservations both fit an 8-byte cache."""

    def _try_reserve(self, key, nbytes, retain):
        if not rules.reservation_fits(self._bytes, nbytes):
            return False
        self._slow_work_unlocked()
        self._bytes = rules.after_reserve(self._bytes, nbytes)
        self._entries[key] = _Entry(RESERVED, nbytes, 1, retain)
        return True


class LostRefcountUpdate(LockedCacheSpec):
    """acquire of an entry that is already referenced reads the refcount, does its bookkeeping with
    the lock dropped, and writes back what it read plus one: concurrent acquires lose increments,
    and a later release frees an entry somebody still holds."""

    def acquire(self, key, nbytes, *, retain=True):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.refcount == 0 or entry.nbytes != nbytes or entry.retain != retain:
                return CacheSpec.acquire(self, key, nbytes, retain=retain)
            arguments.check_key("acquire", key)
            arguments.check_nbytes("acquire", key, nbytes, self._capacity)
            refcount = entry.refcount
            self._slow_work_unlocked()
            current = self._entries.get(key)
            if current is None:
                return CacheSpec.acquire(self, key, nbytes, retain=retain)
            self._move_to_newest(key, current.with_refcount(refcount + 1))
            self._hits += 1
            return Acquired.RESERVATION_HIT if current.state is RESERVED else Acquired.READY_HIT


class EvictionPlanAfterUnlock(LockedCacheSpec):
    """Eviction picks its victims (idle entries, oldest first), drops the lock to free their memory
    and clone the incoming value, and then evicts the victims it picked, although another thread may have acquired one
    meanwhile: an entry in use is evicted (use after evict)."""

    def _evict_until_room(self, incoming):
        plan, planned_bytes = [], 0
        if not rules.has_room(self._bytes, incoming):
            for key, entry in self._entries.items():
                if entry.state is READY and entry.refcount == 0:
                    plan.append(key)
                    planned_bytes += entry.nbytes
                    if rules.has_room(rules.after_evict(self._bytes, planned_bytes), incoming):
                        break
        if plan:
            self._slow_work_unlocked()
        evicted, evicted_bytes = [], 0
        for key in plan:
            entry = self._entries.pop(key, None)
            if entry is None:
                continue
            if entry.refcount > 0:  # acquired meanwhile: its bytes leave the pinned count
                self._bytes = self._bytes._replace(pinned=self._bytes.pinned - entry.nbytes,
                                                   idle=self._bytes.idle + entry.nbytes)
            evicted.append(key)
            evicted_bytes += entry.nbytes
        self._evictions += len(evicted)
        return evicted, evicted_bytes


class CommitWithoutRecheck(TensorLRUCache):
    """TensorLRUCache (on CPU) whose commit copies the value outside the lock, as the real one does,
    but then stores it into the entry it looked up before the copy without checking it again: a
    reservation committed or abandoned meanwhile is committed once more."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes, device="cpu")
        self.racy_window = RacyWindow()

    def commit(self, key, value):
        size = sized("commit", key, value)
        with self._lock:
            entry = self._commit_entry(key, size)
        stored, ready_event = self._store("commit", key, value, size)
        self.racy_window.open()
        with self._lock:
            evicted = self._evict_until_room(entry.nbytes)
            self._reserved_bytes -= entry.nbytes
            self._pinned_bytes += entry.nbytes
            entry.state, entry.value, entry.ready_event = READY, stored, ready_event
            if key in self._entries:
                self._entries.move_to_end(key)
                self._next_stamp = entry.stamp = self._next_stamp + 1
            return evicted


counts_completed_calls(CommitWithoutRecheck, _OPERATIONS)


class LockOrderInversion(LockedCacheSpec):
    """acquire takes the cache's lock and then the statistics lock; release takes them the other
    way round: an acquire and a release that meet deadlock. Each holds its first lock in a forced
    racy window (model_tests/forced_interleaving.py), so they meet whenever a scenario runs them
    on two threads."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._stats_lock = threading.Lock()

    def acquire(self, key, nbytes, *, retain=True):
        with self.racy_window.hold(self._lock):
            self.racy_window.open()
            with self.racy_window.hold(self._stats_lock):
                return CacheSpec.acquire(self, key, nbytes, retain=retain)

    def release(self, key):
        with self.racy_window.hold(self._stats_lock):
            self.racy_window.open()
            with self.racy_window.hold(self._lock):
                return CacheSpec.release(self, key)


def _held_in_the_window(name: str):
    def method(self, *args, **kwargs):
        with self.racy_window.hold(self._lock):
            return getattr(CacheSpec, name)(self, *args, **kwargs)

    return functools.wraps(getattr(CacheSpec, name))(method)


_ELSEWHERE = tuple(name for name in _OPERATIONS if name not in ("acquire", "release"))
for _name in _ELSEWHERE:
    setattr(LockOrderInversion, _name, _held_in_the_window(_name))
counts_completed_calls(LockOrderInversion, _ELSEWHERE)  # acquire and release: counted as the class was made


class ReentersItsLock(LockedCacheSpec):
    """release of an entry's last reference calls the locked `len()` to log the cache's size: the
    lock is not re-entrant, so it waits for itself, with one thread as with many."""

    def release(self, key):
        with self._lock:
            removed = CacheSpec.release(self, key)
            if removed:
                len(self)
            return removed


RACY_CACHES = (CheckThenActReservation, LostRefcountUpdate, EvictionPlanAfterUnlock, CommitWithoutRecheck)
"""Each must be found by `cacheproof check --threads 3` through an outcome or state no order explains."""

DEADLOCKING_CACHES = (LockOrderInversion, ReentersItsLock)
"""Each must be reported as a thread that never returns (tests give them a short timeout)."""
