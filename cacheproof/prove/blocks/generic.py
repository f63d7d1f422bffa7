"""The generic-block model: one arbitrary block of a pool of any size, held by any number of
requests, and the unbounded proofs of the per-block invariants.

Every pool-level operation acts on each block by what the call says about that block alone: how
often it names the block (`named`, any number: the lists have any length), whether allocate takes
it (it must be queued), whether reset finds any block in use (it must, if this block is). So a
per-block invariant proved for one arbitrary block (its id symbolic, `null` when it is block 0)
with arbitrary such parameters holds for every block of every pool. The block's holdings are split
into the calling request's (`caller`) and all other requests' together (`others`), which no
operation changes: any number of requests.

Proved here for every operation, unbounded: WF (holdings >= 0), Q (a block is queued exactly when
it is non-null at ref 0), B2 (per block), B3, B7. B1 then holds for every pool: by Q the queue's
blocks and the non-null blocks at ref 0 are the same set, so they have the same number. Error
outcomes change no block (B8 is proved on the bounded model, where it is a statement about all of
the state). B4 and B6 are about several blocks at once (the hash map's order, a lookup's answer)
and are proved at N only.

The generic model is stated on its own; `simulation` proves at N that each block's step in the
bounded model (transitions.py) is a step of the generic block with the parameters read off the
call, so the bounded model, which the refinement check ties to the spec, is an instance of it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import z3

from cacheproof.prove.blocks import transitions
from cacheproof.prove.blocks.state import PoolState, invariant, symbolic_state
from cacheproof.prove.blocks.transitions import MAX_LIST, OPERATIONS, held_by
from cacheproof.prove.induction import Goal, ProofResult, check_goals
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics

MODEL = "generic"


class GenericBlock(NamedTuple):
    null: Any  # Bool: the block is block 0
    ref: Any
    hashed: Any
    queued: Any
    caller: Any  # holdings by the request the call names
    others: Any  # holdings by every other request, together


class GenericCall(NamedTuple):
    named: Any  # how often the call names this block (among the blocks it acts on)
    taken: Any  # allocate takes this block
    in_use: Any  # reset finds some block in use


def symbolic_block(prefix: str = "g_") -> GenericBlock:
    return GenericBlock(
        z3.Bool(f"{prefix}null"), z3.Int(f"{prefix}ref"), z3.Bool(f"{prefix}hashed"), z3.Bool(f"{prefix}queued"),
        z3.Int(f"{prefix}caller"), z3.Int(f"{prefix}others"),
    )


def symbolic_call() -> GenericCall:
    return GenericCall(z3.Int("g_named"), z3.Bool("g_taken"), z3.Bool("g_in_use"))


def block_invariants(g: GenericBlock) -> dict[str, Any]:
    return {
        "WF": z3.And(g.caller >= 0, g.others >= 0),
        "Q": g.queued == z3.And(z3.Not(g.null), g.ref == 0),
        "B2": z3.Implies(g.queued, z3.And(z3.Not(g.null), g.ref == 0)),
        "B3": z3.And(g.ref >= 0, z3.Implies(g.null, z3.And(g.ref == 0, z3.Not(g.hashed), g.caller == 0, g.others == 0))),
        "B7": g.ref == g.caller + g.others,
    }


def steps(operation: str, g: GenericBlock, c: GenericCall, semantics: BlockSemantics = BLOCK_CONTRACT) -> list[tuple[str, Any, GenericBlock]]:
    """(outcome name, guard, post-block) of each success outcome of `operation` for this block.
    The null block is never acted on: named 0 (an error under null_block="error" and in unpin,
    else skipped under "skip"); the guard holds the calling request's own checks on this block."""
    n = c.named
    not_null = z3.Implies(g.null, n == 0)
    if operation == "allocate":
        after = g._replace(
            ref=z3.If(c.taken, 1, g.ref), hashed=z3.And(g.hashed, z3.Not(c.taken)),
            queued=z3.And(g.queued, z3.Not(c.taken)), caller=g.caller + z3.If(c.taken, 1, 0),
        )
        return [("blocks", z3.Implies(c.taken, g.queued), after)]
    if operation == "touch":
        guard = z3.And(n >= 0, not_null, z3.Implies(n > 0, z3.Or(g.ref != 0, g.hashed)))
        after = g._replace(ref=g.ref + n, queued=z3.If(z3.And(n > 0, g.ref == 0), False, g.queued), caller=g.caller + n)
        return [("None", guard, after)]
    if operation in ("free", "unpin"):  # unpin: another queue place and a watch, neither seen per block
        guard = z3.And(n >= 0, not_null, n <= g.caller)
        after = g._replace(ref=g.ref - n, queued=z3.Or(g.queued, z3.And(n > 0, g.ref - n == 0)), caller=g.caller - n)
        return [("None", guard, after)]
    if operation == "cache_blocks":
        guard = z3.And(z3.Or(n == 0, n == 1), not_null, z3.Implies(n == 1, z3.And(g.caller > 0, z3.Not(g.hashed))))
        return [("None", guard, g._replace(hashed=z3.Or(g.hashed, n == 1)))]
    if operation == "evict":
        return [("blocks", z3.And(n >= 0, not_null), g._replace(hashed=z3.And(g.hashed, n == 0)))]
    if operation == "reset":
        in_use = z3.Implies(g.ref != 0, c.in_use)
        return [("False", c.in_use, g), ("True", z3.And(in_use, z3.Not(c.in_use)), g._replace(hashed=z3.BoolVal(False)))]
    return [(BLOCK_KIND.operation(operation).result, z3.BoolVal(True), g)]  # read-only: lookup, writable, num_free


def prove(semantics: BlockSemantics = BLOCK_CONTRACT, operations: tuple[str, ...] = OPERATIONS) -> list[ProofResult]:
    """Init (every block: unheld, unhashed, at ref 0, queued unless null) and one step of every
    operation keep each per-block invariant, for any number of blocks and requests."""
    g, c = symbolic_block(), symbolic_call()
    fresh = GenericBlock(g.null, z3.IntVal(0), z3.BoolVal(False), z3.Not(g.null), z3.IntVal(0), z3.IntVal(0))
    results = [
        ProofResult(goal.invariant, "init", "a fresh block", proved, seconds, None, MODEL)
        for goal, proved, seconds, _ in check_goals([], _goals(fresh), g.ref, _no_explain)
    ]
    inductive = z3.And(list(block_invariants(g).values()))
    for operation in operations:
        for name, guard, after in steps(operation, g, c, semantics):
            results += [
                ProofResult(goal.invariant, operation, name, proved, seconds, None, MODEL)
                for goal, proved, seconds, _ in check_goals([inductive, guard], _goals(after), g.ref, _no_explain)
            ]
    return results


def _goals(g: GenericBlock) -> list[Goal]:
    return [Goal(name, formula) for name, formula in block_invariants(g).items()]


def _no_explain(invariant_name: str, model: z3.ModelRef) -> None:
    return None  # a failed generic proof is reported with its bounded counterpart's counterexample


def simulation(
    num_blocks: int, semantics: BlockSemantics = BLOCK_CONTRACT, max_list: int = MAX_LIST,
    operations: tuple[str, ...] = OPERATIONS,
) -> list[ProofResult]:
    """SIM at N blocks: from every state satisfying Inv, each success outcome of the bounded model
    moves every block as the generic block's outcome of the same name, with `named` the times the
    call names it, `taken` that allocate dequeued it and `in_use` that some block had ref != 0."""
    state = symbolic_state(num_blocks)
    inductive = invariant(state)
    results = []
    for operation in operations:
        for shape in transitions.shapes(operation, max_list):
            p = transitions.symbolic_parameters(*shape)
            acting = transitions.active(p.blocks, semantics)
            for outcome in transitions.outcomes(operation, shape, state, p, semantics):
                if outcome.error is not None:
                    continue
                facts = [_simulates(operation, outcome.name, state, outcome.after, i, p, acting, semantics) for i in range(num_blocks)]
                for goal, proved, seconds, _ in check_goals(
                    [inductive, outcome.guard], [Goal("SIM", z3.And(facts))], state.clock, _no_explain
                ):
                    results.append(ProofResult(goal.invariant, operation, f"{outcome.name} {list(shape)}", proved, seconds, None, MODEL))
    return results


def _simulates(
    operation: str, name: str, before: PoolState, after: PoolState, i: int, p: Any, acting: list[Any], semantics: BlockSemantics
) -> Any:
    def generic(state: PoolState) -> GenericBlock:
        b = state.blocks[i]
        caller = held_by(b, p.request) if operation in transitions.TAKES_REQUEST else b.held[0]
        return GenericBlock(z3.BoolVal(i == 0), b.ref, b.hashed, b.queued, caller, z3.Sum(list(b.held)) - caller)

    g, h = generic(before), generic(after)
    call = GenericCall(
        transitions.times_named(i, p.blocks, acting),
        z3.And(before.blocks[i].queued, z3.Not(after.blocks[i].queued)),
        z3.Or([b.ref != 0 for b in before.blocks]),
    )
    matching = [(guard, expected) for step_name, guard, expected in steps(operation, g, call, semantics) if step_name == name]
    if not matching:
        return z3.BoolVal(False)
    guard, expected = matching[0]
    return z3.And(guard, *[x == y for x, y in zip(expected, h)])
