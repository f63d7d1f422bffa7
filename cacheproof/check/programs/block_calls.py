"""The block pool's call generator: calls drawn from the model's state.

Pools are small (1 to 12 blocks, now and then up to 40) so that the free queue empties, blocks are
reused and hashes are dropped lazily; requests are 1..4 and hashes 1..6, so that requests share
blocks and several blocks carry one hash. Each call usually suits the state: a request frees blocks
it holds (its own, last first, as a manager does), touches cached or in-use blocks, caches the
unhashed blocks it holds; lookups follow chains of hashes that are cached; an allocation often
takes the whole free queue or all but one block, so that cached free blocks at its tail are reused
(their hashes dropped lazily); caching and freeing mostly pick a request that holds blocks, and
a touch is often a prefix hit on a cached free block. Misuse calls (a block
freed twice, a touch of a free unhashed block, caching a hashed block, the null block, ids out of
range, n < 0) come one in eight, and only when the semantics say misuse is checked.

The request level draws token sequences from a vocabulary of three tokens, so that requests share
prefixes; a request extends its own tokens or starts new ones.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from cacheproof.check.programs.generators import Draw
from cacheproof.contract.calls import Call

REQUESTS = (1, 2, 3, 4)
HASHES = (1, 2, 3, 4, 5, 6)
TOKENS = (0, 1, 2)
_MISUSE_PERCENT = 12


class BlockCalls:
    """`CallGenerator` of the block pool kind (see the module docstring)."""

    def sizes(self) -> st.SearchStrategy[int]:
        return st.one_of(st.integers(1, 12), st.integers(1, 40))

    def draw_call(self, draw: Draw, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        queue, blocks, holdings = model.snapshot()
        state = _State(queue, blocks, dict(holdings), dict(model.tables()), model)
        operation = draw(st.sampled_from(operations), label="operation")
        if misuse and draw(st.integers(0, 99), label="misuse?") < _MISUSE_PERCENT:
            return _MISUSE[operation](draw, state)
        return _SUITED[operation](draw, state)


class _State:
    """What the drawers read: the model's snapshot and request tables."""

    def __init__(self, queue: tuple, blocks: tuple, holdings: dict, tables: dict, model: Any) -> None:
        self.queue, self.blocks, self.holdings, self.tables, self.model = queue, blocks, holdings, tables, model
        self.num_blocks = len(blocks)
        self.hashed = [b for b, (_, h) in enumerate(blocks) if h is not None]
        self.in_use = [b for b, (ref, _) in enumerate(blocks) if ref > 0 and b != 0]

    def pool_request(self, draw: Draw) -> int:
        """A request not managed at the request level (the levels never share a request)."""
        free = [r for r in REQUESTS if r not in self.tables] or [REQUESTS[-1] + 1]
        return draw(st.sampled_from(free), label="request")

    def held_by(self, request: int) -> list[int]:
        return list(self.holdings.get(request, ()))

    def holder(self, draw: Draw) -> int:
        """Mostly a pool-level request that holds blocks (to cache or free them), else any."""
        holders = [r for r in sorted(self.holdings) if r not in self.tables]
        if holders and draw(st.integers(0, 3), label="a holder?") > 0:
            return draw(st.sampled_from(holders), label="request")
        return self.pool_request(draw)


def _subsequence(draw: Draw, items: list, label: str, most: int = 4) -> tuple:
    if not items:
        return ()
    picks = draw(st.lists(st.sampled_from(items), min_size=1, max_size=most), label=label)
    return tuple(picks)


def _distinct(draw: Draw, items: list, label: str, most: int = 4) -> tuple:
    return tuple(dict.fromkeys(_subsequence(draw, items, label, most)))


def _allocate(draw: Draw, s: _State) -> Call:
    free = len(s.queue)
    n = draw(st.one_of(st.integers(0, free + 1), st.sampled_from((free, max(free - 1, 0)))), label="n")
    return Call("allocate", (s.pool_request(draw), n))


def _touch(draw: Draw, s: _State) -> Call:
    request = s.pool_request(draw)
    cached_free = [b for b in s.queue if s.blocks[b][1] is not None]
    pool = cached_free if cached_free and draw(st.booleans(), label="a prefix hit?") else s.hashed + s.in_use
    return Call("touch", (request, _distinct(draw, pool, "blocks")))


def _cache_blocks(draw: Draw, s: _State) -> Call:
    request = s.holder(draw)
    unhashed = [b for b in dict.fromkeys(s.held_by(request)) if s.blocks[b][1] is None]
    chosen = _distinct(draw, unhashed, "blocks")
    return Call("cache_blocks", (request, chosen, tuple(draw(st.sampled_from(HASHES), label="hash") for _ in chosen)))


def _lookup(draw: Draw, s: _State) -> Call:
    known = sorted({h for _, h in s.blocks if h is not None}) or list(HASHES)
    return Call("lookup", (_subsequence(draw, known + list(HASHES[:1]), "hashes"),))


def _free(draw: Draw, s: _State) -> Call:
    request = s.holder(draw)
    held = s.held_by(request)
    if not held:
        return Call("free", (request, ()))
    count = draw(st.integers(1, len(held)), label="how many")
    order = draw(st.sampled_from(("last first", "as held")), label="order")
    chosen = held[-count:][::-1] if order == "last first" else held[:count]
    return Call("free", (request, tuple(chosen)))


def _evict(draw: Draw, s: _State) -> Call:
    free_hashed = [b for b in s.queue if s.blocks[b][1] is not None]
    return Call("evict", (_distinct(draw, free_hashed or list(range(1, s.num_blocks)) or [0], "blocks"),))


def _reset(draw: Draw, s: _State) -> Call:
    return Call("reset", ())


def _num_free(draw: Draw, s: _State) -> Call:
    return Call("num_free", ())


def _tokens(draw: Draw, s: _State, label: str) -> tuple:
    return tuple(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=9), label=label))


def _find_cached_prefix(draw: Draw, s: _State) -> Call:
    return Call("find_cached_prefix", (_tokens(draw, s, "tokens"),))


def _allocate_slots(draw: Draw, s: _State) -> Call:
    managed = [r for r in REQUESTS if r not in s.holdings or r in s.tables]
    request = draw(st.sampled_from(managed or [REQUESTS[-1] + 1]), label="request")
    previous = s.model.tokens_of(request)
    extra = tuple(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6), label="new tokens"))
    return Call("allocate_slots", (request, previous + extra))


def _free_request(draw: Draw, s: _State) -> Call:
    requests = sorted(s.tables) or list(REQUESTS)
    return Call("free_request", (draw(st.sampled_from(requests), label="request"),))


_SUITED = {
    "allocate": _allocate, "touch": _touch, "cache_blocks": _cache_blocks, "lookup": _lookup, "free": _free,
    "evict": _evict, "reset": _reset, "num_free": _num_free, "find_cached_prefix": _find_cached_prefix,
    "allocate_slots": _allocate_slots, "free_request": _free_request,
}


def _misuse_free(draw: Draw, s: _State) -> Call:
    request = s.pool_request(draw)
    not_held = [b for b in range(1, s.num_blocks) if b not in s.holdings.get(request, ())]
    return Call("free", (request, _distinct(draw, not_held or [0], "blocks", most=2)))


def _misuse_touch(draw: Draw, s: _State) -> Call:
    idle = [b for b in s.queue if s.blocks[b][1] is None]
    return Call("touch", (s.pool_request(draw), (draw(st.sampled_from(idle + [0, s.num_blocks])),)))


def _misuse_cache(draw: Draw, s: _State) -> Call:
    request = s.pool_request(draw)
    choices = s.hashed + [0] + [b for b in range(1, s.num_blocks) if b not in s.holdings.get(request, ())]
    block = draw(st.sampled_from(choices), label="block")
    return Call("cache_blocks", (request, (block,), (draw(st.sampled_from(HASHES)),)))


def _misuse_allocate(draw: Draw, s: _State) -> Call:
    return Call("allocate", (s.pool_request(draw), draw(st.integers(-2, -1), label="n")))


def _misuse_evict(draw: Draw, s: _State) -> Call:
    return Call("evict", ((draw(st.sampled_from((-1, s.num_blocks, s.num_blocks + 3)), label="block"),),))


def _misuse_free_request(draw: Draw, s: _State) -> Call:
    unmanaged = [r for r in REQUESTS if r not in s.tables]
    return Call("free_request", (draw(st.sampled_from(unmanaged or [REQUESTS[-1] + 1])),))


def _misuse_allocate_slots(draw: Draw, s: _State) -> Call:
    if s.tables:
        request = draw(st.sampled_from(sorted(s.tables)), label="request")
        return Call("allocate_slots", (request, _tokens(draw, s, "unrelated tokens") + (9,)))
    pool_requests = sorted(s.holdings)
    request = draw(st.sampled_from(pool_requests or list(REQUESTS)), label="request")
    return Call("allocate_slots", (request, _tokens(draw, s, "tokens")))


_MISUSE = {
    **_SUITED,
    "allocate": _misuse_allocate, "touch": _misuse_touch, "cache_blocks": _misuse_cache, "free": _misuse_free,
    "evict": _misuse_evict, "free_request": _misuse_free_request, "allocate_slots": _misuse_allocate_slots,
}
