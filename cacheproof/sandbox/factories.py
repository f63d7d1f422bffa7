"""Load a cache factory named `MODULE:FACTORY`, as the command line takes it."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any, Callable

from cacheproof.cmdline.interrupts import ctrl_c_held
from cacheproof.contract.faults import CacheFault
from cacheproof.contract.values import values_hold_memory
from cacheproof.extras import MissingExtraError
from cacheproof.sandbox.guarded_call import Watch, supervised

DEFAULT_IMPL = "cacheproof.impl:TensorLRUCache"


class FactoryError(Exception):
    """The factory could not be loaded (a usage error: exit status 2)."""


def check_impl_syntax(spec: str) -> str:
    """`spec` itself when it looks like MODULE:FACTORY, else `FactoryError` (nothing is imported)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise FactoryError(f"--impl must look like MODULE:FACTORY, got {spec!r}")
    return spec


def load_factory(spec: str) -> Callable[[int], Any]:
    """Import `module:attribute` and return it; it must be callable as `factory(capacity_bytes)`.

    A module of cacheproof whose extra is not installed (the default TensorLRUCache without torch)
    is a FactoryError of one line naming the extra (cacheproof.extras).
    """
    module_name, _, attribute = check_impl_syntax(spec).partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the current folder are found
    with ctrl_c_held():  # importing torch cannot take a KeyboardInterrupt: it aborts, or loses it
        factory = _imported(module_name, attribute)
    if not callable(factory):
        raise FactoryError(f"{spec} is not callable")
    return factory


def _imported(module_name: str, attribute: str) -> Any:
    """`module_name`'s `attribute` (dotted), imported; FactoryError when it cannot be."""
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except MissingExtraError as error:
        raise FactoryError(str(error)) from error
    except BaseException as error:  # a module may fail at import in any way: sys.exit() included
        raise FactoryError(f"cannot import module {module_name!r}: {type(error).__name__}: {error}") from error
    found = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part, None)  # a lazy name (cacheproof.impl's) imports here
        except MissingExtraError as error:
            raise FactoryError(str(error)) from error
        if found is None:
            raise FactoryError(f"module {module_name!r} has no attribute {attribute!r}")
    return found


PROBE_CAPACITY_BYTES = 64
"""The capacity of the cache built to see whether its values hold memory (`capacity_cap_of`)."""

def capacity_cap_of(factory: Callable[[int], Any], cap: int, watch: Watch | None = None,
                    size: int = PROBE_CAPACITY_BYTES) -> int | None:
    """None when the values the checker makes for `factory(size)`'s cache hold no memory (it has no
    make_value, or make_value returns storage-free values), else `cap`: such a cache is checked at
    capacities of at most `cap` bytes. A make_value that fails here is capped too (the run reports
    it). With `watch`, the probe runs supervised (`guarded_call.supervised`), and a factory or a
    make_value that does not return within its call timeout counts as holding memory (a
    counterexample's call then shows the hang)."""
    def holds() -> bool:
        return values_hold_memory(factory(size))

    if watch is None:
        return cap if holds() else None
    try:
        held = supervised(holds, watch)
    except CacheFault:
        held = True
    return cap if held else None


class TimedFactory:
    """`factory(capacity)` run in a thread of its own for at most `timeout` seconds, for `check --threads`
    (whose calls run in many threads at once, where the sequential run's watch serves one).

    A factory that raises, does not return in time or returns None is a usage error, `UsageAbort`, as
    in the sequential run: no call sequence reproduces it. A hung factory's thread is abandoned.
    """

    def __init__(self, factory: Callable[[int], Any], impl: str, timeout: float) -> None:
        self.factory = factory
        self.impl = impl
        self.timeout = timeout
        self.calls = 0

    def __call__(self, capacity_bytes: int) -> Any:
        from cacheproof.contract.faults import UsageAbort, one_line, user_traceback
        from cacheproof.sandbox.guarded_call import nth_call

        self.calls += 1
        built: dict[str, Any] = {}

        def build() -> None:
            try:
                built["cache"] = self.factory(capacity_bytes)
            except BaseException as error:  # the factory's failure is reported by the caller's thread
                built["error"] = error

        thread = threading.Thread(target=build, name="cacheproof-factory", daemon=True)
        thread.start()
        thread.join(self.timeout)
        call = f"{self.impl}({capacity_bytes})"
        if thread.is_alive():
            raise UsageAbort(f"{call} did not return within {self.timeout:g} s{nth_call(self.calls)}")
        if "error" in built:
            error = built["error"]
            raise UsageAbort(f"{call} raised {one_line(error)}{nth_call(self.calls)}", user_traceback(error))
        if built["cache"] is None:
            raise UsageAbort(f"{call} returned None{nth_call(self.calls)}")
        return built["cache"]
