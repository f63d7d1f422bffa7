"""One-step induction with z3: the shared machinery of the aggregate and per-entry models.

A model describes each operation as a list of `BranchOutcome`s: a guard over the pre-state and the
call's parameters, and the post-state it leads to. An obligation `assumptions => goal` is proved
when `assumptions and not goal` is unsatisfiable; otherwise the solver's model is a
counterexample to induction, which the model turns into a concrete call on the spec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Sequence

import z3

from cacheproof.prove.cache.counterexample import InductionCounterexample
from cacheproof.spec.cache import rules

Z3_LOGIC = rules.Logic(choose=z3.If, all_of=z3.And, any_of=z3.Or, negate=z3.Not)
"""The spec's rules over z3 terms: every branch becomes an `If`."""

_SMALL_CAPACITIES = (4, 8, 64)
"""Capacities tried first when a counterexample exists, so that it reads easily."""


@dataclass(frozen=True)
class ProofResult:
    """The verdict on one proof obligation: `invariant` holds after `operation` ends in `outcome`.

    `model` is "aggregate", "entries" (N symbolic slots) or "liveness". `seconds` is the solver
    time of this obligation alone. `counterexample` is set exactly when `proved` is False.
    `waived` names the options under which the invariant does not hold (spec/cache/invariants.py
    `WAIVERS`), set only on a counterexample to such an invariant: it is expected, not a failure.
    """

    invariant: str
    operation: str
    outcome: str
    proved: bool
    seconds: float
    counterexample: InductionCounterexample | None
    model: str
    waived: str | None = None

    @property
    def failed(self) -> bool:
        """A counterexample to an invariant that should hold."""
        return not self.proved and self.waived is None


def mark_waived(results: list[ProofResult], waived: dict[str, list[Any]]) -> list[ProofResult]:
    """`results` with each counterexample to a waived invariant marked with its options
    (`waived`: invariant name -> `spec.invariants.Waiver`s, as `spec.invariants.waivers` gives)."""
    return [
        replace(r, waived=", ".join(w.option for w in waived[r.invariant])) if not r.proved and r.invariant in waived else r
        for r in results
    ]


@dataclass(frozen=True)
class BranchOutcome:
    """One way an operation can end: when it happens (`guard`) and the state it leaves (`after`).

    Error outcomes have `error` set to the exception's class name and leave `after` = the
    pre-state, by construction; I6 is proved on them all the same. A guard may over-approximate
    when the outcome is possible (any result the spec can produce satisfies it); `exact` then
    builds the constraints that make it exact, added only to confirm a counterexample.
    """

    operation: str
    name: str
    guard: Any
    after: Any
    error: str | None = None
    exact: Callable[[], Any] | None = None


@dataclass(frozen=True)
class Goal:
    """A named formula that must hold whenever the assumptions do."""

    invariant: str
    formula: Any


def check_goals(
    assumptions: Sequence[Any],
    goals: Sequence[Goal],
    capacity: Any,
    explain: Callable[[str, z3.ModelRef], InductionCounterexample],
    exact: Callable[[], Any] | None = None,
    together: bool = False,
) -> Iterator[tuple[Goal, bool, float, InductionCounterexample | None]]:
    """Check every goal under the shared assumptions, a fresh solver for each (z3's incremental
    mode skips the preprocessing that makes these proofs fast).

    Yields (goal, proved, seconds, counterexample). On a counterexample to an over-approximate
    transition, the `exact` constraints are added and the goal checked again. A counterexample
    that survives is asked once more for a small capacity (not counted in `seconds`), then
    `explain` turns the model into a concrete call.

    `together`: first check the conjunction of the goals in one solver (the assumptions are
    preprocessed once, not once per goal); if it holds every goal is proved, each counted with an
    equal share of that check's seconds; if not, each goal is checked on its own as above, so a
    counterexample names the very goal it breaks.
    """
    if together and len(goals) > 1:
        proved, seconds = _holds(assumptions, goals, exact)
        if proved:
            yield from ((goal, True, seconds / len(goals), None) for goal in goals)
            return
    for goal in goals:
        solver = _solver(assumptions, goal.formula)
        started = time.perf_counter()
        verdict = _verdict(solver, exact, goal.invariant)
        seconds = time.perf_counter() - started
        if verdict == z3.unsat:
            yield goal, True, seconds, None
            continue
        yield goal, False, seconds, explain(goal.invariant, _smallest_model(solver, capacity))


def _holds(assumptions: Sequence[Any], goals: Sequence[Goal], exact: Callable[[], Any] | None) -> tuple[bool, float]:
    """Whether every goal follows from the assumptions, and the solver's seconds."""
    solver = _solver(assumptions, z3.And([goal.formula for goal in goals]))
    started = time.perf_counter()
    verdict = _verdict(solver, exact, " and ".join(goal.invariant for goal in goals))
    return verdict == z3.unsat, time.perf_counter() - started


def _solver(assumptions: Sequence[Any], formula: Any) -> z3.Solver:
    solver = z3.SolverFor("QF_LIA")
    solver.add(*assumptions)
    solver.add(z3.Not(formula))
    return solver


def _verdict(solver: z3.Solver, exact: Callable[[], Any] | None, goal_name: str) -> Any:
    """sat or unsat (with the `exact` constraints added after a first sat); RuntimeError otherwise."""
    verdict = solver.check()
    if verdict == z3.sat and exact is not None:
        solver.add(exact())
        verdict = solver.check()
    if verdict not in (z3.sat, z3.unsat):
        reason = solver.reason_unknown()
        if reason.startswith("interrupted"):  # z3 answers a Ctrl-C in the middle of a check with "unknown"
            raise KeyboardInterrupt
        raise RuntimeError(f"z3 answered {verdict} on {goal_name}: {reason}")
    return verdict


def _smallest_model(solver: z3.Solver, capacity: Any) -> z3.ModelRef:
    for bound in _SMALL_CAPACITIES:
        solver.push()
        solver.add(capacity <= bound)
        if solver.check() == z3.sat:
            model = solver.model()
            solver.pop()
            return model
        solver.pop()
    solver.check()
    return solver.model()


def value_of(model: z3.ModelRef, term: Any) -> Any:
    """The concrete value (int or bool) of `term` in `model`, completing unconstrained terms."""
    value = model.eval(term, model_completion=True)
    if z3.is_bool(value):
        return z3.is_true(value)
    return value.as_long()
