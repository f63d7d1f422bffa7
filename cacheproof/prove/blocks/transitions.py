"""The bounded model's transitions: every way each pool-level operation can end, as the spec
(spec/blocks/pool.py) writes it.

A call has a shape: the operation and the lengths of its block and hash lists (concrete), with
symbolic elements: `Parameters` holds the request (0..R-1), allocate's n, the block ids and the
hashes. For each shape, `outcomes` lists the outcomes in the spec's order of checks: the argument
checks (InvalidArgumentError), then the state checks (WrongStateError, CapacityError), each with
the condition that no earlier check applied; an error leaves the state as it was (B8 is then
proved of it); the success outcome gives the post-state and the result's terms. For any state
and call of the shape exactly one outcome's guard holds.

Each check and update is a module-level function called at proof time (e.g. `double_free`), so
a test can patch one and prove the patched model. The `BlockSemantics` (spec/blocks/semantics.py)
branch in plain Python as in the spec: `null_block="skip"` leaves null blocks out of touch, free,
writable and evict and out of cache_blocks' pairs (unpin refuses the null block under both);
`misuse` changes nothing the spec does (the spec refuses misuse under both).

Out of scope: arguments of the wrong type (the model's arguments are ints), the request level
(allocate_slots, free_request, find_cached_prefix, load_slots, finish_load; no request here has a
table and no block has request-level contents, so the checks on them never apply), the partial prefix-cache entries
(cache_partial, move_hashes: the model gives each block one hash, so no block carries a partial
entry and cache_blocks promotes none, under any `hash_units`), and the announcement views
(`events()`, `reused()`, `prefix_cache_stats()`), so also the watched set unpin adds, which only
`reused()` sees.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from cacheproof.prove.blocks.state import REQUESTS, Block, PoolState, count, queue_length
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.operations import POOL_OPERATIONS
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics

OPERATIONS = POOL_OPERATIONS
"""The model's operations: the spec's pool level (spec/blocks/operations.py)."""

LIST_OPERATIONS = tuple(name for name in OPERATIONS
                        if [a.domain for a in BLOCK_KIND.operation(name).arguments if a.domain != "request"] == ["blocks"])
"""The operations whose one list is a block list (shape (k, 0)), read from the spec's table."""

TAKES_REQUEST = tuple(name for name in OPERATIONS if BLOCK_KIND.operation(name).arguments[:1]
                      and BLOCK_KIND.operation(name).arguments[0].domain == "request")
"""The operations whose first argument is the request, read from the spec's table."""

MAX_LIST = 2
"""Default longest block or hash list of a symbolic call (lookup: one more)."""


class Parameters(NamedTuple):
    request: Any
    n: Any
    blocks: tuple[Any, ...]
    hashes: tuple[Any, ...]


def symbolic_parameters(num_blocks: int, num_hashes: int) -> Parameters:
    return Parameters(
        z3.Int("request"), z3.Int("n"),
        tuple(z3.Int(f"x_{j}") for j in range(num_blocks)),
        tuple(z3.Int(f"h_{j}") for j in range(num_hashes)),
    )


class Outcome(NamedTuple):
    """One way a call of one shape ends: when (`guard`), the post-state, the error class (None on
    success) and the result: `result_terms` evaluated, then `decode` of their values."""

    operation: str
    shape: tuple[int, int]
    name: str
    guard: Any
    after: PoolState
    error: str | None
    result_terms: tuple[Any, ...] = ()
    decode: Callable[[list[Any]], Any] = lambda values: None


def shapes(operation: str, max_list: int = MAX_LIST) -> list[tuple[int, int]]:
    """(block list length, hash list length) of the symbolic calls of `operation`."""
    lengths = range(max_list + 1)
    if operation in LIST_OPERATIONS:
        return [(k, 0) for k in lengths]
    if operation == "cache_blocks":
        return [(k, m) for k in lengths for m in lengths]
    if operation == "lookup":
        return [(0, m) for m in range(max_list + 2)]
    return [(0, 0)]


# Helpers ------------------------------------------------------------------------------------------


def held_by(block: Block, request: Any) -> Any:
    """How often `request` holds `block`."""
    term = block.held[-1]
    for r in range(len(block.held) - 2, -1, -1):
        term = z3.If(request == r, block.held[r], term)
    return term


def add_holdings(block: Block, request: Any, delta: Any) -> tuple[Any, ...]:
    return tuple(h + z3.If(request == r, delta, 0) for r, h in enumerate(block.held))


def in_range(num_blocks: int, x: Any) -> Any:
    return z3.And(x >= 0, x < num_blocks)


def bad_blocks(num_blocks: int, xs: tuple[Any, ...], semantics: BlockSemantics) -> Any:
    """`_check_blocks`: an id out of range, or the null block where it is an error."""
    bad = [z3.Not(in_range(num_blocks, x)) for x in xs]
    if semantics.null_block == "error":
        bad += [x == 0 for x in xs]
    return z3.Or(bad) if bad else z3.BoolVal(False)


def active(xs: tuple[Any, ...], semantics: BlockSemantics) -> list[Any]:
    """Per element: whether the call acts on it (null blocks are skipped under "skip")."""
    return [z3.BoolVal(True) if semantics.null_block == "error" else x != 0 for x in xs]


def times_named(index: int, xs: tuple[Any, ...], acting: list[Any]) -> Any:
    """How often the call names block `index` (among the elements it acts on)."""
    return count(z3.And(a, x == index) for x, a in zip(xs, acting))


def block_at(state: PoolState, x: Any, field: Callable[[Block], Any]) -> Any:
    """`field` of the block whose id is the term `x` (an id in range)."""
    term = field(state.blocks[-1])
    for i in range(len(state.blocks) - 2, -1, -1):
        term = z3.If(x == i, field(state.blocks[i]), term)
    return term


def _error_outcomes(operation: str, shape: tuple[int, int], state: PoolState, checks: list[tuple[str, Any]]) -> tuple[list[Outcome], Any]:
    """The error outcomes of `checks` made in order, and the condition that none applied."""
    outcomes, none_yet = [], z3.BoolVal(True)
    for name, condition in checks:
        outcomes.append(Outcome(operation, shape, name, z3.And(none_yet, condition), state, name.split("/")[0]))
        none_yet = z3.And(none_yet, z3.Not(condition))
    return outcomes, none_yet


def _request_domain(p: Parameters) -> Any:
    return z3.And(p.request >= 0, p.request < REQUESTS)


# Checks a test may patch ----------------------------------------------------------------------------


def double_free(state: PoolState, p: Parameters, named: list[Any]) -> Any:
    """free's and unpin's WrongStateError: a block released more times than the request holds it."""
    return z3.Or([c > held_by(b, p.request) for b, c in zip(state.blocks, named)])


def unpin_null(xs: tuple[Any, ...]) -> Any:
    """unpin's InvalidArgumentError after the ids' check: the null block given, under either
    `null_block` (no request holds it)."""
    return z3.Or([z3.BoolVal(False)] + [x == 0 for x in xs])


def joins_tail(block: Block, readable: bool) -> Any:
    """Where a block reaching ref 0 joins the queue: the tail if it carries a hash (evicted last)
    or its holder keeps reading it (unpin: reused last), else the head (reused first)."""
    return z3.Or(block.hashed, z3.BoolVal(readable))


def writable_block(block: Block) -> Any:
    """writable's rule: the one holder may write the block in place: ref 1 and no hash."""
    return z3.And(block.ref == 1, z3.Not(block.hashed))


def touch_unhit(state: PoolState, named: list[Any]) -> Any:
    """touch's WrongStateError: a named block free (ref 0) and without a hash."""
    return z3.Or([z3.And(c > 0, b.ref == 0, z3.Not(b.hashed)) for b, c in zip(state.blocks, named)])


# Operations -----------------------------------------------------------------------------------------


def allocate(state: PoolState, p: Parameters, semantics: BlockSemantics) -> list[Outcome]:
    shape = (0, 0)
    errors, ok = _error_outcomes("allocate", shape, state, [
        ("InvalidArgumentError/n", p.n < 0),
        ("CapacityError", p.n > queue_length(state)),
    ])
    blocks, after_blocks, result = state.blocks, [], []
    for b in blocks:
        rank = count(z3.And(o.queued, o.pos < b.pos) for o in blocks if o is not b)
        taken = z3.And(b.queued, rank < p.n)
        result += [taken, rank]
        after_blocks.append(b._replace(
            ref=z3.If(taken, 1, b.ref),
            hashed=z3.And(b.hashed, z3.Not(taken)),  # lazy eviction
            queued=z3.And(b.queued, z3.Not(taken)),
            held=add_holdings(b, p.request, z3.If(taken, 1, 0)),
        ))
    after = state._replace(blocks=tuple(after_blocks))

    def decode(values: list[Any]) -> tuple[int, ...]:
        taken = [(values[2 * i + 1], i) for i in range(len(blocks)) if values[2 * i]]
        return tuple(i for _, i in sorted(taken))

    return errors + [Outcome("allocate", shape, "blocks", ok, after, None, tuple(result), decode)]


def touch(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int) -> list[Outcome]:
    shape = (num_xs, 0)
    acting = active(p.blocks, semantics)
    named = [times_named(i, p.blocks, acting) for i in range(len(state.blocks))]
    errors, ok = _error_outcomes("touch", shape, state, [
        ("InvalidArgumentError/block", bad_blocks(len(state.blocks), p.blocks, semantics)),
        ("WrongStateError/free unhashed", touch_unhit(state, named)),
    ])
    after_blocks = tuple(
        b._replace(
            ref=b.ref + c,
            queued=z3.If(z3.And(c > 0, b.ref == 0), False, b.queued),
            held=add_holdings(b, p.request, c),
        )
        for b, c in zip(state.blocks, named)
    )
    return errors + [Outcome("touch", shape, "None", ok, state._replace(blocks=after_blocks), None)]


def cache_blocks(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int, num_hs: int) -> list[Outcome]:
    shape = (num_xs, num_hs)
    n = len(state.blocks)
    xs = p.blocks
    checks = [("InvalidArgumentError/block", bad_blocks(n, xs, semantics))]
    if num_xs != num_hs:
        checks.append(("InvalidArgumentError/lengths", z3.BoolVal(True)))
        errors, _ = _error_outcomes("cache_blocks", shape, state, checks)
        return errors
    acting = active(xs, semantics)
    checks.append(("InvalidArgumentError/twice", z3.Or([z3.BoolVal(False)] + [
        z3.And(acting[i], acting[j], xs[i] == xs[j]) for i in range(num_xs) for j in range(i + 1, num_xs)
    ])))
    checks.append(("WrongStateError/not held or hashed", z3.Or([z3.BoolVal(False)] + [
        z3.And(a, z3.Or(block_at(state, x, lambda b: held_by(b, p.request)) == 0, block_at(state, x, lambda b: b.hashed)))
        for x, a in zip(xs, acting)
    ])))
    errors, ok = _error_outcomes("cache_blocks", shape, state, checks)
    after_blocks = []
    for i, b in enumerate(state.blocks):
        hashed, value, stamp = b.hashed, b.value, b.stamp
        for j in range(num_xs - 1, -1, -1):
            given = z3.And(acting[j], xs[j] == i)
            order = state.clock + count(acting[:j])
            hashed, value, stamp = z3.Or(given, hashed), z3.If(given, p.hashes[j], value), z3.If(given, order, stamp)
        after_blocks.append(b._replace(hashed=hashed, value=value, stamp=stamp))
    after = state._replace(blocks=tuple(after_blocks), clock=state.clock + count(acting))
    return errors + [Outcome("cache_blocks", shape, "None", ok, after, None)]


def carries(block: Block, value: Any) -> Any:
    return z3.And(block.hashed, block.value == value)


def lookup(state: PoolState, p: Parameters, semantics: BlockSemantics, num_hs: int) -> list[Outcome]:
    """The first inserted carrier of each hash of the longest prefix that some block carries."""
    shape = (0, num_hs)
    blocks = state.blocks
    prefix, result = z3.BoolVal(True), []
    answers = []
    for h in p.hashes:
        prefix = z3.And(prefix, z3.Or([carries(b, h) for b in blocks]))
        answer = z3.IntVal(-1)
        for i in range(len(blocks) - 1, -1, -1):
            b = blocks[i]
            first = z3.And([carries(b, h)] + [z3.Or(z3.Not(carries(o, h)), b.stamp < o.stamp) for o in blocks if o is not b])
            answer = z3.If(first, i, answer)
        answers.append(answer)
        result.append(prefix)
    terms = tuple(result + answers)

    def decode(values: list[Any]) -> tuple[int, ...]:
        found = values[:num_hs]
        return tuple(a for hit, a in zip(found, values[num_hs:]) if hit)

    return [Outcome("lookup", shape, "blocks", z3.BoolVal(True), state, None, terms, decode)]


def _release(
    operation: str, state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int, readable: bool
) -> list[Outcome]:
    """free (`readable` False) and unpin (True): ref - 1 each, one holding of the request each; the
    blocks reaching 0 join the queue together, at the tail or the head (`joins_tail`) in the order
    given. unpin also refuses the null block."""
    shape = (num_xs, 0)
    xs = p.blocks
    acting = active(xs, semantics)
    named = [times_named(i, xs, acting) for i in range(len(state.blocks))]
    checks = [("InvalidArgumentError/block", bad_blocks(len(state.blocks), xs, semantics))]
    if readable:
        checks.append(("InvalidArgumentError/null block", unpin_null(xs)))
    checks.append(("WrongStateError/double free", double_free(state, p, named)))
    errors, ok = _error_outcomes(operation, shape, state, checks)
    # hit[i][j]: block i reaches ref 0 when the call releases its element j
    hits = [
        [z3.And(acting[j], xs[j] == i, b.ref - times_named(i, xs[: j + 1], acting[: j + 1]) == 0) for j in range(num_xs)]
        for i, b in enumerate(state.blocks)
    ]
    tails = [joins_tail(b, readable) for b in state.blocks]
    to_head = [z3.Or([z3.BoolVal(False)] + [z3.And(hit[j], z3.Not(t)) for hit, t in zip(hits, tails)]) for j in range(num_xs)]
    to_tail = [z3.Or([z3.BoolVal(False)] + [z3.And(hit[j], t) for hit, t in zip(hits, tails)]) for j in range(num_xs)]
    after_blocks = []
    for i, b in enumerate(state.blocks):
        pos = b.pos
        for j in range(num_xs - 1, -1, -1):
            at_head = state.head - count(to_head[j + 1:])  # the first given is the new head
            at_tail = state.tail + count(to_tail[:j])
            pos = z3.If(hits[i][j], z3.If(tails[i], at_tail, at_head), pos)
        after_blocks.append(b._replace(
            ref=b.ref - named[i],
            queued=z3.Or([b.queued] + hits[i]),
            pos=pos,
            held=add_holdings(b, p.request, -named[i]),
        ))
    after = state._replace(
        blocks=tuple(after_blocks), head=state.head - count(to_head), tail=state.tail + count(to_tail)
    )
    return errors + [Outcome(operation, shape, "None", ok, after, None)]


def free(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int) -> list[Outcome]:
    return _release("free", state, p, semantics, num_xs, readable=False)


def unpin(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int) -> list[Outcome]:
    return _release("unpin", state, p, semantics, num_xs, readable=True)


def _given_once(
    state: PoolState, xs: tuple[Any, ...], acting: list[Any], keep: Callable[[Block], Any]
) -> tuple[tuple[Any, ...], Callable[[list[Any]], Any]]:
    """(result terms, decode) of an answer listing the given blocks for which `keep` holds in the
    pre-state, in the order given, once each (evict, writable)."""
    emitted = []
    for j, x in enumerate(xs):
        first_time = z3.And([acting[j]] + [z3.Or(z3.Not(acting[i]), xs[i] != x) for i in range(j)])
        emitted.append(z3.And(first_time, block_at(state, x, keep)))

    def decode(values: list[Any]) -> tuple[int, ...]:
        return tuple(x for e, x in zip(values[: len(xs)], values[len(xs):]) if e)

    return tuple(emitted) + xs, decode


def writable(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int) -> list[Outcome]:
    """Read-only: the given blocks (null left out under "skip") that `writable_block` holds of."""
    shape = (num_xs, 0)
    errors, ok = _error_outcomes("writable", shape, state, [
        ("InvalidArgumentError/block", bad_blocks(len(state.blocks), p.blocks, semantics)),
    ])
    terms, decode = _given_once(state, p.blocks, active(p.blocks, semantics), writable_block)
    return errors + [Outcome("writable", shape, "blocks", ok, state, None, terms, decode)]


def evict(state: PoolState, p: Parameters, semantics: BlockSemantics, num_xs: int) -> list[Outcome]:
    shape = (num_xs, 0)
    xs = p.blocks
    acting = active(xs, semantics)
    named = [times_named(i, xs, acting) for i in range(len(state.blocks))]
    errors, ok = _error_outcomes("evict", shape, state, [
        ("InvalidArgumentError/block", bad_blocks(len(state.blocks), xs, semantics)),
    ])
    after_blocks = tuple(b._replace(hashed=z3.And(b.hashed, c == 0)) for b, c in zip(state.blocks, named))
    terms, decode = _given_once(state, xs, acting, lambda b: b.hashed)
    return errors + [Outcome("evict", shape, "blocks", ok, state._replace(blocks=after_blocks), None, terms, decode)]


def reset(state: PoolState, p: Parameters, semantics: BlockSemantics) -> list[Outcome]:
    shape = (0, 0)
    in_use = z3.Or([b.ref != 0 for b in state.blocks])
    cleared = state._replace(blocks=tuple(b._replace(hashed=z3.BoolVal(False)) for b in state.blocks))
    return [
        Outcome("reset", shape, "False", in_use, state, None, (z3.BoolVal(False),), lambda v: bool(v[0])),
        Outcome("reset", shape, "True", z3.Not(in_use), cleared, None, (z3.BoolVal(True),), lambda v: bool(v[0])),
    ]


def num_free(state: PoolState, p: Parameters, semantics: BlockSemantics) -> list[Outcome]:
    return [Outcome("num_free", (0, 0), "count", z3.BoolVal(True), state, None, (queue_length(state),), lambda v: int(v[0]))]


def outcomes(
    operation: str, shape: tuple[int, int], state: PoolState, p: Parameters, semantics: BlockSemantics = BLOCK_CONTRACT
) -> list[Outcome]:
    """Every outcome of `operation` with lists of `shape` lengths, within the request domain."""
    num_xs, num_hs = shape
    module = globals()
    if operation in LIST_OPERATIONS:
        found = module[operation](state, p, semantics, num_xs)
    elif operation == "cache_blocks":
        found = cache_blocks(state, p, semantics, num_xs, num_hs)
    elif operation == "lookup":
        found = lookup(state, p, semantics, num_hs)
    else:
        found = module[operation](state, p, semantics)
    domain = _request_domain(p) if operation in TAKES_REQUEST else z3.BoolVal(True)
    return [o._replace(guard=z3.And(domain, o.guard)) for o in found]
