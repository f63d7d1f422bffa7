"""`cacheproof check --threads`: it finds every racy cache, with a counterexample that fails when run,
and never flags a correctly locked cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cacheproof.check.concurrent.history import fast_switching, run_scenario
from cacheproof.check.concurrent.linearizability import check_history
from cacheproof.check.concurrent.run import run_concurrent_check
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.cli import main
from cacheproof.spec.kinds import get_kind
from model_tests.racy_caches import DEADLOCKING_CACHES, RACY_CACHES, LockedCacheSpec

REPOSITORY = Path(__file__).resolve().parent.parent
CACHE = get_kind("cache")


@pytest.mark.parametrize("racy", RACY_CACHES, ids=lambda cls: cls.__name__)
def test_check_threads_finds_the_race(racy, tmp_path, capsys):
    path = tmp_path / "report.json"
    impl = f"model_tests.racy_caches:{racy.__name__}"
    status = main(["check", "--threads", "3", "--impl", impl, "--examples", "100", "--json", str(path)])
    out = capsys.readouterr().out
    assert status == 1, out
    counterexample = json.loads(path.read_text())["divergences"][0]
    scenario = Scenario.from_json(counterexample["scenario"], CACHE)
    assert counterexample["recorded_history"]["events"] and counterexample["history"]
    assert len(scenario.threads) >= 2, "a one-thread failure would be a sequential bug, not a race"
    assert "not linearizable" in out and "observed history:" in out and "run_scenario(KIND, factory, SCENARIO" in out
    # The same scenario on the correctly locked spec is linearizable however it interleaves.
    with fast_switching():
        for _ in range(50):
            assert check_history(CACHE, scenario, run_scenario(CACHE, LockedCacheSpec, scenario)).ok


@pytest.mark.parametrize("racy", RACY_CACHES[:1], ids=lambda cls: cls.__name__)
def test_the_reported_history_is_itself_the_proof(racy):
    """Checked again, the history the report keeps is not linearizable, for the reason given."""
    report = run_concurrent_check(CACHE, racy, threads=3, scenarios=100, shrink_seconds=5)
    example = report.counterexample
    verdict = check_history(CACHE, example.scenario, example.history)
    assert verdict.ok is False and verdict.reason == example.reason


@pytest.mark.parametrize("deadlocking", DEADLOCKING_CACHES, ids=lambda cls: cls.__name__)
def test_a_deadlock_is_reported_as_a_thread_that_never_returns(deadlocking):
    report = run_concurrent_check(CACHE, deadlocking, threads=2, scenarios=200, runs=20, timeout=0.5, shrink_seconds=0)
    assert not report.ok
    reason, history = report.counterexample.reason, report.counterexample.history
    assert "never returned" in reason and "a deadlock" in reason
    assert history.prefix_stuck or any(event.responded is None for event in history.events)


def test_the_printed_counterexample_fails_when_run(tmp_path, capsys):
    impl = "model_tests.racy_caches:LostRefcountUpdate"
    assert main(["check", "--threads", "3", "--impl", impl, "--examples", "100"]) == 1
    out = capsys.readouterr().out
    script = tmp_path / "counterexample.py"
    script.write_text(out[out.index("# cacheproof concurrent counterexample"):])
    environment = dict(os.environ, PYTHONPATH=str(REPOSITORY))
    finished = subprocess.run(
        [sys.executable, str(script)], cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "AssertionError: attempt" in finished.stderr


@pytest.mark.parametrize(
    "impl", ["model_tests.racy_caches:LockedCacheSpec", "model_tests.test_concurrent_check:cpu_tensor_cache"]
)
def test_correctly_locked_caches_are_never_flagged(impl, tmp_path, capsys):
    path = tmp_path / "report.json"
    status = main(["check", "--threads", "4", "--impl", impl, "--examples", "40", "--quiet", "--json", str(path)])
    assert status == 0, capsys.readouterr().out
    report = json.loads(path.read_text())
    assert report["ok"] and report["examples"] == 40 and report["steps"] == 40 * 20 and report["seed"] == 0
    assert report["divergences"] == [] and report["runs_per_scenario"] == 20


def cpu_tensor_cache(capacity_bytes: int):
    from cacheproof.impl import TensorLRUCache

    return TensorLRUCache(capacity_bytes, device="cpu")


@pytest.mark.parametrize("arguments", [["--threads", "5"], ["--threads", "1"], ["--threads", "2", "--trace-out", "t.jsonl"]])
def test_usage_errors_exit_2(arguments, capsys):
    assert main(["check", "--impl", "model_tests.racy_caches:LockedCacheSpec", *arguments]) == 2


class _ExitsInGet(LockedCacheSpec):
    """get raises SystemExit: a BaseException from a call (all run in threads) is a crash, not a lost thread."""

    def get(self, key):
        raise SystemExit(3)


def test_a_base_exception_in_a_thread_is_reported_as_a_crash():
    report = run_concurrent_check(CACHE, _ExitsInGet, threads=2, scenarios=200, runs=2, shrink_seconds=0)
    assert not report.ok
    reason = report.counterexample.reason
    assert "crashed" in reason and "raises SystemExit: 3" in reason and "not a contract error" in reason


def test_ctrl_c_stops_with_status_130_and_restores_the_switch_interval(monkeypatch, capsys):
    from cacheproof.check.concurrent import history as concurrent_history

    before = sys.getswitchinterval()
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(args)
        if len(calls) == 30:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    original = concurrent_history.run_scenario
    monkeypatch.setattr("cacheproof.check.concurrent.run.run_scenario", interrupted)
    status = main(["check", "--threads", "2", "--impl", "model_tests.racy_caches:LockedCacheSpec", "--quiet"])
    assert status == 130
    assert "interrupted: 1 scenarios, 20 runs; no verdict" in capsys.readouterr().out
    assert sys.getswitchinterval() == before


def test_check_then_act_admits_two_reservations_past_the_capacity():
    from cacheproof.contract.calls import Call
    from model_tests.racy_caches import CheckThenActReservation

    scenario = Scenario(8, (), ((Call("reserve", (1, 8)),), (Call("reserve", (2, 8)),)))
    verdicts = [check_history(CACHE, scenario, run_scenario(CACHE, CheckThenActReservation, scenario))
                for _ in range(20)]
    # the racy window is forced (model_tests/forced_interleaving.py): every run shows the race, whatever the scheduler
    assert not any(verdict.ok for verdict in verdicts), "a run in which only one reservation fitted"
    failure = verdicts[0]
    assert "cache.reserve(" in failure.reason and "returned True, but there the spec returned False" in failure.reason
