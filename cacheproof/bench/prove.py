"""`cacheproof bench prove`: seconds of the per-entry proof by number of slots, the aggregate proofs'
total and the bounded refinement check, the row of `cacheproof prove --slots 32` as the command
runs it (`--command-slots`: every obligation, the refinement check beside them), then every proof
and the refinement check under each named profile (`--profiles`, at `--profile-slots`), in one
run. Solver seconds are z3's own; wall seconds add building the formulas; CPU seconds are this
process's own (and its child's in the command row; on a loaded machine wall grows, CPU does not)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cacheproof.cmdline.flag_types import positive_integer
from cacheproof.cmdline.output_paths import refuse_unwritable
from cacheproof.cmdline.reports import write_report
from cacheproof.spec.cache.profiles import PROFILES
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

DEFAULT_SLOTS = (4, 8, 16, 32, 64)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--slots", metavar="N", type=positive_integer, nargs="+", default=list(DEFAULT_SLOTS), help="slot counts (default 4 8 16 32 64)"
    )
    parser.add_argument(
        "--profiles",
        nargs="*",
        choices=list(PROFILES),
        default=list(PROFILES),
        metavar="NAME",
        help=f"profiles to prove under, each a row (default all: {', '.join(PROFILES)}; none: leave out)",
    )
    parser.add_argument(
        "--profile-slots", metavar="N", type=positive_integer, default=8, help="slots of the per-entry model in the profile rows (default 8)"
    )
    parser.add_argument(
        "--command-slots", metavar="N", type=positive_integer, default=32,
        help="the row of `cacheproof prove --slots N` as the command runs it, refinement check included (default 32)",
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the rows as JSON to this path")
    parser.add_argument("--quiet", action="store_true", help="print nothing; exit status and --json only")


def run(args: argparse.Namespace) -> int:
    from cacheproof.prove.cache import aggregate_model, entry_model, liveness  # z3 is loaded only to prove
    from cacheproof.prove.command import prove_all

    if refuse_unwritable("bench prove", {"--json": args.json}):
        return 2
    _print(args, f"{'model':<28} {'obligations':>11} {'solver s':>9} {'wall s':>8} {'cpu s':>8}  verdict")
    rows = [_timed("aggregate + liveness", lambda: aggregate_model.prove() + liveness.prove())]
    _print(args, _line(rows[0]))
    rows.append(_refinement_row())
    _print(args, _line(rows[-1]))
    for slots in args.slots:
        rows.append(_timed(f"entries, {slots} slots", lambda slots=slots: entry_model.prove(slots)))
        _print(args, _line(rows[-1]))
    rows.append(_command_row(args.command_slots))
    _print(args, _line(rows[-1]))
    for name in args.profiles:
        semantics = PROFILES[name].semantics
        label = f"{name}, {args.profile_slots} slots"
        rows.append(_timed(label, lambda semantics=semantics: prove_all(args.profile_slots, semantics)))
        _print(args, _line(rows[-1]))
        rows.append(_refinement_row(semantics, f"{name}: refines"))
        _print(args, _line(rows[-1]))
    if args.json is not None:
        write_report(args.json, "bench", {"bench": "prove", "figures": rows})
    return 0 if all(row["failed"] == 0 for row in rows) else 1


def _timed(label: str, prove) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    results = prove()
    return {
        "model": label,
        "obligations": len(results),
        "solver_seconds": round(sum(r.seconds for r in results), 4),
        "wall_seconds": round(time.perf_counter() - wall, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "failed": sum(r.failed for r in results),
        "waived": sum(r.waived is not None for r in results),
    }


def _command_row(slots: int) -> dict:
    """What `cacheproof prove --slots N` does: every obligation, with the refinement check beside
    them (in a child process where there are two CPUs). CPU seconds are this process's and its
    child's; wall is the time the command takes after its start-up."""
    from cacheproof.prove.cache import refinement
    from cacheproof.prove.command import prove_all

    wall, cpu = time.perf_counter(), _cpu_seconds()
    pending = refinement.PendingRefinement(refinement.DEFAULT_BOUND, CONTRACT)
    try:
        results = prove_all(slots)
        report = pending.report()
    finally:
        pending.cancel()
    return {
        "model": f"prove --slots {slots}",
        "obligations": len(results),
        "solver_seconds": round(sum(r.seconds for r in results), 4),
        "wall_seconds": round(time.perf_counter() - wall, 3),
        "cpu_seconds": round(_cpu_seconds() - cpu, 3),
        "failed": sum(r.failed for r in results) + report.disagreeing_calls,
        "waived": 0,
        "refinement_calls": report.calls,
    }


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _refinement_row(semantics: Semantics = CONTRACT, label: str = "spec refines model") -> dict:
    from cacheproof.prove.cache import refinement

    """The refinement check over the default bound: its calls count as its obligations."""
    wall, cpu = time.perf_counter(), time.process_time()
    report = refinement.check_refinement(semantics=semantics)
    return {
        "model": label,
        "refinement": True,
        "obligations": report.calls,
        "solver_seconds": 0.0,
        "wall_seconds": round(time.perf_counter() - wall, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "failed": report.disagreeing_calls,
        "states": report.states,
        "bound": report.bound.describe(),
    }


def _line(row: dict) -> str:
    if row["failed"]:
        verdict = f"{row['failed']} FAILED"
    elif row.get("refinement"):
        verdict = "agree"
    else:
        verdict = "all proved" + (f", {row['waived']} do not hold as waived" if row.get("waived") else "")
    return (
        f"{row['model']:<28} {row['obligations']:>11} {row['solver_seconds']:>9.3f} "
        f"{row['wall_seconds']:>8.2f} {row['cpu_seconds']:>8.2f}  {verdict}"
    )


def _print(args: argparse.Namespace, line: str) -> None:
    if not args.quiet:
        print(line, flush=True)
