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


@dataclass(frozen=True)
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

    @classmethod
    def from_bytes(
        cls, b: rules.Bytes, entries: int, *, hits: int, misses: int, blocked: int, evictions: int
    ) -> "CacheStats":
        """The stats of a cache whose byte counts are `b`."""
        return cls(
            capacity_bytes=b.capacity,
            ready_bytes=rules.ready(b),
            reserved_bytes=b.reserved,
            pinned_bytes=b.pinned,
            idle_bytes=b.idle,
            free_bytes=rules.free(b),
            entries=entries,
            hits=hits,
            misses=misses,
            blocked=blocked,
            evictions=evictions,
        )
