"""The size in bytes of a cached value, by the contract's rule. Only these types are sizable."""

from __future__ import annotations

from typing import Any


def value_size(value: Any) -> int | None:
    """Bytes of `value`, or None if its type is not sizable.

    bytes/bytearray: len(); memoryview and numpy arrays: .nbytes; torch tensors:
    numel() * element_size(). numpy and torch are recognised by their type, not imported.
    """
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return int(value.nbytes)
    if _is_torch_tensor(kind):
        return int(value.numel()) * int(value.element_size())
    return None


def _is_torch_tensor(kind: type) -> bool:
    return any(
        base.__module__ == "torch" and base.__name__ == "Tensor" for base in kind.__mro__
    )
