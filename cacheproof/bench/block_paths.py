"""The measurements of `cacheproof bench blocks` (blocks.py holds its flags and its tables).

Every path of the block tables timed on one batch per size: the reference, the numpy, torch and
(on CUDA) Triton paths and the memcpy floor; the numpy path's stages; copy_block_offsets against a
per-row Python loop; memoized against fresh multimodal run metadata. Needs the `torch` extra.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cacheproof.bench.blocks import DIVISOR, SCALE
from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, "cacheproof bench blocks") from None

from cacheproof.impl import block_table as bt
from cacheproof.impl import block_ids, page_buffers


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement once, as the report `blocks.run` prints and writes."""
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({torch.get_num_threads()} torch threads)",
        "cuda": cuda,
        "block_ids": _block_ids_rows(rng, args.sizes, args),
        "copy_block_offsets": _copy_rows(rng, args.sizes, args),
        "run_metadata": _metadata_rows(rng, args),
    }


def _median_ms(call: Callable[[], Any], repeats: int, sync: bool = False) -> float:
    call()  # warm up (allocations, Triton compilation)
    samples = []
    for _ in range(max(repeats, 1)):
        if sync:
            torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if sync:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _batch(rng: np.random.Generator, requests: int, max_blocks: int) -> list[bytes]:
    """Page buffers as bytes, lengths uniform in [1, max_blocks] with one row at max_blocks."""
    lengths = rng.integers(1, max_blocks + 1, size=requests)
    lengths[0] = max_blocks
    buffers = []
    for length in lengths:
        row = rng.integers(0, 2**20, size=int(length), dtype=np.int32)
        row[rng.random(int(length)) < 0.05] = bt.BAD_PAGE_INDEX
        buffers.append(row.tobytes())
    return buffers


def _block_ids_rows(rng: np.random.Generator, sizes, args) -> list[dict[str, Any]]:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    rows = []
    for requests, max_blocks in sizes:
        buffers = _batch(rng, requests, max_blocks)
        run = lambda path, **kw: (lambda: path(buffers, scale=SCALE, divisor=DIVISOR, **kw))  # noqa: E731
        finished = bt.block_ids_numpy(buffers, scale=SCALE, divisor=DIVISOR).numpy()
        target = np.empty_like(finished)
        row: dict[str, Any] = {"size": f"{requests}x{max_blocks}"}
        row["reference"] = _median_ms(run(bt.block_ids_reference), args.reference_repeats)
        row["numpy"] = _median_ms(run(bt.block_ids_numpy), args.repeats)
        row["torch"] = _median_ms(run(bt.block_ids_torch, device=device), args.repeats, sync=cuda)
        row["triton"] = _median_ms(run(bt.block_ids_triton, device=device), args.repeats, sync=True) if cuda else None
        if cuda:
            row["numpy+upload"] = _median_ms(run(bt.block_ids_numpy, device=device), args.repeats, sync=True)
        row["memcpy"] = _median_ms(lambda: np.copyto(target, finished), args.repeats)
        row["breakdown"] = _numpy_breakdown(buffers, args.repeats)
        rows.append(row)
    return rows


def _numpy_breakdown(buffers: list[bytes], repeats: int) -> dict[str, float]:
    """Milliseconds of each stage of the numpy path, timed separately."""
    views = [page_buffers.page_view(i, b) for i, b in enumerate(buffers)]
    width = max(v.nbytes >> 2 for v in views)
    table = bt.block_ids_numpy(buffers).numpy()

    def fill() -> None:
        target = np.zeros((len(views), width), dtype=np.int32)
        for row, view in zip(target, views):
            row[: view.nbytes >> 2] = np.frombuffer(view, dtype=np.int32)

    highest = int(table.max())
    return {
        "check rows": _median_ms(lambda: [page_buffers.page_view(i, b) for i, b in enumerate(buffers)], repeats),
        "fill rows": _median_ms(fill, repeats),
        "min/max": _median_ms(lambda: (table.min(), table.max()), repeats),
        "transform": _median_ms(lambda: block_ids.transform_in_place(table.copy(), highest, SCALE, DIVISOR), repeats),
        "copy (in transform)": _median_ms(lambda: table.copy(), repeats),
    }


def _legacy_copy_loop(dst: torch.Tensor, rows: list[int], block_ids: list[list[int]]) -> None:
    """The per-row Python loop the fast copy replaces (without the identity gather)."""
    for row, ids in zip(rows, block_ids):
        dst[row, : len(ids)] = torch.tensor(ids, dtype=torch.int32)
        dst[row, len(ids) :] = 0


def _copy_rows(rng: np.random.Generator, sizes, args) -> list[dict[str, Any]]:
    results = []
    for requests, max_blocks in sizes:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dst = torch.zeros((requests, max_blocks), dtype=torch.int32, device=device)
        rows = rng.permutation(requests).tolist()
        lengths = rng.integers(1, max_blocks + 1, size=requests)
        num_blocks = 2**20  # the pool the ids are drawn from
        block_ids = [rng.integers(0, num_blocks, size=int(n)).tolist() for n in lengths]
        finished = dst.clone()
        sync = device == "cuda"
        floor = (lambda: dst.copy_(finished)) if sync else (lambda: np.copyto(dst.numpy(), finished.numpy()))
        results.append(
            {
                "size": f"{requests}x{max_blocks}",
                "per-row loop": _median_ms(lambda: _legacy_copy_loop(dst, rows, block_ids), args.reference_repeats, sync),
                "copy_block_offsets": _median_ms(
                    lambda: bt.copy_block_offsets(dst, rows, block_ids, num_blocks=num_blocks), args.repeats, sync
                ),
                "memcpy": _median_ms(floor, args.repeats, sync),
            }
        )
    return results


def _metadata_rows(rng: np.random.Generator, args) -> list[dict[str, Any]]:
    results = []
    for items, runs_per_item, max_length in [(1, 1, 64), (8, 4, 256), (32, 8, 1024)]:
        runs = items * runs_per_item
        cu = np.arange(0, runs + 1, runs_per_item)
        lengths = rng.integers(1, max_length + 1, size=runs)
        positions = np.concatenate([[0], np.cumsum(lengths + 3)[:-1]])
        layout = bt.MmRunLayout(cu, positions, lengths)
        results.append(
            {
                "layout": f"{items} items x {runs_per_item} runs, {int(lengths.sum())} tokens",
                "reference": _median_ms(lambda: bt.resolve_mm_run_metadata_reference(layout), args.reference_repeats),
                "fresh": _median_ms(lambda: bt.resolve_mm_run_metadata(layout), args.repeats),
                "memoized": _median_ms(lambda: layout.metadata, args.repeats),
            }
        )
    return results
