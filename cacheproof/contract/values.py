"""The checker's value recipe and value comparison.

A value is described by `(nbytes, tag, element_size)`: nbytes bytes of `element_size`-byte
elements (1, 2, 4 or 8: `cacheproof.spec.cache.values.ELEMENT_DTYPES`; it divides nbytes), filled
from tag. A cache with `make_value(nbytes, tag)` makes it itself, and is told the element size
when its make_value takes an `element_size` keyword; any other cache gets, up to `BYTES_UP_TO`,
`bytes` of length nbytes filled with `tag % 256` where the element size is 1, and a numpy array of
that element size otherwise (dtype `dtype_name_for(element_size, tag)`, `element_fill(tag)` in
every element), so a cache that sizes a value by its element count is seen; above `BYTES_UP_TO`, a
`storage_free_value` (a numpy broadcast view: its `nbytes` is its logical size, it holds one
element), so a recipe of 2**40 bytes costs nothing. A recipe with no element size (None: traces
written before recipes had one) is made as before: bytes, or `make_value(nbytes, tag)`. A recipe
larger than the cache's capacity is never built: every operation that takes a value refuses it
whatever its contents (put: too large; commit: no reservation is that large), so such a call gets
a `storage_free_value` of the same size and element size instead.

The checker never allocates more than `MAX_VALUE_BYTES` for one value: a cache whose own values
are not storage-free (`is_storage_free` of what its make_value returns is False) is checked at
capacities of at most that (docs/scope.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from cacheproof.contract.faults import CONTROL_EXCEPTIONS, UserCodeError
from cacheproof.spec.cache.values import ELEMENT_FILL_MODULUS, dtype_name_for, element_sizes_dividing

BYTES_UP_TO = 1 << 16
"""Recipes up to this many bytes are built for a cache without make_value; larger ones a view."""

MAX_VALUE_BYTES = 1 << 26
"""64 MiB: the most real memory the checker lets one value hold."""

REAL_VALUE_CAPACITY = 1 << 16
"""Capacities are capped here (by default) for a cache whose values hold real memory (make_value
returns values that are not storage-free): making values costs time per byte. At most
MAX_VALUE_BYTES (`check --max-capacity` raises it that far)."""

_PROBE_VALUE_BYTES = 64


def values_hold_memory(cache: Any) -> bool:
    """Whether the values `cache.make_value` makes hold memory: False without make_value or when it
    returns a storage-free value (`is_storage_free`); True when it raises (the check finds, and
    reports, make_value's failure again)."""
    make_value = getattr(cache, "make_value", None)
    if make_value is None:
        return False
    try:
        return not is_storage_free(make_value(_PROBE_VALUE_BYTES, 0))
    except Exception:  # noqa: BLE001 - reported by the check's own calls
        return True


def recipe_problem(nbytes: Any, tag: Any, element_size: Any = None) -> str | None:
    """Why (nbytes, tag, element_size) is no value recipe, or None when it is one: nbytes an int
    >= 0, tag an int, element_size None or one of the element sizes dividing nbytes."""
    if type(nbytes) is not int or nbytes < 0 or type(tag) is not int:
        return f"a value recipe needs an int nbytes >= 0 and an int tag, got nbytes={nbytes!r}, tag={tag!r}"
    sizes = element_sizes_dividing(nbytes)
    if element_size is not None and (type(element_size) is not int or element_size not in sizes):
        return (f"a value recipe's element_size is one of {', '.join(map(str, sizes))} "
                f"for nbytes={nbytes} (a size that divides it), got {element_size!r}")
    return None


def value_for(
    cache: Any, nbytes: int, tag: int, capacity_bytes: int | None = None, element_size: int | None = None
) -> Any:
    """The value the checker passes to `cache` for the recipe (nbytes, tag, element_size).

    Above `capacity_bytes` (default: the cache's `capacity_bytes` attribute, if any) the value is a
    `storage_free_value`: make_value is never asked for what the spec's size rules refuse. What the
    cache's make_value raises is raised as it is (a snippet's line fails with it; the checker makes
    its values with `value_or_user_error`).
    """
    if capacity_bytes is None:
        capacity_bytes = getattr(cache, "capacity_bytes", None)
    if isinstance(capacity_bytes, int) and nbytes > capacity_bytes:
        return storage_free_value(nbytes, tag, element_size or 1)
    make_value = getattr(cache, "make_value", None)
    if make_value is not None and nbytes > 0:
        if element_size is not None and _takes_element_size(make_value):
            return make_value(nbytes, tag, element_size=element_size)
        return make_value(nbytes, tag)
    if nbytes > BYTES_UP_TO:
        return storage_free_value(nbytes, tag, element_size or 1)
    if element_size in (None, 1) or nbytes == 0:
        return bytes([tag % 256]) * nbytes
    import numpy

    value = numpy.full(nbytes // element_size, element_fill(tag), dtype=_numpy_dtype(element_size, tag))
    value.flags.writeable = False  # as bytes: the caller's value, which a cache copies, never writes
    return value


def value_or_user_error(
    cache: Any, nbytes: int, tag: int, capacity_bytes: int | None = None, element_size: int | None = None
) -> Any:
    """`value_for`, as the checker makes a call's value: the cache's make_value raising is its own
    code failing outside the call under test, `UserCodeError` naming the recipe."""
    try:
        return value_for(cache, nbytes, tag, capacity_bytes, element_size)
    except CONTROL_EXCEPTIONS:
        raise
    except Exception as error:
        if getattr(cache, "make_value", None) is None:
            raise
        raise UserCodeError(f"make_value({nbytes}, {tag})", error) from error


def element_fill(tag: int) -> int:
    """The element of a value of several-byte elements made from `tag`."""
    return tag % ELEMENT_FILL_MODULUS


def _takes_element_size(make_value: Any) -> bool:
    """Whether `make_value` takes an `element_size` keyword (or any keyword), read through wrappers
    (`__wrapped__`) and decided once per function (a bound method's function: no cache is kept
    alive) where it is hashable."""
    target = inspect.unwrap(make_value)
    target = getattr(target, "__func__", target)
    try:
        return _signature_takes_element_size(target)
    except TypeError:  # unhashable: not cached
        return _signature_takes_element_size.__wrapped__(target)


@lru_cache(maxsize=64)
def _signature_takes_element_size(make_value: Any) -> bool:
    try:
        parameters = inspect.signature(make_value).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        (p.name == "element_size" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD for p in parameters
    )


@lru_cache(maxsize=1024)
def _numpy_dtype(element_size: int, tag: int) -> Any:
    """The numpy dtype of a value of `element_size`-byte elements made from `tag` (numpy lacks bfloat16)."""
    import numpy

    return numpy.dtype(dtype_name_for(element_size, tag, lambda name: hasattr(numpy, name)))


def storage_free_value(nbytes: int, tag: int = 0, element_size: int = 1) -> Any:
    """A value of nbytes bytes by the contract's sizing rule that holds a single element: a
    read-only numpy array repeating one element (stride 0), the byte `tag % 256` for element size
    1 (the default), else `element_fill(tag)` of the element size's dtype."""
    import numpy

    if element_size == 1:
        return numpy.broadcast_to(numpy.full(1, tag % 256, dtype=numpy.uint8), (nbytes,))
    one = numpy.full(1, element_fill(tag), dtype=_numpy_dtype(element_size, tag))
    return numpy.broadcast_to(one, (nbytes // element_size,))


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
