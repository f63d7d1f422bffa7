"""The linearizability check on hand-written histories: what it accepts, what it rejects and why."""

from __future__ import annotations

import random
import sys

import pytest

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.check.concurrent.history import Event, History, fast_switching, run_scenario
from cacheproof.check.concurrent.scenarios import CALLS_PER_THREAD, MAX_PREFIX, Scenario, draw_scenario, smaller_scenarios
from cacheproof.check.concurrent.linearizability import check_history as check_kind_history
from cacheproof.check.programs.generators import generator_for
from cacheproof.contract.steps import StepOutcome, missing_view, outcome_of
from cacheproof.spec.kinds import get_kind
from model_tests.racy_caches import LockedCacheSpec

CACHE = get_kind("cache")


def check_history(scenario: Scenario, history: History):
    return check_kind_history(CACHE, scenario, history)


def returns(result) -> StepOutcome:
    return StepOutcome(result=result)


def raises(name: str, *bases: str) -> StepOutcome:
    return StepOutcome(error=name, error_classes=(name, *bases, "CacheError", "Exception", "BaseException", "object"))


def final(length: int, snapshot: tuple) -> dict:
    """The final views of a cache with snapshot() and no stats()."""
    return {"len": length, "stats": missing_view("stats"), "snapshot": snapshot}


def drawn(rng: random.Random, threads: int) -> Scenario:
    return draw_scenario(CACHE, generator_for("cache"), rng, threads)


def test_two_overlapping_reservations_that_both_fill_the_cache_are_not_linearizable():
    scenario = Scenario(8, (), ((Call("reserve", (1, 8)),), (Call("reserve", (2, 8)),)))
    history = History(
        (),
        (
            Event(0, 0, scenario.threads[0][0], 0, 2, returns(True)),
            Event(1, 0, scenario.threads[1][0], 1, 3, returns(True)),
        ),
        final(2, ((1, "RESERVED", 1, 8, True), (2, "RESERVED", 1, 8, True))),
    )
    verdict = check_history(scenario, history)
    assert not verdict.ok
    assert "cache.reserve(2, 8) returned True, but there the spec returned False" in verdict.reason


def test_overlapping_calls_may_take_effect_in_either_order():
    scenario = Scenario(8, (), ((Call("reserve", (1, 8)),), (Call("reserve", (2, 8)),)))
    # Thread 1 was invoked first but thread 0 won: only the order (0, 1) explains it.
    history = History(
        (),
        (
            Event(1, 0, scenario.threads[1][0], 0, 3, returns(False)),
            Event(0, 0, scenario.threads[0][0], 1, 2, returns(True)),
        ),
        final(1, ((1, "RESERVED", 1, 8, True),)),
    )
    verdict = check_history(scenario, history)
    assert verdict.ok, verdict.reason
    assert verdict.order == ((0, 0), (1, 0))


def test_real_time_order_is_respected():
    # Thread 1's reserve returned before thread 0's began, so it took effect first; thread 0's
    # reserve cannot have fitted, whatever thread 0 claims.
    scenario = Scenario(8, (), ((Call("reserve", (1, 8)),), (Call("reserve", (2, 8)),)))
    history = History(
        (),
        (
            Event(1, 0, scenario.threads[1][0], 0, 1, returns(False)),
            Event(0, 0, scenario.threads[0][0], 2, 3, returns(True)),
        ),
        final(1, ((1, "RESERVED", 1, 8, True),)),
    )
    assert not check_history(scenario, history).ok


def test_a_final_state_that_no_order_leaves_is_not_linearizable():
    scenario = Scenario(8, (Call("acquire", (1, 4)),), ((Call("acquire", (1, 4)),), (Call("acquire", (1, 4)),)))
    hit = returns("RESERVATION_HIT")
    history = History(
        (returns("NEW_RESERVATION"),),
        (
            Event(0, 0, scenario.threads[0][0], 0, 2, hit),
            Event(1, 0, scenario.threads[1][0], 1, 3, hit),
        ),
        final(1, ((1, "RESERVED", 2, 4, True),)),  # one increment lost
    )
    verdict = check_history(scenario, history)
    assert not verdict.ok
    assert "explains the state they left" in verdict.reason
    assert "snapshot() is ((1, 'RESERVED', 2, 4, True),), the spec's ((1, 'RESERVED', 3, 4, True),)" in verdict.reason


def test_errors_match_by_contract_class_anywhere_in_the_mro():
    scenario = Scenario(8, (), ((Call("release", (1,)),), (Call("get", (1,)),)))
    history = History(
        (),
        (
            Event(0, 0, scenario.threads[0][0], 0, 1, raises("MyUnknownKey", "UnknownKeyError", "KeyError")),
            Event(1, 0, scenario.threads[1][0], 2, 3, raises("UnknownKeyError", "KeyError")),
        ),
        final(0, ()),
    )
    assert check_history(scenario, history).ok
    plain_key_error = StepOutcome(crash="KeyError: 1")
    crashed = History((), (Event(0, 0, scenario.threads[0][0], 0, 1, plain_key_error),) + history.events[1:],
                      history.final)
    verdict = check_history(scenario, crashed)
    assert not verdict.ok and "crashed" in verdict.reason and "not a contract error" in verdict.reason


def test_values_are_compared_as_the_implementation_made_them():
    recipe = ValueRecipe(4, 7)
    value = recipe.value(None)
    scenario = Scenario(8, (Call("put", (1, recipe)),), ((Call("get", (1,)),), (Call("pop", (1,)),)))
    events = (
        Event(0, 0, scenario.threads[0][0], 0, 1, returns(value)),
        Event(1, 0, scenario.threads[1][0], 2, 3, returns(value)),
    )
    values = {recipe: value}
    assert check_history(scenario, History((returns(True),), events, final(0, ()), values=values)).ok
    wrong_value = events[:1] + (Event(1, 0, scenario.threads[1][0], 2, 3, returns(bytes(4))),)
    verdict = check_history(scenario, History((returns(True),), wrong_value, final(0, ()), values=values))
    assert not verdict.ok and "cache.pop(1) returned b'\\x00\\x00\\x00\\x00', but there the spec returned" in verdict.reason


def test_a_stuck_thread_and_a_diverging_prefix_fail_without_search():
    scenario = Scenario(8, (Call("reserve", (1, 8)),), ((Call("release", (1,)),), (Call("get", (1,)),)))
    stuck = History(
        (returns(True),),
        (Event(0, 0, scenario.threads[0][0], 0, None, None), Event(1, 0, scenario.threads[1][0], 1, 2, raises("WrongStateError"))),
        None,
        (0,),
    )
    verdict = check_history(scenario, stuck)
    assert not verdict.ok and "thread 0 never returned from cache.release(1)" in verdict.reason
    answered = (
        Event(0, 0, scenario.threads[0][0], 0, 1, raises("UnknownKeyError")),
        Event(1, 0, scenario.threads[1][0], 2, 3, raises("UnknownKeyError")),
    )
    diverging = History((returns(False),), answered, final(0, ()))
    verdict = check_history(scenario, diverging)
    assert not verdict.ok and verdict.reason.startswith("the prefix alone diverges")
    with pytest.raises(ValueError, match="is not one of this scenario"):
        check_history(scenario, History((), answered, final(0, ())))


def test_drawn_scenarios_have_the_documented_shape_and_depend_only_on_the_seed():
    for number in range(50):
        threads = 2 + number % 3
        scenario = drawn(random.Random(f"7:{number}"), threads)
        assert scenario == drawn(random.Random(f"7:{number}"), threads)
        assert len(scenario.threads) == threads and len(scenario.prefix) <= MAX_PREFIX
        assert all(CALLS_PER_THREAD[0] <= len(calls) <= CALLS_PER_THREAD[1] for calls in scenario.threads)
        assert Scenario.from_json(scenario.to_json(), CACHE) == scenario
        for smaller in smaller_scenarios(scenario):
            assert smaller.calls < scenario.calls
    with pytest.raises(ValueError, match="threads must be in 1..4"):
        drawn(random.Random(0), 5)


def test_runs_of_a_locked_cache_are_linearizable_and_the_switch_interval_is_restored():
    before = sys.getswitchinterval()
    with fast_switching():
        assert sys.getswitchinterval() < before
        for number in range(20):
            scenario = drawn(random.Random(f"3:{number}"), 3)
            for _ in range(5):
                history = run_scenario(CACHE, LockedCacheSpec, scenario)
                verdict = check_history(scenario, history)
                assert verdict.ok, (scenario, history.lines(), verdict.reason)
                assert len(verdict.order) == sum(len(calls) for calls in scenario.threads)
    assert sys.getswitchinterval() == before


def test_one_thread_that_diverges_is_reported_as_a_sequential_bug():
    scenario = Scenario(8, (), ((Call("release", (3,)),),))
    history = History((), (Event(0, 0, scenario.threads[0][0], 0, 1, returns(False)),), final(0, ()))
    verdict = check_history(scenario, history)
    assert not verdict.ok
    assert verdict.reason.startswith("one thread alone diverges from the spec")
    assert "cache.release(3) returned False, but there the spec raised UnknownKeyError" in verdict.reason


def test_a_crash_is_reported_with_its_message():
    from cacheproof.spec import UnknownKeyError

    class Raising:
        def __init__(self, error):
            self.error = error

        def get(self, key):
            raise self.error

    crash = outcome_of(Raising(RuntimeError("dictionary changed size during iteration")), Call("get", (1,)),
                       CACHE.error_names)
    assert crash.crash == "RuntimeError: dictionary changed size during iteration"
    assert outcome_of(Raising(KeyError("k")), Call("get", (1,)), CACHE.error_names).crash == "KeyError: 'k'"
    contract = outcome_of(Raising(UnknownKeyError("release(1): the key is absent")), Call("get", (1,)), CACHE.error_names)
    assert contract.crash is None and contract.error == "UnknownKeyError"
    scenario = Scenario(8, (), ((Call("get", (1,)),), (Call("get", (2,)),)))
    events = (
        Event(0, 0, scenario.threads[0][0], 0, 1, crash),
        Event(1, 0, scenario.threads[1][0], 2, 3, raises("UnknownKeyError")),
    )
    verdict = check_history(scenario, History((), events, final(0, ())))
    assert not verdict.ok
    assert verdict.reason == (
        "thread 0 crashed: cache.get(1) raises RuntimeError: dictionary changed size during iteration "
        "(RuntimeError is not a contract error)"
    )
