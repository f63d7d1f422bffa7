"""Broken subclasses of vLLM's REAL `BlockPool`, one bug each, modelled on real bugs, and factories
that pass each through `cacheproof.engines.vllm:block_pool(num_blocks, pool_class=...)`.

Under `--profile vllm-block-pool` the unmodified class conforms and the checker must find every
class here (model_tests/engines/test_vllm_block_checks.py). Importing this module needs vLLM (the
engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from vllm.v1.core.block_pool import BlockPool

from cacheproof.engines.vllm import VllmBlockPool, block_pool


class HeadQueuedHashedPool(BlockPool):
    """free_blocks queues a block that still has a hash at the HEAD of the free queue (as if every
    freed block were "evict first"): the next allocation evicts the freshest cached prefix instead
    of the least recently used one, and a request's own prefix is lost before older ones."""

    def free_blocks(self, ordered_blocks, evict_first=False):
        super().free_blocks(ordered_blocks, evict_first=True)


class TouchLeavesQueuedPool(BlockPool):
    """vLLM #37076: a prefix hit pins a cached ref-0 block without taking it out of the free queue,
    so a later allocation hands the block in use to another request (B2)."""

    def touch(self, blocks):
        for block in blocks:
            if not block.is_null:
                block.ref_cnt += 1


class StaleHashMapPool(BlockPool):
    """vLLM #4761 (V0's cached-block tracking kept evicted blocks): evicting a block's hash (lazily
    in get_new_blocks, or in evict_blocks) clears the hash on the block but forgets to drop it
    from the hash map, so lookup still answers the block, which no longer holds that prefix (B4)."""

    def _maybe_evict_cached_block(self, block):
        had_hash = block.block_hash is not None
        block.reset_hash()
        return had_hash


class DoubleFreeInOneCallPool(BlockPool):
    """vLLM #42571: each block reaches free_blocks twice in one call (a table that lists it twice),
    so its count drops by two, to -1, and the free count rises above the unique free blocks (B1, B3)."""

    def free_blocks(self, ordered_blocks, evict_first=False):
        blocks = list(ordered_blocks)
        super().free_blocks(blocks + blocks, evict_first)


class EvictRequeuesPool(BlockPool):
    """evict_blocks moves each free block whose hash it drops to the head of the free queue (an
    "evicted blocks are reused first" shortcut): the queue places the contract keeps are lost, so
    the LRU order of the blocks still cached no longer decides what is evicted next."""

    def evict_blocks(self, block_ids):
        moved = [self.blocks[b] for b in sorted(block_ids) if self.blocks[b].ref_cnt == 0 and self.blocks[b].block_hash is not None]
        super().evict_blocks(block_ids)
        for block in moved:
            self.free_block_queue.remove(block)
        self.free_block_queue.prepend_n(moved)


class ResetInUsePool(BlockPool):
    """reset_prefix_cache that does not wait for the running requests: it drops every hash, also
    of blocks in use, and answers True, so a running request's blocks stop being shared (vLLM
    returns False while any block is in use)."""

    def reset_prefix_cache(self):
        for block in self.blocks:
            if block.block_hash is not None:
                self._maybe_evict_cached_block(block)
        return True


class SilentEvictionPool(BlockPool):
    """Evictions announce nothing: `_maybe_evict_cached_block` drops the hash (lazily in
    get_new_blocks, or in evict_blocks) but emits no BlockRemoved, so a router reading the KV cache
    events keeps sending that prefix here after its KV is gone. The pool's state is right; only the
    events view can find it."""

    def _maybe_evict_cached_block(self, block):
        return bool(self._remove_cached_block_hashes(block))


class ForeignBlocksKeptPool(BlockPool):
    """free_blocks releases every block into this pool, also a block another pool owns: its
    `block.pool` is not followed (vLLM 0.34.0's block_pool.py mutant #343, docs/mutation-duel.md).
    Built as the peer pool the adapter frees through, so the contract pool's blocks are counted
    free by it and never rejoin their own pool's free queue."""

    def free_blocks(self, ordered_blocks, evict_first=False):
        blocks = list(ordered_blocks)
        owners = [block.pool for block in blocks]
        for block in blocks:
            block.pool = self._weak_self
        try:
            super().free_blocks(blocks, evict_first)
        finally:
            for block, owner in zip(blocks, owners):
                block.pool = owner


class TokensOneLatePool(BlockPool):
    """Every BlockStored names its blocks' tokens from one token late (vLLM 0.34.0's block_pool.py
    mutant #154 moves the start of a prefix hit's event so): a router that hashes the tokens
    itself indexes the blocks under another prefix. The state is right; only the events differ."""

    def _build_block_stored_event(self, request, block_hashes, parent_block_hash, start_token_idx, *args, **kwargs):
        return super()._build_block_stored_event(request, block_hashes, parent_block_hash, start_token_idx + 1,
                                                 *args, **kwargs)


class FurtherHashesKeptPool(BlockPool):
    """Evicting a block drops its primary hash but not the partial entries beside it (vLLM #4761's
    stale tracking, for the further hashes of `cached_block_hashes_by_block`): a lookup of such a
    prefix boundary still answers the block after it was handed out to hold another request's KV."""

    def _remove_cached_block_hashes(self, block):
        if block.block_hash is None:
            return []
        self.cached_block_hashes_by_block.pop(block.block_id, None)
        removed = [block.block_hash] if self.cached_block_hash_to_block.pop(block.block_hash, block.block_id) else []
        block.reset_hash()
        return removed


class CopyKeepsSourcePool(BlockPool):
    """The copy-on-write of a block still being written re-points its prefix-cache entries to the
    private copy but leaves them on the source too, so a lookup can answer the source block, which
    the request goes on overwriting."""

    def move_block_hashes(self, src_block, dst_block):
        if src_block.block_hash is None:
            return
        keys = [src_block.block_hash, *self.cached_block_hashes_by_block.get(src_block.block_id, ())]
        for key in keys:
            self._insert_block_hash(key, dst_block, num_tokens=src_block.block_hash_num_tokens)


class LookaheadOneLatePool(BlockPool):
    """Each block's lookahead token ids are read from one token late (the slice of
    `get_lookahead_token_ids` shifted, as block_pool.py mutant #129 shifts it the other way): a
    router that rebuilds the hashes from the events gets other hashes. Only the events differ."""

    def get_lookahead_token_ids(self, request, block_end):
        return super().get_lookahead_token_ids(request, block_end + 1)


class ExtraKeysDroppedPool(BlockPool):
    """A stored event names no extra keys at all instead of one (empty) entry per block (as
    mutant #118 of block_pool.py drops them): a router zipping hashes with extra keys loses
    every block. Only the events differ."""

    def _build_block_stored_event(self, request, block_hashes, parent_block_hash, start_token_idx, end_token_idx,
                                  block_size, kv_cache_group_id, extra_keys_list, lookahead_token_ids):
        return super()._build_block_stored_event(request, block_hashes, parent_block_hash, start_token_idx,
                                                 end_token_idx, block_size, kv_cache_group_id, [],
                                                 lookahead_token_ids)


BROKEN_POOL_CLASSES = (
    HeadQueuedHashedPool, TouchLeavesQueuedPool, StaleHashMapPool, DoubleFreeInOneCallPool,
    EvictRequeuesPool, ResetInUsePool, SilentEvictionPool, ForeignBlocksKeptPool, TokensOneLatePool,
    FurtherHashesKeptPool, CopyKeepsSourcePool, LookaheadOneLatePool, ExtraKeysDroppedPool,
)
"""Every broken subclass, one bug each."""


def head_queued_hashed(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=HeadQueuedHashedPool)


def touch_leaves_queued(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=TouchLeavesQueuedPool)


def stale_hash_map(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=StaleHashMapPool)


def double_free_in_one_call(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=DoubleFreeInOneCallPool)


def evict_requeues(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=EvictRequeuesPool)


def reset_in_use(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=ResetInUsePool)


def silent_eviction(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=SilentEvictionPool)


def foreign_blocks_kept(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, peer_class=ForeignBlocksKeptPool)


def tokens_one_late(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=TokensOneLatePool)


def further_hashes_kept(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=FurtherHashesKeptPool)


def copy_keeps_source(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=CopyKeepsSourcePool)


def lookahead_one_late(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=LookaheadOneLatePool)


def extra_keys_dropped(num_blocks: int) -> VllmBlockPool:
    return block_pool(num_blocks, pool_class=ExtraKeysDroppedPool)


FACTORIES = {
    "head_queued_hashed": head_queued_hashed, "touch_leaves_queued": touch_leaves_queued,
    "stale_hash_map": stale_hash_map, "double_free_in_one_call": double_free_in_one_call,
    "evict_requeues": evict_requeues, "reset_in_use": reset_in_use, "silent_eviction": silent_eviction,
    "foreign_blocks_kept": foreign_blocks_kept, "tokens_one_late": tokens_one_late,
    "further_hashes_kept": further_hashes_kept, "copy_keeps_source": copy_keeps_source,
    "lookahead_one_late": lookahead_one_late, "extra_keys_dropped": extra_keys_dropped,
}
"""Each broken pool's factory, by name (`--impl model_tests.vllm_broken_pools:NAME`)."""
