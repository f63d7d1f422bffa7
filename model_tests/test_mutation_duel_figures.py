"""The figures of the mutation duels (issue 34) are those the duels wrote: every committed duel
report (model_tests/mutation_duels/*.json, a `cacheproof mutate --json` report trimmed by
tools/duel_fixture.py) is a valid report whose counts are its mutants' categories, and the README's
table of results and docs/mutation-duel.md's summary table have one row per report, with its
counts. A figure edited by hand, or a duel rerun without its report committed, fails here."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from model_tests.report_validation import report_errors
from tools import duel_fixture

REPOSITORY = Path(__file__).resolve().parents[1]
FIXTURES = sorted((REPOSITORY / "model_tests" / "mutation_duels").glob("*.json"))
COLUMNS = ("both", "cacheproof only", "tests only", "neither")
README_SECTION = "## Against the engines' own tests"
SUMMARY_SECTION = "## Summary"


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def duel_figures(report: dict) -> tuple[int, ...]:
    """(mutants run, both, cacheproof only, tests only, neither) of one duel report."""
    counts = Counter(mutant["category"] for mutant in report["mutants"])
    return (len(report["mutants"]), *(counts[column] for column in COLUMNS))


def table_figures(text: str, section: str) -> dict[str, tuple[int, ...]]:
    """The first table under the heading `section` of a markdown text, as module -> its last five
    cells (mutants, both, cacheproof only, tests only, neither), the module the first cell's
    backquoted name."""
    start = text.index(section)
    lines = text[start:].splitlines()[1:]
    rows, inside = {}, False
    for line in lines:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if inside:
                break
            continue
        inside = True
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        name = re.fullmatch(r"`([\w.]+)`.*", cells[0])
        if name is None:  # the header and the rule under it
            continue
        rows[name.group(1)] = tuple(int(cell) for cell in cells[-5:])
    return rows


def fixture_figures() -> dict[str, tuple[int, ...]]:
    return {_report(path)["module"]: duel_figures(_report(path)) for path in FIXTURES}


def test_there_is_a_duel_report_per_vllm_module():
    assert {"vllm.v1.core.block_pool", "vllm.v1.core.kv_cache_manager",
            "vllm.v1.core.encoder_cache_manager"} <= set(fixture_figures())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: path.stem)
def test_each_duel_report_is_valid_and_counts_its_mutants(path):
    report = _report(path)
    assert report_errors(report) == []
    assert report["test_command"], "a duel has a test command"
    assert dict(report["counts"]) == dict(zip(COLUMNS, duel_figures(report)[1:]))
    assert not report["interrupted"]


@pytest.mark.parametrize("document, section", [("README.md", README_SECTION),
                                               ("docs/mutation-duel.md", SUMMARY_SECTION)])
def test_the_tables_are_the_duel_reports_figures(document, section):
    assert table_figures((REPOSITORY / document).read_text(), section) == fixture_figures()


def test_a_figure_edited_by_hand_is_a_difference():
    text = (REPOSITORY / "README.md").read_text()
    module, figures = next(iter(fixture_figures().items()))
    row = next(line for line in text.splitlines() if line.startswith(f"| `{module}`"))
    edited = row.rsplit("|", 2)[0] + f"| {figures[-1] + 1} |"
    assert table_figures(text.replace(row, edited), README_SECTION)[module] != figures


def _side(status: str) -> dict:
    return {"status": status, "exit_code": 0 if status == "survived" else 1, "seconds": 1.0, "output_tail": "x"}


def _duel(*mutants: tuple[int, str, str, str]) -> dict:
    return {"command": "mutate", "module": "m", "source_path": "m.py", "mutants_generated": 9, "test_command": "t",
            "mutants": [{"number": number, "category": category, "cacheproof": _side(mine), "tests": _side(theirs)}
                        for number, mine, theirs, category in mutants]}


def test_a_rerun_replaces_its_mutants_sides_and_the_counts_follow():
    report = duel_fixture.merged(_duel((1, "survived", "killed", "tests only"), (2, "killed", "killed", "both")),
                                 _duel((1, "killed", "killed", "both")))
    assert [mutant["category"] for mutant in report["mutants"]] == ["both", "both"]
    assert report["counts"] == {"both": 2, "cacheproof only": 0, "tests only": 0, "neither": 0} and report["ok"]
    with pytest.raises(ValueError, match="#3"):
        duel_fixture.merged(_duel((1, "killed", "killed", "both")), _duel((3, "killed", "killed", "both")))
    other = _duel((1, "killed", "killed", "both"))
    other["module"] = "n"
    with pytest.raises(ValueError, match="module"):
        duel_fixture.merged(_duel((1, "killed", "killed", "both")), other)
    assert duel_fixture.trimmed(report)["mutants"][0]["cacheproof"]["output_tail"] == ""


def test_a_rerun_made_elsewhere_merges_into_the_committed_fixture_and_only_for_the_same_mutant():
    fixture = _duel((1, "survived", "killed", "tests only"))
    fixture.update(module="pkg.m", source_path="pkg/m.py")
    fixture["mutants"][0]["diff"] = "-a\n+b\n"
    rerun = _duel((1, "killed", "killed", "both"))
    rerun.update(module="pkg.m", source_path="/somewhere/site-packages/pkg/m.py")
    rerun["mutants"][0]["diff"] = "-a\n+b\n"
    assert duel_fixture.merged(json.loads(json.dumps(fixture)), rerun)["counts"]["both"] == 1
    rerun["mutants"][0]["diff"] = "-a\n+c\n"
    with pytest.raises(ValueError, match="#1 changes other lines"):
        duel_fixture.merged(json.loads(json.dumps(fixture)), rerun)
    rerun["source_path"] = "/somewhere/site-packages/pkg/other.py"
    with pytest.raises(ValueError, match="source_path"):
        duel_fixture.merged(json.loads(json.dumps(fixture)), rerun)


def test_a_report_written_before_also_check_gets_the_one_check_fields_and_a_newer_keeps_its_own():
    old = _duel((1, "killed", "killed", "both"), (2, "survived", "killed", "tests only"), (3, "timed out", "killed", "both"))
    upgraded = duel_fixture.with_one_check_fields(old)
    assert upgraded["also_check_commands"] == []
    assert [mutant["cacheproof"]["check"] for mutant in upgraded["mutants"]] == [1, None, 1]
    assert all("check" not in mutant["tests"] for mutant in upgraded["mutants"])
    newer = _duel((1, "killed", "killed", "both"))
    newer.update(also_check_commands=[["/venv/bin/python", "-m", "cacheproof", "check", "--impl", "m:g"]])
    newer["mutants"][0]["cacheproof"]["check"] = 2
    kept = duel_fixture.with_one_check_fields(newer)
    assert kept["mutants"][0]["cacheproof"]["check"] == 2 and len(kept["also_check_commands"]) == 1


def test_the_fixture_names_every_check_s_interpreter_python_and_a_rerun_runs_the_same_also_checks():
    report = _duel((1, "killed", "killed", "both"))
    report.update(check_command=["/venv/bin/python", "-m", "cacheproof", "check", "--impl", "m:f"],
                  also_check_commands=[["/venv/bin/python", "-m", "cacheproof", "check", "--impl", "m:g"]])
    fixture = duel_fixture.portable(json.loads(json.dumps(report)), None)
    assert fixture["check_command"][0] == "python"
    assert fixture["also_check_commands"] == [["python", "-m", "cacheproof", "check", "--impl", "m:g"]]
    rerun = _duel((1, "killed", "killed", "both"))
    rerun["also_check_commands"] = [["/elsewhere/python", "-m", "cacheproof", "check", "--impl", "m:g"]]
    assert duel_fixture.merged(json.loads(json.dumps(fixture)), rerun)["counts"]["both"] == 1
    rerun["also_check_commands"] = []
    partial = dict(rerun, mutants=[])
    with pytest.raises(ValueError, match="also_check_commands"):
        duel_fixture.merged(json.loads(json.dumps(fixture)), partial)
    whole = duel_fixture.merged(json.loads(json.dumps(fixture)), rerun)  # every mutant rerun: its checks are the report's
    assert whole["also_check_commands"] == []


def test_a_rerun_that_adds_checks_needs_only_the_mutants_the_report_s_checks_miss():
    def with_checks(report: dict, *also: str) -> dict:
        report.update(check_command=["/venv/bin/python", "-m", "cacheproof", "check", "--impl", "m:f"],
                      also_check_commands=[["/venv/bin/python", "-m", "cacheproof", "check", "--impl", f"m:{name}"]
                                           for name in also])
        return report

    fixture = duel_fixture.portable(with_checks(_duel((1, "survived", "killed", "tests only"),
                                                      (2, "killed", "killed", "both")), "g"), None)
    fixture["mutants"][1]["cacheproof"]["check"] = 1
    rerun = with_checks(_duel((1, "killed", "killed", "both")), "g", "h")
    rerun["mutants"][0]["cacheproof"]["check"] = 3
    report = duel_fixture.merged(json.loads(json.dumps(fixture)), json.loads(json.dumps(rerun)))
    assert report["counts"] == {"both": 2, "cacheproof only": 0, "tests only": 0, "neither": 0}
    assert [command[-1] for command in report["also_check_commands"]] == ["m:g", "m:h"]
    assert [mutant["cacheproof"]["check"] for mutant in report["mutants"]] == [3, 1]
    only_killed = with_checks(_duel((2, "killed", "killed", "both")), "g", "h")
    with pytest.raises(ValueError, match="does not run #1"):
        duel_fixture.merged(json.loads(json.dumps(fixture)), only_killed)
    replaced = with_checks(_duel((1, "killed", "killed", "both")), "h")
    with pytest.raises(ValueError, match="also_check_commands"):
        duel_fixture.merged(json.loads(json.dumps(fixture)), replaced)


def test_an_added_check_run_alone_on_the_mutants_the_report_s_checks_miss_joins_after_them():
    def checked(report: dict, first: list[str], *also: list[str]) -> dict:
        report.update(check_command=["/venv/bin/python", "-m", "cacheproof", "check", *first],
                      also_check_commands=[["/venv/bin/python", "-m", "cacheproof", "check", *words] for words in also])
        return report

    fixture = duel_fixture.portable(checked(_duel((1, "survived", "killed", "tests only"), (2, "killed", "killed", "both"),
                                                  (3, "survived", "survived", "neither")),
                                            ["--impl", "m:f"], ["--impl", "m:g"]), None)
    fixture = duel_fixture.with_one_check_fields(fixture)
    fixture["mutants"][1]["cacheproof"]["check"] = 2
    new = ["--impl", "m:h", "--profile", "p"]
    alone = checked(_duel((1, "killed", "survived", "neither"), (3, "survived", "survived", "neither")), new)
    alone["mutants"][0]["cacheproof"]["check"] = 1
    report = duel_fixture.added(json.loads(json.dumps(fixture)), json.loads(json.dumps(alone)))
    assert [mutant["cacheproof"]["check"] for mutant in report["mutants"]] == [3, 2, None]
    assert [mutant["category"] for mutant in report["mutants"]] == ["both", "both", "neither"]  # the tests' side stays
    assert report["counts"] == {"both": 2, "cacheproof only": 0, "tests only": 0, "neither": 1} and report["ok"]
    assert [command[-1] for command in report["also_check_commands"]] == ["m:g", "p"]
    later_part = checked(_duel((4, "killed", "killed", "both")), ["--impl", "m:f"], ["--impl", "m:g"],
                         ["--profile", "p", "--impl", "m:h"])  # the added check as an also-check, flags reordered
    assert duel_fixture.joined(report, later_part)["mutants_run"] == 4
    with pytest.raises(ValueError, match="does not run #3"):
        duel_fixture.added(json.loads(json.dumps(fixture)), checked(_duel((1, "killed", "survived", "neither")), new))
    with pytest.raises(ValueError, match="one of the report's checks"):
        duel_fixture.added(json.loads(json.dumps(fixture)),
                           checked(_duel((1, "killed", "survived", "neither"), (3, "survived", "survived", "neither")),
                                   ["--impl", "m:g"]))


def test_a_part_of_other_mutants_joins_the_report_and_a_mutant_run_twice_or_other_checks_are_refused():
    def part(*mutants: tuple[int, str, str, str]) -> dict:
        report = _duel(*mutants)
        report.update(check_command=["/venv/bin/python", "-m", "cacheproof", "check", "--impl", "m:f", "--seed", "0"],
                      also_check_commands=[], mutants_chosen=len(mutants), mutants_run=len(mutants), interrupted=False)
        return report

    first = duel_fixture.portable(part((1, "killed", "killed", "both"), (5, "survived", "survived", "neither")), None)
    second = part((3, "survived", "killed", "tests only"))
    second["interrupted"], second["mutants_chosen"] = True, 2  # one of its two chosen mutants ran
    report = duel_fixture.joined(json.loads(json.dumps(first)), json.loads(json.dumps(second)))
    assert [mutant["number"] for mutant in report["mutants"]] == [1, 3, 5]
    assert (report["mutants_chosen"], report["mutants_run"], report["interrupted"]) == (4, 3, True)
    assert report["counts"] == {"both": 1, "cacheproof only": 0, "tests only": 1, "neither": 1} and not report["ok"]
    with pytest.raises(ValueError, match="#5 again"):
        duel_fixture.joined(json.loads(json.dumps(first)), part((5, "killed", "killed", "both")))
    other_seed = part((4, "killed", "killed", "both"))
    other_seed["check_command"][-1] = "1"
    with pytest.raises(ValueError, match="check_command"):
        duel_fixture.joined(json.loads(json.dumps(first)), other_seed)


@pytest.mark.parametrize("breaking, where", [
    (lambda r: r.pop("also_check_commands"), "also_check_commands"),
    (lambda r: r["mutants"][0]["cacheproof"].pop("check"), "check"),
    (lambda r: r["mutants"][0]["cacheproof"].update(check=0), "check"),
    (lambda r: r["mutants"][0]["cacheproof"].update(check="1"), "check"),
    (lambda r: r["mutants"][0]["tests"].update(check=1), "tests"),
], ids=["no also-check commands", "no killing check", "check 0", "check not a number", "a check on the tests side"])
def test_a_mutate_report_without_its_checks_fields_fails_validation(breaking, where: str):
    report = _report(FIXTURES[0])
    assert report_errors(report) == []
    breaking(report)
    problems = report_errors(report)
    assert problems and any(where in problem for problem in problems), problems
