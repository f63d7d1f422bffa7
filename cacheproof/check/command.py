"""`cacheproof check`: hold an implementation to its spec kind's contract. Exit 0 conforms, 1
counterexample, 2 usage error, 130 interrupted by Ctrl-C (docs/robustness.md).

The flags, and the refusals that need no implementation, are here; every kind's check then runs the
one program pipeline (`cacheproof.check.programs.command`: random programs, --threads, --workers),
or its exhaustive search (`programs.exhaustive_command`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cacheproof.check.concurrent.command import thread_count
from cacheproof.check.concurrent.run import DEFAULT_RUNS
from cacheproof.check.programs import command as program_command
from cacheproof.check.programs import exhaustive_command
from cacheproof.check.programs.command import DEFAULT_IMPLS, default_impl_refusal
from cacheproof.check.programs.generators import exhaustive_scopes
from cacheproof.check.programs.run import DEFAULT_EXAMPLES
from cacheproof.cmdline.budget import BUDGET_VARIABLE, DEFAULT_BUDGET_SECONDS, max_divergences_help
from cacheproof.cmdline.budget import resolve_budget, resolve_max_divergences
from cacheproof.cmdline.databases import add_database_arguments
from cacheproof.cmdline.flag_types import any_integer, non_negative_seconds, positive_integer, positive_seconds
from cacheproof.cmdline.kind_words import every_kind, key_domain_problem, key_domains, per_kind
from cacheproof.contract.values import MAX_VALUE_BYTES, REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import DEFAULT_IMPL
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names

DEFAULT_STEPS_PER_EXAMPLE = 100
"""Calls per program, at most, without --steps (every kind)."""

EXIT_STATUSES = {0: "the cache conforms (under --threads: every history tried is linearizable)",
                 1: "a counterexample: printed with a runnable snippet, and in --json"}
EXAMPLE = ("cacheproof check --impl mypackage.cache:make_cache --examples 500 --seed 3 --json report.json\n"
           "cacheproof check --spec blocks --impl mypackage.pool:make_pool --threads 3")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", default=DEFAULT_KIND, choices=kind_names(),
                        help=f"the spec kind to check against (default {DEFAULT_KIND}): "
                        f"{per_kind(lambda kind: kind.summary)}")
    parser.add_argument("--impl", metavar="MODULE:FACTORY", default=DEFAULT_IMPL,
                        help="MODULE:FACTORY of the implementation; default "
                        f"{per_kind(lambda kind: DEFAULT_IMPLS.get(kind.name, 'none, --impl is required'))}")
    parser.add_argument("--examples", metavar="N", type=positive_integer,
                        help=f"run exactly N programs (call sequences) instead of a time budget (default "
                        f"{DEFAULT_EXAMPLES} under CI=true or with --budget 0); with --threads, scenarios")
    parser.add_argument("--budget", metavar="SECONDS", type=non_negative_seconds,
                        help=f"search for SECONDS (default {DEFAULT_BUDGET_SECONDS:g}, or ${BUDGET_VARIABLE}; "
                        "0: no budget); a counterexample ends it at once (docs/search-power.md)")
    parser.add_argument("--steps", metavar="N", type=positive_integer, default=DEFAULT_STEPS_PER_EXAMPLE,
                        help=f"calls per sequence, at most (default {DEFAULT_STEPS_PER_EXAMPLE})")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="random seed (same seed, same run; default 0)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the report as JSON to this path (docs/reports.md)")
    parser.add_argument("--trace-out", metavar="PATH", type=Path, help="write the shrunk counterexample as a trace (JSON lines)")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict line, without the table and the snippet")
    parser.add_argument("--isolate", action="store_true",
                        help="run the cache in a child process: crashes and hangs become counterexamples")
    parser.add_argument("--call-timeout", type=positive_seconds, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                        help=f"a call not returning within SECONDS is a counterexample (default {DEFAULT_CALL_TIMEOUT:g})")
    parser.add_argument("--threads", metavar="N", type=thread_count, help="check linearizability under N threads (2-4); "
                        "--examples counts scenarios (docs/concurrency.md)")
    parser.add_argument("--profile", metavar="NAME",
                        help="semantics of a shipped implementation, per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.profiles))} (default: the kind's "
                        f"{' or '.join(dict.fromkeys(kind.default_profile for kind in every_kind()))}, a cache "
                        "factory's own `profile` first; `cacheproof profiles` lists them)")
    parser.add_argument("--semantics", default="", metavar="FIELD=VALUE,...",
                        help="override fields of the profile's semantics (docs/profiles.md)")
    parser.add_argument("--ops", metavar="OP,...",
                        help="check only these operations (default: the profile's), per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.names))}")
    parser.add_argument("--no-bad-arguments", action="store_true", help="make no calls with bad arguments")
    parser.add_argument("--max-divergences", type=positive_integer, metavar="N", help=max_divergences_help())
    parser.add_argument("--runs", metavar="N", type=positive_integer, default=DEFAULT_RUNS, help=f"with --threads: runs per scenario (default {DEFAULT_RUNS})")
    parser.add_argument("--thorough", action="store_true",
                        help="the kind's wide scopes too (the tensor cache: up to 16 keys of mixed types, capacities "
                        "to 2**41, lives of 500-2,000 calls; the block pool: pools to 512 blocks, 8 requests, "
                        "token runs of 24, lives of 1,000 calls); about two minutes (docs/scope.md); sets its own "
                        "--examples and --steps")
    parser.add_argument("--keys", choices=key_domains(), metavar="|".join(key_domains()),
                        help="the key domain calls draw keys from, per kind: "
                        f"{per_kind(lambda kind: ', '.join(kind.key_domains) + ' (' + kind.keys_are + ')')}. "
                        "The tensor cache's: int (0..5), str (hash strings such as engines "
                        "key by), bytes, tuple ((request, position) pairs), mixed (1, \"1\", b\"1\", (1,) ...); "
                        "default: the profile's, else int, and under --thorough mixed in the wide scopes "
                        "(docs/scope.md)")
    parser.add_argument("--max-capacity", type=value_capacity, metavar="BYTES",
                        help=f"with --thorough, the capacity cap for a cache whose values hold memory (default "
                        f"{REAL_VALUE_CAPACITY}, at most {MAX_VALUE_BYTES})")
    parser.add_argument("--workers", type=positive_integer, metavar="N",
                        help="search with N processes on seeds SEED..SEED+N-1, --examples divided among them; the "
                        "first failure stops the others; every kind (default 1; docs/scale.md); with --exhaustive, "
                        "each level's states are split among them")
    parser.add_argument("--exhaustive", action="store_true",
                        help="search every state of the kind's declared small scope breadth first, every call from "
                        "every state, instead of random programs: no divergence within the scope, or the shortest "
                        "counterexample; --budget bounds it, --workers splits each level (docs/exhaustive.md)")
    parser.add_argument("--depth", type=positive_integer, metavar="D",
                        help="with --exhaustive: calls per path at most (default: the scope's, docs/exhaustive.md)")
    parser.add_argument("--scope", metavar="NAME",
                        help="with --exhaustive: the scope searched, per kind: "
                        f"{per_kind(lambda kind: ', '.join(exhaustive_scopes(kind.name)))} (default: the first)")
    add_database_arguments(parser)


def run(args: argparse.Namespace) -> int:
    refused = default_impl_refusal(args) or exhaustive_command.refusal(args, DEFAULT_STEPS_PER_EXAMPLE)
    if refused is not None:
        print(f"cacheproof check: {refused}", file=sys.stderr)
        return 2
    if args.exhaustive:
        return exhaustive_command.run(args)
    thorough_examples = args.examples is not None
    try:
        resolve_budget(args, DEFAULT_EXAMPLES)
        resolve_max_divergences(args)
    except ValueError as error:
        print(f"cacheproof check: {error}", file=sys.stderr)
        return 2
    if args.threads is not None and (args.workers is not None or args.database or args.database_read_only):
        print("cacheproof check: --workers and --database are for sequential checks; not with --threads", file=sys.stderr)
        return 2
    problem = key_domain_problem(get_kind(args.spec), args.keys)
    if problem is not None:
        print(f"cacheproof check: {problem}", file=sys.stderr)
        return 2
    if args.thorough and (args.threads is not None or thorough_examples or args.budget is not None
                          or args.steps != DEFAULT_STEPS_PER_EXAMPLE):
        print("cacheproof check: --thorough sets its own budget; drop --examples, --budget, --steps and --threads",
              file=sys.stderr)
        return 2
    return program_command.run(args)  # its factory's profile, else the built object's, else the kind's default


def value_capacity(text: str) -> int:
    """An argparse type: a capacity cap of 1..MAX_VALUE_BYTES bytes (no value ever holds more)."""
    number = positive_integer(text)
    if number > MAX_VALUE_BYTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_VALUE_BYTES} bytes (64 MiB), got {text!r}")
    return number
