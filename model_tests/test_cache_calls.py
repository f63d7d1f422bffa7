"""The tensor cache's call generator (cacheproof.check.programs.generators.cache_calls) in the program pipeline
that every kind shares (issue 32): it draws what the cache's former state machine drew, a conforming
cache conforms and reaches every outcome, broken caches are found and shrunk, and the shrinking
lowers the capacity with the byte counts bound to it (issue 35)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from cacheproof.check.programs.generators.cache_calls import BAD_KINDS, SMALL, WIDE, CacheCalls, CacheScope, misuses
from cacheproof.check.programs.command import snippet_of
from cacheproof.check.programs.generators import default_scope, generator_for, thorough_phases
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, divergence_kind, program_failure
from cacheproof.check.programs.program import shrink_program, smaller_sizes
from cacheproof.check.programs.run import run_program_check
from cacheproof.contract.calls import Call, ValueRecipe, invoke
from cacheproof.spec.cache.profiles import profile_named
from cacheproof.spec.kinds import get_kind
from examples.minimal_cache import MinimalCache
from model_tests import block_pools, broken_caches, broken_sharing_caches

KIND = get_kind("cache")


def _calls(generator: CacheCalls, programs: int, semantics=None, operations=KIND.names, seed: int = 0) -> list[Call]:
    """Every call of `programs` programs of 100 calls, each run on the model as the checker runs it."""
    rng, made = random.Random(seed), []
    for _ in range(programs):
        size = generator.size(rng)
        model = KIND.new(size) if semantics is None else KIND.new(size, semantics)
        for _ in range(100):
            call = generator.draw_call(rng, model, operations, True)
            made.append(call)
            try:
                invoke(model, call)
            except Exception:  # noqa: BLE001 - misuse and refusals are outcomes here
                pass
    return made


def test_the_cache_kind_has_a_generator_with_its_scopes_as_data():
    assert isinstance(generator_for("cache"), CacheCalls)
    assert default_scope("cache") is SMALL
    assert [phase.scope.name for phase in thorough_phases("cache")] == ["small", "wide", "long"]


def test_the_generator_draws_every_argument_the_state_machine_draws():
    calls = _calls(CacheCalls(), 40)
    recipes = [arg for call in calls for arg in call.args if isinstance(arg, ValueRecipe)]
    assert {recipe.element_size for recipe in recipes if recipe.nbytes % 8 == 0 and recipe.nbytes} >= {1, 2, 4, 8}
    assert {call.op for call in calls} == set(KIND.names)
    assert any(call.kwargs == {"retain": False} for call in calls if call.op in ("reserve", "acquire"))
    assert Call("evict", (0,)) in calls
    bad_counts = [call.args[1] for call in calls if call.op in ("reserve", "acquire") and len(call.args) == 2]
    for bad in (0, -1, True, 1.0, None, "1"):
        assert any(count == bad and type(count) is type(bad) for count in bad_counts), bad
    assert any(type(call.args[0]) is list for call in calls if call.args)  # an unhashable key
    assert any(call.args[1:] == ("not sizable",) for call in calls if call.op in ("commit", "put"))
    assert any(isinstance(arg, ValueRecipe) and arg.nbytes == 0 for call in calls for arg in call.args)
    assert any(call.kwargs == {"retain": 1} for call in calls)
    assert len(BAD_KINDS) == 11


def test_keys_come_from_the_chosen_domain_and_the_wide_scope_mixes_types():
    keys = {call.args[0] for call in _calls(CacheCalls(SMALL.with_keys("str")), 10)
            if call.op in ("get", "pop", "release") and type(call.args[0]) is not list}
    assert keys and all(type(key) is str for key in keys)
    wide = {type(call.args[0]).__name__ for call in _calls(CacheCalls(WIDE), 10) if call.op == "get"}
    assert {"int", "str", "bytes", "tuple"} <= wide


def test_trusted_arguments_make_no_bad_call_but_an_oversized_put():
    profile = profile_named("trtllm-tensor-lru")
    calls = _calls(CacheCalls(), 20, profile.semantics, profile.operations)
    assert not any(call.op == "reserve" for call in calls)
    counts = [call.args[1] for call in calls if call.op == "acquire"]
    assert all(type(count) is int and count >= 1 for count in counts)
    assert not any(type(call.args[0]) is list for call in calls if call.args)


def test_value_type_checks_make_the_unsizable_value_and_the_oversized_put_alone():
    profile = profile_named("sglang-mm-cache")
    assert profile.semantics.argument_checks == "value_type"
    puts = [call.args[1] for call in _calls(CacheCalls(), 40, profile.semantics, profile.operations) if call.op == "put"]
    assert "not sizable" in puts  # the misuse SGLang's set asserts against
    recipes = [value for value in puts if isinstance(value, ValueRecipe)]
    assert recipes and all(recipe.nbytes >= 1 for recipe in recipes)  # no empty value: trusted
    assert all(isinstance(value, ValueRecipe) or value == "not sizable" for value in puts)
    assert misuses("value_type") == (("put", "too_large"), ("commit", "unsizable_value"), ("put", "unsizable_value"))
    assert misuses("trusted") == (("put", "too_large"),)
    assert len(misuses("checked")) == len(BAD_KINDS) * 9


def test_a_scope_whose_key_counts_do_not_fit_its_pool_is_refused_naming_them():
    with pytest.raises(ValueError, match=r"scope tiny: need 1 <= min_keys <= max_keys <= 2, got 3\.\.3 of 2 keys"):
        CacheScope("tiny", (0, 1), 3, 3, wide_capacities=False, size_kinds=7)


def test_a_conforming_cache_conforms_and_reaches_every_outcome():
    report = run_program_check(KIND, MinimalCache, generator_for("cache"), examples=200, steps=100, seed=0)
    assert report.ok, report.counterexample and report.counterexample.message
    assert report.coverage.missing() == ()


@pytest.mark.parametrize("factory, longest", [
    (broken_caches.GetTakesReference, 2),
    (broken_caches.TransientSurvivesRelease, 3),
    (broken_sharing_caches.CommitForgetsWaiters, 3),
])
def test_a_broken_cache_is_found_in_no_more_calls_than_its_docstring_needs(factory, longest):
    report = run_program_check(KIND, factory, generator_for("cache"), examples=200, steps=100, seed=0)
    assert not report.ok
    assert len(report.counterexample.calls) <= longest


def test_a_counterexample_keeps_no_capacity_or_byte_count_larger_than_it_needs():
    """Issue 35: OffByOneCapacity refuses a reservation that fills the capacity exactly; one byte of
    capacity and a one-byte reservation show it, whatever capacity the search found it at."""
    for seed in range(3):
        report = run_program_check(KIND, broken_caches.OffByOneCapacity, generator_for("cache"), examples=200,
                                   steps=100, seed=seed)
        example = report.counterexample
        assert example.size == 1, (seed, example.size, example.calls)
        assert [call.args[1] for call in example.calls] == [1], (seed, example.calls)


def test_smaller_sizes_tries_the_smallest_first_and_never_the_size_itself():
    assert smaller_sizes(17) == [1, 2, 3, 4, 8, 12, 16]
    assert smaller_sizes(3) == [1, 2]
    assert smaller_sizes(1) == []


@pytest.mark.parametrize("pool", ["HeadFreePool", "StaleHashMapPool", "TouchLeavesQueuedPool"])
def test_a_block_pool_counterexample_is_shrunk_to_the_smallest_pool_its_calls_diverge_in(pool):
    """The size lowering serves every kind: one block fewer, the same calls no longer diverge so."""
    kind, factory = get_kind("blocks"), getattr(block_pools, pool)
    example = run_program_check(kind, factory, generator_for("blocks"), examples=200, steps=100, seed=0).counterexample
    setup = ProgramSetup(kind, kind.new, factory, generator_for("blocks"), kind.default_operations, True, 100)
    assert program_failure(setup, example.size, example.calls, None) is not None
    smaller = program_failure(setup, example.size - 1, example.calls, None) if example.size > 1 else None
    assert smaller is None or divergence_kind(smaller[1]) != divergence_kind(example.difference), example


class _WithoutOptionalViews:
    """MinimalCache seen through the contract's required methods only: no stats(), no snapshot()."""

    def __init__(self, capacity_bytes: int) -> None:
        self._cache = MinimalCache(capacity_bytes)
        for name in KIND.names:
            if name != "contains":
                setattr(self, name, getattr(self._cache, name))

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key) -> bool:
        return key in self._cache


def test_a_cache_without_the_optional_views_is_compared_on_the_others():
    report = run_program_check(KIND, _WithoutOptionalViews, generator_for("cache"), examples=50, steps=100, seed=0)
    assert report.ok, report.counterexample and report.counterexample.message


@pytest.mark.parametrize("factory", ["GetTakesReference", "EvictsPinnedEntries"])
def test_the_snippet_of_a_cache_counterexample_fails_when_run_at_its_assertion(factory):
    impl = f"model_tests.broken_caches:{factory}"
    example = run_program_check(KIND, getattr(broken_caches, factory), generator_for("cache"), examples=200, steps=100,
                                seed=0).counterexample
    snippet = snippet_of(KIND, impl, example, profile_named("contract").semantics)
    run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("AssertionError: spec: "), run.stderr


def test_shrinking_lowers_every_number_of_a_cache_counterexample():
    """Issue 35: GetTakesReference takes a reference on every get, whatever the key, the byte count
    and the capacity, so a put and a get of one key diverge alike at capacity 17, key 4, 4 bytes
    and at capacity 1, key 0, 1 byte: the shrunk counterexample is the latter."""
    setup = ProgramSetup(KIND, KIND.new, broken_caches.GetTakesReference, generator_for("cache"), KIND.names, True, 100)
    calls = (Call("reserve", (4, 4)), Call("commit", (4, ValueRecipe(4, 3, 2))), Call("get", (4,)))
    found = program_failure(setup, 17, calls, None)
    assert found is not None and found[0].step == 2
    example = shrink_program(setup, ProgramCounterexample(17, calls, found[1]), seconds=30)
    assert example.size == 1
    assert [call.args[0] for call in example.calls] == [0] * len(example.calls), example.calls
    assert [_bytes(call.args[1]) for call in example.calls if len(call.args) > 1] == [1] * (len(example.calls) - 1)


@pytest.mark.parametrize("seed", range(3))
def test_a_searched_cache_counterexample_has_key_0_and_1_byte_where_they_fail_alike(seed):
    """The same through the search: whatever key and size the search met the bug at."""
    example = run_program_check(KIND, broken_caches.GetTakesReference, generator_for("cache"), examples=200, steps=100,
                                seed=seed).counterexample
    assert example.size == 1, example
    assert {call.args[0] for call in example.calls} == {0}, example.calls
    assert {_bytes(call.args[1]) for call in example.calls if len(call.args) > 1} == {1}, example.calls


def _bytes(argument) -> int:
    return argument.nbytes if isinstance(argument, ValueRecipe) else argument
