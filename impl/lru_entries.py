"""The entry bookkeeping of `TensorLRUCache`: its entries in recency order, their recency stamps,
the heap of idle entries and the byte counters, with the lookups that raise the contract's errors.

Rule: `_entries` holds every entry oldest first and their stamps increase along it (a move to
newest re-stamps); every idle entry (READY, refcount 0) has exactly one live (stamp, key) item in
`_idle_heap`, and `_idle_count` counts them; items made stale (the entry was pinned, re-stamped or
removed) are skipped when popped and dropped once the heap holds more than 2 * idle entries +
HEAP_SLACK items, so eviction pops the oldest idle entry in amortized O(log n); `_bytes` holds the
counters as `cacheproof.spec.cache.rules` updates them. Every method runs with the cache's lock held.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Any, Callable, Hashable

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.spec.cache import arguments, invariants, rules
from cacheproof.spec.errors import ConflictError, UnknownKeyError, WrongStateError
from cacheproof.spec.cache.types import EntryState, EntryView, Snapshot

RESERVED, READY = EntryState.RESERVED, EntryState.READY

HEAP_SLACK = 32
"""Stale idle-heap items tolerated beyond the live idle entries before the heap is compacted."""


class Entry:
    """One key's entry. `stamp` is its recency: larger is newer, reassigned on every move to newest."""

    __slots__ = ("state", "nbytes", "refcount", "retain", "value", "ready_event", "stamp")

    def __init__(self, state: EntryState, nbytes: int, refcount: int, retain: bool, stamp: int) -> None:
        self.state = state
        self.nbytes = nbytes
        self.refcount = refcount
        self.retain = retain
        self.value: torch.Tensor | None = None  # READY only
        self.ready_event: Any = None  # a torch.cuda.Event when stream-aware, else None
        self.stamp = stamp

    @property
    def is_idle(self) -> bool:
        return self.state is READY and self.refcount == 0


class EntryBookkeeping:
    """The bookkeeping half of `TensorLRUCache`, which sets the state in its `__init__`: `_capacity`,
    `_entries` (an OrderedDict, oldest first), `_idle_heap`, `_idle_count`, `_next_stamp`, `_bytes`
    and the `_evictions` counter."""

    _capacity: int
    _entries: OrderedDict[Hashable, Entry]
    _idle_heap: list[tuple[int, Hashable]]
    _idle_count: int
    _next_stamp: int
    _bytes: rules.Bytes
    _evictions: int

    def _snapshot(self) -> Snapshot:
        return tuple(
            EntryView(key, e.state, e.refcount, e.nbytes, e.retain) for key, e in self._entries.items()
        )

    def _try_reserve(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        if not rules.reservation_fits(self._bytes, nbytes):
            return False
        self._entries[key] = Entry(RESERVED, nbytes, 1, retain, self._new_stamp())
        self._bytes = rules.after_reserve(self._bytes, nbytes)
        return True

    def _commit_entry(self, key: Hashable, size: int) -> Entry:
        """The RESERVED entry `commit(key, value)` of a value of `size` bytes fills; the contract's
        error if there is none. Lock held."""
        entry = self._entries.get(key)
        if entry is None:
            raise UnknownKeyError(f"commit({key!r}): the key is absent; reserve or acquire it first")
        if entry.state is READY:
            raise WrongStateError(f"commit({key!r}): the entry is already READY")
        if size != entry.nbytes:
            raise ConflictError(f"commit({key!r}): the value has {size} bytes, the reservation {entry.nbytes}")
        return entry

    def _put_fits(self, key: Hashable, size: int) -> bool:
        """Whether `put(key, value)` of a value of `size` bytes can make room now; WrongStateError
        if the key is present. Lock held."""
        present = self._entries.get(key)
        if present is not None:
            raise WrongStateError(f"put({key!r}): the key is already {present.state.name}; put never replaces")
        return rules.eviction_can_make_room(self._bytes, size)

    def _ready_entry(self, operation: str, key: Hashable) -> Entry:
        arguments.check_key(operation, key)
        entry = self._entries.get(key)
        if entry is None:
            raise UnknownKeyError(f"{operation}({key!r}): the key is absent")
        if entry.state is RESERVED:
            raise WrongStateError(f"{operation}({key!r}): the entry is RESERVED; its value does not exist yet")
        return entry

    def _new_stamp(self) -> int:
        self._next_stamp += 1
        return self._next_stamp

    def _move_to_newest(self, key: Hashable, entry: Entry) -> None:
        """Move to newest (first: `move_to_end` raises before changing anything), then re-stamp."""
        self._entries.move_to_end(key)
        self._restamp(key, entry)

    def _restamp(self, key: Hashable, entry: Entry) -> None:
        """A fresh recency stamp; an idle entry gets a fresh heap item (its old one turns stale)."""
        entry.stamp = self._new_stamp()
        if entry.is_idle:
            heapq.heappush(self._idle_heap, (entry.stamp, key))
        self._compact_idle_heap_if_stale()

    def _add_idle(self, key: Hashable, entry: Entry) -> None:
        """A READY entry just became idle: it joins the heap at its own (unchanged) recency."""
        self._idle_count += 1
        heapq.heappush(self._idle_heap, (entry.stamp, key))

    def _is_live(self, item: tuple[int, Hashable]) -> bool:
        stamp, key = item
        entry = self._entries.get(key)
        return entry is not None and entry.is_idle and entry.stamp == stamp

    def _heap_limit(self) -> int:
        return 2 * self._idle_count + HEAP_SLACK

    def _compact_idle_heap_if_stale(self) -> None:
        """Drop stale items once they outnumber the live ones by the slack: amortized O(1)."""
        if len(self._idle_heap) > self._heap_limit():
            self._idle_heap = [item for item in self._idle_heap if self._is_live(item)]
            heapq.heapify(self._idle_heap)

    def _evict_until_room(self, incoming: int) -> tuple[list[Hashable], int]:
        """Evict idle READY entries oldest first until `rules.bytes_to_evict` are freed. Caller ensures it can."""
        evicted: list[Hashable] = []
        evicted_bytes = 0
        needed = rules.bytes_to_evict(self._bytes, incoming)
        while evicted_bytes < needed:
            key, entry = self._pop_oldest_idle()
            del self._entries[key]
            evicted.append(key)
            evicted_bytes += entry.nbytes
        self._idle_count -= len(evicted)
        self._evictions += len(evicted)
        self._compact_idle_heap_if_stale()
        return evicted, evicted_bytes

    def _pop_oldest_idle(self) -> tuple[Hashable, Entry]:
        while self._idle_heap:
            item = heapq.heappop(self._idle_heap)
            if self._is_live(item):
                return item[1], self._entries[item[1]]
        raise invariants.InvariantViolation("eviction ran out of idle entries although its guard held")

    def _check_bookkeeping(self, check_value: Callable[[Hashable, Entry], None]) -> None:
        """Raise `InvariantViolation` if the counters, the recency stamps or the idle heap disagree
        with the entries; `check_value` checks each READY entry's stored value."""
        reserved = pinned = idle = 0
        previous_stamp = -1
        for key, entry in self._entries.items():
            if entry.stamp <= previous_stamp:
                raise invariants.InvariantViolation(f"recency stamps out of order at {key!r}")
            previous_stamp = entry.stamp
            if entry.state is RESERVED:
                reserved += entry.nbytes
                if entry.value is not None:
                    raise invariants.InvariantViolation(f"RESERVED entry {key!r} holds a value")
            else:
                check_value(key, entry)
                if entry.refcount > 0:
                    pinned += entry.nbytes
                else:
                    idle += entry.nbytes
        counted = rules.Bytes(self._capacity, reserved, pinned, idle)
        if counted != self._bytes:
            raise invariants.InvariantViolation(
                f"byte counters {self._bytes} != counted from entries {counted}"
            )
        idle_keys = {key for key, entry in self._entries.items() if entry.is_idle}
        live_items = [item for item in self._idle_heap if self._is_live(item)]
        if len(live_items) != len(idle_keys) or {key for _, key in live_items} != idle_keys:
            raise invariants.InvariantViolation("the idle heap does not hold exactly the idle entries")
        if self._idle_count != len(idle_keys):
            raise invariants.InvariantViolation(
                f"idle count {self._idle_count} != {len(idle_keys)} idle entries"
            )
        if len(self._idle_heap) > self._heap_limit():
            raise invariants.InvariantViolation(f"idle heap holds {len(self._idle_heap)} items")
