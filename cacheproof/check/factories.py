"""Load a cache factory named `MODULE:FACTORY`, as the command line takes it."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

DEFAULT_IMPL = "cacheproof.impl:TensorLRUCache"


class FactoryError(Exception):
    """The factory could not be loaded (a usage error: exit status 2)."""


def load_factory(spec: str) -> Callable[[int], Any]:
    """Import `module:attribute` and return it; it must be callable as `factory(capacity_bytes)`."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise FactoryError(f"--impl must look like MODULE:FACTORY, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules in the current folder are found
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise FactoryError(f"cannot import module {module_name!r}: {type(error).__name__}: {error}") from error
    factory = module
    for part in attribute.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise FactoryError(f"module {module_name!r} has no attribute {attribute!r}")
    if not callable(factory):
        raise FactoryError(f"{spec} is not callable")
    return factory
