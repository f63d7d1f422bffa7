"""Broken subclasses of the torch `KVBlockPool` (impl/kv_block_pool.py), one bug each in how it
lets a reader keep a released block (`unpin`, `reused()`), each behind the built-in
`KVCacheManager` (its `pool_class`) so that a default `cacheproof check --spec blocks` (the contract
profile, every operation) drives it: `--impl model_tests.broken_kv_block_pools:HeadUnpinManager`.
The checker must find each (model_tests/test_block_checker.py); the correct pool conforms.
"""

from __future__ import annotations

from cacheproof.impl.kv_block_pool import KVBlockPool
from cacheproof.impl.kv_cache_manager import KVCacheManager


class HeadUnpinKVBlockPool(KVBlockPool):
    """unpin queues the blocks reaching 0 as free does: an unhashed one at the HEAD, so the next
    allocate hands a block its reader still reads to another request first, where the contract
    reuses it last (the tail). The watch and the telling are right; the free queue is wrong."""

    def unpin(self, request, blocks):
        self.free(request, blocks)
        self._watched.update(dict.fromkeys(blocks))


class UntoldReuseKVBlockPool(KVBlockPool):
    """allocate hands out an unpinned block and ends its watch without telling its reader:
    `reused()` stays empty, so the reader goes on reading KV that another request now writes.
    The state is right; only the `reused()` announcement is wrong."""

    def allocate(self, request, n):
        ids = super().allocate(request, n)
        self._told = ()
        return ids


class HeadUnpinManager(KVCacheManager):
    """The built-in manager over `HeadUnpinKVBlockPool`."""

    def __init__(self, num_blocks: int) -> None:
        super().__init__(num_blocks, pool_class=HeadUnpinKVBlockPool)


class UntoldReuseManager(KVCacheManager):
    """The built-in manager over `UntoldReuseKVBlockPool`."""

    def __init__(self, num_blocks: int) -> None:
        super().__init__(num_blocks, pool_class=UntoldReuseKVBlockPool)


BROKEN_KV_POOLS = (HeadUnpinManager, UntoldReuseManager)
"""Every broken torch pool here, one bug each (`UntoldReuseManager` differs in `reused()` alone)."""
