"""Block ids: per-request page buffers to a padded int32 block table.

Rule: `block_ids_reference` states the meaning in plain Python with exact integers; every fast
path (numpy, torch, Triton, and `get_block_ids_per_seq`, the default) returns the same table and
raises the same errors, and validates all of its input (page_buffers.py) before it computes.

Where the time goes (see docs/block_tables.md): small batches pay per-row Python work
(one buffer check and one row copy per request); large batches pay memory traffic. The numpy
path copies each row once into the padded table, validates with one min/max and transforms the
table in place; the torch and Triton paths join the rows into one buffer to upload it once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Union

import numpy as np

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.page_buffers import (
    BAD_PAGE_INDEX,
    INT32_MAX,
    INT64_MAX,
    PageBuffer,
    check_factor,
    check_pages,
    fits,
    page_view,
    read_pages,
)

_Device = Union[str, torch.device, None]


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
    scale = check_factor("scale", scale)
    divisor = check_factor("divisor", divisor)
    rows: list[list[int]] = []
    for request, buffer in enumerate(page_buffers):
        view = page_view(request, buffer)
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


def transform_in_place(values: np.ndarray, highest: int, scale: int, divisor: int) -> None:
    """Turn validated int32 pages into block ids in place: max(p, 0) * scale // divisor
    (max(p, 0) is 0 for BAD_PAGE_INDEX, and 0 stays 0, so zero padding may ride along).

    int32 arithmetic when the largest product fits int32, int64 when it fits int64, Python
    integers otherwise (cacheproof.prove.block_ids proves the first two exact)."""
    np.maximum(values, 0, out=values)
    if scale == 1 and divisor == 1:
        return
    if fits(highest, scale, divisor, INT32_MAX):
        values *= scale
        if divisor != 1:
            values //= divisor
    elif fits(highest, scale, divisor, INT64_MAX):
        wide = values.astype(np.int64)
        wide *= scale
        if divisor != 1:
            wide //= divisor
        values[...] = wide
    else:
        values[...] = values.astype(object) * scale // divisor



def block_ids_numpy(
    page_buffers: Sequence[PageBuffer], *, scale: int = 1, divisor: int = 1, device: _Device = None
) -> torch.Tensor:
    """`block_ids_reference` on the host: each row's pages are copied once, by np.frombuffer,
    straight into the zero-padded table; then one min/max check and one in-place transform of
    the whole table (padding zeros map to 0); then one copy to `device` if it is not the CPU."""
    scale = check_factor("scale", scale)
    divisor = check_factor("divisor", divisor)
    views = [page_view(i, buffer) for i, buffer in enumerate(page_buffers)]
    width = max((view.nbytes >> 2 for view in views), default=0)
    table = np.zeros((len(views), width), dtype=np.int32)
    for row, view in zip(table, views):
        if view.nbytes:
            row[: view.nbytes >> 2] = np.frombuffer(view, dtype=np.int32)
    highest = check_pages(table.reshape(-1), lambda flat: flat // width, scale, divisor)
    transform_in_place(table, highest, scale, divisor)
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
    pages = read_pages(page_buffers, scale, divisor)
    target = torch.device(device) if device is not None else torch.device("cpu")
    if not fits(pages.highest, scale, divisor, INT64_MAX):  # only huge scale with huge divisor: exact host path
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
    pages = read_pages(page_buffers, scale, divisor)
    if not fits(pages.highest, scale, divisor, INT64_MAX):  # only huge scale with huge divisor: exact host path
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

