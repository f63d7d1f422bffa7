"""The checker's value recipe and value comparison.

A value is described by `(nbytes, tag)`: a cache with `make_value(nbytes, tag)` makes it itself;
any other cache gets `bytes` of length nbytes filled with `tag % 256` up to `BYTES_UP_TO`, and
above that a `storage_free_value` (a numpy broadcast view: its `nbytes` is its logical size, it
holds one byte), so a recipe of 2**40 bytes costs nothing. A recipe larger than the cache's
capacity is never built: every operation that takes a value refuses it whatever its contents
(put: too large; commit: no reservation is that large), so such a call gets a `storage_free_value`
of the same size instead.

The checker never allocates more than `MAX_VALUE_BYTES` for one value: a cache whose own values
are not storage-free (`is_storage_free` of what its make_value returns is False) is checked at
capacities of at most that (docs/scope.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

BYTES_UP_TO = 1 << 16
"""Recipes up to this many bytes become `bytes` for a cache without make_value; larger ones a view."""

MAX_VALUE_BYTES = 1 << 26
"""64 MiB: the most real memory the checker lets one value hold."""


def value_for(cache: Any, nbytes: int, tag: int, capacity_bytes: int | None = None) -> Any:
    """The value the checker passes to `cache` for the recipe (nbytes, tag).

    Above `capacity_bytes` (default: the cache's `capacity_bytes` attribute, if any) the value is a
    `storage_free_value`: make_value is never asked for what the spec's size rules refuse.
    """
    if capacity_bytes is None:
        capacity_bytes = getattr(cache, "capacity_bytes", None)
    if isinstance(capacity_bytes, int) and nbytes > capacity_bytes:
        return storage_free_value(nbytes, tag)
    make_value = getattr(cache, "make_value", None)
    if make_value is not None and nbytes > 0:
        return make_value(nbytes, tag)
    if nbytes > BYTES_UP_TO:
        return storage_free_value(nbytes, tag)
    return bytes([tag % 256]) * nbytes


def storage_free_value(nbytes: int, tag: int = 0) -> Any:
    """A value of nbytes bytes by the contract's sizing rule that holds a single byte: a read-only
    numpy uint8 array repeating the byte `tag % 256` (stride 0)."""
    import numpy

    return numpy.broadcast_to(numpy.full(1, tag % 256, dtype=numpy.uint8), (nbytes,))


def is_storage_free(value: Any) -> bool:
    """Whether `value` holds (almost) no memory whatever its size: a numpy array whose strides are
    all 0 (a broadcast view), or a torch tensor on the meta device."""
    if _is_kind(value, "numpy", "ndarray"):
        return value.size <= 1 or not any(value.strides)
    if _is_kind(value, "torch", "Tensor"):
        return value.device.type == "meta"
    return False


def values_equal(expected: Any, actual: Any) -> bool:
    """== for plain values, torch.equal for tensors, numpy.array_equal for arrays (dtype and shape too).

    Storage-free values compare without reading their logical bytes: two broadcast views by their
    one repeated element, two meta tensors (which hold no data) by dtype and shape alone.
    """
    if _is_kind(expected, "torch", "Tensor") or _is_kind(actual, "torch", "Tensor"):
        if not (_is_kind(expected, "torch", "Tensor") and _is_kind(actual, "torch", "Tensor")):
            return False
        if expected.dtype != actual.dtype:
            return False
        if expected.device.type == "meta" or actual.device.type == "meta":
            return expected.device.type == actual.device.type and expected.shape == actual.shape
        import torch

        return torch.equal(expected.cpu(), actual.cpu())
    if _is_kind(expected, "numpy", "ndarray") or _is_kind(actual, "numpy", "ndarray"):
        import numpy

        if getattr(expected, "dtype", None) != getattr(actual, "dtype", None):
            return False
        if _is_repeated(expected) and _is_repeated(actual):
            return expected.shape == actual.shape and expected.flat[0] == actual.flat[0]
        return bool(numpy.array_equal(expected, actual))
    return bool(expected == actual)


def _is_repeated(value: Any) -> bool:
    return _is_kind(value, "numpy", "ndarray") and value.size > 1 and not any(value.strides)


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
