"""Block offsets: copying per-row block-id lists into a persistent 2-D int32 block table.

Rule: `copy_block_offsets_reference` states the meaning row by row; `copy_block_offsets` writes the
same table in one scatter. Both take the pool's block count `num_blocks` (keyword, required) and
check everything first, in this order, each stage over every list before the next stage:

1. dst is a 2-D int32 tensor (TypeError);
2. num_blocks is an int >= 0 (InvalidArgumentError);
3. rows are 1-D ints, one per list, in [0, dst rows), distinct (TypeError / ValueError);
4. every list is 1-D ints that fit int32 (TypeError / OverflowError);
5. every list fits a row of dst (ValueError);
6. every id lies in [0, num_blocks) (InvalidArgumentError naming the list, its dst row, the
   column, the id and the bound).

So dst is untouched when anything is wrong, and both zero each written row's tail so no stale id
survives. Stage 6 is the contract the engines' identity gather (`arange(num_blocks)[ids]`, removed
by seed 000) enforced only partly: it raised IndexError for ids >= num_blocks and silently wrapped
ids in [-num_blocks, -1] to num_blocks + id. A direct copy without stage 6 writes such ids as they
are; `cacheproof prove --block-table` proves the two agree exactly on [0, num_blocks).
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.page_buffers import INT32_MAX, INT32_MIN
from cacheproof.spec.errors import InvalidArgumentError


def _check_destination(dst: object) -> torch.Tensor:
    if not isinstance(dst, torch.Tensor):
        raise TypeError(f"dst must be a torch.Tensor, got {type(dst).__name__}")
    if dst.dtype != torch.int32 or dst.dim() != 2:
        raise TypeError(f"dst must be a 2-D int32 tensor, got {dst.dim()}-D {dst.dtype}")
    return dst


def _check_num_blocks(num_blocks: object) -> int:
    """The pool's block count: an int >= 0 (bool is not an int here); ids must lie below it."""
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, (int, np.integer)):
        raise InvalidArgumentError(f"num_blocks must be an int >= 0, got {type(num_blocks).__name__} {num_blocks!r}")
    if num_blocks < 0:
        raise InvalidArgumentError(f"num_blocks must be an int >= 0, got {num_blocks}")
    return int(num_blocks)


def _out_of_pool(i: int, row: int, column: int, block_id: int, num_blocks: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"block_ids[{i}] (dst row {row}) holds block id {block_id} at column {column}, outside "
        f"[0, {num_blocks}) (num_blocks={num_blocks}): the pool has no such block"
    )


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


def _pad_block_ids(block_ids: Sequence[Any], width: int, rows: np.ndarray, num_blocks: int) -> np.ndarray:
    """block_ids as a zero-padded [len(block_ids), width] int32 array; all checks first (stages
    4-6 of the module's rule). The range check is one min/max over the padded table (padding
    zeros are in range whenever num_blocks >= 1); only a failure looks for the first bad id."""
    arrays = [_ids_array(i, ids) for i, ids in enumerate(block_ids)]
    for i, ids in enumerate(arrays):
        if len(ids) > width:
            raise ValueError(f"block_ids[{i}] has {len(ids)} ids, longer than dst's {width} columns")
    padded = np.zeros((len(arrays), width), dtype=np.int32)
    for row, ids in zip(padded, arrays):
        row[: len(ids)] = ids
    if padded.size and (num_blocks == 0 or int(padded.min()) < 0 or int(padded.max()) >= num_blocks):
        bound = min(num_blocks, INT32_MAX + 1)  # every id fits int32 here, so this bound is exact
        for i, ids in enumerate(arrays):
            bad = np.flatnonzero((ids < 0) | (ids >= bound))
            if bad.size:
                column = int(bad[0])
                raise _out_of_pool(i, int(rows[i]), column, int(ids[column]), num_blocks)
    return padded


def copy_block_offsets_reference(
    dst: torch.Tensor, rows: Sequence[int], block_ids: Sequence[Sequence[int]], *, num_blocks: int
) -> None:
    """The meaning, row by row: for each i, dst[rows[i], :len(block_ids[i])] = block_ids[i] and
    dst[rows[i], len(block_ids[i]):] = 0. Rows must be distinct and in range, each list must fit
    in a row, every id must fit int32 and lie in [0, num_blocks) (the pool's block count;
    InvalidArgumentError otherwise); dst is untouched when anything is wrong. The checks run in
    the order the module docstring lists."""
    dst = _check_destination(dst)
    num_blocks = _check_num_blocks(num_blocks)
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
        for x in ids:
            if not INT32_MIN <= x <= INT32_MAX:
                raise OverflowError(f"block_ids[{i}] holds {x}, which does not fit int32")
    for i, ids in enumerate(lists):
        if len(ids) > width:
            raise ValueError(f"block_ids[{i}] has {len(ids)} ids, longer than dst's {width} columns")
    for i, ids in enumerate(lists):
        for column, x in enumerate(ids):
            if not 0 <= x < num_blocks:
                raise _out_of_pool(i, rows[i], column, x, num_blocks)
    for row, ids in zip(rows, lists):
        dst[row, : len(ids)] = torch.tensor(ids, dtype=torch.int32)
        dst[row, len(ids) :] = 0


def copy_block_offsets(
    dst: torch.Tensor,
    rows: Sequence[int] | np.ndarray | torch.Tensor,
    block_ids: Sequence[Sequence[int] | np.ndarray | torch.Tensor],
    *,
    num_blocks: int,
) -> None:
    """`copy_block_offsets_reference` in one scatter: the ids are checked and padded with zeros
    to dst's full width on the host, copied once to dst's device and written with one
    index_copy_, so no stale tail survives. No identity gather, no arange buffer, but the bound
    the gather implied is checked: an id outside [0, num_blocks) raises InvalidArgumentError
    (naming the list, its dst row, the id and the bound) before anything is written. num_blocks
    is required: omitting it is a TypeError, so no caller can skip the check by accident."""
    dst = _check_destination(dst)
    num_blocks = _check_num_blocks(num_blocks)
    num_rows, width = dst.shape
    row_array = _check_rows(rows, num_rows, len(block_ids))
    padded = _pad_block_ids(block_ids, width, row_array, num_blocks)
    if not len(row_array):
        return
    source = torch.from_numpy(padded)
    index = torch.from_numpy(row_array)
    if dst.device.type != "cpu":
        source = source.to(dst.device, non_blocking=True)
        index = index.to(dst.device, non_blocking=True)
    dst.index_copy_(0, index, source)

