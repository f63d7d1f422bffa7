"""`cacheproof bench block_pool`: KVBlockPool against vLLM's real BlockPool on one workload.

The workload is a stream of 2048-token requests at 16-token blocks (128 blocks each) with at most
`--live` requests running; 60% start with one of 8 shared 64-block prefixes. Each request makes
the calls an engine's KV-cache manager makes: a prefix lookup, a touch of the hit blocks, an
allocation of the rest, caching its new full blocks, and, when it finishes, a free of all its
blocks in reverse order (tail blocks evicted first). The pool is small enough that freed cached
blocks are reused, so allocation evicts lazily.

Both pools run the same calls: KVBlockPool through its contract (ints), vLLM's BlockPool through
its own API the way vLLM's scheduler drives it (block objects, byte hashes, real `Request`s built
before timing). The best of `--repeats` runs is reported as pool calls per second; the last
column is KVBlockPool's rate over vLLM's. Without vLLM installed the torch pool is measured alone.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from cacheproof.bench.engines import print_rates
from cacheproof.cmdline.flag_types import add_seed_flag, positive_integer
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report

TOKENS, BLOCK_SIZE, SHARED_PREFIXES, PREFIX_BLOCKS, SHARED_SHARE = 2048, 16, 8, 64, 0.6
BLOCKS_PER_REQUEST = TOKENS // BLOCK_SIZE
CALLS_PER_REQUEST = 5  # lookup, touch, allocate, cache, free


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", metavar="N", type=positive_integer, default=2000, help="requests in the workload")
    parser.add_argument("--live", metavar="N", type=positive_integer, default=24, help="requests running at once")
    parser.add_argument(
        "--num-blocks", metavar="N", type=positive_integer, default=4096, help="pool size (at least live x 128 + 1)"
    )
    parser.add_argument("--repeats", metavar="N", type=positive_integer, default=3, help="timed runs per pool (best kept)")
    add_seed_flag(parser)
    parser.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    parser.add_argument("--quiet", action="store_true", help="print nothing (use with --json)")


@dataclass(frozen=True)
class Workload:
    """Each request's chained block hashes, and the order requests start and finish in."""

    chains: list[tuple[int, ...]]
    events: list[tuple[bool, int]]  # (starts, request)


def make_workload(requests: int, live: int, seed: int) -> Workload:
    rng = random.Random(seed)
    chains = []
    for request in range(requests):
        if rng.random() < SHARED_SHARE:
            prefix = rng.randrange(SHARED_PREFIXES)
            head = tuple(prefix * PREFIX_BLOCKS + i for i in range(PREFIX_BLOCKS))
        else:
            head = ()
        base = (request + 1) * 1_000_000
        chains.append(head + tuple(base + i for i in range(len(head), BLOCKS_PER_REQUEST)))
    events: list[tuple[bool, int]] = []
    running: list[int] = []
    for request in range(requests):
        if len(running) == live:
            events.append((False, running.pop(rng.randrange(live))))
        events.append((True, request))
        running.append(request)
    events.extend((False, request) for request in running)
    return Workload(chains, events)


def run_torch_pool(workload: Workload, num_blocks: int) -> float:
    """Seconds KVBlockPool takes for the workload (storage on the meta device: calls only)."""
    from cacheproof.impl.kv_block_pool import KVBlockPool

    pool = KVBlockPool(num_blocks, BLOCK_SIZE, kv_shape=(2, 8, 128), device="meta")
    lookup, touch, allocate, cache, free = pool.lookup, pool.touch, pool.allocate, pool.cache_blocks, pool.free
    chains, held = workload.chains, {}
    start = time.perf_counter()
    for starts, request in workload.events:
        if starts:
            chain = chains[request]
            hit = lookup(chain)
            touch(request, hit)
            new = allocate(request, BLOCKS_PER_REQUEST - len(hit))
            cache(request, new, chain[len(hit) :])
            held[request] = hit + new
        else:
            free(request, held.pop(request)[::-1])
    return time.perf_counter() - start


def vllm_runner() -> Callable[[Workload, int], float] | None:
    """The vLLM side of the bench, or None when vLLM is not installed."""
    try:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.block_pool import BlockPool
        from vllm.v1.core.kv_cache_utils import BlockHash
        from vllm.v1.request import Request
    except ImportError:
        return None

    def run_vllm_pool(workload: Workload, num_blocks: int) -> float:
        """Seconds vLLM's BlockPool takes for the workload, driven through its own API."""
        pool = BlockPool(num_blocks, enable_caching=True, hash_block_size=BLOCK_SIZE)
        sampling = SamplingParams(max_tokens=1)
        requests = [
            Request(str(r), [0] * TOKENS, sampling, None, block_hashes=[BlockHash(h.to_bytes(8, "big")) for h in chain])
            for r, chain in enumerate(workload.chains)
        ]
        get_cached, touch, get_new = pool.get_cached_block, pool.touch, pool.get_new_blocks
        cache, free, groups = pool.cache_full_blocks, pool.free_blocks, [0]
        held = {}
        start = time.perf_counter()
        for starts, r in workload.events:
            if starts:
                request = requests[r]
                hit = []
                for block_hash in request.block_hashes:
                    cached = get_cached(block_hash, groups)
                    if cached is None:
                        break
                    hit.append(cached[0])
                touch(hit)
                blocks = hit + get_new(BLOCKS_PER_REQUEST - len(hit))
                cache(request, blocks, len(hit), BLOCKS_PER_REQUEST, BLOCK_SIZE, 0)
                held[r] = blocks
            else:
                free(reversed(held.pop(r)))
        return time.perf_counter() - start

    return run_vllm_pool


def _best(runner: Callable[[Workload, int], float], workload: Workload, args: argparse.Namespace) -> float:
    return min(runner(workload, args.num_blocks) for _ in range(args.repeats))


def run(args: argparse.Namespace) -> int:
    """Measure both pools on one workload, print rates and the ratio, optionally write JSON."""
    problem = first_problem({"--json": args.json})
    if problem is None and args.num_blocks < args.live * BLOCKS_PER_REQUEST + 1:
        problem = f"--num-blocks must be at least --live x {BLOCKS_PER_REQUEST} + 1 = {args.live * BLOCKS_PER_REQUEST + 1}"
    if problem is not None:
        print(f"cacheproof bench block_pool: {problem}", file=sys.stderr)
        return 2
    workload = make_workload(args.requests, args.live, args.seed)
    calls = CALLS_PER_REQUEST * args.requests
    vllm = vllm_runner()
    report: dict[str, Any] = {
        "requests": args.requests,
        "live": args.live,
        "num_blocks": args.num_blocks,
        "calls": calls,
        "KVBlockPool": calls / _best(run_torch_pool, workload, args),
        "vllm BlockPool": None if vllm is None else calls / _best(vllm, workload, args),
    }
    if not args.quiet:
        print(
            f"{args.requests} requests x {TOKENS} tokens ({BLOCKS_PER_REQUEST} blocks of {BLOCK_SIZE}), "
            f"{args.live} live, {args.num_blocks} blocks, {SHARED_SHARE:.0%} on {SHARED_PREFIXES} shared "
            f"{PREFIX_BLOCKS}-block prefixes; pool calls per second, best of {args.repeats}"
        )
        print_rates("KVBlockPool", "vllm BlockPool", "torch/vllm", report, "vLLM is not installed")
    if args.json:
        write_report(args.json, "bench", {"bench": "block_pool", "figures": report})
    return 0
