"""The implementation of any spec kind, watched: every method it is called by (an operation, a view
such as `snapshot()`) and the factory are noted on a `guarded_call.Watch` before they run, so that
`guarded_call.supervised` sees a call that outlives the call timeout and reports it as a hang.

Nothing is translated: whatever a call raises passes through unchanged, and the differential step (`cacheproof.contract.steps`) judges it. The factory
hanging is the supervisor's `UsageAbort` (no call sequence reproduces it).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Callable

from cacheproof.contract.faults import CONTROL_EXCEPTIONS, StopRequested, UsageAbort, one_line, user_traceback
from cacheproof.extras import MissingExtraError
from cacheproof.sandbox.guarded_call import Watch, nth_call
from cacheproof.spec.kind import SpecKind


class WatchedImplementation:
    """`target` with every callable attribute noted on `watch` while it runs, `len()` and `in` included."""

    def __init__(self, target: Any, watch: Watch) -> None:
        self.__dict__["_target"] = target
        self.__dict__["_watch"] = watch

    @property
    def described(self) -> str:
        """What the factory returned, for a usage error: "None", or its class ("a NoEvict")."""
        return "None" if self._target is None else f"a {type(self._target).__name__}"

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return attribute
        watch = self._watch

        def watched(*args: Any, **kwargs: Any) -> Any:
            if watch.stop_requested:  # `Watch.begin` and `Watch.end` inlined: no further call on every call
                raise StopRequested()
            watch.current = (perf_counter(), name, args)
            try:
                return attribute(*args, **kwargs)
            finally:
                watch.current = None

        watched.__name__ = name
        watched.__wrapped__ = attribute  # its signature is the method's (`value_for` reads make_value's, once per class)
        self.__dict__[name] = watched
        return watched

    def __len__(self) -> int:
        """`len(target)`, noted as a call of `__len__` (Python looks special methods up on the class,
        so the watched method `__getattr__` made is looked up in the instance's own dict)."""
        watched = self.__dict__.get("__len__")
        return (self.__getattr__("__len__") if watched is None else watched)()

    def __contains__(self, key: Any) -> bool:
        """`key in target`, noted as a call of `__contains__`."""
        watched = self.__dict__.get("__contains__")
        return (self.__getattr__("__contains__") if watched is None else watched)(key)


class WatchedFactory:
    """`factory(size)` noted on `watch` as "factory"; its result is a `WatchedImplementation`. A
    factory that raises is a usage error (`UsageAbort` naming `impl`, which call of it failed and
    the user's traceback): no call sequence reproduces it; one that needs an extra this installation
    lacks raises that `MissingExtraError` as it is (the command names the extra to install)."""

    def __init__(self, factory: Callable[[int], Any], watch: Watch, impl: str = "factory") -> None:
        self.factory = factory
        self.watch = watch
        self.impl = impl

    def __call__(self, size: int) -> WatchedImplementation:
        watch = self.watch
        watch.factory_calls += 1
        watch.begin("factory", (size,))
        try:
            target = self.factory(size)
        except (*CONTROL_EXCEPTIONS, MissingExtraError):
            raise
        except Exception as error:
            raise UsageAbort(f"{self.impl}({size}) raised {one_line(error)}{nth_call(watch.factory_calls)}",
                             user_traceback(error)) from None
        finally:
            watch.end()
        return WatchedImplementation(target, watch)

    def for_attempt(self) -> "WatchedFactory":
        """The factory for one replay of a sequence (`fault_search.first_failure`): this one, a fresh
        implementation each call."""
        return self

    def close(self) -> None:
        """Nothing to release in-process (`IsolatedProgramFactory.close` ends its child)."""


def missing_operations(kind: SpecKind, factory: Callable[[int], Any], operations: tuple[str, ...]) -> tuple[str, list[str]]:
    """What `factory(kind.probe_size)` returned ("a NoEvict", "None": its `described`), and the operations
    among `operations` that it has no method for."""
    probe = factory(kind.probe_size)
    return probe.described, [name for name in operations
                             if kind.operation(name).form == "method" and not callable(getattr(probe, name, None))]
