"""The module `cacheproof mutate` is tested on (model_tests/test_mutate.py): the spec's cache,
counting its lookups in `lookups`, a number the contract never reads.

Its mutants' fates can be reasoned out: the contract sees `get`, `pop` and `in` but not `lookups`;
the test command of test_mutate.py reads `lookups` (two gets add 2) and calls `get` and `in`,
never `pop`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from cacheproof.spec import CacheSpec

LOOKUP_STEP = 1


class CountingCache(CacheSpec):
    """The spec's cache; `lookups` grows by LOOKUP_STEP at each get."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lookups = 0

    def get(self, key: Hashable) -> Any:
        self.lookups += LOOKUP_STEP
        return super().get(key)

    def pop(self, key: Hashable) -> Any:
        return super().pop(key)

    def __contains__(self, key: object) -> bool:
        found = super().__contains__(key)
        return found is True
