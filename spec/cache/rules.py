"""Guards and byte updates of every operation, written once, over numbers.

Each function works on Python ints and on z3 integer terms alike: the cache spec (cache_spec.py) calls them with
ints, the prover with symbols. A branch on a possibly symbolic condition goes through a `Logic`
(`CONCRETE` by default; the prover passes one built on z3's If/And/Or/Not), never through `if`.

The aggregate state of a cache is its `Bytes`: capacity and the bytes of RESERVED entries, of
in-use (pinned) READY entries and of idle READY entries. Everything else is derived from them.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Logic(NamedTuple):
    """How to combine conditions: concretely (Python) or symbolically (z3)."""

    choose: Callable[[Any, Any, Any], Any]  # choose(condition, if_true, if_false)
    all_of: Callable[..., Any]
    any_of: Callable[..., Any]
    negate: Callable[[Any], Any]


CONCRETE = Logic(
    choose=lambda condition, if_true, if_false: if_true if condition else if_false,
    all_of=lambda *conditions: all(conditions),
    any_of=lambda *conditions: any(conditions),
    negate=lambda condition: not condition,
)


class Bytes(NamedTuple):
    """A cache's byte counts: the state the capacity invariants talk about."""

    capacity: Any  # capacity_bytes, fixed at construction
    reserved: Any  # sum of nbytes over RESERVED entries
    pinned: Any  # sum of nbytes over READY entries with refcount > 0
    idle: Any  # sum of nbytes over READY entries with refcount 0


def empty(capacity: Any) -> Bytes:
    """A new cache holds nothing."""
    return Bytes(capacity, 0, 0, 0)


def ready(b: Bytes) -> Any:
    """Bytes actually held: every READY entry."""
    return b.pinned + b.idle


def protected(b: Bytes) -> Any:
    """Bytes that cannot be evicted: reservations and in-use entries."""
    return b.reserved + b.pinned


def free(b: Bytes) -> Any:
    """Capacity not held by READY entries."""
    return b.capacity - ready(b)


# Guards -----------------------------------------------------------------------------------


def is_too_large(b: Bytes, nbytes: Any) -> Any:
    """An item larger than the capacity can never fit (TooLargeError)."""
    return nbytes > b.capacity


def reservation_fits(b: Bytes, nbytes: Any) -> Any:
    """reserve, acquire of an absent key, acquire of an idle entry: protected bytes must still fit."""
    return protected(b) + nbytes <= b.capacity


def eviction_can_make_room(b: Bytes, incoming: Any) -> Any:
    """put and evict: evicting every idle entry leaves room for `incoming` bytes."""
    return b.pinned + incoming <= b.capacity


def has_room(b: Bytes, incoming: Any) -> Any:
    """Eviction stops as soon as the ready bytes plus `incoming` fit the capacity."""
    return ready(b) + incoming <= b.capacity


def eviction_demand(b: Bytes, incoming: Any, eviction_time: str = "commit") -> Any:
    """The bytes eviction makes room for: `incoming`, plus the reserved bytes where eviction
    happens at reservation time (`Semantics.eviction_time == "reservation"`: they count as used).
    `eviction_time` is plain data, never symbolic."""
    return incoming + b.reserved if eviction_time == "reservation" else incoming


def bytes_to_evict(b: Bytes, incoming: Any, logic: Logic = CONCRETE) -> Any:
    """The fewest idle bytes eviction must free so that `incoming` bytes fit."""
    excess = ready(b) + incoming - b.capacity
    return logic.choose(excess > 0, excess, 0)


# Byte updates -----------------------------------------------------------------------------
# `evicted` is the number of idle bytes an operation evicted before it took effect.


def after_reserve(b: Bytes, nbytes: Any) -> Bytes:
    """A new RESERVED entry of nbytes (reserve, acquire NEW_RESERVATION)."""
    return Bytes(b.capacity, b.reserved + nbytes, b.pinned, b.idle)


def after_pin(b: Bytes, nbytes: Any) -> Bytes:
    """An idle READY entry gains its first reference (acquire READY_HIT on an idle entry)."""
    return Bytes(b.capacity, b.reserved, b.pinned + nbytes, b.idle - nbytes)


def after_commit(b: Bytes, nbytes: Any, evicted: Any) -> Bytes:
    """A RESERVED entry (refcount >= 1) becomes an in-use READY entry, after evicting idle bytes."""
    return Bytes(b.capacity, b.reserved - nbytes, b.pinned + nbytes, b.idle - evicted)


def after_put(b: Bytes, nbytes: Any, evicted: Any) -> Bytes:
    """A new idle READY entry, after evicting idle bytes."""
    return Bytes(b.capacity, b.reserved, b.pinned, b.idle - evicted + nbytes)


def after_evict(b: Bytes, evicted: Any) -> Bytes:
    """Idle entries evicted (evict), or one idle entry removed (pop)."""
    return Bytes(b.capacity, b.reserved, b.pinned, b.idle - evicted)


def after_abandon(b: Bytes, nbytes: Any) -> Bytes:
    """The last reference to a RESERVED entry is released: the reservation is dropped."""
    return Bytes(b.capacity, b.reserved - nbytes, b.pinned, b.idle)


def after_keep_abandoned(b: Bytes, nbytes: Any) -> Bytes:
    """The last reference to a RESERVED entry is released and the entry is kept, idle
    (abandoned_reservation="kept"): its bytes turn from reserved to idle."""
    return Bytes(b.capacity, b.reserved - nbytes, b.pinned, b.idle + nbytes)


def after_revive(b: Bytes, nbytes: Any) -> Bytes:
    """A kept idle reservation is acquired again: its bytes turn from idle to reserved."""
    return Bytes(b.capacity, b.reserved + nbytes, b.pinned, b.idle - nbytes)


def after_last_release(b: Bytes, nbytes: Any, retain: Any, logic: Logic = CONCRETE) -> Bytes:
    """The last reference to a READY entry is released: it turns idle if retained, else it is removed."""
    return Bytes(b.capacity, b.reserved, b.pinned - nbytes, b.idle + logic.choose(retain, nbytes, 0))


def after_clear(b: Bytes) -> Bytes:
    """Every entry removed (clear runs only when nothing is reserved or in use)."""
    return empty(b.capacity)
