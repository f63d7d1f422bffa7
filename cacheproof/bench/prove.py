"""`cacheproof bench prove`: seconds of the per-entry proof by number of slots, and the aggregate
proofs' total, in one run. Solver seconds are z3's own; wall seconds add building the formulas."""

from __future__ import annotations

import argparse
import time

from cacheproof import aggregate_model, entry_model, liveness

DEFAULT_SLOTS = (4, 8, 16, 32, 64)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--slots", type=int, nargs="+", default=list(DEFAULT_SLOTS), help="slot counts (default 4 8 16 32 64)"
    )


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    aggregate = aggregate_model.prove() + liveness.prove()
    aggregate_wall = time.perf_counter() - started
    all_proved = all(r.proved for r in aggregate)
    print(f"{'model':<22} {'obligations':>11} {'solver s':>9} {'wall s':>8}  verdict")
    print(_row("aggregate + liveness", aggregate, aggregate_wall))
    for slots in args.slots:
        started = time.perf_counter()
        results = entry_model.prove(slots)
        wall = time.perf_counter() - started
        all_proved = all_proved and all(r.proved for r in results)
        print(_row(f"entries, {slots} slots", results, wall), flush=True)
    return 0 if all_proved else 1


def _row(label: str, results: list, wall: float) -> str:
    solver = sum(r.seconds for r in results)
    verdict = "all proved" if all(r.proved for r in results) else f"{sum(not r.proved for r in results)} FAILED"
    return f"{label:<22} {len(results):>11} {solver:>9.3f} {wall:>8.2f}  {verdict}"
