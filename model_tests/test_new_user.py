"""Messages a new user meets (issue 11): each says what is the matter, not something else."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from cacheproof.spec import CacheSpec
from hypothesis.configuration import storage_directory

from cacheproof.check.programs.run import DEFAULT_EXAMPLES
from model_tests.cache_checks import check_cache
from cacheproof.cli import command_parser, main
from cacheproof.cmdline.budget import DEFAULT_BUDGET_SECONDS
from cacheproof.docs.command import GENERATED
from cacheproof.settings import scratch_storage
from model_tests.broken_caches import ClearDropsBusyEntries
from model_tests.browser import BROWSER_NAMES

ROOT = Path(__file__).resolve().parent.parent
BROKEN = "model_tests.broken_caches"


def test_docs_check_outside_a_clone_says_there_are_no_docs_here(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["docs", "--check"]) == 2
    out, err = capsys.readouterr()
    assert "not the root of a cacheproof checkout" in err and "--out DIR" in err
    assert "out of date" not in out + err
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("a project of one's own\n")
    assert main(["docs", "--check", "--out", "docs"]) == 2
    out, err = capsys.readouterr()
    assert "'docs' holds none of invariants.md, lifecycle.md" in err and "out of date" not in out + err


def test_docs_outside_a_clone_writes_nothing_without_out(tmp_path, monkeypatch, capsys):
    """`cacheproof docs` in a user's project neither creates docs/ nor writes into the one it has."""
    monkeypatch.chdir(tmp_path)
    assert main(["docs"]) == 2
    assert "nothing was written" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "docs").mkdir()
    assert main(["docs"]) == 2 and list((tmp_path / "docs").iterdir()) == []
    assert main(["docs", "--out", "generated"]) == 0
    assert sorted(path.name for path in (tmp_path / "generated").iterdir()) == sorted(GENERATED)
    assert main(["docs", "--out", "missing/generated"]) == 2, "never the parents of --out"
    assert not (tmp_path / "missing").exists()


def test_docs_in_the_root_of_the_checkout_checks_its_docs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["docs", "--check"]) == 0
    assert capsys.readouterr().err == ""


def test_docs_check_in_the_clone_still_reports_a_stale_document(tmp_path, capsys):
    (tmp_path / "invariants.md").write_text("stale\n")
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"out of date: {tmp_path / 'invariants.md'}" in out and f"out of date: {tmp_path / 'lifecycle.md'}" in out


def test_replay_of_a_check_report_says_it_is_a_report_and_what_to_replay(tmp_path, capsys):
    report = tmp_path / "report.json"
    assert main(["check", "--max-divergences", "1", "--impl", f"{BROKEN}:ClearDropsBusyEntries", "--steps", "10", "--json", str(report), "--quiet"]) == 1
    capsys.readouterr()
    assert main(["replay", str(report)]) == 2
    err = capsys.readouterr().err
    assert "this is a `cacheproof check --json` report, not a trace" in err and "--trace-out" in err
    assert "not JSON" not in err
    report.write_text(json.dumps(json.loads(report.read_text())))  # the same report on one line
    assert main(["replay", str(report)]) == 2
    assert "`cacheproof check --json` report" in capsys.readouterr().err


def test_replay_of_another_json_document_says_a_trace_is_json_lines(tmp_path, capsys):
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps({"capacity_bytes": 8, "calls": []}, indent=2))
    assert main(["replay", str(path)]) == 2
    assert "one JSON document over several lines, not a trace" in capsys.readouterr().err


def test_quiet_prints_only_the_verdict_line(capsys):
    argv = ["check", "--max-divergences", "1", "--impl", f"{BROKEN}:ClearDropsBusyEntries", "--examples", "50", "--steps", "10"]
    assert main([*argv, "--quiet"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("counterexample ("), lines
    assert main(argv) == 1
    assert "# cacheproof counterexample" in capsys.readouterr().out  # without --quiet the snippet is there


def test_quiet_under_threads_prints_only_the_verdict_line(capsys):
    argv = ["check", "--threads", "3", "--impl", "model_tests.racy_caches:LostRefcountUpdate", "--examples", "100"]
    assert main([*argv, "--quiet"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("not linearizable ("), lines


def test_examples_counts_what_the_flag_asks_for():
    """30 examples are 30 programs run, however many Hypothesis draws."""
    report = check_cache(CacheSpec, examples=30, steps=100, seed=0)
    assert report.ok and report.examples == 30
    failing = check_cache(ClearDropsBusyEntries, examples=30, steps=10)
    assert not failing.ok and 1 <= failing.examples <= 30  # the sequences up to and with the first failure


def test_check_help_gives_the_defaults(capsys):
    assert main(["check", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_EXAMPLES} under CI=true or with --budget 0)" in text
    assert f"(default {DEFAULT_BUDGET_SECONDS:g}, or $CACHEPROOF_BUDGET" in text
    assert f"(default {command_parser('check').parse_args(['check']).steps})" in text
    assert "--quiet print only the verdict line, without the table and the snippet" in text


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items() if name != "HYPOTHESIS_STORAGE_DIRECTORY"}
    environment.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", "cacheproof", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)


def test_check_leaves_no_hypothesis_folder_in_the_current_folder(tmp_path):
    done = _cli(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "3", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_check_keeps_the_storage_folder_the_user_chose(tmp_path, monkeypatch):
    chosen = tmp_path / "storage"
    done = _cli(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "3", "--quiet"], tmp_path,
                HYPOTHESIS_STORAGE_DIRECTORY=str(chosen))
    assert done.returncode == 0, done.stderr
    assert {path.name for path in tmp_path.iterdir()} <= {"storage"}  # no .hypothesis/ beside it
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(chosen))
    before = getattr(storage_directory(), "home_directory", storage_directory())
    with scratch_storage():
        assert getattr(storage_directory(), "home_directory", storage_directory()) == before


def test_check_in_process_restores_hypothesis_storage(capsys):
    before = getattr(storage_directory(), "home_directory", storage_directory())
    assert main(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "2", "--quiet"]) == 0
    assert getattr(storage_directory(), "home_directory", storage_directory()) == before


def test_the_command_warns_in_a_folder_where_cacheproof_would_be_a_namespace_package(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["profiles"]) == 0
    assert "warning" not in capsys.readouterr().err
    (tmp_path / "cacheproof").mkdir()
    assert main(["profiles"]) == 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'cacheproof'} has no __init__.py" in err and "empty namespace package" in err
    assert "editable_mode=strict" in err
    (tmp_path / "cacheproof" / "__init__.py").write_text("")  # a regular package: no namespace, no warning
    assert main(["profiles"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_script_beside_an_empty_cacheproof_folder_gets_the_namespace_package(tmp_path):
    """What README's Troubleshooting describes, seen from the script: the folder wins over an
    install found by a finder (editable), and loses to a regular package on sys.path."""
    (tmp_path / "cacheproof").mkdir()
    script = (
        "import os, sys\n"
        "regular = [p for p in sys.path[1:] if os.path.isfile(os.path.join(p, 'cacheproof', '__init__.py'))]\n"
        "import cacheproof\n"
        "print(bool(regular), getattr(cacheproof, '__file__', None) is not None, hasattr(cacheproof, 'monitor'))\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    regular, has_file, has_monitor = done.stdout.split()
    assert has_file == has_monitor == regular, done.stdout


def _path_without_a_browser() -> str:
    """PATH with every folder that holds a browser the report's browser tests look for left out."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(folder for folder in folders
                           if not any(os.access(Path(folder) / name, os.X_OK) for name in BROWSER_NAMES))


ANOTHER_TEST = "model_tests/test_new_user.py::test_docs_check_outside_a_clone_says_there_are_no_docs_here"
"""A quick test run beside the browser tests, as the rest of the suite is (a run of none exits 5)."""


def _browser_tests_without_a_browser(ci: str | None) -> subprocess.CompletedProcess:
    """The README test command's pytest (its ini options) on the browser tests and `ANOTHER_TEST`,
    with no browser on PATH."""
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env.update(PATH=_path_without_a_browser(), PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "model_tests/test_report_browser.py", ANOTHER_TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_without_a_browser_the_browser_tests_skip_with_one_line_saying_what_to_install():
    """A fresh machine has no Chromium (issue 35): the README's test command still passes, and says
    in one line of its summary what to install to run the tests that skipped."""
    done = _browser_tests_without_a_browser(ci=None)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed, 1 skipped" in done.stdout and "failed" not in done.stdout
    lines = [line for line in done.stdout.splitlines() if "Chromium is missing" in line]
    assert len(lines) == 1 and lines[0].startswith("SKIPPED [1] model_tests/test_report_browser.py"), done.stdout
    assert "apt-get install -y chromium" in lines[0]


def test_without_a_browser_under_ci_the_browser_tests_fail():
    """CI installs Chromium; if it is missing there all the same, the tests fail rather than skip."""
    tests = len(re.findall(r"^def test_", (ROOT / "model_tests" / "test_report_browser.py").read_text(), re.MULTILINE))
    done = _browser_tests_without_a_browser(ci="true")
    assert done.returncode == 1, done.stdout[-3000:]
    assert f"1 passed, {tests} errors" in done.stdout and "skipped" not in done.stdout
    assert "Chromium is missing" in done.stdout and "apt-get install -y chromium" in done.stdout
