"""`CacheSpec`: the reference model of the cache lifecycle, one method per operation.

Each operation is written as in a TLA+ action: argument checks, then the guard on the state, then
the updates; whatever an operation does not mention stays unchanged. Guards and byte updates come
from `rules`, what happens to one entry (its refcount, whether it is idle, whether its last release
removes it) from `steps`, so the prover reasons about exactly the arithmetic this class runs.
Entries live in one dict whose insertion order is the recency order (oldest first); "move to
newest" is a delete and re-insert.

Each operation computes what it needs from its key and value once, up front (the key's hash, one
lookup, the value's size), before any update. Its first update is a dict operation on the key
(insert, replace, delete, or the delete of a move), which raises before changing anything; the
byte counters and the removal of evicted entries come after it. So a key whose `__eq__` raises
on its second comparison in a call leaves the cache exactly as it was (I6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterable

from cacheproof.spec.cache import arguments, invariants, rules, steps
from cacheproof.spec.errors import (
    CapacityError,
    ConflictError,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import Acquired, CacheStats, EntryState, EntryView, Snapshot, counted_fields

RESERVED, READY = EntryState.RESERVED, EntryState.READY


@dataclass(frozen=True, slots=True)
class _Entry:
    state: EntryState
    nbytes: int
    refcount: int
    retain: bool
    value: Any = None  # READY only

    @property
    def ready(self) -> bool:
        return self.state is READY

    def with_refcount(self, refcount: int) -> "_Entry":
        return _Entry(self.state, self.nbytes, refcount, self.retain, self.value)

    def committed(self, value: Any) -> "_Entry":
        return _Entry(READY, self.nbytes, self.refcount, self.retain, value)


class CacheSpec:
    """The executable spec of a byte-bounded, ref-counted LRU cache with reservations.

    `semantics` picks the design choices on which real caches differ (spec/cache/semantics.py); each is
    one visible `if` in the operation it changes, and the default is the contract.
    """

    def __init__(self, capacity_bytes: int, semantics: Semantics = CONTRACT) -> None:
        self._capacity = arguments.check_capacity(capacity_bytes)
        self.semantics = semantics
        self._entries: dict[Hashable, _Entry] = {}
        self._bytes = rules.empty(capacity_bytes)
        self._hits = self._misses = self._blocked = self._evictions = 0

    @classmethod
    def from_entries(
        cls, capacity_bytes: int, entries: Iterable[tuple[EntryView, Any]], semantics: Semantics = CONTRACT
    ) -> "CacheSpec":
        """Test-only constructor: a cache holding `(view, value)` pairs, oldest first.

        It exists so a prover's counterexample state can be built directly. Values of RESERVED
        entries are ignored. The state must satisfy I1-I4 (`InvariantViolation` otherwise).
        """
        cache = cls(capacity_bytes, semantics)
        for view, value in entries:
            entry = _Entry(view.state, view.nbytes, view.refcount, view.retain, value if view.state is READY else None)
            cache._entries[view.key] = entry
        cache._bytes = _count_bytes(capacity_bytes, cache._entries.values())
        cache.check_invariants()
        return cache

    # Operations ---------------------------------------------------------------------------

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        """Claim nbytes for a value to come. False (nothing changes) if protected bytes would overflow."""
        arguments.check_key("reserve", key)
        if self.semantics.argument_checks == "checked":
            arguments.check_nbytes("reserve", key, nbytes, self._capacity)
            arguments.check_retain("reserve", key, retain)
        present = self._entries.get(key)
        if present is not None:
            raise WrongStateError(f"reserve({key!r}): the key is already {present.state.name}")
        return self._try_reserve(key, nbytes, retain)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        """Take a reference to key, reserving it if absent. BLOCKED changes nothing."""
        arguments.check_key("acquire", key)
        if self.semantics.argument_checks == "checked":
            arguments.check_nbytes("acquire", key, nbytes, self._capacity)
            arguments.check_retain("acquire", key, retain)
        entry = self._entries.get(key)
        if entry is None:
            if self._try_reserve(key, nbytes, retain):
                self._misses += 1
                return Acquired.NEW_RESERVATION
            self._blocked += 1
            return Acquired.BLOCKED
        choice = self.semantics.acquire_conflict
        if choice != "hit" and (entry.nbytes != nbytes or choice == "error" and entry.retain != retain):
            raise ConflictError(
                f"acquire({key!r}, nbytes={nbytes}, retain={retain}): the entry has "
                f"nbytes={entry.nbytes}, retain={entry.retain}; every acquire of a key must agree on "
                + ("nbytes and retain" if choice == "error" else "nbytes")
            )
        idle = _is_idle(entry)
        if idle and not rules.reservation_fits(self._bytes, entry.nbytes):
            self._blocked += 1
            return Acquired.BLOCKED
        acquired = entry.with_refcount(steps.acquired(entry.refcount))
        if self.semantics.refreshes("reservation_hit" if entry.state is RESERVED else "ready_hit"):
            self._move_to_newest(key, acquired)
        else:
            self._entries[key] = acquired
        if idle:
            pin = rules.after_pin if entry.ready else rules.after_revive  # a kept abandoned reservation
            self._bytes = pin(self._bytes, entry.nbytes)
        self._hits += 1
        return Acquired.RESERVATION_HIT if entry.state is RESERVED else Acquired.READY_HIT

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        """Store the value of a RESERVED entry, evicting idle entries oldest first to make room."""
        arguments.check_key("commit", key)
        size = self._value_size("commit", key, value)
        entry = self._entries.get(key)
        if entry is None:
            raise UnknownKeyError(f"commit({key!r}): the key is absent; reserve or acquire it first")
        if entry.state is READY:
            raise WrongStateError(f"commit({key!r}): the entry is already READY")
        if size != entry.nbytes and self.semantics.commit_size == "checked":
            raise ConflictError(
                f"commit({key!r}): the value has {size} bytes, the reservation {entry.nbytes}"
            )
        if not steps.is_referenced(entry.refcount):  # a kept abandoned reservation: READY, idle, in its place
            self._entries[key] = entry.committed(value)
            return []
        self._move_to_newest(key, entry.committed(value))  # READY but in use: never among the evicted
        if self.semantics.eviction_time == "reservation":
            evicted, evicted_bytes = [], 0  # the reservation made the room already
        else:
            evicted, evicted_bytes = self._evict_until_room(entry.nbytes)
        self._bytes = rules.after_commit(self._bytes, entry.nbytes, evicted_bytes)
        return evicted

    def put(self, key: Hashable, value: Any) -> bool:
        """Insert an idle, retained READY entry without a reservation. False changes nothing."""
        arguments.check_key("put", key)
        size = self._value_size("put", key, value)
        present = self._entries.get(key)
        if present is not None and self.semantics.put_present == "keep":  # the key first: a hit
            if self.semantics.refreshes("put_hit"):
                self._move_to_newest(key, present)
            return True
        if rules.is_too_large(self._bytes, size):
            if self.semantics.put_too_large == "false":
                return False
            arguments.check_put_size(key, size, self._capacity)
        if present is not None:
            if self.semantics.put_present == "error" or not steps.is_idle(present.ready, present.refcount):
                raise WrongStateError(
                    f"put({key!r}): the key is already {present.state.name} (refcount {present.refcount}); "
                    + ("put never replaces" if self.semantics.put_present == "error" else "only an idle entry is replaced")
                )
        if not self._room_can_be_made(size):
            return False
        entry = _Entry(READY, size, steps.PUT_REFCOUNT, steps.PUT_RETAIN, value)
        if present is None:
            self._entries[key] = entry
        else:  # an idle entry to replace: its bytes go first, as if evicted
            self._move_to_newest(key, entry)
            self._bytes = rules.after_evict(self._bytes, present.nbytes)
        # The new entry is the newest: the walk stops before it, as evicting the others makes room.
        _, evicted_bytes = self._evict_until_room(size)
        self._bytes = rules.after_put(self._bytes, size, evicted_bytes)
        return True

    def get(self, key: Hashable) -> Any:
        """The value of a READY entry, which becomes the newest. The refcount is unchanged."""
        entry = self._ready_entry("get", key)
        if entry is None:
            return None
        if self.semantics.refreshes("get"):
            self._move_to_newest(key, entry)
        return entry.value

    def release(self, key: Hashable) -> bool:
        """Drop one reference. True if that removed the entry (abandoned reservation or transient)."""
        arguments.check_key("release", key)
        entry = self._entries.get(key)
        if self.semantics.release_missing == "noop" and (entry is None or not steps.is_referenced(entry.refcount)):
            return False
        if entry is None:
            raise UnknownKeyError(f"release({key!r}): the key is absent")
        if not steps.is_referenced(entry.refcount):
            raise WrongStateError(f"release({key!r}): the entry has no reference to release (refcount 0)")
        refcount = steps.released(entry.refcount)
        if steps.is_referenced(refcount):
            self._entries[key] = entry.with_refcount(refcount)
            return False
        kept = entry.state is RESERVED and self.semantics.abandoned_reservation == "kept"
        removed = steps.removed_at_last_release(entry.ready, entry.retain) and not kept
        if removed:
            del self._entries[key]
        elif self.semantics.refreshes("release") and (entry.ready or kept):
            self._move_to_newest(key, entry.with_refcount(refcount))
        else:
            self._entries[key] = entry.with_refcount(refcount)
        if kept:
            self._bytes = rules.after_keep_abandoned(self._bytes, entry.nbytes)
        elif entry.state is RESERVED:
            self._bytes = rules.after_abandon(self._bytes, entry.nbytes)
        else:
            self._bytes = rules.after_last_release(self._bytes, entry.nbytes, entry.retain)
        return removed

    def evict(self, nbytes: int) -> list[Hashable]:
        """Evict idle entries oldest first until nbytes more would fit; CapacityError if they cannot."""
        if self.semantics.argument_checks == "checked":
            arguments.check_evict_nbytes(nbytes, self._capacity)
        if not self._room_can_be_made(nbytes):
            raise CapacityError(
                f"evict({nbytes}): pinned_bytes={self._bytes.pinned} + {nbytes} > "
                f"capacity_bytes={self._capacity}; evicting every idle entry is not enough"
            )
        evicted, evicted_bytes = self._evict_until_room(nbytes)
        self._bytes = rules.after_evict(self._bytes, evicted_bytes)
        return evicted

    def pop(self, key: Hashable) -> Any:
        """Remove an idle READY entry and return its value."""
        entry = self._ready_entry("pop", key)
        if entry is None:
            return None
        if steps.is_referenced(entry.refcount):
            raise WrongStateError(f"pop({key!r}): the entry is in use (refcount {entry.refcount})")
        del self._entries[key]
        self._bytes = rules.after_evict(self._bytes, entry.nbytes)
        return entry.value

    def clear(self) -> None:
        """Remove every entry; WrongStateError (nothing removed) while any is reserved or in use."""
        busy = [key for key, entry in self._entries.items() if steps.is_referenced(entry.refcount)]
        if busy and self.semantics.clear_busy == "error":
            raise WrongStateError(f"clear: {len(busy)} entries are reserved or in use, e.g. {busy[0]!r}")
        self._entries.clear()
        self._bytes = rules.after_clear(self._bytes)

    # Views ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every entry, oldest first."""
        return tuple(
            EntryView(key, e.state, e.refcount, e.nbytes, e.retain) for key, e in self._entries.items()
        )

    def stats(self) -> CacheStats:
        return CacheStats(*self.counted_stats(), self._hits, self._misses, self._blocked, self._evictions)

    def counted_stats(self) -> tuple[int, ...]:
        """The fields of `stats()` but its informative counters, in field order (`counted_fields`),
        without building the stats (the checker compares them after every call)."""
        return counted_fields(self._bytes, len(self._entries))

    @property
    def capacity_bytes(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        arguments.check_key("in", key)
        return key in self._entries

    def __repr__(self) -> str:
        b = self._bytes
        return (
            f"CacheSpec(capacity_bytes={b.capacity}, entries={len(self._entries)}, "
            f"reserved={b.reserved}, pinned={b.pinned}, idle={b.idle})"
        )

    def state_key(self) -> tuple:
        """The whole state as far as any later outcome can tell: (key, entry) pairs in order, each
        entry its state, size, refcount, retain flag and the value a READY one holds (values must be
        hashable for this; the checker passes recipes). The hit/miss counters are informative and
        left out. Entries are immutable, so the key is built without copying them."""
        return tuple(self._entries.items())

    def copy(self) -> "CacheSpec":
        """An independent spec in the same state (entries are immutable, so a shallow copy)."""
        twin = CacheSpec.__new__(CacheSpec)
        twin.__dict__.update(self.__dict__)
        twin._entries = dict(self._entries)
        return twin

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if I1-I4 fail or the byte counters disagree with the entries.

        When everything is working correctly this is an expensive no-op.
        """
        counted = _count_bytes(self._capacity, self._entries.values())
        if counted != self._bytes:
            raise invariants.InvariantViolation(f"byte counters {self._bytes} != counted from entries {counted}")
        invariants.check_state(self._capacity, self.snapshot(), self.semantics)

    # Internals ----------------------------------------------------------------------------

    def _try_reserve(self, key: Hashable, nbytes: int, retain: bool) -> bool:
        if not rules.reservation_fits(self._bytes, nbytes):
            return False
        retain = steps.reservation_retain(retain, self.semantics.transient_entries)
        self._entries[key] = _Entry(RESERVED, nbytes, steps.RESERVATION_REFCOUNT, retain)
        if self.semantics.eviction_time == "reservation":  # the new entry is RESERVED: never evicted
            _, evicted_bytes = self._evict_until_room(nbytes)
            self._bytes = rules.after_evict(self._bytes, evicted_bytes)
        self._bytes = rules.after_reserve(self._bytes, nbytes)
        return True

    def _ready_entry(self, operation: str, key: Hashable) -> _Entry | None:
        """The READY entry of key; None where the operation's missing answer (Semantics.missing) is
        "none" and it is absent or RESERVED, or "absent" and it is absent."""
        arguments.check_key(operation, key)
        entry = self._entries.get(key)
        missing = self.semantics.missing(operation)
        if (missing == "none" and (entry is None or entry.state is RESERVED)) or (missing == "absent" and entry is None):
            return None
        if entry is None:
            raise UnknownKeyError(f"{operation}({key!r}): the key is absent")
        if entry.state is RESERVED:
            raise WrongStateError(f"{operation}({key!r}): the entry is RESERVED; its value does not exist yet")
        return entry

    def _value_size(self, operation: str, key: Hashable, value: Any) -> int:
        """The value's size; with trusted arguments an unsizable value is the caller's fault (size 0),
        with argument_checks=value_type only an empty one is."""
        if self.semantics.argument_checks == "checked":
            return arguments.check_value(operation, key, value)
        if self.semantics.argument_checks == "value_type":
            return arguments.check_value_type(operation, key, value)
        return arguments.value_size(value) or 0

    def _used(self, incoming: int) -> int:
        """`incoming` plus the reserved bytes where they count as used (eviction at reservation)."""
        return rules.eviction_demand(self._bytes, incoming, self.semantics.eviction_time)

    def _room_can_be_made(self, incoming: int) -> bool:
        """Evicting every idle entry would make room for `incoming` more bytes."""
        return rules.eviction_can_make_room(self._bytes, self._used(incoming))

    def _move_to_newest(self, key: Hashable, entry: _Entry) -> None:
        del self._entries[key]
        self._entries[key] = entry

    def _evict_until_room(self, incoming: int) -> tuple[list[Hashable], int]:
        """Evict idle READY entries oldest first until `rules.has_room`. Caller ensures it can."""
        evicted: list[Hashable] = []
        evicted_bytes = 0
        incoming = self._used(incoming)
        if rules.has_room(self._bytes, incoming):
            return evicted, evicted_bytes
        for key, entry in self._entries.items():  # no copy: the walk stops at the last victim
            if _is_idle(entry):
                evicted.append(key)
                evicted_bytes += entry.nbytes
                if rules.has_room(rules.after_evict(self._bytes, evicted_bytes), incoming):
                    break
        for key in evicted:
            del self._entries[key]
        self._evictions += len(evicted)
        return evicted, evicted_bytes


def _is_idle(entry: _Entry) -> bool:
    """An entry eviction may remove: an idle READY entry, or a kept abandoned reservation
    (RESERVED with refcount 0, only under abandoned_reservation="kept")."""
    return steps.is_idle(entry.ready, entry.refcount) or (entry.state is RESERVED and not steps.is_referenced(entry.refcount))


def _count_bytes(capacity_bytes: int, entries: Iterable[_Entry]) -> rules.Bytes:
    reserved = pinned = idle = 0
    for entry in entries:
        if entry.refcount == 0:  # idle READY, or a kept abandoned reservation
            idle += entry.nbytes
        elif entry.state is RESERVED:
            reserved += entry.nbytes
        else:
            pinned += entry.nbytes
    return rules.Bytes(capacity_bytes, reserved, pinned, idle)
