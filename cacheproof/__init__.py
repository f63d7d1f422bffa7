"""cacheproof: an executable spec of ref-counted tensor caches, a differential checker and a z3 prover."""

from cacheproof.spec import *  # noqa: F401,F403
from cacheproof.spec import __all__ as _spec_names

__version__ = "0.1.0"
from cacheproof.trace.monitor import DivergenceError, MonitoredCache, monitor  # noqa: E402

__all__ = list(_spec_names) + ["DivergenceError", "MonitoredCache", "monitor"]
