"""`--isolate`: the implementation of any spec kind runs in a child process; the spec stays in the
checker.

Each implementation built by `IsolatedProgramFactory(impl, names)(size)` is a child process (forked
from a server that has already imported the factory's module: multiprocessing's "forkserver", so
a fresh child costs a fork, not an import of torch) that builds `factory(size)` and makes the calls
and views it is sent, `len()` and `in` among them. What travels, pickled, is plain data both ways:
- values as recipes: the stand-in's `make_value(nbytes, tag, element_size)` returns a `RemoteValue`
  (bytes of the recipe's size, which the spec sizes and stores) and the child makes the real value
  with the implementation's own `make_value` (`contract.values.value_or_user_error`); a result that is (or
  equals) a value the child made comes back as that value's recipe;
- other results as they are when they are plain (None, bools, numbers, strings, bytes, the
  checker's own classes), containers element by element, an object of the user's classes as a
  namespace of its public fields (a stats() or snapshot() entry), an enum of theirs by name, and
  anything else by its description (a tensor made by no recipe);
- an error as the names of its class's MRO and its message, coming back as the contract's own class
  when the child raised one (a subclass of a contract error keeps its name and its contract base),
  as the implementation's make_value failing (`UserCodeError`) when it did, as `ChildFailure`
  otherwise (a crash outcome).
A call that kills the child (a segfault, `os._exit`, an out-of-memory kill) or does not answer
within the watch's call timeout is `CacheFault` ("crash" or "hang", `guarded_call.fault_message`): a
counterexample that ends at that call, not an outcome. A child that cannot start (the factory
raises, or takes more than _START_SECONDS) is `ChildFailure`.
"""

from __future__ import annotations

import dataclasses
import enum
import multiprocessing
import signal
import threading
from types import SimpleNamespace
from typing import Any

from cacheproof.contract.faults import CacheFault, UsageAbort, UserCodeError, user_traceback
from cacheproof.contract.values import value_or_user_error, values_equal
from cacheproof.sandbox.guarded_call import Watch, fault_message, nth_call
from cacheproof.spec import errors

_START_SECONDS = 120.0


def described(target: Any) -> str:
    """What a factory returned, for a usage error: "None", or its class ("a NoEvict")."""
    return "None" if target is None else f"a {type(target).__name__}"


class ChildFailure(Exception):
    """The implementation's child process failed a call: it died, hung, or raised a non-contract error."""


class RemoteValue(bytes):
    """A value the child makes from `recipe` (nbytes, tag, element_size) with the implementation's
    own make_value; in the checker, bytes of nbytes (what the spec sizes and stores)."""

    recipe: tuple[int, int, int | None]

    def __new__(cls, nbytes: int, tag: int, element_size: int | None = None) -> "RemoteValue":
        value = super().__new__(cls, bytes([tag % 256]) * nbytes)
        value.recipe = (nbytes, tag, element_size)
        return value

    def __reduce__(self):
        return (RemoteValue, self.recipe)


class Described:
    """A result the child could only describe (a tensor made by no recipe, an object without fields)."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return self.description


_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_SPECIAL = {"__len__": lambda target: len(target), "__contains__": lambda target, key: key in target}
"""The requests that are no method call: `len(target)` and `key in target`."""


def _serve(connection: Any, impl: str) -> None:
    """The child: load the factory when asked ("load", size: within _START_SECONDS, an import of torch
    included); then, for each ("new", size, names) request (within the call timeout), build a fresh
    implementation, answer which of `names` it has and what it is (`described`), and answer (name, args, kwargs) requests on it, until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from cacheproof.sandbox.factories import load_factory

    factory: Any = None
    target: Any = None
    made: list[tuple[Any, tuple]] = []  # (value, recipe) of every value made for the implementation's calls
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        if request[0] == "load":
            try:
                factory = factory or load_factory(impl)
            except BaseException as error:  # reported to the checker, which decides
                connection.send(("failed", f"{impl}({request[1]}) raised {type(error).__name__}: {_text(error)}"))
                continue
            connection.send(("loaded",))
            continue
        if request[0] == "new":
            made = []
            try:
                target = factory(request[1])
            except BaseException as error:  # reported to the checker, a usage error
                connection.send(("raised", f"{impl}({request[1]}) raised {type(error).__name__}: {_text(error)}",
                                 user_traceback(error)))
                continue
            has = tuple(name for name in request[2] if callable(getattr(target, name, None)))
            connection.send(("ready", has + tuple(_SPECIAL), described(target)))
            continue
        name, args, kwargs = request
        try:
            args = tuple(_made(target, made, argument) for argument in args)
            kwargs = {key: _made(target, made, argument) for key, argument in kwargs.items()}
            method = _SPECIAL.get(name)
            result = method(target, *args) if method is not None else getattr(target, name)(*args, **kwargs)
            answer: tuple = ("ok", _travelling(result, made))
        except BaseException as error:  # the implementation may raise anything; it travels as names
            answer = ("error", tuple(c.__name__ for c in type(error).__mro__), _text(error))
        try:
            connection.send(answer)
        except Exception as error:  # an unpicklable result
            connection.send(("error", ("ChildFailure",), f"{name} returned what cannot travel: {error}"))


def _made(target: Any, made: list, argument: Any) -> Any:
    """The real value of a `RemoteValue` argument, made by the implementation and remembered."""
    if not isinstance(argument, RemoteValue):
        return argument
    nbytes, tag, element_size = argument.recipe
    value = value_or_user_error(target, nbytes, tag, element_size=element_size)
    made.append((value, argument.recipe))
    return value


def _travelling(result: Any, made: list) -> Any:
    """`result` as plain data that the checker can unpickle without the user's modules (see the module)."""
    for value, recipe in made:
        if value is result:
            return RemoteValue(*recipe)
    if isinstance(result, _PLAIN):
        return result
    if type(result).__module__.partition(".")[0] == "cacheproof":
        return result
    if isinstance(result, enum.Enum):
        return result.name
    if type(result) in (list, tuple, set, frozenset):
        return type(result)(_travelling(item, made) for item in result)
    if type(result) is dict:
        return {_travelling(key, made): _travelling(item, made) for key, item in result.items()}
    for value, recipe in reversed(made):
        try:
            if values_equal(value, result):
                return RemoteValue(*recipe)
        except Exception:  # noqa: BLE001 - an uncomparable result is described below
            break
    if hasattr(result, "shape") and hasattr(result, "dtype"):
        return Described(f"<a value of dtype {result.dtype}, shape {tuple(result.shape)}, made by no recipe>")
    fields = _fields(result)
    if fields is None:
        text = repr(result)
        return Described(text if len(text) <= 80 else text[:77] + "...")
    return SimpleNamespace(**{name: _travelling(value, made) for name, value in fields.items()})


def _fields(result: Any) -> dict[str, Any] | None:
    """The public fields of an object of the user's classes (a dataclass's, a named tuple's, its
    attributes'), None when it has none."""
    if dataclasses.is_dataclass(result):
        return {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    if isinstance(result, tuple) and hasattr(result, "_asdict"):
        return dict(result._asdict())
    names = [name for name in getattr(result, "__dict__", {}) if not name.startswith("_")]
    names += [name for cls in type(result).__mro__ for name in getattr(cls, "__slots__", ()) if not name.startswith("_")]
    return {name: getattr(result, name) for name in names if hasattr(result, name)} or None


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception as failure:  # noqa: BLE001 - an error whose str() raises still travels
        return f"<its str() raised {type(failure).__name__}>"


_OTHER_ERRORS: dict[str, type] = {}


class _ChildUserCodeError(UserCodeError):
    """A `UserCodeError` the child raised (its make_value failed), as its text said it there."""

    def __init__(self, text: str) -> None:
        super().__init__(text.partition(" raised ")[0], ChildFailure(text))
        self.text = text

    def __str__(self) -> str:
        return self.text


def _rebuilt(names: tuple[str, ...], message: str) -> Exception:
    """The contract's class named first in `names`, a contract subclass under that name, or a
    `ChildFailure` under that name (a crash outcome that reads as it did in the child:
    "OverflowError: entry count overflowed")."""
    contract = getattr(errors, names[0], None)
    if isinstance(contract, type) and issubclass(contract, errors.CacheError):
        return contract(message)
    base = next((getattr(errors, n) for n in names if isinstance(getattr(errors, n, None), type)
                 and issubclass(getattr(errors, n), errors.CacheError)), None)
    if base is not None:
        return type(names[0], (base,), {"__module__": "cacheproof.isolated"})(message)
    if names[0] == ChildFailure.__name__:
        return ChildFailure(message)
    if names[0] == UserCodeError.__name__:  # the implementation's make_value failed making a call's value
        return _ChildUserCodeError(message)
    other = _OTHER_ERRORS.setdefault(names[0], type(names[0], (ChildFailure,), {"__module__": "cacheproof.isolated"}))
    return other(message)


class _Child:
    """One child process serving the implementations of one factory, one after the other, and the
    checker's end of its pipe."""

    def __init__(self, impl: str, watch: Watch) -> None:
        self.builds = 0
        context = _context(impl)
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(child_end, impl), daemon=True,
                                       name="cacheproof-implementation")
        self.process.start()
        child_end.close()
        self.watch = watch
        self._closing = threading.Lock()
        self._requests = 0
        """Requests between their send and their answer: while one is, the pipe stays open."""
        self._ended = False

    def alive(self) -> bool:
        return self.process.is_alive()

    def request(self, request: tuple, what: str, args: tuple, timeout: float | None) -> tuple:
        """Send `request` and return the answer; `what(args)` names it in a fault. The pipe is closed
        by the last thread to leave it: a close while a request is under way (a Ctrl-C's clean-up in
        the main thread, as the search's worker thread sends) kills the child but leaves the pipe to
        the request, which would otherwise write its message into whatever file next took the
        descriptor's number."""
        with self._closing:
            self._requests += 1
        try:
            return self._exchange(request, what, args, timeout)
        finally:
            with self._closing:
                self._requests -= 1
                if self._ended and not self._requests:
                    self.connection.close()

    def _exchange(self, request: tuple, what: str, args: tuple, timeout: float | None) -> tuple:
        try:
            self.connection.send(request)
        except (BrokenPipeError, OSError):
            raise self._fault(what, args, "killed the process running the cache", "crash") from None
        if not self.connection.poll(timeout):
            self.close()
            if what == "starting":
                raise ChildFailure(f"starting did not return within {timeout:g} s")
            raise self._fault(what, args, f"did not return within {timeout:g} s (its process was killed)", "hang")
        try:
            return self.connection.recv()
        except (EOFError, OSError):
            raise self._fault(what, args, "killed the process running the cache", "crash") from None

    def _fault(self, what: str, args: tuple, said: str, kind: str) -> Exception:
        if kind == "crash":
            self.process.join(5)
            said = f"{said} ({_ending(self.process.exitcode)})"
            self.close()
        if what == "starting":
            return ChildFailure(f"starting {said.replace('the process running the cache', 'the child')}")
        return CacheFault(fault_message(what, args, said, self.watch.last_call()), kind)

    def close(self) -> None:
        """End the child, and close the pipe unless a request is under way (`request` closes it then).
        The search's worker thread (a call that failed) and the main thread (a Ctrl-C's clean-up) may
        both close it; the second waits for the first, which would otherwise close the descriptor
        under it (EBADF)."""
        with self._closing:
            end_child(self.process)
            self._ended = True
            if not self._requests:
                self.connection.close()


def end_child(process: Any) -> None:
    """Kill a child process that is still alive and wait for it."""
    if process.is_alive():
        process.kill()
    process.join(5)


class IsolatedImplementation:
    """The checker's side of one implementation in the child: the methods named in `names` that it
    has, `len()` and `in` send the call and wait for the answer."""

    described = "an implementation"
    """What the factory returned, as `described` says it in the child ("a NoEvict", "None")."""

    def __init__(self, child: _Child, names: frozenset[str]) -> None:
        self._child, self._names = child, names

    def __getattr__(self, name: str) -> Any:
        if name == "make_value":
            return RemoteValue
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def __len__(self) -> int:
        return self._call("__len__", (), {})

    def __contains__(self, key: Any) -> bool:
        return self._call("__contains__", (key,), {})

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        answer = self._child.request((name, args, kwargs), name, args, self._child.watch.timeout)
        if answer[0] == "ok":
            return answer[1]
        raise _rebuilt(answer[1], answer[2])


class IsolatedProgramFactory:
    """`factory(size)` for the checker: a fresh implementation each call, built in the one child
    process of the factory (started again when a call killed it). Each call waits at most
    `watch.timeout` seconds, building one too; a child takes at most _START_SECONDS to load the factory.
    A factory that raises is a usage error (`UsageAbort`, with its call number and the user's traceback)."""

    def __init__(self, impl: str, names: tuple[str, ...], watch: Watch) -> None:
        self.impl, self.names, self.watch = impl, names, watch
        self._child: _Child | None = None

    def __call__(self, size: int) -> IsolatedImplementation:
        if self._child is None or not self._child.alive():
            self.close()
            self._child = _Child(self.impl, self.watch)
            loaded = self._child.request(("load", size), "starting", (), _START_SECONDS)
            if loaded[0] != "loaded":
                raise ChildFailure(loaded[1])
        self._child.builds += 1  # the factory's calls in this child's process, whose state the factory keeps
        try:
            answer = self._child.request(("new", size, self.names), "factory", (size,), self.watch.timeout)
        except CacheFault as fault:  # the factory hung or ended the child: no call sequence shows it
            self.close()
            said = f"did not return within {self.watch.timeout:g} s" if fault.kind == "hang" else "killed its process"
            raise ChildFailure(f"{self.impl}({size}) {said}") from None
        if answer[0] == "raised":  # the factory raised: no call sequence shows it
            raise UsageAbort(answer[1] + nth_call(self._child.builds), answer[2])
        implementation = IsolatedImplementation(self._child, frozenset(answer[1]))
        implementation.described = answer[2]
        return implementation

    def close(self) -> None:
        if self._child is not None:
            self._child.close()
            self._child = None


_CONTEXTS: dict[str, Any] = {}


def _context(impl: str) -> Any:
    """The forkserver context with the factory's module preloaded (spawn where there is no forkserver)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    if not _CONTEXTS:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__, impl.partition(":")[0]])
        _CONTEXTS["forkserver"] = context
    return _CONTEXTS["forkserver"]


def _ending(exitcode: int | None) -> str:
    """How a child ended: "signal SIGSEGV, segmentation fault" or "exit status 7"."""
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        number = -exitcode
        try:
            name = signal.Signals(number).name
        except ValueError:
            return f"signal {number}"
        description = signal.strsignal(number) or ""
        hint = "; an out-of-memory kill looks like this" if number == signal.SIGKILL else ""
        return f"signal {name}, {description.lower()}{hint}" if description else f"signal {name}{hint}"
    return f"exit status {exitcode}"
