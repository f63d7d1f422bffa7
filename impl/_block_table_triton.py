"""The Triton kernel behind `block_ids_triton` (imported lazily: importing block_table never
needs triton).

One program writes one BLOCK-wide tile of one row of the padded table: live columns get
max(page, 0) * scale // divisor computed in int64 (pages were validated on the host, so the
result fits int32), the tail gets 0. Triton reads TRITON_INTERPRET when a function is
decorated, so the kernel is decorated on first use for each mode.
"""

from __future__ import annotations

from typing import Any

from cacheproof.extras import missing_extra

try:
    import torch
    import triton
    import triton.language as tl
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

_BLOCK = 1024


def _block_ids_kernel(values_ptr, row_starts_ptr, table_ptr, max_blocks, scale, divisor, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tile = tl.program_id(1)
    start = tl.load(row_starts_ptr + row)
    length = tl.load(row_starts_ptr + row + 1) - start
    columns = tile * BLOCK + tl.arange(0, BLOCK)
    live = columns < length
    pages = tl.load(values_ptr + start + columns, mask=live, other=0)
    blocks = tl.maximum(pages, 0).to(tl.int64) * scale // divisor
    row_base = row.to(tl.int64) * max_blocks
    tl.store(table_ptr + row_base + columns, blocks.to(tl.int32), mask=columns < max_blocks)


_compiled: dict[bool, Any] = {}


def _kernel() -> Any:
    interpret = bool(triton.knobs.runtime.interpret)
    if interpret not in _compiled:
        _compiled[interpret] = triton.jit(_block_ids_kernel)
    return _compiled[interpret]


def launch_block_ids(
    values: torch.Tensor, row_starts: torch.Tensor, table: torch.Tensor, scale: int, divisor: int
) -> None:
    """Fill `table` [num_requests, max_blocks] from joined int32 `values` and int64 `row_starts`
    (num_requests + 1 offsets). scale * max(values) must fit int64 (checked by the caller)."""
    num_requests, max_blocks = table.shape
    grid = (num_requests, triton.cdiv(max_blocks, _BLOCK))
    _kernel()[grid](values, row_starts, table, max_blocks, scale, divisor, BLOCK=_BLOCK)
