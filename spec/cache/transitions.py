"""The lifecycle of one key as a transition table over four abstract states (plain data).

A key is ABSENT, RESERVED, READY_IN_USE (READY, refcount > 0) or READY_IDLE (READY, refcount 0).
Each `Transition` is one outcome of one operation as seen by one key: where the key was, the
guard that selects this outcome, where the key is afterwards and what the operation returned or
raised. Edges with `bystander=True` are side effects on a key the operation does not name:
another key's commit or put evicting this idle entry. Every other operation leaves the state of
keys it does not name unchanged.

Where a key lands is not written here by hand: the target of every edge that changes a key's
refcount or state is computed from `steps` (the per-entry steps the cache spec (cache_spec.py) and the prover run),
and so is which states eviction and pop may remove, so the table and docs/lifecycle.md cannot
drift from the spec's steps (`transition_table()` builds the table again after a step changes).

Out of scope: the argument checks (`InvalidArgumentError`, `TooLargeError`). They come before
any guard, in every state, and change nothing; CONTRACT.md lists them.
docs/lifecycle.md is generated from this table; model_tests/test_transitions.py runs every
edge on the cache spec (cache_spec.py).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from cacheproof.spec.cache import steps
from cacheproof.spec.cache.operations import METHOD_OPERATIONS
from cacheproof.spec.cache.types import EntryState, EntryView

OPERATIONS: tuple[str, ...] = METHOD_OPERATIONS
"""Every state-changing or state-reading operation of the contract, in the operation table's order."""


class AbstractState(enum.Enum):
    """Where one key is in its lifecycle."""

    ABSENT = "ABSENT"  # no entry
    RESERVED = "RESERVED"  # space claimed, value not yet committed; refcount >= 1
    READY_IN_USE = "READY_IN_USE"  # holds its value, refcount > 0: never evicted
    READY_IDLE = "READY_IDLE"  # holds its value, refcount 0: evictable, oldest first


class Guard(NamedTuple):
    """The condition that selects an edge: in words, and the `rules` function it uses, if any."""

    words: str
    rule: str | None = None  # e.g. "rules.reservation_fits" or "not rules.reservation_fits"


class Transition(NamedTuple):
    """One outcome of `operation` for a key in `source`: it moves to `target` and yields `result`.

    `result` is "True", "False", "None", an `Acquired` member name, "the value", "evicted keys"
    (with or without this key, where that matters) or "raises <ErrorName>".
    """

    source: AbstractState
    operation: str
    guard: Guard
    target: AbstractState
    result: str
    bystander: bool = False  # True: the operation names another key and evicts this one

    @property
    def is_error(self) -> bool:
        """An error edge: the operation raised and, by I6, the state is unchanged."""
        return self.result.startswith("raises ")


def abstract_state(entry: EntryView | None) -> AbstractState:
    """The abstract state of a key from its snapshot entry (None when the key is absent)."""
    if entry is None:
        return AbstractState.ABSENT
    if entry.state is EntryState.RESERVED:
        return AbstractState.RESERVED
    return AbstractState.READY_IN_USE if entry.refcount > 0 else AbstractState.READY_IDLE


_ABSENT = AbstractState.ABSENT
_RESERVED = AbstractState.RESERVED
_IN_USE = AbstractState.READY_IN_USE
_IDLE = AbstractState.READY_IDLE
_PRESENT = (_RESERVED, _IN_USE, _IDLE)

_FITS = Guard("protected bytes plus nbytes fit the capacity", "rules.reservation_fits")
_DOES_NOT_FIT = Guard("protected bytes plus nbytes exceed the capacity", "not rules.reservation_fits")
_AGREES = "nbytes and retain agree with the entry"
_CONFLICTS = Guard("nbytes or retain differ from the entry's")
_ROOM = Guard("evicting every idle entry makes room", "rules.eviction_can_make_room")
_NO_ROOM = Guard("evicting every idle entry is not enough", "not rules.eviction_can_make_room")
_KEY_PRESENT = Guard("the key is present")
_ALWAYS = Guard("always")
_EVICTED = "this entry is among the oldest idle entries, evicted while rules.has_room does not hold"
_NOT_BUSY = "no entry is reserved or in use"
_BUSY = Guard("some entry is reserved or in use")

_REFCOUNT = {_RESERVED: 1, _IN_USE: 1, _IDLE: 0}
"""A refcount each present state holds (RESERVED and READY_IN_USE: any >= 1)."""


def landing_state(ready: bool, refcount: int) -> AbstractState:
    """The abstract state of a present entry: RESERVED, or READY idle by `steps.is_idle`, or in use."""
    if not ready:
        return _RESERVED
    return _IDLE if steps.is_idle(ready, refcount) else _IN_USE


def _after_acquire(source: AbstractState) -> AbstractState:
    return landing_state(source is not _RESERVED, steps.acquired(_REFCOUNT[source]))


def _after_release(source: AbstractState, refcount: int, retain: bool) -> AbstractState:
    """Where a release of an entry with `refcount` references lands, by `steps`."""
    ready = source is not _RESERVED
    left = steps.released(refcount)
    if not steps.is_referenced(left) and steps.removed_at_last_release(ready, retain):
        return _ABSENT
    return landing_state(ready, left)


def _evictable() -> tuple[AbstractState, ...]:
    """The present states eviction removes (`steps.is_idle`)."""
    return tuple(state for state in _PRESENT if steps.is_idle(state is not _RESERVED, _REFCOUNT[state]))


def _poppable(state: AbstractState) -> bool:
    """pop removes a READY entry nobody references (`steps.is_referenced`)."""
    return state is not _RESERVED and not steps.is_referenced(_REFCOUNT[state])


def _reserve() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "reserve", _FITS, landing_state(False, steps.RESERVATION_REFCOUNT), "True"),
        Transition(_ABSENT, "reserve", _DOES_NOT_FIT, _ABSENT, "False"),
        *(Transition(state, "reserve", _KEY_PRESENT, state, "raises WrongStateError") for state in _PRESENT),
    )


def _acquire() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "acquire", _FITS, landing_state(False, steps.RESERVATION_REFCOUNT), "NEW_RESERVATION"),
        Transition(_ABSENT, "acquire", _DOES_NOT_FIT, _ABSENT, "BLOCKED"),
        Transition(_RESERVED, "acquire", Guard(_AGREES), _after_acquire(_RESERVED), "RESERVATION_HIT"),
        Transition(_IN_USE, "acquire", Guard(_AGREES), _after_acquire(_IN_USE), "READY_HIT"),
        Transition(
            _IDLE, "acquire", Guard(f"{_AGREES}, and protected bytes plus nbytes fit", _FITS.rule), _after_acquire(_IDLE),
            "READY_HIT",
        ),
        Transition(
            _IDLE, "acquire", Guard(f"{_AGREES}, but protected bytes plus nbytes exceed", _DOES_NOT_FIT.rule), _IDLE, "BLOCKED"
        ),
        *(Transition(state, "acquire", _CONFLICTS, state, "raises ConflictError") for state in _PRESENT),
    )


def _commit() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "commit", _ALWAYS, _ABSENT, "raises UnknownKeyError"),
        Transition(
            _RESERVED,
            "commit",
            Guard("the value's size equals nbytes"),
            landing_state(True, _REFCOUNT[_RESERVED]),
            "evicted keys",
        ),
        Transition(_RESERVED, "commit", Guard("the value's size differs from nbytes"), _RESERVED, "raises ConflictError"),
        Transition(_IN_USE, "commit", _ALWAYS, _IN_USE, "raises WrongStateError"),
        Transition(_IDLE, "commit", _ALWAYS, _IDLE, "raises WrongStateError"),
        *(
            Transition(
                state, "commit", Guard(f"another key's commit, and {_EVICTED}", "not rules.has_room"), _ABSENT,
                "evicted keys, with this key", True,
            )
            for state in _evictable()
        ),
    )


def _put() -> tuple[Transition, ...]:
    return (
        Transition(
            _ABSENT, "put", Guard("pinned bytes plus the value's size fit", _ROOM.rule), landing_state(True, steps.PUT_REFCOUNT),
            "True",
        ),
        Transition(_ABSENT, "put", Guard("pinned bytes plus the value's size exceed", _NO_ROOM.rule), _ABSENT, "False"),
        *(Transition(state, "put", _KEY_PRESENT, state, "raises WrongStateError") for state in _PRESENT),
        *(
            Transition(state, "put", Guard(f"another key's put succeeds, and {_EVICTED}", "not rules.has_room"), _ABSENT, "True", True)
            for state in _evictable()
        ),
    )


def _get() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "get", _ALWAYS, _ABSENT, "raises UnknownKeyError"),
        Transition(_RESERVED, "get", _ALWAYS, _RESERVED, "raises WrongStateError"),
        Transition(_IN_USE, "get", _ALWAYS, _IN_USE, "the value"),
        Transition(_IDLE, "get", _ALWAYS, _IDLE, "the value"),
    )


def _release() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "release", _ALWAYS, _ABSENT, "raises UnknownKeyError"),
        Transition(_RESERVED, "release", Guard("refcount >= 2"), _after_release(_RESERVED, 2, True), "False"),
        Transition(
            _RESERVED, "release", Guard("last reference, reservation abandoned"), _after_release(_RESERVED, 1, True), "True"
        ),
        Transition(_IN_USE, "release", Guard("refcount >= 2"), _after_release(_IN_USE, 2, True), "False"),
        Transition(_IN_USE, "release", Guard("last reference, retain=True"), _after_release(_IN_USE, 1, True), "False"),
        Transition(_IN_USE, "release", Guard("last reference, retain=False"), _after_release(_IN_USE, 1, False), "True"),
        Transition(_IDLE, "release", Guard("refcount 0: no reference to release"), _IDLE, "raises WrongStateError"),
    )


def _evict() -> tuple[Transition, ...]:
    evictable = _evictable()
    return (
        *(
            edge
            for state in evictable
            for edge in (
                Transition(
                    state, "evict",
                    Guard(f"{_ROOM.words} (rules.eviction_can_make_room), and {_EVICTED}", "not rules.has_room"),
                    _ABSENT, "evicted keys, with this key",
                ),
                Transition(
                    state, "evict",
                    Guard(
                        f"{_ROOM.words} (rules.eviction_can_make_room), and room is made before this entry's turn",
                        "rules.has_room",
                    ),
                    state, "evicted keys, without this key",
                ),
            )
        ),
        *(
            Transition(state, "evict", _ROOM, state, "evicted keys, without this key")
            for state in (_ABSENT, *_PRESENT)
            if state not in evictable
        ),
        *(Transition(state, "evict", _NO_ROOM, state, "raises CapacityError") for state in (_ABSENT, *_PRESENT)),
    )


def _pop() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "pop", _ALWAYS, _ABSENT, "raises UnknownKeyError"),
        *(
            Transition(state, "pop", _ALWAYS, _ABSENT, "the value") if _poppable(state)
            else Transition(state, "pop", _ALWAYS, state, "raises WrongStateError")
            for state in _PRESENT
        ),
    )


def _clear() -> tuple[Transition, ...]:
    return (
        Transition(_ABSENT, "clear", Guard(_NOT_BUSY), _ABSENT, "None"),
        Transition(_IDLE, "clear", Guard(_NOT_BUSY), _ABSENT, "None"),
        Transition(_ABSENT, "clear", _BUSY, _ABSENT, "raises WrongStateError"),
        Transition(_IDLE, "clear", _BUSY, _IDLE, "raises WrongStateError"),
        Transition(_RESERVED, "clear", _ALWAYS, _RESERVED, "raises WrongStateError"),
        Transition(_IN_USE, "clear", _ALWAYS, _IN_USE, "raises WrongStateError"),
    )


def transition_table() -> tuple[Transition, ...]:
    """Every edge of the lifecycle, grouped by operation in OPERATIONS order, built from `steps` as
    they are now."""
    return (*_reserve(), *_acquire(), *_commit(), *_put(), *_get(), *_release(), *_evict(), *_pop(), *_clear())


TRANSITIONS: tuple[Transition, ...] = transition_table()
"""Every edge of the lifecycle, grouped by operation in OPERATIONS order."""
