"""The per-entry model's transitions: every way each operation can end from a slot cache.

Rule: guards come from `rules` and what a step does to an entry (refcount changes, idle and
last-release tests, the fields of a new entry) from `steps`, both called as `rules.<name>` /
`steps.<name>` at proof time, so a patched rule or step is the one proved. Every transition takes
the `Semantics` the spec runs (spec/cache/semantics.py; the contract by default) and branches on it in
plain Python, as the spec does: which check raises or returns, when eviction happens
(`rules.eviction_demand`), which call moves an entry to newest (`Semantics.refreshes`), a new
reservation's retain flag (`steps.reservation_retain`). The refinement check runs under the same
semantics, so a branch stated here differently from the spec is a disagreement. For any state and
call of the domain exactly one outcome's guard holds.

Out of scope: caches with more than N entries (a reservation of a new key needs a free slot),
values (only their sizes), and the hit/miss counters.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from cacheproof.prove.cache.slot_cache import (
    KEY_SLOT,
    Parameters,
    Slot,
    SlotCache,
    cache_bytes,
    is_evictable,
)
from cacheproof.prove.induction import Z3_LOGIC, BranchOutcome
from cacheproof.spec.cache import rules, steps
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

OPERATIONS = ("reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear")


def _with_key(cache: SlotCache, slot: Slot, newest: bool) -> SlotCache:
    slots = (slot._replace(rank=cache.clock) if newest else slot,) + cache.slots[1:]
    return cache._replace(clock=cache.clock + 1 if newest else cache.clock, slots=slots)


def _without(cache: SlotCache, removed: list[Any]) -> SlotCache:
    """`cache` less the slots whose `removed` flag holds. A slot whose flag is the constant False
    stays the same object: the proofs skip the facts of a slot an outcome leaves as it was
    (entry_model.py), so a step that touches one key costs one slot's terms, not N."""
    slots = tuple(
        s if z3.is_false(gone) else s._replace(present=z3.And(s.present, z3.Not(gone)))
        for s, gone in zip(cache.slots, removed)
    )
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
    idle = [is_evictable(s) for s in cache.slots]
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


def _checks(operation: str, cache: SlotCache, checks: list[Check], domain: Any) -> tuple[list[BranchOutcome], Any]:
    """The outcomes of checks made in order, within `domain` (the calls the semantics allow);
    returns them and the condition that none applies."""
    outcomes, none_yet = [], domain
    for check in checks:
        error = check.name.split("/")[0] if check.raises else None
        outcomes.append(BranchOutcome(operation, check.name, z3.And(none_yet, check.condition), cache, error))
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
) -> BranchOutcome:
    """A reservation in slot 0; where eviction happens at reservation time, after evicting."""
    if semantics.eviction_time != "reservation":
        return BranchOutcome(operation, name, guard, _with_key(cache, _reservation(cache, p, semantics), newest=True))
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    after = _with_key(evicted, _reservation(cache, p, semantics), newest=True)
    return BranchOutcome(operation, name, z3.And(guard, stops), after, exact=exact)


def _size_checks(semantics: Semantics, b: rules.Bytes, p: Parameters) -> list[Check]:
    return _argument_checks(
        semantics, [Check("InvalidArgumentError", p.nbytes < 1), Check("TooLargeError", rules.is_too_large(b, p.nbytes))]
    )


def _reserve(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    checks = _size_checks(semantics, b, p) + [Check("WrongStateError", key.present)]
    outcomes, valid = _checks("reserve", cache, checks, _domain(semantics, p.nbytes >= 1))
    fits = rules.reservation_fits(b, p.nbytes)
    return outcomes + [
        _new_reservation("reserve", "True", cache, p, z3.And(valid, fits), semantics),
        BranchOutcome("reserve", "False", z3.And(valid, z3.Not(fits)), cache),
    ]


def _acquire(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    outcomes, valid = _checks("acquire", cache, _size_checks(semantics, b, p), _domain(semantics, p.nbytes >= 1))
    absent = z3.And(valid, z3.Not(key.present))
    disagrees = z3.Or(key.nbytes != p.nbytes, key.retain != p.retain) if semantics.acquire_conflict == "error" \
        else key.nbytes != p.nbytes
    if semantics.acquire_conflict != "hit":
        outcomes.append(BranchOutcome("acquire", "ConflictError", z3.And(valid, key.present, disagrees), cache, "ConflictError"))
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
        BranchOutcome("acquire", "BLOCKED/absent", z3.And(absent, z3.Not(fits)), cache),
        BranchOutcome(
            "acquire",
            "RESERVATION_HIT",
            z3.And(agreed, z3.Not(key.ready)),
            _with_key(cache, referenced, semantics.refreshes("reservation_hit")),
        ),
        BranchOutcome(
            "acquire",
            "READY_HIT/in-use",
            z3.And(agreed, key.ready, z3.Not(steps.is_idle(key.ready, key.refcount, Z3_LOGIC))),
            _with_key(cache, referenced, ready_hit),
        ),
        BranchOutcome("acquire", "READY_HIT/idle", z3.And(idle, pin_fits), _with_key(cache, referenced, ready_hit)),
        BranchOutcome("acquire", "BLOCKED/idle", z3.And(idle, z3.Not(pin_fits)), cache),
    ]


def _commit(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    key = cache.slots[KEY_SLOT]
    checks = _argument_checks(semantics, [Check("InvalidArgumentError", p.nbytes < 1)]) + [
        Check("UnknownKeyError", z3.Not(key.present)),
        Check("WrongStateError", key.ready),
        Check("ConflictError", p.nbytes != key.nbytes),
    ]
    outcomes, valid = _checks("commit", cache, checks, _domain(semantics, p.nbytes >= 1))
    committed = key._replace(ready=z3.BoolVal(True))
    if semantics.eviction_time == "reservation":  # the reservation made the room already
        return outcomes + [BranchOutcome("commit", "evicted", valid, _with_key(cache, committed, newest=True))]
    evicted, stops, exact = _evict(cache, key.nbytes, semantics)
    after = _with_key(evicted, committed, newest=True)
    return outcomes + [BranchOutcome("commit", "evicted", z3.And(valid, stops), after, exact=exact)]


def _put(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    b, key = cache_bytes(cache), cache.slots[KEY_SLOT]
    too_large = rules.is_too_large(b, p.nbytes)
    checks = _argument_checks(semantics, [Check("InvalidArgumentError", p.nbytes < 1)])
    domain, kept = _domain(semantics, p.nbytes >= 1), []
    if semantics.put_present == "keep":  # the key first: a hit whatever the size, newest with put_hit
        kept, domain = _checks("put", cache, checks, domain)
        kept.append(BranchOutcome("put", "True/keep", z3.And(domain, key.present),
                                  _with_key(cache, key, newest=semantics.refreshes("put_hit"))))
        checks, domain = [], z3.And(domain, z3.Not(key.present))
    checks.append(Check("TooLargeError", too_large) if semantics.put_too_large == "error" else Check("False/too-large", too_large, False))
    if semantics.put_present == "error":
        checks.append(Check("WrongStateError", key.present))
    elif semantics.put_present == "replace":  # only an idle entry
        checks.append(Check("WrongStateError", z3.And(key.present, z3.Not(steps.is_idle(key.ready, key.refcount, Z3_LOGIC)))))
    outcomes, valid = _checks("put", cache, checks, domain)
    outcomes = kept + outcomes
    can = rules.eviction_can_make_room(b, rules.eviction_demand(b, p.nbytes, semantics.eviction_time))
    entry = Slot(
        z3.BoolVal(True), z3.BoolVal(True), p.nbytes, z3.IntVal(steps.PUT_REFCOUNT), z3.BoolVal(steps.PUT_RETAIN), cache.clock
    )
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    outcomes += [
        BranchOutcome("put", "True", z3.And(valid, z3.Not(key.present), can, stops), _with_key(evicted, entry, newest=True), exact=exact),
        BranchOutcome("put", "False", z3.And(valid, z3.Not(can)), cache),
    ]
    if semantics.put_present == "replace":  # the idle entry goes first, as if evicted
        replaced, r_stops, r_exact = _evict(_without(cache, _only_key(cache)), p.nbytes, semantics)
        outcomes.append(
            BranchOutcome("put", "True/replace", z3.And(valid, key.present, can, r_stops), _with_key(replaced, entry, True), exact=r_exact)
        )
    return outcomes


def _get_missing(semantics: Semantics, key: Slot, reserved: str, operation: str = "get") -> list[Check]:
    """get/pop of an absent or RESERVED key (Semantics.missing of `operation`): an error each
    (`reserved` names the second), None for both, or ("absent") None for an absent key only."""
    missing = semantics.missing(operation)
    if missing == "none":
        return [Check("None", z3.Or(z3.Not(key.present), z3.Not(key.ready)), False)]
    if missing == "absent":
        return [Check("None", z3.Not(key.present), False), Check(reserved, z3.Not(key.ready))]
    return [Check("UnknownKeyError", z3.Not(key.present)), Check(reserved, z3.Not(key.ready))]


def _get(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    key = cache.slots[KEY_SLOT]
    outcomes, valid = _checks("get", cache, _get_missing(semantics, key, "WrongStateError"), z3.BoolVal(True))
    return outcomes + [BranchOutcome("get", "value", valid, _with_key(cache, key, newest=semantics.refreshes("get")))]


def _release(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
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
        BranchOutcome("release", "False/decrement", z3.And(valid, more), _with_key(cache, released, newest=False)),
        BranchOutcome("release", "True/abandon", z3.And(gone, z3.Not(key.ready)), _without(cache, _only_key(cache))),
        BranchOutcome(
            "release",
            "False/idle",
            z3.And(last, z3.Not(gone)),
            _with_key(cache, released, newest=semantics.refreshes("release")),
        ),
        BranchOutcome("release", "True/transient", z3.And(gone, key.ready), _without(cache, _only_key(cache))),
    ]


def _evict_operation(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    b = cache_bytes(cache)
    checks = _argument_checks(
        semantics, [Check("InvalidArgumentError", p.nbytes < 0), Check("TooLargeError", rules.is_too_large(b, p.nbytes))]
    )
    demand = rules.eviction_demand(b, p.nbytes, semantics.eviction_time)
    checks.append(Check("CapacityError", z3.Not(rules.eviction_can_make_room(b, demand))))
    outcomes, valid = _checks("evict", cache, checks, _domain(semantics, p.nbytes >= 0))
    evicted, stops, exact = _evict(cache, p.nbytes, semantics)
    return outcomes + [BranchOutcome("evict", "evicted", z3.And(valid, stops), evicted, exact=exact)]


def _pop(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    key = cache.slots[KEY_SLOT]
    checks = _get_missing(semantics, key, "WrongStateError/reserved", "pop") + [Check("WrongStateError/in-use", steps.is_referenced(key.refcount))]
    outcomes, valid = _checks("pop", cache, checks, z3.BoolVal(True))
    return outcomes + [BranchOutcome("pop", "value", valid, _without(cache, _only_key(cache)))]


def _clear(cache: SlotCache, p: Parameters, semantics: Semantics) -> list[BranchOutcome]:
    everything = _without(cache, [z3.BoolVal(True)] * len(cache.slots))
    if semantics.clear_busy == "drop":
        return [BranchOutcome("clear", "None", z3.BoolVal(True), everything)]
    busy = z3.Or([z3.And(s.present, steps.is_referenced(s.refcount)) for s in cache.slots])
    outcomes, valid = _checks("clear", cache, [Check("WrongStateError", busy)], z3.BoolVal(True))
    return outcomes + [BranchOutcome("clear", "None", valid, everything)]


def _only_key(cache: SlotCache) -> list[Any]:
    return [z3.BoolVal(i == KEY_SLOT) for i in range(len(cache.slots))]


_TRANSITIONS: dict[str, Callable[[SlotCache, Parameters, Semantics], list[BranchOutcome]]] = {
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


def outcomes(operation: str, cache: SlotCache, parameters: Parameters, semantics: Semantics = CONTRACT) -> list[BranchOutcome]:
    """Every way `operation` can end from `cache` under `semantics`; exactly one guard holds for
    any state and call of the domain (with trusted arguments: the calls a caller may make)."""
    return _TRANSITIONS[operation](cache, parameters, semantics)
