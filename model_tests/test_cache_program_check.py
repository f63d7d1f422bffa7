"""What the program pipeline (`cacheproof.check.programs`) has of the tensor cache's check beside
the calls (issue 32): the report's scope measures, the capacity cap of values that hold memory,
`--isolate` whose child makes the values and answers `len` and `in`, the not-deterministic
verdict, and faults (SystemExit raised by a call, a view that raises) reported as counterexamples."""

from __future__ import annotations

import argparse

from cacheproof.check.phases import Phase
from cacheproof.check.programs.generators.cache_calls import SMALL, THOROUGH, WIDE
from cacheproof.check.programs.command import DEFAULT_IMPLS, capacity_cap, refusal, scoped
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import ProgramOptions, merged_measures, run_program_check, run_program_phases
from cacheproof.contract.values import REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import load_factory
from cacheproof.sandbox.guarded_call import Watch
from cacheproof.spec import CacheSpec
from cacheproof.spec.kinds import get_kind
from model_tests import broken_caches, faulty_caches
from model_tests.valued_caches import BytearrayValueCache

KIND = get_kind("cache")
SCOPE_FIELDS = {"scopes", "most_live_entries", "most_distinct_keys", "key_types", "largest_capacity",
                "longest_sequence", "capacity_cap"}
"""The tensor cache's `scope` in cacheproof/schemas/report-v1.json, written out here."""


def test_the_report_states_what_the_cache_programs_reached():
    report = run_program_phases(KIND, CacheSpec, (Phase(SMALL.with_keys("str"), 20, 30),), ProgramOptions())
    assert report.ok
    scope = report.scope_json()
    assert set(scope) == SCOPE_FIELDS
    assert scope["scopes"] == ["small"] and scope["key_types"] == ["str"] and scope["capacity_cap"] is None
    assert 1 <= scope["most_live_entries"] <= 6 and 1 <= scope["most_distinct_keys"] <= 6
    assert 1 <= scope["largest_capacity"] <= 64 and scope["longest_sequence"] == 30
    rows = report.scope_rows()
    assert rows["scope"] == "small" and rows["key types"] == "str" and rows["capacity cap"] == "-"


def test_the_block_pool_keeps_its_scope_fields():
    kind = get_kind("blocks")
    pool = run_program_phases(kind, load_factory(DEFAULT_IMPLS["blocks"]), (Phase(None, 5, 10),), ProgramOptions())
    assert set(pool.scope_json()) == {"scopes", "largest_size", "longest_sequence"}


def test_measures_of_several_runs_merge_to_the_most_reached():
    merged = merged_measures([{"live": 1, "types": ["int"], "cap": None}, {"live": 3, "types": ["str", "int"], "cap": 5},
                              {"live": 2, "types": [], "cap": None}])
    assert merged == {"live": 3, "types": ["int", "str"], "cap": 5}


def test_capacities_are_capped_for_a_cache_whose_values_hold_memory():
    watch = Watch(10)
    assert capacity_cap(get_kind("cache"), BytearrayValueCache, THOROUGH, None, watch) == REAL_VALUE_CAPACITY
    assert capacity_cap(get_kind("cache"), BytearrayValueCache, THOROUGH, 4096, watch) == 4096
    assert capacity_cap(get_kind("cache"), CacheSpec, THOROUGH, None, watch) is None, "no make_value: the spec's bytes, no memory to cap"
    assert scoped(SMALL, None, 4096) == SMALL, "small capacities (64 bytes at most) are never capped"
    report = run_program_phases(KIND, BytearrayValueCache, (Phase(scoped(WIDE, None, 4096), 20, 20, shrink=False),),
                                ProgramOptions())
    assert report.ok
    assert report.scope_json()["capacity_cap"] == 4096 and report.scope_json()["largest_capacity"] <= 4096


def test_max_capacity_is_refused_for_a_kind_whose_scopes_cannot_be_capped():
    args = argparse.Namespace(max_capacity=4096, thorough=False)
    assert "stores no values" in refusal(get_kind("blocks"), args)
    assert refusal(KIND, args) is None


def test_an_isolated_cache_makes_its_own_values_and_answers_len_and_in():
    options = ProgramOptions(isolate=True, impl="model_tests.valued_caches:BytearrayValueCache")
    report = run_program_phases(KIND, None, (Phase(SMALL, 20, 40),), options)
    assert report.ok, report.counterexample and report.counterexample.message
    reached = {pair for pair, count in report.coverage.counts.items() if count}
    assert {("get", "returns"), ("pop", "returns"), ("contains", "returns True")} <= reached, reached


def test_an_isolated_broken_cache_is_found_and_shrunk():
    options = ProgramOptions(isolate=True, impl="model_tests.broken_caches:GetTakesReference", examples=100, steps=50)
    report = run_program_phases(KIND, None, (Phase(SMALL, 100, 50),), options)
    assert not report.ok
    assert report.counterexample.size == 1 and report.counterexample.calls[-1].op == "get"


def test_a_len_that_raises_in_the_child_is_a_counterexample():
    options = ProgramOptions(isolate=True, impl="model_tests.faulty_caches:LenRaises")
    report = run_program_phases(KIND, None, (Phase(SMALL, 60, 50),), options)
    assert "len() raised OverflowError: entry count overflowed" in report.counterexample.message


def test_a_cache_that_answers_the_same_calls_differently_is_not_deterministic():
    report = run_program_check(KIND, faulty_caches.ReleaseFlips, generator_for("cache"), examples=60, steps=100)
    message = report.counterexample.message
    assert message.startswith("not deterministic: the same "), message
    assert "(a fresh cache each run)" in message
    assert len(report.counterexamples) == 1, "a cache that is not deterministic ends the search"


def test_a_call_raising_system_exit_is_its_outcome_and_diverges():
    report = run_program_check(KIND, faulty_caches.PopExits, generator_for("cache"), examples=60, steps=100)
    assert "crashed with SystemExit: 3" in report.counterexample.message


def test_a_view_that_raises_says_what_it_raised():
    report = run_program_check(KIND, faulty_caches.SnapshotRaises, generator_for("cache"), examples=60, steps=100)
    assert "snapshot() raised RuntimeError: snapshot lost its iterator" in report.counterexample.message


def test_a_deterministic_broken_cache_is_not_called_not_deterministic():
    report = run_program_check(KIND, broken_caches.GetTakesReference, generator_for("cache"), examples=200, steps=100)
    assert not report.counterexample.message.startswith("not deterministic")


def test_a_program_of_a_wide_capacity_is_tried_at_a_few_smaller_sizes_without_listing_the_others():
    """--thorough draws capacities to 2**41: the sizes tried while shrinking are seven numbers, not a
    set of every size below (which took 23 GB before the check was killed)."""
    from cacheproof.check.programs.program import smaller_sizes

    size = 1 << 41
    assert smaller_sizes(size) == [1, 2, 3, 4, size // 2, size * 3 // 4, size - 1]
    assert smaller_sizes(3) == [1, 2] and smaller_sizes(1) == []
