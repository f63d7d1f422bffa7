"""The trace format: what a recorded call holds, the round trip through text, and format errors."""

from __future__ import annotations

import json

import pytest

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.trace.format import (
    SOME_VALUE,
    DivergentOutcome,
    TraceFormatError,
    TracedCall,
    call_line,
    header_line,
    parse_trace,
    read_trace,
    spec_trace,
    trace_text,
    write_counterexample_trace,
)
from model_tests.broken_caches import GetDoesNotPromote
from model_tests.cache_checks import check_cache

CALLS = [
    Call("acquire", (0, 4), {"retain": False}),
    Call("commit", (0, ValueRecipe(4, 7))),
    Call("put", ((1, "a"), ValueRecipe(4, 9))),
    Call("get", ((1, "a"),)),
    Call("put", (2, ValueRecipe(4, 1))),
    Call("get", (5,)),
    Call("release", (0,)),
]


def test_spec_outcomes_are_recorded_as_the_contract_says():
    trace = spec_trace(8, CALLS)
    assert trace.size == 8
    assert [(t.result, t.error) for t in trace.calls] == [
        ("NEW_RESERVATION", None),
        ([], None),
        (True, None),
        (ValueRecipe(4, 9), None),
        # pinned 4 (key 0) + 4 <= 8: evict idle (1, "a") so ready 4 + 4 fits
        (True, None),
        (None, "UnknownKeyError"),
        (True, None),  # last release of a retain=False entry removes it
    ]


def test_text_round_trip_and_line_format():
    trace = spec_trace(8, CALLS)
    text = trace_text(trace)
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {"cacheproof_trace": 2, "version": trace.version, "spec": "cache", "capacity_bytes": 8,
                        "profile": "contract"}
    assert lines[1] == {"op": "acquire", "args": [0, 4], "kwargs": {"retain": False}, "result": "NEW_RESERVATION"}
    assert lines[3]["args"] == [{"tuple": [1, "a"]}, {"nbytes": 4, "tag": 9}]
    assert lines[4]["result"] == {"nbytes": 4, "tag": 9}
    assert lines[6] == {"op": "get", "args": [5], "kwargs": {}, "error": "UnknownKeyError"}
    assert parse_trace(text) == trace


def test_some_value_and_unencodable_keys():
    text = trace_text(spec_trace(8, []))
    text += json.dumps({"op": "get", "args": [{"repr": "b'k'"}], "kwargs": {}, "result": {"value": True}}) + "\n"
    (traced,) = parse_trace(text).calls
    assert traced == TracedCall(Call("get", ("b'k'",), {}), SOME_VALUE)


@pytest.mark.parametrize(
    "lines, problem",
    [
        (['{"op": "get"}'], "line 1: expected the header"),
        (['{"cacheproof_trace": 3, "version": "0", "capacity_bytes": 8}'], "line 1: unsupported trace format 3"),
        (['{"cacheproof_trace": 2, "version": "0", "capacity_bytes": 8}'], "line 1: spec must be a spec kind"),
        (['{"cacheproof_trace": 2, "version": "0", "spec": "blocks", "capacity_bytes": 8}'], "line 1: num_blocks"),
        (['{"cacheproof_trace": 1, "version": "0", "capacity_bytes": 0}'], "line 1: capacity_bytes"),
        (['{"cacheproof_trace": 1, "version": "0", "capacity_bytes": 8}', "{nope"], "line 2: not JSON"),
        (['{"cacheproof_trace": 1, "version": "0", "capacity_bytes": 8}', '{"op": "get", "args": [0], "kwargs": {}}',
          ], "line 2: a call needs exactly one"),
        (['{"cacheproof_trace": 1, "version": "0", "capacity_bytes": 8}', "",
          '{"op": "fly", "args": [], "kwargs": {}, "result": null}'], "line 3: unknown op 'fly'"),
        ([], "empty trace"),
    ],
)
def test_malformed_traces_name_the_line(lines, problem):
    with pytest.raises(TraceFormatError, match=problem):
        parse_trace("\n".join(lines))


def test_unreadable_file(tmp_path):
    with pytest.raises(TraceFormatError, match="cannot read"):
        read_trace(tmp_path / "missing.jsonl")


def test_counterexample_trace_holds_the_spec_outcomes(tmp_path):
    report = check_cache(GetDoesNotPromote, examples=200, seed=0)
    assert report.counterexample is not None
    path = tmp_path / "counterexample.jsonl"
    write_counterexample_trace(path, report.counterexample)
    trace = read_trace(path)
    assert trace.size == report.counterexample.size
    assert [t.call for t in trace.calls] == list(report.counterexample.calls)
    assert trace.calls[-1].call.op == "get"  # GetDoesNotPromote diverges on a get
    assert isinstance(trace.calls[-1].result, ValueRecipe)


def test_schema_names_the_fields_the_writer_uses():
    from importlib.resources import files

    schema = json.loads(files("cacheproof.trace").joinpath("schema.json").read_text())
    header, call = schema["$defs"]["header"], schema["$defs"]["call"]
    lines = [json.loads(line) for line in trace_text(spec_trace(8, CALLS)).splitlines()]
    assert set(lines[0]) == set(header["required"]) | {"capacity_bytes"}  # the size, under the kind's size_name
    assert len(lines[0]) == header["minProperties"]
    for line in lines[1:]:
        assert set(line) <= set(call["properties"]) and set(call["required"]) <= set(line)


def test_schema_names_the_fields_of_a_diverging_call():
    from importlib.resources import files

    schema = json.loads(files("cacheproof.trace").joinpath("schema.json").read_text())
    diverging = TracedCall(Call("release", ("a",)), error="WrongStateError", observed=DivergentOutcome(False, None, "why"))
    line = json.loads(call_line(diverging))
    assert set(line) <= set(schema["$defs"]["call"]["properties"])
    assert set(line["observed"]) <= set(schema["$defs"]["observed"]["properties"])
    assert parse_trace(header_line(8) + "\n" + call_line(diverging)).calls == (diverging,)
