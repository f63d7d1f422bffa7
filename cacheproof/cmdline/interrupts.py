"""Ctrl-C is never lost: a SIGINT handler that does not raise inside a finalizer.

Python runs a signal's handler in the main thread at the next safe point, and that point may be
inside a garbage-collector callback (Hypothesis times the collector with one) or a `__del__`. A
KeyboardInterrupt raised there cannot reach the code that waits for it: the interpreter prints it
as "Exception ignored in ..." and goes on, so the user's Ctrl-C is lost and a traceback of
Hypothesis's internals is all they see. `ctrl_c_raises` installs, for the span of a command, a
handler that raises KeyboardInterrupt as Python's own does, except inside a finalizer, where it
sends the signal again REDELIVER_SECONDS later (from a timer thread: the handler still runs in the
main thread, by then outside the finalizer).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

REDELIVER_SECONDS = 0.05


def in_finalizer(frame: FrameType | None) -> bool:
    """Whether `frame` (or a frame it was called from) runs a gc callback or a `__del__`."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _interrupt(number: int, frame: FrameType | None) -> None:
    if in_finalizer(frame):
        threading.Timer(REDELIVER_SECONDS, _redeliver).start()
        return
    raise KeyboardInterrupt


def _redeliver() -> None:
    """Send the Ctrl-C again, unless the command has ended meanwhile (its handler is gone)."""
    if signal.getsignal(signal.SIGINT) is _interrupt:
        os.kill(os.getpid(), signal.SIGINT)


@contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """Within the block, Ctrl-C raises KeyboardInterrupt outside finalizers (see the module). Only
    where Python's own handler is in place, in the main thread: a SIGINT the process was started
    ignoring stays ignored, and a handler of the caller's stays theirs."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
