"""Plain data shared by the spec, the real cache and the checker."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Hashable, NamedTuple

from cacheproof.spec.cache import rules


class EntryState(enum.Enum):
    """Where an entry is in its lifecycle. A missing key is ABSENT and has no entry."""

    RESERVED = "RESERVED"  # space claimed, value not yet produced
    READY = "READY"  # holds its value


class Acquired(enum.Enum):
    """What `acquire` did."""

    READY_HIT = "READY_HIT"  # a READY entry gained a reference
    RESERVATION_HIT = "RESERVATION_HIT"  # a RESERVED entry gained a reference (another producer is on it)
    NEW_RESERVATION = "NEW_RESERVATION"  # the key was absent; the caller must produce and commit it
    BLOCKED = "BLOCKED"  # it does not fit now; nothing changed


class EntryView(NamedTuple):
    """One entry as seen from outside, in a `snapshot()`."""

    key: Hashable
    state: EntryState
    refcount: int
    nbytes: int
    retain: bool


Snapshot = tuple[EntryView, ...]
"""All entries, oldest first."""


@dataclass(frozen=True, init=False)
class CacheStats:
    """Byte counts derived from the entries, plus informative counters (not compared by the checker)."""

    capacity_bytes: int
    ready_bytes: int
    reserved_bytes: int
    pinned_bytes: int
    idle_bytes: int
    free_bytes: int
    entries: int
    hits: int = 0
    misses: int = 0
    blocked: int = 0
    evictions: int = 0

    def __init__(
        self, capacity_bytes: int, ready_bytes: int, reserved_bytes: int, pinned_bytes: int, idle_bytes: int,
        free_bytes: int, entries: int, hits: int = 0, misses: int = 0, blocked: int = 0, evictions: int = 0,
    ) -> None:
        """The fields written to the instance's dict in one update: the frozen dataclass's own
        `__init__` sets each through `object.__setattr__`, which cost twice the rest of a `stats()`
        (the checker reads it on both sides after every call)."""
        self.__dict__.update(
            capacity_bytes=capacity_bytes, ready_bytes=ready_bytes, reserved_bytes=reserved_bytes,
            pinned_bytes=pinned_bytes, idle_bytes=idle_bytes, free_bytes=free_bytes, entries=entries, hits=hits,
            misses=misses, blocked=blocked, evictions=evictions,
        )



def counted_fields(b: rules.Bytes, entries: int) -> tuple[int, int, int, int, int, int, int]:
    """The fields of the stats of a cache whose byte counts are `b` and which holds `entries`
    entries, up to `entries`, in field order (capacity, ready, reserved, pinned, idle, free,
    entries): all but the informative counters."""
    return b.capacity, rules.ready(b), b.reserved, b.pinned, b.idle, rules.free(b), entries
