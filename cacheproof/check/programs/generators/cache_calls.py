"""The tensor cache's call generator: calls drawn from the model's state, and its scopes' capacities
and sizes (`BOUNDARY_CAPACITIES`, `size_for`).

A program starts (`CacheCalls.size`) with its capacity (the small scope: 1..8 bytes half of the
time, else 1..64; the wide scopes: a quarter each of 1..64, 65..2**20, the 32-bit boundaries and
2**30..2**41, capped at the scope's `max_capacity`) and its keys: the scope's pool in a drawn
order, max_keys..min_keys of them, of which the program touches 1..all. Each call then usually
(four in five) picks a key whose state suits its operation (an absent key for reserve and put, a
RESERVED key for commit, an idle one for acquire and pop, a READY one for get, an in-use one for
release, a present one for contains), else any of the program's keys; sizes sit on the boundaries
(`size_for`: 1, the capacity, capacity - 1, its halves, thirds, quarters, any size; the wide scopes
add 2**31 and 2**32 and sizes that let many entries live at once); an acquire or a commit of a
present entry mostly agrees with its size and retain flag; values are recipes of the drawn size
with an element size of 1, 2, 4 or 8 bytes picked by their tag (`drawn_recipe`); one reserve or
acquire in three is retain=False; evict asks for 0 bytes half of the time. In `PILE_PERCENT` of
the key picks an acquire takes the most-held entry and a get the READY entry used last.

Misuse (in half the programs, one call in `MISUSE_IN`, when misuse is checked): a bad argument of one of the
checked operations (`BAD_KINDS`: a zero, negative, bool, float, None, string or oversized byte
count, an unhashable key, an unsizable or empty value, a retain flag that is not a bool). Under
`argument_checks="trusted"` the one bad call is an oversized put, which the contract still refuses;
under `argument_checks="value_type"` that and a commit or put of a value of no sizable type
(`misuses`).

`check --exhaustive` enumerates instead of drawing (`CacheCalls.enabled_calls`): every call of
its scope (`EXHAUSTIVE`, an `ExhaustiveCacheScope`: capacities, keys, sizes 1..capacity, both
retain flags, a value of each element size per size, a few bad arguments) from every state
(docs/exhaustive.md).

The scopes are data (`SCOPES`, `THOROUGH`, docs/scope.md): the small scope every check draws from,
and for `--thorough` the wide scope (programs of 100 calls on up to 16 keys of mixed types,
capacities to 2**41) and the long one (the same, in lives of `LONG_CALLS` calls, drawn from a
seeded `random.Random`, as the removed state machine of check/sequential made bursts of calls).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any

from cacheproof.check.phases import Phase
from cacheproof.check.programs.draws import Draws, choice, coin, integer
from cacheproof.contract.calls import Call, ValueRecipe, drawn_recipe
from cacheproof.contract.keys import KEY_DOMAINS, SMALL_KEYS, WIDE_KEYS
from cacheproof.spec import EntryState
from cacheproof.spec.cache.values import element_sizes_dividing


BOUNDARY_CAPACITIES = (
    2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1, 3 * 2**31, 2**33, 2**33 + 1,
    3 * 2**32 + 2, 2**40, 2**40 + 1, 2**41,
)
"""Capacities on the boundaries of 32-bit counters, signed and unsigned, and far beyond them."""

SIZE_BOUNDARIES = (2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1)

SMALL_SIZE_KINDS = 7
"""Size kinds 0..6: 1, capacity, capacity - 1, capacity / 2, / 3, / 4, any size up to capacity."""

WIDE_SIZE_KINDS = SMALL_SIZE_KINDS + 6 + len(SIZE_BOUNDARIES)

_FILLING_KINDS = (0, SMALL_SIZE_KINDS + 3, SMALL_SIZE_KINDS + 4, SMALL_SIZE_KINDS + 5)
"""Sizes that let many entries live at once: 1, capacity // universe size, // 16, 1..4 bytes."""

WIDE_SIZE_PICKS = WIDE_SIZE_KINDS + 4 * len(_FILLING_KINDS)
"""Kinds drawn in the wide scope: picks past WIDE_SIZE_KINDS repeat the filling kinds, so that
more than half of the sizes are small and more than 8 entries are live at once."""


def size_for(kind: int, raw: int, capacity: int, universe_size: int) -> int:
    """The size of pick (kind, raw) in a cache of `capacity` bytes with `universe_size` keys, in 1..capacity.

    Kinds 0..6 (the small scope): 1, capacity, capacity - 1, capacity // 2, // 3, // 4, 1 + raw %
    capacity. Wide kinds 7..12: capacity // 2 + 1, two thirds, capacity // 3 + 1, capacity //
    universe_size (that many entries fill it), capacity // 16, 1..4 bytes; then `SIZE_BOUNDARIES`;
    kinds from WIDE_SIZE_KINDS on repeat the filling kinds.
    """
    if kind >= WIDE_SIZE_KINDS:
        kind = _FILLING_KINDS[(kind - WIDE_SIZE_KINDS) % len(_FILLING_KINDS)]
    if kind < SMALL_SIZE_KINDS:
        size = (1, capacity, capacity - 1, capacity // 2, capacity // 3, capacity // 4, 1 + raw % capacity)[kind]
    elif kind < SMALL_SIZE_KINDS + 6:
        size = (
            capacity // 2 + 1, capacity - capacity // 3, capacity // 3 + 1, capacity // max(universe_size, 1),
            capacity // 16, 1 + raw % 4,
        )[kind - SMALL_SIZE_KINDS]
    else:
        size = SIZE_BOUNDARIES[kind - SMALL_SIZE_KINDS - 6]
    return min(max(size, 1), capacity)


@dataclass(frozen=True)
class CacheScope:
    """What one program of the tensor cache may reach: keys from `key_pool`, `min_keys..max_keys`
    of them per program; capacities 1..64 or (`wide_capacities`) 1..2**41, at most `max_capacity`
    (None: no cap; a cache whose values hold memory is checked with one); `size_kinds` size picks
    (`size_for`)."""

    name: str
    key_pool: tuple[Hashable, ...]
    min_keys: int
    max_keys: int
    wide_capacities: bool
    size_kinds: int
    max_capacity: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_keys <= self.max_keys <= len(self.key_pool):
            raise ValueError(f"scope {self.name}: need 1 <= min_keys <= max_keys <= {len(self.key_pool)}, "
                             f"got {self.min_keys}..{self.max_keys} of {len(self.key_pool)} keys")

    def with_keys(self, domain: str | None) -> "CacheScope":
        """This scope drawing its keys from `KEY_DOMAINS[domain]` (None: unchanged): a scope of a fixed
        key count takes the domain's first keys, the others its whole pool. KeyError for an unknown domain."""
        if domain is None:
            return self
        keys = KEY_DOMAINS[domain]
        return replace(self, key_pool=keys[: self.max_keys] if self.min_keys == self.max_keys else keys)

    def capped(self, cap: int | None) -> "CacheScope":
        """This scope with capacities of at most `cap` bytes (None: unchanged), for a cache whose
        values hold memory (`check --max-capacity`); a scope of small capacities (64 bytes at most)
        is unchanged."""
        return self if cap is None or not self.wide_capacities else replace(self, max_capacity=cap)


SMALL = CacheScope("small", SMALL_KEYS, 6, 6, wide_capacities=False, size_kinds=SMALL_SIZE_KINDS)
WIDE = CacheScope("wide", WIDE_KEYS, 8, 16, wide_capacities=True, size_kinds=WIDE_SIZE_PICKS)
LONG = replace(WIDE, name="long")
SCOPES = {scope.name: scope for scope in (SMALL, WIDE, LONG)}

LONG_CALLS = 1000
"""The calls of one life in the long scope."""
THOROUGH = (Phase(SMALL, 1000, 100), Phase(WIDE, 600, 100, shrink=False), Phase(LONG, 40, LONG_CALLS, shrink=False))
"""`cacheproof check --thorough`: the small, wide and long scopes in turn (docs/scope.md)."""

@dataclass(frozen=True)
class ExhaustiveCacheScope:
    """What `check --exhaustive` tries from every state of the tensor cache: caches of each of
    `capacities` bytes; on each of `keys`, reserve and acquire of every size 1..capacity with either
    retain flag, commit and put of a value of every size and element size, get, release, pop and
    contains; evict of 0..capacity bytes; clear; and, where misuse is checked, each of `bad_kinds`
    (`BAD_KINDS`) on each operation that takes it, on the first key. `depth`: the calls per path a
    search goes to when no --depth is given."""

    name: str
    capacities: tuple[int, ...]
    keys: tuple[Hashable, ...]
    depth: int
    bad_kinds: tuple[str, ...] = ("zero", "too_large", "unhashable_key")


EXHAUSTIVE = {scope.name: scope for scope in (
    ExhaustiveCacheScope("tiny", (1, 2, 3), (0, 1), 4),
    ExhaustiveCacheScope("three-keys", (1, 2, 3, 4), (0, 1, 2), 3),
)}
"""The exhaustive scopes, the default first (docs/exhaustive.md gives their states and times)."""

SUITED_PERCENT = 80
"""A key pick suits its operation this often (when some key does), else it is any of the program's keys."""
PILE_PERCENT = 40
"""An acquire picks the entry with the most holders this often (when one is held), and a get the READY
entry used last: holders pile up on one entry, as a refcount that wraps after 32 needs
(`RefcountWrapsAt32`), and one entry is moved to newest again and again, as a recency clock that
wraps after 32 moves needs (`RecencyClockWrapsAt32`), where any suited key would spread them over
the program's keys."""
PICKS_PER_KEY = 8
AGREE_IN_TEN = 8
"""An acquire or commit of a present entry agrees with its size (and retain flag) this many times in ten."""
MISUSE_IN = 11
"""Where misuse is checked, half the programs make bad calls, one call in this many: the state
machine's share in a program of every operation (its bad-argument rule beside the ten operations),
which swarm programs without that rule did not make. A bad call of get, release, pop or contains
is that call on any present key, which pops and releases entries: in every program, it kept
`RecencyClockWrapsAt32` (34 calls) from being found on half the seeds. Not one in len(plan) + 1
either: a swarm program of acquire alone would make every other call a bad one. The last pick,
not the first: the simplest call is a suited one, so shrinking does not turn calls into misuse."""
BAD_NBYTES = ("zero", "negative", "bool", "float", "none", "string", "too_large")
BAD_KINDS = BAD_NBYTES + ("unhashable_key", "unsizable_value", "empty_value", "bad_retain")
BAD_OPERATIONS = ("reserve", "acquire", "commit", "put", "evict", "get", "release", "pop", "contains")
_BAD_NUMBERS = {"zero": 0, "negative": -1, "bool": True, "float": 1.0, "none": None, "string": "1"}
_TRUSTED_MISUSES = (("put", "too_large"),)
_VALUE_TYPE_MISUSES = _TRUSTED_MISUSES + (("commit", "unsizable_value"), ("put", "unsizable_value"))


def misuses(argument_checks: str, bad_kinds: tuple[str, ...] = BAD_KINDS) -> tuple[tuple[str, str], ...]:
    """The bad calls, as (operation, bad kind), that the checker makes under `argument_checks` (the
    Semantics field): each of `bad_kinds` on each of `BAD_OPERATIONS` ("checked"); only an oversized
    put, which the contract refuses whatever the caller ("trusted"); that and a commit or put of a
    value of no sizable type ("value_type": the cache checks what it stores and trusts the rest)."""
    if argument_checks == "checked":
        return tuple((name, kind) for name in BAD_OPERATIONS for kind in bad_kinds)
    return _VALUE_TYPE_MISUSES if argument_checks == "value_type" else _TRUSTED_MISUSES


class CacheCalls:
    """`CallGenerator` of the tensor cache kind, drawing from `scope` (see the module docstring).
    `size` starts a program: it draws the program's keys too, which its calls then pick from, and
    whether the program makes misuse calls."""

    def __init__(self, scope: CacheScope = SMALL) -> None:
        self.scope = scope
        self.keys: tuple[Hashable, ...] = scope.key_pool[: scope.max_keys]
        self.misusing = True
        self.most_live = self.most_keys = self.largest_capacity = 0
        self.key_types: set[str] = set()

    def size(self, draws: Draws) -> int:
        """The capacity in bytes; the program's keys are drawn after it (see the module docstring)."""
        capacity = _capacity(draws, self.scope)
        universe = _universe(draws, self.scope)
        self.keys = universe[: integer(draws, 1, len(universe))]
        self.misusing = coin(draws)
        self.largest_capacity = max(self.largest_capacity, capacity)
        self.most_keys = max(self.most_keys, len(self.keys))
        self.key_types.update(type(key).__name__ for key in self.keys)
        return capacity

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        state = _State(model, self.keys, self.scope)
        self.most_live = max(self.most_live, len(state.entries))
        if misuse and self.misusing and draws.randrange(MISUSE_IN) == MISUSE_IN - 1:
            bad = _bad_call(draws, state, operations)
            if bad is not None:
                return bad
        return _SUITED[choice(draws, operations)](draws, state)

    def exhaustive_sizes(self, scope: ExhaustiveCacheScope) -> tuple[int, ...]:
        """The capacities of `scope`."""
        return scope.capacities

    def enabled_calls(self, scope: ExhaustiveCacheScope, model: Any, operations: tuple[str, ...],
                      misuse: bool) -> tuple[Call, ...]:
        """Every call of `scope` among `operations` in a cache of the model's capacity (see
        `ExhaustiveCacheScope`), in table order; the bad ones last, only when `misuse`."""
        capacity = model.capacity_bytes
        sizes = range(1, capacity + 1)
        flags = ({}, {"retain": False})
        values = [ValueRecipe(n, tag, element) for n in sizes for tag, element in enumerate(element_sizes_dividing(n))]
        every = {
            "reserve": [Call("reserve", (key, n), flag) for key in scope.keys for n in sizes for flag in flags],
            "acquire": [Call("acquire", (key, n), flag) for key in scope.keys for n in sizes for flag in flags],
            "commit": [Call("commit", (key, value)) for key in scope.keys for value in values],
            "put": [Call("put", (key, value)) for key in scope.keys for value in values],
            "evict": [Call("evict", (n,)) for n in range(capacity + 1)],
            "clear": [Call("clear")],
            **{name: [Call(name, (key,)) for key in scope.keys] for name in ("get", "release", "pop", "contains")},
        }
        calls = [call for name in operations for call in every.get(name, ())]
        if misuse:
            bad = misuses(model.semantics.argument_checks, scope.bad_kinds)
            calls += [bad_call(name, kind, scope.keys[0], 0, capacity) for name, kind in bad if name in operations]
        return tuple({repr(call): call for call in calls}.values())  # a bad kind some operation does not take repeats a call

    def reached(self) -> dict[str, Any]:
        """What this generator's programs reached (the report's `scope`, docs/scope.md): the most
        entries live before a call, the most keys and the key types of one program, the largest
        capacity, and the scope's capacity cap (None: uncapped)."""
        return {"most_live_entries": self.most_live, "most_distinct_keys": self.most_keys,
                "key_types": sorted(self.key_types), "largest_capacity": self.largest_capacity,
                "capacity_cap": self.scope.max_capacity}

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """No argument cases beside the outcomes."""
        return ()

    def case_of(self, call: Call) -> str | None:
        return None


def _capacity(draws: Draws, scope: CacheScope) -> int:
    if scope.wide_capacities:
        capacity = (lambda: integer(draws, 1, 64), lambda: integer(draws, 65, 2**20),
                    lambda: choice(draws, BOUNDARY_CAPACITIES), lambda: integer(draws, 2**30, 2**41))[draws.randrange(4)]()
    else:
        capacity = integer(draws, 1, 64 if coin(draws) else 8)
    return capacity if scope.max_capacity is None else min(capacity, scope.max_capacity)


def _universe(draws: Draws, scope: CacheScope) -> tuple[Hashable, ...]:
    """The whole pool of a fixed scope; else max_keys..min_keys of it in a drawn order."""
    pool = list(scope.key_pool)
    if scope.min_keys == scope.max_keys == len(pool):
        return tuple(pool)
    count = scope.max_keys - draws.randrange(scope.max_keys - scope.min_keys + 1)
    for at in range(count):  # the first `count` places of a drawn permutation
        other = at + draws.randrange(len(pool) - at)
        pool[at], pool[other] = pool[other], pool[at]
    return tuple(pool[:count])


class _State:
    """What the drawers read: the model's entries, its capacity and the program's keys."""

    def __init__(self, model: Any, keys: tuple[Hashable, ...], scope: CacheScope) -> None:
        self.entries = tuple(model.snapshot())
        self.capacity = model.capacity_bytes
        self.semantics = model.semantics
        self.keys, self.scope = keys, scope

    def key(self, draws: Draws, suited: list[Hashable], piled: Hashable | None = None) -> Hashable:
        """One of `suited` (when some key is), else any of the program's keys; `piled` (when given)
        instead in PILE_PERCENT of the picks."""
        bias, index = draws.randrange(100), draws.randrange(self.scope.max_keys * PICKS_PER_KEY)
        if bias < PILE_PERCENT and piled is not None:
            return piled
        if bias < SUITED_PERCENT and suited:
            return suited[index % len(suited)]
        return self.keys[index % len(self.keys)]

    def size(self, draws: Draws) -> int:
        kind = draws.randrange(self.scope.size_kinds)
        raw = draws.randrange(64 if self.scope.size_kinds == SMALL_SIZE_KINDS else 2**62)
        return size_for(kind, raw, self.capacity, len(self.keys))

    def entry(self, key: Hashable) -> Any:
        for entry in self.entries:
            if entry.key == key and type(entry.key) is type(key):
                return entry
        return None

    def most_held(self) -> Hashable | None:
        """The key of the entry with the most holders, the first of a tie; None when none is held."""
        held = max(self.entries, key=lambda entry: entry.refcount, default=None)
        return None if held is None or held.refcount == 0 else held.key

    def newest_ready(self) -> Hashable | None:
        """The key of the READY entry used last (the snapshot is oldest first); None when none is READY."""
        return next((entry.key for entry in reversed(self.entries) if entry.state is EntryState.READY), None)

    def present(self) -> list[Hashable]:
        return [entry.key for entry in self.entries]

    def absent(self) -> list[Hashable]:
        present = set(self.present())
        return [key for key in self.keys if key not in present]

    def in_state(self, state: EntryState | None = None, *, idle: bool = False, in_use: bool = False) -> list[Hashable]:
        return [entry.key for entry in self.entries
                if (state is None or entry.state is state)
                and (not idle or (entry.state is EntryState.READY and entry.refcount == 0))
                and (not in_use or entry.refcount > 0)]


def _retain(draws: Draws) -> dict:
    return {"retain": False} if draws.randrange(10) < 3 else {}


def _reserve(draws: Draws, s: _State) -> Call:
    key = s.key(draws, s.absent())
    return Call("reserve", (key, s.size(draws)), _retain(draws))


def _acquire(draws: Draws, s: _State) -> Call:
    key = s.key(draws, s.in_state(idle=True) or s.present(), piled=s.most_held())
    entry, size, retain, agree = s.entry(key), s.size(draws), _retain(draws), draws.randrange(10)
    if entry is not None and agree < AGREE_IN_TEN:
        return Call("acquire", (key, entry.nbytes), {} if entry.retain else {"retain": False})
    return Call("acquire", (key, size), retain)


def _commit(draws: Draws, s: _State) -> Call:
    key = s.key(draws, s.in_state(EntryState.RESERVED))
    entry, nbytes, tag, agree = s.entry(key), s.size(draws), draws.randrange(256), draws.randrange(10)
    if entry is not None:
        nbytes = entry.nbytes if agree < AGREE_IN_TEN else nbytes + (nbytes == entry.nbytes)
    return Call("commit", (key, drawn_recipe(nbytes, tag)))


def _put(draws: Draws, s: _State) -> Call:
    key = s.key(draws, s.absent())
    return Call("put", (key, drawn_recipe(s.size(draws), draws.randrange(256))))


def _get(draws: Draws, s: _State) -> Call:
    return Call("get", (s.key(draws, s.in_state(EntryState.READY), piled=s.newest_ready()),))


def _release(draws: Draws, s: _State) -> Call:
    return Call("release", (s.key(draws, s.in_state(in_use=True)),))


def _evict(draws: Draws, s: _State) -> Call:
    size = s.size(draws)
    return Call("evict", (0 if coin(draws) else size,))


def _pop(draws: Draws, s: _State) -> Call:
    return Call("pop", (s.key(draws, s.in_state(idle=True)),))


def _clear(draws: Draws, s: _State) -> Call:
    return Call("clear")


def _contains(draws: Draws, s: _State) -> Call:
    return Call("contains", (s.key(draws, s.present()),))


_SUITED = {
    "reserve": _reserve, "acquire": _acquire, "commit": _commit, "put": _put, "get": _get, "release": _release,
    "evict": _evict, "pop": _pop, "clear": _clear, "contains": _contains,
}


def _bad_call(draws: Draws, s: _State, operations: tuple[str, ...]) -> Call | None:
    """A call with a bad argument of one of `operations` (None when none of them takes one); where
    arguments are not all checked, one of the `misuses` the semantics still make, or None."""
    if s.semantics.argument_checks == "checked":
        checked = [name for name in BAD_OPERATIONS if name in operations]
        if not checked:
            return None
        operation, bad = choice(draws, checked), choice(draws, BAD_KINDS)
    else:
        made = [pair for pair in misuses(s.semantics.argument_checks) if pair[0] in operations]
        if not made:
            return None
        operation, bad = made[0] if len(made) == 1 else choice(draws, made)
    return bad_call(operation, bad, s.key(draws, s.present()), draws.randrange(256), s.capacity)


def bad_call(operation: str, bad: str, key: Hashable, tag: int, capacity: int) -> Call:
    """`operation` on `key` with the bad argument `bad` (one of `BAD_KINDS`) in a cache of
    `capacity` bytes; its other arguments are good (1 byte, a value of tag `tag`)."""
    nbytes: Any = 1
    value: Any = drawn_recipe(1, tag)
    kwargs: dict = {}
    if bad == "too_large":
        nbytes, value = capacity + 1, drawn_recipe(capacity + 1, tag)
    elif bad in _BAD_NUMBERS:
        nbytes = _BAD_NUMBERS[bad]
    elif bad == "unhashable_key":
        key = [key]
    elif bad == "unsizable_value":
        value = "not sizable"
    elif bad == "empty_value":
        value = drawn_recipe(0, tag)
    elif bad == "bad_retain":
        kwargs = {"retain": 1}
    if operation in ("reserve", "acquire"):
        return Call(operation, (key, nbytes), kwargs)
    if operation in ("commit", "put"):
        return Call(operation, (key, value))
    if operation == "evict":
        return Call("evict", (nbytes,))
    return Call(operation, (key,))
