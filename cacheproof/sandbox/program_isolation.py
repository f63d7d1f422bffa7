"""`--isolate` for the spec kinds other than the tensor cache: the implementation runs in a child
process; the spec stays in the checker.

Each implementation built by `IsolatedProgramFactory(impl, names)(size)` is a child process (forked
from a server that has already imported the factory's module, as the cache's isolation does) that
builds `factory(size)` and makes the calls and views it is sent. Arguments and results travel
pickled; an error travels as the names of its class's MRO and its message, and comes back as the
contract's own class when the child raised one (a subclass of a contract error keeps its name and
its contract base), as `ChildFailure` otherwise. A child that dies (a segfault, `os._exit`, an
out-of-memory kill) or does not answer within the call timeout raises `ChildFailure` naming the call
and the signal or exit status: the differential step takes it for a crash, a divergence.
"""

from __future__ import annotations

import signal
from typing import Any

from cacheproof.sandbox.isolation import _context, _ending
from cacheproof.spec import errors

_START_SECONDS = 120.0


class ChildFailure(Exception):
    """The implementation's child process failed a call: it died, hung, or raised a non-contract error."""


def _serve(connection: Any, impl: str, size: int) -> None:
    """The child: build the implementation, then answer (name, args, kwargs) requests until closed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from cacheproof.sandbox.factories import load_factory

    try:
        target = load_factory(impl)(size)
    except BaseException as error:  # reported to the checker, which decides
        connection.send(("failed", f"{impl}({size}) raised {type(error).__name__}: {error}"))
        return
    connection.send(("ready", tuple(name for name in dir(target) if not name.startswith("_"))))
    while True:
        try:
            name, args, kwargs = connection.recv()
        except EOFError:
            return
        try:
            answer: tuple = ("ok", getattr(target, name)(*args, **kwargs))
        except BaseException as error:  # the implementation may raise anything; it travels as names
            answer = ("error", tuple(c.__name__ for c in type(error).__mro__), str(error))
        try:
            connection.send(answer)
        except Exception as error:  # an unpicklable result
            connection.send(("error", ("ChildFailure",), f"{name} returned what cannot travel: {error}"))


def _rebuilt(names: tuple[str, ...], message: str) -> Exception:
    """The contract's class named first in `names`, a contract subclass under that name, or ChildFailure."""
    contract = getattr(errors, names[0], None)
    if isinstance(contract, type) and issubclass(contract, errors.CacheError):
        return contract(message)
    base = next((getattr(errors, n) for n in names if isinstance(getattr(errors, n, None), type)
                 and issubclass(getattr(errors, n), errors.CacheError)), None)
    if base is not None:
        return type(names[0], (base,), {"__module__": "cacheproof.isolated"})(message)
    return ChildFailure(f"{names[0]}: {message}")


class IsolatedImplementation:
    """The checker's side of one child: the methods named in `names` that the implementation has
    send the call and wait for the answer."""

    def __init__(self, impl: str, size: int, names: tuple[str, ...], timeout: float | None) -> None:
        context = _context(impl)
        self._connection, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_end, impl, size), daemon=True,
                                        name="cacheproof-implementation")
        self._process.start()
        child_end.close()
        self._timeout = timeout
        answer = self._receive("starting", _START_SECONDS)
        if answer[0] != "ready":
            self.close()
            raise ChildFailure(answer[1])
        self._names = frozenset(names) & frozenset(answer[1])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        try:
            self._connection.send((name, args, kwargs))
        except (BrokenPipeError, OSError):
            raise ChildFailure(f"{name}: the child had already ended ({_ending(self._process.exitcode)})") from None
        answer = self._receive(name, self._timeout)
        if answer[0] == "ok":
            return answer[1]
        raise _rebuilt(answer[1], answer[2])

    def _receive(self, what: str, timeout: float | None) -> tuple:
        if not self._connection.poll(timeout):
            self.close()
            raise ChildFailure(f"{what} did not return within {timeout:g} s")
        try:
            return self._connection.recv()
        except (EOFError, OSError):
            self._process.join(5)
            raise ChildFailure(f"{what} killed the child ({_ending(self._process.exitcode)})") from None

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)
        self._connection.close()


class IsolatedProgramFactory:
    """`factory(size)` for the checker: a fresh child per implementation; the previous one is ended."""

    def __init__(self, impl: str, names: tuple[str, ...], timeout: float | None) -> None:
        self.impl, self.names, self.timeout = impl, names, timeout
        self._last: IsolatedImplementation | None = None

    def __call__(self, size: int) -> IsolatedImplementation:
        self.close()
        self._last = IsolatedImplementation(self.impl, size, self.names, self.timeout)
        return self._last

    def close(self) -> None:
        if self._last is not None:
            self._last.close()
            self._last = None
