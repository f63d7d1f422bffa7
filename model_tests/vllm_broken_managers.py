"""Broken subclasses of vLLM's REAL `KVCacheManager`, one bug each, and factories that pass each
through `cacheproof.engines.vllm:kv_cache_manager(num_blocks, manager_class=...)`.

Under `--profile vllm-kv-cache-manager` the unmodified class conforms and the checker must find
every class here (model_tests/engines/test_vllm_block_checks.py). Importing this module needs vLLM
(the engines venv, tools/engines_venv.sh).
"""

from __future__ import annotations

from vllm.v1.core.kv_cache_manager import KVCacheManager

from cacheproof.engines.vllm import kv_cache_manager


class NewBlocksUnreportedManager(KVCacheManager):
    """allocate_slots records a running request's new blocks but answers none of them, so the
    scheduler hands the worker no new block ids (`CachedRequestData.new_block_ids` is None) and the
    worker writes the request's next tokens through a table that ends too early."""

    def allocate_slots(self, request, num_new_tokens, *args, **kwargs):
        answer = super().allocate_slots(request, num_new_tokens, *args, **kwargs)
        if answer is None or request.num_computed_tokens == 0:
            return answer
        return answer.new_empty()


BROKEN_MANAGER_CLASSES = (NewBlocksUnreportedManager,)
"""Every broken subclass, one bug each."""


def new_blocks_unreported(num_blocks: int):
    return kv_cache_manager(num_blocks, manager_class=NewBlocksUnreportedManager)


FACTORIES = {"new_blocks_unreported": new_blocks_unreported}
"""Each broken manager's factory, by name."""
