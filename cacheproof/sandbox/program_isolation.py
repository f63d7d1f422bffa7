"""`--isolate` for the spec kinds other than the tensor cache: the implementation runs in a child
process; the spec stays in the checker.

Each implementation built by `IsolatedProgramFactory(impl, names)(size)` is a child process (forked
from a server that has already imported the factory's module, as the cache's isolation does) that
builds `factory(size)` and makes the calls and views it is sent. Arguments and results travel
pickled; an error travels as the names of its class's MRO and its message, and comes back as the
contract's own class when the child raised one (a subclass of a contract error keeps its name and
its contract base), as `ChildFailure` otherwise (a crash outcome). A call that kills the child (a
segfault, `os._exit`, an out-of-memory kill) or does not answer within the watch's call timeout is
`CacheFault` ("crash" or "hang"), worded as the tensor cache's isolation words it
(`guarded_call.fault_message`): a counterexample that ends at that call, not an outcome. A child that
cannot start (the factory raises, or takes more than _START_SECONDS) is `ChildFailure`.
"""

from __future__ import annotations

import signal
from typing import Any

from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox.guarded_call import Watch, fault_message
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

    def __init__(self, impl: str, size: int, names: tuple[str, ...], watch: Watch) -> None:
        context = _context(impl)
        self._connection, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_end, impl, size), daemon=True,
                                        name="cacheproof-implementation")
        self._process.start()
        child_end.close()
        self._watch = watch
        answer = self._receive("starting", (), _START_SECONDS)
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
            raise self._fault(name, args, f"killed the process running the cache ({_ending(self._process.exitcode)})",
                              "crash") from None
        answer = self._receive(name, args, self._watch.timeout)
        if answer[0] == "ok":
            return answer[1]
        raise _rebuilt(answer[1], answer[2])

    def _receive(self, what: str, args: tuple, timeout: float | None) -> tuple:
        if not self._connection.poll(timeout):
            self.close()
            if what == "starting":
                raise ChildFailure(f"starting did not return within {timeout:g} s")
            raise self._fault(what, args, f"did not return within {timeout:g} s (its process was killed)", "hang")
        try:
            return self._connection.recv()
        except (EOFError, OSError):
            self._process.join(5)
            if what == "starting":
                raise ChildFailure(f"starting killed the child ({_ending(self._process.exitcode)})") from None
            raise self._fault(what, args, f"killed the process running the cache ({_ending(self._process.exitcode)})",
                              "crash") from None

    def _fault(self, name: str, args: tuple, what: str, kind: str) -> CacheFault:
        return CacheFault(fault_message(name, args, what, self._watch.last_call()), kind)

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)
        self._connection.close()


class IsolatedProgramFactory:
    """`factory(size)` for the checker: a fresh child per implementation; the previous one is ended.
    Each call waits at most `watch.timeout` seconds."""

    def __init__(self, impl: str, names: tuple[str, ...], watch: Watch) -> None:
        self.impl, self.names, self.watch = impl, names, watch
        self._last: IsolatedImplementation | None = None

    def __call__(self, size: int) -> IsolatedImplementation:
        self.close()
        self._last = IsolatedImplementation(self.impl, size, self.names, self.watch)
        return self._last

    def close(self) -> None:
        if self._last is not None:
            self._last.close()
            self._last = None
