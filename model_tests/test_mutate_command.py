"""tools/mutate.py: argument parsing, the missing-tool exit, staging under the package-dir mapping,
and one real mutmut run on a two-mutant fixture where one mutant is killed and one survives."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tools import mutate
from tools.mutate import MutationReport, PathScore, Survivor, format_report, stage_workspace

_FIXTURE_FILES = {
    "pyproject.toml": '[tool.setuptools.package-dir]\n"tiny" = "tiny"\n"tiny.core" = "core"\n',
    "tiny/__init__.py": "",
    "core/__init__.py": "",
    "core/arith.py": "def double(number: int) -> int:\n    return number * 2\n",
    "tests/test_arith.py": (
        "from tiny.core.arith import double\n\n\n"
        "def test_double_grows_one() -> None:\n"
        "    assert double(1) > 1\n"
    ),
}


def _write_fixture(root: Path) -> Path:
    for name, text in _FIXTURE_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert mutate.main(["--help"]) == 0
    shown = capsys.readouterr().out
    for option in ("--paths", "--json", "--quiet", "--target"):
        assert option in shown


def test_missing_mutmut_exits_2_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(mutate.importlib.util, "find_spec", lambda name: None)
    assert mutate.main([]) == 2
    assert "pip install 'mutmut>=3'" in capsys.readouterr().err


def test_staging_places_a_mapped_folder_under_its_package_name(tmp_path: Path) -> None:
    root = _write_fixture(tmp_path / "root")
    workdir = tmp_path / "work"
    staged = stage_workspace(root, workdir, ["core", "core/arith.py"], ["tests/test_arith.py"])
    assert staged == {"core": "src/tiny/core", "core/arith.py": "src/tiny/core/arith.py"}
    assert (workdir / "src/tiny/core/arith.py").read_text() == _FIXTURE_FILES["core/arith.py"]
    assert (workdir / "src/tiny/__init__.py").exists()
    assert (workdir / "tests/test_arith.py").exists()
    assert "differing_executors" in (workdir / "conftest.py").read_text()


def test_staging_copies_docs_for_tests_that_read_committed_files(tmp_path: Path) -> None:
    # model_tests/test_mutation_killers.py compares a rendering with the committed docs/lifecycle.md.
    root = _write_fixture(tmp_path / "root")
    (root / "docs").mkdir()
    (root / "docs" / "page.md").write_text("committed\n")
    workdir = tmp_path / "work"
    stage_workspace(root, workdir, ["core"], ["tests/test_arith.py"])
    assert (workdir / "docs" / "page.md").read_text() == "committed\n"
    assert '"docs"' in (workdir / "pyproject.toml").read_text()  # mutmut copies it beside the mutants


def test_staging_without_docs_does_not_ask_mutmut_to_copy_them(tmp_path: Path) -> None:
    root = _write_fixture(tmp_path / "root")
    stage_workspace(root, tmp_path / "work", ["core"], ["tests/test_arith.py"])
    assert '"docs"' not in (tmp_path / "work" / "pyproject.toml").read_text()


def test_staging_refuses_a_path_outside_every_package(tmp_path: Path) -> None:
    root = _write_fixture(tmp_path / "root")
    with pytest.raises(ValueError, match="not inside"):
        stage_workspace(root, tmp_path / "work", ["tests"], ["tests/test_arith.py"])


def test_the_target_is_met_only_when_every_path_reaches_it() -> None:
    report = MutationReport(target=95.0, scores=[PathScore("a", killed=19, total=20), PathScore("b", 18, 20)])
    assert not report.met
    assert MutationReport(target=90.0, scores=report.scores).met
    assert "b: 18/20 killed (90.0%)" in format_report(report)


def test_the_report_lists_each_survivor_with_its_place_and_change() -> None:
    survivor = Survivor(
        name="m.x_f__mutmut_1",
        path="spec/m.py",
        line=7,
        status="survived",
        diff="--- a\n+++ a\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2",
    )
    report = MutationReport(target=95.0, scores=[PathScore("spec", 0, 1)], survivors=[survivor])
    shown = format_report(report)
    assert "survived: spec/m.py:7 m.x_f__mutmut_1" in shown
    assert "    -    return 1\n    +    return 2" in shown
    assert "target 95.0% NOT met; 1 mutants not killed" in shown
    assert "spec/m.py:7" not in format_report(report, quiet=True)


@pytest.mark.skipif(importlib.util.find_spec("mutmut") is None, reason="mutmut is not installed")
def test_a_real_run_kills_one_mutant_and_reports_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _write_fixture(tmp_path / "root")
    report_path = tmp_path / "report.json"
    argv = ["--root", str(root), "--paths", "core", "--tests", "tests/test_arith.py"]
    exit_code = mutate.main([*argv, "--max-children", "1", "--workdir", str(tmp_path / "work"), "--json", str(report_path)])
    shown = capsys.readouterr().out
    # `number * 2` gives two mutants: `number / 2` (double(1) == 0.5, killed) and `number * 3` (survives).
    assert exit_code == 1
    assert "core: 1/2 killed (50.0%)" in shown
    assert "survived: core/arith.py:2" in shown
    assert "+    return number * 3" in shown
    report = json.loads(report_path.read_text())
    assert report["met"] is False
    assert report["scores"] == [{"path": "core", "killed": 1, "total": 2, "percent": 50.0}]
    assert [(s["path"], s["line"]) for s in report["survivors"]] == [("core/arith.py", 2)]


@pytest.mark.skipif(importlib.util.find_spec("mutmut") is None, reason="mutmut is not installed")
def test_a_timeout_is_rechecked_in_a_fresh_process(tmp_path: Path) -> None:
    # mutmut reported spurious timeouts for mutants whose tests pass in seconds. Mark both fixture
    # mutants as timed out (SIGXCPU, exit code -24): the recheck finds `number / 2` killed (double(1) is
    # 0.5) and `number * 3` surviving, and the report counts only the first as killed.
    root = _write_fixture(tmp_path / "root")
    workdir = tmp_path / "work"
    argv = ["--root", str(root), "--paths", "core", "--tests", "tests/test_arith.py"]
    assert mutate.main([*argv, "--max-children", "1", "--workdir", str(workdir), "--quiet"]) == 1
    meta = workdir / "0-core" / "mutants" / "src" / "tiny" / "core" / "arith.py.meta"
    data = json.loads(meta.read_text())
    data["exit_code_by_key"] = {name: -24 for name in data["exit_code_by_key"]}
    meta.write_text(json.dumps(data))
    rechecked = mutate.recheck_timeouts(workdir / "0-core", ["tests/test_arith.py"], limit_s=120)
    assert sorted(rechecked.values()) == ["killed", "survived (timed out under mutmut only)"]
    report = mutate.read_report(workdir / "0-core", {"core": "src/tiny/core"}, 95.0, rechecked)
    assert [(score.killed, score.total) for score in report.scores] == [(1, 2)]
    assert [survivor.status for survivor in report.survivors] == ["survived (timed out under mutmut only)"]
    assert "+    return number * 3" in report.survivors[0].diff
