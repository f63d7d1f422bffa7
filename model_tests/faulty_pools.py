"""Block pools that misbehave the way native pools do under faults, not by breaking a rule.

Each is the correct `ListBlockPool` with one fault. `cacheproof check --spec blocks` must report
each as a counterexample within the call timeout plus its shrinking, with or without `--isolate`
(model_tests/test_pool_faults.py); `ExitsOnDoubleFreePool` (model_tests/block_pools.py), which ends
its process, only under `--isolate`.
"""

from __future__ import annotations

import threading

from model_tests.block_pools import ListBlockPool

_NEVER = threading.Event()
"""Never set: waiting on it is a deadlock, bounded at 10 minutes so that a test process still ends."""


class LookupHangs(ListBlockPool):
    """lookup of any hash never returns (a deadlock on the hash map's lock): one call shows it."""

    def lookup(self, hashes):
        if hashes:
            _NEVER.wait(600)
        return super().lookup(hashes)


class FreeOfCachedHangs(ListBlockPool):
    """free of a block that carries a hash never returns (the eviction list's lock taken twice): it
    takes an allocation, a cache_blocks and the free to show it."""

    def free(self, request, blocks):
        if any(block in self._block_hash for block in blocks if isinstance(block, int)):
            _NEVER.wait(600)
        return super().free(request, blocks)


class TablesHangs(ListBlockPool):
    """The view tables() never returns once a request holds a table: the calls all return, the
    inspection after them hangs."""

    def tables(self):
        if self._requests:
            _NEVER.wait(600)
        return super().tables()


def hangs_when_built(num_blocks: int) -> ListBlockPool:
    """A factory that never returns (a driver waiting for a device that never answers): a usage
    error, since no call sequence shows it."""
    _NEVER.wait(600)
    return ListBlockPool(num_blocks)
