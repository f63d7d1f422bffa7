"""What one operation does to one entry, written once, over numbers and flags.

`rules` holds the guards and byte updates over a cache's byte counts; this module holds the
per-entry steps: the refcount an entry gets, whether it is still referenced or idle, whether its
last release removes it. the cache spec (cache_spec.py) calls them with Python values; the per-entry prover model
(cacheproof/prove/cache/entry_model.py) calls them with z3 terms, so the steps it proves are the ones
the spec runs. As in `rules`, a branch on a possibly symbolic value goes through a `Logic`
(`CONCRETE` by default), never through `if`, and callers write `steps.<name>(...)` at call time so
a patched step is the step proved.

An entry is described here by `ready` (True for READY, False for RESERVED), its `refcount` and its
`retain` flag. The invariants (spec/cache/invariants.py) are stated independently of these steps.
"""

from __future__ import annotations

from typing import Any

from cacheproof.spec.cache.rules import CONCRETE, Logic

RESERVATION_REFCOUNT = 1
"""A new RESERVED entry (reserve, acquire NEW_RESERVATION) holds one reference: its producer's."""

PUT_REFCOUNT = 0
"""A put entry is READY and idle: nobody holds a reference to it."""

PUT_RETAIN = True
"""A put entry is retained: it stays until evicted, popped or cleared."""


def reservation_retain(retain: Any, transient_entries: bool = True) -> Any:
    """The retain flag of a new reservation: the caller's, or always True where the cache has no
    transient entries (`Semantics.transient_entries` False; plain data, never symbolic)."""
    return retain if transient_entries else True


def acquired(refcount: Any) -> Any:
    """acquire of a present entry adds one reference."""
    return refcount + 1


def released(refcount: Any) -> Any:
    """release drops one reference."""
    return refcount - 1


def is_referenced(refcount: Any) -> Any:
    """Someone holds the entry: a reservation's producer or a user of a READY value.

    A referenced entry is never evicted or popped, blocks clear, and may be released; after a
    release, a still referenced entry only loses that one reference.
    """
    return refcount > 0


def is_idle(ready: Any, refcount: Any, logic: Logic = CONCRETE) -> Any:
    """A READY entry nobody references (refcount 0): the only kind eviction removes, and the kind
    whose first acquire must pass `rules.reservation_fits` (it becomes protected).

    Written as `refcount == 0`, the form the invariants use: with `not is_referenced(refcount)`,
    equal for every refcount >= 0, z3 took 100 times longer on I2 after an eviction at 16 slots.
    """
    return logic.all_of(ready, refcount == 0)


def removed_at_last_release(ready: Any, retain: Any, logic: Logic = CONCRETE) -> Any:
    """The last release removes an abandoned reservation and a transient (retain=False) entry;
    a retained READY entry stays, idle."""
    return logic.any_of(logic.negate(ready), logic.negate(retain))
