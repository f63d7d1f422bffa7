"""`cacheproof bench blocks`: block-table paths against the reference and the memcpy floor.

For each size (requests x max blocks, random row lengths, 5% BAD pages) one run prints the
median milliseconds of the reference, the numpy, torch and (on CUDA) Triton paths, and the
memcpy floor (copying the finished table), with ratios against the reference and the floor;
then where the numpy path's time goes, copy_block_offsets against a per-row Python loop, and
memoized against fresh multimodal run metadata.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from cacheproof.cmdline.flag_types import any_integer, positive_integer
from cacheproof.cmdline.output_paths import first_problem, write_atomically
from cacheproof.impl import block_table as bt
from cacheproof.impl import block_ids, page_buffers

DEFAULT_SIZES = "8x64,64x512,256x2048,1024x4096"
SCALE, DIVISOR = 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=positive_integer, default=15, help="timed repeats per fast path (median)")
    parser.add_argument(
        "--reference-repeats", type=positive_integer, default=3, help="timed repeats of the slow reference and loops"
    )
    parser.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES, help="comma-separated REQUESTSxMAX_BLOCKS")
    parser.add_argument("--seed", type=any_integer, default=0)
    parser.add_argument(
        "--torch-threads",
        type=positive_integer,
        default=1,
        help="torch intra-op threads (default 1: on a loaded 2-core host OpenMP spinning costs 10-50x)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--quiet", action="store_true", help="print nothing (use with --json)")


def _sizes(text: str) -> list[tuple[int, int]]:
    """argparse type of --sizes: "8x16,64x128" as [(8, 16), (64, 128)], every number >= 1."""
    sizes = []
    for item in text.split(","):
        requests, _, blocks = item.strip().partition("x")
        if not (requests.isdigit() and blocks.isdigit() and int(requests) >= 1 and int(blocks) >= 1):
            raise argparse.ArgumentTypeError(
                f"must be comma-separated REQUESTSxMAX_BLOCKS with integers >= 1, got {text!r}"
            )
        sizes.append((int(requests), int(blocks)))
    return sizes


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


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:8.1f}x" if a is not None and b else "        -"


def _ms(value: float | None) -> str:
    return f"{value:9.3f}" if value is not None else "        -"


def _print(report: dict[str, Any]) -> None:
    print(f"block ids (scale={SCALE}, divisor={DIVISOR}, 5% BAD), median ms on {report['device']}")
    paths = ["reference", "numpy", "torch", "triton"] + (["numpy+upload"] if report["cuda"] else [])
    header = f"{'size':>10} " + " ".join(f"{p:>12}" for p in paths + ["memcpy"])
    print(header + f" {'ref/numpy':>9} {'numpy/memcpy':>12} {'ref/best':>9} {'best/memcpy':>11}")
    for row in report["block_ids"]:
        best = min(row[p] for p in paths[1:] if row.get(p) is not None)
        cells = " ".join(f"{_ms(row.get(p)):>12}" for p in paths + ["memcpy"])
        print(
            f"{row['size']:>10} {cells} {_ratio(row['reference'], row['numpy']):>9} "
            f"{_ratio(row['numpy'], row['memcpy']):>12} {_ratio(row['reference'], best):>9} "
            f"{_ratio(best, row['memcpy']):>11}"
        )
    print("\nwhere the numpy path's time goes (ms, stages timed separately)")
    stages = list(report["block_ids"][0]["breakdown"])
    print(f"{'size':>10} " + " ".join(f"{s:>11}" for s in stages))
    for row in report["block_ids"]:
        print(f"{row['size']:>10} " + " ".join(f"{row['breakdown'][s]:11.3f}" for s in stages))
    print("\ncopy_block_offsets (all rows, shuffled), median ms")
    print(f"{'size':>10} {'per-row loop':>12} {'fast':>9} {'memcpy':>9} {'loop/fast':>9} {'fast/memcpy':>11}")
    for row in report["copy_block_offsets"]:
        print(
            f"{row['size']:>10} {_ms(row['per-row loop']):>12} {_ms(row['copy_block_offsets'])} "
            f"{_ms(row['memcpy'])} {_ratio(row['per-row loop'], row['copy_block_offsets'])} "
            f"{_ratio(row['copy_block_offsets'], row['memcpy']):>11}"
        )
    print("\nmultimodal run metadata, median ms per call")
    print(f"{'layout':>34} {'reference':>9} {'fresh':>9} {'memoized':>9} {'fresh/memo':>10}")
    for row in report["run_metadata"]:
        print(
            f"{row['layout']:>34} {_ms(row['reference'])} {_ms(row['fresh'])} {_ms(row['memoized'])} "
            f"{_ratio(row['fresh'], row['memoized']):>10}"
        )


def run(args: argparse.Namespace) -> int:
    """Measure everything once, print the tables, optionally write JSON."""
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench blocks: {problem}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    sizes = args.sizes
    cuda = torch.cuda.is_available()
    report = {
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({torch.get_num_threads()} torch threads)",
        "cuda": cuda,
        "block_ids": _block_ids_rows(rng, sizes, args),
        "copy_block_offsets": _copy_rows(rng, sizes, args),
        "run_metadata": _metadata_rows(rng, args),
    }
    if not args.quiet:
        _print(report)
    if args.json:
        write_atomically(args.json, json.dumps(report, indent=2))
    return 0
