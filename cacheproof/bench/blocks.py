"""`cacheproof bench blocks`: block-table paths against the reference and the memcpy floor.

For each size (requests x max blocks, random row lengths, 5% BAD pages) one run prints the
median milliseconds of the reference, the numpy, torch and (on CUDA) Triton paths, and the
memcpy floor (copying the finished table), with ratios against the reference and the floor;
then where the numpy path's time goes, copy_block_offsets against a per-row Python loop, and
memoized against fresh multimodal run metadata. The measuring is block_paths.py, imported when the
benchmark runs: it needs torch, and the flags here are read without it.
"""

from __future__ import annotations

import argparse
from typing import Any

from cacheproof.cmdline.flag_types import add_seed_flag, positive_integer
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report

DEFAULT_SIZES = "8x64,64x512,256x2048,1024x4096"
SCALE, DIVISOR = 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", metavar="N", type=positive_integer, default=15, help="timed repeats per fast path (median)")
    parser.add_argument(
        "--reference-repeats", metavar="N", type=positive_integer, default=3, help="timed repeats of the slow reference and loops"
    )
    parser.add_argument("--sizes", metavar="RxB,...", type=_sizes, default=DEFAULT_SIZES, help="comma-separated REQUESTSxMAX_BLOCKS")
    add_seed_flag(parser)
    parser.add_argument(
        "--torch-threads", metavar="N",
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
    """Measure everything once (block_paths, which needs torch), print the tables, optionally write JSON."""
    if refuse_unwritable("bench blocks", {"--json": args.json}):
        return 2
    from cacheproof.bench.block_paths import measure

    report = measure(args)
    if not args.quiet:
        _print(report)
    if args.json:
        write_report(args.json, "bench", {"bench": "blocks", "figures": report})
    return 0
