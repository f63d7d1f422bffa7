"""Pools of vLLM's null-block design (`null_block="skip"`, profile `vllm-block-pool`): block tables
pad with the null block (block 0), so touch, cache_blocks, free, writable and evict pass over it
(unpin never does: no request holds the null block, so unpinning it is misuse).

`NullSkippingPool` does that correctly, over model_tests' correct `ListBlockPool`; `NullPinningPool`
carries one bug. Under the contract (`null_block="error"`) both refuse the null block as
`ListBlockPool` does.
"""

from __future__ import annotations

from collections import Counter

from model_tests.block_pools import ListBlockPool

NULL = 0


def _without_null(blocks):
    """`blocks` with the null block left out (the argument checks of the rest stay the pool's)."""
    return tuple(b for b in blocks if b != NULL) if isinstance(blocks, (tuple, list)) else blocks


class NullSkippingPool(ListBlockPool):
    """A correct pool of the vllm-block-pool profile: the null block is passed over wherever a
    call takes blocks (in cache_blocks with its hash), but for unpin; the rest of the call is
    `ListBlockPool`'s."""

    def touch(self, request, blocks):
        super().touch(request, _without_null(blocks))

    def cache_blocks(self, request, blocks, hashes):
        if isinstance(blocks, (tuple, list)) and isinstance(hashes, (tuple, list)) and len(blocks) == len(hashes):
            pairs = [(b, h) for b, h in zip(blocks, hashes) if b != NULL]
            blocks, hashes = tuple(b for b, _ in pairs), tuple(h for _, h in pairs)
        super().cache_blocks(request, blocks, hashes)

    def free(self, request, blocks):
        super().free(request, _without_null(blocks))

    def writable(self, blocks):
        return super().writable(_without_null(blocks))

    def evict(self, blocks):
        return super().evict(_without_null(blocks))


class NullPinningPool(NullSkippingPool):
    """touch pins the null block like any prefix hit: its ref count goes up and the request holds
    it, although no request may hold the padding every block table shares (B3: the null block has
    ref 0 and no holder). free still passes over it, so the pin leaks for ever (B7's leaked
    reference). Before the checker drew the null block under `vllm-block-pool`, this pool
    conformed on every seed."""

    def touch(self, request, blocks):
        super().touch(request, blocks)
        for b in blocks:
            if b == NULL:
                self._refs[NULL] += 1
                self._holdings.setdefault(request, Counter())[NULL] += 1
