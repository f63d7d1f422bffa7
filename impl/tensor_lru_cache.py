"""`TensorLRUCache`: a byte-bounded, ref-counted LRU cache of device tensors with reservations.

It has the operations, results and errors of `cacheproof.spec.CacheSpec`; every argument check
comes from `cacheproof.spec.arguments` and every guard and byte update from
`cacheproof.spec.rules`, so the real cache runs exactly the arithmetic the spec states.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from typing import Any, Hashable

import torch

from cacheproof.spec import arguments, invariants, rules
from cacheproof.spec.errors import (
    CapacityError,
    ConflictError,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.types import Acquired, CacheStats, EntryState, EntryView, Snapshot

RESERVED, READY = EntryState.RESERVED, EntryState.READY

_DTYPES_BY_ELEMENT_SIZE: tuple[tuple[int, tuple[torch.dtype, ...]], ...] = (
    (1, (torch.int8, torch.uint8)),
    (2, (torch.int16, torch.float16)),
    (4, (torch.int32, torch.float32)),
    (8, (torch.int64, torch.float64)),
)
_FILL_MODULUS = 127
"""make_value fills with integers below this: exact in every dtype above, int8 included."""

_META = torch.device("meta")
_HEAP_SLACK = 32
"""Stale idle-heap items tolerated beyond the live idle entries before the heap is compacted."""


class _Entry:
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


class TensorLRUCache:
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
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()  # oldest first
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
            entry = _Entry(READY, size, 0, True, self._new_stamp())
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
            self._hand_to_current_stream(entry)
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
            self._hand_to_current_stream(entry)
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
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
            raise InvalidArgumentError(f"make_value: nbytes must be an int >= 1, got {nbytes!r}")
        if not isinstance(tag, int) or isinstance(tag, bool):
            raise InvalidArgumentError(f"make_value: tag must be an int, got {tag!r}")
        dtypes = [dtype for size, group in _DTYPES_BY_ELEMENT_SIZE if nbytes % size == 0 for dtype in group]
        dtype = dtypes[tag % len(dtypes)]
        numel = nbytes // dtype.itemsize
        if self._device.type == "meta":  # no data, so any size: the checker's values at 2**40 bytes
            return torch.empty(numel, dtype=dtype, device=self._device)
        fill = (torch.arange(numel, dtype=torch.int64) * 31 + tag % _FILL_MODULUS) % _FILL_MODULUS
        return fill.to(device=self._device, dtype=dtype)

    def check_valid(self) -> None:
        """Raise `InvariantViolation` if the counters, the recency stamps, the idle heap or the
        stored tensors disagree with the entries, or if I1-I4 fail. A costly no-op when all is well."""
        with self._lock:
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
                    self._check_stored_value(key, entry)
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
            invariants.check_state(self._capacity, self._snapshot())

    # Internals ----------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        return tuple(
            EntryView(key, e.state, e.refcount, e.nbytes, e.retain) for key, e in self._entries.items()
        )

    def _try_reserve(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        if not rules.reservation_fits(self._bytes, nbytes):
            return False
        self._entries[key] = _Entry(RESERVED, nbytes, 1, retain, self._new_stamp())
        self._bytes = rules.after_reserve(self._bytes, nbytes)
        return True

    def _commit_entry(self, key: Hashable, size: int) -> _Entry:
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

    def _ready_entry(self, operation: str, key: Hashable) -> _Entry:
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

    def _move_to_newest(self, key: Hashable, entry: _Entry) -> None:
        """Move to newest (first: `move_to_end` raises before changing anything), then re-stamp."""
        self._entries.move_to_end(key)
        self._restamp(key, entry)

    def _restamp(self, key: Hashable, entry: _Entry) -> None:
        """A fresh recency stamp; an idle entry gets a fresh heap item (its old one turns stale)."""
        entry.stamp = self._new_stamp()
        if entry.is_idle:
            heapq.heappush(self._idle_heap, (entry.stamp, key))
        self._compact_idle_heap_if_stale()

    def _add_idle(self, key: Hashable, entry: _Entry) -> None:
        """A READY entry just became idle: it joins the heap at its own (unchanged) recency."""
        self._idle_count += 1
        heapq.heappush(self._idle_heap, (entry.stamp, key))

    def _is_live(self, item: tuple[int, Hashable]) -> bool:
        stamp, key = item
        entry = self._entries.get(key)
        return entry is not None and entry.is_idle and entry.stamp == stamp

    def _heap_limit(self) -> int:
        return 2 * self._idle_count + _HEAP_SLACK

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

    def _pop_oldest_idle(self) -> tuple[Hashable, _Entry]:
        while self._idle_heap:
            item = heapq.heappop(self._idle_heap)
            if self._is_live(item):
                return item[1], self._entries[item[1]]
        raise invariants.InvariantViolation("eviction ran out of idle entries although its guard held")

    def _store(self, operation: str, key: Hashable, value: Any, size: int) -> tuple[torch.Tensor, Any]:
        """The cache's own copy of a value of `size` bytes (as sized by the contract's rule), and the
        event marking the copy done.

        On the meta device, and for a value with no data (a meta tensor) on any device, the copy is
        a meta tensor of the value's dtype and shape (a 1-D uint8 tensor of `size` for a buffer):
        sizes without data, nothing allocated. InvalidArgumentError, before anything changes, if
        the copy does not hold `size` bytes (the value changed while the lock was released).
        """
        is_tensor = isinstance(value, torch.Tensor)
        if self._device.type == "meta" or (is_tensor and torch.Tensor.is_meta.__get__(value)):
            if is_tensor:
                stored = torch.empty(torch.Tensor.size(value), dtype=value.dtype, device="meta")
            else:
                stored = torch.empty(size, dtype=torch.uint8, device="meta")
        else:
            source = torch.Tensor.detach(value) if is_tensor else _host_bytes(value)
            stored = torch.empty(source.shape, dtype=source.dtype, device=self._device)
            stored.copy_(source)
        copied = stored.numel() * stored.element_size()
        if copied != size:
            raise InvalidArgumentError(
                f"{operation}({key!r}): the value had {size} bytes when it was sized and {copied} when it "
                "was copied; a value must not change while the cache stores it"
            )
        if not self._stream_aware:
            return stored, None
        ready_event = torch.cuda.Event()
        ready_event.record(torch.cuda.current_stream(self._device))
        return stored, ready_event

    def _hand_to_current_stream(self, entry: _Entry) -> None:
        """Order the current stream after the value's copy and keep its memory alive for that stream."""
        if entry.ready_event is None:
            return
        stream = torch.cuda.current_stream(self._device)
        stream.wait_event(entry.ready_event)
        entry.value.record_stream(stream)

    def _check_stored_value(self, key: Hashable, entry: _Entry) -> None:
        """A stored value is a contiguous tensor of the entry's size, on the cache's device or on
        meta (a value without data)."""
        value = entry.value
        if (
            not isinstance(value, torch.Tensor)
            or value.device not in (self._device, _META)
            or not value.is_contiguous()
        ):
            raise invariants.InvariantViolation(f"READY entry {key!r} holds no contiguous tensor on {self._device}")
        if value.numel() * value.element_size() != entry.nbytes:
            raise invariants.InvariantViolation(f"READY entry {key!r} holds a value of another size")


def _host_bytes(value: Any) -> torch.Tensor:
    """A 1-D uint8 CPU tensor of a sizable non-tensor value's bytes, in C order: bytes, bytearray
    and memoryview through the buffer protocol (never a subclass's `__len__`), a numpy array of
    any dtype without objects (datetime64 included, which exports no buffer) by `tobytes()`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytearray(memoryview(value))
    else:
        raw = bytearray(value.tobytes())
    return torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)


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
