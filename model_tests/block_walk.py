"""`differential_walk`: a seeded random walk that drives a block pool and the spec side by side.

A stand-in for the generic Hypothesis checker: each step draws one call (mostly valid, some
misuse: double frees, touches of free unhashed blocks, the null block, n above the free count)
from the spec's state, makes it on both, and compares the outcome (result, or error class), the
snapshot and, where the pool has them, the hash map, request tables, block contents and the last
call's announcements (`events()`, `reused()`). The spec's own invariants are checked after every
step, and the block invariants B1-B8 are judged on the pool's own before/after snapshots. The
first difference is returned as a `Divergence`.
"""

from __future__ import annotations

import random
from typing import Any, Callable, NamedTuple

from cacheproof.spec.blocks.invariants import BlockStep, broken_invariants
from cacheproof.spec.blocks.operations import REQUEST_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_PROFILES
from cacheproof.spec.errors import CacheError

POOL_REQUESTS = (1, 2, 3)
MANAGED_REQUESTS = (10, 11, 12)
HASHES = tuple(range(100, 106))
VOCABULARY = (1, 2)
VIEWS = ("hash_map", "tables", "contents", "events", "reused")


class Divergence(NamedTuple):
    """The first step at which the pool and the spec disagree."""

    step: int
    call: tuple
    expected: Any
    actual: Any
    reason: str


def _outcome(model: Any, name: str, args: tuple) -> tuple:
    try:
        return ("returned", getattr(model, name)(*args))
    except CacheError as error:
        return ("raised", type(error).__name__)
    except Exception as error:  # an untyped error is itself a difference from the spec
        return ("crashed", f"{type(error).__name__}: {error}")


class _Draw:
    """Draws one call from the spec's state."""

    def __init__(self, rng: random.Random, spec: BlockPoolSpec, tokens: dict[int, tuple]) -> None:
        self.rng, self.spec, self.tokens = rng, spec, tokens
        self.queue, self.blocks, holdings = spec.snapshot()
        self.holdings = dict(holdings)
        self.usable = range(1, spec.num_blocks)

    def some(self, pool: list, most: int = 2) -> tuple:
        pool = list(pool)
        return tuple(self.rng.sample(pool, self.rng.randint(1, min(most, len(pool))))) if pool else ()

    def misuse(self) -> bool:
        return self.rng.random() < 0.1

    def allocate(self) -> tuple:
        free = len(self.queue)
        n = self.rng.choice((-1, free + 1)) if self.misuse() else self.rng.randint(0, min(3, free))
        return (self.rng.choice(POOL_REQUESTS), n)

    def touch(self) -> tuple:
        hittable = [b for b in self.usable if self.blocks[b][0] or self.blocks[b][1] is not None]
        blocks = self.some(self.usable if self.misuse() else hittable) or (self.rng.choice((0, 1)),)
        return (self.rng.choice(POOL_REQUESTS), blocks)

    def cache_blocks(self) -> tuple:
        candidates = [r for r in POOL_REQUESTS if any(self.blocks[b][1] is None for b in self.holdings.get(r, ()))]
        request = self.rng.choice(candidates or POOL_REQUESTS)
        held = set(self.holdings.get(request, ()))
        unhashed = [b for b in held if self.blocks[b][1] is None]
        blocks = self.some(self.usable if self.misuse() else unhashed) or (1,)
        hashes = tuple(self.rng.choice(HASHES) for _ in blocks)
        if self.misuse():
            hashes = hashes[1:]
        return (request, blocks, hashes)

    def lookup(self) -> tuple:
        carried = [h for _, h in self.blocks if h is not None and h in HASHES]
        return (tuple(self.rng.choice(carried + list(HASHES)) for _ in range(self.rng.randint(0, 3))),)

    def free(self) -> tuple:
        request = self.rng.choice(POOL_REQUESTS)
        held = list(self.holdings.get(request, ())) if request not in self.tokens else []
        if self.misuse() or not held:
            return (request, self.some(self.usable))
        return (request, tuple(self.rng.sample(held, self.rng.randint(1, len(held)))))

    def unpin(self) -> tuple:
        request, blocks = self.free()
        return (request, blocks + (0,) if self.misuse() else blocks)

    def writable(self) -> tuple:
        in_use = [b for b in self.usable if self.blocks[b][0]]
        return (self.some(self.usable if self.misuse() or not in_use else in_use, 3),)

    def evict(self) -> tuple:
        return (self.some(self.usable),)

    def reset(self) -> tuple:
        return ()

    def num_free(self) -> tuple:
        return ()

    def new_tokens(self) -> tuple:
        return tuple(self.rng.choice(VOCABULARY) for _ in range(self.rng.randint(0, 6)))

    def find_cached_prefix(self) -> tuple:
        return (self.new_tokens(),)

    def allocate_slots(self) -> tuple:
        request = POOL_REQUESTS[0] if self.misuse() else self.rng.choice(MANAGED_REQUESTS)
        old = self.tokens.get(request)
        if old is None or self.misuse():
            return (request, self.new_tokens())
        return (request, old + tuple(self.rng.choice(VOCABULARY) for _ in range(self.rng.randint(0, 3))))

    def free_request(self) -> tuple:
        if self.misuse() or not self.tokens:
            return (self.rng.choice(MANAGED_REQUESTS + (POOL_REQUESTS[0],)),)
        return (self.rng.choice(sorted(self.tokens)),)


_WEIGHTS = {
    "allocate": 4, "touch": 3, "cache_blocks": 3, "lookup": 2, "free": 4, "unpin": 2, "writable": 1,
    "evict": 1, "reset": 1, "num_free": 1, "find_cached_prefix": 1, "allocate_slots": 4, "free_request": 2,
}


def differential_walk(
    factory: Callable[[int], Any], seed: int, steps: int, *, num_blocks: int = 8,
    operations: tuple[str, ...] | None = None,
) -> Divergence | None:
    """Drive `factory(num_blocks)` and the spec with `steps` calls drawn with `seed`; the first
    divergence, or None. Request-level calls are made only if the pool has them."""
    pool = factory(num_blocks)
    spec = BlockPoolSpec(num_blocks)
    names = [
        name for name in operations or BLOCK_PROFILES["contract"].operations
        if name not in REQUEST_OPERATIONS or hasattr(pool, name)
    ]
    views = [view for view in VIEWS if hasattr(pool, view)]
    rng = random.Random(seed)
    tokens: dict[int, tuple] = {}
    for step in range(steps):
        name = rng.choices(names, [_WEIGHTS[n] for n in names])[0]
        args = getattr(_Draw(rng, spec, tokens), name)()
        call = (name,) + args
        before = pool.snapshot()
        expected = _outcome(spec, name, args)
        actual = _outcome(pool, name, args)
        spec.check_invariants()
        if actual != expected:
            return Divergence(step, call, expected, actual, "outcome")
        if name == "allocate_slots" and expected[0] == "returned" and expected[1] is not None:
            tokens[args[0]] = tuple(args[1])
        if name == "free_request" and expected[0] == "returned":
            tokens.pop(args[0], None)
        after = pool.snapshot()
        if after != spec.snapshot():
            return Divergence(step, call, spec.snapshot(), after, "snapshot")
        for view in views:
            if getattr(pool, view)() != getattr(spec, view)():
                return Divergence(step, call, getattr(spec, view)(), getattr(pool, view)(), view)
        judged = BlockStep(
            name, num_blocks, before, after, actual[0] != "returned", args, actual[1],
            pool.hash_map() if "hash_map" in views else None,
            pool.contents() if "contents" in views else None,
        )
        broken = broken_invariants(judged)
        if broken:
            return Divergence(step, call, "invariants hold", [inv.name for inv in broken], "invariant")
    return None
