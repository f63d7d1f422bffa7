"""`cacheproof bench linearizability`: the linearizability search on long histories.

Each history is built so that it is linearizable: one spec runs `threads x calls` calls drawn as
`check --threads` draws them, in one global order; call k is invoked at 10k and returns at
10(k + overlap), so it overlaps the calls of the other threads around it (the threads take turns,
so a thread's own calls never overlap). The search must find an order; the bench prints its time,
the expansions it made, and the same search on a copy whose last outcome is altered (no order
exists; the search must rule every order out or answer "unknown" within its budget).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from cacheproof.check.concurrent.history import Event, History, observe
from cacheproof.check.concurrent.linearizability import _spec_step, check_history
from cacheproof.check.concurrent.scenarios import Scenario, _Drawer
from cacheproof.cmdline.flag_types import any_integer, positive_integer, positive_seconds
from cacheproof.cmdline.output_paths import first_problem
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.progress import summary_table
from cacheproof.contract.keys import SMALL_KEYS
from cacheproof.spec.kinds import new_spec

CAPACITY_BYTES = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", metavar="N", type=positive_integer, nargs="+", default=[4, 8], help="threads per history (default 4 8)")
    parser.add_argument("--calls", metavar="N", type=positive_integer, default=200, help="calls per thread (default 200)")
    parser.add_argument("--overlap", metavar="N", type=positive_integer, default=3, help="calls of other threads each call overlaps on each side (default 3)")
    parser.add_argument("--budget", metavar="SECONDS", type=positive_seconds, default=10.0, help="search budget per history in seconds (default 10)")
    parser.add_argument("--seed", metavar="N", type=any_integer, default=0, help="seed of the drawn calls")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")


def linearizable_history(threads: int, calls: int, overlap: int, seed: int) -> tuple[Scenario, History]:
    """A history of `threads` threads x `calls` calls that one global order explains (module doc)."""
    drawer = _Drawer(random.Random(seed), CAPACITY_BYTES)
    spec = new_spec(CAPACITY_BYTES)
    per_thread: list[list] = [[] for _ in range(threads)]
    events = []
    for position in range(threads * calls):
        thread = position % threads
        call = drawer.draw_call(spec)
        observed = _spec_step(spec, call)
        events.append(Event(thread, len(per_thread[thread]), call, 10 * position, 10 * (position + min(overlap, threads - 1)) + 5, observed))
        per_thread[thread].append(call)
    scenario = Scenario(CAPACITY_BYTES, (), tuple(tuple(c) for c in per_thread))
    return scenario, History((), tuple(events), observe(spec, SMALL_KEYS))


def _altered(history: History) -> History:
    """The same history with the last call's outcome replaced by another call's different outcome."""
    events = list(history.events)
    last = events[-1]
    other = next(e.observed for e in reversed(events) if e.observed != last.observed and e.call.op != last.call.op)
    events[-1] = last._replace(observed=other)
    return History(history.prefix, tuple(events), history.final)


def measure(threads: int, calls: int, overlap: int, budget: float, seed: int) -> dict:
    scenario, history = linearizable_history(threads, calls, overlap, seed)
    started = time.perf_counter()
    verdict = check_history(scenario, history, budget_seconds=budget)
    found = time.perf_counter() - started
    started = time.perf_counter()
    refuted = check_history(scenario, _altered(history), budget_seconds=budget)
    refuting = time.perf_counter() - started
    word = {True: "linearizable", False: "not linearizable", None: "unknown"}
    return {
        "threads": threads, "calls_per_thread": calls,
        "linearizable_seconds": round(found, 3), "linearizable_verdict": word[verdict.ok],
        "altered_seconds": round(refuting, 3), "altered_verdict": word[refuted.ok],
    }


def run(args: argparse.Namespace) -> int:
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"cacheproof bench: {problem}")
        return 2
    rows = [measure(threads, args.calls, args.overlap, args.budget, args.seed) for threads in args.threads]
    summary_table(
        f"linearizability search: {args.calls} calls per thread, each overlapping {args.overlap} on each side",
        {f"{r['threads']} threads x {r['calls_per_thread']} calls": (
            f"{r['linearizable_verdict']} in {r['linearizable_seconds']:.3f} s; last outcome altered: "
            f"{r['altered_verdict']} in {r['altered_seconds']:.3f} s") for r in rows},
    )
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "linearizability", "figures": {"linearizability": rows}})
    return 0 if all(r["linearizable_verdict"] == "linearizable" and r["altered_verdict"] != "linearizable" for r in rows) else 1
