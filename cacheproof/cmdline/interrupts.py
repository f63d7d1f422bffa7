"""Ctrl-C always ends a command: never lost where Python cannot raise, never left unanswered.

Lost. Python runs a signal's handler in the main thread at the next safe point, and that point may
be inside code whose exceptions Python cannot pass on: a garbage-collector callback (Hypothesis
times the collector with one), a `__del__`, a weakref callback (a WeakSet drops a dead member with
one). A KeyboardInterrupt raised there is handed to `sys.unraisablehook`, printed as "Exception
ignored in ..." and lost, and the command runs on. `ctrl_c_raises` installs, for the span of a
command, a hook that takes such a KeyboardInterrupt and asks the watch thread to send the signal
again REDELIVER_SECONDS later, by then outside (any other unraisable goes to the hook before it).
Neither the SIGINT handler nor the hook takes a lock or starts a thread (the hook writes one byte to
a pipe): they may run while the interrupted code holds a lock that a new thread needs.

Unanswered. A KeyboardInterrupt reaches only a main thread that runs, and a command may swallow it
(a bug of ours, or a place like the above that Python adds later). So the watch thread learns of
every SIGINT from the interpreter's wakeup fd (written by the C-level handler, whichever thread the
signal reached, whether or not the Python handler has run), and when the command has not ended
`grace` seconds after the first, it prints every thread's stack to stderr, runs the command's last
words (`last_words`: its partial report), ends the command's child processes and exits
INTERRUPTED_STATUS.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, Callable, Iterator

from cacheproof.cmdline.statuses import INTERRUPTED_STATUS

REDELIVER_SECONDS = 0.05
GRACE_SECONDS = 10.0
"""How long after the first Ctrl-C a command may take to end by itself (its partial report written
by the main thread) before the watch thread ends it."""
WATCH_THREAD_NAME = "cacheproof Ctrl-C watch"
"""The watch thread, which holds no lock while it waits (a fork beside it is safe)."""

_STOP, _AGAIN = 0, 255
"""Bytes of the watch pipe beside the signal numbers the interpreter writes: the command has ended;
a lost Ctrl-C is to be sent again (no signal has number 0 or 255)."""

_last_words: list[Callable[[], object]] = []
_raised_at: list[str] = []
"""Where the command's first KeyboardInterrupt was raised: said when the watch has to end it."""
_watching: list[int] = []
"""The write end of the watch pipe while a command runs under `ctrl_c_raises`."""


def _interrupt(number: int, frame: FrameType | None) -> None:
    if not _raised_at:
        _raised_at.append("".join(traceback.format_stack(frame)))
    raise KeyboardInterrupt


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Within the block a Ctrl-C is held, not raised, and raised as KeyboardInterrupt when the block
    ends: for code that cannot take an exception at every moment. A C++ extension's module start
    cannot: torch's pybind11 modules abort the whole process ("terminate called after throwing an
    instance of 'pybind11::error_already_set'") when a KeyboardInterrupt is raised inside them, and
    torch's C-level start clears one that lands in its import of numpy, so the import succeeds and
    the Ctrl-C is lost. Only in the main thread, under Python's own handler or `ctrl_c_raises`';
    elsewhere the block runs as it is. The watch thread counts its grace from the Ctrl-C all the
    same, so a block that never ends is still ended."""
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() \
            or handler not in (signal.default_int_handler, _interrupt):
        yield
        return
    held: list[FrameType | None] = []

    def hold(number: int, frame: FrameType | None) -> None:
        held.append(frame)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if held:
            handler(signal.SIGINT, held[0])


@contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block a SIGTERM raises KeyboardInterrupt in the main thread, as a Ctrl-C does, so
    the command ends its child processes and keeps what it has: for a command whose children run in
    sessions of their own (`cacheproof mutate`'s sides), which a SIGTERM to the command alone would
    otherwise leave running. Only in the main thread and where SIGTERM has its default action (a
    handler of the caller's stays theirs, an ignored SIGTERM stays ignored)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(number: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def last_words(say: Callable[[], object]) -> Iterator[None]:
    """Within the block, `say` is what the command says if the watch thread has to end it (a partial
    report from the progress so far); it runs in the watch thread, the main thread being stuck."""
    _last_words.append(say)
    try:
        yield
    finally:
        _last_words.remove(say)


def _watch(pipe: int, grace: float) -> None:
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
                if signal.getsignal(signal.SIGINT) is _interrupt:
                    os.kill(os.getpid(), signal.SIGINT)


def _end_unanswered(grace: float) -> None:
    print(f"cacheproof: Ctrl-C not answered within {grace:g} s; every thread's stack follows, and the command "
          f"ends with exit {INTERRUPTED_STATUS}", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    print("The first KeyboardInterrupt was raised here:\n" + (_raised_at[0] if _raised_at else "nowhere: the handler never ran\n"),
          file=sys.stderr, flush=True)
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


def _unraisable(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """The unraisable hook: a lost Ctrl-C is sent again; anything else goes to `previous`."""
    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _watching:
            with suppress(BlockingIOError):  # a full pipe: a request is pending already
                os.write(_watching[0], bytes([_AGAIN]))
            return
        previous(unraisable)
    return hook


def _forget_wakeup_in_child() -> None:
    """A forked child writes its signals to no pipe of its parent's."""
    if _watching:
        signal.set_wakeup_fd(-1)
        _watching.clear()


os.register_at_fork(after_in_child=_forget_wakeup_in_child)


@contextmanager
def ctrl_c_raises(grace: float = GRACE_SECONDS) -> Iterator[None]:
    """Within the block, Ctrl-C raises KeyboardInterrupt, is sent again when Python loses it, and ends
    the process `grace` s after it if the block has not ended (see the module). Only where Python's
    own handler is in place, in the main thread, and no wakeup fd is set: a SIGINT the process was
    started ignoring stays ignored, a handler of the caller's stays theirs, an event loop's wakeup fd
    too."""
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
    watch = threading.Thread(target=_watch, args=(pipe, grace), name=WATCH_THREAD_NAME, daemon=True)
    watch.start()
    _watching.append(ask)
    _raised_at.clear()
    previous_hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = previous_hook
        signal.set_wakeup_fd(-1)
        _watching.clear()
        os.write(ask, bytes([_STOP]))
        watch.join()
        os.close(pipe)
        os.close(ask)
