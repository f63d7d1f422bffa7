"""Liveness facts as z3 queries over the aggregate model (unbounded sizes, any number of entries).

- L1 (no livelock, cf. vLLM #47738): once nothing is protected (reserved = pinned = 0), an item
  of nbytes <= capacity can always be reserved: reserve returns True, acquire never BLOCKED.
- L2: a commit after a successful reserve never needs to evict a protected entry: evicting every
  idle entry always makes room for the reserved bytes (so eviction never runs out).
- L3: when put and evict pass `eviction_can_make_room`, evicting every idle entry makes room.

Where eviction happens at reservation time (reserved bytes count as used), L1 also says that
the reservation's eviction finds room, and L2 that commit finds room without evicting.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import z3

from cacheproof.prove.cache import aggregate_model
from cacheproof.prove.induction import Goal, BranchOutcome, ProofResult, check_goals
from cacheproof.spec.cache import rules
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

MODEL = "liveness"


class Fact(NamedTuple):
    """A liveness fact: under `premise` (with Inv), `conclusion` holds."""

    name: str
    operation: str
    outcome: str
    premise: Any
    conclusion: Any


def facts(b: rules.Bytes, p: aggregate_model.Parameters, semantics: Semantics = CONTRACT) -> list[Fact]:
    """L1-L3 over symbolic byte counts and call numbers, under `semantics`."""
    n = p.nbytes
    demand = rules.eviction_demand(b, n, semantics.eviction_time)
    nothing_protected = z3.And(b.reserved == 0, b.pinned == 0, n >= 1, z3.Not(rules.is_too_large(b, n)))
    room_without_idle = rules.has_room(rules.after_evict(b, b.idle), demand)
    fits_after_put_guard = z3.And(n >= 0, rules.eviction_can_make_room(b, demand))
    reservable = rules.reservation_fits(b, n)
    if semantics.eviction_time == "reservation":
        reservable = z3.And(reservable, room_without_idle)
        commit_room = rules.has_room(b, n)  # commit does not evict
    else:
        commit_room = room_without_idle
    return [
        Fact("L1", "reserve", "True", nothing_protected, reservable),
        Fact("L1", "acquire", "NEW_RESERVATION/READY_HIT", nothing_protected, reservable),
        Fact("L2", "commit", "evicted", z3.And(n >= 1, n <= b.reserved), commit_room),
        Fact("L3", "put", "True", fits_after_put_guard, room_without_idle),
        Fact("L3", "evict", "evicted", fits_after_put_guard, room_without_idle),
    ]


def prove(semantics: Semantics = CONTRACT) -> list[ProofResult]:
    """Check L1-L3 under `semantics`; a counterexample is a state and call where the fact fails."""
    b, p = aggregate_model.symbolic_bytes(), aggregate_model.symbolic_parameters()
    results = []
    inductive = aggregate_model.invariant(b, semantics)
    for fact in facts(b, p, semantics):
        outcome = BranchOutcome(fact.operation, fact.outcome, fact.premise, b)
        key = aggregate_model.KeyEntry("reserved", 1) if fact.operation == "commit" else None
        explain = aggregate_model.explainer(b, p, outcome, key, semantics)
        checked = check_goals([inductive, fact.premise], [Goal(fact.name, fact.conclusion)], b.capacity, explain)
        results.extend(
            ProofResult(fact.name, fact.operation, fact.outcome, proved, seconds, cx, MODEL)
            for _, proved, seconds, cx in checked
        )
    return results
