"""The entry bookkeeping of `TensorLRUCache`: its argument checks, its entries in recency order,
their recency stamps, the heap of idle entries and the byte counters, with the lookups that raise
the contract's errors.

Rule: the cache states its own arithmetic. Nothing here calls the spec's rules, steps or
transitions (an import-linter contract in pyproject.toml forbids it), so a bug in a rule of the
spec is not a bug of this cache too, and the checker sees the two disagree. From the spec it takes
the contract's vocabulary only: the error classes, the result types, the sizing rule of values
(tensor_values.py) and the invariant table `check_valid` ends with.

- Byte counters: `_reserved_bytes` (RESERVED entries), `_pinned_bytes` (READY, refcount > 0),
  `_idle_bytes` (READY, refcount 0). A reservation fits while reserved + pinned + nbytes <=
  capacity; eviction can make room while pinned + incoming <= capacity; it evicts the oldest idle
  entries until pinned + idle + incoming <= capacity.
- `_entries` holds every entry oldest first and their stamps increase along it (a move to newest
  re-stamps).
- Every idle entry has exactly one live item in `_idle_heap`: the item (s, key) with
  `entry.heap_stamp == s`, pushed when the entry turned idle, so s <= entry.stamp. A move to newest
  of an idle entry (get) re-stamps the entry and leaves its item: when eviction pops an item older
  than its entry's stamp it pushes the entry again at its stamp, so the popped live item whose
  stamp is its entry's own is the oldest idle entry (every other idle entry's stamp is at least
  its item's). Items of entries pinned or removed are stale, skipped when popped and dropped once
  the heap holds more than 2 * idle entries + HEAP_SLACK items: eviction is amortized O(log n),
  and `get` does no heap work.

Every method runs with the cache's lock held.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Any, Callable, Hashable

from cacheproof.spec.cache.invariants import InvariantViolation
from cacheproof.spec.cache.types import EntryState, EntryView, Snapshot
from cacheproof.spec.errors import ConflictError, InvalidArgumentError, TooLargeError, UnknownKeyError, WrongStateError

RESERVED, READY = EntryState.RESERVED, EntryState.READY

HEAP_SLACK = 32
"""Stale idle-heap items tolerated beyond the live idle entries before the heap is compacted."""


# Arguments ----------------------------------------------------------------------------------
# The contract's order: key, then size (type and range), then too large for the capacity, then
# retain. The operations test the common case inline and call these for the message.


def check_capacity(capacity_bytes: Any) -> int:
    """A capacity is an int (not bool) >= 1."""
    if not _is_int(capacity_bytes) or capacity_bytes < 1:
        raise InvalidArgumentError(
            f"capacity_bytes must be an int >= 1, got {capacity_bytes!r} ({type(capacity_bytes).__name__})"
        )
    return capacity_bytes


def unhashable(operation: str, key: Any, error: Exception) -> InvalidArgumentError:
    """The error for a key whose `hash` raised `error`."""
    return InvalidArgumentError(
        f"{operation}: key {_shown(key)} is not hashable ({type(key).__name__}: {type(error).__name__}: {error})"
    )


def check_key(operation: str, key: Any) -> None:
    """A key must be hashable: whatever `hash(key)` raises is an InvalidArgumentError."""
    try:
        hash(key)
    except Exception as error:
        raise unhashable(operation, key, error) from None


def check_size(operation: str, key: Any, nbytes: Any, capacity: int, least: int = 1) -> None:
    """nbytes is an int (not bool) >= `least` (evict: 0) and at most the capacity."""
    if not _is_int(nbytes) or nbytes < least:
        where = operation if operation == "evict" else f"{operation}({key!r})"
        raise InvalidArgumentError(f"{where}: nbytes must be an int >= {least}, got {nbytes!r} ({type(nbytes).__name__})")
    if nbytes > capacity:
        if operation == "evict":
            raise TooLargeError(f"evict: {nbytes} bytes exceed capacity_bytes={capacity}; that room can never exist")
        raise TooLargeError(
            f"{operation}({key!r}): {nbytes} bytes exceed capacity_bytes={capacity}; an item that can never fit is rejected"
        )


def check_retain(operation: str, key: Any, retain: Any) -> None:
    if not isinstance(retain, bool):
        raise InvalidArgumentError(
            f"{operation}({key!r}): retain must be a bool, got {retain!r} ({type(retain).__name__})"
        )


def _is_int(number: Any) -> bool:
    return isinstance(number, int) and not isinstance(number, bool)


def _shown(key: Any) -> str:
    """repr(key), or a placeholder where its __repr__ raises too."""
    try:
        return repr(key)
    except Exception:
        return f"<{type(key).__name__} whose repr raises>"


# Entries ------------------------------------------------------------------------------------


class Entry:
    """One key's entry. `stamp` is its recency: larger is newer, reassigned on every move to
    newest. `heap_stamp` is the stamp of its live idle-heap item (None unless idle)."""

    __slots__ = ("state", "nbytes", "refcount", "retain", "value", "ready_event", "stamp", "heap_stamp")

    def __init__(
        self, state: EntryState, nbytes: int, refcount: int, retain: bool, stamp: int, value: Any = None, ready_event: Any = None
    ) -> None:
        self.state = state
        self.nbytes = nbytes
        self.refcount = refcount
        self.retain = retain
        self.value = value  # the stored torch.Tensor, READY only
        self.ready_event = ready_event  # a torch.cuda.Event when stream-aware, else None
        self.stamp = stamp
        self.heap_stamp: int | None = None

    @property
    def is_idle(self) -> bool:
        return self.state is READY and self.refcount == 0


class EntryBookkeeping:
    """The bookkeeping half of `TensorLRUCache`, which sets the state in its `__init__`:
    `_capacity`, `_entries` (an OrderedDict, oldest first), `_idle_heap`, `_idle_count`,
    `_next_stamp`, the three byte counters and the `_evictions` counter."""

    _capacity: int
    _entries: OrderedDict[Hashable, Entry]
    _idle_heap: list[tuple[int, Hashable]]
    _idle_count: int
    _next_stamp: int
    _reserved_bytes: int
    _pinned_bytes: int
    _idle_bytes: int
    _evictions: int

    def _snapshot(self) -> Snapshot:
        return tuple(
            EntryView(key, e.state, e.refcount, e.nbytes, e.retain) for key, e in self._entries.items()
        )

    def _try_reserve(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        """A new RESERVED entry (refcount 1), newest, if the protected bytes still fit."""
        if self._reserved_bytes + self._pinned_bytes + nbytes > self._capacity:
            return False
        self._next_stamp = stamp = self._next_stamp + 1
        self._entries[key] = Entry(RESERVED, nbytes, 1, retain, stamp)
        self._reserved_bytes += nbytes
        return True

    def _commit_entry(self, key: Hashable, size: int) -> Entry:
        """The RESERVED entry `commit(key, value)` of a value of `size` bytes fills; the contract's
        error if there is none."""
        entry = self._entries.get(key)
        if entry is None:
            raise UnknownKeyError(f"commit({key!r}): the key is absent; reserve or acquire it first")
        if entry.state is READY:
            raise WrongStateError(f"commit({key!r}): the entry is already READY")
        if size != entry.nbytes:
            raise ConflictError(f"commit({key!r}): the value has {size} bytes, the reservation {entry.nbytes}")
        return entry

    def _put_fits(self, key: Hashable, size: int) -> bool:
        """Whether `put(key, value)` of a value of `size` bytes can make room now (evicting every
        idle entry would be enough); WrongStateError if the key is present."""
        present = self._entries.get(key)
        if present is not None:
            raise WrongStateError(f"put({key!r}): the key is already {present.state.name}; put never replaces")
        return self._pinned_bytes + size <= self._capacity

    @staticmethod
    def _not_readable(operation: str, key: Hashable, entry: Entry | None) -> Exception:
        """get or pop of an absent key or of a RESERVED entry: the contract's error."""
        if entry is None:
            return UnknownKeyError(f"{operation}({key!r}): the key is absent")
        return WrongStateError(f"{operation}({key!r}): the entry is RESERVED; its value does not exist yet")

    def _add_idle(self, key: Hashable, entry: Entry) -> None:
        """A READY entry just became idle: it joins the heap at its own (unchanged) recency."""
        self._idle_count += 1
        self._idle_bytes += entry.nbytes
        entry.heap_stamp = entry.stamp
        heapq.heappush(self._idle_heap, (entry.stamp, key))

    def _pin(self, entry: Entry) -> None:
        """An idle entry gains its first reference: its heap item turns stale."""
        self._idle_count -= 1
        self._idle_bytes -= entry.nbytes
        self._pinned_bytes += entry.nbytes
        entry.heap_stamp = None
        if len(self._idle_heap) > 2 * self._idle_count + HEAP_SLACK:
            self._compact_idle_heap()

    def _remove_idle(self, key: Hashable, entry: Entry) -> None:
        """An idle entry removed (pop): its heap item turns stale."""
        del self._entries[key]  # the one update that names the key comes first
        self._idle_count -= 1
        self._idle_bytes -= entry.nbytes
        if len(self._idle_heap) > 2 * self._idle_count + HEAP_SLACK:
            self._compact_idle_heap()

    def _is_live(self, item: tuple[int, Hashable]) -> bool:
        entry = self._entries.get(item[1])
        return entry is not None and entry.heap_stamp == item[0]

    def _heap_limit(self) -> int:
        return 2 * self._idle_count + HEAP_SLACK

    def _compact_idle_heap(self) -> None:
        """Drop the stale items (they outnumber the live ones by the slack): amortized O(1)."""
        self._idle_heap = [item for item in self._idle_heap if self._is_live(item)]
        heapq.heapify(self._idle_heap)

    def _evict_until_room(self, incoming: int) -> list[Hashable]:
        """Evict idle entries oldest first until pinned + idle + `incoming` bytes fit the capacity.
        The caller has made sure they can (pinned + incoming <= capacity)."""
        evicted: list[Hashable] = []
        excess = self._pinned_bytes + self._idle_bytes + incoming - self._capacity
        freed = 0
        entries = self._entries
        while freed < excess:
            key, entry = self._pop_oldest_idle()
            del entries[key]
            evicted.append(key)
            freed += entry.nbytes
        self._idle_bytes -= freed
        self._idle_count -= len(evicted)
        self._evictions += len(evicted)
        if len(self._idle_heap) > 2 * self._idle_count + HEAP_SLACK:
            self._compact_idle_heap()
        return evicted

    def _pop_oldest_idle(self) -> tuple[Hashable, Entry]:
        heap, entries = self._idle_heap, self._entries
        while heap:
            stamp, key = heapq.heappop(heap)
            entry = entries.get(key)
            if entry is None or entry.heap_stamp != stamp:
                continue  # stale
            if entry.stamp != stamp:  # moved to newest while idle: back in at its recency
                entry.heap_stamp = entry.stamp
                heapq.heappush(heap, (entry.stamp, key))
                continue
            return key, entry
        raise InvariantViolation("eviction ran out of idle entries although its guard held")

    def _check_bookkeeping(self, check_value: Callable[[Hashable, Entry], None]) -> None:
        """Raise `InvariantViolation` if the counters, the recency stamps or the idle heap disagree
        with the entries; `check_value` checks each READY entry's stored value."""
        reserved = pinned = idle = 0
        previous_stamp = -1
        for key, entry in self._entries.items():
            if entry.stamp <= previous_stamp:
                raise InvariantViolation(f"recency stamps out of order at {key!r}")
            previous_stamp = entry.stamp
            if entry.state is RESERVED:
                reserved += entry.nbytes
                if entry.value is not None:
                    raise InvariantViolation(f"RESERVED entry {key!r} holds a value")
            else:
                check_value(key, entry)
                if entry.refcount > 0:
                    pinned += entry.nbytes
                else:
                    idle += entry.nbytes
        counters = (self._reserved_bytes, self._pinned_bytes, self._idle_bytes)
        if counters != (reserved, pinned, idle):
            raise InvariantViolation(
                f"byte counters (reserved, pinned, idle) {counters} != counted from entries {(reserved, pinned, idle)}"
            )
        idle_keys = {key for key, entry in self._entries.items() if entry.is_idle}
        live_items = [item for item in self._idle_heap if self._is_live(item)]
        if len(live_items) != len(idle_keys) or {key for _, key in live_items} != idle_keys:
            raise InvariantViolation("the idle heap does not hold exactly the idle entries")
        if any(self._entries[key].heap_stamp > self._entries[key].stamp for key in idle_keys):
            raise InvariantViolation("an idle entry's heap item is newer than the entry")
        if self._idle_count != len(idle_keys):
            raise InvariantViolation(f"idle count {self._idle_count} != {len(idle_keys)} idle entries")
        if len(self._idle_heap) > self._heap_limit():
            raise InvariantViolation(f"idle heap holds {len(self._idle_heap)} items")
