"""`check --exhaustive` of the block pool: the scopes, and every call of a scope that suits a state.

From every state, every call of the scope among the operations checked that suits it: touch,
cache_blocks, writable and evict of every ordered choice of up to `most_named` suitable blocks,
every hash of cache_blocks, lookup of every run of up to `most_named` hashes, free and unpin of
every run of a request's blocks (last first, or as held), allocate of 0..the free blocks,
find_cached_prefix of every run of up to `most_tokens` tokens, allocate_slots extending a request's
tokens by every run of up to `most_new_tokens` (a running request's by none too; a loading request
runs once its load finishes), load_slots of every request with no blocks with the same runs
(keeping 0 or 1 block free), finish_load of every loading request; where misuse is checked, the
misuse the drawn calls make (and allocate_slots of a loading request), on the same values
(docs/exhaustive.md). The state read is the drawers' (`block_calls._State`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations, product
from typing import Any

from cacheproof.check.programs.generators import NOT_INTS, block_loads, block_partial
from cacheproof.contract.calls import Call
from cacheproof.spec.blocks.pool import NULL_BLOCK



@dataclass(frozen=True)
class ExhaustiveBlockScope:
    """What `check --exhaustive` tries from every state of the block pool: pools of each of `blocks`
    blocks (the null block 0 among them); requests, hashes and tokens from these tuples; touch,
    cache_blocks and evict of every ordered choice of up to `most_named` suitable blocks, every hash
    of cache_blocks, lookup of every run of up to `most_named` hashes, free of every run of a request's
    blocks (last first, or as held), allocate of 0..the free blocks, find_cached_prefix of every run
    of up to `most_tokens` tokens, allocate_slots extending a request's tokens by every run of up to
    `most_new_tokens` (a running request's by none too); where misuse is checked, the misuse the
    drawn calls make, on the same values.
    `depth`: the calls per path a search goes to when no --depth is given."""

    name: str
    blocks: tuple[int, ...]
    requests: tuple[int, ...]
    hashes: tuple[int, ...]
    tokens: tuple[int, ...]
    most_named: int
    most_tokens: int
    most_new_tokens: int
    depth: int


EXHAUSTIVE = {scope.name: scope for scope in (
    ExhaustiveBlockScope("tiny", (2, 3), (1, 2), (1, 2), (0, 1), 2, 4, 2, 3),
    ExhaustiveBlockScope("four-blocks", (2, 3, 4), (1, 2), (1, 2), (0, 1), 2, 4, 2, 3),
    ExhaustiveBlockScope("long-requests", (5,), (1,), (1,), (0, 1), 1, 5, 3, 4),
    ExhaustiveBlockScope("two-groups", (8,), (1,), (1,), (0, 1), 1, 6, 3, 4),
)}
"""The exhaustive scopes, the default first (docs/exhaustive.md gives their states and times)."""


def enabled_calls(s: Any, scope: ExhaustiveBlockScope, operations: tuple[str, ...], misuse: bool) -> tuple[Call, ...]:
    """Every call of `scope` among `operations` that suits the state `s`, then (when `misuse`) its
    misuse calls, each operation in table order, each call once."""
    calls = [call for name in operations for call in _EVERY[name](s, scope)]
    if misuse:
        calls += [call for name in operations for call in _EVERY_MISUSE.get(name, _none)(s, scope)]
    return tuple({repr(call): call for call in calls}.values())


def _runs(items: list, most: int) -> list[tuple]:
    """Every ordered choice of 1..`most` distinct `items`."""
    return [run for length in range(1, most + 1) for run in permutations(items, length)]


def _words(letters: tuple, most: int) -> list[tuple]:
    """Every sequence of 1..`most` of `letters`, repeats allowed."""
    return [word for length in range(1, most + 1) for word in product(letters, repeat=length)]


def _none(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return []


def _every_allocate(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("allocate", (r, n)) for r in s.pool_requests for n in range(len(s.queue) + 1)]


def _every_touch(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    touchable = sorted(set(s.hashed + s.in_use) - {NULL_BLOCK})
    return [Call("touch", (r, run)) for r in s.pool_requests for run in _runs(touchable, scope.most_named)]


def _every_cache_blocks(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    """Runs of the unhashed blocks a request holds and of those carrying a partial entry, each
    where a place past its cover promotes it (block_partial.promotable)."""
    calls = []
    for r in s.pool_requests:
        calls += [Call("cache_blocks", (r, *block_partial.promotable(s, run, hashes)))
                  for run in _runs(block_partial.cachable(s, r), scope.most_named)
                  for hashes in product(scope.hashes, repeat=len(run))]
    return calls


def _every_lookup(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("lookup", (run,)) for run in _words(scope.hashes, scope.most_named)]


def _every_release(operation: str) -> Any:
    """Every call of free or unpin: each run of a request's blocks, last first or as held."""
    def every(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
        calls = []
        for r in s.pool_requests:
            held = s.held_by(r)
            for count in range(1, len(held) + 1):
                calls += [Call(operation, (r, tuple(held[-count:][::-1]))), Call(operation, (r, tuple(held[:count])))]
        return calls
    return every


def _every_run(operation: str) -> Any:
    """Every call of an operation whose one argument is blocks: each run of the usable blocks."""
    def every(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
        return [Call(operation, (run,)) for run in _runs(list(range(1, s.num_blocks)), scope.most_named)]
    return every


def _every_find_cached_prefix(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("find_cached_prefix", (word,)) for word in _words(scope.tokens, scope.most_tokens)]


def _every_allocate_slots(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    managed = block_loads.running(s, [r for r in scope.requests if r not in s.holdings or r in s.tables])
    extended = [Call("allocate_slots", (r, s.model.tokens_of(r) + extra)) for r in managed
                for extra in _words(scope.tokens, _most_new_tokens(s.model, r, scope))]
    return extended + [Call("allocate_slots", (r, s.model.tokens_of(r))) for r in block_loads.running(s, sorted(s.tables))]


def _most_new_tokens(model: Any, request: int, scope: ExhaustiveBlockScope) -> int:
    """The scope's most new tokens of a call, fewer where the model bounds the request's next call."""
    bound = model.most_new_tokens(request)
    return scope.most_new_tokens if bound is None else min(scope.most_new_tokens, bound)


def _every_load_slots(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("load_slots", (r, word), kwargs) for r in block_loads.fresh(s)
            for word in _words(scope.tokens, scope.most_new_tokens) for kwargs in ({}, {"reserve": 1})]


def _every_finish_load(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("finish_load", (r,)) for r in s.model.loading()]


def _every_free_request(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("free_request", (r,)) for r in sorted(s.tables)]


_EVERY = {
    "allocate": _every_allocate, "touch": _every_touch, "cache_blocks": _every_cache_blocks, "lookup": _every_lookup,
    "free": _every_release("free"), "unpin": _every_release("unpin"), "writable": _every_run("writable"),
    "evict": _every_run("evict"), "reset": lambda s, scope: [Call("reset", ())],
    "num_free": lambda s, scope: [Call("num_free", ())], "find_cached_prefix": _every_find_cached_prefix,
    "allocate_slots": _every_allocate_slots, "free_request": _every_free_request, **block_partial.EVERY,
    "load_slots": _every_load_slots, "finish_load": _every_finish_load,
}


def _misuse_every_allocate(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return ([Call("allocate", (r, n)) for r in s.pool_requests for n in (-1, len(s.queue) + 1)]
            + [Call("allocate", (r, 1)) for r in sorted(s.tables)])


def _misuse_every_touch(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    idle = [b for b in s.queue if s.blocks[b][1] is None]
    return [Call("touch", (r, (b,))) for r in s.pool_requests for b in idle + [NULL_BLOCK, s.num_blocks]]


def _misuse_every_cache_blocks(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("cache_blocks", (r, (b,), (scope.hashes[0],))) for r in s.pool_requests
            for b in sorted(set(s.hashed) | {NULL_BLOCK} | (set(range(1, s.num_blocks)) - set(s.held_by(r))))]


def _misuse_every_release(operation: str) -> Any:
    """Every misuse of free or unpin: each block (the null block and one out of range among them)
    that the request does not hold."""
    def every(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
        return [Call(operation, (r, (b,))) for r in s.pool_requests
                for b in range(s.num_blocks + 1) if b not in s.held_by(r)]
    return every


def _misuse_every_out_of_range(operation: str) -> Any:
    def every(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
        return [Call(operation, ((b,),)) for b in (-1, s.num_blocks)]
    return every


def _misuse_every_lookup(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("lookup", ((scope.hashes[0], bad),)) for bad in NOT_INTS]


def _misuse_every_find_cached_prefix(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return [Call("find_cached_prefix", ((scope.tokens[0], bad),)) for bad in NOT_INTS]


def _misuse_every_allocate_slots(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    pool_level = [r for r in sorted(s.holdings) if r not in s.tables]
    return ([Call("allocate_slots", (bad, (scope.tokens[0],))) for bad in NOT_INTS]
            + [Call("allocate_slots", (r, (scope.tokens[0],))) for r in pool_level]
            + [Call("allocate_slots", (r, (scope.tokens[0], scope.tokens[0] + 9))) for r in sorted(s.tables)])


def _misuse_every_load_slots(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return ([Call("load_slots", (bad, (scope.tokens[0],))) for bad in NOT_INTS]
            + [Call("load_slots", (scope.requests[0], (scope.tokens[0],)), {"reserve": bad}) for bad in (-1, *NOT_INTS)]
            + [Call("load_slots", (r, (scope.tokens[0],))) for r in sorted(s.tables)])


def _misuse_every_finish_load(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return ([Call("finish_load", (bad,)) for bad in NOT_INTS]
            + [Call("finish_load", (r,)) for r in block_loads.running(s, scope.requests)]
            + [Call("allocate_slots", (r, s.model.tokens_of(r) + (scope.tokens[0],))) for r in s.model.loading()])


def _misuse_every_free_request(s: Any, scope: ExhaustiveBlockScope) -> list[Call]:
    return ([Call("free_request", (bad,)) for bad in NOT_INTS]
            + [Call("free_request", (r,)) for r in scope.requests if r not in s.tables])


_EVERY_MISUSE = {
    "allocate": _misuse_every_allocate, "touch": _misuse_every_touch, "cache_blocks": _misuse_every_cache_blocks,
    "free": _misuse_every_release("free"), "unpin": _misuse_every_release("unpin"),
    "writable": _misuse_every_out_of_range("writable"), "evict": _misuse_every_out_of_range("evict"), "lookup": _misuse_every_lookup,
    "find_cached_prefix": _misuse_every_find_cached_prefix, "allocate_slots": _misuse_every_allocate_slots,
    "free_request": _misuse_every_free_request, **block_partial.EVERY_MISUSE,
    "load_slots": _misuse_every_load_slots, "finish_load": _misuse_every_finish_load,
}
