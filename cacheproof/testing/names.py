"""The names a generated test carries: the cache it tests as "module:qualname", the test's own name,
and the module it belongs to (the user's test file, so that reports name it)."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Any


def cache_name(factory: Callable[[int], Any]) -> str:
    """The name of the cache `factory` makes, for the test class: a class's own name, a function's
    name, the wrapped callable of a `functools.partial`; "Cache" for a lambda or a nameless callable."""
    while isinstance(factory, functools.partial):
        factory = factory.func
    name = getattr(factory, "__name__", None) or type(factory).__name__
    name = re.sub(r"\W", "", name.replace("<lambda>", ""))
    return name[:1].upper() + name[1:] or "Cache"


def impl_name(factory: Callable[[int], Any]) -> str:
    """"module:qualname" of `factory` (of the wrapped callable for a `functools.partial`)."""
    while isinstance(factory, functools.partial):
        factory = factory.func
    return f"{getattr(factory, '__module__', None) or 'cache'}:{getattr(factory, '__qualname__', None) or 'factory'}"


def default_test_name(factory: Callable[[int], Any]) -> str:
    """`test_` and the cache's name in snake case (`test_my_cache` for MyCache): the name a
    generated test function carries until pytest collects it under the name it is bound to."""
    return "test_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cache_name(factory)).lower()


def unique_name(name: str, factory: Callable[[int], Any], namespace: dict) -> str:
    """`name`, or `name` + "From" + the factory's module when the caller's module already holds a
    test class `Test<name>` for another cache (two caches both called MyCache, say)."""
    taken = any(
        isinstance(value, type) and value.__name__ == f"Test{name}" and getattr(value, "cache_impl", None) != impl_name(factory)
        for value in list(namespace.values())
    )
    if not taken:
        return name
    module = re.sub(r"\W", "", (getattr(factory, "__module__", None) or "cache").rpartition(".")[2])
    return f"{name}From{module[:1].upper()}{module[1:]}"


def callers_module(depth: int = 2) -> str:
    """The `__name__` of the module `depth` frames up the stack from here (by default 2: whoever
    called the function that calls this), so that reports name the user's file."""
    return sys._getframe(depth).f_globals.get("__name__", __name__)
