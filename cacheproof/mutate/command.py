"""`cacheproof mutate`: mutants of an installed module's source, each run by `cacheproof check` on a
factory (and on each --also-check's, in order until one kills) and, when given, by the user's test
command; the table of who kills what. Exit 0 when cacheproof kills every mutant the tests kill
(without --tests: every mutant run), 1 when not, 2 usage error (or a side that fails on the
unmutated module), 130 interrupted by Ctrl-C or SIGTERM (results so far kept, every child process
ended).
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import NoReturn

from cacheproof.check.command import add_arguments as add_check_arguments
from cacheproof.cmdline.flag_types import non_negative_seconds, positive_integer, positive_seconds
from cacheproof.cmdline.interrupts import last_words, terminate_raises
from cacheproof.cmdline.output_paths import first_problem, write_atomically
from cacheproof.cmdline.reports import write_report
from cacheproof.cmdline.statuses import INTERRUPTED_STATUS
from cacheproof.mutate.duel import Duel, MutantResult, result_line, table_lines
from cacheproof.mutate.install import environment_with, install_folder
from cacheproof.mutate.operators import Mutant, mutants, spread
from cacheproof.mutate.page import render_page
from cacheproof.mutate.sides import ChildProcesses, SideResult, checks_until_killed
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
GIVEN_BY_MUTATE = ("seed", "examples", "budget", "quiet")
"""`cacheproof check`'s flags that mutate gives every check, the same for all: an --also-check's
ARGS must not give them."""


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
    parser.add_argument("--also-check", metavar="ARGS", action="append", default=[],
                        help='one more cacheproof check per mutant, its own arguments as one string, with '
                        '--impl MODULE:FACTORY and its own --spec and --profile (e.g. "--impl pkg.mod:other '
                        '--profile p"); repeatable. The checks run in order, --impl first, until one kills '
                        '(cacheproof kills the mutant when any check does); each gets --seed, --examples or '
                        '--budget, --quiet and --check-args from mutate')
    parser.add_argument("--check-args", metavar="ARGS", default="",
                        help='more arguments for every cacheproof check (the --impl one and each --also-check), '
                        'as one string (e.g. "--call-timeout 60")')
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds,
                        help=f"a side's time limit per mutant, each check's its own (default {TIMEOUT_FACTOR:g} x "
                        f"its time on the unmutated module + {TIMEOUT_MARGIN_S:g} s); a mutant that outlives it is "
                        "killed (timed out)")
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
        check_commands = _check_commands(args)
        problem = first_problem({"--json": args.json, "--html": args.html})
        if problem is not None:
            raise MutateUsageError(problem)
    except MutateUsageError as error:
        print(f"cacheproof mutate: {error}", file=sys.stderr)
        return 2
    duel = Duel(args.module, source_path, check_commands[0], check_commands[1:], args.tests, generated, len(chosen))
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


def _check_commands(args: argparse.Namespace) -> list[list[str]]:
    """Every check's command in the order they run: the --impl one's (with --spec and --profile), then
    each --also-check's; each with mutate's --seed, --quiet and --examples or --budget, then
    --check-args. A usage error when --check-args or an --also-check is no command line, or an
    --also-check lacks --impl or gives a flag of GIVEN_BY_MUTATE."""
    extra = _command_line("--check-args", args.check_args)
    same = ["--seed", str(args.seed), "--quiet"]
    same += ["--budget", f"{args.budget:g}"] if args.budget is not None else ["--examples", str(args.examples)]
    first = ["--impl", args.impl, "--spec", args.spec, *same]
    if args.profile is not None:
        first += ["--profile", args.profile]
    return [[sys.executable, "-m", "cacheproof", "check", *arguments, *extra]
            for arguments in [first, *(_also_check_arguments(text) + same for text in args.also_check)]]


def _command_line(flag: str, text: str) -> list[str]:
    """`text`, the value of `flag`, split as the shell would; a usage error when it cannot be."""
    try:
        return shlex.split(text)
    except ValueError as error:
        raise MutateUsageError(f"{flag} {text!r} is not a command line: {error}") from None


class _CheckArgumentParser(argparse.ArgumentParser):
    """A parser of `cacheproof check`'s own arguments whose refusals raise MutateUsageError."""

    def error(self, message: str) -> NoReturn:
        raise MutateUsageError(message)


def _also_check_arguments(text: str) -> list[str]:
    """One --also-check's ARGS as arguments. Read as `cacheproof check` reads them (a flag abbreviated
    or written --flag=value counts), they must give --impl and no flag of GIVEN_BY_MUTATE, and be
    arguments check accepts; else a usage error naming the flag and `text`."""
    arguments = _command_line("--also-check", text)
    parser = _CheckArgumentParser(prog="cacheproof check", add_help=False)
    add_check_arguments(parser)
    not_given = object()
    parser.set_defaults(**dict.fromkeys(("impl", *GIVEN_BY_MUTATE), not_given))
    try:
        read = vars(parser.parse_known_args(arguments)[0])
    except MutateUsageError as error:
        raise MutateUsageError(f"--also-check {text!r}: {error}") from None
    given = {name for name, value in read.items() if value is not not_given}
    if "impl" not in given:
        raise MutateUsageError(f"--also-check {text!r} lacks --impl MODULE:FACTORY (the factory that check "
                               "holds to its spec)")
    for name in GIVEN_BY_MUTATE:
        if name in given:
            raise MutateUsageError(f"--also-check {text!r} gives --{name}: mutate gives every check the same --seed, "
                                   "--quiet and --examples or --budget (give them to mutate)")
    return arguments


def _check_names(args: argparse.Namespace) -> list[str]:
    """Each check's name in messages: `cacheproof check` when it is the only one, else its number and
    how it was given."""
    if not args.also_check:
        return ["cacheproof check"]
    return [f"cacheproof check 1 (--impl {args.impl})",
            *(f"cacheproof check {number} (--also-check {shlex.quote(text)})"
              for number, text in enumerate(args.also_check, start=2))]


def _baseline(scratch: Path, args: argparse.Namespace, duel: Duel, source: str, package_folders: list[str] | None,
              children: ChildProcesses) -> tuple[list[float], float | None]:
    """Run every check and the test command on the unmutated source, installed as a mutant would be:
    each must pass (else every mutant would count as killed); return each check's time limit per
    mutant, in order, and the test command's (None without one)."""
    folder = install_folder(scratch / "original", duel.module, source, package_folders)
    environment = environment_with(folder)
    generous = args.timeout or 3600.0
    names = _check_names(args)
    _progress(args, f"{names[0] if len(names) == 1 else f'{len(names)} checks'} on the unmutated {duel.module} ...")
    results = checks_until_killed(children, duel.check_commands(), environment, [generous] * len(names))
    check_limits = [_limit_per_mutant(name, result, args, duel.module) for name, result in zip(names, results)]
    if duel.test_command is None:
        return check_limits, None
    _progress(args, f"the test command on the unmutated {duel.module} ...")
    tests = children.run(duel.test_command, environment, generous)
    return check_limits, _limit_per_mutant("the test command", tests, args, duel.module)


def _limit_per_mutant(name: str, result: SideResult, args: argparse.Namespace, module: str) -> float:
    """The time limit per mutant of the side `name`, from its `result` on the unmutated `module`:
    --timeout, else TIMEOUT_FACTOR x its seconds + TIMEOUT_MARGIN_S. A usage error when it failed
    there (it would kill every mutant)."""
    if result.killed:
        raise MutateUsageError(f"{name} fails on the unmutated {module} ({result.status}, exit "
                               f"{result.exit_code}), so it can kill no mutant; its output ends:\n{result.output_tail}")
    limit = args.timeout or TIMEOUT_FACTOR * result.seconds + TIMEOUT_MARGIN_S
    _progress(args, f"{name} passes in {result.seconds:.1f} s; limit per mutant {limit:.0f} s")
    return limit


def _progress(args: argparse.Namespace, message: str) -> None:
    """A progress line on stderr, unless --quiet."""
    if not args.quiet:
        print(f"cacheproof mutate: {message}", file=sys.stderr, flush=True)


def _run_mutants(scratch: Path, args: argparse.Namespace, duel: Duel, chosen: list[Mutant], source: str,
                 package_folders: list[str] | None, limits: tuple[list[float], float | None],
                 children: ChildProcesses) -> None:
    check_limits, tests_limit = limits

    def one(mutant: Mutant) -> MutantResult:
        folder = install_folder(scratch / f"mutant-{mutant.number}", duel.module, mutant.source, package_folders)
        environment = environment_with(folder)
        checks = list(checks_until_killed(children, duel.check_commands(), environment, check_limits))
        tests: SideResult | None = None
        if duel.test_command is not None and tests_limit is not None:
            tests = children.run(duel.test_command, environment, tests_limit)
        diff = mutant.diff(source, module_path(duel.module, duel.source_path))
        return MutantResult.of_checks(mutant, diff, checks, tests)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        pending: set[Future[MutantResult]] = {pool.submit(one, mutant) for mutant in chosen}
        try:
            while pending:
                done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    duel.results.append(result)
                    if not args.quiet:
                        print(f"[{len(duel.results)}/{len(chosen)}] {result_line(result, len(duel.check_commands()))}",
                              file=sys.stderr, flush=True)
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
            lines.append(f"\nmissed by cacheproof: {result_line(result, len(duel.check_commands()))}")
            lines.extend(f"    {line}" for line in result.diff.splitlines())
    verdict = "holds" if duel.holds() else "does NOT hold"
    claim = "cacheproof kills every mutant the tests kill" if duel.test_command else "cacheproof kills every mutant run"
    lines.append(f"{claim}: {verdict}")
    print("\n".join(lines), flush=True)
    if args.json is not None:
        write_report(args.json, "mutate", duel.to_json())
    if args.html is not None:
        write_atomically(args.html, render_page(duel))
