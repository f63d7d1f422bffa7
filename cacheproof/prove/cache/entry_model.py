"""The per-entry model: a cache of N symbolic slots, and the induction proofs of I1-I6 over it.

The slots and their byte counts are stated in slot_cache.py, the transitions (which outcome a call
has under a `Semantics`, what it does to the slots) in slot_transitions.py. This module states the
invariants, with WF and R (the facts I1/I2 need to be inductive), and proves them by one-step
induction over every operation and outcome; a counterexample is rendered as a concrete state and
call that fails on the spec.

Rule: the invariants are stated on their own, from the slots and `rules` only, without `steps`,
so a wrong step cannot weaken what is proved.
"""

from __future__ import annotations

from typing import Any, Callable

import z3

from cacheproof.contract.calls import Call
from cacheproof.prove.cache.counterexample import InductionCounterexample, concrete_counterexample, value_recipe
from cacheproof.prove.cache.slot_cache import (
    KEY_SLOT,
    IdentityMemo,
    Parameters,
    Slot,
    SlotCache,
    cache_bytes,
    is_idle,
    is_pinned,
    is_reserved,
    symbolic_cache,
    symbolic_parameters,
)
from cacheproof.prove.cache.slot_transitions import OPERATIONS, outcomes
from cacheproof.prove.induction import Goal, BranchOutcome, ProofResult, check_goals, mark_waived, value_of
from cacheproof.spec.cache import rules
from cacheproof.spec.cache.invariants import evicting_operations, waivers
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import EntryState, EntryView

MODEL = "entries"


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
        "I3": z3.And([z3.Implies(is_reserved(s), s.refcount >= 1) for s in cache.slots]),
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
    idle = [is_idle(s) for s in cache.slots]
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
    removed = [None if s is t else z3.And(s.present, z3.Not(t.present)) for s, t in zip(before.slots, after.slots)]
    evicting = operation in evicting_operations(semantics)
    facts = []
    for i, (s, t) in enumerate(zip(before.slots, after.slots)):
        if removed[i] is None:  # the slot as it was: nothing removed, nothing changed
            continue
        allowed = s.refcount == 1 if operation == "release" and i == KEY_SLOT else is_idle(s)
        facts.append(z3.Implies(removed[i], allowed))
        if evicting:
            kept = z3.Not(removed[i])
            facts.extend(
                z3.Or(kept, z3.Not(older_idle[i][j]), *([] if removed[j] is None else [removed[j]]))
                for j in range(len(before.slots))
                if j != i
            )
        survives_reserved = z3.And(is_reserved(s), t.present)
        keeps = t.nbytes == s.nbytes if operation == "commit" and i == KEY_SLOT else z3.And(t.nbytes == s.nbytes, z3.Not(t.ready))
        facts.append(z3.Implies(survives_reserved, keeps))
    return z3.And(facts)


def unchanged(before: SlotCache, after: SlotCache) -> Any:
    """I6: the same entries with the same fields and ranks (so the same recency order)."""
    facts = [before.capacity == after.capacity, before.clock == after.clock]
    for s, t in zip(before.slots, after.slots):
        if s is t:  # the slot as it was
            continue
        facts.append(s.present == t.present)
        same = z3.And(s.ready == t.ready, s.nbytes == t.nbytes, s.refcount == t.refcount, s.retain == t.retain, s.rank == t.rank)
        facts.append(z3.Implies(s.present, same))
    return z3.And(facts)


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
        if i == KEY_SLOT or s is t:  # a slot as it was contributes what it did
            continue
        removed = z3.And(s.present, z3.Not(t.present))
        for in_class in (is_reserved, is_pinned, is_idle):
            contribution_before = z3.If(in_class(s), s.nbytes, 0)
            dropped = z3.If(z3.And(removed, in_class(s)), s.nbytes, 0)
            facts.append(z3.If(in_class(t), t.nbytes, 0) == contribution_before - dropped)
    return z3.And(facts)


def ranks_in_slot_order(cache: SlotCache) -> Any:
    """The slots other than the key's have increasing ranks along their indices.

    Symmetry breaking, not an invariant: the slots other than the key's are interchangeable (the
    transitions and the goals treat each of them alike), so every state can be renamed into one
    where their ranks increase with the index, and a counterexample to a step exists iff one of
    that form does. The step proofs assume it; without it z3 case-splits on the order of every
    pair of ranks (I5 after an eviction compares every pair: half the solver time at 32 slots).
    """
    ranks = [s.rank for s in cache.slots[:KEY_SLOT] + cache.slots[KEY_SLOT + 1 :]]
    return z3.And([older < newer for older, newer in zip(ranks, ranks[1:])])


def initial_cache(capacity: Any, num_slots: int) -> SlotCache:
    """`new_spec(capacity)`: no entry; absent slots get distinct ranks below the clock."""
    absent = Slot(z3.BoolVal(False), z3.BoolVal(False), z3.IntVal(0), z3.IntVal(0), z3.BoolVal(True), z3.IntVal(0))
    return SlotCache(capacity, z3.IntVal(0), tuple(absent._replace(rank=z3.IntVal(-1 - i)) for i in range(num_slots)))


def prove(num_slots: int = 8, semantics: Semantics = CONTRACT) -> list[ProofResult]:
    """Prove Init => Inv, then WF, I1-I5 (and I6 on errors) for every operation and outcome over
    `num_slots` slots under `semantics`, with the frame lemma those proofs use proved first for
    each outcome. An invariant waived under `semantics` is proved all the same; its
    counterexamples are marked with the waiving option (`ProofResult.waived`)."""
    before, parameters = symbolic_cache("", num_slots), symbolic_parameters()
    invariants_of = IdentityMemo(lambda cache: state_invariants(cache, semantics))  # outcomes share post-states
    inductive, older_idle = z3.And(list(invariants_of(before).values())), older_idle_pairs(before)
    renamed = ranks_in_slot_order(before)
    init = BranchOutcome("init", "new_spec(capacity)", z3.BoolVal(True), initial_cache(before.capacity, num_slots))
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
                    [inductive, renamed, outcome.guard, frame],
                    _goals(operation, before, outcome, older_idle, semantics, invariants_of(outcome.after)),
                    before.capacity,
                    explain,
                    outcome.exact,
                    together=True,
                ),
            ]
            results.extend(
                ProofResult(goal.invariant, operation, outcome.name, proved, seconds, counterexample, MODEL)
                for checked in checks
                for goal, proved, seconds, counterexample in checked
            )
    return mark_waived(results, waivers(semantics))


def _goals(
    operation: str,
    before: SlotCache,
    outcome: BranchOutcome,
    older_idle: list[list[Any]],
    semantics: Semantics,
    after_invariants: dict[str, Any],
) -> list[Goal]:
    after = outcome.after
    goals = [Goal(name, formula) for name, formula in after_invariants.items()]
    goals.append(Goal("I5", only_idle_removed_oldest_first(operation, before, after, older_idle, semantics)))
    if outcome.error is not None:
        goals.append(Goal("I6", unchanged(before, after)))
    return goals


def _explainer(
    before: SlotCache, parameters: Parameters, outcome: BranchOutcome, semantics: Semantics
) -> Callable[[str, z3.ModelRef], InductionCounterexample]:
    def explain(invariant_name: str, model: z3.ModelRef) -> InductionCounterexample:
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
