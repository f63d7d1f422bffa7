"""The per-entry model's state: a cache of N symbolic slots, a call's parameters, and the byte
counts summed from the slots.

Rule: each slot is one possible entry, unrolled into plain z3 terms (no arrays, no quantifiers):
whether it is present, READY or RESERVED, its nbytes, refcount, retain flag and recency rank
(larger is newer; a `clock` above every rank gives the next "newest"). The key an operation names
is slot 0 (`KEY_SLOT`): slots are interchangeable (recency is the symbolic rank, not the slot
index), so any state and key can be renamed so that the key is slot 0. The byte counts are the
spec's counters (`rules.Bytes`), summed from the slots; an entry is evictable when
`steps.is_idle`, called at proof time so a patched step is the one proved.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from cacheproof.prove.induction import Z3_LOGIC
from cacheproof.spec.cache import rules, steps

KEY_SLOT = 0
"""The slot of the key an operation names."""

class Slot(NamedTuple):
    """One possible entry. Fields of an absent slot mean nothing."""

    present: Any  # the key is in the cache
    ready: Any  # READY (True) or RESERVED (False)
    nbytes: Any
    refcount: Any
    retain: Any
    rank: Any  # recency: a larger rank is newer


class SlotCache(NamedTuple):
    """A cache state: the capacity, the next recency rank and N slots."""

    capacity: Any
    clock: Any  # above every present rank: the rank "move to newest" assigns
    slots: tuple[Slot, ...]


class Parameters(NamedTuple):
    """What a call passes besides its key (slot 0): a size and the retain flag."""

    nbytes: Any  # reserve/acquire/evict nbytes, or the size of a commit/put value
    retain: Any


def symbolic_cache(prefix: str, num_slots: int) -> SlotCache:
    """A cache state made of fresh z3 constants."""
    return SlotCache(
        z3.Int(f"{prefix}capacity"),
        z3.Int(f"{prefix}clock"),
        tuple(
            Slot(
                z3.Bool(f"{prefix}present_{i}"),
                z3.Bool(f"{prefix}ready_{i}"),
                z3.Int(f"{prefix}nbytes_{i}"),
                z3.Int(f"{prefix}refcount_{i}"),
                z3.Bool(f"{prefix}retain_{i}"),
                z3.Int(f"{prefix}rank_{i}"),
            )
            for i in range(num_slots)
        ),
    )


def symbolic_parameters() -> Parameters:
    return Parameters(z3.Int("nbytes"), z3.Bool("retain"))


# Derived counts -----------------------------------------------------------------------------
# A slot or cache that several outcomes share is the same Python object (an outcome rebuilds only
# the slots it changes), so its derived terms are built once and looked up by identity: building
# z3 terms through its Python API costs tens of microseconds each, and the proofs over 32 slots
# would otherwise spend most of their time rebuilding the same sums.


class IdentityMemo:
    """Values computed once per object, keyed by identity; each entry holds its object, so its id
    is not reused while the entry lives. Emptied past `limit` entries."""

    def __init__(self, compute: Callable[[Any], Any], limit: int = 1 << 14) -> None:
        self._compute, self._limit = compute, limit
        self._entries: dict[int, tuple[Any, Any]] = {}

    def __call__(self, of: Any) -> Any:
        entry = self._entries.get(id(of))
        if entry is not None and entry[0] is of:
            return entry[1]
        if len(self._entries) >= self._limit:
            self._entries.clear()
        value = self._compute(of)
        self._entries[id(of)] = (of, value)
        return value


class _SlotTerms(NamedTuple):
    reserved: Any
    pinned: Any
    idle: Any
    reserved_bytes: Any  # nbytes if reserved, else 0
    pinned_bytes: Any
    idle_bytes: Any


def _slot_terms(s: Slot) -> _SlotTerms:
    reserved = z3.And(s.present, z3.Not(s.ready))
    pinned = z3.And(s.present, s.ready, s.refcount > 0)
    idle = z3.And(s.present, s.ready, s.refcount == 0)
    zero = z3.IntVal(0)
    return _SlotTerms(
        reserved, pinned, idle, z3.If(reserved, s.nbytes, zero), z3.If(pinned, s.nbytes, zero), z3.If(idle, s.nbytes, zero)
    )


slot_terms = IdentityMemo(_slot_terms)
"""The derived terms of a slot (`_SlotTerms`), built once per slot object."""


def is_reserved(s: Slot) -> Any:
    return slot_terms(s).reserved


def is_pinned(s: Slot) -> Any:
    return slot_terms(s).pinned


def is_idle(s: Slot) -> Any:
    return slot_terms(s).idle


def is_evictable(s: Slot) -> Any:
    """An entry the spec's eviction walk may remove: `steps.is_idle`, called every time (a
    patched step is the one proved)."""
    return z3.And(s.present, steps.is_idle(s.ready, s.refcount, Z3_LOGIC))


def _counts(cache: SlotCache) -> tuple[Any, Any, Any]:
    terms = [slot_terms(s) for s in cache.slots]
    return (
        z3.Sum([t.reserved_bytes for t in terms]),
        z3.Sum([t.pinned_bytes for t in terms]),
        z3.Sum([t.idle_bytes for t in terms]),
    )


_cache_counts = IdentityMemo(_counts)


def cache_bytes(cache: SlotCache) -> rules.Bytes:
    """The byte counts of a slot cache, as the spec's counters hold them (`rules.Bytes` built at
    every call, so a patched rule module is the one used)."""
    return rules.Bytes(cache.capacity, *_cache_counts(cache))
