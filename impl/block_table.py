"""Block tables: the public home of the block-table kernels, and memoized multimodal run metadata.

The kernels live next to this module: page buffers to a padded block table in block_ids.py
(validation in page_buffers.py), block-offset copies into a persistent table in block_offsets.py;
their public names are importable from here (`__all__`). This module states the multimodal run
layout.

Rule: an `MmRunLayout` is validated when it is built and immutable after. It offers two views,
each with one slow reference that states its meaning in plain Python and a vectorized version
that tests hold equal to it, each computed once and handed out as fresh tensors:

- per token (`metadata`, `resolve_mm_run_metadata[_reference]`): one entry per multimodal token;
  a zero-length run has no token, so it appears only as a repeated entry of `cu_lengths`;
- per run (`per_run`, `resolve_mm_per_run_metadata[_reference]`): one entry per run, zero-length
  runs included, with the four fields TensorRT-LLM's `_resolve_multimodal_run_metadata` returns
  (run positions, run ends, item index of each run, item-local token offset of each run).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.block_ids import (
    block_ids_numpy,
    block_ids_reference,
    block_ids_torch,
    block_ids_triton,
    get_block_ids_per_seq,
)
from cacheproof.impl.block_offsets import copy_block_offsets, copy_block_offsets_reference
from cacheproof.impl.page_buffers import BAD_PAGE_INDEX, INT32_MAX, INT64_MAX, PageBuffer

# cacheproof.bench.blocks times these two steps of the numpy path through this module.

__all__ = [
    "BAD_PAGE_INDEX",
    "INT32_MAX",
    "MmRunLayout",
    "MmPerRunMetadata",
    "MmRunMetadata",
    "PageBuffer",
    "block_ids_numpy",
    "block_ids_reference",
    "block_ids_torch",
    "block_ids_triton",
    "copy_block_offsets",
    "copy_block_offsets_reference",
    "get_block_ids_per_seq",
    "resolve_mm_per_run_metadata",
    "resolve_mm_per_run_metadata_reference",
    "resolve_mm_run_metadata",
    "resolve_mm_run_metadata_reference",
]


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


class MmPerRunMetadata(NamedTuple):
    """Per-run metadata of a request's multimodal runs, TensorRT-LLM's `_MmRunMetadata` fields
    (all int64 on the CPU, num_runs entries each, zero-length runs included).

    run_positions: the first prompt position of each run.
    run_ends: one past the last prompt position of each run (run_positions + run_lengths).
    run_item_indices: the item that owns each run.
    run_item_offsets: how many tokens of the same item come before the run (the item-local
        offset of its first token).
    """

    run_positions: torch.Tensor
    run_ends: torch.Tensor
    run_item_indices: torch.Tensor
    run_item_offsets: torch.Tensor


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

    `metadata` memoizes `resolve_mm_run_metadata(self)` (per token) and `per_run` memoizes
    `resolve_mm_per_run_metadata(self)` (per run) for the layout's lifetime. Each access returns
    fresh tensors (one memcpy of the memo), so a caller mutating what it got back can never
    change what the next caller gets. Every int64 value of both views fits int64 (checked here,
    at construction), so neither view can wrap where the engine's int64 tensors would.
    """

    __slots__ = ("_cu_offsets", "_run_positions", "_run_lengths", "_memo", "_per_run_memo")

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
        object.__setattr__(self, "_per_run_memo", None)

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

    @property
    def per_run(self) -> MmPerRunMetadata:
        """`resolve_mm_per_run_metadata(self)`, computed once; fresh tensors on every access."""
        memo = self._per_run_memo
        if memo is None:
            memo = torch.cat(list(resolve_mm_per_run_metadata(self)))
            object.__setattr__(self, "_per_run_memo", memo)
        return MmPerRunMetadata(*memo.clone().split([self.num_runs] * 4))

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


def resolve_mm_per_run_metadata(layout: MmRunLayout) -> MmPerRunMetadata:
    """The layout's per-run metadata, computed from scratch with vectorized numpy ops: the
    item-local offset of a run is its exclusive running sum of lengths restarted at each item's
    first run (the running sum minus its value at that first run)."""
    lengths = layout.run_lengths
    positions = layout.run_positions
    runs_per_item = np.diff(layout.cu_offsets)
    before_run = np.zeros(layout.num_runs + 1, dtype=np.int64)
    np.cumsum(lengths, out=before_run[1:])
    item_of_run = np.repeat(np.arange(layout.num_items, dtype=np.int64), runs_per_item)
    item_start = np.repeat(before_run[layout.cu_offsets[:-1]], runs_per_item)
    fields = (positions, positions + lengths, item_of_run, before_run[:-1] - item_start)
    return MmPerRunMetadata(*(torch.from_numpy(np.array(f, dtype=np.int64)) for f in fields))


def resolve_mm_per_run_metadata_reference(layout: MmRunLayout) -> MmPerRunMetadata:
    """The meaning, item by item and run by run, with Python lists."""
    starts: list[int] = []
    ends: list[int] = []
    items: list[int] = []
    offsets: list[int] = []
    cu = layout.cu_offsets.tolist()
    positions = layout.run_positions.tolist()
    lengths = layout.run_lengths.tolist()
    for item in range(layout.num_items):
        seen = 0
        for run in range(cu[item], cu[item + 1]):
            starts.append(positions[run])
            ends.append(positions[run] + lengths[run])
            items.append(item)
            offsets.append(seen)
            seen += lengths[run]
    return MmPerRunMetadata(*(torch.tensor(v, dtype=torch.int64) for v in (starts, ends, items, offsets)))
