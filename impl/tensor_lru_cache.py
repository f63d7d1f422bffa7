"""`TensorLRUCache`: a byte-bounded, ref-counted LRU cache of device tensors with reservations.

It has the operations, results and errors of the cache spec (`cacheproof.spec`); every argument check
comes from `cacheproof.spec.cache.arguments` and every guard and byte update from
`cacheproof.spec.cache.rules`, so the real cache runs exactly the arithmetic the spec states.

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

from cacheproof.impl.lru_entries import READY, RESERVED, Entry, EntryBookkeeping
from cacheproof.impl import tensor_values
from cacheproof.spec.cache import arguments, invariants, rules
from cacheproof.spec.errors import (
    CapacityError,
    ConflictError,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.cache.types import Acquired, CacheStats, Snapshot


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
    OrderedDict; idle entries (READY, refcount 0) also sit in a min-heap keyed by recency stamp,
    so eviction pops the oldest idle entry in amortized O(log n) and never looks at reserved or
    in-use entries. Heap items made stale (the entry was pinned, re-stamped or removed) are
    skipped when popped and dropped by compaction once they outnumber live idle entries by more
    than a constant, so the heap stays O(idle entries). `snapshot`, `clear` and `check_valid`
    are O(n).

    Arguments: each operation hashes its key and sizes its value once, before any update; its
    first update is the one dict operation naming the key (insert, move, delete), which raises
    before changing anything, so a key whose `__eq__` raises on its first or second comparison in
    the call leaves the cache as it was (I6; `put` and `commit` look the key up once more after
    the copy, before any update). The copy of a value must hold the size it was checked at, else
    InvalidArgumentError.

    Threads: one lock serializes every public operation; `commit` and `put` copy the value with
    the lock released, between a check and a re-check under the lock (docs/concurrency.md).

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
        self._capacity = arguments.check_capacity(capacity_bytes)
        self._device = _check_usable(_resolve_device(device))
        if not isinstance(stream_aware, bool):
            raise InvalidArgumentError(
                f"stream_aware must be a bool, got {stream_aware!r} ({type(stream_aware).__name__})"
            )
        self._stream_aware = stream_aware and self._device.type == "cuda"
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()  # oldest first
        self._idle_heap: list[tuple[int, Hashable]] = []  # (stamp, key); stale items skipped
        self._idle_count = 0
        self._next_stamp = 0
        self._bytes = rules.empty(capacity_bytes)
        self._hits = self._misses = self._blocked = self._evictions = 0

    # Operations ---------------------------------------------------------------------------

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        """Claim nbytes for a value to come. False (nothing changes) if protected bytes would overflow."""
        with self._lock:
            arguments.check_key("reserve", key)
            arguments.check_nbytes("reserve", key, nbytes, self._capacity)
            arguments.check_retain("reserve", key, retain)
            if key in self._entries:
                raise WrongStateError(f"reserve({key!r}): the key is already {self._entries[key].state.name}")
            return self._try_reserve(key, nbytes, retain)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        """Take a reference to key, reserving it if absent. BLOCKED changes nothing."""
        with self._lock:
            arguments.check_key("acquire", key)
            arguments.check_nbytes("acquire", key, nbytes, self._capacity)
            arguments.check_retain("acquire", key, retain)
            entry = self._entries.get(key)
            if entry is None:
                if self._try_reserve(key, nbytes, retain):
                    self._misses += 1
                    return Acquired.NEW_RESERVATION
                self._blocked += 1
                return Acquired.BLOCKED
            if entry.nbytes != nbytes or entry.retain != retain:
                raise ConflictError(
                    f"acquire({key!r}, nbytes={nbytes}, retain={retain}): the entry has "
                    f"nbytes={entry.nbytes}, retain={entry.retain}; every acquire of a key must agree"
                )
            if entry.is_idle and not rules.reservation_fits(self._bytes, nbytes):
                self._blocked += 1
                return Acquired.BLOCKED
            self._entries.move_to_end(key)  # the one update that names the key comes first
            if entry.is_idle:
                self._bytes = rules.after_pin(self._bytes, nbytes)
                self._idle_count -= 1
            entry.refcount += 1
            self._restamp(key, entry)
            self._hits += 1
            return Acquired.RESERVATION_HIT if entry.state is RESERVED else Acquired.READY_HIT

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        """Store the value of a RESERVED entry, evicting idle entries oldest first to make room.

        The copy is made outside the lock: the call is checked under the lock, the value copied,
        then checked again and stored under the lock (whatever changed meanwhile decides).
        """
        with self._lock:
            arguments.check_key("commit", key)
            size = arguments.check_value("commit", key, value)
            self._commit_entry(key, size)
        stored, ready_event = self._store("commit", key, value, size)
        with self._lock:
            entry = self._commit_entry(key, size)
            self._move_to_newest(key, entry)  # still RESERVED, so never among the evicted
            evicted, evicted_bytes = self._evict_until_room(entry.nbytes)
            self._bytes = rules.after_commit(self._bytes, entry.nbytes, evicted_bytes)
            entry.state, entry.value, entry.ready_event = READY, stored, ready_event
            return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        """Insert an idle, retained READY entry without a reservation. False changes nothing.

        As `commit`, the copy is made between two checks under the lock, outside it.
        """
        with self._lock:
            arguments.check_key("put", key)
            size = arguments.check_value("put", key, value)
            arguments.check_put_size(key, size, self._capacity)
            if not self._put_fits(key, size):
                return False
        stored, ready_event = self._store("put", key, value, size)
        with self._lock:
            if not self._put_fits(key, size):
                return False
            entry = Entry(READY, size, 0, True, self._new_stamp())
            entry.value, entry.ready_event = stored, ready_event
            self._entries[key] = entry  # first; not in the idle heap until after eviction
            _, evicted_bytes = self._evict_until_room(size)
            self._bytes = rules.after_put(self._bytes, size, evicted_bytes)
            self._add_idle(key, entry)
            return True

    def get(self, key: Hashable) -> torch.Tensor:
        """The value of a READY entry, which becomes the newest. The refcount is unchanged."""
        with self._lock:
            entry = self._ready_entry("get", key)
            self._move_to_newest(key, entry)
            tensor_values.hand_to_current_stream(self._device, entry)
            return entry.value

    def release(self, key: Hashable) -> bool:
        """Drop one reference. True if that removed the entry (abandoned reservation or transient)."""
        with self._lock:
            arguments.check_key("release", key)
            entry = self._entries.get(key)
            if entry is None:
                raise UnknownKeyError(f"release({key!r}): the key is absent")
            if entry.refcount == 0:
                raise WrongStateError(f"release({key!r}): the entry has no reference to release (refcount 0)")
            if entry.refcount > 1:
                entry.refcount -= 1
                return False
            removed = entry.state is RESERVED or not entry.retain
            if removed:
                del self._entries[key]  # the one update that names the key comes first
            entry.refcount = 0
            if entry.state is RESERVED:
                self._bytes = rules.after_abandon(self._bytes, entry.nbytes)
            else:
                self._bytes = rules.after_last_release(self._bytes, entry.nbytes, entry.retain)
            if not removed:
                self._add_idle(key, entry)
            return removed

    def evict(self, nbytes: int) -> list[Hashable]:
        """Evict idle entries oldest first until nbytes more would fit; CapacityError if they cannot."""
        with self._lock:
            arguments.check_evict_nbytes(nbytes, self._capacity)
            if not rules.eviction_can_make_room(self._bytes, nbytes):
                raise CapacityError(
                    f"evict({nbytes}): pinned_bytes={self._bytes.pinned} + {nbytes} > "
                    f"capacity_bytes={self._capacity}; evicting every idle entry is not enough"
                )
            evicted, evicted_bytes = self._evict_until_room(nbytes)
            self._bytes = rules.after_evict(self._bytes, evicted_bytes)
            return evicted

    def pop(self, key: Hashable) -> torch.Tensor:
        """Remove an idle READY entry and return its value."""
        with self._lock:
            entry = self._ready_entry("pop", key)
            if entry.refcount > 0:
                raise WrongStateError(f"pop({key!r}): the entry is in use (refcount {entry.refcount})")
            del self._entries[key]  # the one update that names the key comes first
            tensor_values.hand_to_current_stream(self._device, entry)
            self._bytes = rules.after_evict(self._bytes, entry.nbytes)
            self._idle_count -= 1
            self._compact_idle_heap_if_stale()
            return entry.value

    def clear(self) -> None:
        """Remove every entry; WrongStateError (nothing removed) while any is reserved or in use."""
        with self._lock:
            busy_bytes = rules.protected(self._bytes)
            if busy_bytes > 0:
                raise WrongStateError(f"clear: {busy_bytes} bytes are reserved or in use")
            self._entries.clear()
            self._idle_heap.clear()
            self._idle_count = 0
            self._bytes = rules.after_clear(self._bytes)

    # Views ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every entry, oldest first."""
        with self._lock:
            return self._snapshot()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats.from_bytes(
                self._bytes,
                len(self._entries),
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
        with self._lock:
            arguments.check_key("in", key)
            return key in self._entries

    def __repr__(self) -> str:
        with self._lock:
            b = self._bytes
            return (
                f"TensorLRUCache(capacity_bytes={b.capacity}, device={self._device}, "
                f"entries={len(self._entries)}, reserved={b.reserved}, pinned={b.pinned}, idle={b.idle})"
            )

    def make_value(self, nbytes: int, tag: int) -> torch.Tensor:
        """A tensor of exactly nbytes bytes on the cache's device, filled deterministically from tag.

        The dtype is chosen by `tag` among those whose element size divides nbytes, so callers
        that vary the tag exercise several dtypes.
        """
        return tensor_values.make_value(self._device, nbytes, tag)

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
        return tensor_values.copy_value(self._device, self._stream_aware, operation, key, value, size)


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
