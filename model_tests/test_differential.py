"""The differential check as ordinary tests (`cache_test_case`: the program checker of every kind on
the tensor cache): spec against spec, and against TensorLRUCache.

These honour the active Hypothesis profile (`ci` under CI=true)."""

from __future__ import annotations

from cacheproof.spec import CacheSpec
from cacheproof.testing import cache_test_case


def _cpu_tensor_cache(capacity_bytes: int):
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


TestSpecAgainstItself = cache_test_case(CacheSpec, name="SpecAgainstItself")
TestTensorLRUCacheOnCpu = cache_test_case(_cpu_tensor_cache, name="TensorLRUCacheOnCpu")
