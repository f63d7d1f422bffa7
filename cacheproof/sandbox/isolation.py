"""`--isolate`: the cache under test runs in a child process; the spec stays in the checker.

The child (`_serve`) imports the factory, builds caches and makes the calls it is sent; the
checker holds an `IsolatedCache`, a stand-in whose methods send the call and wait for the answer.
So a segfault, an abort, `os._exit`, an out-of-memory kill or a hang ends the child, not the
checker, and becomes a counterexample naming the call and the signal or exit status.

What travels (pickled over a pipe), both ways plain data:
- values as recipes: the stand-in's `make_value(nbytes, tag)` returns a `RemoteValue` (bytes of the
  default recipe, which the spec sizes and stores) and the child makes the real value with the
  cache's own `make_value`; a get/pop result comes back as the recipe of the value it equals;
- other results as they are (bools, ints, lists of keys), enums by name, anything else by repr;
- errors as the names of their class's MRO and their message, rebuilt as classes of those names,
  so errors still match by name anywhere in the MRO;
- stats() as its fields, snapshot() as normalized entries.

One child serves every example of a run (each example gets a new cache in it); a child that died
is replaced at the next example. Each replay attempt while shrinking gets a fresh child
(`for_attempt`), so a shrunk counterexample does not depend on what earlier attempts left behind.
Children are forked from a server process that has already imported the factory's module
(multiprocessing's "forkserver"), so a fresh child costs a fork, not an import of torch.
"""

from __future__ import annotations

import enum
import multiprocessing
import signal
from types import SimpleNamespace
from typing import Any

from cacheproof.spec.cache.operations import ALL_OPERATIONS as OPERATIONS
from cacheproof.contract.outcomes import snapshot_entries, stats_fields
from cacheproof.contract.faults import CacheFault, MalformedResult, StopRequested, UsageAbort, UserCodeError
from cacheproof.contract.faults import error_text, one_line, user_traceback
from cacheproof.sandbox.guarded_call import Watch, contains_code, fault_message, nth_call
from cacheproof.contract.values import value_for, values_equal
from cacheproof.sandbox.program_isolation import RemoteValue, _context, _ending, end_child

_CALLED = frozenset(OPERATIONS) - {"contains"}
_OUTCOME_REQUESTS = _CALLED | {"__contains__"}
_INSPECTIONS = ("stats", "snapshot")
_START_SECONDS = 120.0
"""How long a new child may take to import the factory's module and answer."""


class RemoteError(Exception):
    """An error raised in the child, rebuilt under the names of its class's MRO."""


class _Opaque:
    """A result the child could only describe."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return self.description


_ERROR_CLASSES: dict[tuple[str, ...], type] = {}
_BUILT_IN_TAIL = ("Exception", "BaseException", "object")


def remote_error(names: tuple[str, ...], message: str) -> RemoteError:
    """An exception whose class MRO carries `names` (most derived first)."""
    cls = _ERROR_CLASSES.get(names)
    if cls is None:
        cls = RemoteError
        for name in reversed([n for n in names if n not in _BUILT_IN_TAIL]):
            cls = type(name, (cls,), {"__module__": "cacheproof.isolated"})
        _ERROR_CLASSES[names] = cls
    return cls(message)


# The child ----------------------------------------------------------------------------------

def _serve(connection: Any, impl: str) -> None:
    """The child's loop: answer requests until the pipe closes. Ctrl-C is the checker's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from cacheproof.sandbox.factories import FactoryError, load_factory, missing_operations

    try:
        factory = load_factory(impl)
    except FactoryError as error:
        connection.send(("usage", str(error), ""))
        return
    except KeyboardInterrupt:  # raised by the module itself: this process ignores the user's Ctrl-C
        connection.send(("usage", f"cannot import module {impl.partition(':')[0]!r}: KeyboardInterrupt", ""))
        return
    connection.send(("ready",))
    cache: Any = None
    made: list[tuple[Any, tuple[int, int]]] = []
    built = 0
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        kind = request[0]
        if kind == "new":
            made = []
            built += 1
            try:
                cache = factory(request[1])
            except BaseException as error:  # the factory's failure is reported, not raised here
                message = f"{impl}({request[1]}) raised {one_line(error)}{nth_call(built)}"
                connection.send(("usage", message, user_traceback(error)))
                continue
            if cache is None:
                connection.send(("usage", f"{impl}({request[1]}) returned None{nth_call(built)}", ""))
                continue
            views = tuple(name for name in _INSPECTIONS + ("make_value",) if callable(getattr(cache, name, None)))
            connection.send(("made", views, tuple(missing_operations(cache)), type(cache).__name__))
            continue
        _send_answer(connection, cache, made, request)


def _send_answer(connection: Any, cache: Any, made: list, request: tuple) -> None:
    """Answer one call; an answer that fails to build or to pickle (a result holding an object that
    cannot be sent, an error whose str() raises) is reported as the user's code failing there, and
    the child goes on serving."""
    name = request[1]
    try:
        connection.send(_answer(cache, made, request))
    except Exception as failure:  # noqa: BLE001 - nothing the cache returns may end the child
        problem = f"its result could not be sent to the checker ({type(failure).__name__}: {error_text(failure)})"
        connection.send(("user", f"{name}()", (("TypeError", "Exception", "BaseException", "object"), problem, "")))


def _answer(cache: Any, made: list, request: tuple) -> tuple:
    _, name, args, kwargs = request
    try:
        args = tuple(_made_value(cache, made, a) for a in args)
        kwargs = {key: _made_value(cache, made, a) for key, a in kwargs.items()}
    except _MakeValueFailed as failed:  # the user's code outside the call
        return ("user", failed.where, _error_data(failed.error))
    try:
        if name == "__contains__":
            result = args[0] in cache
        elif name == "len":
            result = len(cache)
        else:
            result = getattr(cache, name)(*args, **kwargs)
        return ("result", _result_data(name, result, made))
    except MalformedResult as malformed:  # a stats() or snapshot() result without the contract's fields
        return ("malformed", malformed.where, repr(malformed.result), malformed.problem)
    except BaseException as error:  # any exception at all is an outcome, reported to the checker
        if name in _OUTCOME_REQUESTS:
            return ("raised", _error_data(error))
        return ("user", f"{name}()", _error_data(error))


class _MakeValueFailed(Exception):
    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(where)
        self.where = where
        self.error = error


def _made_value(cache: Any, made: list, argument: Any) -> Any:
    """The real value of a `RemoteValue` argument, made by the cache's recipe and remembered."""
    if not isinstance(argument, RemoteValue):
        return argument
    try:
        nbytes, tag, element_size = argument.recipe
        value = value_for(cache, nbytes, tag, element_size=element_size)
    except BaseException as error:  # whatever make_value raises is reported
        raise _MakeValueFailed(f"make_value({nbytes}, {tag})", error) from None
    made.append((value, argument.recipe))
    return value


def _result_data(name: str, result: Any, made: list) -> Any:
    if name == "stats":
        return stats_fields(result)
    if name == "snapshot":
        return snapshot_entries(result)
    if isinstance(result, enum.Enum):
        return result.name
    if isinstance(result, (bool, int, float, str, type(None))):
        return result
    if isinstance(result, (list, tuple)) and all(_is_plain_key(item) for item in result):
        return result  # evicted keys, of any key domain (cacheproof.contract.keys)
    for value, recipe in made:
        if value is result:
            return RemoteValue(*recipe)
    for value, recipe in reversed(made):
        try:
            if values_equal(value, result):
                return RemoteValue(*recipe)
        except Exception:  # an uncomparable result is described below
            break
    return _Opaque(_describe(result))


def _is_plain_key(value: Any) -> bool:
    """A key that travels back as it is: None, a bool, int, str or bytes, or a tuple of such keys."""
    if isinstance(value, tuple):
        return all(_is_plain_key(item) for item in value)
    return isinstance(value, (bool, int, str, bytes, type(None)))


def _describe(result: Any) -> str:
    if hasattr(result, "shape") and hasattr(result, "dtype"):
        return f"<a value of dtype {result.dtype}, shape {tuple(result.shape)}, made by no recipe>"
    text = repr(result)
    return text if len(text) <= 80 else text[:77] + "..."


def _error_data(error: BaseException) -> tuple[tuple[str, ...], str, str]:
    return tuple(cls.__name__ for cls in type(error).__mro__), error_text(error), user_traceback(error)


# The checker's side -------------------------------------------------------------------------

class _Child:
    """One child process and its end of the pipe."""

    def __init__(self, impl: str) -> None:
        context = _context(impl)
        try:
            self._start(context, impl)
        except (EOFError, OSError):  # the forkserver died preloading the factory's module (sys.exit, a crash):
            context.set_forkserver_preload(["cacheproof.sandbox.isolation"])  # it restarts without the module,
            self._start(multiprocessing.get_context("spawn"), impl)  # and this child imports it and reports

    def _start(self, context: Any, impl: str) -> None:
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(child_end, impl), daemon=True, name="cacheproof-cache")
        self.process.start()
        child_end.close()

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        end_child(self.process, self.connection)


class IsolatedFactory:
    """`factory(capacity)` built in a child process: returns an `IsolatedCache`.

    `watch.timeout` bounds every request; a child that does not answer in time is killed. The
    watch is not told what runs (the child's own timeout replaces the supervisor's), only asked
    whether to stop.
    """

    def __init__(self, impl: str, watch: Watch) -> None:
        self.impl = impl
        self.watch = watch
        self.child: _Child | None = None

    def for_attempt(self) -> "IsolatedFactory":
        """A factory of its own, with a fresh child, for one replay attempt."""
        return IsolatedFactory(self.impl, self.watch)

    def close(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child = None

    def __call__(self, capacity_bytes: int) -> "IsolatedCache":
        if self.child is None or not self.child.alive():
            self.close()
            self.child = _Child(self.impl)
            reply = self._receive(_START_SECONDS, "factory", (capacity_bytes,), starting=True)
            if reply[0] == "usage":
                raise UsageAbort(reply[1], reply[2])
        self.child.connection.send(("new", capacity_bytes))
        reply = self._receive(self.watch.timeout, "factory", (capacity_bytes,))
        if reply[0] == "usage":
            raise UsageAbort(reply[1], reply[2])
        _, views, lacking, type_name = reply
        return IsolatedCache(self, views, lacking, type_name)

    def request(self, name: str, args: tuple, kwargs: dict) -> tuple:
        """Send one request to the child and return its answer."""
        if self.watch.stop_requested:
            raise StopRequested()
        self.child.connection.send(("call", name, args, kwargs))
        return self._receive(self.watch.timeout, name, args)

    def _receive(self, timeout: float | None, name: str, args: tuple, starting: bool = False) -> tuple:
        child = self.child
        try:
            if child.connection.poll(timeout):
                return child.connection.recv()
        except (EOFError, OSError):
            pass
        else:
            self.close()
            what = f"did not return within {timeout:g} s (its process was killed)"
            if name == "factory":
                raise UsageAbort(fault_message(name, args, what if not starting else f"did not start within {timeout:g} s"))
            raise CacheFault(fault_message(name, args, what, self.watch.last_call()), "hang")
        child.process.join(5)
        ending = _ending(child.process.exitcode)
        self.close()
        if name == "factory":
            raise UsageAbort(fault_message(name, args, f"killed the process running it ({ending})"))
        raise CacheFault(fault_message(name, args, f"killed the process running the cache ({ending})",
                                       self.watch.last_call()), "crash")


class IsolatedCache:
    """The checker's stand-in for a cache living in a child process."""

    def __init__(self, factory: IsolatedFactory, views: tuple[str, ...], lacking: tuple[str, ...], type_name: str):
        self._factory = factory
        self._views = views
        self.lacking = list(lacking)
        self.type_name = type_name

    def __getattr__(self, name: str) -> Any:
        if name == "make_value":
            return RemoteValue
        if name in _CALLED or name in self._views:
            return lambda *args, **kwargs: self._call(name, args, kwargs)
        raise AttributeError(name)

    def __len__(self) -> int:
        return self._call("len", (), {})

    def __contains__(self, key: Any) -> bool:
        try:
            return self._call("__contains__", (key,), {})
        except RemoteError as error:  # as in-process: the outcome of a `contains` call, else an inspection
            raise UserCodeError(contains_code(key), error) from None

    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        reply = self._factory.request(name, args, kwargs)
        if reply[0] == "result":
            return _rebuilt(name, reply[1])
        if reply[0] == "raised":
            names, message, _ = reply[1]
            raise remote_error(names, message)
        if reply[0] == "malformed":
            raise MalformedResult(reply[1], _Opaque(reply[2]), reply[3])
        where, (names, message, _) = reply[1], reply[2]
        raise UserCodeError(where, remote_error(names, message))


def _rebuilt(name: str, data: Any) -> Any:
    if name == "stats":
        return SimpleNamespace(**data)
    if name == "snapshot":
        return [SimpleNamespace(key=e[0], state=e[1], refcount=e[2], nbytes=e[3], retain=e[4]) for e in data]
    return data
