"""Caches that make their own values, for the checks whose values are made where the cache runs
(`--isolate`: in its child process, `cacheproof.sandbox.program_isolation`) and capped where they
hold memory (`check --max-capacity`)."""

from __future__ import annotations

from cacheproof.spec import CacheSpec


class BytearrayValueCache(CacheSpec):
    """The spec itself, making each value as a bytearray (an object that is not plain bytes, which
    `get` returns as it was stored, and which holds its bytes in memory)."""

    def make_value(self, nbytes, tag):
        return bytearray([tag % 256]) * nbytes
