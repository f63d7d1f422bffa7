"""How the refinement check encodes a state, a result and a snapshot as integers, the same way for
what the spec did and for what the model's outcome says.

Rule: a `Layout` puts one state in the model's slots for calls on one key (the key in slot 0, the
other entries after it in recency order, then absent slots; ranks are recency positions); the
spec's result and snapshot after a call are encoded against that layout (`encode_result`,
`encode_snapshot`), and `expected_result` gives the code the spec must return when an outcome of
the model applies, so the two compare as integers.
"""

from __future__ import annotations

from typing import Any, Hashable, NamedTuple

from cacheproof.prove.induction import BranchOutcome
from cacheproof.prove.cache.refinement_domain import READY, entry_value
from cacheproof.spec.cache.types import Acquired, EntryView

NO_ERROR = "-"
RESULT_OF_ERROR = -3
RESULT_OTHER = -2
RESULT_NONE = 20
RESULT_VALUE = 30
RESULT_ACQUIRED = 10  # + the member's index
RESULT_EVICTED = 1000  # + the bit mask of the evicted slots
ACQUIRED_ORDER = list(Acquired)


PRE_SLOTS = 2
"""Where the slots start in a layout's columns (after capacity and clock)."""


class Layout(NamedTuple):
    """How one state sits in the model's slots for calls on one key: the key in slot 0, the other
    entries after it in recency order, then absent slots; ranks are recency positions."""

    slot_keys: tuple[Hashable | None, ...]
    pre: tuple[int, ...]  # capacity, clock, then per slot: present, ready, nbytes, refcount, retain, rank
    unchanged: tuple[int, ...]  # the encoded snapshot of the state itself (see encode_snapshot)
    values: dict[Hashable, Any]


def layout(capacity: int, entries: tuple[EntryView, ...], key: Hashable | None, num_slots: int) -> Layout:
    keyed = [e for e in entries if e.key == key]
    others = [e for e in entries if e.key != key]
    slot_entries: list[EntryView | None] = [keyed[0] if keyed else None, *others]
    slot_entries += [None] * (num_slots - len(slot_entries))
    position = {e.key: i for i, e in enumerate(entries)}
    absent_rank = iter(range(len(entries), num_slots))
    pre: list[int] = [capacity, num_slots]
    for entry in slot_entries:
        if entry is None:
            pre += [0, 0, 0, 0, 1, next(absent_rank)]
        else:
            pre += [1, int(entry.state is READY), entry.nbytes, entry.refcount, int(entry.retain), position[entry.key]]
    slot_keys = (key, *[e.key for e in others], *[None] * (num_slots - 1 - len(others)))
    values = {e.key: entry_value(e) for e in entries}
    lay = Layout(slot_keys, tuple(pre), (), values)
    return lay._replace(unchanged=encode_snapshot(entries, lay))


def fresh_copy(cache: Any, dict_fields: tuple[str, ...]) -> Any:
    """An independent copy of a spec cache: entries are immutable, so copying its dicts suffices."""
    clone = object.__new__(type(cache))
    clone.__dict__ = dict(cache.__dict__)
    for name in dict_fields:
        clone.__dict__[name] = dict(cache.__dict__[name])
    return clone


def encode_result(result: Any, lay: Layout, key_value: Any) -> int:
    """bool: 0 or 1; None; an `Acquired`; a list of evicted keys (distinct keys of the layout,
    oldest first) as a bit mask of their slots; the named entry's value; anything else."""
    if type(result) is bool:
        return int(result)
    if result is None:
        return RESULT_NONE
    if isinstance(result, Acquired):
        return RESULT_ACQUIRED + ACQUIRED_ORDER.index(result)
    if isinstance(result, list):
        return _encode_evicted(result, lay)
    if key_value is not None and type(result) is type(key_value) and result == key_value:
        return RESULT_VALUE
    return RESULT_OTHER


def _encode_evicted(keys: list, lay: Layout) -> int:
    """The bit mask of the evicted keys' slots, if the list names distinct keys of the layout
    oldest first; RESULT_OTHER otherwise."""
    slots = [lay.slot_keys.index(k) if k in lay.slot_keys and k is not None else -1 for k in keys]
    ranks = [lay.pre[PRE_SLOTS + 6 * s + 5] for s in slots]
    if -1 in slots or len(set(slots)) != len(slots) or ranks != sorted(ranks):
        return RESULT_OTHER
    return RESULT_EVICTED + sum(1 << s for s in slots)


def encode_snapshot(snapshot: tuple, lay: Layout) -> tuple[int, ...]:
    """Per slot of the layout: present, ready, nbytes, refcount, retain, recency position (-1 if
    absent); then 1 if the snapshot holds a key outside the layout, else 0."""
    by_key = {e.key: (i, e) for i, e in enumerate(snapshot)}
    after: list[int] = []
    for key in lay.slot_keys:
        found = by_key.pop(key, None) if key is not None else None
        if found is None:
            after += [0, 0, 0, 0, 0, -1]
        else:
            position, e = found
            after += [1, int(e.state is READY), e.nbytes, e.refcount, int(e.retain), position]
    after.append(int(bool(by_key)))
    return tuple(after)



def expected_result(outcome: BranchOutcome, removed_mask: Any) -> Any:
    """The result code the spec must return when `outcome` applies."""
    if outcome.error is not None:
        return RESULT_OF_ERROR
    head = outcome.name.split("/")[0]
    if outcome.operation == "acquire":
        return RESULT_ACQUIRED + ACQUIRED_ORDER.index(Acquired[head])
    if head in ("True", "False"):
        return int(head == "True")
    if head == "evicted":
        return RESULT_EVICTED + removed_mask
    if head == "value":
        return RESULT_VALUE
    if head == "None":
        return RESULT_NONE
    raise ValueError(f"no result for outcome {outcome.operation} -> {outcome.name}")
