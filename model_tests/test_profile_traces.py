"""Traces carry the profile, semantics and operations they were recorded under: a trace written by
`check --profile P --trace-out` or by `monitor(profile=P, trace_path=...)` replays with no flags;
replay's --profile/--semantics/--ops override the header. The snapshot comparison levels
(snapshot_order) are honoured by check, replay, the monitor and cacheproof.testing alike."""

from __future__ import annotations

import io
import json
import unittest

import pytest
from hypothesis import settings

import cacheproof
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.cli import main
from cacheproof.spec import CacheSpec, InvalidArgumentError
from cacheproof.spec.cache.semantics import Semantics
from cacheproof.testing import cache_test_case
from cacheproof.trace.format import TraceFormatError, parse_trace, read_trace, spec_trace, trace_text
from cacheproof.trace.replay import replay_beside
from model_tests.cache_checks import check_cache
from examples.plain_lru_cache import PlainLRUCache

BROKEN = "model_tests.broken_profile_caches:OversizedSetEvictsAllCache"
PLAIN = "examples.plain_lru_cache:PlainLRUCache"


@pytest.fixture(scope="module")
def plain_lru_trace(tmp_path_factory):
    """The shrunk counterexample of the SGLang oversized-set bug, written by check under plain-lru."""
    path = tmp_path_factory.mktemp("traces") / "plain_lru.jsonl"
    assert main(["check", "--max-divergences", "1", "--impl", BROKEN, "--profile", "plain-lru", "--examples", "200", "--quiet",
                 "--trace-out", str(path)]) == 1
    return path


def test_check_trace_header_records_profile_semantics_and_ops(plain_lru_trace):
    header = json.loads(plain_lru_trace.read_text().splitlines()[0])
    assert header["profile"] == "plain-lru"
    assert header["semantics"] == {"put_present": "replace", "put_too_large": "false", "get_missing": "none",
                                   "argument_checks": "trusted"}
    assert header["ops"] == ["put", "get", "pop", "clear", "contains"]


def test_schema_names_the_header_fields_of_a_profile_trace(plain_lru_trace):
    from importlib.resources import files

    header_schema = json.loads(files("cacheproof.trace").joinpath("schema.json").read_text())["$defs"]["header"]
    header = json.loads(plain_lru_trace.read_text().splitlines()[0])
    assert set(header) - set(header_schema["properties"]) == {"capacity_bytes"}  # the kind's size_name
    assert header["spec"] == "cache" and header["ops"] == ["put", "get", "pop", "clear", "contains"]
    assert all(isinstance(value, str) for value in header["semantics"].values())


def test_check_trace_replays_with_no_flags(plain_lru_trace, capsys):
    assert main(["replay", str(plain_lru_trace), "--quiet"]) == 0
    assert main(["replay", str(plain_lru_trace), "--impl", PLAIN, "--quiet"]) == 0  # lacks reserve...: fine
    assert main(["replay", str(plain_lru_trace), "--impl", BROKEN, "--quiet"]) == 1
    assert "divergence at step 2 of 2" in capsys.readouterr().out


def test_replay_flags_override_the_header(plain_lru_trace, capsys):
    assert main(["replay", str(plain_lru_trace), "--quiet", "--profile", "contract"]) == 1  # TooLargeError expected
    assert main(["replay", str(plain_lru_trace), "--quiet", "--semantics", "put_too_large=error"]) == 1
    capsys.readouterr()
    assert main(["replay", str(plain_lru_trace), "--quiet", "--ops", "get,pop"]) == 2
    assert "calls put, outside the replayed operations get,pop" in capsys.readouterr().err
    assert main(["replay", str(plain_lru_trace), "--quiet", "--semantics", "put_present=overwrite"]) == 2
    assert "replace" in capsys.readouterr().err


def test_monitor_trace_under_a_profile_replays_with_no_flags(tmp_path, capsys):
    path = tmp_path / "monitor.jsonl"
    with cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, profile="plain-lru", trace_path=path) as cache:
        assert cache.put("a", b"xy") is True
        assert cache.put("a", b"zzz") is True  # replaces: the contract's spec raises WrongStateError here
        assert cache.get("absent") is None
        assert cache.put("big", b"12345") is False
    assert read_trace(path).profile == "plain-lru"
    assert main(["replay", str(path), "--quiet"]) == 0
    assert main(["replay", str(path), "--impl", PLAIN, "--quiet"]) == 0
    assert main(["replay", str(path), "--profile", "contract"]) == 1
    assert "recorded returns True; the spec raised WrongStateError" in capsys.readouterr().out


def test_monitor_semantics_override_and_ops():
    monitored = cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, profile="plain-lru", ops=["put", "get"],
                                   semantics="put_present=keep")
    assert monitored.trace.semantics.put_present == "keep" and monitored.trace.operations == ("put", "get")
    monitored.put("a", b"x")
    with pytest.raises(cacheproof.DivergenceError, match="this implementation returns b'y'"):
        monitored.put("a", b"y")  # replaced by the cache, kept by the spec: the next get differs
        monitored.get("a")
    with pytest.raises(AttributeError, match="pop is outside the monitored operations"):
        cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, profile="plain-lru", ops=["put", "get"]).pop("a")
    with pytest.raises(InvalidArgumentError, match="put_present"):
        cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, semantics="colour=red")


def test_a_monitor_divergence_trace_replays_to_the_divergence(tmp_path, capsys):
    from model_tests.broken_profile_caches import OversizedSetEvictsAllCache

    path = tmp_path / "diverged.jsonl"
    cache = cacheproof.monitor(OversizedSetEvictsAllCache(4), capacity_bytes=4, profile="plain-lru",
                               trace_path=path)
    cache.put("a", b"x")
    assert cache.put("b", b"12345") is False  # the same outcome; the state is compared periodically
    with pytest.raises(cacheproof.DivergenceError, match=r"check_state\(\) after call 2 of the trace: len\(\): spec 1, "
                       r"this implementation 0; .*last matched 2 calls earlier"):
        cache.check_state()
    cache.close()
    assert main(["replay", str(path), "--impl", BROKEN, "--quiet"]) == 1
    assert "divergence at step 2" in capsys.readouterr().out


HEADER = '{"cacheproof_trace": 1, "version": "0", "capacity_bytes": 4'


@pytest.mark.parametrize(
    "header, named",
    [
        (HEADER + ', "profile": "lru"}', "line 1: unknown profile 'lru'; profiles: contract"),
        (HEADER + ', "semantics": {"put_present": "overwrite"}}', "line 1: put_present='overwrite'"),
        (HEADER + ', "semantics": {"colour": "red"}}', "line 1: unknown semantics field 'colour'"),
        (HEADER + ', "semantics": {"put_present": 1}}', "line 1: semantics must be an object"),
        (HEADER + ', "ops": ["put", "fetch"]}', "line 1: --ops put,fetch: unknown fetch"),
        (HEADER + ', "ops": "put"}', "line 1: ops must be a list"),
    ],
)
def test_bad_headers_name_the_field(header, named):
    with pytest.raises(TraceFormatError, match=named.replace("(", r"\(")):
        parse_trace(header + "\n")


def test_a_call_outside_the_header_ops_is_a_format_error():
    text = HEADER + ', "ops": ["put"]}\n{"op": "get", "args": [0], "kwargs": {}, "result": null}\n'
    with pytest.raises(TraceFormatError, match=r"line 2: get is outside the trace's ops \(put\)"):
        parse_trace(text)


def test_a_profile_without_semantics_takes_the_profile_s_and_round_trips():
    trace = parse_trace(HEADER + ', "profile": "vllm-encoder-cache"}\n')
    assert trace.semantics.eviction_time == "reservation" and "put" not in trace.operations
    semantics = Semantics(snapshot_order="membership", refresh_on=frozenset())
    written = spec_trace(4, [Call("put", (0, ValueRecipe(1, 0)))], semantics, profile="contract",
                         operations=("put", "get"))
    again = parse_trace(trace_text(written))
    assert (again.profile, again.semantics, again.operations) == ("contract", semantics, ("put", "get"))
    assert parse_trace(HEADER + "}\n").semantics == Semantics()


# Snapshot comparison levels -------------------------------------------------------------------------


class ReferencedFirst(CacheSpec):
    """The spec, with a snapshot that lists referenced and reserved entries before the idle ones
    (as a cache keeping busy entries in a separate table would): idle order right, the rest not."""

    def snapshot(self):
        entries = super().snapshot()
        return tuple(e for e in entries if e.refcount) + tuple(e for e in entries if not e.refcount)


class Reversed(CacheSpec):
    """The spec, with a snapshot newest first: only the membership is right."""

    def snapshot(self):
        return tuple(reversed(super().snapshot()))


ORDERS = [("full", True, True), ("idle", False, True), ("membership", False, False)]
"""(snapshot_order, flags ReferencedFirst, flags Reversed)."""

ORDER_CALLS = [
    Call("reserve", (0, 1)), Call("put", (1, ValueRecipe(1, 0))), Call("put", (2, ValueRecipe(1, 0))),
]
"""Entries 0 (reserved), 1, 2 (idle), oldest first: ReferencedFirst lists 0, 1, 2 too, but after
acquire(1) the spec's order is 0, 2, 1 and ReferencedFirst's 0, 1, 2."""


@pytest.mark.parametrize("order, flags_referenced_first, flags_reversed", ORDERS)
def test_snapshot_levels_in_check(order, flags_referenced_first, flags_reversed):
    semantics = Semantics(snapshot_order=order)
    assert check_cache(ReferencedFirst, examples=30, seed=0, semantics=semantics).ok is not flags_referenced_first
    assert check_cache(Reversed, examples=30, seed=0, semantics=semantics).ok is not flags_reversed


@pytest.mark.parametrize("order, flags_referenced_first, flags_reversed", ORDERS)
def test_snapshot_levels_in_replay_and_monitor(order, flags_referenced_first, flags_reversed):
    semantics = Semantics(snapshot_order=order)
    calls = ORDER_CALLS + [Call("acquire", (1, 1)), Call("put", (3, ValueRecipe(1, 0)))]
    trace = spec_trace(8, calls, semantics)
    for cache_type, flagged in ((ReferencedFirst, flags_referenced_first), (Reversed, flags_reversed)):
        assert (replay_beside(trace, cache_type) is not None) is flagged, (cache_type, order)
        monitored = cacheproof.monitor(cache_type(8), semantics=semantics, state_every=1)
        try:
            monitored.reserve(0, 1)
            monitored.put(1, b"x")
            monitored.put(2, b"x")
            monitored.acquire(1, 1)
            monitored.put(3, b"x")
            diverged = False
        except cacheproof.DivergenceError:
            diverged = True
        assert diverged is flagged, (cache_type, order)


def test_snapshot_levels_in_cache_test_case():
    for order, flagged in (("full", True), ("idle", False)):
        case = cache_test_case(ReferencedFirst, steps=20, semantics=Semantics(snapshot_order=order))
        case.settings = settings(max_examples=30, derandomize=True, deadline=None, database=None)
        result = unittest.TextTestRunner(stream=io.StringIO()).run(case())
        assert result.wasSuccessful() is not flagged, order
