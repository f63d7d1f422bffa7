"""The transition table in spec/cache/transitions.py agrees with `CacheSpec`.

Every edge is run on a hand-built `CacheSpec` where the key is in the edge's source state and its
guard holds; the table is complete over (state, operation); and random runs of `CacheSpec` only
ever take edges the table lists.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Hashable, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproof.spec import Acquired, CacheError, CacheSpec, EntryState, EntryView
from cacheproof.spec.cache import rules, steps
from cacheproof.spec.cache.transitions import (
    OPERATIONS,
    TRANSITIONS,
    AbstractState,
    Transition,
    abstract_state,
    transition_table,
)

ABSENT, RESERVED = AbstractState.ABSENT, AbstractState.RESERVED
IN_USE, IDLE = AbstractState.READY_IN_USE, AbstractState.READY_IDLE
KEY = "k"

Edge = tuple[AbstractState, str, AbstractState, str, bool]
"""What one step did to one key: (source, operation, target, result, bystander)."""


def edge_of(transition: Transition) -> Edge:
    return (transition.source, transition.operation, transition.target, transition.result, transition.bystander)


TABLE_EDGES = {edge_of(t) for t in TRANSITIONS}


# Building states ------------------------------------------------------------------------------


def reserved(key: Hashable, nbytes: int, refcount: int = 1, retain: bool = True) -> tuple[EntryView, Any]:
    return EntryView(key, EntryState.RESERVED, refcount, nbytes, retain), None


def in_use(key: Hashable, nbytes: int, refcount: int = 1, retain: bool = True) -> tuple[EntryView, Any]:
    return EntryView(key, EntryState.READY, refcount, nbytes, retain), value(nbytes)


def idle(key: Hashable, nbytes: int) -> tuple[EntryView, Any]:
    return EntryView(key, EntryState.READY, 0, nbytes, True), value(nbytes)


def value(nbytes: int, tag: int = 7) -> bytes:
    return bytes([tag]) * nbytes


def spec(*entries: tuple[EntryView, Any], capacity: int = 4) -> CacheSpec:
    """A CacheSpec of `capacity` holding `entries`, oldest first."""
    return CacheSpec.from_entries(capacity, entries)


# Observing edges ------------------------------------------------------------------------------


def result_text(operation: str, key: Hashable, names_key: bool, result: Any, error: BaseException | None) -> str:
    """A concrete outcome written as the table's result column writes it."""
    if error is not None:
        return f"raises {type(error).__name__}"
    if operation in ("get", "pop"):
        return "the value"
    if operation == "commit" and names_key:
        return "evicted keys"
    if operation in ("commit", "evict"):
        return "evicted keys, with this key" if key in result else "evicted keys, without this key"
    if isinstance(result, Acquired):
        return result.name
    return repr(result)


def entry_of(snapshot: tuple[EntryView, ...], key: Hashable) -> EntryView | None:
    return next((entry for entry in snapshot if entry.key == key), None)


def observed_edge(
    key: Hashable, operation: str, named: Hashable | None, before: tuple, after: tuple, result: Any, error: Any
) -> Edge | None:
    """The edge `key` took in one step, or None when the operation left a key it does not name alone."""
    source = abstract_state(entry_of(before, key))
    target = abstract_state(entry_of(after, key))
    names_key = operation in ("evict", "clear") or named == key
    if not names_key and source == target:
        return None
    return (source, operation, target, result_text(operation, key, names_key, result, error), not names_key)


def run(cache: CacheSpec, operation: str, *args: Any, **kwargs: Any) -> tuple[Any, CacheError | None]:
    try:
        return getattr(cache, operation)(*args, **kwargs), None
    except CacheError as error:
        return None, error


# Every edge, by hand ---------------------------------------------------------------------------


class Scenario(NamedTuple):
    """A state where KEY is in `expected[0]` and the guard holds, and the call that takes the edge."""

    expected: Edge
    build: Callable[[], CacheSpec]
    operation: str
    args: tuple = ()
    kwargs: dict = {}
    concrete: Any = None  # the exact result, where the table's column only names its kind


def _present_states() -> list[tuple[AbstractState, Callable[[], CacheSpec]]]:
    return [
        (RESERVED, lambda: spec(reserved(KEY, 2))),
        (IN_USE, lambda: spec(in_use(KEY, 2))),
        (IDLE, lambda: spec(idle(KEY, 2))),
    ]


def _scenarios() -> list[Scenario]:
    found: list[Scenario] = [
        # reserve: capacity 4, protected bytes 0 then 3.
        Scenario((ABSENT, "reserve", RESERVED, "True", False), spec, "reserve", (KEY, 2)),
        Scenario((ABSENT, "reserve", ABSENT, "False", False), lambda: spec(reserved("a", 3)), "reserve", (KEY, 2)),
        # acquire
        Scenario((ABSENT, "acquire", RESERVED, "NEW_RESERVATION", False), spec, "acquire", (KEY, 2)),
        Scenario((ABSENT, "acquire", ABSENT, "BLOCKED", False), lambda: spec(in_use("a", 3)), "acquire", (KEY, 2)),
        Scenario((RESERVED, "acquire", RESERVED, "RESERVATION_HIT", False), lambda: spec(reserved(KEY, 2)), "acquire", (KEY, 2)),
        Scenario((IN_USE, "acquire", IN_USE, "READY_HIT", False), lambda: spec(in_use(KEY, 2)), "acquire", (KEY, 2)),
        Scenario((IDLE, "acquire", IN_USE, "READY_HIT", False), lambda: spec(idle(KEY, 2)), "acquire", (KEY, 2)),
        # protected 3 + 2 > 4: pinning the idle entry would break the reservation.
        Scenario(
            (IDLE, "acquire", IDLE, "BLOCKED", False), lambda: spec(reserved("a", 3), idle(KEY, 2)), "acquire", (KEY, 2),
        ),
        # commit: ready 3 + 2 > 4, so the oldest idle entry "a" (2 bytes) goes, leaving 1 + 2 <= 4.
        Scenario((ABSENT, "commit", ABSENT, "raises UnknownKeyError", False), spec, "commit", (KEY, value(2))),
        Scenario(
            (RESERVED, "commit", IN_USE, "evicted keys", False),
            lambda: spec(idle("a", 2), idle("b", 1), reserved(KEY, 2)), "commit", (KEY, value(2)), concrete=["a"],
        ),
        Scenario(
            (RESERVED, "commit", RESERVED, "raises ConflictError", False),
            lambda: spec(reserved(KEY, 2)), "commit", (KEY, value(3)),
        ),
        Scenario((IN_USE, "commit", IN_USE, "raises WrongStateError", False), lambda: spec(in_use(KEY, 2)), "commit", (KEY, value(2))),
        Scenario((IDLE, "commit", IDLE, "raises WrongStateError", False), lambda: spec(idle(KEY, 2)), "commit", (KEY, value(2))),
        Scenario(
            (IDLE, "commit", ABSENT, "evicted keys, with this key", True),
            lambda: spec(idle(KEY, 2), reserved("a", 3)), "commit", ("a", value(3)), concrete=[KEY],
        ),
        # put: pinned 3 + 2 > 4 is refused; a put of 3 next to idle 2 + 1 evicts the oldest, KEY.
        Scenario((ABSENT, "put", IDLE, "True", False), spec, "put", (KEY, value(2))),
        Scenario((ABSENT, "put", ABSENT, "False", False), lambda: spec(in_use("a", 3)), "put", (KEY, value(2))),
        Scenario(
            (IDLE, "put", ABSENT, "True", True), lambda: spec(idle(KEY, 2), idle("a", 1)), "put", ("b", value(3)),
        ),
        # get
        Scenario((ABSENT, "get", ABSENT, "raises UnknownKeyError", False), spec, "get", (KEY,)),
        Scenario((RESERVED, "get", RESERVED, "raises WrongStateError", False), lambda: spec(reserved(KEY, 2)), "get", (KEY,)),
        Scenario((IN_USE, "get", IN_USE, "the value", False), lambda: spec(in_use(KEY, 2)), "get", (KEY,), concrete=value(2)),
        Scenario((IDLE, "get", IDLE, "the value", False), lambda: spec(idle(KEY, 2)), "get", (KEY,), concrete=value(2)),
        # release
        Scenario((ABSENT, "release", ABSENT, "raises UnknownKeyError", False), spec, "release", (KEY,)),
        Scenario((RESERVED, "release", RESERVED, "False", False), lambda: spec(reserved(KEY, 2, refcount=2)), "release", (KEY,)),
        Scenario((RESERVED, "release", ABSENT, "True", False), lambda: spec(reserved(KEY, 2)), "release", (KEY,)),
        Scenario((IN_USE, "release", IN_USE, "False", False), lambda: spec(in_use(KEY, 2, refcount=2)), "release", (KEY,)),
        Scenario((IN_USE, "release", IDLE, "False", False), lambda: spec(in_use(KEY, 2)), "release", (KEY,)),
        Scenario((IN_USE, "release", ABSENT, "True", False), lambda: spec(in_use(KEY, 2, retain=False)), "release", (KEY,)),
        Scenario((IDLE, "release", IDLE, "raises WrongStateError", False), lambda: spec(idle(KEY, 2)), "release", (KEY,)),
        # evict: idle 2 + 2; evict(1) takes the oldest only, evict(2) as well.
        Scenario(
            (IDLE, "evict", ABSENT, "evicted keys, with this key", False),
            lambda: spec(idle(KEY, 2), idle("a", 2)), "evict", (1,), concrete=[KEY],
        ),
        Scenario(
            (IDLE, "evict", IDLE, "evicted keys, without this key", False),
            lambda: spec(idle("a", 2), idle(KEY, 2)), "evict", (2,), concrete=["a"],
        ),
        Scenario(
            (ABSENT, "evict", ABSENT, "evicted keys, without this key", False),
            lambda: spec(idle("a", 2)), "evict", (3,), concrete=["a"],
        ),
        Scenario(
            (RESERVED, "evict", RESERVED, "evicted keys, without this key", False),
            lambda: spec(reserved(KEY, 2), idle("a", 2)), "evict", (3,), concrete=["a"],
        ),
        Scenario(
            (IN_USE, "evict", IN_USE, "evicted keys, without this key", False),
            lambda: spec(in_use(KEY, 1), idle("a", 2)), "evict", (3,), concrete=["a"],
        ),
        # pinned 3 + 2 > 4: no eviction can make room.
        Scenario((ABSENT, "evict", ABSENT, "raises CapacityError", False), lambda: spec(in_use("a", 3)), "evict", (2,)),
        Scenario(
            (RESERVED, "evict", RESERVED, "raises CapacityError", False),
            lambda: spec(reserved(KEY, 1), in_use("a", 3)), "evict", (2,),
        ),
        Scenario((IN_USE, "evict", IN_USE, "raises CapacityError", False), lambda: spec(in_use(KEY, 3)), "evict", (2,)),
        Scenario(
            (IDLE, "evict", IDLE, "raises CapacityError", False), lambda: spec(in_use("a", 3), idle(KEY, 1)), "evict", (2,),
        ),
        # pop
        Scenario((ABSENT, "pop", ABSENT, "raises UnknownKeyError", False), spec, "pop", (KEY,)),
        Scenario((RESERVED, "pop", RESERVED, "raises WrongStateError", False), lambda: spec(reserved(KEY, 2)), "pop", (KEY,)),
        Scenario((IN_USE, "pop", IN_USE, "raises WrongStateError", False), lambda: spec(in_use(KEY, 2)), "pop", (KEY,)),
        Scenario((IDLE, "pop", ABSENT, "the value", False), lambda: spec(idle(KEY, 2)), "pop", (KEY,), concrete=value(2)),
        # clear
        Scenario((ABSENT, "clear", ABSENT, "None", False), lambda: spec(idle("a", 1)), "clear"),
        Scenario((IDLE, "clear", ABSENT, "None", False), lambda: spec(idle(KEY, 1)), "clear"),
        Scenario((ABSENT, "clear", ABSENT, "raises WrongStateError", False), lambda: spec(in_use("a", 1)), "clear"),
        Scenario((IDLE, "clear", IDLE, "raises WrongStateError", False), lambda: spec(idle(KEY, 1), reserved("a", 1)), "clear"),
        Scenario((RESERVED, "clear", RESERVED, "raises WrongStateError", False), lambda: spec(reserved(KEY, 1)), "clear"),
        Scenario((IN_USE, "clear", IN_USE, "raises WrongStateError", False), lambda: spec(in_use(KEY, 1)), "clear"),
    ]
    for state, build in _present_states():
        found += [
            Scenario((state, "reserve", state, "raises WrongStateError", False), build, "reserve", (KEY, 2)),
            Scenario((state, "acquire", state, "raises ConflictError", False), build, "acquire", (KEY, 3)),
            Scenario((state, "acquire", state, "raises ConflictError", False), build, "acquire", (KEY, 2), {"retain": False}),
            Scenario((state, "put", state, "raises WrongStateError", False), build, "put", (KEY, value(2))),
        ]
    return found


SCENARIOS = _scenarios()


def _scenario_id(scenario: Scenario) -> str:
    source, operation, target, result, _ = scenario.expected
    return f"{source.name}-{operation}-{target.name}-{result}".replace(" ", "_")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_scenario_id)
def test_edge_runs_on_the_spec(scenario: Scenario) -> None:
    cache = scenario.build()
    before = cache.snapshot()
    assert abstract_state(entry_of(before, KEY)) is scenario.expected[0]
    result, error = run(cache, scenario.operation, *scenario.args, **scenario.kwargs)
    named = scenario.args[0] if scenario.operation not in ("evict", "clear") else None
    edge = observed_edge(KEY, scenario.operation, named, before, cache.snapshot(), result, error)
    assert edge == scenario.expected
    assert edge in TABLE_EDGES
    if scenario.concrete is not None:
        assert result == scenario.concrete
    if error is not None:
        assert cache.snapshot() == before  # I6


def test_every_edge_has_a_scenario() -> None:
    assert {s.expected for s in SCENARIOS} == TABLE_EDGES


def test_edges_are_told_apart_by_what_is_observed() -> None:
    assert len(TABLE_EDGES) == len(TRANSITIONS)


def test_every_state_and_operation_has_an_edge() -> None:
    listed = {(t.source, t.operation) for t in TRANSITIONS if not t.bystander}
    assert listed == {(state, operation) for state in AbstractState for operation in OPERATIONS}


def test_guards_name_real_rules() -> None:
    named = set()
    for transition in TRANSITIONS:
        text = f"{transition.guard.words} {transition.guard.rule or ''}"
        named |= set(re.findall(r"rules\.(\w+)", text))
        if transition.guard.rule is not None:
            assert re.fullmatch(r"(not )?rules\.\w+", transition.guard.rule)
    assert named == {"reservation_fits", "eviction_can_make_room", "has_room"}
    assert all(callable(getattr(rules, name)) for name in named)


def test_error_edges_change_no_state() -> None:
    errors = [t for t in TRANSITIONS if t.is_error]
    assert errors and all(t.source == t.target for t in errors)
    assert not any(t.is_error for t in TRANSITIONS if t.bystander)


def test_abstract_state_of_entries() -> None:
    assert abstract_state(None) is ABSENT
    assert abstract_state(EntryView(KEY, EntryState.RESERVED, 1, 2, True)) is RESERVED
    assert abstract_state(EntryView(KEY, EntryState.READY, 2, 2, False)) is IN_USE
    assert abstract_state(EntryView(KEY, EntryState.READY, 0, 2, True)) is IDLE


# Random runs take only listed edges ------------------------------------------------------------

RANDOM_KEYS = ("a", "b", "c")


def _random_call(data: st.DataObject, cache: CacheSpec) -> tuple[str, Hashable | None, tuple, dict]:
    """A valid call (no argument errors): sizes within the capacity, mostly agreeing with the entry."""
    capacity = cache.capacity_bytes
    operation = data.draw(st.sampled_from(OPERATIONS))
    if operation == "clear":
        return operation, None, (), {}
    if operation == "evict":
        return operation, None, (data.draw(st.integers(0, capacity)),), {}
    key = data.draw(st.sampled_from(RANDOM_KEYS))
    entry = entry_of(cache.snapshot(), key)
    nbytes = data.draw(st.integers(1, capacity))
    agree = entry is not None and data.draw(st.integers(0, 3)) > 0
    if agree:
        nbytes = entry.nbytes
    if operation in ("reserve", "acquire"):
        retain = entry.retain if agree else data.draw(st.booleans())
        return operation, key, (key, nbytes), {"retain": retain}
    if operation in ("commit", "put"):
        return operation, key, (key, value(nbytes, data.draw(st.integers(0, 255)))), {}
    return operation, key, (key,), {}


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 6), steps=st.integers(1, 30), data=st.data())
def test_random_runs_take_only_listed_edges(capacity: int, steps: int, data: st.DataObject) -> None:
    cache = CacheSpec(capacity)
    for _ in range(steps):
        operation, named, args, kwargs = _random_call(data, cache)
        before = cache.snapshot()
        result, error = run(cache, operation, *args, **kwargs)
        after = cache.snapshot()
        for key in RANDOM_KEYS:
            edge = observed_edge(key, operation, named, before, after, result, error)
            assert edge is None or edge in TABLE_EDGES, f"{operation}{args}: unlisted edge {edge} for {key!r}"


# The table follows the spec's per-entry steps ------------------------------------------------------


def _changed_edges(monkeypatch, name: str, replacement: Any) -> set[tuple]:
    monkeypatch.setattr(steps, name, replacement)
    rebuilt = transition_table()
    return {edge_of(t) for t in rebuilt} ^ TABLE_EDGES


def test_the_table_is_built_from_the_steps_as_they_are() -> None:
    assert transition_table() == TRANSITIONS


def test_a_step_that_keeps_transient_entries_moves_the_release_edge(monkeypatch) -> None:
    keeps_transients = lambda ready, retain, logic=rules.CONCRETE: logic.negate(ready)  # noqa: E731
    changed = _changed_edges(monkeypatch, "removed_at_last_release", keeps_transients)
    assert changed == {(IN_USE, "release", ABSENT, "True", False), (IN_USE, "release", IDLE, "True", False)}


def test_a_put_that_pins_its_entry_moves_the_put_edge(monkeypatch) -> None:
    changed = _changed_edges(monkeypatch, "PUT_REFCOUNT", 1)
    assert changed == {(ABSENT, "put", IDLE, "True", False), (ABSENT, "put", IN_USE, "True", False)}


def test_an_idle_test_that_picks_in_use_entries_moves_the_eviction_edges(monkeypatch) -> None:
    in_use_is_idle = lambda ready, refcount, logic=rules.CONCRETE: logic.all_of(ready, refcount == 1)  # noqa: E731
    changed = _changed_edges(monkeypatch, "is_idle", in_use_is_idle)
    assert (IN_USE, "evict", ABSENT, "evicted keys, with this key", False) in changed
    assert (IDLE, "commit", ABSENT, "evicted keys, with this key", True) in changed
    assert (IDLE, "acquire", IDLE, "READY_HIT", False) in changed  # 0 + 1 references: "idle" now


def test_the_generated_lifecycle_doc_follows_a_changed_step(monkeypatch) -> None:
    from cacheproof.docs.lifecycle import render

    committed = render()
    monkeypatch.setattr(steps, "PUT_REFCOUNT", 1)
    assert render() != committed
