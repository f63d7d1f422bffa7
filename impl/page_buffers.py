"""Page buffers: reading and validating the per-request int32 page indices a block table is built
from, and the integer limits its block ids must fit.

Rule: every function validates all of its input before it computes anything. A page buffer
exposes the buffer protocol with native int32 page indices (raw bytes are read as native int32, a
multiple of 4 bytes); a page is BAD_PAGE_INDEX or >= 0; scale and divisor are ints >= 1 (bool is
not); the block id max(page, 0) * scale // divisor of every page fits int32. TypeError,
ValueError or OverflowError name the first request that breaks a rule.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple, Union

import numpy as np

BAD_PAGE_INDEX = -1
"""A page index that marks a missing page; it maps to block id 0."""

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
INT64_MAX = 2**63 - 1

PageBuffer = Union[bytes, bytearray, memoryview, np.ndarray]
"""Anything exposing the buffer protocol with native int32 page indices (raw bytes are read as
native int32)."""

_BYTE_FORMATS = frozenset({"B", "b", "c"})
_INT32_CODES = frozenset({"i", "l"})
_NATIVE_ORDER = {"@", "=", "<" if sys.byteorder == "little" else ">"}


def check_factor(name: str, value: object) -> int:
    """scale and divisor must be ints >= 1 (bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return value


def page_view(index: int, buffer: object) -> memoryview:
    """A 1-D view of request `index`'s buffer; raises if it does not hold native int32 pages."""
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"request {index}: page buffer must expose the buffer protocol (bytes, bytearray, "
            f"memoryview, int32 numpy array), got {type(buffer).__name__}"
        ) from None
    if view.ndim != 1:
        raise TypeError(f"request {index}: page buffer must be 1-D, got {view.ndim} dimensions")
    if not view.c_contiguous:
        raise TypeError(f"request {index}: page buffer must be contiguous")
    fmt = view.format
    order, code = (fmt[0], fmt[1:]) if fmt[:1] in "@=<>!" else ("@", fmt)
    if code in _BYTE_FORMATS and view.itemsize == 1:
        if view.nbytes % 4:
            raise ValueError(
                f"request {index}: page buffer has {view.nbytes} bytes, not a multiple of 4 "
                f"(int32 page indices)"
            )
    elif not (code in _INT32_CODES and view.itemsize == 4 and order in _NATIVE_ORDER):
        raise TypeError(
            f"request {index}: page buffer must hold native int32 page indices, got format "
            f"{fmt!r} with itemsize {view.itemsize}"
        )
    return view


def _first_request_with(lengths: np.ndarray, flat_index: int) -> int:
    """The request whose row holds position `flat_index` of the joined pages."""
    return int(np.searchsorted(np.cumsum(lengths), flat_index, side="right"))


class Pages(NamedTuple):
    """All requests' pages joined into one int32 array, with each row's length."""

    values: np.ndarray
    lengths: np.ndarray
    max_blocks: int
    highest: int


def read_pages(page_buffers: Sequence[object], scale: object, divisor: object) -> Pages:
    """Validate every buffer, page, scale and divisor; join the rows with one copy (for the
    device paths, which upload the joined pages once)."""
    scale = check_factor("scale", scale)
    divisor = check_factor("divisor", divisor)
    views = [page_view(i, buffer) for i, buffer in enumerate(page_buffers)]
    lengths = np.fromiter((view.nbytes >> 2 for view in views), dtype=np.int64, count=len(views))
    values = np.frombuffer(b"".join(views), dtype=np.int32)
    max_blocks = int(lengths.max()) if len(views) else 0
    highest = check_pages(values, lambda flat: _first_request_with(lengths, flat), scale, divisor)
    return Pages(values, lengths, max_blocks, highest)


def fits(highest: int, scale: int, divisor: int, limit: int) -> bool:
    """Arithmetic with `limit` as largest value is exact when scale, divisor and the largest
    product max(highest, 0) * scale all fit (proved by cacheproof.prove.block_ids)."""
    return scale <= limit and divisor <= limit and max(highest, 0) * scale <= limit



def check_pages(values: np.ndarray, request_of: Callable[[int], int], scale: int, divisor: int) -> int:
    """Reject a page < BAD_PAGE_INDEX or a block id beyond int32; return the largest page."""
    if not values.size:
        return BAD_PAGE_INDEX
    lowest = int(values.min())
    if lowest < BAD_PAGE_INDEX:
        raise ValueError(
            f"request {request_of(int(np.argmin(values)))}: page index {lowest} < {BAD_PAGE_INDEX} "
            f"(only BAD_PAGE_INDEX={BAD_PAGE_INDEX} or pages >= 0 are allowed)"
        )
    highest = int(values.max())
    if (max(highest, 0) * scale) // divisor > INT32_MAX:
        raise OverflowError(
            f"request {request_of(int(np.argmax(values)))}: block id ({highest} * {scale}) // "
            f"{divisor} = {(highest * scale) // divisor} does not fit int32 (max {INT32_MAX})"
        )
    return highest

