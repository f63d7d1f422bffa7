"""`cacheproof mutate`: mutants of an installed module's source, each run by `cacheproof check` on a
factory and, when given, by the user's test command; the table of who kills what. Exit 0 when
cacheproof kills every mutant the tests kill (without --tests: every mutant run), 1 when not,
2 usage error (or a side that fails on the unmutated module), 130 interrupted by Ctrl-C or SIGTERM (results so far kept, every child process ended).
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from cacheproof.cmdline.flag_types import non_negative_seconds, positive_integer, positive_seconds
from cacheproof.cmdline.interrupts import last_words, terminate_raises
from cacheproof.cmdline.output_paths import first_problem, write_atomically
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.mutate.duel import Duel, MutantResult, result_line, table_lines
from cacheproof.mutate.install import environment_with, install_folder
from cacheproof.mutate.operators import Mutant, mutants, spread
from cacheproof.mutate.page import render_page
from cacheproof.mutate.sides import ChildProcesses, SideResult
from cacheproof.spec.kinds import DEFAULT_KIND, kind_names

EXIT_STATUSES = {0: "cacheproof kills every mutant the tests kill (without --tests: every mutant run)",
                 1: "a mutant the tests kill (without --tests: any mutant) survives cacheproof; each is shown with its diff",
                 130: "interrupted: the table, --json and --html hold the mutants run so far"}
EXAMPLE = ('cacheproof mutate vllm.v1.core.block_pool --impl cacheproof.engines.vllm:block_pool --spec blocks '
           '--profile vllm-block-pool --tests "python -m pytest -x -q tests/v1/core" --limit 20 --json duel.json')
DEFAULT_EXAMPLES = 200
TIMEOUT_FACTOR = 5.0
"""A side's time limit on a mutant, unless --timeout: this many times its time on the unmutated
module, plus TIMEOUT_MARGIN_S."""
TIMEOUT_MARGIN_S = 30.0


class MutateUsageError(Exception):
    """Bad input for `cacheproof mutate`, said before any mutant runs."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("module", metavar="MODULE", help="the installed module to mutate (dotted name)")
    parser.add_argument("--impl", metavar="MODULE:FACTORY", required=True, help="the factory `cacheproof check` holds to the spec")
    parser.add_argument("--spec", default=DEFAULT_KIND, choices=kind_names(), help=f"the spec kind (default {DEFAULT_KIND})")
    parser.add_argument("--profile", metavar="NAME", help="the semantics profile passed to cacheproof check")
    parser.add_argument("--tests", metavar="COMMAND",
                        help="the test command (run by the shell in this folder; exit 0 means passing); "
                        "it sees the mutant through PYTHONPATH")
    parser.add_argument("--limit", metavar="N", type=positive_integer,
                        help="run N mutants, evenly spread over the module (the same N for the same source)")
    parser.add_argument("--mutants", metavar="N,...", type=_numbers, help="run only these mutant numbers")
    parser.add_argument("--examples", metavar="N", type=positive_integer, default=DEFAULT_EXAMPLES,
                        help=f"programs cacheproof check runs per mutant (default {DEFAULT_EXAMPLES}, seed --seed)")
    parser.add_argument("--budget", metavar="SECONDS", type=non_negative_seconds,
                        help="search each mutant for SECONDS instead of --examples (a time budget: less repeatable)")
    parser.add_argument("--seed", metavar="N", type=int, default=0, help="cacheproof check's seed (default 0)")
    parser.add_argument("--check-args", metavar="ARGS", default="",
                        help='more arguments for cacheproof check, as one string (e.g. "--call-timeout 60")')
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds,
                        help=f"a side's time limit per mutant (default {TIMEOUT_FACTOR:g} x its time on the "
                        f"unmutated module + {TIMEOUT_MARGIN_S:g} s); a mutant that outlives it is killed (timed out)")
    parser.add_argument("--workers", metavar="N", type=positive_integer, default=1, help="mutants run in parallel (default 1)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the report as JSON (docs/reports.md)")
    parser.add_argument("--html", metavar="PATH", type=Path, help="write the report as one HTML page")
    parser.add_argument("--quiet", action="store_true", help="no progress lines and no diffs: the table and the verdict")


def _numbers(text: str) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--mutants takes mutant numbers separated by commas, got {text!r}") from None
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"--mutants takes mutant numbers from 1, got {text!r}")
    return numbers


def run(args: argparse.Namespace) -> int:
    try:
        source_path, source, package_folders = _module_source(args.module)
        chosen, generated = _choose(source, args.mutants, args.limit)
        check_command = _check_command(args)
        problem = first_problem({"--json": args.json, "--html": args.html})
        if problem is not None:
            raise MutateUsageError(problem)
    except MutateUsageError as error:
        print(f"cacheproof mutate: {error}", file=sys.stderr)
        return 2
    duel = Duel(args.module, source_path, check_command, args.tests, generated, len(chosen))
    children = ChildProcesses()
    with tempfile.TemporaryDirectory(prefix="cacheproof-mutate-") as scratch, \
            last_words(lambda: _finish(duel, args)), terminate_raises():
        try:
            try:
                limits = _baseline(Path(scratch), args, duel, source, package_folders, children)
            except MutateUsageError as error:
                print(f"cacheproof mutate: {error}", file=sys.stderr)
                return 2
            _run_mutants(Path(scratch), args, duel, chosen, source, package_folders, limits, children)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (`terminate_raises`), in the baseline or a mutant
            children.stop()
            duel.interrupted = True
            print("cacheproof mutate: interrupted; the results so far follow", file=sys.stderr)
    _finish(duel, args)
    if duel.interrupted:
        return INTERRUPTED_STATUS
    return 0 if duel.holds() else 1


def module_path(module: str, source_path: str) -> str:
    """The module's file as its dotted name spells it (vllm/v1/core/block_pool.py), for diffs."""
    name = module.replace(".", "/")
    return f"{name}/__init__.py" if source_path.endswith("__init__.py") else f"{name}.py"


def _module_source(module: str) -> tuple[str, str, list[str] | None]:
    """The module's file, its source and (a package) its submodule folders; a typed error when it
    cannot be found or has no Python source."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise MutateUsageError(f"MODULE {module!r} cannot be found: {error}") from None
    if spec is None:
        raise MutateUsageError(f"MODULE {module!r} is not installed in this Python ({sys.executable})")
    origin = spec.origin
    if origin is None or not origin.endswith(".py"):
        raise MutateUsageError(f"MODULE {module!r} has no Python source to mutate (its origin is {origin!r})")
    folders = list(spec.submodule_search_locations) if spec.submodule_search_locations is not None else None
    return origin, Path(origin).read_text(), folders


def _choose(source: str, numbers: list[int] | None, limit: int | None) -> tuple[list[Mutant], int]:
    try:
        every = mutants(source)
    except SyntaxError as error:
        raise MutateUsageError(f"the module's source does not parse: {error}") from None
    if numbers is not None:
        unknown = sorted(set(numbers) - {mutant.number for mutant in every})
        if unknown:
            raise MutateUsageError(f"--mutants {','.join(map(str, unknown))}: the module has mutants 1..{len(every)}")
        wanted = set(numbers)
        every_chosen = [mutant for mutant in every if mutant.number in wanted]
        return spread(every_chosen, limit), len(every)
    return spread(every, limit), len(every)


def _check_command(args: argparse.Namespace) -> list[str]:
    try:
        extra = shlex.split(args.check_args)
    except ValueError as error:
        raise MutateUsageError(f"--check-args {args.check_args!r} is not a command line: {error}") from None
    command = [sys.executable, "-m", "cacheproof", "check", "--impl", args.impl, "--spec", args.spec,
               "--seed", str(args.seed), "--quiet"]
    command += ["--budget", f"{args.budget:g}"] if args.budget is not None else ["--examples", str(args.examples)]
    if args.profile is not None:
        command += ["--profile", args.profile]
    return command + extra


def _baseline(scratch: Path, args: argparse.Namespace, duel: Duel, source: str, package_folders: list[str] | None,
              children: ChildProcesses) -> tuple[float, float | None]:
    """Run both sides on the unmutated source, installed as a mutant would be: each must pass (else
    every mutant would count as killed); return each side's time limit per mutant."""
    folder = install_folder(scratch / "original", duel.module, source, package_folders)
    environment = environment_with(folder)
    generous = args.timeout or 3600.0
    sides: list[tuple[str, str | list[str]]] = [("cacheproof check", list(duel.check_command))]
    if duel.test_command is not None:
        sides.append(("the test command", duel.test_command))
    limits: list[float | None] = [None, None]
    for index, (name, command) in enumerate(sides):
        if not args.quiet:
            print(f"cacheproof mutate: {name} on the unmutated {duel.module} ...", file=sys.stderr, flush=True)
        result = children.run(command, environment, generous)
        if result.killed:
            raise MutateUsageError(f"{name} fails on the unmutated {duel.module} ({result.status}, exit "
                                   f"{result.exit_code}), so it can kill no mutant; its output ends:\n{result.output_tail}")
        limits[index] = args.timeout or TIMEOUT_FACTOR * result.seconds + TIMEOUT_MARGIN_S
        if not args.quiet:
            print(f"cacheproof mutate: {name} passes in {result.seconds:.1f} s; limit per mutant "
                  f"{limits[index]:.0f} s", file=sys.stderr, flush=True)
    return limits[0] or generous, limits[1]


def _run_mutants(scratch: Path, args: argparse.Namespace, duel: Duel, chosen: list[Mutant], source: str,
                 package_folders: list[str] | None, limits: tuple[float, float | None], children: ChildProcesses) -> None:
    def one(mutant: Mutant) -> MutantResult:
        folder = install_folder(scratch / f"mutant-{mutant.number}", duel.module, mutant.source, package_folders)
        environment = environment_with(folder)
        checked = children.run(list(duel.check_command), environment, limits[0])
        tests: SideResult | None = None
        if duel.test_command is not None:
            tests = children.run(duel.test_command, environment, limits[1] or limits[0])
        return MutantResult(mutant, mutant.diff(source, module_path(duel.module, duel.source_path)), checked, tests)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        pending: set[Future[MutantResult]] = {pool.submit(one, mutant) for mutant in chosen}
        try:
            while pending:
                done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    duel.results.append(result)
                    if not args.quiet:
                        print(f"[{len(duel.results)}/{len(chosen)}] {result_line(result)}", file=sys.stderr, flush=True)
        finally:
            for future in pending:
                future.cancel()
            children.stop()


def _finish(duel: Duel, args: argparse.Namespace) -> None:
    """Print the table, each mutant cacheproof misses with its diff (unless quiet) and the verdict;
    write --json and --html."""
    lines = table_lines(duel)
    if not args.quiet:
        for result in duel.missed_by_cacheproof():
            lines.append(f"\nmissed by cacheproof: {result_line(result)}")
            lines.extend(f"    {line}" for line in result.diff.splitlines())
    verdict = "holds" if duel.holds() else "does NOT hold"
    claim = "cacheproof kills every mutant the tests kill" if duel.test_command else "cacheproof kills every mutant run"
    lines.append(f"{claim}: {verdict}")
    print("\n".join(lines), flush=True)
    if args.json is not None:
        write_report(args.json, "mutate", duel.to_json())
    if args.html is not None:
        write_atomically(args.html, render_page(duel))
