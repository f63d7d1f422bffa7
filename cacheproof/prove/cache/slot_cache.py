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


def is_reserved(s: Slot) -> Any:
    return z3.And(s.present, z3.Not(s.ready))


def is_pinned(s: Slot) -> Any:
    return z3.And(s.present, s.ready, s.refcount > 0)


def is_idle(s: Slot) -> Any:
    return z3.And(s.present, s.ready, s.refcount == 0)


def is_evictable(s: Slot) -> Any:
    """An entry the spec's eviction walk may remove: `steps.is_idle`."""
    return z3.And(s.present, steps.is_idle(s.ready, s.refcount, Z3_LOGIC))


def _sum_where(cache: SlotCache, selected: Callable[[Slot], Any]) -> Any:
    return z3.Sum([z3.If(selected(s), s.nbytes, 0) for s in cache.slots])


def cache_bytes(cache: SlotCache) -> rules.Bytes:
    """The byte counts of a slot cache, as the spec's counters hold them."""
    return rules.Bytes(
        cache.capacity,
        _sum_where(cache, is_reserved),
        _sum_where(cache, is_pinned),
        _sum_where(cache, is_idle),
    )

