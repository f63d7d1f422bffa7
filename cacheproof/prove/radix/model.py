"""The radix tree's z3 model: N node places, each alive or not, with a parent, a key length and a
lock count, beside the free KV slots and the evictable and protected counters.

The model is the tree level of docs/radix-contract.md cut into micro-steps, each as the spec does
it: `split` (a match ending inside a node: the new upper part takes the first `a` tokens and the
lock count), `leaf` (an insert's new leaf: its slots taken from the free ones), `lock` and
`unlock` (lock +/- 1 on a node and every node above it, each counter moved where a count leaves
or reaches 0, as SGLang's `inc_lock_ref` and `dec_lock_ref` do), `evict` (one unlocked leaf, its
slots freed) and `reset`. A spec call is one or more of them (an insert: a split, then a leaf; an
evict: a leaf at a time); refinement.py checks that.

The invariants, each over one state (R6 over a step): W (the places form a tree: every live node's
parent chain reaches the root within N steps through live nodes, a dead place is nobody's parent,
every key at least one token), R1 (every lock count >= its live children's together, so >= 0),
R2 (the counters equal the unlocked and locked tokens), R3 (free + the tree's tokens = num_slots,
free >= 0) and R6 (a node locked before a step is alive after it).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import z3

ROOT = -1


class State(NamedTuple):
    """One state of the model over `n` places."""

    alive: list
    parent: list
    length: list
    lock: list
    free: z3.ArithRef
    evictable: z3.ArithRef
    protected: z3.ArithRef

    @property
    def n(self) -> int:
        return len(self.alive)


def fresh(name: str, n: int) -> State:
    """A state of fresh z3 constants named after `name`."""
    return State([z3.Bool(f"{name}_alive{i}") for i in range(n)], [z3.Int(f"{name}_parent{i}") for i in range(n)],
                 [z3.Int(f"{name}_len{i}") for i in range(n)], [z3.Int(f"{name}_lock{i}") for i in range(n)],
                 z3.Int(f"{name}_free"), z3.Int(f"{name}_evictable"), z3.Int(f"{name}_protected"))


def pick(values: list, index: z3.ArithRef, default: z3.ExprRef) -> z3.ExprRef:
    """values[index], `default` when index names no place (the root)."""
    term = default
    for i, value in enumerate(values):
        term = z3.If(index == i, value, term)
    return term


def above(s: State, j: int, x: z3.ArithRef) -> z3.BoolRef:
    """Place j is x or an ancestor of x (parent chains are at most n long under W)."""
    node, found = x, []
    for _ in range(s.n):
        found.append(node == j)
        node = pick(s.parent, node, z3.IntVal(ROOT))
    return z3.Or(found)


def children_locks(s: State, x: z3.ArithRef | int) -> z3.ArithRef:
    return z3.Sum([z3.If(z3.And(s.alive[c], s.parent[c] == x), s.lock[c], 0) for c in range(s.n)])


def tokens(s: State) -> z3.ArithRef:
    return z3.Sum([z3.If(s.alive[i], s.length[i], 0) for i in range(s.n)])


def well_formed(s: State) -> z3.BoolRef:
    """W: a tree whose chains reach the root within n steps through live nodes."""
    rules = []
    for i in range(s.n):
        node, reaches = z3.IntVal(i), []
        for _ in range(s.n):
            node = pick(s.parent, node, z3.IntVal(ROOT))
            reaches.append(node == ROOT)
        parent_live = z3.Or(s.parent[i] == ROOT, z3.Or([z3.And(s.parent[i] == j, s.alive[j]) for j in range(s.n) if j != i]))
        rules.append(z3.Implies(s.alive[i], z3.And(parent_live, z3.Or(reaches), s.length[i] >= 1)))
        rules.append(z3.Implies(z3.Not(s.alive[i]), z3.And([z3.Not(z3.And(s.alive[c], s.parent[c] == i)) for c in range(s.n)])))
    return z3.And(rules)


def locks_ordered(s: State) -> z3.BoolRef:
    """R1: every live lock count is at least its live children's together, and >= 0."""
    return z3.And([z3.Implies(s.alive[i], z3.And(s.lock[i] >= 0, s.lock[i] >= children_locks(s, i))) for i in range(s.n)])


def sizes_agree(s: State) -> z3.BoolRef:
    """R2: the counters are the tokens of unlocked and of locked live nodes."""
    unlocked = z3.Sum([z3.If(z3.And(s.alive[i], s.lock[i] == 0), s.length[i], 0) for i in range(s.n)])
    locked = z3.Sum([z3.If(z3.And(s.alive[i], s.lock[i] != 0), s.length[i], 0) for i in range(s.n)])
    return z3.And(s.evictable == unlocked, s.protected == locked)


def slots_kept(s: State, num_slots: z3.ArithRef) -> z3.BoolRef:
    """R3 (tree level, aggregate): free + the tree's tokens = num_slots, free >= 0."""
    return z3.And(s.free >= 0, s.free + tokens(s) == num_slots)


def locked_kept(s: State, t: State) -> z3.BoolRef:
    """R6 over a step: a node locked before it is alive after it."""
    return z3.And([z3.Implies(z3.And(s.alive[i], s.lock[i] > 0), t.alive[i]) for i in range(s.n)])


STATE_INVARIANTS: dict[str, Callable[[State, z3.ArithRef], z3.BoolRef]] = {
    "W": lambda s, num_slots: well_formed(s),
    "R1": lambda s, num_slots: locks_ordered(s),
    "R2": lambda s, num_slots: sizes_agree(s),
    "R3": lambda s, num_slots: slots_kept(s, num_slots),
}


class Params(NamedTuple):
    """A micro-step's parameters: the node it acts on, a second place (the one a split or a leaf
    fills) and a length (a split's upper part, a leaf's key)."""

    x: z3.ArithRef
    y: z3.ArithRef
    k: z3.ArithRef


def params(name: str) -> Params:
    return Params(z3.Int(f"{name}_x"), z3.Int(f"{name}_y"), z3.Int(f"{name}_k"))


def _same(s: State, t: State, places: Callable[[int], z3.BoolRef] = lambda i: z3.BoolVal(True)) -> list:
    return [z3.Implies(places(i), z3.And(t.alive[i] == s.alive[i], t.parent[i] == s.parent[i], t.length[i] == s.length[i],
                                         t.lock[i] == s.lock[i])) for i in range(s.n)]


def _lock_step(s: State, t: State, p: Params, delta: int) -> z3.BoolRef:
    on = [z3.And(s.alive[j], above(s, j, p.x)) for j in range(s.n)]
    edge = 0 if delta > 0 else 1  # the count a node leaves (lock) or reaches 0 from (unlock)
    moved = z3.Sum([z3.If(z3.And(on[j], s.lock[j] == edge), s.length[j], 0) for j in range(s.n)])
    guard = [z3.Or(p.x == ROOT, z3.Or([z3.And(p.x == j, s.alive[j]) for j in range(s.n)]))]
    if delta < 0:  # the contract's rule: a lock of the node's own (no request holds one at the tree level)
        guard.append(z3.And(p.x != ROOT, pick(s.lock, p.x, z3.IntVal(0)) > pick(
            [children_locks(s, j) for j in range(s.n)], p.x, z3.IntVal(0))))
    return z3.And(*guard, *[z3.And(t.alive[j] == s.alive[j], t.parent[j] == s.parent[j], t.length[j] == s.length[j],
                                   t.lock[j] == s.lock[j] + z3.If(on[j], delta, 0)) for j in range(s.n)],
                  t.free == s.free, t.evictable == s.evictable - delta * moved, t.protected == s.protected + delta * moved)


def lock(s: State, t: State, p: Params) -> z3.BoolRef:
    """lock + 1 on x (the root: nothing) and every node above it; a count leaving 0 moves its tokens
    from evictable to protected."""
    return _lock_step(s, t, p, +1)


def unlock(s: State, t: State, p: Params) -> z3.BoolRef:
    """lock - 1 on x and every node above it, when x holds a lock of its own; a count reaching 0
    moves its tokens back."""
    return _lock_step(s, t, p, -1)


def split(s: State, t: State, p: Params) -> z3.BoolRef:
    """Node x split after k tokens: the dead place y becomes its upper part (x's parent, k tokens,
    x's lock count), x keeps the rest below y. The counters do not move."""
    guard = z3.And(z3.Or([z3.And(p.x == i, s.alive[i]) for i in range(s.n)]),
                   z3.Or([z3.And(p.y == i, z3.Not(s.alive[i])) for i in range(s.n)]),
                   p.k >= 1, p.k < pick(s.length, p.x, z3.IntVal(0)))
    step = []
    for i in range(s.n):
        step.append(z3.Implies(p.y == i, z3.And(t.alive[i], t.parent[i] == pick(s.parent, p.x, z3.IntVal(ROOT)),
                                                t.length[i] == p.k, t.lock[i] == pick(s.lock, p.x, z3.IntVal(0)))))
        step.append(z3.Implies(p.x == i, z3.And(t.alive[i], t.parent[i] == p.y, t.length[i] == s.length[i] - p.k,
                                                t.lock[i] == s.lock[i])))
    step += _same(s, t, lambda i: z3.And(p.x != i, p.y != i))
    return z3.And(guard, *step, t.free == s.free, t.evictable == s.evictable, t.protected == s.protected)


def leaf(s: State, t: State, p: Params) -> z3.BoolRef:
    """An insert's new leaf of k tokens, unlocked, in the dead place y under x (the root or a live
    node), its k slots taken from the free ones."""
    guard = z3.And(z3.Or(p.x == ROOT, z3.Or([z3.And(p.x == i, s.alive[i]) for i in range(s.n)])),
                   z3.Or([z3.And(p.y == i, z3.Not(s.alive[i])) for i in range(s.n)]), p.k >= 1, p.k <= s.free)
    step = [z3.Implies(p.y == i, z3.And(t.alive[i], t.parent[i] == p.x, t.length[i] == p.k, t.lock[i] == 0))
            for i in range(s.n)]
    step += _same(s, t, lambda i: p.y != i)
    return z3.And(guard, *step, t.free == s.free - p.k, t.evictable == s.evictable + p.k, t.protected == s.protected)


def evict(s: State, t: State, p: Params) -> z3.BoolRef:
    """The unlocked leaf x removed, its slots freed."""
    is_leaf = [z3.And(s.alive[i], s.lock[i] == 0, z3.And([z3.Not(z3.And(s.alive[c], s.parent[c] == i)) for c in range(s.n)]))
               for i in range(s.n)]
    gone = pick(s.length, p.x, z3.IntVal(0))
    step = [z3.Implies(p.x == i, z3.And(z3.Not(t.alive[i]), t.parent[i] == s.parent[i], t.length[i] == s.length[i],
                                        t.lock[i] == s.lock[i])) for i in range(s.n)]
    step += _same(s, t, lambda i: p.x != i)
    return z3.And(z3.Or([z3.And(p.x == i, is_leaf[i]) for i in range(s.n)]), *step,
                  t.free == s.free + gone, t.evictable == s.evictable - gone, t.protected == s.protected)


def reset(s: State, t: State, p: Params) -> z3.BoolRef:
    """With no lock held, every node removed and every slot freed."""
    guard = z3.And([z3.Implies(s.alive[i], s.lock[i] == 0) for i in range(s.n)])
    return z3.And(guard, *[z3.Not(t.alive[i]) for i in range(s.n)], t.free == s.free + tokens(s),
                  t.evictable == 0, t.protected == 0)


STEPS: dict[str, Callable[[State, State, Params], z3.BoolRef]] = {
    "split": split, "leaf": leaf, "lock": lock, "unlock": unlock, "evict": evict, "reset": reset,
}
"""Every micro-step of the model, by name."""
