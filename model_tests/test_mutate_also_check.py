"""`cacheproof mutate --also-check "ARGS"`: the checks run in order until one kills; a mutant the
first check misses is killed by a later one (and numbered so), one the first kills never meets the
later ones, an also-check failing on the unmutated module or given wrongly is a usage error before
any mutant runs. The checks are model_tests/mutation_subject_checks.py's, whose verdicts are
reasoned out there."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from cacheproof.cli import main
from cacheproof.mutate.operators import mutants
from model_tests.mutation_subject_checks import RECORD_VARIABLE
from model_tests.report_validation import report_errors

SUBJECT = "model_tests.mutation_subject"
CHECKS = "model_tests.mutation_subject_checks"
REPOSITORY = Path(__file__).resolve().parent.parent
NUMBERS = {(mutant.line, mutant.description): mutant.number
           for mutant in mutants((REPOSITORY / "model_tests" / "mutation_subject.py").read_text())}
LOOKUPS_COUNT_DOWN = NUMBERS[(27, "+ -> -")]
"""`lookups -= LOOKUP_STEP`: the plain check misses it (the contract never reads lookups),
counted_cache kills it, the test command kills it."""
CONTAINS_NEGATED = NUMBERS[(35, "is -> is not")]
"""`in` answers the opposite: the plain check kills it."""
TEST_COMMAND = (
    f"{shlex.quote(sys.executable)} -c \"from model_tests.mutation_subject import CountingCache as C; c = C(1024); "
    "c.put(1, b'ab'); b = c.lookups; c.get(1); c.get(1); assert c.lookups - b == 2\""
)


@pytest.fixture
def in_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The repository as the current folder and on PYTHONPATH; the path of the record file that
    recorded_cache appends to (it does not exist until a check builds one)."""
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.setenv("PYTHONPATH", str(REPOSITORY))
    record = tmp_path / "record"
    monkeypatch.setenv(RECORD_VARIABLE, str(record))
    return record


def _contains_in_order(command: list[str], *parts: list[str]) -> bool:
    """Whether each of `parts` is a run of consecutive items of `command`."""
    return all(any(command[start:start + len(part)] == part for start in range(len(command))) for part in parts)


def test_a_mutant_the_first_check_misses_is_killed_by_the_second(in_repository: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    report_path, page_path = tmp_path / "duel.json", tmp_path / "duel.html"
    status = main(["mutate", SUBJECT, "--impl", f"{SUBJECT}:CountingCache", "--also-check", f"--impl {CHECKS}:counted_cache",
                   "--check-args", "--call-timeout 60", "--examples", "30", "--tests", TEST_COMMAND,
                   "--mutants", str(LOOKUPS_COUNT_DOWN), "--json", str(report_path), "--html", str(page_path)])
    err = capsys.readouterr().err
    assert status == 0  # the tests' kill is cacheproof's too
    report = json.loads(report_path.read_text())
    assert report_errors(report) == []
    [mutant] = report["mutants"]
    assert mutant["category"] == "both"
    assert mutant["cacheproof"]["status"] == "killed" and mutant["cacheproof"]["check"] == 2
    assert "a get counted -1 lookups" in mutant["cacheproof"]["output_tail"]  # the second check's output
    assert "check" not in mutant["tests"]
    [also] = report["also_check_commands"]
    for command in (report["check_command"], also):  # every check: mutate's seed, examples, quiet, --check-args
        assert _contains_in_order(command, ["--seed", "0"], ["--examples", "30"], ["--quiet"])
        assert command[-2:] == ["--call-timeout", "60"]
    assert also[:6] == [sys.executable, "-m", "cacheproof", "check", "--impl", f"{CHECKS}:counted_cache"]
    assert f"#{LOOKUPS_COUNT_DOWN} line 27 arithmetic: + -> -: cacheproof killed by check 2 (" in err
    page = page_path.read_text()
    assert f"--impl {CHECKS}:counted_cache" in page
    assert "<td>both</td><td>2</td>" in page


def test_a_mutant_the_first_check_kills_never_meets_the_second(in_repository: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    report_path = tmp_path / "duel.json"
    status = main(["mutate", SUBJECT, "--impl", f"{SUBJECT}:CountingCache", "--also-check", f"--impl {CHECKS}:recorded_cache",
                   "--examples", "10", "--workers", "2", "--mutants", f"{CONTAINS_NEGATED},{LOOKUPS_COUNT_DOWN}",
                   "--json", str(report_path)])
    err = capsys.readouterr().err
    assert status == 1  # the second check misses the lookups mutant too
    # The second check ran on the unmutated module and on the mutant the first missed, never on the other.
    assert set(in_repository.read_text().split()) == {"original", f"mutant-{LOOKUPS_COUNT_DOWN}"}
    report = json.loads(report_path.read_text())
    assert {mutant["number"]: (mutant["category"], mutant["cacheproof"]["check"]) for mutant in report["mutants"]} == {
        CONTAINS_NEGATED: ("killed", 1), LOOKUPS_COUNT_DOWN: ("survived", None)}
    assert f"#{CONTAINS_NEGATED} line 35 comparison: is -> is not: cacheproof killed by check 1 (" in err
    assert f"#{LOOKUPS_COUNT_DOWN} line 27 arithmetic: + -> -: cacheproof survived (" in err


def test_an_also_check_failing_on_the_unmutated_module_is_a_usage_error_naming_it(
        in_repository: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = f"--impl {SUBJECT}:NoSuchFactory"
    status = main(["mutate", SUBJECT, "--impl", f"{CHECKS}:recorded_cache", "--also-check", missing,
                   "--examples", "5", "--limit", "2", "--json", str(tmp_path / "duel.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert f"check 2 (--also-check '{missing}') fails on the unmutated {SUBJECT}" in err
    assert set(in_repository.read_text().split()) == {"original"}  # the first check ran there; no mutant ran
    assert not (tmp_path / "duel.json").exists()


@pytest.mark.parametrize("arguments, named", [
    ("--profile cache-lru", "lacks --impl"),
    (f"--impl {CHECKS}:counted_cache 'unclosed", "is not a command line"),
    (f"--impl {CHECKS}:counted_cache --seed 3", "--seed"),
    (f"--impl {CHECKS}:counted_cache --examples=5", "--examples"),
    (f"--impl {CHECKS}:counted_cache --budget 1", "--budget"),
    (f"--impl {CHECKS}:counted_cache --quiet", "--quiet"),
    (f"--impl {CHECKS}:counted_cache --see 3", "--seed"),  # as check reads it: an abbreviation of --seed
])
def test_a_wrong_also_check_is_a_usage_error_before_anything_runs(arguments: str, named: str, in_repository: Path,
                                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["mutate", SUBJECT, "--impl", f"{CHECKS}:recorded_cache", "--also-check", arguments,
                   "--examples", "5", "--limit", "1", "--json", str(tmp_path / "duel.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert named in err and arguments in err, err
    assert not in_repository.exists()  # no check ran, not even on the unmutated module
    assert not (tmp_path / "duel.json").exists()
