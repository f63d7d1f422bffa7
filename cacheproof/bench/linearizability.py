"""`cacheproof bench linearizability`: the linearizability search on long histories.

Each history is built so that it is linearizable: one tensor cache spec runs `threads x calls` calls
drawn as `check --threads` draws them (the kind's call generator), in one global order; call k is invoked at 10k and returns at
10(k + overlap), so it overlaps the calls of the other threads around it (the threads take turns,
so a thread's own calls never overlap). Two caches per size:
- "evicting": 64 bytes, every operation drawn (evict and clear too), so room runs short and the
  history is searched whole;
- "per key": room for every key's largest entry, evict and clear not drawn, so the cache kind's
  partitioning splits the history per key (`SpecKind.parts`) and each key is searched alone.
The search must find an order; the bench prints its time (CPU seconds of this process, and wall
seconds), and the same search on a copy whose last outcome is altered (no order exists: it must rule every order out, with a witness, or answer
"unknown" past its budget).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from cacheproof.check.concurrent.history import Event, History
from cacheproof.check.concurrent.linearizability import DEFAULT_SEARCH_SECONDS, check_history
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.check.programs.generators import generator_for
from cacheproof.cmdline.flag_types import any_integer, positive_integer, positive_seconds
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.contract.keys import SMALL_KEYS
from cacheproof.contract.steps import StepOutcome, outcome_of, view_of
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import get_kind

CACHE = get_kind("cache")

CAPACITY_BYTES = 64
"""The evicting cache's capacity, and the largest size drawn for either cache."""

ROOMY_BYTES = len(SMALL_KEYS) * (CAPACITY_BYTES + 1)
"""The per-key cache's capacity: every key's largest entry at once (a commit may pass one byte more)."""

CACHES = {
    "evicting": (CAPACITY_BYTES, ALL_OPERATIONS),
    "per key": (ROOMY_BYTES, tuple(name for name in ALL_OPERATIONS if name not in ("evict", "clear"))),
}
"""Each cache the bench builds histories for: (capacity, operations drawn)."""

DEFAULT_SIZES = ("8x200", "4x1000", "8x1000")


def history_size(text: str) -> tuple[int, int]:
    """THREADSxCALLS, e.g. 8x200: both positive integers."""
    threads, separator, calls = text.partition("x")
    try:
        size = (positive_integer(threads), positive_integer(calls))
    except (argparse.ArgumentTypeError, ValueError):
        size = None
    if not separator or size is None:
        raise argparse.ArgumentTypeError(f"must be THREADSxCALLS with integers >= 1 (e.g. 8x200), got {text!r}")
    return size


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", metavar="THREADSxCALLS", type=history_size, nargs="+",
                        default=[history_size(s) for s in DEFAULT_SIZES],
                        help=f"history sizes, threads x calls per thread (default {' '.join(DEFAULT_SIZES)})")
    parser.add_argument("--overlap", metavar="N", type=positive_integer, default=3, help="calls of other threads each call overlaps on each side (default 3)")
    parser.add_argument("--budget", metavar="SECONDS", type=positive_seconds, default=DEFAULT_SEARCH_SECONDS,
                        help=f"search budget per history in wall seconds (default {DEFAULT_SEARCH_SECONDS:g}, check --threads's)")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="seed of the drawn calls")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")


def linearizable_history(threads: int, calls: int, overlap: int, seed: int, cache: str = "evicting") -> tuple[Scenario, History]:
    """A history of `threads` threads x `calls` calls on `cache` (of `CACHES`) that one global
    order explains (module doc)."""
    if cache not in CACHES:
        raise InvalidArgumentError(f"cache {cache!r}: the bench builds histories for {', '.join(CACHES)}")
    capacity, operations = CACHES[cache]
    rng = random.Random(seed)
    generator = generator_for(CACHE.name)
    generator.size(rng)
    generator.keys = SMALL_KEYS  # every key of the small scope, as the per-key parts need several
    spec = CACHE.new(capacity)
    sized = _SizedAt(spec, CAPACITY_BYTES)
    per_thread: list[list] = [[] for _ in range(threads)]
    events = []
    for position in range(threads * calls):
        thread = position % threads
        call = generator.draw_call(rng, sized, operations, False)
        outcome = outcome_of(spec, call, CACHE.error_names)
        events.append(Event(thread, len(per_thread[thread]), call, 10 * position,
                            10 * (position + min(overlap, threads - 1)) + 5, outcome))
        per_thread[thread].append(call)
    scenario = Scenario(capacity, (), tuple(tuple(c) for c in per_thread))
    final = {view: view_of(spec, view, CACHE.view_readers, spec) for view in CACHE.views}
    return scenario, History((), tuple(events), final, values={recipe: recipe.value(spec) for recipe in scenario.recipes()})


class _SizedAt:
    """The spec as the generator reads it, with sizes drawn up to `capacity_bytes` whatever its own
    capacity (the per-key cache has room for every key's largest entry)."""

    def __init__(self, spec: object, capacity_bytes: int) -> None:
        self._spec, self.capacity_bytes = spec, capacity_bytes

    def __getattr__(self, name: str) -> object:
        return getattr(self._spec, name)


def altered(history: History) -> History:
    """The same history with the last call's outcome replaced by another operation's different
    outcome, or, in a history too short to have one, by a result no operation of the spec returns."""
    events = list(history.events)
    last = events[-1]
    other = next((e.outcome for e in reversed(events) if e.outcome.describe() != last.outcome.describe() and e.call.op != last.call.op),
                 StepOutcome(result="an outcome the spec never gives"))
    events[-1] = last._replace(outcome=other)
    return History(history.prefix, tuple(events), history.final, values=history.values)


def parts_of(scenario: Scenario, history: History) -> int:
    """How many parts the cache kind splits the history into (1: searched whole)."""
    parts = CACHE.parts(scenario.new_model(CACHE), [(e.call.op, e.call.args) for e in history.events])
    return 1 if parts is None else len(parts)


_WORDS = {True: "linearizable", False: "not linearizable", None: "unknown"}


def measure(threads: int, calls: int, overlap: int, budget: float, seed: int, cache: str) -> dict:
    """One row: the history's verdict and time, and the altered copy's."""
    scenario, history = linearizable_history(threads, calls, overlap, seed, cache)
    row = {"threads": threads, "calls_per_thread": calls, "cache": cache, "parts": parts_of(scenario, history)}
    for name, case in (("linearizable", history), ("altered", altered(history))):
        started, cpu = time.perf_counter(), time.process_time()
        verdict = check_history(CACHE, scenario, case, budget_seconds=budget)
        row[f"{name}_seconds"] = round(time.perf_counter() - started, 3)
        row[f"{name}_cpu_seconds"] = round(time.process_time() - cpu, 3)
        row[f"{name}_verdict"] = _WORDS[verdict.ok]
        if name == "altered":
            row["altered_witness"] = _elided(verdict.reason) if verdict.ok is False else ""
    return row


WITNESS_CHARACTERS = 1200
"""How much of a refutation's reason a row keeps: its start and its end (the call nothing explains);
the longest explained order of a long history runs to hundreds of kilobytes."""


def _elided(reason: str) -> str:
    if len(reason) <= WITNESS_CHARACTERS:
        return reason
    half = WITNESS_CHARACTERS // 2
    return f"{reason[:half]} [... {len(reason) - 2 * half} characters ...] {reason[-half:]}"


def _as_line(row: dict) -> str:
    return (f"{row['linearizable_verdict']} in {row['linearizable_cpu_seconds']:.3f} s CPU "
            f"({row['linearizable_seconds']:.3f} s wall); last outcome altered: {row['altered_verdict']} in "
            f"{row['altered_cpu_seconds']:.3f} s CPU ({row['altered_seconds']:.3f} s wall)")


def run(args: argparse.Namespace) -> int:
    if refuse_unwritable("bench linearizability", {"--json": args.json}):
        return 2
    rows = [measure(threads, calls, args.overlap, args.budget, args.seed, cache)
            for threads, calls in args.sizes for cache in CACHES]
    summary_table(
        f"linearizability search: each call overlapping {args.overlap} on each side, budget {args.budget:g} s",
        {f"{r['threads']} threads x {r['calls_per_thread']} calls, {r['cache']} ({r['parts']} part{'s' * (r['parts'] != 1)})":
         _as_line(r) for r in rows},
    )
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "linearizability", "figures": {"linearizability": rows}})
    return 0 if all(r["linearizable_verdict"] == "linearizable" and r["altered_verdict"] != "linearizable" for r in rows) else 1
