"""cacheproof: executable specs of the caches LLM inference engines keep, a differential checker
and a z3 prover.

Importing the package loads the stdlib-only spec and nothing heavy: the spec's names are
re-exported, and the monitor is resolved on first use (PEP 562), so `import cacheproof` costs neither
Hypothesis, z3, torch nor numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

from cacheproof import spec
from cacheproof.version import __version__

_SPEC_NAMES = tuple(spec.__all__)
_MONITOR_NAMES = ("DivergenceError", "MonitoredCache", "monitor")
_HOME = {**{name: "cacheproof.spec" for name in _SPEC_NAMES}, **{name: "cacheproof.trace.monitor" for name in _MONITOR_NAMES}}

__all__ = [*_SPEC_NAMES, *_MONITOR_NAMES, "__version__"]


def __getattr__(name: str) -> Any:
    """Load `name` from the module that defines it, on first use."""
    if name not in _HOME:
        raise AttributeError(f"module 'cacheproof' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
