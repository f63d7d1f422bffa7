"""Implementations that answer every call as the spec does while their snapshot() says another
state, for the tensor cache and the block pool (the radix tree's, which imports torch, is
model_tests/radix_trees.py's `TreeSnapshotOneSlotShort`): only a comparison of views finds them (model_tests/test_parity.py,
`threads-views`: `check --threads` compares the final views of every kind). The lie shows from
the first state that has an entry, two free blocks or a free slot, so no interleaving hides it."""

from __future__ import annotations

from cacheproof.spec import CacheSpec
from model_tests.block_pools import ListBlockPool


class CacheSnapshotRetainFlipped(CacheSpec):
    """The spec, whose snapshot reports every entry's retain flag the other way round."""

    def snapshot(self):
        return [entry._replace(retain=not entry.retain) for entry in super().snapshot()]


class PoolQueueReversedInSnapshot(ListBlockPool):
    """A correct pool whose snapshot reports its free queue back to front."""

    def snapshot(self):
        queue, blocks, holdings = super().snapshot()
        return tuple(reversed(queue)), blocks, holdings
