"""The checker's value recipe and value comparison.

A value is described by `(nbytes, tag)`: a cache with `make_value(nbytes, tag)` makes it itself,
any other cache gets `bytes` of length nbytes filled with `tag % 256`. A recipe larger than the
cache's capacity is never built: every operation that takes a value refuses it whatever its
contents (put: too large; commit: no reservation is that large), so such a call gets a
`storage_free_value` of the same size instead, which holds one byte.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator


def value_for(cache: Any, nbytes: int, tag: int, capacity_bytes: int | None = None) -> Any:
    """The value the checker passes to `cache` for the recipe (nbytes, tag).

    Above `capacity_bytes` (default: the cache's `capacity_bytes` attribute, if any) the value is a
    `storage_free_value`: make_value is never asked for what the spec's size rules refuse.
    """
    if capacity_bytes is None:
        capacity_bytes = getattr(cache, "capacity_bytes", None)
    if isinstance(capacity_bytes, int) and nbytes > capacity_bytes:
        return storage_free_value(nbytes)
    make_value = getattr(cache, "make_value", None)
    if make_value is not None and nbytes > 0:
        return make_value(nbytes, tag)
    return bytes([tag % 256]) * nbytes


def storage_free_value(nbytes: int) -> Any:
    """A value of nbytes bytes by the contract's sizing rule that holds a single byte: a read-only
    numpy uint8 array repeating one zero byte (stride 0). Only for values every cache must refuse."""
    import numpy

    return numpy.broadcast_to(numpy.zeros(1, dtype=numpy.uint8), (nbytes,))


def values_equal(expected: Any, actual: Any) -> bool:
    """== for plain values, torch.equal for tensors, numpy.array_equal for arrays (dtype and shape too)."""
    if _is_kind(expected, "torch", "Tensor") or _is_kind(actual, "torch", "Tensor"):
        if not (_is_kind(expected, "torch", "Tensor") and _is_kind(actual, "torch", "Tensor")):
            return False
        import torch

        return expected.dtype == actual.dtype and torch.equal(expected.cpu(), actual.cpu())
    if _is_kind(expected, "numpy", "ndarray") or _is_kind(actual, "numpy", "ndarray"):
        import numpy

        return getattr(expected, "dtype", None) == getattr(actual, "dtype", None) and bool(
            numpy.array_equal(expected, actual)
        )
    return bool(expected == actual)


def _is_kind(value: Any, module: str, name: str) -> bool:
    return any(base.__module__ == module and base.__name__ == name for base in type(value).__mro__)


@contextmanager
def raises(error_name: str) -> Iterator[None]:
    """Expect the block to raise an error with a class named `error_name` somewhere in its MRO."""
    try:
        yield
    except Exception as error:
        if not any(c.__name__ == error_name for c in type(error).__mro__):
            raise
    else:
        raise AssertionError(f"expected {error_name}, nothing was raised")
