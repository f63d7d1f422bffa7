"""Ctrl-C always ends a command: never lost in a finalizer, never left unanswered.

Lost. Python runs a signal's handler in the main thread at the next safe point, and that point may
be inside a garbage-collector callback (Hypothesis times the collector with one) or a `__del__`. A
KeyboardInterrupt raised there cannot reach the code that waits for it: the interpreter prints it as
"Exception ignored in ..." and goes on. `ctrl_c_raises` installs, for the span of a command, a
handler that raises KeyboardInterrupt as Python's own does, except inside a finalizer, where it asks
the watch thread to send the signal again REDELIVER_SECONDS later, by then outside the finalizer.
The handler itself takes no lock and starts no thread (it writes one byte to a pipe): a finalizer
may run while the interrupted code holds a lock that a new thread needs (an earlier version started
a threading.Timer there, and its start could wait forever on threading's shutdown lock).

Unanswered. A KeyboardInterrupt reaches only a main thread that runs. Under heavy load a `check
--threads` run was seen to leave a Ctrl-C unanswered for more than 20 s, its main thread waiting in
`Thread.start()` for a thread that had not run (issue 31; the cause is not known, docs/robustness.md).
So the watch thread learns of every SIGINT from the interpreter's wakeup fd (written by the C-level
handler, whichever thread the signal reached and whether or not the Python handler has run), and
when the command has not ended `grace` seconds after the first, it prints every thread's stack to
stderr, runs the command's last words (`last_words`: its partial report), ends the command's child
processes and exits INTERRUPTED_STATUS.
"""

from __future__ import annotations

import faulthandler
import gc
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Callable, Iterator

from cacheproof.cmdline.statuses import INTERRUPTED_STATUS

REDELIVER_SECONDS = 0.05
GRACE_SECONDS = 10.0
"""How long after the first Ctrl-C a command may take to end by itself (its partial report written
by the main thread) before the watch thread ends it."""
WATCH_THREAD_NAME = "cacheproof Ctrl-C watch"
"""The watch thread, which holds no lock while it waits (a fork beside it is safe)."""

_STOP, _AGAIN = 0, 255
"""Bytes of the watch pipe beside the signal numbers the interpreter writes: the command has ended;
the handler asks for a SIGINT again (no signal has number 0 or 255)."""

_last_words: list[Callable[[], object]] = []


def in_finalizer(frame: FrameType | None) -> bool:
    """Whether `frame` (or a frame it was called from) runs a gc callback or a `__del__`."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


@contextmanager
def last_words(say: Callable[[], object]) -> Iterator[None]:
    """Within the block, `say` is what the command says if the watch thread has to end it (a partial
    report from the progress so far); it runs in the watch thread, the main thread being stuck."""
    _last_words.append(say)
    try:
        yield
    finally:
        _last_words.remove(say)


def _watch(pipe: int, handler: object, grace: float) -> None:
    """The watch thread: redeliver on request, and end the command `grace` s after its first Ctrl-C."""
    deadline = None
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([pipe], [], [], wait)[0]:
            _end_unanswered(grace)
        for byte in os.read(pipe, 512):
            if byte == _STOP:
                return
            if byte == signal.SIGINT and deadline is None:
                deadline = time.monotonic() + grace
            if byte == _AGAIN:
                time.sleep(REDELIVER_SECONDS)
                if signal.getsignal(signal.SIGINT) is handler:
                    os.kill(os.getpid(), signal.SIGINT)


def _end_unanswered(grace: float) -> None:
    print(f"cacheproof: Ctrl-C not answered within {grace:g} s; every thread's stack follows, and the command "
          f"ends with exit {INTERRUPTED_STATUS}", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    for say in reversed(_last_words):
        try:
            say()
        except Exception as error:  # noqa: BLE001 - the exit below must happen whatever the report does
            print(f"cacheproof: the partial report failed: {error!r}", file=sys.stderr)
    for child in multiprocessing.active_children():
        child.kill()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED_STATUS)


def _forget_wakeup_in_child() -> None:
    """A forked child writes its signals to no pipe of its parent's."""
    if _watching:
        signal.set_wakeup_fd(-1)
        _watching.clear()


_watching: list[int] = []
os.register_at_fork(after_in_child=_forget_wakeup_in_child)


@contextmanager
def ctrl_c_raises(grace: float = GRACE_SECONDS) -> Iterator[None]:
    """Within the block, Ctrl-C raises KeyboardInterrupt outside finalizers, and ends the process
    `grace` s after it if the block has not ended (see the module). Only where Python's own handler
    is in place, in the main thread, and no wakeup fd is set: a SIGINT the process was started
    ignoring stays ignored, a handler of the caller's stays theirs, an event loop's wakeup fd too."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pipe, ask = os.pipe()
    os.set_blocking(ask, False)
    if signal.set_wakeup_fd(ask, warn_on_full_buffer=False) != -1:
        signal.set_wakeup_fd(-1)  # the caller's event loop has one: theirs to keep
        os.close(pipe)
        os.close(ask)
        yield
        return

    def interrupt(number: int, frame: FrameType | None) -> None:
        if in_finalizer(frame):
            with suppress(BlockingIOError):  # a full pipe: a request is pending already
                os.write(ask, bytes([_AGAIN]))
            return
        raise KeyboardInterrupt

    watch = threading.Thread(target=_watch, args=(pipe, interrupt, grace), name=WATCH_THREAD_NAME, daemon=True)
    watch.start()
    _watching.append(ask)
    signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        _watching.clear()
        os.write(ask, bytes([_STOP]))
        watch.join()
        os.close(pipe)
        os.close(ask)
