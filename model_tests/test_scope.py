"""The wide scope (docs/scope.md): it reaches what the small scope cannot, it finds the broken caches
that need it, it never flags a correct cache, and every key type and huge value goes through the
report, the snippet, the trace, `cacheproof replay` and the monitor as recipes, never as bytes."""

from __future__ import annotations

import json
import tracemalloc

import numpy
import pytest
import torch

from cacheproof.contract import calls as call_format
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.check.phases import Phase
from cacheproof.check.programs.generators.cache_calls import LONG, LONG_CALLS, SMALL, THOROUGH, WIDE, size_for
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.contract.keys import WIDE_KEYS
from cacheproof.contract.values import MAX_VALUE_BYTES, REAL_VALUE_CAPACITY, is_storage_free, storage_free_value, value_for, values_equal
from cacheproof.cli import main
from cacheproof.impl import TensorLRUCache
from cacheproof.spec import CacheSpec
from cacheproof.testing import cache_test_case, profile_scopes
from cacheproof.trace.format import parse_trace
from cacheproof.trace.monitor import monitor
from cacheproof.trace.replay import replay_beside, replay_against_spec
from model_tests import broken_scope_caches as broken
from model_tests.cache_checks import check_cache, check_cache_phases, replayed, snippet

ALIKE = (1, "1", b"1", ("img", 1), ("img", "1"))
HUGE = 2**33


def meta_cache(capacity_bytes):
    return TensorLRUCache(capacity_bytes, device="meta")


def cpu_cache(capacity_bytes):
    return TensorLRUCache(capacity_bytes, device="cpu")


# The scope reached ---------------------------------------------------------------------------

def test_the_wide_scope_reaches_what_the_small_scope_cannot():
    small = check_cache_phases(CacheSpec, [Phase(SMALL, 30, 100)]).scope_json()
    wide = check_cache_phases(CacheSpec, [Phase(WIDE, 60, 100, shrink=False)]).scope_json()
    long = check_cache_phases(CacheSpec, [Phase(LONG, 4, LONG_CALLS, shrink=False)]).scope_json()
    assert small["most_live_entries"] <= 6 and small["key_types"] == ["int"] and small["largest_capacity"] <= 64
    assert wide["most_live_entries"] > 8
    assert wide["key_types"] == ["bytes", "int", "str", "tuple"] and wide["most_distinct_keys"] > 8
    assert wide["largest_capacity"] > 2**32
    assert long["longest_sequence"] >= 500


def test_sizes_sit_on_the_32_bit_boundaries_and_never_exceed_the_capacity():
    capacity = 2**40
    sizes = {size_for(kind, 12345, capacity, 16) for kind in range(WIDE.size_kinds)}
    assert {2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32, 2**32 + 1} <= sizes
    assert {capacity // 2, capacity // 3, capacity // 16, capacity // 16} <= sizes
    assert all(1 <= size_for(kind, 2**62, 5, 16) <= 5 for kind in range(WIDE.size_kinds))


def test_the_key_pool_holds_distinct_keys_that_format_alike():
    assert set(ALIKE) <= set(WIDE_KEYS) and len(set(WIDE_KEYS)) == len(WIDE_KEYS)
    assert len({str(key) for key in (1, "1")}) == 1 and len({broken.normal_key(key) for key in ALIKE[:3]}) == 1


def test_thorough_mixes_small_wide_and_long_scopes():
    assert [phase.scope for phase in THOROUGH] == [SMALL, WIDE, LONG]
    assert sum(phase.examples for phase in THOROUGH) >= 1500


# Proof that it bites ---------------------------------------------------------------------------

NEEDS = {
    broken.FixedTableOfEight: Phase(WIDE, 400, 100, shrink=False),
    broken.NormalisesKeysWithStr: Phase(WIDE, 100, 100, shrink=False),
    broken.ByteCountersWrapAt32Bits: Phase(WIDE, 100, 100, shrink=False),
    broken.MaintenancePassReorders: Phase(LONG, 4, LONG_CALLS, shrink=False),
}
"""The phase each broken scope cache needs. CALL_TIMEOUT keeps the shrinking of a long life within
30 s (`shrink_seconds`)."""
CALL_TIMEOUT = 1.0


def _found(cache) -> ProgramCounterexample:
    report = check_cache_phases(cache, [NEEDS[cache]], seed=0, call_timeout=CALL_TIMEOUT)
    assert not report.ok
    return report.counterexample


@pytest.mark.parametrize("cache", broken.BROKEN_SCOPE_CACHES, ids=lambda cls: cls.__name__)
def test_the_wide_scope_finds_each_broken_scope_cache(cache):
    example = _found(cache)
    assert replayed(CacheSpec, example.size, example.calls) is None
    found = replayed(cache, example.size, example.calls)
    assert found is not None and found[0] == len(example.calls) - 1


@pytest.mark.parametrize("cache", broken.BROKEN_SCOPE_CACHES, ids=lambda cls: cls.__name__)
def test_the_small_scope_misses_them(cache):
    assert check_cache(cache, examples=20, seed=0).ok


@pytest.mark.parametrize("factory", [CacheSpec, meta_cache, cpu_cache], ids=["spec", "meta", "cpu"])
def test_correct_caches_conform_in_every_scope(factory):
    report = check_cache_phases(factory, [Phase(SMALL, 10, 50), Phase(WIDE, 20, 50, shrink=False),
                                          Phase(LONG, 2, LONG_CALLS, shrink=False)])
    assert report.ok, report.counterexample
    assert report.scope_json()["scopes"] == ["small", "wide", "long"]


def test_a_cache_whose_values_hold_memory_is_checked_at_capped_capacities():
    report = check_cache_phases(cpu_cache, [Phase(WIDE, 20, 20, shrink=False)]).scope_json()
    assert report["capacity_cap"] == REAL_VALUE_CAPACITY
    assert report["largest_capacity"] <= REAL_VALUE_CAPACITY
    meta = check_cache_phases(meta_cache, [Phase(WIDE, 20, 20, shrink=False)]).scope_json()
    assert meta["capacity_cap"] is None and meta["largest_capacity"] > 2**32
    capped = check_cache_phases(cpu_cache, [Phase(WIDE, 5, 5, shrink=False)], max_capacity=2**20)
    assert capped.scope_json()["capacity_cap"] == 2**20


def test_the_report_states_the_scope(tmp_path, capsys):
    path = tmp_path / "report.json"
    status = main(["check", "--max-divergences", "1", "--impl", "model_tests.broken_scope_caches:NormalisesKeysWithStr", "--examples", "5",
                   "--json", str(path)])
    assert status == 0
    out = capsys.readouterr().out
    assert "most live entries" in out and "longest sequence" in out and "largest capacity" in out
    scope = json.loads(path.read_text())["scope"]
    assert scope["scopes"] == ["small"] and scope["key_types"] == ["int"] and scope["capacity_cap"] is None
    assert set(scope) == {"scopes", "most_live_entries", "most_distinct_keys", "key_types", "largest_capacity",
                          "longest_sequence", "capacity_cap"}


def test_thorough_is_a_usage_error_with_its_own_budget_flags(capsys):
    assert main(["check", "--thorough", "--examples", "5"]) == 2
    assert "--thorough sets its own budget" in capsys.readouterr().err
    assert main(["check", "--thorough", "--max-capacity", str(MAX_VALUE_BYTES + 1)]) == 2
    assert "must be at most 67108864 bytes" in capsys.readouterr().err


def test_the_thorough_profile_gives_the_testing_kit_the_same_scopes():
    assert profile_scopes("cacheproof-thorough") == tuple(phase.scope for phase in THOROUGH)
    assert profile_scopes("cacheproof-dev") == (SMALL,)
    from hypothesis import settings

    case = cache_test_case(broken.NormalisesKeysWithStr)
    case.settings = settings(max_examples=100, database=None, derandomize=True)
    case.scopes = (WIDE.capped(2**16),)  # the wide keys; capacities capped at 64 KiB, which this bug needs no more than
    result = case().run()
    assert len(result.failures) == 1 and "snapshot(): spec" in result.failures[0][1], result.failures
    assert cache_test_case(broken.NormalisesKeysWithStr, steps=20)().run().wasSuccessful()


# Values without memory ---------------------------------------------------------------------------

def test_values_above_the_bytes_limit_are_storage_free_views():
    value = value_for(CacheSpec(2**41), 2**40, 7)
    assert is_storage_free(value) and value.nbytes == 2**40
    assert values_equal(value, storage_free_value(2**40, 7)) and not values_equal(value, storage_free_value(2**40, 8))
    assert value_for(CacheSpec(64), 64, 7) == bytes([7]) * 64
    small = storage_free_value(16, 3)
    assert values_equal(small, numpy.full(16, 3, dtype=numpy.uint8))


def test_the_meta_tensor_cache_works_at_any_capacity():
    cache = TensorLRUCache(2**41, device="meta")
    value = cache.make_value(2**40, 3)
    assert value.device.type == "meta" and value.numel() * value.element_size() == 2**40
    assert cache.put("1", value) and cache.put(1, storage_free_value(2**40 - 1, 1))
    assert cache.stats().idle_bytes == 2**41 - 1
    assert values_equal(cache.get("1"), value) and not values_equal(cache.get("1"), cache.get(1))
    cache.check_valid()
    assert not is_storage_free(TensorLRUCache(64, device="cpu").make_value(8, 0))


# Everything downstream --------------------------------------------------------------------------

HUGE_CALLS = (
    Call("put", (b"1", ValueRecipe(HUGE // 2, 1))),
    Call("reserve", (("img", 1), HUGE // 4)),
    Call("put", ("1", ValueRecipe(HUGE // 4, 2))),
    Call("get", (b"1",)),
    Call("reserve", (("img", "1"), HUGE // 2)),
)
"""Calls at 2**33 bytes on which ByteCountersWrapAt32Bits diverges."""


def _huge_counterexample() -> ProgramCounterexample:
    """HUGE_CALLS up to the first call where the wrapped counter shows (the checker compares stats
    after every call), as the checker reports them."""
    step, difference = replayed(broken.ByteCountersWrapAt32Bits, HUGE, HUGE_CALLS)
    return ProgramCounterexample(HUGE, HUGE_CALLS[: step + 1], difference)


def test_keys_of_every_type_round_trip_as_json():
    for key in ALIKE + (0, "a3f9c1", b"\x00\xff"):
        call = Call("put", (key, ValueRecipe(HUGE, 3)))
        decoded = call_format.from_json(json.loads(json.dumps(call_format.to_json(call))))
        assert decoded == call and type(decoded.args[0]) is type(key)
    assert len({json.dumps(call_format.encode_value(key)) for key in ALIKE}) == len(ALIKE)


def test_a_counterexample_at_2_33_bytes_prints_and_runs_without_the_bytes(capsys):
    example = _huge_counterexample()
    printed = snippet(example, "model_tests.broken_scope_caches:ByteCountersWrapAt32Bits")
    assert "8589934592" in printed or str(HUGE // 2) in printed
    fixed = printed.replace("from model_tests.broken_scope_caches import ByteCountersWrapAt32Bits",
                            "from cacheproof.spec import CacheSpec")
    tracemalloc.start()
    exec(compile(fixed, "<snippet on the spec>", "exec"), {})
    with pytest.raises(AssertionError):
        exec(compile(printed, "<snippet>", "exec"), {})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20, f"the snippet allocated {peak} bytes"
    assert replayed(CacheSpec, HUGE, example.calls) is None


def test_a_huge_trace_holds_recipes_and_replays_without_the_bytes(tmp_path, capsys):
    text = trace_text(spec_trace(HUGE, HUGE_CALLS))
    assert len(text) < 2000 and '"bytes": "31"' in text and '"nbytes": 4294967296' in text
    path = tmp_path / "huge.trace"
    path.write_text(text)
    tracemalloc.start()
    trace = parse_trace(text)
    assert replay_against_spec(trace) is None
    assert replay_beside(trace, meta_cache) is None
    found = replay_beside(trace, broken.ByteCountersWrapAt32Bits)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert found is not None and peak < 1 << 20
    assert [traced.call for traced in trace.calls] == list(HUGE_CALLS)
    assert main(["replay", str(path), "--impl", "model_tests.broken_scope_caches:ByteCountersWrapAt32Bits"]) == 1


def test_wide_counterexamples_are_written_as_traces_that_replay(tmp_path, capsys):
    impl = "model_tests.broken_scope_caches:NormalisesKeysWithStr"
    example = _found(broken.NormalisesKeysWithStr)
    path = tmp_path / "c.trace"
    path.write_text(trace_text(spec_trace(example.size, example.calls)))  # as --trace-out does
    assert main(["replay", str(path)]) == 0
    assert main(["replay", str(path), "--impl", impl]) == 1


def test_the_monitor_round_trips_every_key_type_and_huge_values(tmp_path):
    path = tmp_path / "monitor.trace"
    cache = monitor(TensorLRUCache(2**41, device="meta"), trace_path=path, state_every=1)
    for index, key in enumerate(ALIKE):
        assert cache.put(key, storage_free_value(HUGE, index))
    assert values_equal(cache.get(("img", "1")), torch.empty(HUGE, dtype=torch.uint8, device="meta"))
    assert cache.pop(b"1").device.type == "meta"
    trace = parse_trace(path.read_text())
    assert [traced.call.args[0] for traced in trace.calls] == list(ALIKE) + [("img", "1"), b"1"]
    assert replay_against_spec(trace) is None and replay_beside(trace, meta_cache) is None
