"""Broken block pools whose one bug shows only when blocks are shared: by two requests' prefixes,
by one request twice, in a batch of three or more, or through a prefix whose parent differs
(issue 27, "search power"). Each is model_tests/block_pools.py's correct `ListBlockPool` with one
rule changed. Its docstring gives the shortest call sequence that exposes it, in the form
model_tests/test_search_power.py replays: `Shortest (N blocks): calls -> what differs`, and for a
bug the request level reaches too, `At the request level (N blocks): calls -> what differs`.

They are targets for the checker's generation: tools/search_power.py and
model_tests/test_search_power.py measure on how many seeds a default `cacheproof check --spec
blocks --impl model_tests.broken_sharing_pools:NAME` finds each, and how long it takes to report.
"""

from __future__ import annotations

from collections import Counter

from cacheproof.spec.blocks.manager import BLOCK_SIZE, chain_hashes
from model_tests.block_pools import ListBlockPool

BATCH = 3
"""The batch size from which BatchOfThreeQueuedReversedPool queues cached blocks in reverse."""


class OwnerFreeDropsSharersPool(ListBlockPool):
    """The request that took a block from the free queue owns it: when the owner lets go of its
    last holding, the block goes back to the free queue with ref count 0, whatever other requests
    still hold it (a shared prefix block freed under its second request).
    Shortest (4 blocks): allocate(1, 1), touch(2, (1,)), free(1, (1,)) -> spec: block 1 at ref 1,
    in use; this pool: ref 0, in the free queue. At the request level (6 blocks): allocate_slots(1,
    (0, 0, 0)), allocate_slots(2, (0, 0, 0)), free_request(1) -> the same for the shared block 1."""

    def __init__(self, num_blocks: int, block_size: int = BLOCK_SIZE) -> None:
        super().__init__(num_blocks, block_size)
        self._owner: dict[int, int] = {}

    def _get(self, request, n):
        got = super()._get(request, n)
        self._owner.update(dict.fromkeys(got, request))
        return got

    def _hit(self, request, ids):
        for b in ids:
            if not self._refs[b]:
                self._owner[b] = request
        super()._hit(request, ids)

    def _put_back(self, request, ids):
        held = self._holdings.get(request, Counter())
        for b in ids:
            if self._owner.get(b) == request and held[b] == Counter(ids)[b]:
                self._refs[b] = held[b]  # the sharers' references are dropped with the owner's
        super()._put_back(request, ids)


class HitDoesNotCountSecondSharerPool(ListBlockPool):
    """A prefix hit on a block already in use records the holding but does not raise the ref
    count: only a hit that takes a free block counts (ref 0 -> 1). The second sharer's reference
    is missing, so the block is freed while it still reads it.
    Shortest (4 blocks): allocate(1, 1), touch(2, (1,)) -> spec ref 2, this pool ref 1. At the
    request level (6 blocks): allocate_slots(1, (0, 0, 0)), allocate_slots(2, (0, 0, 0)) -> the same."""

    def _hit(self, request, ids):
        for b in ids:
            if not self._refs[b]:
                del self._free[b]
                self._num_free -= 1
                self._refs[b] = 1
            self._holdings.setdefault(request, Counter())[b] += 1


class BatchOfThreeQueuedReversedPool(ListBlockPool):
    """When three or more blocks reach ref 0 in one call, the cached ones are appended to the tail
    of the free queue one at a time from the end of the batch (reversed); smaller batches are
    right. The prefix cache then evicts a request's first blocks before its later ones.
    Shortest (5 blocks): allocate(1, 3), cache_blocks(1, (1, 2, 3), (1, 2, 3)), free(1, (1, 2, 3))
    -> spec queue (4, 1, 2, 3), this pool (4, 3, 2, 1). At the request level (6 blocks):
    allocate_slots(1, (0, 0, 0, 0, 0)), free_request(1) -> spec queue (3, 4, 5, 2, 1), this pool
    (3, 4, 5, 1, 2)."""

    def _put_back(self, request, ids):
        reaching_zero = [b for b in dict.fromkeys(ids) if self._refs[b] == Counter(ids)[b]]
        super()._put_back(request, ids)
        if len(reaching_zero) >= BATCH:
            cached = [b for b in ids if b in reaching_zero and b in self._block_hash]
            for b in reversed(cached):
                self._free.move_to_end(b)


class ParentBlindPrefixPool(ListBlockPool):
    """The request-level prefix match, on a miss of a block's chained hash, falls back to any
    cached block written with the same tokens, whatever its parent: a request whose first block
    reads like another request's second block attaches KV computed after another prefix.
    Shortest (6 blocks): allocate_slots(1, (0, 0, 1, 1, 2)), find_cached_prefix((1, 1, 0)) -> spec
    0 tokens, this pool 2 (the hit is request 1's second block, whose parent is (0, 0))."""

    def _hit_prefix(self, tokens):
        size, hit = self.block_size, []
        for i, value in enumerate(chain_hashes(tokens[:-1], size)):
            if value in self._by_hash:
                hit.append(next(iter(self._by_hash[value])))
                continue
            wanted = tuple(tokens[i * size : (i + 1) * size])
            alike = [b for b, (_, written) in self._written.items() if written == wanted and b in self._block_hash]
            if not alike:
                break
            hit.append(alike[0])
        return tuple(hit)


class SameRequestTouchCountedOncePool(ListBlockPool):
    """A request's holdings are a set: a request touching a block it already holds (one request
    reaching the same prefix twice) adds neither a holding nor a reference, so its first free of
    that block frees it while its second use still reads it.
    Shortest (4 blocks): allocate(1, 1), touch(1, (1,)) -> spec ref 2, held twice; this pool ref 1,
    held once."""

    def _hit(self, request, ids):
        held = self._holdings.get(request, Counter())
        super()._hit(request, tuple(b for b in dict.fromkeys(ids) if not held[b]))


BROKEN_SHARING_POOLS = (
    OwnerFreeDropsSharersPool,
    HitDoesNotCountSecondSharerPool,
    BatchOfThreeQueuedReversedPool,
    ParentBlindPrefixPool,
    SameRequestTouchCountedOncePool,
)
"""Every broken pool of this module, one bug each."""
