"""Caches that misbehave the way engines' caches do under faults, not by breaking a rule.

Each is the spec with one fault. The checker must survive every one: a hang, an exit, a crash
(under --isolate) or the user's code failing outside the call is a counterexample (exit 1); a
factory that cannot make a usable cache is a usage error (exit 2). model_tests/test_robustness.py
holds the checker to that.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from pathlib import Path

from cacheproof.spec import CacheSpec
from model_tests.broken_caches import ClearDropsBusyEntries
from model_tests.racy_caches import LockedCacheSpec

_NEVER = threading.Event()
"""Never set: waiting on it is a deadlock (bounded at 10 minutes so a test process can still end)."""


class EvictHangs(CacheSpec):
    """evict with entries present never returns (a deadlock on a lock its caller holds)."""

    def evict(self, nbytes):
        if len(self):
            _NEVER.wait(600)
        return super().evict(nbytes)


class PopExits(CacheSpec):
    """pop calls sys.exit(3) (a fatal-error path that ends the interpreter)."""

    def pop(self, key):
        if key in self:
            sys.exit(3)
        return super().pop(key)


class ClearRaisesKeyboardInterrupt(CacheSpec):
    """clear of a non-empty cache raises KeyboardInterrupt itself (not the user's Ctrl-C)."""

    def clear(self):
        if len(self):
            raise KeyboardInterrupt("raised by the cache")
        return super().clear()


class ReleaseRaisesGeneratorExit(CacheSpec):
    """release of an in-use entry raises GeneratorExit (a coroutine-based binding closed under it)."""

    def release(self, key):
        if key in self:
            raise GeneratorExit("the binding's generator was closed")
        return super().release(key)


class GetSegfaults(CacheSpec):
    """get of a present key dereferences a null pointer (an extension's crash); check it with --isolate only."""

    def get(self, key):
        if key in self:
            ctypes.string_at(0)
        return super().get(key)


class PutExitsHard(CacheSpec):
    """put leaves the process with os._exit(7) (no cleanup, no exception); check it with --isolate only."""

    def put(self, key, value):
        if len(self) >= 1:
            os._exit(7)
        return super().put(key, value)


class GetAborts(CacheSpec):
    """get of a present key calls abort() (a failed assertion in C++): SIGABRT; check it with --isolate only."""

    def get(self, key):
        if key in self:
            os.abort()
        return super().get(key)


class PutKilled(CacheSpec):
    """put into a non-empty cache kills its own process with SIGKILL, as the kernel's out-of-memory
    killer would; check it with --isolate only."""

    def put(self, key, value):
        if len(self) >= 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().put(key, value)


class SnapshotHangs(CacheSpec):
    """snapshot() never returns once the cache holds two entries (it waits for a lock a call leaked)."""

    def snapshot(self):
        if len(self) >= 2:
            _NEVER.wait(600)
        return super().snapshot()


class ContainsRaises(CacheSpec):
    """`key in cache` raises once the cache holds two entries (a lookup that breaks under load)."""

    def __contains__(self, key):
        if super().__len__() >= 2:
            raise RuntimeError("lookup table corrupted")
        return super().__contains__(key)


class SnapshotRaises(CacheSpec):
    """snapshot() raises once the cache holds two entries (an inspection path that breaks)."""

    def snapshot(self):
        if len(self) >= 2:
            raise RuntimeError("snapshot lost its iterator")
        return super().snapshot()


class SnapshotReturnsCount(CacheSpec):
    """snapshot() of a non-empty cache returns the entry count instead of the entries."""

    def snapshot(self):
        entries = super().snapshot()
        return len(entries) if entries else entries


class StatsReturnsNone(CacheSpec):
    """stats() of a non-empty cache returns None (a binding that drops the C struct)."""

    def stats(self):
        return super().stats() if not super().__len__() else None


class _Unprintable(RuntimeError):
    """An error whose own str() raises (an extension's error object in a broken state)."""

    def __str__(self):
        raise ValueError("the message buffer is gone")


class SnapshotRaisesUnprintable(CacheSpec):
    """snapshot() of a non-empty cache raises an error that cannot even be printed."""

    def snapshot(self):
        if super().__len__():
            raise _Unprintable()
        return super().snapshot()


class StatsRaises(CacheSpec):
    """stats() raises once an entry is pinned (a counter read under a lock it does not hold)."""

    def stats(self):
        if any(entry.refcount for entry in super().snapshot()):
            raise ValueError("pinned counter out of sync")
        return super().stats()


class LenRaises(CacheSpec):
    """len() raises on a cache holding three entries."""

    def __len__(self):
        count = super().__len__()
        if count == 3:
            raise OverflowError("entry count overflowed")
        return count


class MakeValueRaises(CacheSpec):
    """make_value refuses values of more than 4 bytes."""

    def make_value(self, nbytes, tag):
        if nbytes > 4:
            raise MemoryError(f"cannot allocate {nbytes} bytes")
        return bytes([tag % 256]) * nbytes


class MakeValueHangs(CacheSpec):
    """make_value of more than 4 bytes never returns (the probe's value before any example, too)."""

    def make_value(self, nbytes, tag):
        if nbytes > 4:
            _NEVER.wait(600)
        return bytes([tag % 256]) * nbytes


class ReleaseFlips(CacheSpec):
    """Every other release of the process returns the wrong answer (a race-dependent result)."""

    releases = 0

    def release(self, key):
        result = super().release(key)
        ReleaseFlips.releases += 1
        return (not result) if ReleaseFlips.releases % 2 else result


class _Uncomparable:
    def __eq__(self, other):
        raise TypeError("a lazy tensor cannot be compared")

    __hash__ = None


class GetReturnsUncomparable(CacheSpec):
    """get returns an object whose == raises (a lazy handle instead of the value)."""

    def get(self, key):
        super().get(key)
        return _Uncomparable()


class LockedSnapshotRaises(LockedCacheSpec):
    """The correctly locked spec (for every mode, --threads too) whose snapshot() raises on a
    non-empty cache: a fault found at the first call, so a test can afford it in every mode."""

    def snapshot(self):
        if super().__len__():
            raise RuntimeError("snapshot lost its iterator")
        return super().snapshot()


class LockedStatsRaises(LockedCacheSpec):
    """The locked spec whose stats() raises on a non-empty cache."""

    def stats(self):
        if super().__len__():
            raise ValueError("pinned counter out of sync")
        return super().stats()


class LockedLenRaises(LockedCacheSpec):
    """The locked spec whose len() raises on a non-empty cache."""

    def __len__(self):
        count = super().__len__()
        if count:
            raise OverflowError("entry count overflowed")
        return count


class LockedContainsRaises(LockedCacheSpec):
    """The locked spec whose `in` raises on a non-empty cache."""

    def __contains__(self, key):
        if super().__len__():
            raise RuntimeError("lookup table corrupted")
        return super().__contains__(key)


class LockedMakeValueHangs(LockedCacheSpec):
    """The locked spec whose make_value of more than 4 bytes never returns."""

    def make_value(self, nbytes, tag):
        if nbytes > 4:
            _NEVER.wait(600)
        return bytes([tag % 256]) * nbytes


class LockedMakeValueRaises(LockedCacheSpec):
    """The locked spec whose make_value always raises."""

    def make_value(self, nbytes, tag):
        raise MemoryError(f"cannot allocate {nbytes} bytes")


class NoEvict:
    """A cache without evict, pop or clear (an adapter that forgot them)."""

    def __init__(self, capacity_bytes):
        self._spec = CacheSpec(capacity_bytes)

    def __len__(self):
        return len(self._spec)

    def __contains__(self, key):
        return key in self._spec

    def __getattr__(self, name):
        if name in ("evict", "pop", "clear"):
            raise AttributeError(name)
        return getattr(self._spec, name)


class SlowCache(CacheSpec):
    """Every call takes 20 ms; the first writes the file named by $CACHEPROOF_SLOW_MARKER (for Ctrl-C tests)."""

    def reserve(self, *args, **kwargs):
        _slow()
        return super().reserve(*args, **kwargs)

    def put(self, key, value):
        _slow()
        return super().put(key, value)


class SlowToShrink(ClearDropsBusyEntries):
    """ClearDropsBusyEntries whose every operation takes 10 ms: found within seconds, its shrinking
    (hundreds of replays) takes a minute, so a test can press Ctrl-C while it runs."""


for _operation in ("reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear", "__contains__"):
    def _paused(self, *args, _name=_operation, **kwargs):
        threading.Event().wait(0.01)
        return getattr(ClearDropsBusyEntries, _name)(self, *args, **kwargs)

    setattr(SlowToShrink, _operation, _paused)


def _slow():
    marker = os.environ.get("CACHEPROOF_SLOW_MARKER")
    if marker and not Path(marker).exists():
        Path(marker).write_text("started\n")
    threading.Event().wait(0.02)


def returns_none(capacity_bytes):
    """A factory that returns None."""
    return None


def raises_on_construction(capacity_bytes):
    """A factory that always raises (the device is not there)."""
    raise RuntimeError(f"no device for a cache of {capacity_bytes} bytes")


def hangs_on_construction(capacity_bytes):
    """A factory that never returns (it waits for a device that never frees)."""
    _NEVER.wait(600)


class _FailsOnFifthCall:
    """A factory that raises on its fifth call only (a resource running out, then freed)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, capacity_bytes):
        self.calls += 1
        if self.calls == 5:
            raise OSError("out of device handles")
        return CacheSpec(capacity_bytes)


fails_on_fifth_call = _FailsOnFifthCall()
