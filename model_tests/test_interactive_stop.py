"""An interactive `cacheproof check` (bounded by a time budget) stops at its first shrunk
counterexample and says how to search for more, for every spec kind; a fixed-count run (--examples
N, CI=true, CACHEPROOF_BUDGET=0) still reports every distinct divergence it meets, up to 8
(cacheproof/cmdline/budget.py decides both for both kinds).

The targets have two distinct bugs or more each, which a fixed-count run reports.
"""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main
from cacheproof.cmdline.budget import MAX_DIVERGENCES

TARGETS = [
    pytest.param(["--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool", "--steps", "20"], id="blocks"),
    pytest.param(["--impl", "model_tests.test_divergences:TwoBugs", "--steps", "20"], id="cache"),
]
HINT = f"run again with --max-divergences {MAX_DIVERGENCES}"


def divergences(path) -> int:
    return len(json.loads(path.read_text())["divergences"])


@pytest.mark.parametrize("target", TARGETS)
def test_an_interactive_run_stops_at_the_first_counterexample_and_says_how_to_find_more(
        target, tmp_path, capsys, monkeypatch):
    for name in ("CI", "CACHEPROOF_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    report = tmp_path / "r.json"
    assert main(["check", *target, "--budget", "20", "--json", str(report)]) == 1
    err = capsys.readouterr().err
    assert divergences(report) == 1
    assert err.rstrip().splitlines()[-1].endswith(HINT), err


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fixed", [["--examples", "300"], ["--ci"], ["--budget-variable-0"]], ids=["examples", "ci", "budget-0"])
def test_a_fixed_count_run_reports_every_distinct_divergence(target, fixed, tmp_path, capsys, monkeypatch):
    for name in ("CI", "CACHEPROOF_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    if fixed == ["--ci"]:
        monkeypatch.setenv("CI", "true")
    if fixed == ["--budget-variable-0"]:
        monkeypatch.setenv("CACHEPROOF_BUDGET", "0")
    flags = fixed if fixed == ["--examples", "300"] else []
    report = tmp_path / "r.json"
    assert main(["check", *target, *flags, "--json", str(report)]) == 1
    assert divergences(report) > 1
    assert HINT not in capsys.readouterr().err


def test_max_divergences_given_is_kept_in_an_interactive_run(tmp_path, capsys, monkeypatch):
    for name in ("CI", "CACHEPROOF_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    report = tmp_path / "r.json"
    argv = ["check", "--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool", "--steps", "20", "--budget", "20",
            "--max-divergences", "3", "--json", str(report)]
    assert main(argv) == 1
    assert divergences(report) > 1 and HINT not in capsys.readouterr().err


def test_the_help_says_what_the_default_does(capsys):
    main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("(default: 1 in a run bounded by --budget, which stops at the first counterexample and exits; "
            f"{MAX_DIVERGENCES} in a run of --examples N, under CI=true or with CACHEPROOF_BUDGET=0)") in text
