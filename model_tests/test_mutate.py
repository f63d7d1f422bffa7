"""`cacheproof mutate`: the operators on small sources, and a duel on model_tests/mutation_subject.py
whose four mutants' fates are reasoned out beforehand (one per category)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from cacheproof.cli import main
from cacheproof.mutate.operators import mutants, spread
from model_tests.report_validation import report_errors

SUBJECT = "model_tests.mutation_subject"
SUBJECT_FILE = Path(__file__).with_name("mutation_subject.py")
REPOSITORY = Path(__file__).resolve().parent.parent


def _described(source: str) -> dict[tuple[int, str], int]:
    """Each mutant's number by (line, description)."""
    return {(mutant.line, mutant.description): mutant.number for mutant in mutants(source)}


def test_each_operator_changes_one_node_and_nothing_else() -> None:
    source = (
        "def f(a, b, items):\n"
        "    if a < b and not items:\n"
        "        items.append(a + 1)\n"
        "    return min(a, b)\n"
    )
    found = {(mutant.line, mutant.description): mutant.source for mutant in mutants(source)}
    assert found[(2, "< -> <=")].splitlines()[1] == "    if a <= b and not items:"
    assert found[(2, "and -> or")].splitlines()[1] == "    if a < b or not items:"
    assert found[(2, "not dropped")].splitlines()[1] == "    if a < b and (items):"
    assert found[(3, "+ -> -")].splitlines()[2] == "        items.append(a - 1)"
    assert found[(3, "1 -> 2")].splitlines()[2] == "        items.append(a + 2)"
    assert found[(3, "1 -> 0")].splitlines()[2] == "        items.append(a + 0)"
    assert found[(3, "expr removed")].splitlines()[2] == "        pass"
    assert found[(3, "append() -> appendleft()")].splitlines()[2] == "        items.appendleft(a + 1)"
    assert found[(4, "min() -> max()")].splitlines()[3] == "    return max(a, b)"
    assert found[(4, "min(): first two arguments exchanged")].splitlines()[3] == "    return min(b, a)"
    for text in found.values():  # one line changed, the others kept as written
        assert sum(old != new for old, new in zip(source.splitlines(), text.splitlines())) == 1


def test_text_for_people_docstrings_annotations_and_type_checking_are_never_mutated() -> None:
    source = (
        '"""Docstring 1."""\n'
        "import logging\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    LIMIT = 3\n"
        "logger = logging.getLogger(__name__)\n"
        "def f(a: int = 5) -> list[int]:\n"
        '    """Docstring 2."""\n'
        '    logger.warning("%d blocks, 1 left", a + 1)\n'
        '    return "text %d" % a\n'
    )
    assert [(mutant.line, mutant.description) for mutant in mutants(source)] == [
        (7, "5 -> 6"),
    ]


def test_numbers_are_stable_and_spread_takes_evenly_over_the_module() -> None:
    source = SUBJECT_FILE.read_text()
    first, again = mutants(source), mutants(source)
    assert [mutant.number for mutant in first] == list(range(1, len(first) + 1))
    assert [mutant.source for mutant in first] == [mutant.source for mutant in again]
    sample = spread(first, 4)
    assert [mutant.number for mutant in sample] == [1 + index * len(first) // 4 for index in range(4)]
    assert spread(first, None) == first and spread(first, len(first) + 5) == first


TEST_COMMAND = (
    f"{shlex.quote(sys.executable)} -c \"from model_tests.mutation_subject import CountingCache as C; c = C(1024); "
    "c.put(1, b'ab'); b = c.lookups; c.get(1); c.get(1); assert c.lookups - b == 2; assert 1 in c\""
)


def test_the_duel_sorts_each_mutant_by_who_kills_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    numbers = _described(SUBJECT_FILE.read_text())
    # The contract reads get, pop and `in` but never `lookups`; the test command reads `lookups`
    # and calls get and `in`, never pop.
    expected = {
        numbers[(35, "is -> is not")]: "both",  # `in` answers the opposite: both see it
        numbers[(31, "pop() -> popleft()")]: "cacheproof only",  # pop raises AttributeError; the tests never pop
        numbers[(27, "+ -> -")]: "tests only",  # lookups counts down: only the tests read it
        numbers[(24, "0 -> 1")]: "neither",  # lookups starts at 1: the tests read a difference, equivalent for them
    }
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.setenv("PYTHONPATH", str(REPOSITORY))
    report_path, page_path = tmp_path / "duel.json", tmp_path / "duel.html"
    status = main(["mutate", SUBJECT, "--impl", f"{SUBJECT}:CountingCache", "--examples", "30", "--tests", TEST_COMMAND,
                   "--mutants", ",".join(map(str, sorted(expected))), "--workers", "2",
                   "--json", str(report_path), "--html", str(page_path)])
    output = capsys.readouterr().out
    assert status == 1  # a mutant the tests kill survives cacheproof
    report = json.loads(report_path.read_text())
    assert report_errors(report) == []
    assert {mutant["number"]: mutant["category"] for mutant in report["mutants"]} == expected
    assert report["counts"] == {"both": 1, "cacheproof only": 1, "tests only": 1, "neither": 1}
    assert report["ok"] is False and report["interrupted"] is False and report["mutants_run"] == 4
    assert "both 1, cacheproof only 1, tests only 1, neither 1" in output
    assert "-        self.lookups += LOOKUP_STEP\n    +        self.lookups -= LOOKUP_STEP" in output
    page = page_path.read_text()
    assert "Missed by cacheproof" in page and "self.lookups -= LOOKUP_STEP" in page


def test_a_side_failing_on_the_unmutated_module_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.setenv("PYTHONPATH", str(REPOSITORY))
    status = main(["mutate", SUBJECT, "--impl", f"{SUBJECT}:CountingCache", "--examples", "5", "--tests", "exit 3",
                   "--quiet"])
    assert status == 2
    assert "the test command fails on the unmutated model_tests.mutation_subject (killed, exit 3)" in capsys.readouterr().err
