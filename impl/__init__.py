"""cacheproof.impl: the real implementations that the spec and the checker hold to account.

They need the `torch` extra (`pip install -e '.[torch]'` in a checkout, or `pip install torch`). `TensorLRUCache` is loaded on first
use (PEP 562), so importing one module of the package (the KV block pool, the block tables) loads that
module alone, and a missing torch names the module that needs it (cacheproof.extras).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the class; the interpreter loads it in __getattr__
    from cacheproof.impl.tensor_lru_cache import TensorLRUCache

__all__ = ["TensorLRUCache"]


def __getattr__(name: str) -> Any:
    """Load `TensorLRUCache` from cacheproof.impl.tensor_lru_cache on first use."""
    if name != "TensorLRUCache":
        raise AttributeError(f"module 'cacheproof.impl' has no attribute {name!r}")
    value = importlib.import_module("cacheproof.impl.tensor_lru_cache").TensorLRUCache
    globals()[name] = value
    return value
