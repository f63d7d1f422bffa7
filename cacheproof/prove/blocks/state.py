"""The bounded model's state: a block pool of N blocks as plain z3 terms, and the invariants.

Per block: its ref count, whether it carries a hash and which (`value`), when it entered the hash
map (`stamp`: the hash map is implied, the carriers of a hash are the hashed blocks with that
value, first inserted first by stamp), whether it sits in the free queue and where (`pos`: the
queue is the queued blocks by position, head first), and how often each of R requests holds it.
`head` and `tail` bound the queued positions (a block put at the head gets a position below
`head`, one put at the tail `tail` or above); `clock` is the next insertion stamp.

Requests: the bounded model has R requests (default 2: the one a call names and one other). A
block's holdings by any number of other requests add up like one request's, so two requests lose
nothing for the invariants; the generic model (generic.py) says so for any number.

Rule: the invariants are stated here on their own, from the state only, never from the
transitions, so a wrong transition cannot weaken what is proved.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import z3

REQUESTS = 2
"""Requests of the bounded model: 0 and 1."""


class Block(NamedTuple):
    """One block's state (fields of a block without a hash: `value` and `stamp` mean nothing)."""

    ref: Any
    hashed: Any  # Bool: it carries a hash
    value: Any  # its hash
    stamp: Any  # its place in the hash map's insertion order
    queued: Any  # Bool: it is in the free queue
    pos: Any  # its place in the queue (smaller is nearer the head)
    held: tuple[Any, ...]  # holdings per request


class PoolState(NamedTuple):
    blocks: tuple[Block, ...]
    head: Any  # every queued position is > head
    tail: Any  # every queued position is < tail
    clock: Any  # every stamp of a hashed block is < clock


FIELDS = ("ref", "hashed", "value", "stamp", "queued", "pos")
"""The per-block fields besides the holdings, in `Block` order."""


def block_names(prefix: str, index: int, requests: int = REQUESTS) -> list[str]:
    return [f"{prefix}{name}_{index}" for name in FIELDS] + [f"{prefix}held_{r}_{index}" for r in range(requests)]


def symbolic_state(num_blocks: int, prefix: str = "", requests: int = REQUESTS) -> PoolState:
    """A pool state made of fresh z3 constants."""
    blocks = []
    for i in range(num_blocks):
        names = block_names(prefix, i, requests)
        ref, hashed, value, stamp, queued, pos = (
            z3.Bool(n) if f in ("hashed", "queued") else z3.Int(n) for f, n in zip(FIELDS, names)
        )
        blocks.append(Block(ref, hashed, value, stamp, queued, pos, tuple(z3.Int(n) for n in names[len(FIELDS):])))
    return PoolState(tuple(blocks), z3.Int(f"{prefix}head"), z3.Int(f"{prefix}tail"), z3.Int(f"{prefix}clock"))


def state_names(num_blocks: int, requests: int = REQUESTS) -> list[str]:
    """The constants' names of `symbolic_state(num_blocks)`, blocks first, then head, tail, clock."""
    names = [n for i in range(num_blocks) for n in block_names("", i, requests)]
    return names + ["head", "tail", "clock"]


def initial_state(num_blocks: int, requests: int = REQUESTS) -> PoolState:
    """`BlockPoolSpec(num_blocks)`: blocks 1..N-1 queued in id order, nothing hashed or held."""
    zero = z3.IntVal(0)
    blocks = tuple(
        Block(zero, z3.BoolVal(False), zero, zero, z3.BoolVal(i > 0), z3.IntVal(i), (zero,) * requests)
        for i in range(num_blocks)
    )
    return PoolState(blocks, zero, z3.IntVal(num_blocks), zero)


def count(terms: Any) -> Any:
    """How many of the Bool terms hold."""
    terms = list(terms)
    return z3.Sum([z3.If(t, 1, 0) for t in terms]) if terms else z3.IntVal(0)


def queue_length(state: PoolState) -> Any:
    return count(b.queued for b in state.blocks)


# Invariants ---------------------------------------------------------------------------------------


def well_formed(state: PoolState) -> Any:
    """WF: holdings >= 0, head < tail, queued positions strictly between them, stamps of hashed
    blocks below the clock. Not a contract invariant; the others are not inductive without it."""
    facts = [state.head < state.tail]
    for b in state.blocks:
        facts += [h >= 0 for h in b.held]
        facts.append(z3.Implies(b.queued, z3.And(state.head < b.pos, b.pos < state.tail)))
        facts.append(z3.Implies(b.hashed, b.stamp < state.clock))
    return z3.And(facts)


def queue_exact(state: PoolState) -> Any:
    """Q: the queue holds exactly the non-null blocks at ref 0 (B1 and B2 together, per block)."""
    return z3.And(
        [z3.Not(state.blocks[0].queued)]
        + [b.queued == (b.ref == 0) for b in state.blocks[1:]]
    )


def free_count_exact(state: PoolState) -> Any:
    """B1: the queue's length is the number of non-null blocks at ref 0."""
    return queue_length(state) == count(b.ref == 0 for b in state.blocks[1:])


def queue_clean(state: PoolState) -> Any:
    """B2: a queued block is non-null and at ref 0, and no two queued blocks share a place (each
    block is in the queue at most once: a block is either queued or not)."""
    facts = [z3.Not(state.blocks[0].queued)]
    facts += [z3.Implies(b.queued, b.ref == 0) for b in state.blocks[1:]]
    blocks = state.blocks
    facts += [
        z3.Implies(z3.And(a.queued, b.queued), a.pos != b.pos)
        for i, a in enumerate(blocks) for b in blocks[i + 1:]
    ]
    return z3.And(facts)


def refs_valid(state: PoolState) -> Any:
    """B3: every ref count >= 0; the null block has ref 0, no hash, no holder."""
    null = state.blocks[0]
    facts = [b.ref >= 0 for b in state.blocks]
    facts += [null.ref == 0, z3.Not(null.hashed)] + [h == 0 for h in null.held]
    return z3.And(facts)


def hash_map_exact(state: PoolState) -> Any:
    """B4 (state part): the implied hash map lists every hashed block once, under its hash, in a
    strict insertion order (distinct stamps); the lookup part is a goal of lookup (transitions)."""
    blocks = state.blocks
    return z3.And(
        [
            z3.Implies(z3.And(a.hashed, b.hashed), a.stamp != b.stamp)
            for i, a in enumerate(blocks) for b in blocks[i + 1:]
        ]
    )


def no_orphan(state: PoolState) -> Any:
    """B7: each block's ref count equals its holdings over all requests."""
    return z3.And([b.ref == z3.Sum(list(b.held)) for b in state.blocks])


def state_invariants(state: PoolState) -> dict[str, Any]:
    """WF, Q, B1, B2, B3, B4 (state part), B7 by name."""
    return {
        "WF": well_formed(state),
        "Q": queue_exact(state),
        "B1": free_count_exact(state),
        "B2": queue_clean(state),
        "B3": refs_valid(state),
        "B4": hash_map_exact(state),
        "B7": no_orphan(state),
    }


def invariant(state: PoolState) -> Any:
    return z3.And(list(state_invariants(state).values()))


def unchanged(before: PoolState, after: PoolState) -> Any:
    """B8: every observable field is the same (queue order, refs, hashes, map order, holdings)."""
    facts = []
    for a, b in zip(before.blocks, after.blocks):
        facts += [a.ref == b.ref, a.hashed == b.hashed, a.queued == b.queued]
        facts += [x == y for x, y in zip(a.held, b.held)]
        facts.append(z3.Implies(a.hashed, z3.And(a.value == b.value, a.stamp == b.stamp)))
        facts.append(z3.Implies(a.queued, a.pos == b.pos))
    return z3.And(facts)


def size_measure(state: PoolState) -> Any:
    """A measure of a state's size, made small first when a counterexample is looked for."""
    return z3.Sum([b.ref for b in state.blocks] + [z3.If(b.hashed, 1, 0) for b in state.blocks])
