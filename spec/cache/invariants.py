"""The invariants I1-I6 as named predicates in one table.

Every predicate judges one `Step`: the snapshot before an operation, the snapshot after it, and
whether it raised. The state invariants (I1-I4) look only at `after`; I5 and I6 compare the two.
The checker evaluates the table after every step, the prover proves the same names, and
docs/invariants.md is generated from it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.operations import METHOD_OPERATIONS
from cacheproof.spec.cache.types import EntryState, Snapshot

EVICTING_OPERATIONS = ("commit", "put", "evict")
"""Operations that may evict idle entries to make room (under the contract's semantics)."""


def evicting_operations(semantics: Semantics = CONTRACT) -> tuple[str, ...]:
    """The operations that may evict idle entries: where eviction happens at reservation time,
    reserve and acquire evict and commit never does."""
    if semantics.eviction_time == "reservation":
        return ("reserve", "acquire", "put", "evict")
    return EVICTING_OPERATIONS


class Step(NamedTuple):
    """One operation as the invariants see it."""

    operation: str | None  # None when judging a state on its own
    capacity_bytes: int
    before: Snapshot
    after: Snapshot
    raised: bool


class Invariant(NamedTuple):
    """A named predicate over a `Step`, with the rule in words, `touched_by`: the operations that
    change what it constrains in the direction that could break it, and `witness`: for a step that
    breaks it, the concrete values that do, in words ("key 3 is RESERVED with refcount 0")."""

    name: str
    rule: str
    holds: Callable[[Step], bool]
    touched_by: tuple[str, ...]
    witness: Callable[[Step], str]


class InvariantViolation(AssertionError):
    """A cache (or the spec itself) broke a named invariant. This is a bug, not a usage error."""


def _reserved_bytes(snapshot: Snapshot) -> int:
    """The bytes of referenced RESERVED entries (a kept abandoned reservation's bytes are idle)."""
    return sum(e.nbytes for e in snapshot if e.state is EntryState.RESERVED and e.refcount > 0)


def _ready_bytes(snapshot: Snapshot) -> int:
    return sum(e.nbytes for e in snapshot if e.state is EntryState.READY)


def _pinned_bytes(snapshot: Snapshot) -> int:
    return sum(e.nbytes for e in snapshot if e.state is EntryState.READY and e.refcount > 0)


def _is_idle(entry) -> bool:
    return entry.state is EntryState.READY and entry.refcount == 0


def _protected_fit(step: Step) -> bool:
    return _reserved_bytes(step.after) + _pinned_bytes(step.after) <= step.capacity_bytes


def _ready_fit(step: Step) -> bool:
    return _ready_bytes(step.after) <= step.capacity_bytes


def _reservations_referenced(step: Step) -> bool:
    return all(e.refcount >= 1 for e in step.after if e.state is EntryState.RESERVED)


def _transients_referenced(step: Step) -> bool:
    return all(e.refcount >= 1 for e in step.after if e.state is EntryState.READY and not e.retain)


def _only_idle_evicted_oldest_first(step: Step) -> bool:
    after_keys = {e.key for e in step.after}
    removed = [e for e in step.before if e.key not in after_keys]
    if step.operation in EVICTING_OPERATIONS:
        oldest_idle = [e for e in step.before if _is_idle(e)][: len(removed)]
        if removed != oldest_idle:
            return False
    elif step.operation != "release" and any(e.state is EntryState.RESERVED for e in removed):
        return False
    surviving = {e.key: e for e in step.after}
    return all(
        e.key not in surviving or surviving[e.key].nbytes == e.nbytes
        for e in step.before
        if e.state is EntryState.RESERVED
    )


def _raise_changes_nothing(step: Step) -> bool:
    return not step.raised or step.before == step.after


def _why_protected(step: Step) -> str:
    reserved, pinned = _reserved_bytes(step.after), _pinned_bytes(step.after)
    return (f"reserved {reserved} + in use {pinned} = {reserved + pinned} bytes, over the capacity of "
            f"{step.capacity_bytes}")


def _why_ready(step: Step) -> str:
    return f"ready {_ready_bytes(step.after)} bytes, over the capacity of {step.capacity_bytes}"


def _why_reservation(step: Step) -> str:
    entry = next(e for e in step.after if e.state is EntryState.RESERVED and not e.refcount >= 1)
    return f"key {entry.key!r} is RESERVED with refcount {entry.refcount!r}"


def _why_transient(step: Step) -> str:
    entry = next(e for e in step.after if e.state is EntryState.READY and not e.retain and not e.refcount >= 1)
    return f"key {entry.key!r} is READY with retain=False and refcount {entry.refcount!r}"


def _why_evicted(step: Step) -> str:
    after_keys = {e.key for e in step.after}
    removed = [e for e in step.before if e.key not in after_keys]
    surviving = {e.key: e for e in step.after}
    for entry in step.before:
        if entry.state is EntryState.RESERVED and entry.key in surviving and surviving[entry.key].nbytes != entry.nbytes:
            return (f"the RESERVED key {entry.key!r} went from {entry.nbytes} to "
                    f"{surviving[entry.key].nbytes} bytes")
    reserved = [e.key for e in removed if e.state is EntryState.RESERVED]
    if reserved:
        return f"{step.operation} removed the RESERVED key {reserved[0]!r}"
    in_use = [e for e in removed if not _is_idle(e)]
    if in_use and step.operation in EVICTING_OPERATIONS:
        return f"{step.operation} evicted key {in_use[0].key!r}, in use (refcount {in_use[0].refcount})"
    oldest = [e.key for e in step.before if _is_idle(e)][: len(removed)]
    return (f"{step.operation} removed keys {[e.key for e in removed]!r} where the oldest idle ones are "
            f"{oldest!r}")


def _why_raise(step: Step) -> str:
    return f"{step.operation or 'the call'} raised and changed the entries (before {len(step.before)}, after {len(step.after)})"


_ALL_OPERATIONS = METHOD_OPERATIONS

INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "I1",
        "protected_bytes <= capacity_bytes (reservations and in-use entries always fit together)",
        _protected_fit,
        ("reserve", "acquire"),
        _why_protected,
    ),
    Invariant(
        "I2",
        "ready_bytes <= capacity_bytes",
        _ready_fit,
        ("commit", "put"),
        _why_ready,
    ),
    Invariant(
        "I3",
        "a RESERVED entry has refcount >= 1",
        _reservations_referenced,
        ("reserve", "acquire", "release"),
        _why_reservation,
    ),
    Invariant(
        "I4",
        "a READY entry with retain=False has refcount >= 1 (transient entries vanish at last release)",
        _transients_referenced,
        ("commit", "release"),
        _why_transient,
    ),
    Invariant(
        "I5",
        "only READY entries with refcount 0 are evicted, oldest first; a RESERVED entry is never "
        "read, replaced or evicted",
        _only_idle_evicted_oldest_first,
        ("commit", "put", "evict", "pop", "clear"),
        _why_evicted,
    ),
    Invariant(
        "I6",
        "an operation that raises changes nothing (entries, order, counters)",
        _raise_changes_nothing,
        _ALL_OPERATIONS,
        _why_raise,
    ),
)

INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in INVARIANTS}


class Waiver(NamedTuple):
    """An invariant that does not hold under one option (`field` = `value` of `Semantics`), and why.

    `cacheproof prove` still proves it under that option and must find a counterexample (it
    reports "does not hold under field=value" with it); a waiver the proofs cannot confirm, or an
    invariant broken under an option without a waiver, fails the proof.
    """

    field: str
    value: object
    invariant: str
    reason: str

    @property
    def option(self) -> str:
        return f"{self.field}={str(self.value).lower()}"


WAIVERS: tuple[Waiver, ...] = (
    Waiver(
        "put_present",
        "replace",
        "I5",
        "put of a present idle key drops the old entry first, then evicts the others oldest first; when the "
        "replaced entry was older than one it evicts, the evicted entries are not the oldest idle ones (the "
        "replaced key is still present)",
    ),
    Waiver("clear_busy", "drop", "I5", "clear drops RESERVED and in-use entries too"),
    Waiver("abandoned_reservation", "kept", "I3", "an abandoned reservation stays, RESERVED with refcount 0"),
    Waiver("abandoned_reservation", "kept", "I5", "a kept abandoned reservation is evicted like an idle entry"),
)
"""Every (option, invariant) pair that does not hold; every other invariant holds under every
option (docs/invariants.md renders this table with the proofs' verdicts)."""


def waivers(semantics: Semantics = CONTRACT) -> dict[str, list[Waiver]]:
    """The waived invariants under `semantics`, by name: the waivers of the options it sets."""
    found: dict[str, list[Waiver]] = {}
    for waiver in WAIVERS:
        value = getattr(semantics, waiver.field)
        if value == waiver.value and type(value) is type(waiver.value):
            found.setdefault(waiver.invariant, []).append(waiver)
    return found


def invariants_under(semantics: Semantics = CONTRACT) -> tuple[Invariant, ...]:
    """The invariants that hold under `semantics`, in table order."""
    waived = waivers(semantics)
    return tuple(invariant for invariant in INVARIANTS if invariant.name not in waived)


def broken_invariants(step: Step, semantics: Semantics = CONTRACT) -> list[Invariant]:
    """The invariants (of those that hold under `semantics`) that `step` breaks, in table order."""
    return [invariant for invariant in invariants_under(semantics) if not invariant.holds(step)]


def check_step(step: Step, semantics: Semantics = CONTRACT) -> None:
    """Raise `InvariantViolation` naming the first invariant that `step` breaks (of those that
    hold under `semantics`)."""
    for invariant in broken_invariants(step, semantics):
        raise InvariantViolation(
            f"{invariant.name} broken by {step.operation or 'the state'}: {invariant.rule}\n"
            f"  before: {step.before}\n  after:  {step.after}"
        )


def check_state(capacity_bytes: int, snapshot: Snapshot, semantics: Semantics = CONTRACT) -> None:
    """Raise `InvariantViolation` if the state breaks I1-I4 (those that hold under `semantics`)."""
    check_step(Step(None, capacity_bytes, snapshot, snapshot, False), semantics)
