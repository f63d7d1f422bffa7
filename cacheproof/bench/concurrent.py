"""`cacheproof bench concurrent`: the concurrent checker's throughput and how fast it finds races.

Throughput: scenarios (and runs) per second of `cacheproof check --threads` on the locked spec and
on TensorLRUCache (CPU), the same seed so the same scenarios, side by side with the ratio to the
locked spec. Finding: for each racy cache of model_tests/racy_caches.py, the seconds from the start
to the first history that is not linearizable (before shrinking) and the seconds shrinking took,
median over `--seeds` seeds. Copies: producers commit large values into TensorLRUCache while a
scheduler thread calls get(); commits/s and the latency of the scheduler's gets with the copy
outside the lock (as TensorLRUCache does) and under it (as it did), side by side. The racy caches live in the repository's test suite, so this part
runs from a clone of cacheproof (it is skipped, with a note, when model_tests is not importable).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from cacheproof.check.concurrent.command import thread_count
from cacheproof.check.concurrent.run import SHRINK_SECONDS, run_concurrent_check
from cacheproof.spec.kinds import get_kind
from cacheproof.cmdline.flag_types import any_integer, non_negative_seconds, positive_integer
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table

RACY_MODULE = "model_tests.racy_caches"
CACHE = get_kind("cache")
"""The kind the bench checks: the tensor cache, whose racy caches model_tests holds."""
TARGET_SECONDS_TO_FIND = 30.0
SCHEDULER_PAUSE = 1e-4
"""Seconds the scheduler thread of the copy benchmark waits between two gets."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", metavar="N", type=thread_count, default=3, help="threads per scenario (default 3)")
    parser.add_argument("--scenarios", metavar="N", type=positive_integer, default=100, help="scenarios for the throughput runs (default 100)")
    parser.add_argument("--seeds", metavar="N", type=positive_integer, default=5, help="seeds per racy cache (default 5)")
    parser.add_argument("--budget", metavar="N", type=positive_integer, default=2000, help="scenarios allowed to find each race (default 2000)")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="first seed")
    parser.add_argument("--shrink-seconds", metavar="SECONDS", type=non_negative_seconds, default=SHRINK_SECONDS,
                        help=f"time allowed to shrink each race found (default {SHRINK_SECONDS:.0f})")
    parser.add_argument("--copy-threads", metavar="N", type=positive_integer, default=2, help="producers in the copy benchmark (default 2)")
    parser.add_argument("--copy-commits", metavar="N", type=positive_integer, default=50, help="commits per producer (default 50)")
    parser.add_argument("--copy-bytes", metavar="BYTES", type=positive_integer, default=4 << 20, help="bytes per committed value (default 4 MiB)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")
    parser.add_argument("--quiet", help="print only the last line (use with --json)", action="store_true")


def _tensor_cache(capacity_bytes: int):
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


def _racy_module():
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(RACY_MODULE)
    except ImportError:
        return None


def _copy_under_lock_cache(capacity_bytes: int):
    """TensorLRUCache whose value copy holds the cache's lock, as it did before the copy moved out."""
    from cacheproof.impl import TensorLRUCache

    class CopyUnderLock(TensorLRUCache):
        def _store(self, *arguments):
            with self._lock:
                return super()._store(*arguments)

    return CopyUnderLock(capacity_bytes, device="cpu")


def lock_contention(make_cache, *, producers: int, commits: int, nbytes: int) -> dict:
    """Producers reserve, commit (values of `nbytes`, made before timing) and release fresh keys
    while a scheduler thread calls get() on a small hot entry every SCHEDULER_PAUSE seconds:
    commits/s and the latency of the scheduler's gets (median and 99th percentile)."""
    cache = make_cache((producers * commits + 1) * nbytes + 1)
    cache.put("hot", cache.make_value(1, 0))
    values = [[cache.make_value(nbytes, thread) for _ in range(commits)] for thread in range(producers)]
    barrier = threading.Barrier(producers + 2)
    done = threading.Event()
    latencies: list[float] = []

    def produce(thread: int) -> None:
        barrier.wait()
        for index, value in enumerate(values[thread]):
            key = (thread, index)
            cache.reserve(key, nbytes, retain=False)
            cache.commit(key, value)
            cache.release(key)

    def schedule() -> None:
        barrier.wait()
        while True:  # at least one get, however soon the producers finish
            started = time.perf_counter()
            cache.get("hot")
            latencies.append(time.perf_counter() - started)
            if done.is_set():
                return
            time.sleep(SCHEDULER_PAUSE)

    workers = [threading.Thread(target=produce, args=(thread,)) for thread in range(producers)]
    scheduler = threading.Thread(target=schedule)
    for thread in [*workers, scheduler]:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    seconds = time.perf_counter() - started
    done.set()
    scheduler.join()
    latencies.sort()
    return {
        "commits_per_second": producers * commits / seconds,
        "get_p50_microseconds": 1e6 * latencies[len(latencies) // 2],
        "get_p99_microseconds": 1e6 * latencies[int(len(latencies) * 0.99)],
    }


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench concurrent", {"--json": args.json}):
        return 2
    racy = _racy_module()
    correct = {"TensorLRUCache (cpu)": _tensor_cache}
    if racy is not None:
        correct = {"LockedCacheSpec": racy.LockedCacheSpec, **correct}
    throughput = {}
    for name, factory in correct.items():
        report = run_concurrent_check(CACHE, factory, threads=args.threads, scenarios=args.scenarios, seed=args.seed)
        throughput[name] = {
            "ok": report.ok,
            "scenarios": report.scenarios,
            "runs": report.runs,
            "seconds": round(report.seconds, 3),
            "scenarios_per_second": round(report.scenarios_per_second, 1),
            "runs_per_second": round(report.runs_per_second, 1),
        }
    baseline = next(iter(throughput.values()))["scenarios_per_second"]
    for figure in throughput.values():
        figure["ratio_to_first"] = round(figure["scenarios_per_second"] / baseline, 3) if baseline else None
    finding = {}
    for cache in () if racy is None else racy.RACY_CACHES:
        to_find, shrinking, found = [], [], 0
        for seed in range(args.seed, args.seed + args.seeds):
            report = run_concurrent_check(
                CACHE, cache, threads=args.threads, scenarios=args.budget, seed=seed, shrink_seconds=args.shrink_seconds
            )
            if report.seconds_to_failure is not None:
                found += 1
                to_find.append(report.seconds_to_failure)
                shrinking.append(report.seconds - report.seconds_to_failure)
        finding[cache.__name__] = {
            "found": f"{found}/{args.seeds}",
            "median_seconds_to_find": round(statistics.median(to_find), 3) if to_find else None,
            "max_seconds_to_find": round(max(to_find), 3) if to_find else None,
            "median_seconds_to_shrink": round(statistics.median(shrinking), 3) if shrinking else None,
            "target_seconds_to_find": TARGET_SECONDS_TO_FIND,
        }
    copies = {}
    for name, make_cache in {"copy outside the lock": _tensor_cache, "copy under the lock": _copy_under_lock_cache}.items():
        runs = [
            lock_contention(make_cache, producers=args.copy_threads, commits=args.copy_commits, nbytes=args.copy_bytes)
            for _ in range(3)
        ]
        copies[name] = {field: round(statistics.median(run[field] for run in runs), 1) for field in runs[0]}
    under = copies["copy under the lock"]
    for figure in copies.values():
        figure["commits_ratio"] = round(figure["commits_per_second"] / under["commits_per_second"], 3)
        figure["get_p99_ratio"] = round(figure["get_p99_microseconds"] / under["get_p99_microseconds"], 5)
    if not args.quiet:
        summary_table(
            f"TensorLRUCache (cpu): {args.copy_threads} producers committing {args.copy_bytes} byte values, "
            "a scheduler thread calling get() (median of 3)",
            {
                name: f"{f['commits_per_second']:.0f} commits/s ({f['commits_ratio']:.2f}x); scheduler get "
                f"p50 {f['get_p50_microseconds']:.0f} us, p99 {f['get_p99_microseconds']:.0f} us "
                f"({f['get_p99_ratio']:.3g}x)"
                for name, f in copies.items()
            },
        )
        summary_table(
            f"check --threads {args.threads}: throughput (same seed, same scenarios)",
            {
                name: f"{f['scenarios_per_second']:.1f} scenarios/s, {f['runs_per_second']:.0f} runs/s "
                f"({f['ratio_to_first']:.2f}x the first row, {f['scenarios']} scenarios, ok={f['ok']})"
                for name, f in throughput.items()
            },
        )
        if racy is None:
            print(f"time to find: skipped, {RACY_MODULE} is not importable (run from a clone of cacheproof)")
        else:
            summary_table(
                f"time to find each racy cache (median of {args.seeds} seeds, target {TARGET_SECONDS_TO_FIND:.0f} s)",
                {
                    name: f"found {f['found']}, median {_seconds(f['median_seconds_to_find'])} to find "
                    f"(max {_seconds(f['max_seconds_to_find'])}), {_seconds(f['median_seconds_to_shrink'])} to shrink"
                    for name, f in finding.items()
                },
            )
    if args.json is not None:
        figures = {"throughput": throughput, "finding": finding, "commit_copies": copies}
        write_report(args.json, "bench", {"bench": "concurrent", "figures": figures})
    all_found = all(f["found"] == f"{args.seeds}/{args.seeds}" for f in finding.values())
    return 0 if all(f["ok"] for f in throughput.values()) and all_found else 1


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"
