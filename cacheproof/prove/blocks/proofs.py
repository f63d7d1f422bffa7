"""The bounded model's proofs: one-step induction of the block invariants at N blocks.

For every pool-level operation, every call shape (list lengths up to `max_list`) and every
outcome: Inv(pre) and the outcome's guard imply each invariant of the post-state, where Inv is WF
and Q with B1-B4 and B7 (state.py). Error outcomes also prove B8 (nothing changed); lookup also
proves its part of B4 (each answered block carries the hash asked and is its first inserted
carrier) and B6 (the answer is the longest prefix of the hashes that some block carries). The
initial state satisfies Inv. A counterexample is a z3 model of the pre-state and call, made
concrete (counterexample.py).
"""

from __future__ import annotations

from typing import Any, Callable

import z3

from cacheproof.prove.blocks import transitions
from cacheproof.prove.blocks.counterexample import (
    BlockCounterexample,
    after_terms,
    call_arguments,
    concrete_counterexample,
    decode_state,
)
from cacheproof.prove.blocks.state import (
    PoolState,
    initial_state,
    invariant,
    size_measure,
    state_invariants,
    symbolic_state,
    unchanged,
)
from cacheproof.prove.blocks.transitions import MAX_LIST, OPERATIONS, Outcome, Parameters
from cacheproof.prove.induction import Goal, ProofResult, check_goals, value_of
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics

MODEL = "blocks"
DEFAULT_BLOCKS = 5
"""Blocks of the bounded model by default (the null block and 4 usable)."""


def lookup_goals(state: PoolState, p: Parameters, outcome: Outcome) -> list[Goal]:
    """B4 (lookup part) and B6 of a lookup's answer, stated from the state and the hashes asked:
    answer j is reported exactly while hashes 0..j are all carried (B6), and it is the carrier of
    hash j with the smallest stamp (B4)."""
    num_hs = len(p.hashes)
    hits, answers = outcome.result_terms[:num_hs], outcome.result_terms[num_hs:]
    carried = [z3.Or([z3.And(b.hashed, b.value == h) for b in state.blocks]) for h in p.hashes]
    b6 = z3.And([hits[j] == z3.And(carried[: j + 1]) for j in range(num_hs)])
    b4 = []
    for j, h in enumerate(p.hashes):
        first = [
            z3.And(answers[j] == i, b.hashed, b.value == h,
                   *[z3.Implies(z3.And(o.hashed, o.value == h), b.stamp <= o.stamp) for o in state.blocks])
            for i, b in enumerate(state.blocks)
        ]
        b4.append(z3.Implies(hits[j], z3.Or(first)))
    return [Goal("B4", z3.And(b4)), Goal("B6", b6)]


def goals(state: PoolState, p: Parameters, outcome: Outcome) -> list[Goal]:
    found = [Goal(name, formula) for name, formula in state_invariants(outcome.after).items()]
    if outcome.error is not None:
        found.append(Goal("B8", unchanged(state, outcome.after)))
    if outcome.operation == "lookup":
        found = [g for g in found if g.invariant != "B4"] + lookup_goals(state, p, outcome)
    return found


def prove(
    num_blocks: int = DEFAULT_BLOCKS, semantics: BlockSemantics = BLOCK_CONTRACT, max_list: int = MAX_LIST,
    operations: tuple[str, ...] = OPERATIONS,
) -> list[ProofResult]:
    """Init => Inv, then every goal for every operation, shape and outcome at `num_blocks` blocks."""
    state = symbolic_state(num_blocks)
    inductive = invariant(state)
    results = []
    init = initial_state(num_blocks)
    init_goals = [Goal(name, formula) for name, formula in state_invariants(init).items()]
    init_outcome = Outcome("init", (0, 0), f"BlockPoolSpec({num_blocks})", z3.BoolVal(True), init, None)
    empty = transitions.symbolic_parameters(0, 0)
    for goal, proved, seconds, found in check_goals(
        [], init_goals, size_measure(state), _explainer(num_blocks, semantics, init, empty, init_outcome)
    ):
        results.append(ProofResult(goal.invariant, "init", init_outcome.name, proved, seconds, found, MODEL))
    for operation in operations:
        for shape in transitions.shapes(operation, max_list):
            p = transitions.symbolic_parameters(*shape)
            for outcome in transitions.outcomes(operation, shape, state, p, semantics):
                explain = _explainer(num_blocks, semantics, state, p, outcome)
                for goal, proved, seconds, found in check_goals(
                    [inductive, outcome.guard], goals(state, p, outcome), size_measure(state), explain
                ):
                    name = f"{outcome.name} {list(shape)}"
                    results.append(ProofResult(goal.invariant, operation, name, proved, seconds, found, MODEL))
    return results


def _explainer(
    num_blocks: int, semantics: BlockSemantics, state: PoolState, p: Parameters, outcome: Outcome
) -> Callable[[str, z3.ModelRef], BlockCounterexample]:
    def explain(invariant_name: str, model: z3.ModelRef) -> BlockCounterexample:
        read: Callable[[Any], Any] = lambda term: value_of(model, term)
        pre = decode_state([read(t) for t in after_terms(state)], num_blocks)
        after = decode_state([read(t) for t in after_terms(outcome.after)], num_blocks)
        arguments = call_arguments(
            outcome.operation, read(p.request), read(p.n),
            tuple(read(x) for x in p.blocks), tuple(read(h) for h in p.hashes),
        )
        result = outcome.decode([read(t) for t in outcome.result_terms])
        call = ("reset", ()) if outcome.operation == "init" else (outcome.operation, arguments)
        return concrete_counterexample(
            invariant_name, outcome.operation, outcome.name, num_blocks, semantics, pre, call,
            (outcome.error, result, *after),
        )

    return explain
