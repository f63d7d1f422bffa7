"""The checker itself: verdicts, exit codes, the JSON report, and counterexamples that reproduce."""

from __future__ import annotations

import json

import pytest

from cacheproof.contract import calls as call_format
from cacheproof.cli import main
from cacheproof.contract.sequence import first_divergence
from cacheproof.spec import CacheSpec
from model_tests.broken_caches import GetDoesNotPromote, ReleaseOfIdleIsNoop
from model_tests.cache_checks import check_cache, snippet

BROKEN = "model_tests.broken_caches"


def test_spec_conforms_to_itself():
    report = check_cache(CacheSpec, examples=40)
    assert report.ok
    assert report.counterexample is None
    assert report.steps > 40


def test_exit_status_zero_when_conforming(capsys):
    assert main(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "20", "--quiet"]) == 0
    assert "conforms" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--max-divergences", "1", "--impl", "no_such_module_anywhere:factory"],
        ["check", "--max-divergences", "1", "--impl", "cacheproof.spec:NoSuchFactory"],
        ["check", "--max-divergences", "1", "--impl", "missing-colon"],
        ["check", "--examples", "0"],
        ["check", "--no-such-flag"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_two(argv, capsys):
    assert main(argv) == 2


def test_json_report_has_the_contract_fields(tmp_path):
    path = tmp_path / "report.json"
    status = main(["check", "--max-divergences", "1", "--impl", f"{BROKEN}:ReleaseOfIdleIsNoop", "--json", str(path), "--quiet"])
    report = json.loads(path.read_text())
    assert status == 1
    assert {"ok", "examples", "steps", "seconds", "scope", "divergences", "first_failure_example"} <= set(report)
    assert report["ok"] is False
    counterexample = report["divergences"][0]
    assert {"size", "calls", "kind", "message", "differences", "why", "state_diff", "snippet"} <= set(counterexample)
    assert all(set(call) == {"op", "args", "kwargs"} for call in counterexample["calls"])
    assert any(
        isinstance(arg, dict) and set(arg) == {"nbytes", "tag", "element_size"}
        for call in counterexample["calls"]
        for arg in call["args"]
    ), "values are written as the checker's recipe"


def test_conforming_json_report_has_null_counterexample(tmp_path):
    path = tmp_path / "report.json"
    assert main(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "10", "--json", str(path), "--quiet"]) == 0
    report = json.loads(path.read_text())
    assert report["ok"] is True and report["divergences"] == []
    assert report["steps"] > 0 and report["seconds"] > 0


def test_json_counterexample_replays_to_the_same_divergence(tmp_path):
    path = tmp_path / "report.json"
    main(["check", "--max-divergences", "1", "--impl", f"{BROKEN}:GetDoesNotPromote", "--json", str(path), "--quiet"])
    counterexample = json.loads(path.read_text())["divergences"][0]
    calls = [call_format.from_json(call) for call in counterexample["calls"]]
    capacity = counterexample["size"]
    divergence = first_divergence(GetDoesNotPromote, capacity, calls)
    assert divergence is not None and divergence.step == len(calls) - 1
    assert first_divergence(CacheSpec, capacity, calls) is None


def test_printed_snippet_reproduces_the_failure():
    report = check_cache(ReleaseOfIdleIsNoop)
    printed = snippet(report.counterexample, f"{BROKEN}:ReleaseOfIdleIsNoop")
    with pytest.raises(AssertionError, match="expected WrongStateError"):
        exec(compile(printed, "<counterexample>", "exec"), {})
    fixed = printed.replace(f"from {BROKEN} import ReleaseOfIdleIsNoop", "from cacheproof.spec import CacheSpec")
    exec(compile(fixed, "<counterexample on the spec>", "exec"), {})


def test_same_seed_same_run():
    first = check_cache(GetDoesNotPromote, seed=7)
    second = check_cache(GetDoesNotPromote, seed=7)
    assert first.counterexample == second.counterexample
    assert first.steps == second.steps
