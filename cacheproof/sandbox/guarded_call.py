"""Run the cache under test so that whatever it does (hang, raise anything, exit) the checker goes on.

The checker's work (Hypothesis, the spec, shrinking) runs in a daemon worker thread, and the main
thread supervises it (`supervised`). Every piece of the user's code goes through a
`guarded_program.WatchedImplementation` (or `WatchedFactory`), which notes on a shared `Watch` what
is running and since when: two attribute writes per call, no thread hand-off. The main thread wakes a few times a second; when
the user code running now has run longer than the call timeout, it raises `CacheFault` ("cache.
evict(1) did not return within 10 s") and abandons the worker thread.

An abandoned thread cannot be killed: Python has no way to stop a thread stuck in a call. It is a
daemon thread, so it does not keep the process alive, but it keeps whatever it holds (the cache,
its locks) until the process exits, and a call stuck in C code that holds the GIL stops the
checker too. `--isolate` runs the cache in a child process, which can be killed.

Because signals reach only the main thread, a KeyboardInterrupt seen by the worker was raised by
the cache (an outcome like any other), and one seen by the supervising main thread is the user's
Ctrl-C: the worker is told to stop at its next call (`StopRequested`) and the interrupt propagates.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from cacheproof.cmdline.interrupts import ctrl_c_held
from cacheproof.contract.calls import Call, to_python
from cacheproof.contract.faults import CacheFault, StopRequested, UsageAbort
from cacheproof.sandbox import worker_threads
from cacheproof.spec.cache.values import value_size

DEFAULT_CALL_TIMEOUT = 10.0
"""Seconds a single call to the user's code may take before it is reported as hung."""

_POLL_SECONDS = 0.05

T = TypeVar("T")


class Watch:
    """What user code runs now in the worker, since when: `current` is (started, name, args) or None."""

    def __init__(self, timeout: float | None = DEFAULT_CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self.current: tuple[float, str, tuple] | None = None
        self.stop_requested = False
        self.factory_calls = 0
        self.last_call: Callable[[], Call | None] = lambda: None  # the sequence's call being made

    def begin(self, name: str, args: tuple) -> None:
        if self.stop_requested:
            raise StopRequested()
        self.current = (time.perf_counter(), name, args)

    def end(self) -> None:
        self.current = None

    def overdue(self) -> tuple[float, str, tuple] | None:
        """The running invocation when it has run past the timeout, else None."""
        current = self.current
        if current is None or self.timeout is None:
            return None
        return current if time.perf_counter() - current[0] > self.timeout else None


def nth_call(calls: int) -> str:
    """" (on its call number 5; the 4 before it succeeded)" for a factory failing on a later call; "" on its first."""
    return "" if calls == 1 else f" (on its call number {calls}; the {calls - 1} before it succeeded)"


def supervised(work: Callable[[], T], watch: Watch, describe_hang: Callable[[str, tuple], str] | None = None) -> T:
    """Run `work()` in a daemon worker thread (`worker_threads`: one kept from earlier work when
    idle) and return its result (or raise its exception).

    When the user code running in the worker outlives `watch.timeout`, raise `CacheFault` (kind
    "hang") with `describe_hang(name, args)` (default: `hang_message` without the call), and abandon
    the worker; a hung factory is a `UsageAbort`. The user's Ctrl-C stops the worker at its next
    call and propagates as KeyboardInterrupt.
    """
    watch.stop_requested = False
    piece = worker_threads.start(work)
    poll = _POLL_SECONDS if watch.timeout is None else min(_POLL_SECONDS, watch.timeout / 4)
    try:
        while not _ended(piece, poll):
            hung = watch.overdue()
            if hung is not None:
                watch.stop_requested = True
                _, name, args = hung
                message = hang_message(name, args, watch.timeout) if describe_hang is None else describe_hang(name, args)
                if name == "factory":
                    raise UsageAbort(message)
                raise CacheFault(message, "hang")
    except KeyboardInterrupt:
        watch.stop_requested = True
        _ended(piece, 1.0)
        raise
    if piece.error is not None:
        raise piece.error
    return piece.result


def _ended(piece: worker_threads.Piece, seconds: float) -> bool:
    """Whether `piece` ends within `seconds`. A Ctrl-C is held during the wait and raised after it,
    never inside `threading`'s lock code, which a KeyboardInterrupt may leave half done."""
    with ctrl_c_held():
        return piece.done.wait(seconds)


def hang_message(name: str, args: tuple, timeout: float | None, last_call: Call | None = None) -> str:
    """"cache.evict(1) did not return within 10 s" (see `fault_message`)."""
    seconds = "" if timeout is None else f" within {timeout:g} s"
    return fault_message(name, args, f"did not return{seconds}", last_call)


def fault_message(name: str, args: tuple, what: str, last_call: Call | None = None) -> str:
    """"<user code> <what>": the user code written as the call of the sequence (`last_call`) when it
    is that call, else by name with short arguments and the call it followed ("snapshot() did not
    return within 10 s, after cache.put(1, ...)"), or for make_value the call whose value it was making
    ("cache.make_value(1, 1) did not return within 10 s, making a value for cache.put(1, ...)")."""
    if last_call is not None and (name == last_call.op or (name, last_call.op) == ("__contains__", "contains")):
        return f"{to_python(last_call)} {what}"
    if name == "factory":
        code = f"factory({short_argument(args[0])})"
    elif name == "__contains__":
        code = contains_code(args[0])
    elif name == "len":
        code = "len(cache)"
    else:
        code = f"cache.{name}({', '.join(map(short_argument, args))})"
    when = "making a value for" if name == "make_value" else "after"
    after = "" if last_call is None else f", {when} {to_python(last_call)}"
    return f"{code} {what}{after}"


def contains_code(key: Any) -> str:
    """How a message writes the check `key in cache`: "3 in cache"."""
    return f"{short_argument(key)} in cache"


def short_argument(argument: Any) -> str:
    """An argument as the message shows it: a value by its size, anything else by its repr."""
    if isinstance(argument, (bool, int, float, str, type(None))):
        return repr(argument)
    size = value_size(argument)
    if size is not None:
        return f"<a {size}-byte {type(argument).__name__}>"
    text = repr(argument)
    return text if len(text) <= 40 else text[:37] + "..."
