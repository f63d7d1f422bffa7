"""Forced interleavings: a racy window that another scenario thread always gets into.

A racy cache in model_tests drops its lock at one point (its "racy window") and acts afterwards on a
decision taken before. Left to the OS scheduler, whether another thread runs inside that window is
luck: on a loaded machine a test that needs the race can miss it in every run. `RacyWindow` removes
the luck. A thread that opens the window (`RacyWindow.open`, with its lock already released) waits
there until one of these holds:

- another thread of the scenario has completed a call since the window opened (the racy
  interleaving happened), or
- every other live thread of the scenario is itself waiting, in a window or for a lock taken with
  `RacyWindow.hold`, or there is none (no other call can complete before this one goes on, so
  waiting longer would deadlock).

A cache that opens its window while holding one of its locks (to force a lock-order deadlock) takes
every lock of its own with `hold`, so that a thread blocked on such a lock counts as waiting; a cache
that releases its locks before the window takes them as usual.

The threads of a scenario are the ones the concurrent checker starts (their names begin with
`SCENARIO_THREAD_PREFIX`) after it made the cache (a stuck thread of an earlier run is not one); a window opened outside a scenario (the sequential checker, a scenario's
prefix) is passed straight through, so the same cache is correct when called from one thread.
The only waiting is a poll of POLL_SECONDS while the rule above re-evaluates: no timeout decides
anything.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from cacheproof.check.concurrent.history import SCENARIO_THREAD_PREFIX

POLL_SECONDS = 0.001
"""How often a waiting thread looks again at which threads are alive (a thread that ends notifies no one)."""


def _scenario_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith(SCENARIO_THREAD_PREFIX)}


class RacyWindow:
    """One cache's racy window and the count of its completed calls (see the module)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._completed = 0
        self._waiting: set[threading.Thread] = set()
        self._depth = threading.local()  # public calls this thread is inside (a call may make others)
        self._earlier = _scenario_threads()  # threads of earlier runs still alive (stuck): not this cache's

    @contextmanager
    def call(self) -> Iterator[None]:
        """One public call of the cache: when the outermost one returns (or raises), the threads
        waiting in the window are woken."""
        depth = getattr(self._depth, "calls", 0)
        self._depth.calls = depth + 1
        try:
            yield
        finally:
            self._depth.calls = depth
            if depth == 0:
                with self._condition:
                    self._completed += 1
                    self._condition.notify_all()

    @contextmanager
    def hold(self, lock: Any) -> Iterator[None]:
        """`with lock:`, the thread counted as waiting while it blocks on `lock`."""
        me = threading.current_thread()
        with self._condition:
            self._waiting.add(me)
            self._condition.notify_all()
        try:
            lock.acquire()
        finally:
            with self._condition:
                self._waiting.discard(me)
        try:
            yield
        finally:
            lock.release()

    def open(self) -> None:
        """Wait, holding none of the cache's locks, until another scenario thread has completed a
        call or none can (see the module)."""
        me = threading.current_thread()
        if not me.name.startswith(SCENARIO_THREAD_PREFIX):
            return
        with self._condition:
            seen = self._completed
            self._waiting.add(me)
            try:
                while self._completed == seen and (_scenario_threads() - self._earlier - self._waiting - {me}):
                    self._condition.wait(POLL_SECONDS)
            finally:
                self._waiting.discard(me)


def counts_completed_calls(cls: type, operations: tuple[str, ...]) -> type:
    """`cls` with each of `operations` made a `RacyWindow.call` of the instance's `racy_window`, so
    that a window opened by another thread sees the call complete."""

    def counted(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def with_count(self, *args, **kwargs):
            with self.racy_window.call():
                return method(self, *args, **kwargs)

        return with_count

    for name in operations:
        setattr(cls, name, counted(getattr(cls, name)))
    return cls
