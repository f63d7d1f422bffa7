"""Block-table kernels: per-request page buffers to a padded int32 block table, block-offset
copies into a persistent table, and memoized multimodal run metadata.

Each operation has one slow reference that states its meaning in plain Python
(`block_ids_reference`, `copy_block_offsets_reference`, `resolve_mm_run_metadata_reference`)
and fast paths that tests and proofs hold equal to it. Every function validates all of its
input before it computes or writes anything.

Where the time goes (see docs/block_tables.md): small batches pay per-row Python work
(one buffer check and one row copy per request); large batches pay memory traffic. The numpy
path copies each row once into the padded table, validates with one min/max and transforms the
table in place; the torch and Triton paths join the rows into one buffer to upload it once.
"""

from __future__ import annotations

import array
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

import numpy as np
import torch

__all__ = [
    "BAD_PAGE_INDEX",
    "INT32_MAX",
    "MmRunLayout",
    "MmRunMetadata",
    "PageBuffer",
    "block_ids_numpy",
    "block_ids_reference",
    "block_ids_torch",
    "block_ids_triton",
    "copy_block_offsets",
    "copy_block_offsets_reference",
    "get_block_ids_per_seq",
    "resolve_mm_run_metadata",
    "resolve_mm_run_metadata_reference",
]

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
_Device = Union[str, torch.device, None]


# --------------------------------------------------------------------------- validation


def _check_factor(name: str, value: object) -> int:
    """scale and divisor must be ints >= 1 (bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value}")
    return value


def _page_view(index: int, buffer: object) -> memoryview:
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


class _Pages(NamedTuple):
    """All requests' pages joined into one int32 array, with each row's length."""

    values: np.ndarray
    lengths: np.ndarray
    max_blocks: int
    highest: int


def _read_pages(page_buffers: Sequence[object], scale: object, divisor: object) -> _Pages:
    """Validate every buffer, page, scale and divisor; join the rows with one copy (for the
    device paths, which upload the joined pages once)."""
    scale = _check_factor("scale", scale)
    divisor = _check_factor("divisor", divisor)
    views = [_page_view(i, buffer) for i, buffer in enumerate(page_buffers)]
    lengths = np.fromiter((view.nbytes >> 2 for view in views), dtype=np.int64, count=len(views))
    values = np.frombuffer(b"".join(views), dtype=np.int32)
    max_blocks = int(lengths.max()) if len(views) else 0
    highest = _check_pages(values, lambda flat: _first_request_with(lengths, flat), scale, divisor)
    return _Pages(values, lengths, max_blocks, highest)


def _fits(highest: int, scale: int, divisor: int, limit: int) -> bool:
    """Arithmetic with `limit` as largest value is exact when scale, divisor and the largest
    product max(highest, 0) * scale all fit (proved by cacheproof.prove.block_ids)."""
    return scale <= limit and divisor <= limit and max(highest, 0) * scale <= limit


# --------------------------------------------------------------------------- block ids


def block_ids_reference(page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1) -> torch.Tensor:
    """The legacy semantics, block by block, with Python's exact integers.

    Request r's buffer (native int32 page indices) becomes row r. Page p becomes
    ``0 if p == BAD_PAGE_INDEX else (p * scale) // divisor`` (floor division of non-negative
    exact integers). Rows are zero-padded to the longest; the result is int32 with shape
    [num_requests, max_blocks] ([n, 0] when every row is empty, [0, 0] for no requests).

    Raises TypeError for a buffer that does not hold native int32 pages, ValueError for a
    length not a multiple of 4 bytes, a page < BAD_PAGE_INDEX, or scale/divisor not an int >= 1,
    and OverflowError when a block id does not fit int32.
    """
    scale = _check_factor("scale", scale)
    divisor = _check_factor("divisor", divisor)
    rows: list[list[int]] = []
    for request, buffer in enumerate(page_buffers):
        view = _page_view(request, buffer)
        pages = view.cast("B").cast("i").tolist() if view.nbytes else []
        row = []
        for page in pages:
            if page < BAD_PAGE_INDEX:
                raise ValueError(
                    f"request {request}: page index {page} < {BAD_PAGE_INDEX} (only "
                    f"BAD_PAGE_INDEX={BAD_PAGE_INDEX} or pages >= 0 are allowed)"
                )
            block = 0 if page == BAD_PAGE_INDEX else (page * scale) // divisor
            if block > INT32_MAX:
                raise OverflowError(
                    f"request {request}: block id ({page} * {scale}) // {divisor} = {block} "
                    f"does not fit int32 (max {INT32_MAX})"
                )
            row.append(block)
        rows.append(row)
    width = max((len(row) for row in rows), default=0)
    table = torch.zeros((len(rows), width), dtype=torch.int32)
    for r, row in enumerate(rows):
        if row:
            table[r, : len(row)] = torch.tensor(row, dtype=torch.int32)
    return table


def _transform_in_place(values: np.ndarray, highest: int, scale: int, divisor: int) -> None:
    """Turn validated int32 pages into block ids in place: max(p, 0) * scale // divisor
    (max(p, 0) is 0 for BAD_PAGE_INDEX, and 0 stays 0, so zero padding may ride along).

    int32 arithmetic when the largest product fits int32, int64 when it fits int64, Python
    integers otherwise (cacheproof.prove.block_ids proves the first two exact)."""
    np.maximum(values, 0, out=values)
    if scale == 1 and divisor == 1:
        return
    if _fits(highest, scale, divisor, INT32_MAX):
        values *= scale
        if divisor != 1:
            values //= divisor
    elif _fits(highest, scale, divisor, INT64_MAX):
        wide = values.astype(np.int64)
        wide *= scale
        if divisor != 1:
            wide //= divisor
        values[...] = wide
    else:
        values[...] = values.astype(object) * scale // divisor


def _check_pages(values: np.ndarray, request_of: Callable[[int], int], scale: int, divisor: int) -> int:
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


def block_ids_numpy(
    page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1, device: _Device = None
) -> torch.Tensor:
    """`block_ids_reference` on the host: each row's pages are copied once, by np.frombuffer,
    straight into the zero-padded table; then one min/max check and one in-place transform of
    the whole table (padding zeros map to 0); then one copy to `device` if it is not the CPU."""
    scale = _check_factor("scale", scale)
    divisor = _check_factor("divisor", divisor)
    views = [_page_view(i, buffer) for i, buffer in enumerate(page_buffers)]
    width = max((view.nbytes >> 2 for view in views), default=0)
    table = np.zeros((len(views), width), dtype=np.int32)
    for row, view in zip(table, views):
        if view.nbytes:
            row[: view.nbytes >> 2] = np.frombuffer(view, dtype=np.int32)
    highest = _check_pages(table.reshape(-1), lambda flat: flat // width, scale, divisor)
    _transform_in_place(table, highest, scale, divisor)
    result = torch.from_numpy(table)
    target = torch.device(device) if device is not None else torch.device("cpu")
    if target.type == "cpu":
        return result
    return result.to(target, non_blocking=True)


def block_ids_torch(
    page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1, device: _Device = None
) -> torch.Tensor:
    """`block_ids_reference` with the transform and padding done by torch on `device`: the
    joined pages are validated on the host, copied once, then transformed there."""
    pages = _read_pages(page_buffers, scale, divisor)
    target = torch.device(device) if device is not None else torch.device("cpu")
    if not _fits(pages.highest, scale, divisor, INT64_MAX):  # only huge scale with huge divisor: exact host path
        return block_ids_numpy(page_buffers, scale=scale, divisor=divisor, device=target)
    values = torch.from_numpy(pages.values.copy()).to(target, non_blocking=True)
    lengths = torch.from_numpy(pages.lengths).to(target, non_blocking=True)
    blocks = values.clamp_min(0)
    if scale != 1 or divisor != 1:
        wide = blocks.to(torch.int64)
        if scale != 1:
            wide = wide * scale
        if divisor != 1:
            wide = torch.div(wide, divisor, rounding_mode="floor")
        blocks = wide.to(torch.int32)
    table = torch.zeros((len(pages.lengths), pages.max_blocks), dtype=torch.int32, device=target)
    if blocks.numel():
        columns = torch.arange(pages.max_blocks, device=target)
        table[columns < lengths[:, None]] = blocks
    return table


def _triton_can_run(device: torch.device) -> bool:
    return device.type == "cuda" or os.environ.get("TRITON_INTERPRET", "0").lower() in {"1", "true", "on", "yes"}


def block_ids_triton(
    page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1, device: _Device = None
) -> torch.Tensor:
    """`block_ids_reference` computed by a Triton kernel that writes the padded table in one
    pass. Runs natively on CUDA, and on the CPU only under TRITON_INTERPRET=1."""
    target = torch.device(device) if device is not None else torch.device("cpu")
    if not _triton_can_run(target):
        raise RuntimeError(
            f"block_ids_triton needs a CUDA device or TRITON_INTERPRET=1 in the environment "
            f"(got device {target})"
        )
    pages = _read_pages(page_buffers, scale, divisor)
    if not _fits(pages.highest, scale, divisor, INT64_MAX):  # only huge scale with huge divisor: exact host path
        return block_ids_numpy(page_buffers, scale=scale, divisor=divisor, device=target)
    from cacheproof.impl._block_table_triton import launch_block_ids

    values = torch.from_numpy(pages.values.copy()).to(target, non_blocking=True)
    starts = np.zeros(len(pages.lengths) + 1, dtype=np.int64)
    np.cumsum(pages.lengths, out=starts[1:])
    row_starts = torch.from_numpy(starts).to(target, non_blocking=True)
    table = torch.empty((len(pages.lengths), pages.max_blocks), dtype=torch.int32, device=target)
    if table.numel():
        launch_block_ids(values, row_starts, table, scale, divisor)
    return table


def get_block_ids_per_seq(
    page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1, device: _Device = None
) -> torch.Tensor:
    """The block table of `block_ids_reference`, built the fastest known way for `device`.

    CPU (device None or "cpu"): the numpy path. CUDA: the numpy path on the host, then one
    non_blocking copy of the finished table (the pages live on the host, the work is
    memory-bound and one upload of the result beats uploading pages plus a launch; the torch
    and Triton paths remain available and are tested equal).
    """
    return block_ids_numpy(page_buffers, scale=scale, divisor=divisor, device=device)


# --------------------------------------------------------------------------- block offsets


def _check_destination(dst: object) -> torch.Tensor:
    if not isinstance(dst, torch.Tensor):
        raise TypeError(f"dst must be a torch.Tensor, got {type(dst).__name__}")
    if dst.dtype != torch.int32 or dst.dim() != 2:
        raise TypeError(f"dst must be a 2-D int32 tensor, got {dst.dim()}-D {dst.dtype}")
    return dst


def _check_rows(rows: Sequence[int] | np.ndarray | torch.Tensor, num_rows: int, count: int) -> np.ndarray:
    """Rows as an int64 array: integers in [0, num_rows), none repeated, one per block-id list."""
    if isinstance(rows, torch.Tensor):
        array = rows.detach().cpu().numpy()
    else:
        array = np.asarray(rows)
    if array.size == 0:
        array = array.astype(np.int64)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise TypeError(f"rows must be a 1-D sequence of ints, got {array.ndim}-D {array.dtype}")
    if len(array) != count:
        raise ValueError(f"rows has {len(array)} entries but block_ids has {count}")
    array = array.astype(np.int64)
    outside = np.flatnonzero((array < 0) | (array >= num_rows))
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"rows[{i}] = {int(array[i])} is out of range [0, {num_rows}) of dst")
    unique, first, counts = np.unique(array, return_index=True, return_counts=True)
    if unique.size != array.size:
        repeated = int(unique[counts > 1][0])
        raise ValueError(f"row {repeated} is repeated in rows (first at rows[{int(first[counts > 1][0])}])")
    return array


def _ids_array(i: int, ids: object) -> np.ndarray:
    """Row i's block ids as a 1-D integer array (Python ints go through array('i'), which
    rejects non-integers and values beyond int32)."""
    if isinstance(ids, torch.Tensor):
        array_ = ids.detach().cpu().numpy()
    elif isinstance(ids, np.ndarray):
        array_ = ids
    else:
        try:
            return np.frombuffer(array.array("i", ids), dtype=np.int32)
        except OverflowError:
            raise OverflowError(f"block_ids[{i}] holds a value that does not fit int32") from None
        except TypeError as error:
            raise TypeError(f"block_ids[{i}] must be a 1-D sequence of ints: {error}") from None
    if array_.size == 0 and array_.ndim == 1:
        return array_.astype(np.int32)
    if array_.ndim != 1 or array_.dtype.kind not in "iu":
        raise TypeError(f"block_ids[{i}] must be a 1-D sequence of ints, got {array_.ndim}-D {array_.dtype}")
    if int(array_.min()) < INT32_MIN or int(array_.max()) > INT32_MAX:
        raise OverflowError(f"block_ids[{i}] holds a value that does not fit int32")
    return array_


def _pad_block_ids(block_ids: Sequence[Any], width: int) -> np.ndarray:
    """block_ids as a zero-padded [len(block_ids), width] int32 array; all checks first."""
    arrays = [_ids_array(i, ids) for i, ids in enumerate(block_ids)]
    for i, ids in enumerate(arrays):
        if len(ids) > width:
            raise ValueError(f"block_ids[{i}] has {len(ids)} ids, longer than dst's {width} columns")
    padded = np.zeros((len(arrays), width), dtype=np.int32)
    for row, ids in zip(padded, arrays):
        row[: len(ids)] = ids
    return padded


def copy_block_offsets_reference(dst: torch.Tensor, rows: Sequence[int], block_ids: Sequence[Sequence[int]]) -> None:
    """The meaning, row by row: for each i, dst[rows[i], :len(block_ids[i])] = block_ids[i] and
    dst[rows[i], len(block_ids[i]):] = 0. Rows must be distinct and in range, each list must fit
    in a row, every id must fit int32; dst is untouched when anything is wrong."""
    dst = _check_destination(dst)
    num_rows, width = dst.shape
    rows = [int(r) for r in rows]
    if len(rows) != len(block_ids):
        raise ValueError(f"rows has {len(rows)} entries but block_ids has {len(block_ids)}")
    seen: set[int] = set()
    for i, row in enumerate(rows):
        if not 0 <= row < num_rows:
            raise ValueError(f"rows[{i}] = {row} is out of range [0, {num_rows}) of dst")
        if row in seen:
            raise ValueError(f"row {row} is repeated in rows")
        seen.add(row)
    lists = [[int(x) for x in ids] for ids in block_ids]
    for i, ids in enumerate(lists):
        if len(ids) > width:
            raise ValueError(f"block_ids[{i}] has {len(ids)} ids, longer than dst's {width} columns")
        for x in ids:
            if not INT32_MIN <= x <= INT32_MAX:
                raise OverflowError(f"block_ids[{i}] holds {x}, which does not fit int32")
    for row, ids in zip(rows, lists):
        dst[row, : len(ids)] = torch.tensor(ids, dtype=torch.int32)
        dst[row, len(ids) :] = 0


def copy_block_offsets(
    dst: torch.Tensor,
    rows: Sequence[int] | np.ndarray | torch.Tensor,
    block_ids: Sequence[Sequence[int] | np.ndarray | torch.Tensor],
) -> None:
    """`copy_block_offsets_reference` in one scatter: the ids are padded with zeros to dst's
    full width on the host, copied once to dst's device and written with one index_put, so no
    stale tail survives. No identity gather, no arange buffer; dst is untouched on error."""
    dst = _check_destination(dst)
    num_rows, width = dst.shape
    row_array = _check_rows(rows, num_rows, len(block_ids))
    padded = _pad_block_ids(block_ids, width)
    if not len(row_array):
        return
    source = torch.from_numpy(padded)
    index = torch.from_numpy(row_array)
    if dst.device.type != "cpu":
        source = source.to(dst.device, non_blocking=True)
        index = index.to(dst.device, non_blocking=True)
    dst.index_copy_(0, index, source)


# --------------------------------------------------------------------------- multimodal runs


class MmRunMetadata(NamedTuple):
    """Per-token metadata of a request's multimodal runs (all int64, on the CPU).

    token_positions: arange(pos, pos + len) of each run, concatenated.
    run_index: the run each token belongs to.
    item_index: the item each token belongs to.
    cu_lengths: 0 then the cumulative sum of the run lengths (num_runs + 1 entries).
    """

    token_positions: torch.Tensor
    run_index: torch.Tensor
    item_index: torch.Tensor
    cu_lengths: torch.Tensor


def _int_vector(name: str, values: object) -> np.ndarray:
    array = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
    if array.size == 0 and array.ndim == 1:
        return np.zeros(0, dtype=np.int64)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be a 1-D sequence of ints, got {array.ndim}-D {array.dtype}")
    if array.dtype.kind == "u" and array.size and int(array.max()) > INT64_MAX:
        raise OverflowError(f"{name} holds values that do not fit int64")
    result = np.array(array, dtype=np.int64)
    result.flags.writeable = False
    return result


class MmRunLayout:
    """An immutable layout of one request's multimodal runs: item i owns runs
    cu_offsets[i]:cu_offsets[i+1]; run j covers token positions
    run_positions[j] .. run_positions[j] + run_lengths[j] - 1.

    Rules (ValueError otherwise): cu_offsets starts at 0, is nondecreasing and ends at the
    number of runs; run_positions and run_lengths have one entry per run; lengths and positions
    are >= 0. OverflowError at construction if a run's last position, or the byte size of the
    int64 metadata (3 entries per token plus num_runs + 1), does not fit int64. The arrays are private
    read-only copies.

    `metadata` memoizes `resolve_mm_run_metadata(self)` for the layout's lifetime. Each access
    returns fresh tensors (one memcpy of the memo), so a caller mutating what it got back can
    never change what the next caller gets.
    """

    __slots__ = ("_cu_offsets", "_run_positions", "_run_lengths", "_memo")

    def __init__(self, cu_offsets: Sequence[int], run_positions: Sequence[int], run_lengths: Sequence[int]) -> None:
        cu = _int_vector("cu_offsets", cu_offsets)
        positions = _int_vector("run_positions", run_positions)
        lengths = _int_vector("run_lengths", run_lengths)
        num_runs = len(lengths)
        if len(positions) != num_runs:
            raise ValueError(f"run_positions has {len(positions)} entries but run_lengths has {num_runs}")
        if len(cu) == 0 or cu[0] != 0:
            raise ValueError(f"cu_offsets must start at 0, got {cu.tolist()[:1] or 'nothing'}")
        steps = np.diff(cu)
        if steps.size and int(steps.min()) < 0:
            i = int(np.argmin(steps))
            raise ValueError(f"cu_offsets must be nondecreasing: cu_offsets[{i + 1}] = {cu[i + 1]} < {cu[i]}")
        if cu[-1] != num_runs:
            raise ValueError(f"cu_offsets must end at the number of runs {num_runs}, got {cu[-1]}")
        for name, values in (("run_lengths", lengths), ("run_positions", positions)):
            if values.size and int(values.min()) < 0:
                i = int(np.argmin(values))
                raise ValueError(f"{name}[{i}] = {values[i]} is negative")
        if lengths.size and (int(positions.max()) + int(lengths.max()) > INT64_MAX):
            raise OverflowError("run_positions + run_lengths does not fit int64")
        tokens = sum(lengths.tolist())  # Python ints: numpy's int64 sum would wrap
        if (3 * tokens + num_runs + 1) * 8 > INT64_MAX:
            raise OverflowError(
                f"run_lengths sum to {tokens} tokens; the metadata (3 int64 entries per token, plus "
                f"{num_runs + 1} cumulative lengths) would take more than {INT64_MAX} bytes"
            )
        object.__setattr__(self, "_cu_offsets", cu)
        object.__setattr__(self, "_run_positions", positions)
        object.__setattr__(self, "_run_lengths", lengths)
        object.__setattr__(self, "_memo", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"MmRunLayout is immutable (cannot set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"MmRunLayout is immutable (cannot delete {name})")

    @property
    def cu_offsets(self) -> np.ndarray:
        """Read-only int64 item offsets into the runs."""
        return self._cu_offsets

    @property
    def run_positions(self) -> np.ndarray:
        """Read-only int64 first token position of each run."""
        return self._run_positions

    @property
    def run_lengths(self) -> np.ndarray:
        """Read-only int64 number of tokens of each run."""
        return self._run_lengths

    @property
    def num_items(self) -> int:
        return len(self._cu_offsets) - 1

    @property
    def num_runs(self) -> int:
        return len(self._run_lengths)

    @property
    def metadata(self) -> MmRunMetadata:
        """`resolve_mm_run_metadata(self)`, computed once; fresh tensors on every access."""
        memo = self._memo
        if memo is None:
            memo = torch.cat(list(resolve_mm_run_metadata(self)))
            object.__setattr__(self, "_memo", memo)
        tokens = (len(memo) - self.num_runs - 1) // 3
        fresh = memo.clone()
        return MmRunMetadata(*fresh.split([tokens, tokens, tokens, self.num_runs + 1]))

    def __repr__(self) -> str:
        return (
            f"MmRunLayout(cu_offsets={self._cu_offsets.tolist()}, "
            f"run_positions={self._run_positions.tolist()}, run_lengths={self._run_lengths.tolist()})"
        )


def resolve_mm_run_metadata(layout: MmRunLayout) -> MmRunMetadata:
    """The layout's per-token metadata, computed from scratch with vectorized torch ops."""
    lengths = torch.from_numpy(layout.run_lengths.copy())
    positions = torch.from_numpy(layout.run_positions.copy())
    runs_per_item = torch.from_numpy(np.diff(layout.cu_offsets))
    cu_lengths = torch.zeros(layout.num_runs + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=cu_lengths[1:])
    run_index = torch.repeat_interleave(torch.arange(layout.num_runs, dtype=torch.int64), lengths)
    item_of_run = torch.repeat_interleave(torch.arange(layout.num_items, dtype=torch.int64), runs_per_item)
    offset_in_run = torch.arange(len(run_index), dtype=torch.int64) - cu_lengths[run_index]
    token_positions = positions[run_index] + offset_in_run
    return MmRunMetadata(token_positions, run_index, item_of_run[run_index], cu_lengths)


def resolve_mm_run_metadata_reference(layout: MmRunLayout) -> MmRunMetadata:
    """The meaning, run by run, with Python lists."""
    positions: list[int] = []
    run_index: list[int] = []
    item_index: list[int] = []
    cu_lengths = [0]
    cu = layout.cu_offsets.tolist()
    starts = layout.run_positions.tolist()
    lengths = layout.run_lengths.tolist()
    for item in range(layout.num_items):
        for run in range(cu[item], cu[item + 1]):
            for k in range(lengths[run]):
                positions.append(starts[run] + k)
                run_index.append(run)
                item_index.append(item)
            cu_lengths.append(cu_lengths[-1] + lengths[run])
    return MmRunMetadata(*(torch.tensor(v, dtype=torch.int64) for v in (positions, run_index, item_index, cu_lengths)))
