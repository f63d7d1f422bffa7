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
- The idle index: every idle entry is filed once, under its `idle_stamp` (its stamp when filed, so
  idle_stamp <= stamp), in one of two tiers. `_idle_order`, an OrderedDict, holds the entries
  filed in stamp order (a put, the release of the newest entry: the common case), so their
  idle stamps increase along it and `_order_tail` bounds them from above; `_idle_heap` holds the
  others as (idle_stamp, key) items, live while the entry is idle, filed there and under that
  stamp. Eviction takes the oldest filed entry of the two tiers; one moved to newest while idle
  (get re-stamps it and leaves it filed) is filed again at its stamp, so an entry taken whose
  stamp is its idle stamp is the oldest idle entry (every other idle entry's stamp is at least
  its idle stamp). `get` does no index work; heap items of entries pinned or removed are stale,
  skipped when reached and dropped once the heap holds more than 2 * idle entries + HEAP_SLACK
  items, so eviction costs O(1) per entry in stamp order and amortized O(log n) otherwise, and
  never looks at a reserved or in-use entry.

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
    newest. `idle_stamp` is the stamp it is filed under in the idle index (None unless idle)."""

    __slots__ = ("state", "nbytes", "refcount", "retain", "value", "ready_event", "stamp", "idle_stamp")

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
        self.idle_stamp: int | None = None

    @property
    def is_idle(self) -> bool:
        return self.state is READY and self.refcount == 0


class EntryBookkeeping:
    """The bookkeeping half of `TensorLRUCache`, which sets the state in its `__init__`:
    `_capacity`, `_entries` (an OrderedDict, oldest first), the idle index (`_idle_order`,
    `_order_tail`, `_idle_heap`, `_idle_count`), `_next_stamp`, the three byte counters and the
    `_evictions` counter."""

    _capacity: int
    _entries: OrderedDict[Hashable, Entry]
    _idle_order: OrderedDict[Hashable, Entry]
    _order_tail: int
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

    # The idle index -------------------------------------------------------------------------
    # An idle entry is in the ordered tier exactly when its key is in `_idle_order`.

    def _add_idle(self, key: Hashable, entry: Entry) -> None:
        """A READY entry just became idle (put, last release): filed at its own recency."""
        self._idle_count += 1
        self._idle_bytes += entry.nbytes
        entry.idle_stamp = stamp = entry.stamp  # `_file`, inline: the hot path of put and release
        if stamp > self._order_tail or not self._idle_order:
            self._idle_order[key] = entry
            self._order_tail = stamp
        else:
            heapq.heappush(self._idle_heap, (stamp, key))

    def _file(self, key: Hashable, entry: Entry) -> None:
        """File an idle entry under its stamp: in the ordered tier if it is newer than everything
        filed there, else in the heap."""
        entry.idle_stamp = stamp = entry.stamp
        if stamp > self._order_tail or not self._idle_order:
            self._idle_order[key] = entry
            self._order_tail = stamp
        else:
            heapq.heappush(self._idle_heap, (stamp, key))

    def _unfile(self, key: Hashable, entry: Entry) -> None:
        """An idle entry stops being idle (pinned) or goes (pop): out of the index."""
        self._idle_order.pop(key, None)
        entry.idle_stamp = None  # a heap item of it turns stale
        self._idle_count -= 1
        self._idle_bytes -= entry.nbytes
        if len(self._idle_heap) > 2 * self._idle_count + HEAP_SLACK:
            self._compact_idle_heap()

    def _pin(self, key: Hashable, entry: Entry) -> None:
        """An idle entry gains its first reference."""
        self._unfile(key, entry)
        self._pinned_bytes += entry.nbytes

    def _remove_idle(self, key: Hashable, entry: Entry) -> None:
        """An idle entry removed (pop)."""
        del self._entries[key]  # the one update that names the key comes first
        self._unfile(key, entry)

    def _is_live(self, item: tuple[int, Hashable]) -> bool:
        """A heap item is live while its entry is idle, filed in the heap under the item's stamp."""
        stamp, key = item
        entry = self._entries.get(key)
        return entry is not None and entry.idle_stamp == stamp and key not in self._idle_order

    def _heap_limit(self) -> int:
        return 2 * self._idle_count + HEAP_SLACK

    def _compact_idle_heap(self) -> None:
        """Drop the stale items (they outnumber the live ones by the slack): amortized O(1)."""
        self._idle_heap[:] = [item for item in self._idle_heap if self._is_live(item)]
        heapq.heapify(self._idle_heap)

    def _evict_until_room(self, incoming: int) -> list[Hashable]:
        """Evict idle entries oldest first until pinned + idle + `incoming` bytes fit the capacity.
        The caller has made sure they can (pinned + incoming <= capacity)."""
        entries, order, heap = self._entries, self._idle_order, self._idle_heap
        evicted: list[Hashable] = []
        excess = self._pinned_bytes + self._idle_bytes + incoming - self._capacity
        freed = 0
        while freed < excess:
            if heap:
                key, entry = self._take_oldest_filed()
            elif order:
                key, entry = order.popitem(last=False)
            else:
                raise InvariantViolation("eviction ran out of idle entries although its guard held")
            if entry.stamp != entry.idle_stamp:  # moved to newest while idle: filed again at its recency
                self._file(key, entry)
                continue
            del entries[key]
            evicted.append(key)
            freed += entry.nbytes
        count = len(evicted)
        self._idle_bytes -= freed
        self._idle_count -= count
        self._evictions += count
        if heap and len(heap) > 2 * self._idle_count + HEAP_SLACK:
            self._compact_idle_heap()
        return evicted

    def _take_oldest_filed(self) -> tuple[Hashable, Entry]:
        """Out of the index: the entry filed under the smallest idle stamp of the two tiers (stale
        heap items on the way are dropped)."""
        heap, order = self._idle_heap, self._idle_order
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)
        if heap and (not order or heap[0][0] < order[next(iter(order))].idle_stamp):
            key = heapq.heappop(heap)[1]
            return key, self._entries[key]
        if order:
            return order.popitem(last=False)
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
        filed = [key for _, key in live_items] + list(self._idle_order)
        if len(filed) != len(idle_keys) or set(filed) != idle_keys:
            raise InvariantViolation("the idle heap and the ordered tier do not hold exactly the idle entries")
        ordered = [(key, entry) for key, entry in self._idle_order.items()]
        if any(self._entries.get(key) is not entry for key, entry in ordered):
            raise InvariantViolation("the ordered tier holds an entry that is not the cache's")
        stamps = [entry.idle_stamp for _, entry in ordered]
        if any(b <= a for a, b in zip(stamps, stamps[1:])) or (stamps and stamps[-1] > self._order_tail):
            raise InvariantViolation(f"the ordered tier's idle stamps {stamps} do not increase up to {self._order_tail}")
        if any(self._entries[key].idle_stamp > self._entries[key].stamp for key in idle_keys):
            raise InvariantViolation("an idle entry is filed under a stamp newer than its own")
        if self._idle_count != len(idle_keys):
            raise InvariantViolation(f"idle count {self._idle_count} != {len(idle_keys)} idle entries")
        if len(self._idle_heap) > self._heap_limit():
            raise InvariantViolation(f"idle heap holds {len(self._idle_heap)} items")
