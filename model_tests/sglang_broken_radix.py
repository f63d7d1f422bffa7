"""Broken subclasses of SGLang's REAL `RadixCache`, one bug each, modelled on real bugs, and factories
that pass each through `cacheproof.engines.sglang:radix_cache(capacity_tokens, cache_class=...)`.

Under the `sglang-radix` profile the unmodified class conforms and the checker must find every
class here (model_tests/engines/test_sglang_radix.py): five at the tree level, three at the request
level (SGLang's checkpoint and `release_kv_cache`). Each factory is a plain function without a
`profile` attribute: the adapted object carries `sglang-radix`, so `cacheproof check --spec radix
--impl model_tests.sglang_broken_radix:NAME` checks it under that profile. Importing this module
needs SGLang (the engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from sglang.srt.mem_cache.radix_cache import RadixCache

from cacheproof.engines.sglang import SglangRadixCache, radix_cache


class SplitDropsLockRadix(RadixCache):
    """A split whose new upper node starts unlocked (SGLang #6888, #7130 class: a running request's
    prefix made evictable): `_split_node` forgets to copy `lock_ref`, so a locked node matched inside
    leaves its upper part with lock 0 under a locked child (R1) and the counters drift (R2)."""

    def _split_node(self, key, child, split_len):
        new_node = super()._split_node(key, child, split_len)
        new_node.lock_ref = 0
        return new_node


class UnlockKeepsCountersRadix(RadixCache):
    """`dec_lock_ref` lowers the lock counts but never moves the size counters back, as a
    refactor that dropped the `lock_ref == 1` branch would: protected_size stays high and
    evictable_size low, so the scheduler sees less memory than it has (R2)."""

    def dec_lock_ref(self, node, params=None):
        evictable, protected = self.evictable_size_, self.protected_size_
        result = super().dec_lock_ref(node, params)
        self.evictable_size_, self.protected_size_ = evictable, protected
        return result


class MostRecentFirstRadix(RadixCache):
    """Eviction by the newest access instead of the oldest (a sign flipped in the eviction
    priority): the hot prefix is dropped and cold ones kept (R7)."""

    def evict(self, params):
        class Newest:
            def get_priority(self, node):
                return -node.last_access_time

        strategy, self.eviction_strategy = self.eviction_strategy, Newest()
        try:
            return super().evict(params)
        finally:
            self.eviction_strategy = strategy


class InsertAnswersNoPrefixRadix(RadixCache):
    """`insert` answers the prefix it matched as 0, so its caller frees no duplicate KV slot: the
    duplicates leak from the allocator for ever (R3), the bug SGLang's callers of `insert` must
    avoid by freeing `kv_indices[cache_protected_len:prefix_len]`."""

    def insert(self, params):
        result = super().insert(params)
        result.prefix_len = 0
        return result


class EvictLockedRadix(RadixCache):
    """`evict` takes leaves whatever their lock (the `lock_ref == 0` test missing when a parent is
    pushed), modelled on SGLang #6888: a childless locked parent is evicted under its request (R6)."""

    def _update_leaf_status(self, node):
        if node.evicted:
            return super()._update_leaf_status(node)
        if all(child.evicted for child in node.children.values()) and node is not self.root_node:
            self.evictable_leaves.add(node)
        else:
            self.evictable_leaves.discard(node)


class SplitKeepsHashesRadix(RadixCache):
    """A split that leaves a node's page hashes whole on its lower part and none on the upper (the
    `split_node_hash_value` call of `_split_node` lost, radix_cache.py's hash bookkeeping): the
    lower node's pages are announced under its upper pages' hashes when it is evicted, and a page
    stored under the upper node names no parent, so a router that mirrors the tree from its KV
    cache events drops pages the tree still has (the KV cache events)."""

    def _split_node(self, key, child, split_len):
        hashes = child.hash_value
        new_node = super()._split_node(key, child, split_len)
        child.hash_value, new_node.hash_value = hashes, None
        return new_node


class ReleaseKeepsLockRadix(RadixCache):
    """The request level: a release that leaves the request's path locked (`on_release` takes the
    lock again that `release_kv_cache` has just dropped, as a streaming-session hook that forgot the
    request was finishing would): the finished request's prefix is never evictable and protected
    size only grows (the lock-leak class of SGLang #11970, R1 and R2 against the contract's tree)."""

    def on_release(self, req, *, checkpointed):
        super().on_release(req, checkpointed=checkpointed)
        self.lock(req.last_node)


class CheckpointFreesProtectedRadix(RadixCache):
    """The request level: a checkpoint that frees the wrong slots, `kv_indices[0:prefix_len]`
    instead of `kv_indices[cache_protected_len:prefix_len]`, so the slots of the prefix the tree
    already owns (and the request holds locked) go back to the allocator while the tree keeps them:
    owned twice, handed out again (R3)."""

    def _insert_cache(self, req, token_ids, **kwargs):
        protected, req.kv.cache_protected_len = req.kv.cache_protected_len, 0
        try:
            return super()._insert_cache(req, token_ids, **kwargs)
        finally:
            req.kv.cache_protected_len = protected


class CheckpointKeepsOldLockRadix(RadixCache):
    """The request level: a checkpoint that locks the request's new last node but never drops the
    lock on its old one (the `unlock(req.lock)` lost in a refactor of the lock move): every chunk
    leaves a lock behind, and the prefix stays protected after the request is gone (R1)."""

    def checkpoint(self, req, *, up_to):
        old = req.last_node
        super().checkpoint(req, up_to=up_to)
        self.inc_lock_ref(old)


BROKEN_RADIX_CLASSES = (
    SplitDropsLockRadix, UnlockKeepsCountersRadix, MostRecentFirstRadix, InsertAnswersNoPrefixRadix, EvictLockedRadix,
    SplitKeepsHashesRadix, ReleaseKeepsLockRadix, CheckpointFreesProtectedRadix, CheckpointKeepsOldLockRadix,
)
"""Every broken subclass, one bug each."""


def split_drops_lock(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=SplitDropsLockRadix)


def unlock_keeps_counters(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=UnlockKeepsCountersRadix)


def most_recent_first(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=MostRecentFirstRadix)


def insert_answers_no_prefix(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=InsertAnswersNoPrefixRadix)


def evict_locked(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=EvictLockedRadix)


def split_keeps_hashes(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=SplitKeepsHashesRadix)


def release_keeps_lock(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=ReleaseKeepsLockRadix)


def checkpoint_frees_protected(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=CheckpointFreesProtectedRadix)


def checkpoint_keeps_old_lock(capacity_tokens: int) -> SglangRadixCache:
    return radix_cache(capacity_tokens, cache_class=CheckpointKeepsOldLockRadix)


FACTORIES = {
    "split_drops_lock": split_drops_lock, "unlock_keeps_counters": unlock_keeps_counters,
    "most_recent_first": most_recent_first, "insert_answers_no_prefix": insert_answers_no_prefix,
    "evict_locked": evict_locked, "split_keeps_hashes": split_keeps_hashes, "release_keeps_lock": release_keeps_lock,
    "checkpoint_frees_protected": checkpoint_frees_protected, "checkpoint_keeps_old_lock": checkpoint_keeps_old_lock,
}
"""Each broken tree's factory, by name (`--impl model_tests.sglang_broken_radix:NAME`)."""
