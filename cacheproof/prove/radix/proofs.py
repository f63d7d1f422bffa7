"""The radix cache's induction proofs: every micro-step of the model (model.py) keeps W, R1, R2, R3
and R6, in trees of up to N nodes; and, for any number of nodes, the aggregate argument: each
step moves tokens between free, evictable and protected as its delta says, so no count goes below
zero and free + evictable + protected stays num_slots.

An obligation is proved when its negation is unsatisfiable; otherwise the solver's model is a
counterexample, printed as the pre-state, the step and the post-state (`RadixCounterexample`).
"""

from __future__ import annotations

import time
from typing import Any

import z3

from cacheproof.prove.induction import ProofResult
from cacheproof.prove.radix import model

DEFAULT_NODES = 4
"""Trees of up to this many nodes (`--slots`): the bounded model's default."""


class RadixCounterexample:
    """A solver's model of a failed obligation: the state before, the step's parameters and the
    state after, as plain values."""

    def __init__(self, step: str, values: dict[str, Any]) -> None:
        self.step, self.values = step, values

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, **self.values}

    def python(self) -> str:
        return f"# {self.step}: " + repr(self.values) + "\n"


def _read(solver_model: z3.ModelRef, state: model.State) -> dict[str, Any]:
    value = lambda term: solver_model.eval(term, model_completion=True)  # noqa: E731
    return {
        "nodes": [(i, str(value(state.parent[i])), str(value(state.length[i])), str(value(state.lock[i])))
                  for i in range(state.n) if z3.is_true(value(state.alive[i]))],
        "free": str(value(state.free)), "evictable": str(value(state.evictable)), "protected": str(value(state.protected)),
    }


def _prove(name: str, step: str, goal: z3.BoolRef, assumptions: list, shown: tuple, model_name: str) -> ProofResult:
    solver = z3.Solver()
    solver.add(*assumptions, z3.Not(goal))
    started = time.perf_counter()
    verdict = solver.check()
    seconds = time.perf_counter() - started
    if verdict == z3.unsat:
        return ProofResult(name, step, "any", True, seconds, None, model_name)
    if verdict != z3.sat:
        values: dict[str, Any] = {"solver": str(verdict)}
    elif shown:
        values = {"before": _read(solver.model(), shown[0]), "after": _read(solver.model(), shown[1])}
    else:
        values = {str(term): str(solver.model()[term]) for term in solver.model()}
    return ProofResult(name, step, "any", False, seconds, RadixCounterexample(step, values), model_name)


def prove_bounded(nodes: int = DEFAULT_NODES) -> list[ProofResult]:
    """Every (invariant, micro-step) in trees of up to `nodes` nodes."""
    before, after, num_slots = model.fresh("s", nodes), model.fresh("t", nodes), z3.Int("num_slots")
    holds = [rule(before, num_slots) for rule in model.STATE_INVARIANTS.values()]
    results = []
    for step, relation in model.STEPS.items():
        assumptions = [num_slots >= 1, *holds, relation(before, after, model.params(step))]
        for name, rule in model.STATE_INVARIANTS.items():
            results.append(_prove(name, step, rule(after, num_slots), assumptions, (before, after), f"tree<={nodes}"))
        results.append(_prove("R6", step, model.locked_kept(before, after), assumptions, (before, after), f"tree<={nodes}"))
    return results


AGGREGATE_DELTAS = {
    "split": lambda m: (0, 0, 0, z3.BoolVal(True)),
    "leaf": lambda m: (-m["k"], m["k"], 0, z3.And(m["k"] >= 1, m["k"] <= m["free"])),
    "lock": lambda m: (0, -m["moved"], m["moved"], z3.And(m["moved"] >= 0, m["moved"] <= m["evictable"])),
    "unlock": lambda m: (0, m["moved"], -m["moved"], z3.And(m["moved"] >= 0, m["moved"] <= m["protected"])),
    "evict": lambda m: (m["k"], -m["k"], 0, z3.And(m["k"] >= 1, m["k"] <= m["evictable"])),
    "reset": lambda m: (m["evictable"], -m["evictable"], 0, m["protected"] == 0),
}
"""Per micro-step: (free, evictable, protected) deltas and what the bounded model shows of them
(a lock moves at most the evictable tokens, an evicted leaf's tokens are evictable, ...)."""


def prove_aggregate() -> list[ProofResult]:
    """For any number of nodes: every micro-step keeps free, evictable, protected >= 0 and their sum
    num_slots (R3's and R2's counts), given its delta."""
    names = ("free", "evictable", "protected", "k", "moved", "num_slots")
    m = {name: z3.Int(f"a_{name}") for name in names}
    results = []
    for step, delta in AGGREGATE_DELTAS.items():
        d_free, d_evictable, d_protected, guard = delta(m)
        after = (m["free"] + d_free, m["evictable"] + d_evictable, m["protected"] + d_protected)
        counts = z3.And(m["free"] >= 0, m["evictable"] >= 0, m["protected"] >= 0,
                        m["free"] + m["evictable"] + m["protected"] == m["num_slots"])
        goal = z3.And(*[value >= 0 for value in after], sum(after) == m["num_slots"])
        results.append(_prove("R2+R3", step, goal, [counts, guard], (), "aggregate"))
    return results


def prove(nodes: int = DEFAULT_NODES) -> list[ProofResult]:
    """The aggregate proofs, then the bounded ones."""
    return prove_aggregate() + prove_bounded(nodes)
