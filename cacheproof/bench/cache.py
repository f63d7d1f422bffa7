"""`cacheproof bench cache`: checker steps per second, spec vs spec and spec vs TensorLRUCache, side by side."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cacheproof.check.flag_types import any_integer, positive_integer
from cacheproof.check.output_paths import first_problem, write_atomically
from cacheproof.check.run import run_check
from cacheproof.progress import summary_table
from cacheproof.spec import CacheSpec

TARGETS = {"CacheSpec": 3000, "TensorLRUCache (cpu)": 500}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--examples", type=positive_integer, default=100, help="examples per cache (default 100)")
    parser.add_argument("--seed", type=any_integer, default=0)
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    parser.add_argument("--quiet", action="store_true")


def _tensor_cache(capacity_bytes: int):
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench cache: {problem}", file=sys.stderr)
        return 2
    factories = {"CacheSpec": CacheSpec, "TensorLRUCache (cpu)": _tensor_cache}
    figures = {}
    for name, factory in factories.items():
        report = run_check(factory, examples=args.examples, seed=args.seed)
        figures[name] = {
            "ok": report.ok,
            "steps": report.steps,
            "seconds": round(report.seconds, 3),
            "steps_per_second": round(report.steps_per_second, 1),
            "target_steps_per_second": TARGETS[name],
        }
    baseline = figures["CacheSpec"]["steps_per_second"]
    for figure in figures.values():
        figure["ratio_to_spec"] = round(figure["steps_per_second"] / baseline, 3)
    if not args.quiet:
        summary_table(
            "checker throughput (same seed, same call sequences)",
            {
                name: f"{f['steps_per_second']:.0f} steps/s  (target {f['target_steps_per_second']}, "
                f"{f['ratio_to_spec']:.2f}x spec-vs-spec, {f['steps']} steps, ok={f['ok']})"
                for name, f in figures.items()
            },
        )
    if args.json is not None:
        write_atomically(args.json, json.dumps(figures, indent=2) + "\n")
    return 0 if all(f["ok"] for f in figures.values()) else 1
