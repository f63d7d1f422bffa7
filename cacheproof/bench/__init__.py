"""Benchmarks that print ratios side by side in one run. Each kind of `_KINDS` is a module
`cacheproof.bench.KIND` (`cacheproof.bench.engines.KIND` for those of `_AGAINST_ENGINES`) with
`add_arguments(parser)` and `run(args) -> int`."""

from __future__ import annotations

import argparse
import importlib

from cacheproof.cmdline.statuses import epilog

_KINDS = {
    "cache": "checker steps per second: spec vs spec, spec vs TensorLRUCache",
    "blocks": "block-table paths against the reference and the memcpy floor",
    "prove": "z3 proof time by number of slots",
    "monitor": "calls per second with and without the runtime monitor",
    "concurrent": "check --threads: scenarios per second, time to find each racy cache",
    "trace": "cost per call of writing and replaying traces, 1e3 to 1e6 calls",
    "block_pool": "pool calls per second: KVBlockPool vs vLLM's real BlockPool",
    "radix": "radix-tree calls per second: TorchRadixCache vs SGLang's real RadixCache",
    "linearizability": "the linearizability search on 8x200, 4x1000 and 8x1000 histories, whole and per key",
    "workers": "check --workers: time to the first bug at 1 and 2 workers",
    "throughput": "checker steps per CPU second against the minimal and the bare loop's, for every spec kind",
}

_AGAINST_ENGINES = ("block_pool", "radix")
"""The kinds that measure a built-in implementation against an engine's own class (bench/engines/)."""

EXIT_STATUSES = {0: "measured (the figures are printed side by side, and in --json)",
                 1: "a measurement's own check failed (a run that should conform did not; each bench says which)"}
EXAMPLE = "cacheproof bench cache --examples 50 --json bench.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, help_text in _KINDS.items():
        sub = kinds.add_parser(kind, help=help_text, description=help_text,
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=epilog(EXIT_STATUSES, f"cacheproof bench {kind} --json bench-{kind}.json"))
        _module(kind).add_arguments(sub)


def run(args: argparse.Namespace) -> int:
    return _module(args.kind).run(args)


def _module(kind: str):
    package = "cacheproof.bench.engines" if kind in _AGAINST_ENGINES else "cacheproof.bench"
    return importlib.import_module(f"{package}.{kind}")
