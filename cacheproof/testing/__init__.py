"""Check a cache inside your own test suite (docs/testing.md).

- `test_my_cache = cache_test(MyCache)`: a pytest test function, a plain Hypothesis `@given` test
  that pytest, pytest-xdist and HypoFuzz run unchanged, for every spec kind (`cacheproof.testing.functions`);
- `TestMyCache = cache_test_case(MyCache)`, `concurrent_cache_test_case`, `program_test_case`: the
  unittest TestCases (`cacheproof.testing.cases`);
- the pytest plugin (`cacheproof.testing.plugin`, entry point `pytest11: cacheproof`): names,
  database keys, the `cacheproof_check` fixture, `--cacheproof-settings`.

The names load on first use (PEP 562): pytest imports the plugin, and so this package, in every
session of an environment where cacheproof is installed, and that must not import Hypothesis or
the checker.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "cache_test": "functions",
    "CacheDivergence": "functions",
    "Program": "functions",
    "cache_test_case": "cases",
    "concurrent_cache_test_case": "cases",
    "program_test_case": "cases",
    "active_settings": "cases",
    "profile_scopes": "cases",
    "scope_settings": "cases",
    "cache_name": "names",
    "impl_name": "names",
}
"""Each public name and the module of this package that defines it."""

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
