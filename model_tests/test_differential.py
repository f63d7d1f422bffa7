"""The differential state machine as ordinary tests: spec against spec, and against TensorLRUCache.

These honour the active Hypothesis profile (`ci` under CI=true)."""

from __future__ import annotations

from cacheproof.check.sequential.machine import machine_for
from cacheproof.spec import CacheSpec


def _cpu_tensor_cache(capacity_bytes: int):
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


TestSpecAgainstItself = machine_for(CacheSpec).TestCase
TestTensorLRUCacheOnCpu = machine_for(_cpu_tensor_cache).TestCase
