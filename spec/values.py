"""The size in bytes of a cached value, by the contract's rule. Only these types are sizable."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def value_size(value: Any) -> int | None:
    """Bytes of `value`, or None if its type is not sizable.

    bytes/bytearray: len(); memoryview and numpy arrays: .nbytes; torch tensors:
    numel() * element_size(). numpy and torch are recognised by their type, not imported.
    """
    rule = _sizing_rule(type(value))
    if rule == "len":
        return len(value)
    if rule == "nbytes":
        return int(value.nbytes)
    if rule == "numel":
        return int(value.numel()) * int(value.element_size())
    return None


@lru_cache(maxsize=256)
def _sizing_rule(kind: type) -> str | None:
    """How values of type `kind` are sized (decided once per type)."""
    if issubclass(kind, (bytes, bytearray)):
        return "len"
    if issubclass(kind, memoryview) or (kind.__module__ == "numpy" and kind.__name__ == "ndarray"):
        return "nbytes"
    if any(base.__module__ == "torch" and base.__name__ == "Tensor" for base in kind.__mro__):
        return "numel"
    return None
