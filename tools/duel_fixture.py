"""A `cacheproof mutate --json` report made small enough to commit: every field kept, each side's
`output_tail` emptied (the diffs, statuses, exit codes and seconds stay), and no path of the
machine it ran on: `source_path` as the module's file inside its package, each check command's
interpreter (`check_command`'s and every one of `also_check_commands`) as `python`, the test
command as `--tests-as` writes it (the documented form, with `$VLLM_SRC` for the scratch folder).
The README's table of duel results and docs/mutation-duel.md's summary are read against these
fixtures (model_tests/test_mutation_duel_figures.py), so the figures cannot drift from what a
duel wrote.

    python tools/duel_fixture.py REPORT.json OUT.json [--added-check ADDED.json ...] [--more MORE.json ...]
        [--rerun RERUN.json ...] [--tests-as "COMMAND"]

REPORT may be a committed fixture itself (its source path is compared in the fixture's form), so
a later rerun is merged into what is committed. A report written before `--also-check` is read
with the fields it lacks by the rule of its one check: `also_check_commands` empty, and each
mutant's killing `check` 1 when cacheproof killed it, else null.

`--rerun`: a later `cacheproof mutate --mutants ...` report of the same module, with the same
also-checks (after a gap was closed in the adapter or the spec, only the mutants it could change
rerun): each of its mutants replaces that mutant's cacheproof side, and the categories and counts
are recomputed by the duel's rule (a side kills unless it survived). A rerun that ran the tests
too replaces that side as well. A rerun of every mutant the report ran may run other checks (an
adapter added with `--also-check`): every cacheproof side is then its, so its check commands
replace the report's. A rerun that adds checks after the report's (its also-checks the report's
and more, in order) needs only the mutants the report's cacheproof side misses: a mutant the
report's checks kill is killed again by the same seeded checks, whose numbers the added ones leave
as they are, so its side stays. docs/mutation-duel.md names every rerun mutant.

`--more`: a later `cacheproof mutate --mutants ...` report of other mutants of the same module and
source, run by the same checks (the same commands, seed and examples; interpreters aside): its
mutants join the report's, which then counts them as chosen and run (a duel run in parts, each
part a sample spread over the module, as `--limit` spreads one). A mutant in both is refused (a
rerun replaces a side; `--more` never does), and so is a part whose checks differ. The test
command is not compared (it names the machine's paths): `--tests-as` writes the one all parts ran
in its documented form. The parts are merged before the reruns.

`--added-check`: a later `cacheproof mutate --mutants ...` report of the same module and source run
by new checks only (its first check and its also-checks, none of them one of the report's), on at
least every mutant the report's checks miss: its checks join the report's also-checks, after them,
and each of those mutants it kills is killed by its check's number counted after the report's. The
report's checks are seeded, so a mutant they miss is missed again: running them beside the new
check would only cost time. Added checks are merged first, so parts run with every check join after.
Checks are compared flag by flag (`--impl X --profile P` and `--profile P --impl X` are one check).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cacheproof.mutate.duel import BOTH, CACHEPROOF_ONLY, DUEL_CATEGORIES, NEITHER, TESTS_ONLY
from cacheproof.mutate.sides import SURVIVED


def _category(mutant: dict) -> str:
    cacheproof = mutant["cacheproof"]["status"] != SURVIVED
    tests = mutant["tests"]["status"] != SURVIVED
    if cacheproof:
        return BOTH if tests else CACHEPROOF_ONLY
    return TESTS_ONLY if tests else NEITHER


def _package_file(report: dict) -> str:
    """The report's source file from its top package on (`portable`'s form, which a committed
    fixture already has): the same for a report and its rerun made on other machines."""
    path = str(report.get("source_path", "")).replace("\\", "/")
    tail = str(report.get("module", "")).replace(".", "/")
    for ending in (tail + ".py", tail + "/__init__.py"):
        if path == ending or path.endswith("/" + ending):
            return ending
    return path


def _check_arguments(command: list[str] | None) -> tuple:
    """A check command without its interpreter (a rerun's has its machine's path, a committed
    fixture's `python`), its flags each with its values in flag order, as argparse reads them."""
    words = list(command or [])[1:]
    first_flag = next((i for i, word in enumerate(words) if word.startswith("--")), len(words))
    flags: list[tuple[str, ...]] = []
    for word in words[first_flag:]:
        if word.startswith("--"):
            flags.append((word,))
        else:
            flags[-1] += (word,)
    return tuple(words[:first_flag]), tuple(sorted(flags))


def _also_check_arguments(report: dict) -> list[tuple]:
    """The report's also-check commands, each as `_check_arguments` reads it."""
    return [_check_arguments(command) for command in report.get("also_check_commands", [])]


def _adds_checks(report: dict, rerun: dict) -> bool:
    """Whether `rerun` runs the report's checks, in order, and more after them: the same first check
    and the report's also-checks followed by at least one other (interpreters aside)."""
    mine, theirs = _checks(report), _checks(rerun)
    return len(theirs) > len(mine) and theirs[: len(mine)] == mine


def _checks(report: dict) -> list[tuple]:
    """Every check the report ran, its first then its also-checks, each as `_check_arguments` reads it."""
    return [_check_arguments(report.get("check_command")), *_also_check_arguments(report)]


_SAME_SOURCE = (("module", lambda r: r.get("module")), ("source_path", _package_file),
                ("mutants_generated", lambda r: r.get("mutants_generated")))
"""The fields, each with how it is read, on which any later report must agree with the report: the same
module's source, and so the same mutants (machine paths aside)."""

_SAME_DUEL = (*_SAME_SOURCE, ("also_check_commands", _also_check_arguments))
"""The fields on which a rerun or an added part must agree with the report (interpreters aside)."""


def _unrun_misses(report: dict, numbers: set[int]) -> list[int]:
    """The report's mutants its checks miss that are not among `numbers`, ascending."""
    return sorted(m["number"] for m in report["mutants"] if m["cacheproof"]["status"] == SURVIVED
                  and m["number"] not in numbers)


def _same_diff(mutant: dict, again: dict, later: str) -> None:
    """ValueError when `later`'s run of a mutant (`again`) changes other lines than the report's (`mutant`)."""
    if "diff" in again and "diff" in mutant and again["diff"] != mutant["diff"]:
        raise ValueError(f"{later} mutant #{again['number']} changes other lines than the report's")


def _recounted(report: dict) -> dict:
    """`report` with its counts and `ok` read again from its mutants' categories (the duel's rule)."""
    report["counts"] = {category: sum(m["category"] == category for m in report["mutants"])
                        for category in DUEL_CATEGORIES}
    report["ok"] = report["counts"][TESTS_ONLY] == 0
    return report


def merged(report: dict, rerun: dict) -> dict:
    """`report` (a duel's report, or its committed fixture) with the sides `rerun` ran for its
    mutants put in; ValueError naming the mismatch when `rerun` is of another module or source,
    or runs other also-checks on only some of the report's mutants (their killing check numbers
    would name other commands), or names a mutant `report` did not run or one whose diff is not the
    report's. A rerun of all the report's mutants brings its own check commands, and so does one
    that adds checks after the report's and runs every mutant they miss."""
    rerun_numbers = {mutant["number"] for mutant in rerun["mutants"]}
    whole = rerun_numbers == {mutant["number"] for mutant in report["mutants"]}
    adds_checks = _adds_checks(report, rerun)
    if adds_checks:
        missed = _unrun_misses(report, rerun_numbers)
        if missed:
            raise ValueError(f"the rerun adds checks but does not run #{', #'.join(map(str, missed))}, which "
                             "the report's checks miss: a rerun that adds checks runs every mutant they miss")
    for field, value in _SAME_DUEL:
        if value(rerun) != value(report) and not ((whole or adds_checks) and field == "also_check_commands"):
            raise ValueError(f"the rerun's {field} is {value(rerun)!r}, the report's {value(report)!r}")
    if whole or adds_checks:
        report["check_command"] = rerun.get("check_command", report.get("check_command"))
        report["also_check_commands"] = rerun.get("also_check_commands", [])
    by_number = {mutant["number"]: mutant for mutant in report["mutants"]}
    for again in rerun["mutants"]:
        mutant = by_number.get(again["number"])
        if mutant is None:
            raise ValueError(f"the rerun's mutant #{again['number']} is not among the report's")
        _same_diff(mutant, again, "the rerun's")
        mutant["cacheproof"] = again["cacheproof"]
        if again.get("tests"):
            mutant["tests"] = again["tests"]
        mutant["category"] = _category(mutant)
    return _recounted(report)


def joined(report: dict, more: dict) -> dict:
    """`report` with the mutants of `more` (another part of the same duel, see the module) added,
    sorted by number, and its chosen, run and counts following; ValueError naming the mismatch when
    `more` is of another module, source or set of checks, or runs a mutant `report` ran."""
    for field, value in (*_SAME_DUEL, ("check_command", lambda r: _check_arguments(r.get("check_command")))):
        if value(more) != value(report):
            raise ValueError(f"the added part's {field} is {value(more)!r}, the report's {value(report)!r}")
    both = sorted({m["number"] for m in more["mutants"]} & {m["number"] for m in report["mutants"]})
    if both:
        raise ValueError(f"the added part runs #{', #'.join(map(str, both))} again: a part adds other "
                         "mutants (--rerun replaces a mutant's sides)")
    report["mutants"] = sorted(report["mutants"] + more["mutants"], key=lambda mutant: mutant["number"])
    report["mutants_chosen"] = report.get("mutants_chosen", 0) + more.get("mutants_chosen", len(more["mutants"]))
    report["mutants_run"] = len(report["mutants"])
    report["interrupted"] = bool(report.get("interrupted") or more.get("interrupted"))
    return _recounted(report)


def added(report: dict, rerun: dict) -> dict:
    """`report` with the checks of `rerun` (a report of new checks only, see the module) after its own,
    and each mutant its checks miss that `rerun` kills killed by that check; ValueError naming the
    mismatch when `rerun` is of another module or source, runs one of the report's checks, leaves out a
    mutant the report's checks miss, or names a mutant the report did not run or one whose diff is not
    the report's."""
    for field, value in _SAME_SOURCE:
        if value(rerun) != value(report):
            raise ValueError(f"the added check's report's {field} is {value(rerun)!r}, the report's {value(report)!r}")
    mine = _checks(report)
    if set(mine) & set(_checks(rerun)):
        raise ValueError("the added check's report runs one of the report's checks again: it adds new checks only")
    by_number = {mutant["number"]: mutant for mutant in rerun["mutants"]}
    by_report = {mutant["number"]: mutant for mutant in report["mutants"]}
    if set(by_number) - set(by_report):
        raise ValueError(f"the added check's report runs #{min(set(by_number) - set(by_report))}, "
                         "which the report did not run")
    missed = _unrun_misses(report, set(by_number))
    if missed:
        raise ValueError(f"the added check's report does not run #{', #'.join(map(str, missed))}, which the "
                         "report's checks miss: an added check runs every mutant they miss")
    for number, again in by_number.items():
        mutant = by_report[number]
        _same_diff(mutant, again, "the added check's")
        if mutant["cacheproof"]["status"] == SURVIVED and again["cacheproof"]["status"] != SURVIVED:
            mutant["cacheproof"] = {**again["cacheproof"], "check": len(mine) + again["cacheproof"]["check"]}
            mutant["category"] = _category(mutant)
    report["also_check_commands"] = [*report.get("also_check_commands", []), rerun["check_command"],
                                     *rerun.get("also_check_commands", [])]
    return _recounted(report)


def trimmed(report: dict) -> dict:
    """`report` with every mutant's side outputs emptied."""
    for mutant in report.get("mutants", []):
        for side in ("cacheproof", "tests"):
            if mutant.get(side):
                mutant[side]["output_tail"] = ""
    return report


def portable(report: dict, tests_as: str | None) -> dict:
    """`report` without the paths of the machine it ran on (see the module)."""
    report["source_path"] = report["module"].replace(".", "/") + ".py"
    if report.get("check_command"):
        report["check_command"] = ["python", *report["check_command"][1:]]
    report["also_check_commands"] = [["python", *command[1:]] for command in report.get("also_check_commands", [])]
    if tests_as is not None:
        report["test_command"] = tests_as
    return report


def with_one_check_fields(report: dict) -> dict:
    """`report` with the fields a report written before `--also-check` lacks, by the rule of its one
    check: no also-check commands, and each mutant's killing check 1 when cacheproof killed it (a
    side kills unless it survived), else None. A newer report's fields are kept."""
    report.setdefault("also_check_commands", [])
    for mutant in report.get("mutants", []):
        mutant["cacheproof"].setdefault("check", None if mutant["cacheproof"]["status"] == SURVIVED else 1)
    return report


def _read(path: Path) -> dict:
    report = json.loads(path.read_text())
    if report.get("command") != "mutate":
        raise ValueError(f"{path} is not a `cacheproof mutate --json` report (command {report.get('command')!r})")
    return with_one_check_fields(report)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("report", type=Path, help="the duel's `cacheproof mutate --json` report")
    parser.add_argument("out", type=Path, help="the fixture to write")
    parser.add_argument("--added-check", type=Path, action="append", default=[],
                        help="a later report of new checks only, on every mutant the report's checks miss (repeatable)")
    parser.add_argument("--more", type=Path, action="append", default=[],
                        help="a later report of other mutants of the same duel, which join the report's (repeatable)")
    parser.add_argument("--rerun", type=Path, action="append", default=[],
                        help="a later report of some of the same mutants, whose sides replace theirs (repeatable)")
    parser.add_argument("--tests-as", metavar="COMMAND", help="the test command as the report is to record it")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python tools/duel_fixture.py")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        report = _read(args.report)
        if not report.get("test_command"):
            raise ValueError(f"{args.report} has no test command: it is no duel")
        for path in args.added_check:
            report = added(report, _read(path))
        for path in args.more:
            report = joined(report, _read(path))
        for path in args.rerun:
            report = merged(report, _read(path))
    except (OSError, ValueError) as error:
        print(f"duel_fixture: {error}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(portable(trimmed(report), args.tests_as), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
