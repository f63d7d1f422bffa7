"""Block offsets: copying per-row block-id lists into a persistent 2-D int32 block table.

Rule: `copy_block_offsets_reference` states the meaning row by row; `copy_block_offsets` writes the
same table in one scatter. Both check everything first (dst a 2-D int32 tensor, rows distinct and
in range with one per list, every list fits a row, every id fits int32), so dst is untouched when
anything is wrong, and both zero each written row's tail so no stale id survives.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cacheproof.impl.page_buffers import INT32_MAX, INT32_MIN


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

