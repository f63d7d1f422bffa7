"""The per-entry model: a cache of N symbolic slots, and the induction proofs of I1-I6 over it.

Each slot is one possible entry: whether it is present, READY or RESERVED, its nbytes, refcount,
retain flag and recency rank (larger is newer; a `clock` above every rank gives the next
"newest"). Slots are unrolled into plain z3 terms, one set per slot: no arrays, no quantifiers.

The key an operation names is slot 0. This loses nothing: slots are interchangeable (recency is
the symbolic rank, not the slot index), so any state and key can be renamed so that the key is
slot 0. Guards come from `rules` and what a step does to an entry (refcount changes, idle and
last-release tests, the fields of a new entry) from `steps`, both called as `rules.<name>` /
`steps.<name>` at proof time, so a patched rule or step is the one proved. The byte counts the
guards read are summed from the slots. The invariants are stated on their own, without `steps`,
so a wrong step cannot weaken what is proved.

Every transition takes the `Semantics` the spec runs (spec/semantics.py; the contract by
default) and branches on it in plain Python, as `CacheSpec` does: which check raises or returns,
when eviction happens (`rules.eviction_demand`), which call moves an entry to newest
(`Semantics.refreshes`), a new reservation's retain flag (`steps.reservation_retain`). The
refinement check runs under the same semantics, so a branch stated here differently from the
spec is a disagreement.

Out of scope: caches with more than N entries (a reservation of a new key needs a free slot),
values (only their sizes), and the hit/miss counters.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from cacheproof.check.calls import Call
from cacheproof.prove.counterexample import Counterexample, concrete_counterexample, value_recipe
from cacheproof.prove.induction import Z3_LOGIC, Goal, Outcome, ProofResult, check_goals, mark_waived, value_of
from cacheproof.spec import rules, steps
from cacheproof.spec.invariants import evicting_operations, waivers
from cacheproof.spec.semantics import CONTRACT, Semantics
from cacheproof.spec.types import EntryState, EntryView

MODEL = "entries"
KEY_SLOT = 0
"""The slot of the key an operation names."""

OPERATIONS = ("reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear")


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


def _is_reserved(s: Slot) -> Any:
    return z3.And(s.present, z3.Not(s.ready))


def _is_pinned(s: Slot) -> Any:
    return z3.And(s.present, s.ready, s.refcount > 0)


def _is_idle(s: Slot) -> Any:
    return z3.And(s.present, s.ready, s.refcount == 0)


def _is_evictable(s: Slot) -> Any:
    """An entry the spec's eviction walk may remove: `steps.is_idle`."""
    return z3.And(s.present, steps.is_idle(s.ready, s.refcount, Z3_LOGIC))


def _sum_where(cache: SlotCache, selected: Callable[[Slot], Any]) -> Any:
    return z3.Sum([z3.If(selected(s), s.nbytes, 0) for s in cache.slots])


def cache_bytes(cache: SlotCache) -> rules.Bytes:
    """The byte counts of a slot cache, as the spec's counters hold them."""
    return rules.Bytes(
        cache.capacity,
        _sum_where(cache, _is_reserved),
        _sum_where(cache, _is_pinned),
        _sum_where(cache, _is_idle),
    )


# Invariants ---------------------------------------------------------------------------------


def well_formed(cache: SlotCache) -> Any:
    """WF: capacity >= 1; every entry has nbytes >= 1 and refcount >= 0; the slots' ranks are
    distinct and below the clock.

    Not a contract invariant, but I1/I2 are not inductive without it. Ranks of absent slots are
    kept distinct too, which loses no state (any cache can be given such ranks) and keeps the
    recency facts free of case splits on presence.
    """
    facts = [cache.capacity >= 1]
    for s in cache.slots:
        facts.append(s.rank < cache.clock)
        facts.append(z3.Implies(s.present, z3.And(s.nbytes >= 1, s.refcount >= 0)))
    if len(cache.slots) > 1:
        facts.append(z3.Distinct([s.rank for s in cache.slots]))
    return z3.And(facts)


def state_invariants(cache: SlotCache, semantics: Semantics = CONTRACT) -> dict[str, Any]:
    """I1-I4 and WF over a slot cache, by name; R too where eviction happens at reservation time."""
    b = cache_bytes(cache)
    return {
        "WF": well_formed(cache),
        **reservation_counts_as_used(b, semantics),
        "I1": rules.protected(b) <= cache.capacity,
        "I2": rules.ready(b) <= cache.capacity,
        "I3": z3.And([z3.Implies(_is_reserved(s), s.refcount >= 1) for s in cache.slots]),
        "I4": z3.And(
            [z3.Implies(z3.And(s.present, s.ready, z3.Not(s.retain)), s.refcount >= 1) for s in cache.slots]
        ),
    }


def reservation_counts_as_used(b: rules.Bytes, semantics: Semantics) -> dict[str, Any]:
    """R, where eviction happens at reservation time: ready + reserved bytes fit the capacity (a
    reservation evicts until its bytes would fit, so commit needs no eviction). Not a contract
    invariant (under the contract a reservation does not make room), but I2 after commit is not
    inductive without it there."""
    if semantics.eviction_time != "reservation":
        return {}
    return {"R": rules.ready(b) + b.reserved <= b.capacity}


def invariant(cache: SlotCache, semantics: Semantics = CONTRACT) -> Any:
    """Inv: WF and I1-I4 (and R where eviction happens at reservation time)."""
    return z3.And(list(state_invariants(cache, semantics).values()))


def older_idle_pairs(cache: SlotCache) -> list[list[Any]]:
    """[i][j]: slot j is an idle entry older than slot i (False on the diagonal)."""
    idle = [_is_idle(s) for s in cache.slots]
    return [
        [z3.And(idle[j], t.rank < s.rank) if j != i else z3.BoolVal(False) for j, t in enumerate(cache.slots)]
        for i, s in enumerate(cache.slots)
    ]


def only_idle_removed_oldest_first(
    operation: str,
    before: SlotCache,
    after: SlotCache,
    older_idle: list[list[Any]] | None = None,
    semantics: Semantics = CONTRACT,
) -> Any:
    """I5 as a step property of slots (`older_idle`: `older_idle_pairs(before)`, if already built).

    Every entry that a step removes was idle (READY, refcount 0), except the key's own entry on
    its last release; under the evicting operations (commit/put/evict, or reserve/acquire/put/evict
    where eviction happens at reservation time) every idle entry older than a removed one was
    removed too (oldest first); a RESERVED entry that survives keeps its nbytes and stays
    RESERVED unless commit names it.
    """
    older_idle = older_idle_pairs(before) if older_idle is None else older_idle
    removed = [z3.And(s.present, z3.Not(t.present)) for s, t in zip(before.slots, after.slots)]
    facts = []
    for i, (s, t) in enumerate(zip(before.slots, after.slots)):
        allowed = s.refcount == 1 if operation == "release" and i == KEY_SLOT else _is_idle(s)
        facts.append(z3.Implies(removed[i], allowed))
        if operation in evicting_operations(semantics):
            facts.extend(
                z3.Or(z3.Not(removed[i]), z3.Not(older_idle[i][j]), removed[j])
                for j in range(len(before.slots))
                if j != i
            )
        survives_reserved = z3.And(_is_reserved(s), t.present)
        keeps = t.nbytes == s.nbytes if operation == "commit" and i == KEY_SLOT else z3.And(t.nbytes == s.nbytes, z3.Not(t.ready))
        facts.append(z3.Implies(survives_reserved, keeps))
    return z3.And(facts)


def unchanged(before: SlotCache, after: SlotCache) -> Any:
    """I6: the same entries with the same fields and ranks (so the same recency order)."""
    facts = [before.capacity == after.capacity, before.clock == after.clock]
    for s, t in zip(before.slots, after.slots):
        facts.append(s.present == t.present)
        same = z3.And(s.ready == t.ready, s.nbytes == t.nbytes, s.refcount == t.refcount, s.retain == t.retain, s.rank == t.rank)
        facts.append(z3.Implies(s.present, same))
    return z3.And(facts)


# Transitions --------------------------------------------------------------------------------


def _with_key(cache: SlotCache, slot: Slot, newest: bool) -> SlotCache:
    slots = (slot._replace(rank=cache.clock) if newest else slot,) + cache.slots[1:]
    return cache._replace(clock=cache.clock + 1 if newest else cache.clock, slots=slots)


def _without(cache: SlotCache, removed: list[Any]) -> SlotCache:
    slots = tuple(s._replace(present=z3.And(s.present, z3.Not(gone))) for s, gone in zip(cache.slots, removed))
    return cache._replace(slots=slots)


def eviction(cache: SlotCache, incoming: Any, frontier: Any) -> tuple[list[Any], Any, Callable[[], Any]]:
    """Which slots `_evict_until_room(incoming)` evicts: (evicted flags, condition, exactness).

    The spec walks the entries oldest first and stops as soon as `rules.has_room`. Here the idle
    slots older than a fresh `frontier` rank are evicted, where the condition says that below
    the frontier there is room or no idle slot is left above it. That over-approximates the spec
    (it may also evict more than needed), which is sound for the proofs. The exactness
    constraints, built on demand, add that every evicted slot was still needed (the idle bytes
    older than it did not make room): with `has_room` monotone in the evicted bytes (proved in
    the aggregate model) that is exactly the spec's choice.
    """
    b = cache_bytes(cache)
    idle = [_is_evictable(s) for s in cache.slots]
    evicted = [z3.And(idle[i], s.rank < frontier) for i, s in enumerate(cache.slots)]
    evicted_bytes = z3.Sum([z3.If(gone, s.nbytes, 0) for s, gone in zip(cache.slots, evicted)])
    ran_out = z3.And([z3.Implies(idle[i], s.rank < frontier) for i, s in enumerate(cache.slots)])
    stops = z3.Or(rules.has_room(rules.after_evict(b, evicted_bytes), incoming), ran_out)

    def every_eviction_needed() -> Any:
        needed = []
        for i, s in enumerate(cache.slots):
            older_idle = z3.Sum(
                [z3.If(z3.And(idle[j], t.rank < s.rank), t.nbytes, 0) for j, t in enumerate(cache.slots) if j != i]
            )
            no_room_yet = z3.Not(rules.has_room(rules.after_evict(b, older_idle), incoming))
            needed.append(z3.Implies(evicted[i], no_room_yet))
        return z3.And(needed)

    return evicted, stops, every_eviction_needed


def _evict(cache: SlotCache, incoming: Any, semantics: Semantics) -> tuple[SlotCache, Any, Callable[[], Any]]:
    """`_evict_until_room(incoming)`: room for `rules.eviction_demand` (reserved bytes count as
    used where eviction happens at reservation time)."""
    demand = rules.eviction_demand(cache_bytes(cache), incoming, semantics.eviction_time)
    evicted, stops, exact = eviction(cache, demand, z3.Int("eviction_frontier"))
    return _without(cache, evicted), stops, exact


class Check(NamedTuple):
    """One of an operation's checks, in the spec's order: when it applies, the outcome's name and
    whether it raises ("Error/detail" names the class Error) or returns, changing nothing."""

    name: str
    condition: Any
    raises: bool = True


def _checks(operation: str, cache: SlotCache, checks: list[Check], domain: Any) -> tuple[list[Outcome], Any]:
    """The outcomes of checks made in order, within `domain` (the calls the semantics allow);
    returns them and the condition that none applies."""
    outcomes, none_yet = [], domain
    for check in checks:
        error = check.name.split("/")[0] if check.raises else None
        outcomes.append(Outcome(operation, check.name, z3.And(none_yet, check.condition), cache, error))
        none_yet = z3.And(none_yet, z3.Not(check.condition))
    return outcomes, none_yet


def _argument_checks(semantics: Semantics, checks: list[Check]) -> list[Check]:
    """Argument checks are made when arguments are checked; trusted, those calls are outside the
    contract (see `_domain`)."""
    return checks if semantics.argument_checks == "checked" else []


def _domain(semantics: Semantics, allowed: Any) -> Any:
    """Trusted arguments: only the calls a caller may make (`allowed`) are modelled."""
    return z3.BoolVal(True) if semantics.argument_checks == "checked" else allowed


def _reservation(cache: SlotCache, p: Parameters, semantics: Semantics) -> Slot:
    retain = steps.reservation_retain(p.retain, semantics.transient_entries)
    return Slot(
        z3.BoolVal(True),
        z3.BoolVal(False),
        p.nbytes,
        z3.IntVal(steps.RESERVATION_REFCOUNT),
        z3.BoolVal(retain) if isinstance(retain, bool) else retain,
        cache.clock,
    )


def _new_reservation(
    operation: str, name: str, cache: SlotCache, p: Parameters, guard: Any, semantics: Semantics
) -> Outcome:
    """A reservation in slot 0; where eviction happens at reservation time, after evicting."""
    if semantics.eviction_time != "reservation":
        return Outcome(operation, name, guard, _with_key(cache, _reservation(cache, p, semantics), newest=True))
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    after = _with_key(evicted, _reservation(cache, p, semantics), newest=True)
    return Outcome(operation, name, z3.And(guard, stops), after, exact=exact)


def _size_checks(semantics: Semantics, b: rules.Bytes, p: Parameters) -> list[Check]:
    return _argument_checks(
        semantics, [Check("InvalidArgumentError", p.nbytes < 1), Check("TooLargeError", rules.is_too_large(b, p.nbytes))]
    )


def _reserve(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    checks = _size_checks(semantics, b, p) + [Check("WrongStateError", key.present)]
    outcomes, valid = _checks("reserve", cache, checks, _domain(semantics, p.nbytes >= 1))
    fits = rules.reservation_fits(b, p.nbytes)
    return outcomes + [
        _new_reservation("reserve", "True", cache, p, z3.And(valid, fits), semantics),
        Outcome("reserve", "False", z3.And(valid, z3.Not(fits)), cache),
    ]


def _acquire(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    outcomes, valid = _checks("acquire", cache, _size_checks(semantics, b, p), _domain(semantics, p.nbytes >= 1))
    absent = z3.And(valid, z3.Not(key.present))
    disagrees = z3.Or(key.nbytes != p.nbytes, key.retain != p.retain)
    if semantics.acquire_conflict == "error":
        outcomes.append(Outcome("acquire", "ConflictError", z3.And(valid, key.present, disagrees), cache, "ConflictError"))
        agreed = z3.And(valid, key.present, z3.Not(disagrees))
    else:  # a hit on the entry as it is
        agreed = z3.And(valid, key.present)
    fits = rules.reservation_fits(b, p.nbytes)
    pin_fits = rules.reservation_fits(b, key.nbytes)
    idle = z3.And(agreed, steps.is_idle(key.ready, key.refcount, Z3_LOGIC))
    referenced = key._replace(refcount=steps.acquired(key.refcount))
    ready_hit = semantics.refreshes("ready_hit")
    return outcomes + [
        _new_reservation("acquire", "NEW_RESERVATION", cache, p, z3.And(absent, fits), semantics),
        Outcome("acquire", "BLOCKED/absent", z3.And(absent, z3.Not(fits)), cache),
        Outcome(
            "acquire",
            "RESERVATION_HIT",
            z3.And(agreed, z3.Not(key.ready)),
            _with_key(cache, referenced, semantics.refreshes("reservation_hit")),
        ),
        Outcome(
            "acquire",
            "READY_HIT/in-use",
            z3.And(agreed, key.ready, z3.Not(steps.is_idle(key.ready, key.refcount, Z3_LOGIC))),
            _with_key(cache, referenced, ready_hit),
        ),
        Outcome("acquire", "READY_HIT/idle", z3.And(idle, pin_fits), _with_key(cache, referenced, ready_hit)),
        Outcome("acquire", "BLOCKED/idle", z3.And(idle, z3.Not(pin_fits)), cache),
    ]


def _commit(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    key = cache.slots[KEY_SLOT]
    checks = _argument_checks(semantics, [Check("InvalidArgumentError", p.nbytes < 1)]) + [
        Check("UnknownKeyError", z3.Not(key.present)),
        Check("WrongStateError", key.ready),
        Check("ConflictError", p.nbytes != key.nbytes),
    ]
    outcomes, valid = _checks("commit", cache, checks, _domain(semantics, p.nbytes >= 1))
    committed = key._replace(ready=z3.BoolVal(True))
    if semantics.eviction_time == "reservation":  # the reservation made the room already
        return outcomes + [Outcome("commit", "evicted", valid, _with_key(cache, committed, newest=True))]
    evicted, stops, exact = _evict(cache, key.nbytes, semantics)
    after = _with_key(evicted, committed, newest=True)
    return outcomes + [Outcome("commit", "evicted", z3.And(valid, stops), after, exact=exact)]


def _put(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    too_large = rules.is_too_large(b, p.nbytes)
    checks = _argument_checks(semantics, [Check("InvalidArgumentError", p.nbytes < 1)])
    checks.append(Check("TooLargeError", too_large) if semantics.put_too_large == "error" else Check("False/too-large", too_large, False))
    if semantics.put_present == "error":
        checks.append(Check("WrongStateError", key.present))
    elif semantics.put_present == "keep":
        checks.append(Check("True/keep", key.present, False))
    else:  # replace: only an idle entry
        checks.append(Check("WrongStateError", z3.And(key.present, z3.Not(steps.is_idle(key.ready, key.refcount, Z3_LOGIC)))))
    outcomes, valid = _checks("put", cache, checks, _domain(semantics, p.nbytes >= 1))
    can = rules.eviction_can_make_room(b, rules.eviction_demand(b, p.nbytes, semantics.eviction_time))
    entry = Slot(
        z3.BoolVal(True), z3.BoolVal(True), p.nbytes, z3.IntVal(steps.PUT_REFCOUNT), z3.BoolVal(steps.PUT_RETAIN), cache.clock
    )
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    outcomes += [
        Outcome("put", "True", z3.And(valid, z3.Not(key.present), can, stops), _with_key(evicted, entry, newest=True), exact=exact),
        Outcome("put", "False", z3.And(valid, z3.Not(can)), cache),
    ]
    if semantics.put_present == "replace":  # the idle entry goes first, as if evicted
        replaced, r_stops, r_exact = _evict(_without(cache, _only_key(cache)), p.nbytes, semantics)
        outcomes.append(
            Outcome("put", "True/replace", z3.And(valid, key.present, can, r_stops), _with_key(replaced, entry, True), exact=r_exact)
        )
    return outcomes


def _get_missing(semantics: Semantics, key: Slot, reserved: str) -> list[Check]:
    """get/pop of an absent or RESERVED key: an error each (`reserved` names the second), or None."""
    if semantics.get_missing == "none":
        return [Check("None", z3.Or(z3.Not(key.present), z3.Not(key.ready)), False)]
    return [Check("UnknownKeyError", z3.Not(key.present)), Check(reserved, z3.Not(key.ready))]


def _get(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    key = cache.slots[KEY_SLOT]
    outcomes, valid = _checks("get", cache, _get_missing(semantics, key, "WrongStateError"), z3.BoolVal(True))
    return outcomes + [Outcome("get", "value", valid, _with_key(cache, key, newest=semantics.refreshes("get")))]


def _release(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    key = cache.slots[KEY_SLOT]
    if semantics.release_missing == "noop":
        checks = [Check("False/noop", z3.Or(z3.Not(key.present), z3.Not(steps.is_referenced(key.refcount))), False)]
    else:
        checks = [
            Check("UnknownKeyError", z3.Not(key.present)),
            Check("WrongStateError", z3.Not(steps.is_referenced(key.refcount))),
        ]
    outcomes, valid = _checks("release", cache, checks, z3.BoolVal(True))
    released = key._replace(refcount=steps.released(key.refcount))
    more = steps.is_referenced(released.refcount)
    last = z3.And(valid, z3.Not(more))
    gone = z3.And(last, steps.removed_at_last_release(key.ready, key.retain, Z3_LOGIC))
    return outcomes + [
        Outcome("release", "False/decrement", z3.And(valid, more), _with_key(cache, released, newest=False)),
        Outcome("release", "True/abandon", z3.And(gone, z3.Not(key.ready)), _without(cache, _only_key(cache))),
        Outcome(
            "release",
            "False/idle",
            z3.And(last, z3.Not(gone)),
            _with_key(cache, released, newest=semantics.refreshes("release")),
        ),
        Outcome("release", "True/transient", z3.And(gone, key.ready), _without(cache, _only_key(cache))),
    ]


def _evict_operation(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    b = cache_bytes(cache)
    checks = _argument_checks(
        semantics, [Check("InvalidArgumentError", p.nbytes < 0), Check("TooLargeError", rules.is_too_large(b, p.nbytes))]
    )
    demand = rules.eviction_demand(b, p.nbytes, semantics.eviction_time)
    checks.append(Check("CapacityError", z3.Not(rules.eviction_can_make_room(b, demand))))
    outcomes, valid = _checks("evict", cache, checks, _domain(semantics, p.nbytes >= 0))
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    return outcomes + [Outcome("evict", "evicted", z3.And(valid, stops), evicted, exact=exact)]


def _pop(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    key = cache.slots[KEY_SLOT]
    checks = _get_missing(semantics, key, "WrongStateError/reserved") + [Check("WrongStateError/in-use", steps.is_referenced(key.refcount))]
    outcomes, valid = _checks("pop", cache, checks, z3.BoolVal(True))
    return outcomes + [Outcome("pop", "value", valid, _without(cache, _only_key(cache)))]


def _clear(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[Outcome]:
    everything = _without(cache, [z3.BoolVal(True)] * len(cache.slots))
    if semantics.clear_busy == "drop":
        return [Outcome("clear", "None", z3.BoolVal(True), everything)]
    busy = z3.Or([z3.And(s.present, steps.is_referenced(s.refcount)) for s in cache.slots])
    outcomes, valid = _checks("clear", cache, [Check("WrongStateError", busy)], z3.BoolVal(True))
    return outcomes + [Outcome("clear", "None", valid, everything)]


def _only_key(cache: SlotCache) -> list[Any]:
    return [z3.BoolVal(i == KEY_SLOT) for i in range(len(cache.slots))]


_TRANSITIONS: dict[str, Callable[[SlotCache, Parameters, Semantics], list[Outcome]]] = {
    "reserve": _reserve,
    "acquire": _acquire,
    "commit": _commit,
    "put": _put,
    "get": _get,
    "release": _release,
    "evict": _evict_operation,
    "pop": _pop,
    "clear": _clear,
}


def outcomes(operation: str, cache: SlotCache, parameters: Parameters, semantics: Semantics = CONTRACT) -> list[Outcome]:
    """Every way `operation` can end from `cache` under `semantics`; exactly one guard holds for
    any state and call of the domain (with trusted arguments: the calls a caller may make)."""
    return _TRANSITIONS[operation](cache, parameters, semantics)


# Proofs ---------------------------------------------------------------------------------------


def frame_lemma(before: SlotCache, after: SlotCache) -> Any:
    """Slots other than the key only ever lose their presence, so each of their byte
    contributions (reserved, pinned, idle) drops by exactly its own nbytes when removed.

    Valid on its own (no assumptions); proved per outcome, then given to the solver as slot-wise
    facts, which turns the byte sums of I1/I2 into linear arithmetic (without it the I2 proof
    after an eviction grows exponentially with the number of slots).
    """
    facts = []
    for i, (s, t) in enumerate(zip(before.slots, after.slots)):
        if i == KEY_SLOT:
            continue
        removed = z3.And(s.present, z3.Not(t.present))
        for in_class in (_is_reserved, _is_pinned, _is_idle):
            contribution_before = z3.If(in_class(s), s.nbytes, 0)
            dropped = z3.If(z3.And(removed, in_class(s)), s.nbytes, 0)
            facts.append(z3.If(in_class(t), t.nbytes, 0) == contribution_before - dropped)
    return z3.And(facts)


def initial_cache(capacity: Any, num_slots: int) -> SlotCache:
    """`CacheSpec(capacity)`: no entry; absent slots get distinct ranks below the clock."""
    absent = Slot(z3.BoolVal(False), z3.BoolVal(False), z3.IntVal(0), z3.IntVal(0), z3.BoolVal(True), z3.IntVal(0))
    return SlotCache(capacity, z3.IntVal(0), tuple(absent._replace(rank=z3.IntVal(-1 - i)) for i in range(num_slots)))


def prove(num_slots: int = 8, semantics: Semantics = CONTRACT) -> list[ProofResult]:
    """Prove Init => Inv, then WF, I1-I5 (and I6 on errors) for every operation and outcome over
    `num_slots` slots under `semantics`, with the frame lemma those proofs use proved first for
    each outcome. An invariant waived under `semantics` is proved all the same; its
    counterexamples are marked with the waiving option (`ProofResult.waived`)."""
    before, parameters = symbolic_cache("", num_slots), symbolic_parameters()
    inductive, older_idle = invariant(before, semantics), older_idle_pairs(before)
    init = Outcome("init", "CacheSpec(capacity)", z3.BoolVal(True), initial_cache(before.capacity, num_slots))
    init_goals = [Goal(name, formula) for name, formula in state_invariants(init.after, semantics).items()]
    results = [
        ProofResult(goal.invariant, "init", init.name, proved, seconds, counterexample, MODEL)
        for goal, proved, seconds, counterexample in check_goals(
            [before.capacity >= 1], init_goals, before.capacity, _explainer(init.after, parameters, init, semantics)
        )
    ]
    for operation in OPERATIONS:
        for outcome in outcomes(operation, before, parameters, semantics):
            explain = _explainer(before, parameters, outcome, semantics)
            frame = frame_lemma(before, outcome.after)
            checks = [
                check_goals([], [Goal("frame", frame)], before.capacity, explain),
                check_goals(
                    [inductive, outcome.guard, frame],
                    _goals(operation, before, outcome, older_idle, semantics),
                    before.capacity,
                    explain,
                    outcome.exact,
                ),
            ]
            results.extend(
                ProofResult(goal.invariant, operation, outcome.name, proved, seconds, counterexample, MODEL)
                for checked in checks
                for goal, proved, seconds, counterexample in checked
            )
    return mark_waived(results, waivers(semantics))


def _goals(
    operation: str, before: SlotCache, outcome: Outcome, older_idle: list[list[Any]], semantics: Semantics
) -> list[Goal]:
    after = outcome.after
    goals = [Goal(name, formula) for name, formula in state_invariants(after, semantics).items()]
    goals.append(Goal("I5", only_idle_removed_oldest_first(operation, before, after, older_idle, semantics)))
    if outcome.error is not None:
        goals.append(Goal("I6", unchanged(before, after)))
    return goals


def _explainer(
    before: SlotCache, parameters: Parameters, outcome: Outcome, semantics: Semantics
) -> Callable[[str, z3.ModelRef], Counterexample]:
    def explain(invariant_name: str, model: z3.ModelRef) -> Counterexample:
        entries = concrete_entries(model, before)
        call = concrete_call(outcome.operation, value_of(model, parameters.nbytes), value_of(model, parameters.retain))
        return concrete_counterexample(
            invariant_name, MODEL, value_of(model, before.capacity), entries, call, outcome.name, semantics
        )

    return explain


def slot_key(index: int) -> str:
    """The concrete key of slot `index`."""
    return f"k{index}"


def concrete_entries(model: z3.ModelRef, cache: SlotCache) -> list[EntryView]:
    """The entries of `cache` under `model`, oldest first."""
    present = [(value_of(model, s.rank), i, s) for i, s in enumerate(cache.slots) if value_of(model, s.present)]
    return [
        EntryView(
            slot_key(i),
            EntryState.READY if value_of(model, s.ready) else EntryState.RESERVED,
            value_of(model, s.refcount),
            value_of(model, s.nbytes),
            value_of(model, s.retain),
        )
        for _, i, s in sorted(present, key=lambda ranked: ranked[:2])
    ]


def concrete_call(operation: str, nbytes: int, retain: bool) -> Call:
    """The concrete call `operation` on slot 0's key with the model's parameters."""
    key = slot_key(KEY_SLOT)
    if operation in ("reserve", "acquire"):
        return Call(operation, (key, nbytes), {"retain": retain})
    if operation in ("commit", "put"):
        return Call(operation, (key, value_recipe(nbytes)), {})
    if operation == "evict":
        return Call(operation, (nbytes,), {})
    if operation in ("clear", "init"):
        return Call("clear", (), {})
    return Call(operation, (key,), {})
