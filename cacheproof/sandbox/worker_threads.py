"""The daemon threads `guarded_call.supervised` runs the checker's work in, kept between pieces of work.

A piece of work (a Hypothesis search, a shrinking replay) runs in a worker thread while the calling
thread supervises it. A worker that finishes its piece waits, idle, for the next one, rather than
ending: Hypothesis gives every thread that runs a test a random generator of its own and registers
it (`hypothesis.register_random`), which runs a full garbage collection and scans every object for
referrers, 0.1 s of a 1.4 s check beside torch's objects. A thread per piece paid it on every check,
every phase of `check --thorough` and every further divergence's search.

A worker still running a piece (a call that hangs, a search the user's Ctrl-C stopped) is not
handed another; a new worker is started instead, and the busy one joins the idle ones if its piece
ever ends. An idle worker waits on its own queue and holds no other lock, so a process may fork
beside it (`is_idle_worker`); a forked child forgets the workers, which it does not have.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable

WORKER_NAME = "cacheproof-checker"
"""The name of a worker thread running a piece of work."""
IDLE_WORKER_NAME = "cacheproof-checker (idle)"
"""The name of a worker thread waiting for its next piece."""


class Piece:
    """One piece of work handed to a worker: `done` is set once it has returned (`result`) or raised
    (`error`, any BaseException) and its worker is idle again."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work: Callable[[], Any] | None = work
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as error:  # handed to the supervising thread, which raises it
            self.error = error


class _Worker:
    """A daemon thread that runs the pieces put on its queue, one at a time."""

    def __init__(self) -> None:
        self.pieces: queue.SimpleQueue[Piece] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=WORKER_NAME, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        thread = self.thread
        while True:
            piece = self.pieces.get()
            thread.name = WORKER_NAME
            piece.run()
            piece.work = None  # nothing of the piece kept alive while the worker waits
            thread.name = IDLE_WORKER_NAME
            with _lock:
                _idle.append(self)
            piece.done.set()


_idle: list[_Worker] = []
_lock = threading.Lock()


def start(work: Callable[[], Any]) -> Piece:
    """Run `work()` in an idle worker thread, or a new one when none is idle; the piece says when it is done."""
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        worker = _Worker()
    piece = Piece(work)
    worker.pieces.put(piece)
    return piece


def is_idle_worker(thread: threading.Thread) -> bool:
    """Whether `thread` is a worker waiting for work (it holds no lock a forked child could need)."""
    return thread.name == IDLE_WORKER_NAME


def _forget_workers() -> None:
    """In a forked child: the parent's workers are not running here, and the lock may have been held."""
    global _lock
    _idle.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)
