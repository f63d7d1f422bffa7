"""SGLang's `MultiModalStaticCache` under the `sglang-mm-cache` profile: a walkthrough of the
installed adapter, `cacheproof.engines.sglang` (docs/engines.md has the translations and the
profile's choices).

    cacheproof check --impl cacheproof.engines.sglang:mm_cache     # the one command
    cacheproof check --impl examples.sglang_adapter:factory        # the same, from here

`SglangStaticCacheAdapter(capacity, cache_class, result_class)` keeps the older spelling, which
passes the result class itself (model_tests/engine_stand_ins.py runs it over stand-ins).
"""

from __future__ import annotations

from typing import Any

from cacheproof.engines.sglang import SglangMultiModalCache, mm_cache

factory = mm_cache


def SglangStaticCacheAdapter(capacity_bytes: int, cache_class: Any = None, result_class: Any = None) -> SglangMultiModalCache:
    """The installed adapter over `cache_class` (default SGLang's) with `result_class` as its
    EmbeddingResult (default: the class's module's)."""
    if result_class is None:
        return mm_cache(capacity_bytes, cache_class=cache_class)
    return SglangMultiModalCache(cache_class(capacity_bytes), result_class, capacity_bytes)
