"""Broken subclasses of vLLM's REAL `KVCacheManager`, one bug each, and factories that pass each
through `cacheproof.engines.vllm:kv_cache_manager(num_blocks, manager_class=...)`.

Under each factory's profile (`FACTORIES`) the unmodified class conforms and the checker must find
every class here (model_tests/engines/test_vllm_block_checks.py). Importing this module needs vLLM
(the engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from vllm.v1.core.kv_cache_manager import KVCacheManager

from cacheproof.engines.vllm import (
    kv_cache_manager, kv_cache_manager_hybrid, kv_cache_manager_mamba, kv_cache_manager_swa, kv_cache_manager_uncached,
)
from cacheproof.engines.vllm_manager import kv_cache_manager_retained


class NewBlocksUnreportedManager(KVCacheManager):
    """allocate_slots records a running request's new blocks but answers none of them, so the
    scheduler hands the worker no new block ids (`CachedRequestData.new_block_ids` is None) and the
    worker writes the request's next tokens through a table that ends too early."""

    def allocate_slots(self, request, num_new_tokens, *args, **kwargs):
        answer = super().allocate_slots(request, num_new_tokens, *args, **kwargs)
        if answer is None or request.num_computed_tokens == 0:
            return answer
        return answer.new_empty()


class CachingFlagDroppedManager(KVCacheManager):
    """Built with `enable_caching=False`, it builds its coordinator with caching on (the flag not
    passed on): no lookup hits, since the manager's own check is off, but every full block is
    hashed, so freed blocks stay cached at the queue's tail and stored events are announced."""

    def __init__(self, *args, enable_caching: bool = True, **kwargs):
        super().__init__(*args, enable_caching=True, **kwargs)
        self.enable_caching = enable_caching


class UnannotatedEventsManager(KVCacheManager):
    """take_events hands over the pool's events without naming each stored block's KV-cache spec
    (kind and sliding window), so a router that filters groups by kind drops every event."""

    def take_events(self):
        return self.block_pool.take_events()


class ProbeCountsLastTokenManager(KVCacheManager):
    """get_num_cached_tokens probes up to the prompt's last token, where `get_computed_blocks`
    stops one short (the last token is always recomputed): a prompt cached whole is probed a block
    deeper than any allocation hits, so the scheduler's waiting queue is ordered by hits that never
    come."""

    def get_num_cached_tokens(self, request):
        if not self.prefix_cache_lookup_enabled(request):
            return 0
        _, num_computed_tokens, _ = self.coordinator.find_longest_cache_hit(request.block_hashes, request.num_tokens)
        return num_computed_tokens


class CachedTokensOfHitManager(KVCacheManager):
    """estimate_cached_tokens counts the prefix hit alone (the leading blocks that were cached
    before the request came), not the blocks the request filled and cached itself: a request's
    cached-token count in its prefill stats stays 0 after its own prompt is cached."""

    def estimate_cached_tokens(self, request):
        blocks = self.get_blocks(request.request_id).blocks[0]
        hit = 0
        for block in blocks:
            if not block.block_hash_num_tokens or block.ref_cnt < 2:
                break
            hit = block.block_hash_num_tokens
        return hit


class StatsAtLookupManager(KVCacheManager):
    """get_computed_blocks records the request in the prefix-cache statistics itself, besides the
    scheduler's record at admission: every lookup counts, so a request waiting for blocks is
    counted once per step it waits and an admitted one twice, and the hit rate a server logs is
    not its requests'."""

    def get_computed_blocks(self, request, max_cache_hit_length=None):
        answer = super().get_computed_blocks(request, max_cache_hit_length)
        self.record_prefix_cache_stats(request, answer[1])
        return answer


class NoNewTokensAnsweredManager(KVCacheManager):
    """allocate_slots answers a running request's call with no new tokens as if it had some (no
    blocks added), where vLLM refuses it: a scheduler that schedules a request zero tokens runs a
    step for it unnoticed."""

    def allocate_slots(self, request, num_new_tokens, *args, **kwargs):
        if num_new_tokens == 0 and request.num_computed_tokens:
            return self.empty_kv_cache_blocks
        return super().allocate_slots(request, num_new_tokens, *args, **kwargs)


class CachesWhileLoadingManager(KVCacheManager):
    """allocate_slots caches a request's blocks at once even when told to delay it (`delay_cache_blocks`,
    a connector's asynchronous load): another request's lookup then hits blocks whose KV has not
    arrived, and its attention reads whatever the blocks held before."""

    def allocate_slots(self, request, num_new_tokens, *args, delay_cache_blocks=False, **kwargs):
        return super().allocate_slots(request, num_new_tokens, *args, **kwargs)


class WindowNeverSlidesManager(KVCacheManager):
    """kv_cache_manager #178: allocate_slots never frees the blocks a sliding window reads no more
    (its `remove_skipped_blocks` call gone), so a long request holds every block it ever wrote and
    the pool runs dry while the window needs two."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.coordinator.remove_skipped_blocks = lambda *args, **kwargs: None


class WindowKeptAtFinishManager(KVCacheManager):
    """kv_cache_manager #205: `remove_skipped_blocks` (the scheduler's call before it hands a
    finished request's table to the KV connector) frees nothing, so the blocks the window left
    are freed with the rest, last, and a sliding window's stale blocks outlive its fresh ones in
    the prefix cache."""

    def remove_skipped_blocks(self, request_id, processed_computed_tokens, num_prompt_tokens=None):
        return None


class ContextParallelByDefaultManager(KVCacheManager):
    """kv_cache_manager #29: `pcp_world_size` defaults to 2, so a manager built without naming it
    believes prefill is split over two ranks, which a sliding-window lookup refuses (an assertion)."""

    def __init__(self, *args, pcp_world_size: int = 2, **kwargs):
        super().__init__(*args, pcp_world_size=pcp_world_size, **kwargs)


class BoundaryStatesDroppedManager(KVCacheManager):
    """kv_cache_manager #295: `take_boundary_state_offloads` drains every group's pending offers
    but hands none on, so a KV connector never offloads a Mamba state and no later engine finds
    that prefix."""

    def take_boundary_state_offloads(self):
        super().take_boundary_state_offloads()
        return {}


class BoundaryStatesRepeatedManager(KVCacheManager):
    """`take_boundary_state_offloads` reads each group's pending offers without taking them, so a
    state is offered again at every later step, after its block may have gone to another request."""

    def take_boundary_state_offloads(self):
        offers = {}
        for manager in self.coordinator.single_type_managers:
            for request_id, group_id, block, boundary in manager._pending_boundary_state_offloads:
                offers.setdefault(request_id, []).append((group_id, block.block_id, boundary))
        return offers


class StepNeverStartsManager(KVCacheManager):
    """`new_step_starts` is not passed on to the groups, so a Mamba group's blocks cached this step
    are never cleared: a request whose hit ends on a state cached at any earlier step is deferred
    (allocate_slots answers None) for ever."""

    def new_step_starts(self):
        return None



class CachedTokensOfLongestGroupManager(KVCacheManager):
    """kv_cache_manager #254: `estimate_cached_tokens` reports the most any group has cached, not the
    fewest, so once one group's block loses its hash (evicted) the scheduler reports tokens cached
    that the other group would recompute."""

    def estimate_cached_tokens(self, request):
        return max(max((block.block_hash_num_tokens or 0 for block in blocks), default=0)
                   for blocks in self.get_blocks(request.request_id).blocks)


class FreedAsDeferredManager(KVCacheManager):
    """`free` returns a request's blocks as the scheduler's deferred path does (`pop_blocks_for_free`,
    then `free_blocks(reversed(...))` in `Scheduler._drain_deferred_frees`): all groups' blocks in
    one list, reversed, so the window group's blocks join the queue before the full group's, where
    `free` queues each group's last first, in group order. The two paths of vLLM 0.34.0 queue a
    hybrid request's blocks in two eviction orders (docs/engines.md)."""

    def free(self, request):
        self.block_pool.free_blocks(reversed(self.coordinator.pop_blocks_for_free(request.request_id)))


class RetainedHitUncutManager(KVCacheManager):
    """kv_cache_manager #139: `allocate_slots` never cuts a retained group's hit (its
    `retained_hit_group_ids` empty), so a request of a group that keeps a longer hit (HiSparse's
    host tier) adopts blocks past the hit it computes from, and its table outgrows its tokens."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.retained_hit_group_ids = ()


BROKEN_MANAGER_CLASSES = (
    NewBlocksUnreportedManager, CachingFlagDroppedManager, UnannotatedEventsManager, ProbeCountsLastTokenManager,
    CachedTokensOfHitManager, StatsAtLookupManager, NoNewTokensAnsweredManager, CachesWhileLoadingManager,
    WindowNeverSlidesManager, WindowKeptAtFinishManager, ContextParallelByDefaultManager, BoundaryStatesDroppedManager,
    BoundaryStatesRepeatedManager, StepNeverStartsManager, CachedTokensOfLongestGroupManager, FreedAsDeferredManager,
    RetainedHitUncutManager,
)
"""Every broken subclass, one bug each."""


def new_blocks_unreported(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=NewBlocksUnreportedManager)


def caching_flag_dropped(num_blocks: int):
    return kv_cache_manager_uncached(num_blocks, manager_class=CachingFlagDroppedManager)


def unannotated_events(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=UnannotatedEventsManager)


def probe_counts_last_token(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=ProbeCountsLastTokenManager)


def cached_tokens_of_hit(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=CachedTokensOfHitManager)


def stats_at_lookup(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=StatsAtLookupManager)


def no_new_tokens_answered(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=NoNewTokensAnsweredManager)


def caches_while_loading(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=CachesWhileLoadingManager)


def window_never_slides(num_blocks: int):
    return kv_cache_manager_swa(num_blocks, manager_class=WindowNeverSlidesManager)


def window_kept_at_finish(num_blocks: int):
    return kv_cache_manager_swa(num_blocks, manager_class=WindowKeptAtFinishManager)


def context_parallel_by_default(num_blocks: int):
    return kv_cache_manager_swa(num_blocks, manager_class=ContextParallelByDefaultManager)


def boundary_states_dropped(num_blocks: int):
    return kv_cache_manager_mamba(num_blocks, manager_class=BoundaryStatesDroppedManager)


def boundary_states_repeated(num_blocks: int):
    return kv_cache_manager_mamba(num_blocks, manager_class=BoundaryStatesRepeatedManager)


def step_never_starts(num_blocks: int):
    return kv_cache_manager_mamba(num_blocks, manager_class=StepNeverStartsManager)


def window_group_never_slides(num_blocks: int):
    return kv_cache_manager_hybrid(num_blocks, manager_class=WindowNeverSlidesManager)


def cached_tokens_of_longest_group(num_blocks: int):
    return kv_cache_manager_hybrid(num_blocks, manager_class=CachedTokensOfLongestGroupManager)


def freed_as_deferred(num_blocks: int):
    return kv_cache_manager_hybrid(num_blocks, manager_class=FreedAsDeferredManager)


def retained_hit_uncut(num_blocks: int):
    return kv_cache_manager_retained(num_blocks, manager_class=RetainedHitUncutManager)


FACTORIES = {
    "new_blocks_unreported": ("vllm-kv-cache-manager", new_blocks_unreported),
    "caching_flag_dropped": ("vllm-kv-cache-manager-uncached", caching_flag_dropped),
    "unannotated_events": ("vllm-kv-cache-manager", unannotated_events),
    "probe_counts_last_token": ("vllm-kv-cache-manager", probe_counts_last_token),
    "cached_tokens_of_hit": ("vllm-kv-cache-manager", cached_tokens_of_hit),
    "stats_at_lookup": ("vllm-kv-cache-manager", stats_at_lookup),
    "no_new_tokens_answered": ("vllm-kv-cache-manager", no_new_tokens_answered),
    "caches_while_loading": ("vllm-kv-cache-manager", caches_while_loading),
    "window_never_slides": ("vllm-kv-cache-manager-swa", window_never_slides),
    "window_kept_at_finish": ("vllm-kv-cache-manager-swa", window_kept_at_finish),
    "context_parallel_by_default": ("vllm-kv-cache-manager-swa", context_parallel_by_default),
    "boundary_states_dropped": ("vllm-kv-cache-manager-mamba", boundary_states_dropped),
    "boundary_states_repeated": ("vllm-kv-cache-manager-mamba", boundary_states_repeated),
    "step_never_starts": ("vllm-kv-cache-manager-mamba", step_never_starts),
    "cached_tokens_of_longest_group": ("vllm-kv-cache-manager-hybrid", cached_tokens_of_longest_group),
    "freed_as_deferred": ("vllm-kv-cache-manager-hybrid", freed_as_deferred),
    "window_group_never_slides": ("vllm-kv-cache-manager-hybrid", window_group_never_slides),
    "retained_hit_uncut": ("vllm-kv-cache-manager-retained", retained_hit_uncut),
}
"""Each broken manager's profile (the one its unmodified class conforms under) and factory, by name."""
