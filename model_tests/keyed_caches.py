"""Caches whose keys are strings, as engines key their caches by hash strings (`check --keys str`).

`HashStringKeys` is correct for string keys and refuses any other (an engine's cache that calls
`key.encode()` or indexes a table of digests): `check` fails it on the default int keys and passes
it with `--keys str`, also under `--threads`. `FoldsCaseOfHashes` files a key under its lower case,
as a cache that normalises hex digests does: "A3F9C1D2" and "a3f9c1d2" become one entry. Int keys
never show it; the str domain holds such a pair.
"""

from __future__ import annotations

from collections.abc import Hashable

from cacheproof.spec import CacheSpec
from model_tests.racy_caches import LockedCacheSpec

KEYED = ("reserve", "acquire", "commit", "put", "get", "release", "pop", "__contains__")


def _string_only(method):
    def keyed(self, key, *args, **kwargs):
        if isinstance(key, Hashable) and not isinstance(key, str):
            raise TypeError(f"keys are hash strings, got {key!r}")
        return method(self, key, *args, **kwargs)

    return keyed


def _case_folded(method):
    def keyed(self, key, *args, **kwargs):
        return method(self, key.lower() if isinstance(key, str) else key, *args, **kwargs)

    return keyed


class HashStringKeys(LockedCacheSpec):
    """The spec, thread-safe, refusing any hashable key that is not a str (TypeError)."""


class FoldsCaseOfHashes(CacheSpec):
    """The spec with every str key filed under its lower case."""


for _name in KEYED:
    setattr(HashStringKeys, _name, _string_only(getattr(LockedCacheSpec, _name)))
    setattr(FoldsCaseOfHashes, _name, _case_folded(getattr(CacheSpec, _name)))
