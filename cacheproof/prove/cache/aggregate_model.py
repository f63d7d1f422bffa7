"""The aggregate model: a cache as its byte counts, and the induction proofs of I1, I2 and I6.

The state is `rules.Bytes(capacity, reserved, pinned, idle)` with unbounded integers and any
number of entries. Each outcome of each operation is the spec's guard and byte update, called
from `rules` at proof time (so a patched rule is the rule proved), plus what the entry the call
names contributes (e.g. commit's entry of n bytes is part of `reserved`). Evicting operations
free a symbolic `evicted` number of idle bytes, constrained the way the spec's eviction stops:
room was reached and the last evicted entry (of `last` bytes) was still needed, or every idle
byte is gone. Outcomes that change no byte count (errors, hits, get) may happen in any state;
the others constrain the key's entry to its byte class. Also proved here: `has_room` is monotone
in the evicted bytes (lemma M), which makes "stop at the first room" the same as "evict exactly
the idle entries that were needed". Outcomes follow the `Semantics` given (the contract by
default), with the per-entry model's branches.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from cacheproof.contract.calls import Call
from cacheproof.prove.cache.counterexample import InductionCounterexample, concrete_counterexample, value_recipe
from cacheproof.prove.induction import Z3_LOGIC, Goal, BranchOutcome, ProofResult, check_goals, mark_waived, value_of
from cacheproof.spec.cache import rules
from cacheproof.spec.cache.invariants import waivers
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import EntryState, EntryView

MODEL = "aggregate"
KEY = "k"

OPERATIONS = ("reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear")


class Parameters(NamedTuple):
    """A call's numbers, and the numbers of the entries it touches."""

    nbytes: Any  # the call's nbytes or value size; the size of the key's entry when present
    retain: Any
    evicted: Any  # idle bytes an evicting operation frees
    last: Any  # nbytes of the last entry it evicts
    replaced: Any  # nbytes of the idle entry a put replaces (put_present "replace")


class KeyEntry(NamedTuple):
    """The entry the call names, as part of one byte class: "reserved", "pinned" or "idle";
    `replaced`: it has `Parameters.replaced` bytes (a put replaces it), not the call's nbytes."""

    kind: str
    refcount: int
    replaced: bool = False


def symbolic_bytes() -> rules.Bytes:
    return rules.Bytes(z3.Int("capacity"), z3.Int("reserved"), z3.Int("pinned"), z3.Int("idle"))


def symbolic_parameters() -> Parameters:
    return Parameters(z3.Int("nbytes"), z3.Bool("retain"), z3.Int("evicted"), z3.Int("last"), z3.Int("replaced"))


def state_invariants(b: rules.Bytes, semantics: Semantics = CONTRACT) -> dict[str, Any]:
    """WF (non-negative counts, capacity >= 1), I1 and I2 over byte counts, by name; R where
    eviction happens at reservation time (`entry_model.reservation_counts_as_used`)."""
    return {
        "WF": z3.And(b.capacity >= 1, b.reserved >= 0, b.pinned >= 0, b.idle >= 0),
        **reservation_counts_as_used(b, semantics),
        "I1": rules.protected(b) <= b.capacity,
        "I2": rules.ready(b) <= b.capacity,
    }


def reservation_counts_as_used(b: rules.Bytes, semantics: Semantics) -> dict[str, Any]:
    """R, where eviction happens at reservation time: ready + reserved bytes fit the capacity."""
    if semantics.eviction_time != "reservation":
        return {}
    return {"R": rules.ready(b) + b.reserved <= b.capacity}


def invariant(b: rules.Bytes, semantics: Semantics = CONTRACT) -> Any:
    """Inv: WF, I1 and I2 (and R where eviction happens at reservation time)."""
    return z3.And(list(state_invariants(b, semantics).values()))


def eviction_stops(b: rules.Bytes, incoming: Any, p: Parameters) -> Any:
    """`p.evicted` idle bytes are what evicting oldest first until `rules.has_room` frees, for
    some sizes of the idle entries."""
    room = rules.has_room(rules.after_evict(b, p.evicted), incoming)
    last_was_needed = z3.And(
        p.last >= 1, p.last <= p.evicted, z3.Not(rules.has_room(rules.after_evict(b, p.evicted - p.last), incoming))
    )
    stopped = z3.And(room, z3.Or(p.evicted == 0, last_was_needed))
    ran_out = z3.And(p.evicted == b.idle, z3.Not(room), z3.Or(p.evicted == 0, last_was_needed))
    return z3.And(p.evicted >= 0, p.evicted <= b.idle, z3.Or(stopped, ran_out))


def _checks(
    operation: str, b: rules.Bytes, checks: list[tuple[str, Any, bool]], domain: Any
) -> tuple[list[BranchOutcome], Any]:
    """Outcomes of checks made in order, within `domain`: (name, condition, raises); a check
    that does not raise returns, changing nothing."""
    outcomes, none_yet = [], domain
    for name, condition, raises in checks:
        outcomes.append(BranchOutcome(operation, name, z3.And(none_yet, condition), b, name.split("/")[0] if raises else None))
        none_yet = z3.And(none_yet, z3.Not(condition))
    return outcomes, none_yet


def _within(n: Any, total: Any) -> Any:
    return z3.And(n >= 1, n <= total)


def _outcomes(
    operation: str, b: rules.Bytes, p: Parameters, semantics: Semantics = CONTRACT
) -> list[tuple[BranchOutcome, KeyEntry | None]]:
    n = p.nbytes
    checked = semantics.argument_checks == "checked"
    too_large = rules.is_too_large(b, n)
    fits = rules.reservation_fits(b, n)
    sizes = [("InvalidArgumentError", n < 1, True), ("TooLargeError", too_large, True)] if checked else []
    domain = z3.BoolVal(True) if checked else n >= 1
    demand = rules.eviction_demand(b, n, semantics.eviction_time)
    at_reservation = semantics.eviction_time == "reservation"

    def anywhere(name: str, raises: bool = True, key: KeyEntry | None = None) -> tuple[BranchOutcome, KeyEntry | None]:
        """An outcome that changes no byte count and may happen in any state."""
        return BranchOutcome(operation, name, z3.BoolVal(True), b, name.split("/")[0] if raises else None), key

    if operation in ("reserve", "acquire"):
        errors, valid = _checks(operation, b, sizes, domain)
        if at_reservation:  # evict until the reservation's bytes would fit, reserved bytes counting as used
            new_guard = z3.And(valid, fits, eviction_stops(b, demand, p))
            reserved = rules.after_reserve(rules.after_evict(b, p.evicted), n)
        else:
            new_guard, reserved = z3.And(valid, fits), rules.after_reserve(b, n)
        if operation == "reserve":
            cases = [
                (BranchOutcome(operation, "WrongStateError", valid, b, "WrongStateError"), None),
                (BranchOutcome(operation, "True", new_guard, reserved), None),
                (BranchOutcome(operation, "False", z3.And(valid, z3.Not(fits)), b), None),
            ]
        else:
            idle_key = z3.And(valid, _within(n, b.idle), p.retain)
            cases = [
                (BranchOutcome(operation, "NEW_RESERVATION", new_guard, reserved), None),
                (BranchOutcome(operation, "BLOCKED/absent", z3.And(valid, z3.Not(fits)), b), None),
                (BranchOutcome(operation, "RESERVATION_HIT", valid, b), KeyEntry("reserved", 1)),
                (BranchOutcome(operation, "READY_HIT/in-use", valid, b), KeyEntry("pinned", 1)),
                (BranchOutcome(operation, "READY_HIT/idle", z3.And(idle_key, fits), rules.after_pin(b, n)), KeyEntry("idle", 0)),
                (BranchOutcome(operation, "BLOCKED/idle", z3.And(idle_key, z3.Not(fits)), b), KeyEntry("idle", 0)),
            ]
            if semantics.acquire_conflict != "hit":  # "error" or "size": which fields disagree is not modelled here
                cases.append((BranchOutcome(operation, "ConflictError", valid, b, "ConflictError"), None))
        return [(o, None) for o in errors] + cases
    if operation == "commit":
        errors, valid = _checks(operation, b, sizes[:1], domain)
        if at_reservation:  # the reservation made the room already
            committing, after = z3.And(valid, _within(n, b.reserved)), rules.after_commit(b, n, 0)
        else:
            committing = z3.And(valid, _within(n, b.reserved), eviction_stops(b, n, p))
            after = rules.after_commit(b, n, p.evicted)
        cases = [
            (BranchOutcome(operation, "UnknownKeyError", valid, b, "UnknownKeyError"), None),
            (BranchOutcome(operation, "WrongStateError", valid, b, "WrongStateError"), None),
            (BranchOutcome(operation, "ConflictError", valid, b, "ConflictError"), None),
            (BranchOutcome(operation, "evicted", committing, after), KeyEntry("reserved", 1)),
        ]
        return [(o, None) for o in errors] + cases
    if operation == "put":
        checks = sizes[:1] + [
            ("TooLargeError", too_large, True) if semantics.put_too_large == "error" else ("False/too-large", too_large, False)
        ]
        errors, valid = _checks(operation, b, checks, domain)
        can = rules.eviction_can_make_room(b, demand)
        cases = [
            (BranchOutcome(operation, "True", z3.And(valid, can, eviction_stops(b, demand, p)), rules.after_put(b, n, p.evicted)), None),
            (BranchOutcome(operation, "False", z3.And(valid, z3.Not(can)), b), None),
        ]
        if semantics.put_present == "keep":  # the key is looked at before the size
            _, key_first = _checks(operation, b, sizes[:1], domain)
            cases.append((BranchOutcome(operation, "True/keep", key_first, b), None))
        else:
            cases.append((BranchOutcome(operation, "WrongStateError", valid, b, "WrongStateError"), None))
        if semantics.put_present == "replace":  # the idle entry of `replaced` bytes goes first, as if evicted
            without = rules.after_evict(b, p.replaced)
            room = eviction_stops(without, rules.eviction_demand(without, n, semantics.eviction_time), p)
            replacing = z3.And(valid, _within(p.replaced, b.idle), can, room)
            cases.append(
                (BranchOutcome(operation, "True/replace", replacing, rules.after_put(without, n, p.evicted)), KeyEntry("idle", 0, True))
            )
        return [(o, None) for o in errors] + cases
    if operation in ("get", "pop"):
        if semantics.missing(operation) == "none":
            missing = [anywhere("None", raises=False)]
        elif semantics.missing(operation) == "absent":
            missing = [anywhere("None", raises=False), anywhere("WrongStateError")]
        else:
            missing = [anywhere("UnknownKeyError"), anywhere("WrongStateError")]
        if operation == "get":
            return missing + [anywhere("value", raises=False, key=KeyEntry("pinned", 1))]
        return missing + [
            anywhere("WrongStateError/in-use"),
            (BranchOutcome(operation, "value", _within(n, b.idle), rules.after_evict(b, n)), KeyEntry("idle", 0)),
        ]
    if operation == "release":
        last_ready = _within(n, b.pinned)
        if semantics.release_missing == "noop":
            missing = [anywhere("False/noop", raises=False)]
        else:
            missing = [anywhere("UnknownKeyError"), anywhere("WrongStateError")]
        return missing + [
            (BranchOutcome(operation, "False/decrement", z3.BoolVal(True), b), KeyEntry("pinned", 2)),
            (BranchOutcome(operation, "True/abandon", _within(n, b.reserved), rules.after_abandon(b, n)), KeyEntry("reserved", 1)),
            (
                BranchOutcome(operation, "False/idle", z3.And(last_ready, p.retain), rules.after_last_release(b, n, p.retain, Z3_LOGIC)),
                KeyEntry("pinned", 1),
            ),
            (
                BranchOutcome(
                    operation,
                    "True/transient",
                    z3.And(last_ready, z3.Not(p.retain)),
                    rules.after_last_release(b, n, p.retain, Z3_LOGIC),
                ),
                KeyEntry("pinned", 1),
            ),
        ]
    if operation == "evict":
        evict_sizes = [("InvalidArgumentError", n < 0, True), ("TooLargeError", too_large, True)] if checked else []
        evict_domain = z3.BoolVal(True) if checked else n >= 0
        checks = evict_sizes + [("CapacityError", z3.Not(rules.eviction_can_make_room(b, demand)), True)]
        errors, valid = _checks(operation, b, checks, evict_domain)
        return [(o, None) for o in errors] + [
            (BranchOutcome(operation, "evicted", z3.And(valid, eviction_stops(b, demand, p)), rules.after_evict(b, p.evicted)), None)
        ]
    if semantics.clear_busy == "drop":
        return [(BranchOutcome(operation, "None", z3.BoolVal(True), rules.after_clear(b)), None)]
    busy = z3.Or(b.reserved > 0, b.pinned > 0)
    return [
        (BranchOutcome(operation, "WrongStateError", busy, b, "WrongStateError"), None),
        (BranchOutcome(operation, "None", z3.Not(busy), rules.after_clear(b)), None),
    ]


def outcomes(operation: str, b: rules.Bytes, p: Parameters, semantics: Semantics = CONTRACT) -> list[BranchOutcome]:
    """Every way `operation` can end under `semantics`, as a guard over the byte counts and the
    call's numbers."""
    return [outcome for outcome, _ in _outcomes(operation, b, p, semantics)]


def prove(semantics: Semantics = CONTRACT) -> list[ProofResult]:
    """Prove that Init implies Inv, that every outcome of every operation keeps WF, I1 and I2
    (and R where eviction happens at reservation time) under `semantics`, that error outcomes
    change nothing (I6), and lemma M."""
    b, p = symbolic_bytes(), symbolic_parameters()
    results = []
    init = rules.empty(b.capacity)
    explain_init = explainer(b, p, BranchOutcome("init", "new", z3.BoolVal(True), init), None, semantics)
    init_goals = _goals(init, None, semantics)
    for goal, proved, seconds, cx in check_goals([b.capacity >= 1], init_goals, b.capacity, explain_init):
        results.append(ProofResult(goal.invariant, "init", "new_spec(capacity)", proved, seconds, cx, MODEL))
    inductive = invariant(b, semantics)
    for operation in OPERATIONS:
        for outcome, key in _outcomes(operation, b, p, semantics):
            explain = explainer(b, p, outcome, key, semantics)
            goals = _goals(outcome.after, b if outcome.error else None, semantics)
            checked = check_goals([inductive, outcome.guard], goals, b.capacity, explain)
            results.extend(
                ProofResult(goal.invariant, operation, outcome.name, proved, seconds, cx, MODEL)
                for goal, proved, seconds, cx in checked
            )
    results.extend(_prove_monotone_room(b, p))
    return mark_waived(results, waivers(semantics))


def _goals(after: rules.Bytes, unchanged_from: rules.Bytes | None, semantics: Semantics) -> list[Goal]:
    goals = [Goal(name, formula) for name, formula in state_invariants(after, semantics).items()]
    if unchanged_from is not None:
        goals.append(Goal("I6", z3.And([x == y for x, y in zip(unchanged_from, after)])))
    return goals


def _prove_monotone_room(b: rules.Bytes, p: Parameters) -> list[ProofResult]:
    more = z3.Int("more_evicted")
    room = rules.has_room(rules.after_evict(b, p.evicted), p.nbytes)
    room_after_more = rules.has_room(rules.after_evict(b, more), p.nbytes)
    goal = Goal("M", z3.Implies(z3.And(room, p.evicted <= more), room_after_more))
    outcome = BranchOutcome("evict", "lemma", z3.BoolVal(True), b)
    explain = explainer(b, p, outcome, None, CONTRACT)
    return [
        ProofResult("M", "commit/put/evict", "has_room monotone", proved, seconds, cx, MODEL)
        for _, proved, seconds, cx in check_goals([], [goal], b.capacity, explain)
    ]


def explainer(
    b: rules.Bytes, p: Parameters, outcome: BranchOutcome, key: KeyEntry | None, semantics: Semantics = CONTRACT
) -> Callable[[str, z3.ModelRef], InductionCounterexample]:
    def explain(invariant_name: str, model: z3.ModelRef) -> InductionCounterexample:
        def v(term: Any) -> Any:
            return value_of(model, term)

        capacity, nbytes, retain = v(b.capacity), v(p.nbytes), v(p.retain)
        key_nbytes = v(p.replaced) if key is not None and key.replaced else nbytes
        entries = concrete_entries(
            v(b.reserved), v(b.pinned), v(b.idle), v(p.evicted), v(p.last), key, key_nbytes, retain
        )
        call = _concrete_call(outcome.operation, nbytes, retain)
        return concrete_counterexample(invariant_name, MODEL, capacity, entries, call, outcome.name, semantics)

    return explain


def concrete_entries(
    reserved: int, pinned: int, idle: int, evicted: int, last: int, key: KeyEntry | None, nbytes: int, retain: bool
) -> list[EntryView]:
    """Entries, oldest first, with these byte counts: one entry per class (less the key's part),
    the idle bytes split so that evicting oldest first frees `evicted` bytes with a last entry
    of `last`, and the key's entry newest."""
    parts = {"reserved": reserved, "pinned": pinned, "idle": idle}
    if key is not None:
        parts[key.kind] -= nbytes
    entries = []
    if parts["reserved"] > 0:
        entries.append(EntryView("reserved", EntryState.RESERVED, 1, parts["reserved"], True))
    if parts["pinned"] > 0:
        entries.append(EntryView("pinned", EntryState.READY, 1, parts["pinned"], True))
    idle_sizes = [evicted - last, last, parts["idle"] - evicted] if evicted > 0 else [parts["idle"]]
    entries += [
        EntryView(f"idle{i}", EntryState.READY, 0, size, True) for i, size in enumerate(idle_sizes) if size > 0
    ]
    if key is not None:
        state = EntryState.RESERVED if key.kind == "reserved" else EntryState.READY
        entries.append(EntryView(KEY, state, key.refcount, nbytes, retain or key.refcount == 0))
    return entries


def _concrete_call(operation: str, nbytes: int, retain: bool) -> Call:
    if operation in ("reserve", "acquire"):
        return Call(operation, (KEY, nbytes), {"retain": retain})
    if operation in ("commit", "put"):
        return Call(operation, (KEY, value_recipe(nbytes)), {})
    if operation == "evict":
        return Call(operation, (nbytes,), {})
    if operation in ("clear", "init"):
        return Call("clear", (), {})
    return Call(operation, (KEY,), {})
