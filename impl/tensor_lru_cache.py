"""`TensorLRUCache`: a byte-bounded, ref-counted LRU cache of device tensors with reservations.

It has the operations, results and errors of the cache spec (`cacheproof.spec`), with arithmetic of
its own: its argument checks, guards, byte updates and eviction are written here and in
lru_entries.py, never called from the spec's rules, steps or transitions (an import-linter contract
forbids it). The checker holds the two to each other, so a bug in a rule of the spec shows up as
a divergence instead of being shared.

This module states the public operations and views, under one lock, and the device the cache
lives on; the entries, their recency and the idle heap are kept by lru_entries.py, the copies of
values on the device by tensor_values.py.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl import tensor_values
from cacheproof.impl.tensor_values import copy_value, sized
from cacheproof.impl.lru_entries import (
    READY,
    RESERVED,
    Entry,
    EntryBookkeeping,
    check_capacity,
    check_retain,
    check_size,
    unhashable,
)
from cacheproof.impl.lru_entries import check_key as _check_key
from cacheproof.spec.cache import invariants
from cacheproof.spec.cache.types import Acquired, CacheStats, Snapshot
from cacheproof.spec.errors import (
    CapacityError,
    ConflictError,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)

NEW_RESERVATION, RESERVATION_HIT = Acquired.NEW_RESERVATION, Acquired.RESERVATION_HIT
READY_HIT, BLOCKED = Acquired.READY_HIT, Acquired.BLOCKED


class TensorLRUCache(EntryBookkeeping):
    """A byte-bounded LRU cache of tensors on one device, with reservations and reference counts.

    Values: `commit` and `put` accept every sizable value of the contract. A torch tensor is
    stored as a detached, contiguous copy on the cache's device holding exactly its own bytes
    (never the caller's storage, nor the larger storage a view belongs to). bytes, bytearray,
    memoryview and numpy arrays are stored as a 1-D uint8 tensor of their bytes on the device.
    `get` and `pop` return the stored tensor.

    Device: `None` means CUDA if available, else CPU; a str or `torch.device` is accepted. On the
    "meta" device values hold no memory (only dtype and shape), so the cache runs at any capacity,
    2**40 bytes included: the checker uses it to hold this class's lifecycle to the spec at sizes no
    real device has (docs/scope.md).

    Cost: lookups, reference counting and byte accounting are O(1). Recency order is an
    OrderedDict; idle entries (READY, refcount 0) are also filed in an idle index (lru_entries.py):
    an OrderedDict of those that turned idle in recency order (O(1)) and a min-heap of the others
    (O(log n)), so eviction takes the oldest idle entry without looking at reserved or in-use
    entries, and `get` does no index work. `snapshot`, `clear` and `check_valid` are O(n).

    Arguments: each operation hashes its key and sizes its value once, before any update; its
    first update is the one dict operation naming the key (insert, move, delete), which raises
    before changing anything, so a key whose `__eq__` raises on its first or second comparison in
    the call leaves the cache as it was (I6; `put` and `commit` look the key up once more after
    the copy, before any update). The copy of a value must hold the size it was checked at, else
    InvalidArgumentError.

    Threads: one lock serializes every public operation; `commit` and `put` copy the value with
    the lock released, and decide under the lock after the copy (docs/concurrency.md).

    Streams: with `stream_aware=True` on CUDA, `commit`/`put` record an event on the current
    stream after copying the value; `get`/`pop` make the current stream wait on that event and
    call `record_stream` on the returned tensor, so its memory is not reused while the consumer
    stream may still read it. On CPU the flag is accepted and does nothing.
    """

    def __init__(
        self,
        capacity_bytes: int,
        *,
        device: str | torch.device | None = None,
        stream_aware: bool = False,
    ) -> None:
        self._capacity = check_capacity(capacity_bytes)
        self._device = _check_usable(_resolve_device(device))
        if not isinstance(stream_aware, bool):
            raise InvalidArgumentError(
                f"stream_aware must be a bool, got {stream_aware!r} ({type(stream_aware).__name__})"
            )
        self._stream_aware = stream_aware and self._device.type == "cuda"
        self._device_index = tensor_values.device_index(self._device)
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()  # oldest first
        self._idle_order: OrderedDict[Hashable, Entry] = OrderedDict()  # idle entries filed in stamp order
        self._order_tail = 0
        self._idle_heap: list[tuple[int, Hashable]] = []  # (idle_stamp, key) of the others; stale items skipped
        self._idle_count = 0
        self._next_stamp = 0
        self._reserved_bytes = self._pinned_bytes = self._idle_bytes = 0
        self._hits = self._misses = self._blocked = self._evictions = 0

    # Operations ---------------------------------------------------------------------------
    # Each checks its arguments first, in the contract's order, before taking the lock (they read
    # the arguments and the fixed capacity only), with the common case inline (a plain int size in
    # range, a bool flag) and lru_entries' checks for the message.

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        """Claim nbytes for a value to come. False (nothing changes) if protected bytes would overflow."""
        self._check_reservation("reserve", key, nbytes, retain)
        with self._lock:
            present = self._entries.get(key)
            if present is not None:
                raise WrongStateError(f"reserve({key!r}): the key is already {present.state.name}")
            return self._try_reserve(key, nbytes, retain)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        """Take a reference to key, reserving it if absent. BLOCKED changes nothing."""
        self._check_reservation("acquire", key, nbytes, retain)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if self._try_reserve(key, nbytes, retain):
                    self._misses += 1
                    return NEW_RESERVATION
                self._blocked += 1
                return BLOCKED
            if entry.nbytes != nbytes or entry.retain != retain:
                raise ConflictError(
                    f"acquire({key!r}, nbytes={nbytes}, retain={retain}): the entry has "
                    f"nbytes={entry.nbytes}, retain={entry.retain}; every acquire of a key must agree"
                )
            idle = entry.state is READY and entry.refcount == 0
            if idle and self._reserved_bytes + self._pinned_bytes + nbytes > self._capacity:
                self._blocked += 1
                return BLOCKED
            self._entries.move_to_end(key)  # the one update that names the key comes first
            self._next_stamp = entry.stamp = self._next_stamp + 1
            if idle:
                self._pin(key, entry)
            entry.refcount += 1
            self._hits += 1
            return RESERVATION_HIT if entry.state is RESERVED else READY_HIT

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        """Store the value of a RESERVED entry, evicting idle entries oldest first to make room.

        The copy is made outside the lock: the call is checked under the lock, the value copied,
        then checked again and stored under the lock (whatever changed meanwhile decides).
        """
        _check_key("commit", key)
        size = sized("commit", key, value)
        with self._lock:
            self._commit_entry(key, size)
        stored, ready_event = self._store("commit", key, value, size)
        with self._lock:
            entry = self._commit_entry(key, size)
            self._entries.move_to_end(key)  # first; still RESERVED, so never among the evicted
            self._next_stamp = entry.stamp = self._next_stamp + 1
            if self._pinned_bytes + self._idle_bytes + size > self._capacity:
                evicted = self._evict_until_room(size)
            else:
                evicted = []
            self._reserved_bytes -= size
            self._pinned_bytes += size
            entry.state, entry.value, entry.ready_event = READY, stored, ready_event
            return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        """Insert an idle, retained READY entry without a reservation. False changes nothing.

        The copy is made outside the lock, after a look at the entries without it that only spares
        the copy of a put that would fail (a put it doubts is decided under the lock at once), and
        is stored after the checks made again under the lock (whatever changed meanwhile decides).
        """
        try:
            hash(key)
        except Exception as error:
            raise unhashable("put", key, error) from None
        size = sized("put", key, value)
        capacity = self._capacity
        if size > capacity:
            check_size("put", key, size, capacity)
        entries = self._entries
        if key in entries or self._pinned_bytes + size > capacity:  # a glance, no lock
            with self._lock:
                if not self._put_fits(key, size):
                    return False
        stored, ready_event = self._store("put", key, value, size)
        with self._lock:
            if key in entries or self._pinned_bytes + size > capacity:
                return self._put_fits(key, size)  # WrongStateError, or False
            self._next_stamp = stamp = self._next_stamp + 1
            entries[key] = entry = Entry(READY, size, 0, True, stamp, stored, ready_event)  # not yet evictable
            if self._pinned_bytes + self._idle_bytes + size > capacity:
                self._evict_until_room(size)
            self._idle_count += 1  # idle now, the newest entry: filed at the end of the ordered tier
            self._idle_bytes += size
            entry.idle_stamp = self._order_tail = stamp
            self._idle_order[key] = entry
            return True

    def get(self, key: Hashable) -> torch.Tensor:
        """The value of a READY entry, which becomes the newest. The refcount is unchanged."""
        try:
            hash(key)
        except Exception as error:
            raise unhashable("get", key, error) from None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.state is RESERVED:
                raise self._not_readable("get", key, entry)
            self._entries.move_to_end(key)
            self._next_stamp = entry.stamp = self._next_stamp + 1  # an idle entry stays filed where it was
            if entry.ready_event is not None:
                tensor_values.hand_to_current_stream(self._device, entry)
            return entry.value

    def release(self, key: Hashable) -> bool:
        """Drop one reference. True if that removed the entry (abandoned reservation or transient)."""
        _check_key("release", key)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                raise UnknownKeyError(f"release({key!r}): the key is absent")
            if entry.refcount > 1:
                entry.refcount -= 1
                return False
            if entry.refcount == 0:
                raise WrongStateError(f"release({key!r}): the entry has no reference to release (refcount 0)")
            if entry.state is RESERVED:  # an abandoned reservation
                del self._entries[key]  # the one update that names the key comes first
                entry.refcount = 0
                self._reserved_bytes -= entry.nbytes
                return True
            if not entry.retain:  # a transient entry goes at its last release
                del self._entries[key]
                entry.refcount = 0
                self._pinned_bytes -= entry.nbytes
                return True
            entry.refcount = 0
            self._pinned_bytes -= entry.nbytes
            self._add_idle(key, entry)
            return False

    def evict(self, nbytes: int) -> list[Hashable]:
        """Evict idle entries oldest first until nbytes more would fit; CapacityError if they cannot."""
        check_size("evict", None, nbytes, self._capacity, least=0)
        with self._lock:
            if self._pinned_bytes + nbytes > self._capacity:
                raise CapacityError(
                    f"evict({nbytes}): pinned_bytes={self._pinned_bytes} + {nbytes} > "
                    f"capacity_bytes={self._capacity}; evicting every idle entry is not enough"
                )
            return self._evict_until_room(nbytes)

    def pop(self, key: Hashable) -> torch.Tensor:
        """Remove an idle READY entry and return its value."""
        _check_key("pop", key)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.state is RESERVED:
                raise self._not_readable("pop", key, entry)
            if entry.refcount > 0:
                raise WrongStateError(f"pop({key!r}): the entry is in use (refcount {entry.refcount})")
            self._remove_idle(key, entry)
            if entry.ready_event is not None:
                tensor_values.hand_to_current_stream(self._device, entry)
            return entry.value

    def clear(self) -> None:
        """Remove every entry; WrongStateError (nothing removed) while any is reserved or in use.
        Every entry has at least one byte, so an entry is reserved or in use exactly when the
        reserved or pinned bytes are not 0: no scan."""
        with self._lock:
            busy_bytes = self._reserved_bytes + self._pinned_bytes
            if busy_bytes > 0:
                raise WrongStateError(f"clear: {busy_bytes} bytes are reserved or in use")
            self._entries.clear()
            self._idle_order.clear()
            self._idle_heap.clear()
            self._idle_count = 0
            self._idle_bytes = 0

    def _check_reservation(self, operation: str, key: Hashable, nbytes: Any, retain: Any) -> None:
        """reserve and acquire: the key, then nbytes, then retain."""
        _check_key(operation, key)
        if nbytes.__class__ is not int or not 0 < nbytes <= self._capacity:
            check_size(operation, key, nbytes, self._capacity)
        if retain is not True and retain is not False:
            check_retain(operation, key, retain)

    # Views ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every entry, oldest first."""
        with self._lock:
            return self._snapshot()

    def stats(self) -> CacheStats:
        with self._lock:
            ready = self._pinned_bytes + self._idle_bytes
            return CacheStats(
                capacity_bytes=self._capacity,
                ready_bytes=ready,
                reserved_bytes=self._reserved_bytes,
                pinned_bytes=self._pinned_bytes,
                idle_bytes=self._idle_bytes,
                free_bytes=self._capacity - ready,
                entries=len(self._entries),
                hits=self._hits,
                misses=self._misses,
                blocked=self._blocked,
                evictions=self._evictions,
            )

    @property
    def capacity_bytes(self) -> int:
        return self._capacity

    @property
    def device(self) -> torch.device:
        return self._device

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        _check_key("in", key)
        with self._lock:
            return key in self._entries

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"TensorLRUCache(capacity_bytes={self._capacity}, device={self._device}, "
                f"entries={len(self._entries)}, reserved={self._reserved_bytes}, pinned={self._pinned_bytes}, "
                f"idle={self._idle_bytes})"
            )

    def make_value(self, nbytes: int, tag: int, element_size: int | None = None) -> torch.Tensor:
        """A tensor of exactly nbytes bytes of `element_size`-byte elements (None: the element size
        the checker draws for (nbytes, tag)) on the cache's device, filled deterministically from
        tag; its dtype is picked by `tag` among those of that size (`tensor_values.make_value`)."""
        return tensor_values.make_value(self._device, nbytes, tag, element_size)

    def check_valid(self) -> None:
        """Raise `InvariantViolation` if the counters, the recency stamps, the idle heap or the
        stored tensors disagree with the entries, or if I1-I4 fail. A costly no-op when all is well."""
        with self._lock:
            self._check_bookkeeping(lambda key, entry: tensor_values.check_stored_value(self._device, key, entry))
            invariants.check_state(self._capacity, self._snapshot())

    # Values -------------------------------------------------------------------------------

    def _store(self, operation: str, key: Hashable, value: Any, size: int) -> tuple[torch.Tensor, Any]:
        """The cache's own copy of a value of `size` bytes and the event marking the copy done
        (`tensor_values.copy_value`); InvalidArgumentError, before anything changes, if the copy
        does not hold `size` bytes."""
        return copy_value(self._device, self._device_index, self._stream_aware, operation, key, value, size)


def _check_usable(device: torch.device) -> torch.device:
    """InvalidArgumentError naming the device if no tensor can be made on it (CUDA not available, an
    index past the last GPU, a backend this torch lacks)."""
    try:
        torch.empty(0, device=device)
    except Exception as error:  # torch raises RuntimeError, AssertionError or others per backend
        why = str(error).strip().split("\n")[0].split(". ")[0] or type(error).__name__
        raise InvalidArgumentError(f"device {str(device)!r} cannot hold tensors: {why}") from None
    return device


def _resolve_device(device: str | torch.device | None) -> torch.device:
    """None: CUDA if available, else CPU. A CUDA device without index gets the current one."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(device, (str, torch.device)):
        raise InvalidArgumentError(f"device must be a str, a torch.device or None, got {device!r}")
    try:
        resolved = torch.device(device)
    except RuntimeError as error:
        raise InvalidArgumentError(f"device {str(device)!r} is not a torch device: {error}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError(f"device {str(device)!r}: CUDA is not available to this torch")
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    return resolved
