"""A kind the trace layer has never heard of (model_tests/toy_set_kind.py, registered for the test)
gets traces, replay and the runtime monitor for free: the trace round-trips through format 2,
replays clean on the spec and beside a correct implementation, diverges beside a broken one at the
right call with a snippet, and the monitor stops the broken one and logs a trace that replays."""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.spec import kinds
from cacheproof.trace.format import parse_trace, read_trace, spec_trace, trace_text, write_trace
from cacheproof.trace.monitor import DivergenceError, monitor
from model_tests.toy_set_kind import ForgivingRemoveToySet, ListToySet, ToySemantics

CORRECT, BROKEN = "model_tests.toy_set_kind:ListToySet", "model_tests.toy_set_kind:ForgivingRemoveToySet"
CALLS = [Call("insert", ("a",)), Call("insert", ("b",)), Call("insert", ("c",)), Call("insert", ("a",)),
         Call("remove", ("a",)), Call("remove", ("a",)), Call("count", ())]


@pytest.fixture(autouse=True)
def toy_kind(monkeypatch):
    monkeypatch.setitem(kinds._REGISTRY, "toyset", "model_tests.toy_set_kind:TOY_KIND")


def test_a_new_kind_records_and_round_trips():
    trace = spec_trace(2, CALLS, kind="toyset")
    assert [(t.result, t.error) for t in trace.calls] == [
        (True, None), (True, None), (None, "CapacityError"), (False, None), (None, None), (None, "UnknownKeyError"),
        (1, None)]
    text = trace_text(trace)
    assert json.loads(text.splitlines()[0]) == {"cacheproof_trace": 2, "version": trace.version, "spec": "toyset",
                                                "slots": 2, "profile": "contract"}
    assert parse_trace(text) == trace
    other = spec_trace(2, CALLS[:2] + [Call("insert", ("a",))], ToySemantics("error"), kind="toyset")
    assert other.calls[-1].error == "WrongStateError" and parse_trace(trace_text(other)) == other


def test_a_new_kind_replays_on_the_spec_and_beside_implementations(tmp_path, capsys):
    path, report = tmp_path / "toy.jsonl", tmp_path / "replay.json"
    write_trace(path, spec_trace(2, CALLS, kind="toyset"))
    assert main(["replay", str(path), "--quiet"]) == 0
    assert main(["replay", str(path), "--impl", CORRECT, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["replay", str(path), "--impl", BROKEN, "--json", str(report)]) == 1
    assert "divergence at step 6 of 7 (trace line 7): cache.remove('a')" in capsys.readouterr().out
    divergence = json.loads(report.read_text())["divergence"]
    assert divergence["against"] == "implementation" and "raises('UnknownKeyError')" in divergence["snippet"]


def test_a_new_kind_is_monitored_and_its_log_replays(tmp_path, capsys):
    log = tmp_path / "monitored.jsonl"
    target = monitor(ForgivingRemoveToySet(2), kind="toyset", trace_path=log)
    assert target.insert("a") is True
    target.remove("a")
    with pytest.raises(DivergenceError, match=r"cache.remove\('a'\): the spec raised UnknownKeyError"):
        target.remove("a")
    target.close()
    assert [t.call.op for t in read_trace(log).calls] == ["insert", "remove", "remove"]
    assert main(["replay", str(log)]) == 1  # the spec alone: the divergence the monitor recorded
    assert "recorded by the monitor" in capsys.readouterr().out
    assert main(["replay", str(log), "--impl", BROKEN, "--quiet"]) == 1
    assert main(["replay", str(log), "--impl", CORRECT, "--quiet"]) == 0
    assert monitor(ListToySet(2), kind="toyset").count() == 0
