"""Argument checks, run before an operation changes anything, in the contract's order:
key, then size (type and range), then too large for the capacity, then retain."""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.spec.cache import rules
from cacheproof.spec.arguments import is_int
from cacheproof.spec.errors import InvalidArgumentError, TooLargeError
from cacheproof.spec.cache.values import unsizable_reason, value_size


def check_capacity(capacity_bytes: Any) -> int:
    """A capacity is an int (not bool) >= 1."""
    if not is_int(capacity_bytes) or capacity_bytes < 1:
        raise InvalidArgumentError(
            f"capacity_bytes must be an int >= 1, got {capacity_bytes!r} ({type(capacity_bytes).__name__})"
        )
    return capacity_bytes


def check_key(operation: str, key: Any) -> Hashable:
    """A key must be hashable: hash(key) returns. Whatever it raises (TypeError for an unhashable
    type, anything from a user's `__hash__`) is an InvalidArgumentError."""
    try:
        hash(key)
    except Exception as error:
        raise InvalidArgumentError(
            f"{operation}: key {_shown(key)} is not hashable ({type(key).__name__}: "
            f"{type(error).__name__}: {error})"
        ) from None
    return key


def _shown(key: Any) -> str:
    """repr(key), or a placeholder where its __repr__ raises too."""
    try:
        return repr(key)
    except Exception:
        return f"<{type(key).__name__} whose repr raises>"


def check_nbytes(operation: str, key: Any, nbytes: Any, capacity_bytes: int) -> int:
    """reserve and acquire: nbytes is an int (not bool) >= 1 and at most the capacity."""
    if not is_int(nbytes) or nbytes < 1:
        raise InvalidArgumentError(
            f"{operation}({key!r}): nbytes must be an int >= 1, got {nbytes!r} ({type(nbytes).__name__})"
        )
    _check_fits_capacity(operation, key, nbytes, capacity_bytes)
    return nbytes


def check_evict_nbytes(nbytes: Any, capacity_bytes: int) -> int:
    """evict: nbytes is an int (not bool) >= 0 and at most the capacity."""
    if not is_int(nbytes) or nbytes < 0:
        raise InvalidArgumentError(
            f"evict: nbytes must be an int >= 0, got {nbytes!r} ({type(nbytes).__name__})"
        )
    if rules.is_too_large(rules.empty(capacity_bytes), nbytes):
        raise TooLargeError(
            f"evict: {nbytes} bytes exceed capacity_bytes={capacity_bytes}; that room can never exist"
        )
    return nbytes


def check_value_type(operation: str, key: Any, value: Any) -> int:
    """commit and put: the value is of a sizable type. Returns its size (0 for an empty value)."""
    size = value_size(value)
    if size is None:
        raise InvalidArgumentError(f"{operation}({key!r}): {unsizable_reason(value)}")
    return size


def check_value(operation: str, key: Any, value: Any) -> int:
    """commit and put: the value is of a sizable type with size >= 1. Returns its size."""
    size = check_value_type(operation, key, value)
    if size < 1:
        raise InvalidArgumentError(f"{operation}({key!r}): the value is empty (0 bytes); size must be >= 1")
    return size


def check_put_size(key: Any, size: int, capacity_bytes: int) -> None:
    """put: the value must fit the capacity at all."""
    _check_fits_capacity("put", key, size, capacity_bytes)


def check_retain(operation: str, key: Any, retain: Any) -> bool:
    """retain is a bool."""
    if not isinstance(retain, bool):
        raise InvalidArgumentError(
            f"{operation}({key!r}): retain must be a bool, got {retain!r} ({type(retain).__name__})"
        )
    return retain


def _check_fits_capacity(operation: str, key: Any, nbytes: int, capacity_bytes: int) -> None:
    if rules.is_too_large(rules.empty(capacity_bytes), nbytes):
        raise TooLargeError(
            f"{operation}({key!r}): {nbytes} bytes exceed capacity_bytes={capacity_bytes}; "
            "an item that can never fit is rejected"
        )
