"""`cacheproof replay`: a checker counterexample round-trips, wrong recordings and broken caches are
found at the right step, bad traces are usage errors."""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.report.state_diff import snapshot_diff
from cacheproof.spec import CacheSpec
from cacheproof.trace.format import spec_trace, write_counterexample_trace
from cacheproof.trace.replay import replay_against_spec
from model_tests.broken_caches import GetDoesNotPromote
from model_tests.cache_checks import check_cache

HEADER = '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 4}'


@pytest.fixture(scope="module")
def counterexample():
    report = check_cache(GetDoesNotPromote, examples=200, seed=0)
    assert report.counterexample is not None
    return report.counterexample


@pytest.fixture
def counterexample_trace(tmp_path, counterexample):
    path = tmp_path / "counterexample.jsonl"
    write_counterexample_trace(path, counterexample)
    return path


def test_broken_cache_diverges_at_the_counterexample_step(tmp_path, counterexample, counterexample_trace, capsys):
    out = tmp_path / "report.json"
    status = main(["replay", str(counterexample_trace), "--impl", "model_tests.broken_caches:GetDoesNotPromote",
                   "--json", str(out)])
    assert status == 1
    report = json.loads(out.read_text())
    steps = len(counterexample.calls)
    assert report["ok"] is False and report["calls"] == steps
    assert report["divergence"]["step"] == steps  # the counterexample diverges at its last call
    assert report["divergence"]["line"] == steps + 1
    assert report["divergence"]["call"]["op"] == "get"
    (snapshots,) = report["divergence"]["state_diff"]["views"]  # the same entries in another recency order
    assert snapshots["view"] == "snapshot" and snapshots["spec"] != snapshots["implementation"]
    assert sorted(snapshots["spec"]) == sorted(snapshots["implementation"])
    assert f"divergence at step {steps} of {steps}" in capsys.readouterr().out


def test_recorded_spec_outcomes_replay_cleanly_on_the_spec(counterexample_trace, capsys):
    assert main(["replay", str(counterexample_trace), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("no divergence")
    assert main(["replay", str(counterexample_trace), "--impl", "cacheproof.spec:CacheSpec", "--quiet"]) == 0


def test_a_wrong_recorded_result_is_a_divergence(tmp_path, capsys):
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([
        HEADER,
        '{"op": "reserve", "args": [0, 4], "kwargs": {}, "result": true}',
        '{"op": "reserve", "args": [1, 1], "kwargs": {}, "result": true}',  # the spec blocks: 4 + 1 > 4
    ]) + "\n")
    assert main(["replay", str(path), "--json", str(tmp_path / "r.json")]) == 1
    divergence = json.loads((tmp_path / "r.json").read_text())["divergence"]
    assert (divergence["step"], divergence["line"]) == (2, 3)
    assert divergence["expected"] == "spec returned False"
    assert divergence["actual"] == "recorded returns True"
    # the same claim against a conforming cache: it matches the spec, so it is the recording that differs
    assert main(["replay", str(path), "--impl", "cacheproof.spec:CacheSpec", "--json", str(tmp_path / "r.json")]) == 1
    divergence = json.loads((tmp_path / "r.json").read_text())["divergence"]
    assert (divergence["step"], divergence["against"]) == (2, "recording")


def test_outcome_divergence_of_a_cache(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([
        HEADER,
        '{"op": "put", "args": [0, {"nbytes": 2, "tag": 3}], "kwargs": {}, "result": true}',
        '{"op": "release", "args": [0], "kwargs": {}, "error": "WrongStateError"}',
    ]) + "\n")
    assert main(["replay", str(path)]) == 0
    capsys.readouterr()
    assert main(["replay", str(path), "--impl", "model_tests.broken_caches:ReleaseOfIdleIsNoop"]) == 1
    out = capsys.readouterr().out
    assert "divergence at step 2 of 2 (trace line 3): cache.release(0)" in out
    assert "expected: spec raised WrongStateError" in out
    assert "actual:   implementation returned False" in out


def test_malformed_or_missing_trace_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(HEADER + "\n" + '{"op": "get", "args": [0]}\n')
    assert main(["replay", str(path)]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["replay", str(path), "--impl", "no_such_module:Cache"]) == 2


def test_snapshot_diff_lists_each_kind_of_difference():
    spec = ((1, "READY", 0, 2, True), (2, "READY", 1, 2, True), (3, "RESERVED", 1, 1, True))
    cache = ((2, "READY", 0, 2, True), (1, "READY", 0, 2, True), (4, "READY", 0, 1, True))
    diff = snapshot_diff(spec, cache)
    assert diff.only_in_spec == ((3, "RESERVED", 1, 1, True),)
    assert diff.only_in_cache == ((4, "READY", 0, 1, True),)
    assert diff.differing == (((2, "READY", 1, 2, True), (2, "READY", 0, 2, True)),)
    assert (diff.spec_order, diff.cache_order) == ((1, 2, 3), (2, 1, 4))
    assert snapshot_diff(spec, spec).empty


def test_a_spec_raising_an_error_outside_its_contract_is_a_bug_of_the_spec_and_propagates(monkeypatch):
    trace = spec_trace(8, [Call("put", (1, ValueRecipe(1, 0))), Call("get", (1,))])

    def broken_get(self, key):
        raise ZeroDivisionError("a bug of the spec")

    monkeypatch.setattr(CacheSpec, "get", broken_get)
    with pytest.raises(ZeroDivisionError, match="a bug of the spec"):
        replay_against_spec(trace)
