"""An adapter over vLLM's own `EncoderCacheManager`, for the `vllm-encoder-cache` profile.

    pip install vllm        # the class is vllm/v1/core/encoder_cache_manager.py
    cacheproof check --impl examples.vllm_adapter:factory --profile vllm-encoder-cache

Written against the public class (docs/adapters.md cites it), in the version whose methods take
`(request, input_id)`: `check_and_update_cache`, `can_allocate(request, input_id,
encoder_compute_budget, num_embeds_to_schedule)` (evicts idle entries, oldest idle first, as a
side effect), `allocate`, `free_encoder_input`, `get_freed_mm_hashes()` and `reset()`; the
manager reads three things of a request: `request_id`, `mm_features[input_id].identifier` (the
mm_hash) and `get_num_encoder_embeds(input_id)`. Its tables `cached` (mm_hash -> request ids) and
`freeable` (idle mm_hash -> size, oldest idle first) are read for snapshot().

The contract's operations on top of it are those of `examples.vllm_style_encoder_cache`
(`ProfileEncoderCacheAdapter`: synthetic request ids per reference, the worker's output dict,
put/evict composed from the manager's calls), so this module only translates its simplified
manager calls into vLLM's signatures (`VllmManager`). Capacity is in encoder embeddings; the
checker's sizes are taken as embeddings, one per byte (`cacheproof.adapt.SizeUnit(1)`); an engine
run would use hidden size x element size. `manager_class` lets the adapter run over a stand-in
where vLLM is not installed (model_tests/engine_stand_ins.py).
"""

from __future__ import annotations

from typing import Any, Hashable, NamedTuple

from cacheproof.adapt import SizeUnit
from examples.vllm_style_encoder_cache import ProfileEncoderCacheAdapter

try:
    from vllm.v1.core.encoder_cache_manager import EncoderCacheManager
except ImportError:  # not installed: factory() says so; the adapter still runs over a stand-in
    EncoderCacheManager = None

SLOT = SizeUnit(1, "embedding")


class _Feature(NamedTuple):
    identifier: Hashable


class _Request:
    """What the manager reads of a request: one multimodal item `key` of `size` embeddings."""

    def __init__(self, request_id: str, key: Hashable, size: int) -> None:
        self.request_id = request_id
        self.mm_features = [_Feature(key)]
        self._size = size

    def get_num_encoder_embeds(self, input_id: int) -> int:
        return self._size


class VllmManager:
    """The manager calls `ProfileEncoderCacheAdapter` makes, in vLLM's `(request, input_id)` form."""

    def __init__(self, cache_size: int, manager_class: Any = None) -> None:
        self.manager = (manager_class or EncoderCacheManager)(cache_size)

    @property
    def cached(self) -> dict:
        return self.manager.cached

    @property
    def freeable(self) -> dict:
        return self.manager.freeable

    def check_and_update_cache(self, request_id: str, key: Hashable) -> bool:
        return self.manager.check_and_update_cache(_Request(request_id, key, 0), 0)

    def can_allocate(self, size: int, compute_budget: int, num_embeds_to_schedule: int) -> bool:
        return self.manager.can_allocate(_Request("probe", None, size), 0, compute_budget, num_embeds_to_schedule)

    def allocate(self, request_id: str, key: Hashable, size: int) -> None:
        self.manager.allocate(_Request(request_id, key, size), 0)

    def free_encoder_input(self, request_id: str, key: Hashable, size: int) -> None:
        self.manager.free_encoder_input(_Request(request_id, key, size), 0)

    def get_freed_keys(self) -> list[Hashable]:
        return self.manager.get_freed_mm_hashes()

    def discard_idle(self, key: Hashable) -> None:
        """vLLM has no call for this (an item freed before its output was stored never stays there:
        the encoder runs in the step that scheduled it); the adapter drops the idle entry itself."""
        self.manager.num_free_slots += self.manager.freeable.pop(key)
        del self.manager.cached[key]

    def reset(self) -> None:
        self.manager.reset()


class VllmEncoderCacheAdapter(ProfileEncoderCacheAdapter):
    def __init__(self, capacity_bytes: int, manager_class: Any = None) -> None:
        super().__init__(capacity_bytes)
        self._manager = VllmManager(SLOT.units(capacity_bytes), manager_class)


def factory(capacity_bytes: int) -> VllmEncoderCacheAdapter:
    """vLLM's EncoderCacheManager of `capacity_bytes` embeddings, adapted."""
    if EncoderCacheManager is None:
        raise ModuleNotFoundError(
            "vllm is not installed (pip install vllm); without it, check the re-implementation "
            "examples.vllm_style_encoder_cache:profile_factory under --profile vllm-encoder-cache"
        )
    return VllmEncoderCacheAdapter(capacity_bytes)
