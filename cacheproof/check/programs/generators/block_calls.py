"""The block pool's call generator: calls drawn from the model's state.

Pools are small (1 to 12 blocks, now and then up to 40) so that the free queue empties, blocks are
reused and hashes are dropped lazily; requests are 1..4 and hashes 1..6, so that requests share
blocks and several blocks carry one hash. Each call usually suits the state: a request frees blocks
it holds (its own, last first, as a manager does), touches cached or in-use blocks, caches the
unhashed blocks it holds; lookups follow chains of hashes that are cached; an allocation often
takes the whole free queue or all but one block, so that cached free blocks at its tail are reused
(their hashes dropped lazily); caching and freeing mostly pick a request that holds blocks, and
a touch is often a prefix hit on a cached free block. An unpin releases blocks as a free does; a
writable asks of blocks mostly in use. Misuse calls (a block
freed or unpinned twice, a touch of a free unhashed block, caching a hashed block, the null block, ids out of
range, n < 0, a pool-level allocate for a request managed at the request level, a request, hash or
token that is not an int) come one in eight, and only when the semantics say misuse is checked;
every error outcome of the operation table is among them (docs/search-power.md, outcome coverage).

Where the semantics skip the null block (`null_block="skip"`, vLLM's design: block tables pad with
it), one suited touch, cache_blocks, free, writable or evict in NULL_PAD_IN carries it once or twice, at a
drawn place (in cache_blocks with a hash of its own), since the pool must pass over it there; the
outcome coverage counts those calls apart (`cases`, `case_of`). Under the contract the null block
is misuse, drawn only among the misuse calls.

The request level draws token sequences from a vocabulary of three tokens, so that requests share
prefixes; a request extends its own tokens or starts new ones. Where the semantics refuse a call
that adds no token (`no_new_tokens="refused"`, vLLM's manager), one call in eight of a running
request hands it none; where such a call is answered with the table it changes nothing, and only
the exhaustive search makes it (drawing it there too would shift every seeded program of the
contract for a call that is a no-op).

Those numbers are the small scope (`SMALL`), the one every check draws from. `--thorough` adds
two more (`THOROUGH`, docs/scope.md): the wide scope, pools of up to 64 blocks (one in four up to
512), requests 1..8 and hashes 1..16, calls that name up to 16 blocks or hashes, token runs of up
to 24 tokens from a vocabulary of four, programs of 100 calls; and the long scope, the same pools
in lives of 1,000 calls, which fill and drain a pool many times over. The wide and long programs are
drawn from a seeded `random.Random` (`ProgramOptions.seeded`) and shrunk by the checker alone.

`check --exhaustive` enumerates instead (`BlockCalls.enabled_calls`, the scopes `EXHAUSTIVE`, an
`ExhaustiveBlockScope` each, in block_exhaustive.py): from every state, every call of the scope that
suits it, and where misuse is checked the misuse the drawn calls make (docs/exhaustive.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from cacheproof.check.phases import Phase
from cacheproof.check.programs.draws import Draws, choice, coin, integer, some
from cacheproof.check.programs.generators import NOT_INTS, drawn_call, drawn_size
from cacheproof.check.programs.generators import block_exhaustive, block_loads, block_partial
from cacheproof.check.programs.generators.block_exhaustive import ExhaustiveBlockScope, enabled_calls
from cacheproof.contract.calls import Call
from cacheproof.spec.blocks.pool import NULL_BLOCK


@dataclass(frozen=True)
class BlockScope:
    """What one program of the block pool may reach: pools of 1..`blocks` blocks, one in four of
    1..`more_blocks`; the requests and hashes calls name; the token vocabulary; at most `most_named`
    blocks or hashes in one call, `most_new_tokens` tokens added by one allocate_slots and
    `most_tokens` tokens in one find_cached_prefix."""

    name: str
    blocks: int
    more_blocks: int
    requests: tuple[int, ...]
    hashes: tuple[int, ...]
    tokens: tuple[int, ...]
    most_named: int
    most_new_tokens: int
    most_tokens: int


SMALL = BlockScope("small", 12, 40, (1, 2, 3, 4), (1, 2, 3, 4, 5, 6), (0, 1, 2), 4, 6, 9)
WIDE = BlockScope("wide", 64, 512, tuple(range(1, 9)), tuple(range(1, 17)), (0, 1, 2, 3), 16, 24, 32)
LONG = replace(WIDE, name="long")
SCOPES = {scope.name: scope for scope in (SMALL, WIDE, LONG)}



EXHAUSTIVE = block_exhaustive.EXHAUSTIVE
"""The exhaustive scopes, declared where `generators.exhaustive_scopes` reads a kind's scopes."""
THOROUGH = (Phase(SMALL, 1000, 100), Phase(WIDE, 600, 100, shrink=False), Phase(LONG, 60, 1000, shrink=False))
"""`cacheproof check --spec blocks --thorough`: 220,000 calls, under a minute of CPU (docs/scope.md)."""
NULL_PAD_IN = 4
"""Where the null block is skipped, one suited call in this many that takes blocks carries it."""
NULL_BLOCK_CASE = "returns with the null block"
"""The coverage row of a call that carries the null block and returns (the pool passed over it)."""
_BLOCKS_AT = {"touch": 1, "cache_blocks": 1, "free": 1, "writable": 0, "evict": 0}
"""Where each operation that may carry the null block takes its blocks."""


class BlockCalls:
    """`CallGenerator` of the block pool kind, drawing from `scope` (see the module docstring)."""

    def __init__(self, scope: BlockScope = SMALL) -> None:
        self.scope = scope

    def size(self, draws: Draws) -> int:
        """1..`blocks` blocks (12 in the small scope), one pool in four up to `more_blocks` (40)."""
        return drawn_size(draws, self.scope.blocks, self.scope.more_blocks)

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        queue, blocks, holdings = model.snapshot()
        state = _State(queue, blocks, dict(holdings), dict(model.tables()), model, self.scope)
        return drawn_call(draws, state, operations, misuse, _SUITED, _MISUSE)

    def exhaustive_sizes(self, scope: ExhaustiveBlockScope) -> tuple[int, ...]:
        """The pool sizes of `scope`."""
        return scope.blocks

    def enabled_calls(self, scope: ExhaustiveBlockScope, model: Any, operations: tuple[str, ...],
                      misuse: bool) -> tuple[Call, ...]:
        """Every call of `scope` among `operations` that suits the model's state, then (when
        `misuse`) its misuse calls (see `ExhaustiveBlockScope`), each operation in table order."""
        queue, blocks, holdings = model.snapshot()
        return enabled_calls(_State(queue, blocks, dict(holdings), dict(model.tables()), model, scope), scope,
                             operations, misuse)

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """The coverage rows besides the outcomes: under `semantics` (None: the contract), a call
        of each operation that takes blocks carrying the null block, where it is skipped."""
        if getattr(semantics, "null_block", None) != "skip":
            return ()
        return tuple((operation, NULL_BLOCK_CASE) for operation in _BLOCKS_AT)

    def case_of(self, call: Call) -> str | None:
        """The row of `cases` that `call` counts towards when it returns, if any."""
        at = _BLOCKS_AT.get(call.op)
        if at is None or len(call.args) <= at:
            return None
        blocks = call.args[at]
        return NULL_BLOCK_CASE if isinstance(blocks, tuple) and NULL_BLOCK in blocks else None


class _State:
    """What the drawers read: the model's snapshot and request tables."""

    def __init__(self, queue: tuple, blocks: tuple, holdings: dict, tables: dict, model: Any, scope: BlockScope) -> None:
        self.queue, self.blocks, self.holdings, self.tables, self.model = queue, blocks, holdings, tables, model
        self.scope, self.requests, self.hashes = scope, scope.requests, scope.hashes
        self.num_blocks = len(blocks)
        self.hashed = [b for b, (_, h) in enumerate(blocks) if h is not None]
        self.in_use = [b for b, (ref, _) in enumerate(blocks) if ref > 0 and b != 0]
        self.skips_null = getattr(getattr(model, "semantics", None), "null_block", None) == "skip"
        self.refuses_no_new_tokens = getattr(getattr(model, "semantics", None), "no_new_tokens", None) == "refused"

    @property
    def pool_requests(self) -> list[int]:
        """The scope's requests not managed at the request level (the levels never share one)."""
        return [r for r in self.requests if r not in self.tables]

    @cached_property
    def covers(self) -> dict[int, int]:
        """The hash units each hashed block's hash covers (the model's `entries`)."""
        return {block: cover for block, cover, _ in self.model.entries()}

    def pool_request(self, draws: Draws) -> int:
        """A request not managed at the request level, or a new one if every request is."""
        return choice(draws, self.pool_requests or [self.requests[-1] + 1])

    def held_by(self, request: int) -> list[int]:
        return list(self.holdings.get(request, ()))

    def holder(self, draws: Draws) -> int:
        """Mostly a pool-level request that holds blocks (to cache or free them), else any."""
        holders = [r for r in sorted(self.holdings) if r not in self.tables]
        if holders and integer(draws, 0, 3) > 0:
            return choice(draws, holders)
        return self.pool_request(draws)


def _subsequence(draws: Draws, items: list, most: int) -> tuple:
    if not items:
        return ()
    return some(draws, items, most)


def _distinct(draws: Draws, items: list, most: int) -> tuple:
    return tuple(dict.fromkeys(_subsequence(draws, items, most)))


def _padded(draws: Draws, s: _State, blocks: tuple, hashes: tuple | None = None) -> tuple[tuple, tuple | None]:
    """`blocks` (and their `hashes`, for cache_blocks) with the null block put in once or twice, at
    drawn places, in one call of NULL_PAD_IN where the semantics skip it; unchanged otherwise."""
    if not s.skips_null or draws.randrange(NULL_PAD_IN):
        return blocks, hashes
    padded, values = list(blocks), None if hashes is None else list(hashes)
    for _ in range(integer(draws, 1, 2)):
        at = integer(draws, 0, len(padded))
        padded.insert(at, NULL_BLOCK)
        if values is not None:
            values.insert(at, choice(draws, s.hashes))
    return tuple(padded), None if values is None else tuple(values)


def _allocate(draws: Draws, s: _State) -> Call:
    free = len(s.queue)
    n = choice(draws, (free, max(free - 1, 0))) if coin(draws) else integer(draws, 0, free + 1)
    return Call("allocate", (s.pool_request(draws), n))


def _touch(draws: Draws, s: _State) -> Call:
    request = s.pool_request(draws)
    cached_free = [b for b in s.queue if s.blocks[b][1] is not None]
    pool = cached_free if cached_free and coin(draws) else s.hashed + s.in_use
    blocks, _ = _padded(draws, s, _distinct(draws, pool, s.scope.most_named))
    return Call("touch", (request, blocks))


def _cache_blocks(draws: Draws, s: _State) -> Call:
    """Unhashed blocks the request holds, and blocks carrying a partial entry where a place past
    its cover promotes them (block_partial.promotable)."""
    request = s.holder(draws)
    chosen = _distinct(draws, block_partial.cachable(s, request), s.scope.most_named)
    blocks, hashes = _padded(draws, s, chosen, tuple(choice(draws, s.hashes) for _ in chosen))
    return Call("cache_blocks", (request, *block_partial.promotable(s, blocks, hashes)))


def _lookup(draws: Draws, s: _State) -> Call:
    known = sorted({h for _, h in s.blocks if h is not None}) or list(s.hashes)
    return Call("lookup", (_subsequence(draws, known + list(s.hashes[:1]), s.scope.most_named),))


def _released(draws: Draws, s: _State) -> tuple[int, tuple]:
    """A request and some of the blocks it holds, last first or as held (none if it holds none)."""
    request = s.holder(draws)
    held = s.held_by(request)
    if not held:
        return request, ()
    count = integer(draws, 1, len(held))
    order = choice(draws, ("last first", "as held"))
    return request, tuple(held[-count:][::-1] if order == "last first" else held[:count])


def _free(draws: Draws, s: _State) -> Call:
    request, blocks = _released(draws, s)
    return Call("free", (request, _padded(draws, s, blocks)[0]))


def _unpin(draws: Draws, s: _State) -> Call:
    """As free, never with the null block (no pool passes over it there: it is misuse)."""
    return Call("unpin", _released(draws, s))


def _writable(draws: Draws, s: _State) -> Call:
    """Mostly blocks in use (some held once and unhashed), else any."""
    pool = s.in_use if s.in_use and coin(draws) else list(range(1, s.num_blocks))
    return Call("writable", (_padded(draws, s, _distinct(draws, pool or [0], s.scope.most_named))[0],))


def _evict(draws: Draws, s: _State) -> Call:
    free_hashed = [b for b in s.queue if s.blocks[b][1] is not None]
    blocks = _distinct(draws, free_hashed or list(range(1, s.num_blocks)) or [0], s.scope.most_named)
    return Call("evict", (_padded(draws, s, blocks)[0],))


def _reset(draws: Draws, s: _State) -> Call:
    return Call("reset", ())


def _num_free(draws: Draws, s: _State) -> Call:
    return Call("num_free", ())


def _tokens(draws: Draws, s: _State) -> tuple:
    return some(draws, s.scope.tokens, s.scope.most_tokens)


def _find_cached_prefix(draws: Draws, s: _State) -> Call:
    return Call("find_cached_prefix", (_tokens(draws, s),))


def _allocate_slots(draws: Draws, s: _State) -> Call:
    managed = block_loads.running(s, [r for r in s.requests if r not in s.holdings or r in s.tables])
    request = choice(draws, managed or [s.requests[-1] + 1])
    previous = s.model.tokens_of(request)
    if previous and s.refuses_no_new_tokens and integer(draws, 0, 7) == 0:  # one in eight: no new token
        return Call("allocate_slots", (request, previous))
    extra = some(draws, s.scope.tokens, s.scope.most_new_tokens)[: s.model.most_new_tokens(request)]
    return Call("allocate_slots", (request, previous + extra))


def _free_request(draws: Draws, s: _State) -> Call:
    requests = sorted(s.tables) or list(s.requests)
    return Call("free_request", (choice(draws, requests),))


_SUITED = {
    "allocate": _allocate, "touch": _touch, "cache_blocks": _cache_blocks, "lookup": _lookup, "free": _free,
    "unpin": _unpin, "writable": _writable, "evict": _evict, "reset": _reset, "num_free": _num_free, "find_cached_prefix": _find_cached_prefix,
    "allocate_slots": _allocate_slots, "free_request": _free_request, **block_partial.SUITED, **block_loads.SUITED,
}


def _misuse_free(draws: Draws, s: _State) -> Call:
    request = s.pool_request(draws)
    not_held = [b for b in range(1, s.num_blocks) if b not in s.holdings.get(request, ())]
    return Call("free", (request, _distinct(draws, not_held or [0], most=2)))


def _misuse_unpin(draws: Draws, s: _State) -> Call:
    """A block the request does not hold, the null block or an id out of range."""
    request = s.pool_request(draws)
    not_held = [b for b in range(1, s.num_blocks) if b not in s.holdings.get(request, ())]
    return Call("unpin", (request, (choice(draws, not_held + [0, s.num_blocks]),)))


def _misuse_touch(draws: Draws, s: _State) -> Call:
    idle = [b for b in s.queue if s.blocks[b][1] is None]
    return Call("touch", (s.pool_request(draws), (choice(draws, idle + [0, s.num_blocks]),)))


def _misuse_cache(draws: Draws, s: _State) -> Call:
    request = s.pool_request(draws)
    choices = s.hashed + [0] + [b for b in range(1, s.num_blocks) if b not in s.holdings.get(request, ())]
    block = choice(draws, choices)
    return Call("cache_blocks", (request, (block,), (choice(draws, s.hashes),)))


def _misuse_allocate(draws: Draws, s: _State) -> Call:
    if s.tables and coin(draws):
        return Call("allocate", (choice(draws, sorted(s.tables)), integer(draws, 0, 2)))
    return Call("allocate", (s.pool_request(draws), integer(draws, -2, -1)))


def _misuse_lookup(draws: Draws, s: _State) -> Call:
    return Call("lookup", (_subsequence(draws, list(s.hashes), 2) + (choice(draws, NOT_INTS),),))


def _misuse_find_cached_prefix(draws: Draws, s: _State) -> Call:
    return Call("find_cached_prefix", (_tokens(draws, s) + (choice(draws, NOT_INTS),),))


def _out_of_range(operation: str) -> Any:
    """The misuse drawer of an operation whose one argument is blocks: an id out of range."""
    def draw(draws: Draws, s: _State) -> Call:
        return Call(operation, ((choice(draws, (-1, s.num_blocks, s.num_blocks + 3)),),))
    return draw


def _misuse_free_request(draws: Draws, s: _State) -> Call:
    if coin(draws):
        return Call("free_request", (choice(draws, NOT_INTS),))
    unmanaged = [r for r in s.requests if r not in s.tables]
    return Call("free_request", (choice(draws, unmanaged or [s.requests[-1] + 1]),))


def _misuse_allocate_slots(draws: Draws, s: _State) -> Call:
    if coin(draws):
        bad = choice(draws, NOT_INTS)
        if coin(draws):
            return Call("allocate_slots", (bad, _tokens(draws, s)))
        return Call("allocate_slots", (choice(draws, s.requests), _tokens(draws, s) + (bad,)))
    if s.tables:
        request = choice(draws, sorted(s.tables))
        return Call("allocate_slots", (request, _tokens(draws, s) + (9,)))
    pool_requests = sorted(s.holdings)
    request = choice(draws, pool_requests or list(s.requests))
    return Call("allocate_slots", (request, _tokens(draws, s)))


_MISUSE = {
    **_SUITED,
    "allocate": _misuse_allocate, "touch": _misuse_touch, "cache_blocks": _misuse_cache, "free": _misuse_free,
    "unpin": _misuse_unpin, "writable": _out_of_range("writable"), "evict": _out_of_range("evict"), "free_request": _misuse_free_request, "allocate_slots": _misuse_allocate_slots,
    "lookup": _misuse_lookup, "find_cached_prefix": _misuse_find_cached_prefix, **block_partial.MISUSE,
    **block_loads.MISUSE,
}
