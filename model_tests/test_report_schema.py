"""Every command's JSON report follows the one versioned schema shipped in the package
(cacheproof/schemas/report-v1.json), checked with the `jsonschema` library; a wrong report fails it.

Besides these small runs of every command, the suite's conftest.py validates every report any test
writes (`every_report_is_valid`)."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from cacheproof.bench import _KINDS as BENCH_KINDS
from cacheproof.cli import main
from cacheproof.cmdline.reports import REPORT_LOG_VARIABLE, REPORT_SCHEMA, report_of, schema, write_report
from cacheproof.contract.calls import Call, from_json
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.version import __version__
from model_tests.report_validation import logged_report_errors, report_errors

ROOT = Path(__file__).resolve().parent.parent
CLEAR = "model_tests.broken_caches:ClearDropsBusyEntries"
DOUBLE_FREE = "model_tests.block_pools:DoubleFreePool"


def _report(argv: list[str], path: Path, status: int) -> dict:
    assert main([*argv, "--json", str(path)]) == status
    report = json.loads(path.read_text())
    assert report_errors(report) == []
    return report


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reports")


@pytest.fixture(scope="module")
def cache_trace(folder: Path) -> Path:
    path = folder / "cache.jsonl"
    assert main(["check", "--impl", CLEAR, "--steps", "10", "--max-divergences", "1", "--quiet",
                 "--trace-out", str(path)]) == 1
    return path


@pytest.fixture(scope="module")
def block_trace(folder: Path) -> Path:
    """A free of a block the request does not hold, then an allocation: DoubleFreePool counts the
    block free and diverges."""
    path = folder / "blocks.jsonl"
    calls = [Call("free", (1, ())), Call("allocate_slots", (1, (0,)))]
    path.write_text(trace_text(spec_trace(1, calls, kind="blocks")))
    return path


def test_the_schema_is_a_draft_2020_12_schema_shipped_in_the_package():
    shipped = json.loads(resources.files("cacheproof").joinpath("schemas", "report-v1.json").read_text())
    Draft202012Validator.check_schema(shipped)
    assert shipped == schema()
    assert shipped["properties"]["schema"]["const"] == REPORT_SCHEMA
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "schemas/*.json" in package_data["cacheproof"]
    assert set(shipped["$defs"]["bench"]["properties"]["bench"]["enum"]) == set(BENCH_KINDS)


def test_the_envelope_names_the_tool_hypothesis_and_the_time(tmp_path: Path, capsys):
    checked = _report(["check", "--impl", "cacheproof.spec:CacheSpec", "--examples", "3", "--quiet"],
                      tmp_path / "check.json", 0)
    assert (checked["schema"], checked["command"], checked["tool"]) == (
        "cacheproof/report/v1", "check", {"name": "cacheproof", "version": __version__})
    assert re.fullmatch(r"\d+\.\d+\.\d+", checked["hypothesis_version"])
    assert checked["created"].endswith("+00:00")
    with pytest.raises(ValueError, match="command"):
        report_of("check", {"ok": True, "command": "prove"})
    with pytest.raises(ValueError, match="one of"):
        report_of("no-such-command", {})


def test_a_conforming_check_reports_what_was_asked_and_no_divergence(tmp_path: Path):
    report = _report(["check", "--impl", "cacheproof.spec:CacheSpec", "--examples", "3", "--steps", "7",
                      "--seed", "5", "--ops", "put,get,contains", "--quiet"], tmp_path / "r.json", 0)
    assert report["ok"] is True and report["divergences"] == [] and report["interrupted"] is False
    assert (report["spec"], report["impl"], report["profile"]) == ("cache", "cacheproof.spec:CacheSpec", "contract")
    assert report["semantics"] == {} and report["operations"] == ["put", "get", "contains"]
    assert (report["seed"], report["budget"], report["examples"]) == (5, {"examples": 3, "steps": 7}, 3)
    assert report["keys"] and report["threads"] is None
    assert report["first_failure_example"] is None and report["first_failure_seconds"] is None


@pytest.mark.parametrize("spec, passing, failing", [
    ("cache", "cacheproof.spec:CacheSpec", CLEAR),
    ("blocks", "model_tests.block_pools:ListBlockPool", "model_tests.block_pools:DoubleFreePool"),
])
def test_every_kind_prints_one_verdict_line_and_reports_its_first_shrunk_counterexample_s_time(
        spec, passing, failing, tmp_path: Path, capsys):
    """Issue 32: the lines of a verdict and the JSON's timing fields are written once for every kind."""
    _report(["check", "--spec", spec, "--impl", passing, "--examples", "5", "--steps", "20", "--quiet"],
            tmp_path / "ok.json", 0)
    assert re.fullmatch(r"conforms: 5 examples, [0-9]+ steps, [0-9]+ steps/s\n", capsys.readouterr().out)
    report = _report(["check", "--spec", spec, "--impl", failing, "--quiet", "--max-divergences", "1"],
                     tmp_path / "failed.json", 1)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(f"counterexample ({len(report['divergences'][0]['calls'])} calls): "), line
    assert 0 <= report["first_failure_seconds"] <= report["first_report_seconds"] <= report["seconds"]


@pytest.mark.parametrize("spec, failing", [
    ("cache", CLEAR), ("blocks", "model_tests.block_pools:DoubleFreePool"),
])
def test_every_kind_prints_its_first_counterexample_before_searching_for_further_ones(spec, failing, capsys):
    assert main(["check", "--spec", spec, "--impl", failing, "--examples", "50", "--max-divergences", "2"]) == 1
    ready = [line for line in capsys.readouterr().err.splitlines() if " ready at " in line]
    assert len(ready) == 1 and ready[0].startswith("counterexample ("), ready


def test_a_failing_check_counts_the_failing_example_within_the_budget(tmp_path: Path, capsys):
    report = _report(["check", "--impl", CLEAR, "--steps", "10"], tmp_path / "r.json", 1)
    out = capsys.readouterr().out
    assert report["ok"] is False and report["budget"]["examples"] == 200
    assert 1 <= report["first_failure_example"] <= report["examples"] <= 200
    assert 0 <= report["first_failure_seconds"] <= report["seconds"]
    assert f"{report['examples']} of 200; the " in out and " failed first" in out
    divergence = report["divergences"][0]
    assert divergence["calls"][-1]["op"] == "clear" and divergence["size"] >= 1
    assert [from_json(call) for call in divergence["calls"]]
    snapshots = {view["view"]: view for view in divergence["state_diff"]["views"]}["snapshot"]
    kept = {tuple(entry) for entry in snapshots["spec"]} - {tuple(entry) for entry in snapshots["implementation"]}
    assert any(entry[1] != "READY" or entry[2] > 0 for entry in kept), "the cache dropped a busy entry the spec keeps"
    with pytest.raises(AssertionError):
        exec(compile(divergence["snippet"], "<snippet>", "exec"), {})


def test_check_of_the_block_pool_reports_each_divergence_with_its_view_diff(tmp_path: Path):
    report = _report(["check", "--spec", "blocks", "--impl", DOUBLE_FREE, "--examples", "20", "--max-divergences", "2",
                      "--quiet"],
                     tmp_path / "r.json", 1)
    assert report["spec"] == "blocks" and len(report["divergences"]) >= 1
    for divergence in report["divergences"]:
        assert "views" in divergence["state_diff"] and divergence["snippet"]
        assert divergence["kind"].startswith(divergence["calls"][-1]["op"] + ":")
    assert report["first_failure_example"] <= report["examples"] <= report["budget"]["examples"]
    conforming = _report(["check", "--spec", "blocks", "--examples", "10", "--quiet"], tmp_path / "ok.json", 0)
    assert conforming["ok"] is True and conforming["examples"] == 10


def test_check_under_threads_reports_the_scenario_and_history(tmp_path: Path):
    # a racy cache whose race is forced (model_tests/forced_interleaving.py): found within the first five scenarios of seed 0
    report = _report(["check", "--threads", "2", "--impl", "model_tests.racy_caches:CheckThenActReservation",
                      "--examples", "5", "--quiet"], tmp_path / "r.json", 1)
    divergence = report["divergences"][0]
    assert report["threads"] == 2 and report["runs_per_scenario"] >= 1
    assert divergence["kind"] == "not linearizable" and divergence["history"] and divergence["snippet"]
    scenario = divergence["scenario"]
    assert len(divergence["calls"]) == len(scenario["prefix"]) + sum(map(len, scenario["threads"]))
    blocks = _report(["check", "--spec", "blocks", "--threads", "2", "--examples", "3", "--quiet"],
                     tmp_path / "blocks.json", 0)
    assert blocks["ok"] is True and blocks["examples"] == 3


def test_prove_reports_each_obligation_and_what_it_proves(tmp_path: Path, capsys):
    report = _report(["prove", "--slots", "2", "--refine-capacity", "2", "--refine-entries", "1"],
                     tmp_path / "r.json", 0)
    out = capsys.readouterr().out
    assert "nothing about your code" in report["proves"] and "nothing about your code" in out
    assert report["command"] == "prove" and report["hypothesis_version"] is None
    (target,) = report["targets"]
    assert all(o["verdict"] == "proved" for o in target["obligations"])
    assert target["refinement"]["agrees"] is True and report["bound"]["slots"] == 2
    blocks = _report(["prove", "--spec", "blocks", "--slots", "2", "--no-refine", "--quiet"], tmp_path / "b.json", 0)
    assert blocks["spec"] == "blocks" and blocks["targets"][0]["refinement"] is None


def test_prove_of_a_waived_option_reports_the_counterexamples_as_waived(tmp_path: Path):
    report = _report(["prove", "--slots", "2", "--no-refine", "--semantics", "clear_busy=drop", "--quiet"],
                     tmp_path / "r.json", 0)
    waived = [o for o in report["targets"][0]["obligations"] if o["verdict"] == "does not hold as waived"]
    assert report["targets"][0]["semantics"] == {"clear_busy": "drop"}
    assert waived and all(o["invariant"] == "I5" and o["counterexample"] for o in waived)


def test_prove_block_table_writes_its_report(tmp_path: Path):
    report = _report(["prove", "--block-table", "--quiet"], tmp_path / "r.json", 0)
    obligations = report["targets"][0]["obligations"]
    assert report["spec"] == "block-table"
    assert sum(o["verdict"] == "does not hold as waived" for o in obligations) == 2, "seed 000's two counterexamples"


def test_replay_of_both_trace_kinds(tmp_path: Path, cache_trace: Path, block_trace: Path):
    clean = _report(["replay", str(cache_trace), "--quiet"], tmp_path / "1.json", 0)
    assert clean["ok"] is True and clean["divergence"] is None and clean["spec"] == "cache"
    diverging = _report(["replay", str(cache_trace), "--impl", CLEAR, "--quiet"], tmp_path / "2.json", 1)
    assert diverging["divergence"]["call"]["op"] == "clear"
    views = {view["view"]: view for view in diverging["divergence"]["state_diff"]["views"]}
    assert views["snapshot"]["spec"] and not views["snapshot"]["implementation"], "the clear emptied the cache"
    assert diverging["divergence"]["snippet"] and diverging["divergence"]["cache_snapshot"] is None
    program = _report(["replay", str(block_trace), "--quiet"], tmp_path / "3.json", 0)
    assert program["spec"] == "blocks"
    against = _report(["replay", str(block_trace), "--impl", DOUBLE_FREE, "--quiet"], tmp_path / "4.json", 1)
    assert against["divergence"]["against"] == "implementation" and against["divergence"]["snippet"]
    assert "views" in against["divergence"]["state_diff"]


@pytest.mark.parametrize("argv", [
    ["bench", "linearizability", "--sizes", "2x5", "--budget", "1"],
    ["bench", "trace", "--lengths", "100", "--quiet"],
], ids=["linearizability", "trace"])
def test_bench_reports_its_figures(argv: list[str], tmp_path: Path, capsys):
    report = _report(argv, tmp_path / "r.json", 0)
    assert report["bench"] == argv[1] and report["figures"]


def _valid_check_report() -> dict:
    return report_of("check", {
        "spec": "cache", "impl": "m:f", "profile": "contract", "semantics": {}, "operations": ["get"], "seed": 0,
        "keys": "int", "threads": None, "budget": {"examples": 1, "steps": 1}, "examples": 1, "steps": 1,
        "seconds": 0.1, "first_failure_example": None, "first_failure_seconds": None, "ok": True,
        "interrupted": False, "scope": None, "divergences": [],
    }, ran_hypothesis=True)


@pytest.mark.parametrize("breaking, where", [
    (lambda r: r.pop("seed"), "seed"),
    (lambda r: r.update(ok="yes"), "ok"),
    (lambda r: r.update(surprise=1), "surprise"),
    (lambda r: r.update(schema="cacheproof/report/v2"), "schema"),
    (lambda r: r.update(ok=False), "divergences"),
    (lambda r: r.update(created="yesterday"), "created"),
    (lambda r: r["tool"].pop("version"), "version"),
    (lambda r: r.update(impl="no factory"), "impl"),
    (lambda r: r.update(command="bench"), "bench"),
], ids=["missing seed", "ok not a bool", "unknown field", "another version", "failed without divergence",
        "created not a time", "tool without version", "impl without factory", "another command's fields"])
def test_a_wrong_report_fails_validation(breaking, where: str):
    report = _valid_check_report()
    assert report_errors(report) == []
    broken = copy.deepcopy(report)
    breaking(broken)
    problems = report_errors(broken)
    assert problems and any(where in problem for problem in problems), problems


def test_the_writer_logs_each_report_and_a_broken_one_is_caught(tmp_path: Path, monkeypatch):
    log = tmp_path / "reports.log"
    monkeypatch.setenv(REPORT_LOG_VARIABLE, str(log))
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    body = {key: value for key, value in _valid_check_report().items()
            if key not in ("schema", "command", "tool", "hypothesis_version", "created")}
    write_report(good, "check", body, ran_hypothesis=True)
    write_report(bad, "check", {**body, "examples": -1})
    assert log.read_text().splitlines() == [str(good.resolve()), str(bad.resolve())]
    problems = logged_report_errors(log)
    assert problems and all(problem.startswith(str(bad.resolve())) for problem in problems)
    bad.unlink()  # the suite's own check of this test's reports must pass
