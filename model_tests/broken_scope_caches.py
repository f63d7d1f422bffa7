"""Broken caches that only the wide scope can catch, one per dimension of docs/scope.md.

Each is the spec with one production-style flaw that the small scope (six int keys, capacities up
to 64 bytes, 100 calls) never reaches: a fixed table of 8 live entries, keys normalised through
str(), byte counters kept in 32 signed bits, a maintenance pass after 256 calls. `cacheproof check
--thorough --impl model_tests.broken_scope_caches:NAME` must find every one (exit 1);
model_tests/test_scope.py holds it to that, and holds the default check to not needing them.
"""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.spec import Acquired, CacheSpec
from cacheproof.spec.cache import arguments, rules
from cacheproof.spec.cache.model import READY

TABLE_SLOTS = 8


class FixedTableOfEight(CacheSpec):
    """A slot table of 8 entries: with 8 entries live, a reservation or put is refused as if the
    cache were full, whatever the free bytes."""

    def _try_reserve(self, key, nbytes, retain):
        if len(self._entries) >= TABLE_SLOTS:
            return False
        return super()._try_reserve(key, nbytes, retain)

    def put(self, key, value):
        if len(self._entries) >= TABLE_SLOTS and key not in self._entries:
            arguments.check_key("put", key)  # bad arguments still raise as the spec's do
            arguments.check_put_size(key, self._value_size("put", key, value), self.capacity_bytes)
            return False
        return super().put(key, value)


def normal_key(key: Any) -> Any:
    """How the cache below files a key: "1" for 1, "1", b"1"; "img/1" for ("img", 1) and ("img", "1")."""
    if isinstance(key, tuple):
        return "/".join(str(normal_key(part)) for part in key)
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    try:
        hash(key)
    except TypeError:
        return key  # an unhashable key goes through as it is, and is refused as the spec refuses it
    return str(key)


class NormalisesKeysWithStr:
    """The spec filing entries under `normal_key(key)`: distinct keys that format alike (1 and "1",
    ("img", 1) and ("img", "1"), b"1") share one entry. It reports each entry under the key it was
    last given, so with keys that format differently it is the spec exactly."""

    def __init__(self, capacity_bytes: int) -> None:
        self._inner = CacheSpec(capacity_bytes)
        self._given: dict[Any, Hashable] = {}  # normal key -> the key last used for it

    def _normal(self, key: Any) -> Any:
        normal = normal_key(key)
        if normal is not key or isinstance(key, str):
            self._given[normal] = key
        return normal

    def reserve(self, key, nbytes, *, retain=True):
        return self._inner.reserve(self._normal(key), nbytes, retain=retain)

    def acquire(self, key, nbytes, *, retain=True) -> Acquired:
        return self._inner.acquire(self._normal(key), nbytes, retain=retain)

    def commit(self, key, value):
        return [self._given.get(k, k) for k in self._inner.commit(self._normal(key), value)]

    def put(self, key, value):
        return self._inner.put(self._normal(key), value)

    def get(self, key):
        return self._inner.get(self._normal(key))

    def release(self, key):
        return self._inner.release(self._normal(key))

    def evict(self, nbytes):
        return [self._given.get(k, k) for k in self._inner.evict(nbytes)]

    def pop(self, key):
        return self._inner.pop(self._normal(key))

    def clear(self):
        return self._inner.clear()

    def snapshot(self):
        return tuple(view._replace(key=self._given.get(view.key, view.key)) for view in self._inner.snapshot())

    def stats(self):
        return self._inner.stats()

    @property
    def capacity_bytes(self) -> int:
        return self._inner.capacity_bytes

    def __len__(self) -> int:
        return len(self._inner)

    def __contains__(self, key) -> bool:
        return normal_key(key) in self._inner


def int32(value: int) -> int:
    """`value` as a signed 32-bit counter holds it."""
    return (value + 2**31) % 2**32 - 2**31


class ByteCountersWrapAt32Bits(CacheSpec):
    """Reserved, pinned and idle bytes kept in signed 32-bit counters: past 2**31 they go negative,
    so the cache over-admits and reports wrong stats (the capacity itself is kept exactly)."""

    @property
    def _bytes(self) -> rules.Bytes:
        return self._counters

    @_bytes.setter
    def _bytes(self, value: rules.Bytes) -> None:
        self._counters = value._replace(
            reserved=int32(value.reserved), pinned=int32(value.pinned), idle=int32(value.idle)
        )


MAINTENANCE_EVERY = 256


class MaintenancePassReorders(CacheSpec):
    """Every 256th call runs a maintenance pass that rebuilds the table with the idle entries
    last, losing their recency among the busy ones (a compaction after a few hundred calls)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._calls = 0

    def _tick(self) -> None:
        self._calls += 1
        if self._calls % MAINTENANCE_EVERY == 0:
            idle = {k: e for k, e in self._entries.items() if e.state is READY and e.refcount == 0}
            busy = {k: e for k, e in self._entries.items() if k not in idle}
            self._entries = {**busy, **idle}

    def reserve(self, key, nbytes, *, retain=True):
        self._tick()
        return super().reserve(key, nbytes, retain=retain)

    def acquire(self, key, nbytes, *, retain=True):
        self._tick()
        return super().acquire(key, nbytes, retain=retain)

    def commit(self, key, value):
        self._tick()
        return super().commit(key, value)

    def put(self, key, value):
        self._tick()
        return super().put(key, value)

    def get(self, key):
        self._tick()
        return super().get(key)

    def release(self, key):
        self._tick()
        return super().release(key)


BROKEN_SCOPE_CACHES = (FixedTableOfEight, NormalisesKeysWithStr, ByteCountersWrapAt32Bits, MaintenancePassReorders)
