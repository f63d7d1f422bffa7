"""The linearizability search itself (cacheproof/check/concurrent/search.py): the same verdicts as a
plain search over every order on many small drawn histories, whole and per key; a refutation's
witness; the kind-declared parts; the budget. Every history is drawn from a fixed seed."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest

from cacheproof.bench.linearizability import _SizedAt, altered, linearizable_history
from cacheproof.check.concurrent.history import Event, History
from cacheproof.check.concurrent.linearizability import _HistoryModel, check_history as check_kind_history
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.check.programs.generators import generator_for
from cacheproof.contract.steps import outcome_of, view_of
from cacheproof.check.concurrent.search import linearize, linearize_parts, merged_order
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.keys import SMALL_KEYS
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.kinds import get_kind, new_spec

CACHE = get_kind("cache")


def check_history(scenario: Scenario, history: History, **budget: Any):
    return check_kind_history(CACHE, scenario, history, **budget)


WITHOUT_EVICT_OR_CLEAR = tuple(name for name in ALL_OPERATIONS if name not in ("evict", "clear"))


def drawn_history(rng: random.Random, capacity: int, operations: tuple[str, ...]) -> tuple[Scenario, History]:
    """2-3 threads of 1-3 calls, each thread's calls one after another with random gaps, so calls of
    different threads overlap at random. The outcomes are the spec's when the calls run in an order
    that is, half of the time, one their intervals allow (then the history is linearizable), else any
    order that keeps each thread's; a third of the histories then get one outcome swapped for another
    call's."""
    threads = rng.randint(2, 3)
    intervals: list[tuple[int, int, int, int]] = []  # (invoked, responded, thread, index)
    for thread in range(threads):
        clock = rng.randrange(4)
        for index in range(rng.randint(1, 3)):
            invoked = clock + rng.randrange(3)
            clock = invoked + 1 + rng.randrange(6)
            intervals.append((invoked, clock, thread, index))
    if rng.random() < 0.5:
        order = sorted(intervals, key=lambda i: rng.uniform(i[0], i[1]))
    else:
        queues = [[i for i in intervals if i[2] == thread] for thread in range(threads)]
        order = []
        while any(queues):
            order.append(rng.choice([queue for queue in queues if queue]).pop(0))
    generator = generator_for("cache")
    generator.size(rng)
    generator.keys = SMALL_KEYS
    spec = new_spec(capacity)
    events = {}
    for invoked, responded, thread, index in order:
        call = generator.draw_call(rng, _SizedAt(spec, 8), operations, False)
        events[thread, index] = Event(thread, index, call, invoked, responded, outcome_of(spec, call, CACHE.error_names))
    ordered = sorted(events.values(), key=lambda e: (e.invoked, e.thread))
    if rng.random() < 1 / 3 and len(ordered) > 1:
        victim, donor = rng.sample(range(len(ordered)), 2)
        ordered[victim] = ordered[victim]._replace(outcome=ordered[donor].outcome)
    per_thread = [tuple(e.call for e in sorted(events.values(), key=lambda e: e.index) if e.thread == t) for t in range(threads)]
    scenario = Scenario(capacity, (), tuple(per_thread))
    final = {view: view_of(spec, view, CACHE.view_readers, spec) for view in CACHE.views}
    return scenario, History((), tuple(ordered), final, values={recipe: recipe.value(spec) for recipe in scenario.recipes()})


def every_order(model: Any, start: Any, invoked: list[int], responded: list[int]) -> bool:
    """The plain search, with no memo, no list and no parts: is some order that keeps real time
    (a call that returned before another was invoked goes first) explained by `model`?"""
    count = len(invoked)

    def extend(state: Any, placed: frozenset) -> bool:
        if len(placed) == count:
            return model.final_difference(state) is None
        for call in range(count):
            if call in placed or any(responded[j] < invoked[call] for j in range(count) if j not in placed):
                continue
            after, _ = model.step(state, call)
            if after is not None and extend(after, placed | {call}):
                return True
        return False

    return extend(start, frozenset())


def _search_inputs(scenario: Scenario, history: History):
    model = _HistoryModel(CACHE, history)
    return (model, scenario.new_model(CACHE), [e.invoked for e in history.events],
            [e.responded for e in history.events])


@pytest.mark.parametrize("capacity, operations", [(8, ALL_OPERATIONS), (64, WITHOUT_EVICT_OR_CLEAR)],
                         ids=["evicting", "per-key"])
def test_the_search_agrees_with_trying_every_order_on_drawn_histories(capacity: int, operations: tuple[str, ...]):
    rng = random.Random(20261205)
    verdicts = {True: 0, False: 0}
    split = 0
    for _ in range(150):
        scenario, history = drawn_history(rng, capacity, operations)
        model, start, invoked, responded = _search_inputs(scenario, history)
        expected = every_order(model, start, invoked, responded)
        parts = get_kind("cache").parts(start, [(e.call.op, e.call.args) for e in history.events])
        split += parts is not None
        whole = linearize(model, start, invoked, responded)
        by_parts = linearize_parts(model, start, invoked, responded, parts)
        assert (whole.ok, by_parts.ok, check_history(scenario, history).ok) == (expected,) * 3, history
        verdicts[expected] += 1
    assert min(verdicts.values()) >= 30, verdicts  # both verdicts are well represented
    if operations is WITHOUT_EVICT_OR_CLEAR:
        assert split >= 75, split  # most histories on the roomy cache are searched per key


def test_a_witness_order_explains_every_outcome_and_keeps_real_time():
    scenario, history = linearizable_history(3, 30, 3, seed=1)
    model, start, invoked, responded = _search_inputs(scenario, history)
    found = linearize(model, start, invoked, responded)
    assert found.ok is True and sorted(found.order) == list(range(len(history.events)))
    state = start
    for position, call in enumerate(found.order):
        assert not any(responded[later] < invoked[call] for later in found.order[position + 1:])
        state, why = model.step(state, call)
        assert state is not None, why
    assert model.final_difference(state) is None


@pytest.mark.parametrize("cache", ["evicting", "per key"])
def test_a_refuted_history_names_the_longest_explained_order_as_its_witness(cache: str):
    scenario, history = linearizable_history(3, 30, 3, seed=2, cache=cache)
    broken = altered(history)
    model, start, invoked, responded = _search_inputs(scenario, broken)
    parts = get_kind("cache").parts(start, [(e.call.op, e.call.args) for e in broken.events])
    assert (parts is None) == (cache == "evicting")
    refuted = linearize_parts(model, start, invoked, responded, parts)
    assert refuted.ok is False and refuted.deepest and refuted.why
    last = len(broken.events) - 1
    assert last not in refuted.deepest  # the altered call is the one nothing explains
    state = start
    for call in refuted.deepest:
        state, why = model.step(state, call)
        assert state is not None, why
    assert set(refuted.part) == (set() if parts is None else next(set(p) for p in parts if last in p))
    verdict = check_history(scenario, broken)
    assert verdict.ok is False and "the longest order that explains the outcomes is" in verdict.reason
    assert ("searched part by part" in verdict.reason) == (cache == "per key")


def test_past_its_budget_the_search_answers_unknown_and_without_one_it_decides():
    scenario, history = linearizable_history(3, 60, 3, seed=3)
    broken = altered(history)
    assert check_history(scenario, broken, budget_seconds=0).ok is None
    assert check_history(scenario, broken, budget_seconds=None).ok is False


def test_orders_of_parts_merge_into_one_that_keeps_real_time():
    # call 0 spans 0-100, call 1 (after it in its part) 1-2, call 2 (another part) 5-50: call 1
    # returned before call 2 was invoked, so it must come first though its part's head ends last.
    invoked, responded = [0, 1, 5], [100, 2, 50]
    order = merged_order([[0, 1], [2]], invoked)
    assert order == (0, 1, 2)
    assert all(not (responded[b] < invoked[a]) for i, a in enumerate(order) for b in order[i + 1:])


def _recipe(nbytes: int) -> ValueRecipe:
    return ValueRecipe(nbytes, 1, None)


@pytest.mark.parametrize("capacity, calls, expected", [
    (64, [Call("reserve", (1, 30)), Call("get", (2,)), Call("commit", (1, _recipe(30))), Call("put", (2, _recipe(30)))],
     [[0, 2], [1, 3]]),
    # 1 and 2 may hold 30 + 40 bytes at once: more than 64, so a call may evict the other key's entry
    (64, [Call("reserve", (1, 30)), Call("put", (2, _recipe(40)))], None),
    (64, [Call("reserve", (1, 8)), Call("evict", (8,))], None),  # evict touches every key
    (64, [Call("reserve", (1, 8)), Call("clear")], None),
    (64, [Call("reserve", (1, 8)), Call("get", (1,))], None),  # one key: nothing to split
])
def test_the_tensor_cache_splits_per_key_only_while_room_is_never_short(capacity, calls, expected):
    model = new_spec(capacity)
    assert get_kind("cache").parts(model, [(c.op, c.args) for c in calls]) == expected


def test_entries_held_before_the_threads_count_against_the_room():
    model = new_spec(64)
    model.put(3, b"x" * 41)
    calls = [("reserve", (1, 12)), ("reserve", (2, 12))]
    assert get_kind("cache").parts(model, calls) is None  # 41 + 12 + 12 > 64
    assert get_kind("cache").parts(new_spec(64), calls) == [[0], [1]]


@pytest.mark.parametrize("kind", ["blocks", "radix"])
def test_kinds_whose_requests_share_state_never_split(kind: str):
    spec_kind = get_kind(kind)
    assert spec_kind.partitioning is None
    assert spec_kind.parts(spec_kind.new(8), [("free_request", (1,)), ("free_request", (2,))]) is None


@pytest.mark.parametrize("threads, calls", [(1, 1), (2, 1)])
def test_the_bench_alters_an_outcome_even_in_a_history_too_short_to_borrow_one(threads: int, calls: int):
    scenario, history = linearizable_history(threads, calls, 3, seed=0)
    broken = altered(history)
    assert broken.events[-1].outcome.describe() != history.events[-1].outcome.describe()
    assert check_history(scenario, history).ok is True and check_history(scenario, broken).ok is False


@pytest.mark.parametrize("collecting", [True, False])
def test_the_search_leaves_the_cycle_collector_as_it_found_it(collecting: bool):
    scenario, history = linearizable_history(2, 10, 3, seed=4)
    model, start, invoked, responded = _search_inputs(scenario, history)
    was = gc.isenabled()
    (gc.enable if collecting else gc.disable)()
    try:
        assert linearize(model, start, invoked, responded).ok is True
        assert gc.isenabled() is collecting
    finally:
        (gc.enable if was else gc.disable)()
