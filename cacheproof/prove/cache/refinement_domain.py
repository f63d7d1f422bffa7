"""The refinement check's bounded domain: which states and calls it runs.

Rule: within a `Bound`, every state that satisfies I1-I4 (capacities 1..C; at most E entries,
each RESERVED or READY with every nbytes up to the capacity, refcounts up to R (up to 1 in states
of more than `deep_entries` entries) and both retain flags where I3/I4 allow; entries in every
recency order; keys "a", "b", ... oldest first, since keys are interchangeable) and every call of
the bounded domain (each operation on every present key and on one absent key; nbytes 0..C+1 for
reserve and acquire, -1..C+1 for evict, value sizes 0..C+1, retain True and False; with trusted
arguments only the calls a caller may make). A READY entry holds `entry_value`.
"""

from __future__ import annotations

from typing import Any, Hashable, Iterator, NamedTuple

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.values import value_for
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import EntryState, EntryView

RESERVED, READY = EntryState.RESERVED, EntryState.READY
ABSENT_KEY = "new"
"""The key of every call on a key the state does not hold."""

class Bound(NamedTuple):
    """Which states the refinement check covers: capacities 1..max_capacity, at most max_entries
    entries; refcounts up to max_refcount in states of at most `deep_entries` entries, up to 1 in
    larger ones (a second reference matters to the entry a call names, and three-entry states with
    every refcount would triple the run for bystanders whose references only count as > 0)."""

    max_capacity: int = 3
    max_entries: int = 3
    max_refcount: int = 2
    deep_entries: int = 2

    def describe(self) -> str:
        deep = min(self.deep_entries, self.max_entries)
        refcounts = f"refcount <= {self.max_refcount}"
        if deep < self.max_entries:
            refcounts += f" (<= 1 beyond {deep} entries)"
        return f"capacities 1..{self.max_capacity}, <= {self.max_entries} entries, {refcounts}"


DEFAULT_BOUND = Bound()


def state_keys(bound: Bound) -> tuple[str, ...]:
    """The keys of a state's entries, oldest first."""
    return tuple(chr(ord("a") + i) for i in range(bound.max_entries))


def entry_kinds(capacity: int, max_refcount: int) -> list[tuple[EntryState, int, int, bool]]:
    """(state, refcount, nbytes, retain) of every entry allowed by I3 and I4 at this capacity."""
    kinds = []
    for nbytes in range(1, capacity + 1):
        for refcount in range(1, max_refcount + 1):
            for retain in (True, False):
                kinds.append((RESERVED, refcount, nbytes, retain))
                kinds.append((READY, refcount, nbytes, retain))
        kinds.append((READY, 0, nbytes, True))
    return kinds


def bounded_states(bound: Bound = DEFAULT_BOUND) -> Iterator[tuple[int, tuple[EntryView, ...]]]:
    """(capacity, entries oldest first) of every state within the bound that satisfies I1-I4."""
    keys = state_keys(bound)
    for capacity in range(1, bound.max_capacity + 1):
        for count in range(bound.max_entries + 1):
            max_refcount = bound.max_refcount if count <= bound.deep_entries else 1
            yield from ((capacity, entries) for entries in _sequences(capacity, count, entry_kinds(capacity, max_refcount), keys))


def _sequences(capacity: int, count: int, kinds: list, keys: tuple[str, ...]) -> Iterator[tuple[EntryView, ...]]:
    """Every sequence of `count` entries of these kinds that keeps I1 and I2."""

    def extend(prefix: tuple[EntryView, ...], protected: int, ready: int) -> Iterator[tuple[EntryView, ...]]:
        if len(prefix) == count:
            yield prefix
            return
        for state, refcount, nbytes, retain in kinds:
            more_protected = protected + (nbytes if state is RESERVED or refcount > 0 else 0)
            more_ready = ready + (nbytes if state is READY else 0)
            if more_protected <= capacity and more_ready <= capacity:
                entry = EntryView(keys[len(prefix)], state, refcount, nbytes, retain)
                yield from extend(prefix + (entry,), more_protected, more_ready)

    return extend((), 0, 0)


def bounded_calls(capacity: int, entries: tuple[EntryView, ...], semantics: Semantics = CONTRACT) -> Iterator[Call]:
    """Every call of the bounded domain on a state: each operation on each present key and on
    ABSENT_KEY; nbytes -1..capacity+1 (evict; reserve and acquire from 0, as -1 is refused like
    0), value sizes 0..capacity+1, retain True and False. With trusted arguments, only the calls
    a caller may make: sizes from 1 (evict from 0)."""
    checked = semantics.argument_checks == "checked"
    sizes = range(0 if checked else 1, capacity + 2)
    for key in [e.key for e in entries] + [ABSENT_KEY]:
        for nbytes in sizes:
            for retain in (True, False):
                yield Call("reserve", (key, nbytes), {"retain": retain})
                yield Call("acquire", (key, nbytes), {"retain": retain})
        for size in sizes:
            yield Call("commit", (key, ValueRecipe(size, value_tag(key))), {})
            yield Call("put", (key, ValueRecipe(size, value_tag(key))), {})
        for operation in ("get", "release", "pop"):
            yield Call(operation, (key,), {})
    for nbytes in range(-1 if checked else 0, capacity + 2):
        yield Call("evict", (nbytes,), {})
    yield Call("clear", (), {})


def value_tag(key: Hashable) -> int:
    return sum(str(key).encode()) % 256


def entry_value(entry: EntryView) -> Any:
    """The value a READY entry of the bounded states holds (None for RESERVED)."""
    return value_for(None, entry.nbytes, value_tag(entry.key)) if entry.state is READY else None
