"""When a tensor cache's concurrent calls split per key (`spec.kind.Partitioning`).

A keyed call (reserve, acquire, commit, put, get, release, pop, `in`) reads and changes only its
own key's entry, unless room must be made: then it evicts other keys' idle entries, or is refused
(acquire BLOCKED, a reservation that does not fit), depending on what the other keys hold. So the
calls split per key when room is never short: each key holds at most one entry at a time, so the
bytes in use never exceed the sum over keys of the largest size the key's entry can have (the
entry it starts with, and every size a call for that key passes); when that sum fits the
capacity, no call evicts or is refused for room, in any order. The recency order still differs
between interleavings; only evict and clear read it (they touch every key and prevent the split)
and the final snapshot, which the search checks on the merged order (`search.linearize_parts`).
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from cacheproof.spec.cache.operations import CACHE_OPERATIONS
from cacheproof.spec.kind import Partitioning

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
    (module doc); False when a size cannot be read."""
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
