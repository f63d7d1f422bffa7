"""`cacheproof bench radix`: the built-in TorchRadixCache against SGLang's real RadixCache on one
shared-prefix workload.

The workload is a stream of `--requests` requests of 64 tokens; 60% start with one of 8 shared
48-token prefixes, the rest are fresh. Each request makes the tree-level calls SGLang's scheduler
makes for it: `lock(tokens)` (match its cached prefix and lock it), `evict` when free slots are
short (free = num_slots - evictable - protected, asked of the cache), `insert(tokens)` (the
duplicates go back) and `unlock` of the prefix it locked. The tree holds `--num-slots` KV slots,
few enough that cold requests are evicted.

Both caches run the same calls through the radix contract: the built-in `cacheproof.impl.
radix_cache:radix_cache` and `cacheproof.engines.sglang:radix_cache` (SGLang's RadixCache and
token allocator; the adapter's translation, a RadixKey per call and the KV-storage write, is
counted with SGLang's time). The best of `--repeats` runs is reported as calls per second; the
last column is the built-in's rate over SGLang's. Without SGLang the built-in is measured alone.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any, Callable

from cacheproof.bench.engines import print_rates
from cacheproof.cmdline.flag_types import any_integer, positive_integer
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.sandbox.factories import FactoryError, load_factory

TOKENS, PREFIX_TOKENS, SHARED_PREFIXES, SHARED_SHARE = 64, 48, 8, 0.6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", metavar="N", type=positive_integer, default=2000, help="requests in the workload")
    parser.add_argument("--num-slots", metavar="N", type=positive_integer, default=2048,
                        help=f"KV slots of each tree (at least {TOKENS})")
    parser.add_argument("--repeats", metavar="N", type=positive_integer, default=3, help="timed runs per cache (best kept)")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0,
                        help="the random seed: the same seed, the same run (default 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--quiet", action="store_true", help="print nothing (use with --json)")


def make_workload(requests: int, seed: int) -> list[tuple[int, ...]]:
    """Each request's tokens: a shared prefix for 60% of them, fresh tokens after it."""
    rng = random.Random(seed)
    prefixes = [tuple(rng.randrange(32000) for _ in range(PREFIX_TOKENS)) for _ in range(SHARED_PREFIXES)]
    workload = []
    for _ in range(requests):
        head = prefixes[rng.randrange(SHARED_PREFIXES)] if rng.random() < SHARED_SHARE else ()
        workload.append(head + tuple(rng.randrange(32000) for _ in range(TOKENS - len(head))))
    return workload


def run_workload(cache: Any, workload: list[tuple[int, ...]], num_slots: int) -> tuple[float, int]:
    """Seconds `cache` takes for the workload, and the calls it made."""
    calls = 0
    start = time.perf_counter()
    for tokens in workload:
        hit = cache.lock(tokens)
        free = num_slots - cache.evictable_size() - cache.protected_size()
        calls += 4
        if free < len(tokens):
            cache.evict(min(len(tokens) - free, cache.evictable_size()))
            calls += 2
        cache.insert(tokens)
        if hit:
            cache.unlock(tokens[:hit])
            calls += 1
    return time.perf_counter() - start, calls


SGLANG_IMPL = "cacheproof.engines.sglang:radix_cache"
"""SGLang's adapted RadixCache, loaded as `cacheproof check --impl` loads a factory (the engines are
a peer layer of the benches)."""


def sglang_factory() -> Callable[[int], Any] | None:
    """The factory of SGLANG_IMPL, its engine imported; None when SGLang's RadixCache does not import."""
    try:
        factory = load_factory(SGLANG_IMPL)
        factory.profile()  # imports SGLang before any timed run
    except (FactoryError, ImportError):
        return None
    return factory


def _best(factory: Callable[[int], Any], workload: list, args: argparse.Namespace) -> tuple[float, int]:
    runs = [run_workload(factory(args.num_slots), workload, args.num_slots) for _ in range(args.repeats)]
    return min(runs)


def run(args: argparse.Namespace) -> int:
    """Measure both trees on one workload, print rates and the ratio, optionally write JSON."""
    problem = first_problem({"--json": args.json})
    if problem is None and args.num_slots < TOKENS:
        problem = f"--num-slots must be at least {TOKENS} (one request's tokens), got {args.num_slots}"
    if problem is not None:
        print(f"cacheproof bench radix: {problem}", file=sys.stderr)
        return 2
    from cacheproof.impl.radix_cache import radix_cache

    workload = make_workload(args.requests, args.seed)
    seconds, calls = _best(radix_cache, workload, args)
    sglang = sglang_factory()
    report: dict[str, Any] = {"requests": args.requests, "num_slots": args.num_slots, "calls": calls,
                              "TorchRadixCache": calls / seconds, "sglang RadixCache": None}
    if sglang is not None:
        sglang_seconds, sglang_calls = _best(sglang, workload, args)
        report["sglang RadixCache"] = sglang_calls / sglang_seconds
    if not args.quiet:
        print(f"{args.requests} requests x {TOKENS} tokens, {SHARED_SHARE:.0%} on {SHARED_PREFIXES} shared "
              f"{PREFIX_TOKENS}-token prefixes, {args.num_slots} KV slots; calls per second, best of {args.repeats}")
        print_rates("TorchRadixCache", "sglang RadixCache", "torch/sglang", report,
                    "SGLang's RadixCache does not import")
    if args.json:
        write_report(args.json, "bench", {"bench": "radix", "figures": report})
    return 0
