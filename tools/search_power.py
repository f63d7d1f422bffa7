"""Search power: on how many seeds a default `cacheproof check` finds each broken cache of
model_tests, and how long it takes to report (issue 27). A developer tool, like tools/mutate.py:
the broken caches live in model_tests, which the installed package never imports.

    python tools/search_power.py [--mode count|budget] [--seeds N] [--first-seed K] [--only NAME ...]
                                 [--workers N] [--thorough] [--json PATH]
    python tools/search_power.py --from RUNS.json [RUNS.json ...]   (the table of saved runs)

Each run is `cacheproof check --impl TARGET --seed S --max-divergences 1` (plus the target's own
flags: its profile, `--spec blocks`), made in-process through the command line's `main`, so a
change to the checker's defaults is measured as it ships. A default run has two forms
(cacheproof/cmdline/budget.py), and `--mode` picks one (`MODES`): `count`, the fixed count of
examples a run under CI makes (`--budget 0`: reproducible, the issue's yardstick, the default),
`budget`, the time budget an interactive run searches for, or `long-budget`, the same search with a
budget no loaded machine spends (its CPU seconds against the default budget measure the interactive
default where the machine's load would cut it short). "Time to report" is the wall
time of that call: the search, the shrinking and the report, without the interpreter's start; the
table gives it as CPU seconds of the process (the machine is shared: wall time there measures the
neighbours too), beside the report's own `first_failure_seconds` (wall), the search alone. A
target is found on a seed when the run exits 1. The environment's CI, CACHEPROOF_BUDGET and
CACHEPROOF_DATABASE are set aside for each run (`_run_environment`): the mode alone decides the
budget, and no example database is read or written, so every seed searches from scratch.

The targets (`targets()`): every broken cache of model_tests/broken_caches.py,
broken_sharing_caches.py and broken_profile_caches.py (each under its profile), and every broken
pool of block_pools.py and broken_sharing_pools.py (`--spec blocks`; null_block_pools.py's under
`--profile vllm-block-pool`). With `--thorough`, also
broken_scope_caches.py under `--thorough`: a default run is not meant to find those (docs/scope.md;
model_tests/test_scope.py holds the small scope to missing them). Left out: racy_caches.py (a race
needs `--threads`), faulty_caches.py and ExitsOnDoubleFreePool (hangs and crashes, which
`--isolate` reports: robustness, not search), vllm_broken_pools.py (needs the engines' venv) and
engine_stand_ins.py (the engines' own classes, model_tests/test_engines_stand_ins.py).

Exit 0 when every target is found on every seed, 1 when one is missed on some seed, 2 on a usage
error (an unknown --only name) or a run without a verdict (a usage error, or `main` raised).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from cacheproof.cmdline.output_paths import first_problem, write_atomically
from cacheproof.spec.blocks.operations import POOL_OPERATIONS

DEFAULT_SEEDS = 10
LONG_BUDGET_SECONDS = 600
MODES = {"count": ("--budget", "0"), "budget": (), "long-budget": ("--budget", str(LONG_BUDGET_SECONDS))}
"""The flags of each form of the default run: a fixed count of examples, the interactive time budget,
or the interactive search with a budget no loaded machine runs out of (the same programs in the same
order: its CPU seconds say whether the default budget would have been enough on an idle machine)."""
DEFAULT_MODE = "count"
SET_ASIDE = ("CI", "CACHEPROOF_BUDGET", "CACHEPROOF_DATABASE")
"""Environment variables that would change a default run: each run is made without them."""
FOUND_STATUS = 1
RAISED_STATUS = -1
"""The status of a run whose `main` raised instead of returning one (a bug of the checker or a
file changed under it): recorded with its error, and the measure goes on."""

PROFILE_CACHES = {
    "PutEvictsItselfCache": "trtllm-tensor-lru",
    "OversizedSetEvictsAllCache": "plain-lru",
    "GetRefreshesCache": "plain-lru",
    "same_request_twice": "vllm-encoder-cache",
}
"""model_tests/broken_profile_caches.py's factories and the profile each breaks."""

NULL_BLOCK_POOLS = ("NullPinningPool",)
"""model_tests/null_block_pools.py's broken pools, checked under vllm-block-pool (where the null
block is a valid argument), on its operations but the partial entries, which these list pools do
not have (`NULL_BLOCK_OPS`)."""
NULL_BLOCK_OPS = ",".join(POOL_OPERATIONS)


@dataclass(frozen=True)
class Target:
    """A broken cache or pool: its `--impl` and the further flags its default run needs."""

    impl: str
    flags: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.impl.removeprefix("model_tests.")

    @property
    def factory_name(self) -> str:
        return self.impl.rpartition(":")[2]


@dataclass(frozen=True)
class Run:
    """One default run of `target` from `seed`: its exit status, wall and CPU seconds and, when it
    found the bug, the seconds to the first failure (as its report gives them) and the length of
    the shrunk counterexample."""

    target: str
    seed: int
    status: int
    seconds: float
    cpu_seconds: float
    first_failure_seconds: float | None
    calls: int | None
    error: str | None = None  # what `main` raised (status RAISED_STATUS)

    @property
    def found(self) -> bool:
        return self.status == FOUND_STATUS


@dataclass(frozen=True)
class Row:
    """One line of the table: a target's runs over the seeds."""

    target: str
    runs: tuple[Run, ...]

    @property
    def found(self) -> int:
        return sum(run.found for run in self.runs)

    @property
    def missed_seeds(self) -> tuple[int, ...]:
        return tuple(run.seed for run in self.runs if not run.found)

    @property
    def report_seconds(self) -> tuple[float, ...]:
        """The times to report (CPU seconds) of the runs that found the bug."""
        return tuple(run.cpu_seconds for run in self.runs if run.found)

    @property
    def first_failure_seconds(self) -> tuple[float, ...]:
        """The seconds to the first failure of the runs that found the bug and say so."""
        return tuple(run.first_failure_seconds for run in self.runs
                     if run.found and run.first_failure_seconds is not None)

    @property
    def errors(self) -> tuple[int, ...]:
        """The seeds whose run ended neither in a counterexample nor in "conforms" (a usage error,
        or `main` raised)."""
        return tuple(run.seed for run in self.runs if run.status not in (0, FOUND_STATUS))


def _module_targets(module: str, names: list[str], flags: tuple[str, ...] = ()) -> list[Target]:
    return [Target(f"model_tests.{module}:{name}", flags) for name in names]


def targets(thorough: bool = False) -> list[Target]:
    """Every target of a default run (see the module docstring), and with `thorough` the broken
    scope caches under `--thorough`."""
    from model_tests import block_pools, broken_caches, broken_scope_caches, broken_sharing_caches
    from model_tests import broken_sharing_pools

    def names(classes) -> list[str]:
        return [cls.__name__ for cls in classes]

    chosen = [
        *_module_targets("broken_caches", names(broken_caches.BROKEN_CACHES)),
        *_module_targets("broken_sharing_caches", names(broken_sharing_caches.BROKEN_SHARING_CACHES)),
        *(Target(f"model_tests.broken_profile_caches:{name}", ("--profile", profile))
          for name, profile in PROFILE_CACHES.items()),
        *_module_targets("block_pools", names(block_pools.BROKEN_POOLS), ("--spec", "blocks")),
        *_module_targets("broken_sharing_pools", names(broken_sharing_pools.BROKEN_SHARING_POOLS), ("--spec", "blocks")),
        *(Target(f"model_tests.null_block_pools:{name}",
                 ("--spec", "blocks", "--profile", "vllm-block-pool", "--ops", NULL_BLOCK_OPS))
          for name in NULL_BLOCK_POOLS),
    ]
    if thorough:
        chosen += _module_targets("broken_scope_caches", names(broken_scope_caches.BROKEN_SCOPE_CACHES), ("--thorough",))
    return chosen


def check_arguments(target: Target, seed: int, json_path: Path, mode: str = DEFAULT_MODE) -> list[str]:
    """The `cacheproof check` arguments of `target`'s default run from `seed` in `mode` (a
    `--thorough` target keeps its own counts whatever the mode)."""
    mode_flags = () if "--thorough" in target.flags else MODES[mode]
    return ["check", "--impl", target.impl, "--seed", str(seed), "--max-divergences", "1", "--quiet",
            "--json", str(json_path), *mode_flags, *target.flags]


def run_once(target: Target, seed: int, mode: str = DEFAULT_MODE) -> Run:
    """`target`'s default run from `seed` in `mode`, in this process; its printing is swallowed."""
    from cacheproof.cli import main

    with tempfile.TemporaryDirectory() as scratch, _run_environment():
        json_path = Path(scratch) / "report.json"
        swallowed = io.StringIO()
        started, cpu_started = time.perf_counter(), time.process_time()
        error = None
        with contextlib.redirect_stdout(swallowed), contextlib.redirect_stderr(swallowed):
            try:
                status = main(check_arguments(target, seed, json_path, mode))
            except Exception as raised:  # noqa: BLE001  (recorded: one broken run must not end the measure)
                status, error = RAISED_STATUS, f"{type(raised).__name__}: {raised}"
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        report = json.loads(json_path.read_text()) if json_path.exists() else {}
    examples = report.get("divergences") or report.get("counterexamples") or []
    calls = len(examples[0]["calls"]) if status == FOUND_STATUS and examples else None
    first = report.get("first_failure_seconds", report.get("seconds_to_failure"))
    return Run(target.name, seed, status, round(seconds, 2), round(cpu_seconds, 2), first, calls, error)


@contextlib.contextmanager
def _run_environment():
    """The environment without the SET_ASIDE variables for the span of one run."""
    saved = {name: os.environ.pop(name) for name in SET_ASIDE if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _run_job(job: tuple[Target, int, str]) -> Run:
    return run_once(*job)


def measure(chosen: list[Target], seeds: range, workers: int = 1, progress=None, mode: str = DEFAULT_MODE) -> list[Row]:
    """Every target's default run in `mode` from each of `seeds`, in `workers` processes (1: this
    one); `progress(run)` is told each run as it ends."""
    jobs = [(target, seed, mode) for target in chosen for seed in seeds]
    runs: list[Run] = []
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for future in as_completed([pool.submit(_run_job, job) for job in jobs]):
                runs.append(future.result())
                if progress is not None:
                    progress(runs[-1])
    else:
        for job in jobs:
            runs.append(_run_job(job))
            if progress is not None:
                progress(runs[-1])
    return rows_of(runs)


def rows_of(runs: list[Run]) -> list[Row]:
    """The runs grouped by target (in the order the targets first appear), each by seed."""
    names = dict.fromkeys(run.target for run in runs)
    return [Row(name, tuple(sorted((run for run in runs if run.target == name), key=lambda run: run.seed)))
            for name in names]


def _print_progress(run: Run) -> None:
    verdict = (f"found, reported after {run.cpu_seconds:.1f} CPU s ({run.calls} calls)" if run.found
               else f"status {run.status} after {run.cpu_seconds:.1f} CPU s{f' ({run.error})' if run.error else ''}")
    print(f"{run.target} seed {run.seed}: {verdict}", file=sys.stderr, flush=True)


def _seconds(values: tuple[float, ...], pick) -> str:
    return f"{pick(values):.1f}" if values else "-"


def format_table(rows: list[Row]) -> str:
    """The table as Markdown: found/seeds; over the seeds that found it, the slowest and median
    seconds to the first failure (wall) and to the report (CPU); the seeds that missed; the shortest
    counterexample reported."""
    lines = [
        "| target | found | first failure, slowest / median (s) | report, slowest / median (CPU s) "
        "| missed seeds | shortest counterexample |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        missed = ", ".join(map(str, row.missed_seeds)) or "-"
        if row.errors:
            missed += f" (no verdict on {', '.join(map(str, row.errors))})"
        lengths = [run.calls for run in row.runs if run.calls is not None]
        shortest = "-" if not lengths else f"{min(lengths)} call{'s' if min(lengths) > 1 else ''}"
        first, report = row.first_failure_seconds, row.report_seconds
        lines.append(f"| {row.target} | {row.found}/{len(row.runs)} "
                     f"| {_seconds(first, max)} / {_seconds(first, statistics.median)} "
                     f"| {_seconds(report, max)} / {_seconds(report, statistics.median)} | {missed} | {shortest} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    always = sum(row.found == len(row.runs) for row in rows)
    return f"{always} of {len(rows)} targets found on every seed"


def select(chosen: list[Target], only: list[str]) -> list[Target]:
    """The targets named in `only` (a factory name, or module:factory as the table shows it)."""
    picked = [target for target in chosen if target.name in only or target.factory_name in only]
    unknown = [name for name in only if all(name not in (t.name, t.factory_name) for t in chosen)]
    if unknown:
        raise ValueError(f"--only {', '.join(unknown)}: not a target; the targets are "
                         f"{', '.join(t.factory_name for t in chosen)}")
    return picked


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=MODES, default=DEFAULT_MODE,
                        help=f"count: the fixed count of examples (--budget 0); budget: the interactive time budget "
                        f"(default {DEFAULT_MODE})")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"seeds per target (default {DEFAULT_SEEDS})")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0): seeds K..K+N-1")
    parser.add_argument("--from", dest="saved", nargs="+", type=Path, default=[], metavar="RUNS.json",
                        help="print the table of runs saved by --json (several files: their runs together)")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME", help="measure only these targets")
    parser.add_argument("--workers", type=int, default=1, help="processes to run the runs in (default 1)")
    parser.add_argument("--thorough", action="store_true", help="the broken scope caches too, under --thorough")
    parser.add_argument("--json", type=Path, help="write every run as JSON to this path")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python tools/search_power.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    for flag in ("seeds", "workers"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_arguments(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    problem = first_problem({"--json": args.json})
    if problem is not None:
        print(f"search_power: {problem}", file=sys.stderr)
        return 2
    if args.saved:
        return _saved_table(args.saved)
    chosen = targets(args.thorough)
    if args.only:
        try:
            chosen = select(targets(thorough=True), args.only)
        except ValueError as error:
            print(f"search_power: {error}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    done: list[Run] = []

    def progress(run: Run) -> None:
        _print_progress(run)
        done.append(run)
        if args.json is not None:  # after every run: a measure stopped midway keeps what it measured
            write_atomically(args.json, json.dumps([asdict(each) for each in done], indent=2) + "\n")

    rows = measure(chosen, seeds, args.workers, progress, args.mode)
    mode_flags = " ".join(MODES[args.mode])
    print(f"search power, {date.today().isoformat()}: `cacheproof check --seed S --max-divergences 1"
          f"{' ' + mode_flags if mode_flags else ''}` per target ({args.mode} mode), seeds {seeds.start}..{seeds.stop - 1}, "
          f"{args.workers} worker(s){'; --thorough targets keep their own counts' if any('--thorough' in t.flags for t in chosen) else ''}, "
          f"{time.perf_counter() - started:.0f} s in all")
    print(format_table(rows))
    print(summary(rows))
    if any(row.errors for row in rows):
        return 2
    return 0 if all(row.found == len(row.runs) for row in rows) else 1


def _saved_table(paths: list[Path]) -> int:
    try:
        runs = [Run(**fields) for path in paths for fields in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError) as error:
        print(f"search_power: --from: {error}", file=sys.stderr)
        return 2
    rows = rows_of(runs)
    print(format_table(rows))
    print(summary(rows))
    return 0 if all(row.found == len(row.runs) for row in rows) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # model_tests, as from the repository's root
    sys.exit(main())
