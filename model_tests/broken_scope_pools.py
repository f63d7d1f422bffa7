"""A block pool whose flaw only the wide scope of `check --spec blocks --thorough` reaches.

The small scope's pools have at most 40 blocks; the wide scope's go to 512. `check --spec blocks`
does not find this pool, `--thorough` does (model_tests/test_parity.py and test_block_scopes.py).
"""

from __future__ import annotations

from model_tests.block_pools import ListBlockPool


class FreeCountInSixBits(ListBlockPool):
    """The free count is kept in a 6-bit field (a packed status word): past 63 free blocks it wraps,
    so a pool of 65 blocks or more reports a wrong num_free()."""

    def num_free(self):
        return self._num_free % 64
