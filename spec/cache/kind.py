"""The tensor cache as a spec kind: `CacheSpec`, its operation table, invariants and profiles, and
its views as the differential step compares them.

Views: len(), stats() as the contract's byte fields, and snapshot() as (key, state name, refcount,
nbytes, retain) entries, of which the model's semantics say what counts (`comparable_snapshot`).
Each reader takes the target (the model or the implementation) and the model, whose semantics
decide. Its lookup, compared after them: `membership`, `key in cache` for each key the model holds
(`CACHE_LOOKUPS`).

Partitioning (`PER_KEY`, `spec.kind.Partitioning`): when concurrent calls split per key. A keyed
call (reserve, acquire, commit, put, get, release, pop, `in`) reads and changes only its own key's
entry, unless room must be made: then it evicts other keys' idle entries, or is refused (acquire
BLOCKED, a reservation that does not fit), depending on what the other keys hold. So the
calls split per key when room is never short: each key holds at most one entry at a time, so the
bytes in use never exceed the sum over keys of the largest size the key's entry can have (the
entry it starts with, and every size a call for that key passes); when that sum fits the
capacity, no call evicts or is refused for room, in any order. The recency order still differs
between interleavings; only evict and clear read it (they touch every key and prevent the split)
and the final snapshot, which the search checks on the merged order (`search.linearize_parts`).
"""

from __future__ import annotations

import enum
import operator
from typing import Any, Hashable, Iterable, Sequence

from cacheproof.spec.cache.operations import CACHE_OPERATIONS, CACHE_TYPES
from cacheproof.spec.cache.model import CacheSpec
from cacheproof.spec.cache.invariants import INVARIANTS, Step
from cacheproof.spec.cache.semantics import CONTRACT
from cacheproof.spec.cache.types import EntryState, EntryView
from cacheproof.spec.kind import LookupRaised, Partitioning, SpecKind, ViewReader
from cacheproof.spec.cache.profiles import PROFILES




STATS_FIELDS = (
    "capacity_bytes", "ready_bytes", "reserved_bytes", "pinned_bytes", "idle_bytes", "free_bytes", "entries",
)
"""The fields of stats() the contract compares (the hit and miss counters are informative)."""


def normalize_snapshot(snapshot: Iterable[Any]) -> tuple:
    """Entries as (key, state name, refcount, nbytes, retain), oldest first."""
    return tuple((e.key, _name(e.state), e.refcount, e.nbytes, e.retain) for e in snapshot)


def comparable_snapshot(entries: tuple, order: str, retain_flags: bool = True) -> tuple:
    """What of a normalized snapshot is compared under `snapshot_order`: every entry in order
    ("full"); the idle entries in order, then the others sorted ("idle"); all sorted ("membership").
    Without transient entries (`retain_flags` False) the retain flag has no effect and is not compared."""
    if not retain_flags:
        entries = tuple(entry[:4] + (None,) for entry in entries)
    if order == "full":
        return entries
    if order == "idle":
        idle = tuple(e for e in entries if e[1] == "READY" and e[2] == 0)
        return idle + tuple(sorted((e for e in entries if e not in idle), key=repr))
    return tuple(sorted(entries, key=repr))


def read_len(target: Any, model: Any) -> int:
    return len(target)


_STATS_VALUES = operator.attrgetter(*STATS_FIELDS)
"""The compared fields' values of a stats() answer, in `STATS_FIELDS` order, read in one C call."""


def read_stats(target: Any, model: Any) -> dict[str, Any]:
    """The compared fields of `target.stats()` (`stats_answer`)."""
    return stats_answer(target.stats(), model)


def stats_answer(result: Any, model: Any) -> dict[str, Any]:
    """The compared fields of a stats() result; ValueError naming the first field it lacks."""
    try:
        return dict(zip(STATS_FIELDS, _STATS_VALUES(result)))
    except AttributeError:
        missing = next(field for field in STATS_FIELDS if not hasattr(result, field))
        raise ValueError(f"which has no field {missing}") from None


def read_snapshot(target: Any, model: Any) -> tuple:
    """`target.snapshot()` normalized, as much of it as the model's semantics compare (`snapshot_answer`)."""
    return snapshot_answer(target.snapshot(), model)


def snapshot_answer(result: Any, model: Any) -> tuple:
    """A snapshot() result normalized, as much of it as the model's semantics compare; ValueError
    when it is not a list of entries with the contract's fields."""
    semantics = model.semantics
    try:
        entries = normalize_snapshot(result)
    except Exception as error:  # noqa: BLE001 - any shape the implementation's snapshot() returns is reported
        raise ValueError("which is not a list of entries with key, state, refcount, nbytes, retain "
                         f"({type(error).__name__}: {error})") from None
    return comparable_snapshot(entries, semantics.snapshot_order, semantics.transient_entries)


def snapshot_python(model: Any) -> str:
    """`read_snapshot` of an implementation named `cache`, as Python."""
    semantics = model.semantics
    return (f"comparable_snapshot(normalize_snapshot(cache.snapshot()), {semantics.snapshot_order!r}, "
            f"{semantics.transient_entries!r})")


def read_membership(target: Any, model: Any) -> tuple:
    """The keys the model holds, oldest first (its `state_key`'s), that `key in target` says `target`
    holds: for the model itself, every one of them; `LookupRaised` naming the key whose `in` raised.
    O(entries): one `in` of the implementation per entry."""
    if target is model:
        return tuple(key for key, _ in model.state_key())
    contains = target.__contains__
    held = []
    for key, _ in model.state_key():
        try:
            found = contains(key)
        except Exception as error:  # noqa: BLE001 - the implementation's `in` failing is its answer
            raise LookupRaised(f"{key!r} in cache", error) from None
        if found:
            held.append(key)
    return tuple(held)


_IMPORTS = "from cacheproof.spec.cache.kind import STATS_FIELDS, comparable_snapshot, normalize_snapshot"

CACHE_VIEWS = {
    "len": ViewReader(read_len, lambda model: "len(cache)", method="__len__"),
    "stats": ViewReader(read_stats, lambda model: "{field: getattr(cache.stats(), field) for field in STATS_FIELDS}",
                        _IMPORTS, optional=True, answer=stats_answer, compared=_STATS_VALUES,
                        model_compared=lambda model: model.counted_stats()),
    "snapshot": ViewReader(read_snapshot, snapshot_python, _IMPORTS, optional=True, answer=snapshot_answer),
}
"""The views compared after every call, in order, and how each is read; a cache without stats()
or snapshot() is compared on the others (docs/contract.md)."""

CACHE_LOOKUPS = {
    "membership": ViewReader(read_membership, lambda model: "tuple(key for key in spec_membership if key in cache)",
                             method="__contains__", optional=True),
}
"""The lookup compared after every call of a sequential check, after the views: `key in cache` for
each key the spec holds (a cache whose `in` alone is broken shows after the call that breaks it,
not only at a later `contains` call); a cache without `in` is compared on the views. A snippet
asserts it against the spec's answer, which it names `spec_membership`."""


def _name(state: Any) -> Any:
    return state.name if isinstance(state, enum.Enum) else state


def cache_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any, semantics: Any) -> Step:
    """The `Step` the invariants judge, from an implementation's snapshot views (as `read_snapshot`
    reads them) before and after `call`; a retain flag the semantics do not compare (None) reads as
    True, as no entry is transient under them. Under the contract's semantics the whole step is
    judged; under any other, the state after it alone (no operation, `before` = `after`, nothing
    raised), so only the state invariants I1-I4 can break: the step invariants I5 and I6 are judged
    under the contract only (options waive I5, and a snapshot compared in another order than the
    recency order cannot show what was evicted first)."""
    entries_after = _entries(after["snapshot"])
    if semantics != CONTRACT:
        return Step(None, size, entries_after, entries_after, False)
    return Step(call.op, size, _entries(before["snapshot"]), entries_after, raised)


def _entries(snapshot: Iterable[tuple]) -> tuple[EntryView, ...]:
    """Normalized entries as `EntryView`s, a state by its `EntryState` (an unknown name stays as written)."""
    return tuple(EntryView(key, EntryState[state] if state in EntryState.__members__ else state, refcount, nbytes,
                           True if retain is None else retain)
                 for key, state, refcount, nbytes, retain in snapshot)


_KEYED = frozenset(row.name for row in CACHE_OPERATIONS if row.keyed)
_SIZED = {row.name: tuple(i for i, a in enumerate(row.arguments) if a.domain in ("nbytes", "value"))
          for row in CACHE_OPERATIONS if row.keyed}


def key_of(operation: str, args: tuple) -> Hashable | None:
    """A keyed call's key; None for evict and clear, which touch every key."""
    return args[0] if operation in _KEYED and args else None


def _size(argument: Any) -> int | None:
    """The bytes an nbytes or value argument stands for: an int, or a value's (or recipe's) nbytes."""
    if isinstance(argument, int):
        return argument
    nbytes = getattr(argument, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return len(argument) if isinstance(argument, (bytes, bytearray)) else None


def room_never_short(model: Any, calls: Sequence[tuple[str, tuple]]) -> bool:
    """Whether the largest entry each key can hold, summed over keys, fits `model`'s capacity
    (module doc: partitioning); False when a size cannot be read."""
    largest: dict[Hashable, int] = {view.key: view.nbytes for view in model.snapshot()}
    for operation, args in calls:
        for position in _SIZED.get(operation, ()):
            if position >= len(args):
                continue
            size = _size(args[position])
            if size is None:
                return False
            largest[args[0]] = max(largest.get(args[0], 0), size)
    return sum(largest.values()) <= model.capacity_bytes


PER_KEY = Partitioning(part=key_of, independent=room_never_short)
"""The tensor cache's calls split per key while room is never short."""


CACHE_KIND = SpecKind(
    name="cache",
    summary="a byte-bounded, ref-counted LRU tensor cache with reservations (docs/contract.md)",
    operations=CACHE_OPERATIONS,
    size_name="capacity_bytes",
    probe_size=64,
    new=CacheSpec,
    invariants=INVARIANTS,
    profiles=PROFILES,
    key_domains=("int", "str", "bytes", "tuple", "mixed"),
    keys_are="entry keys",
    state_every=None,
    types=CACHE_TYPES,
    views=tuple(CACHE_VIEWS),
    lookups=tuple(CACHE_LOOKUPS),
    view_readers={**CACHE_VIEWS, **CACHE_LOOKUPS},
    partitioning=PER_KEY,
    judge=cache_step,
)
