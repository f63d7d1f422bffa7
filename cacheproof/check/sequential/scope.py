"""The checker's scope: which keys, capacities, sizes and sequence lengths one example may reach.

`SMALL` is the scope the default `cacheproof check` draws from: six int keys, capacities up to
64 bytes, 100 calls. Most lifecycle bugs show there, and fast. `WIDE` reaches what production
caches meet and the small scope never does:

- a key universe of 8 to 16 keys per example, drawn from `WIDE_KEYS`, which mixes ints, strings,
  tuples and bytes in families of distinct keys that format alike (1, "1", b"1", ("img", 1),
  ("img", "1")), so a cache that normalises, formats or re-hashes keys confuses two of them;
- sizes small against the capacity (capacity / 16, / the universe size, 1..4 bytes), so that more
  than 8 (up to 16) entries are live at once;
- capacities from 1 byte to 2**41, with sizes on the boundaries that matter there (2**31 and
  2**32 and their neighbours, capacity halves, thirds, two thirds).

`LONG` is the wide scope with bursts: one step of the state machine makes up to `burst` calls
drawn from a seeded `random.Random`, with the same pickers and biases as the rules, so one
example is a life of 500-2,000 calls on one cache (Hypothesis alone stops near 400 steps).

`Scope` is plain data; the strategies below turn it into Hypothesis draws. The state machine
(`cacheproof.check.sequential.machine`) keeps the biases that make the small scope effective (keys whose
state suits the operation, boundary sizes) in every scope.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from hypothesis import strategies as st

from cacheproof.check.phases import Phase
from cacheproof.check.programs.cache_calls import BOUNDARY_CAPACITIES, SMALL_SIZE_KINDS, WIDE_SIZE_PICKS
from cacheproof.contract.keys import KEY_DOMAINS, SMALL_KEYS, WIDE_KEYS

__all__ = ["Phase", "Scope", "SMALL", "WIDE", "LONG", "SCOPES", "THOROUGH"]

@dataclass(frozen=True)
class Scope:
    """What one example may reach (see the module docstring)."""

    name: str
    key_pool: tuple[Hashable, ...]
    min_keys: int  # keys per example: min_keys..len(key_pool) drawn from the pool (all when equal)
    max_keys: int
    wide_capacities: bool  # 1 byte .. 2**41 with 32-bit boundaries, else 1..64
    size_kinds: int  # kinds drawn: SMALL_SIZE_KINDS or WIDE_SIZE_PICKS
    burst: int = 0  # the most calls one burst step makes; 0: no bursts

    def __post_init__(self) -> None:
        if not 1 <= self.min_keys <= self.max_keys <= len(self.key_pool):
            raise ValueError(f"scope {self.name}: need 1 <= min_keys <= max_keys <= {len(self.key_pool)}")


SMALL = Scope("small", SMALL_KEYS, 6, 6, wide_capacities=False, size_kinds=SMALL_SIZE_KINDS)
WIDE = Scope("wide", WIDE_KEYS, 8, 16, wide_capacities=True, size_kinds=WIDE_SIZE_PICKS)
LONG = Scope("long", WIDE_KEYS, 8, 16, wide_capacities=True, size_kinds=WIDE_SIZE_PICKS, burst=600)
SCOPES = {scope.name: scope for scope in (SMALL, WIDE, LONG)}


def with_key_domain(scope: Scope, domain: str | None) -> Scope:
    """`scope` drawing its keys from `KEY_DOMAINS[domain]` (None: the scope as it is): the small scope
    takes the domain's first six keys, the others its whole pool. KeyError for an unknown domain."""
    if domain is None:
        return scope
    keys = KEY_DOMAINS[domain]
    return replace(scope, key_pool=keys[: scope.max_keys] if scope.min_keys == scope.max_keys else keys)


def capacities(scope: Scope, most: int | None = None) -> st.SearchStrategy[int]:
    """Capacities of one example, at most `most` (None: no cap) for a cache whose values hold memory.

    Small: 1..8 bytes half of the time, up to 64 otherwise. Wide: a quarter each of 1..64,
    65..2**20, `BOUNDARY_CAPACITIES` and 2**30..2**41.
    """
    if scope.wide_capacities:
        drawn = st.one_of(
            st.integers(1, 64), st.integers(65, 2**20), st.sampled_from(BOUNDARY_CAPACITIES), st.integers(2**30, 2**41)
        )
    else:
        drawn = st.one_of(st.integers(1, 8), st.integers(1, 64))
    if most is None:
        return drawn
    return drawn.map(lambda capacity: min(capacity, most))


def universes(scope: Scope) -> st.SearchStrategy[tuple[Hashable, ...]]:
    """The keys of one example: the whole pool of a fixed scope, else max_keys..min_keys of it,
    in a drawn order (most often the most keys, so that many entries live at once)."""
    if scope.min_keys == scope.max_keys == len(scope.key_pool):
        return st.just(scope.key_pool)
    spread = scope.max_keys - scope.min_keys
    return st.tuples(st.integers(0, spread), st.permutations(scope.key_pool)).map(
        lambda drawn: tuple(drawn[1][: scope.max_keys - drawn[0]])
    )


def size_picks(scope: Scope) -> st.SearchStrategy[tuple[int, int]]:
    """(kind, raw) pairs that `size_for` turns into a size."""
    if scope.size_kinds == SMALL_SIZE_KINDS:
        return st.tuples(st.integers(0, SMALL_SIZE_KINDS - 1), st.integers(0, 63))
    return st.tuples(st.integers(0, scope.size_kinds - 1), st.integers(0, 2**62))


THOROUGH = (Phase(SMALL, 1000, 100), Phase(WIDE, 600, 100, shrink=False), Phase(LONG, 40, 30, shrink=False))
"""`cacheproof check --thorough`: about two minutes on a two-core machine (docs/scope.md)."""
