"""The invariant table: each predicate accepts a legal step and rejects the breach it names."""

from __future__ import annotations

import pytest

from cacheproof.spec import CacheSpec, EntryState, EntryView
from cacheproof.spec.cache.invariants import (
    INVARIANTS,
    INVARIANTS_BY_NAME,
    InvariantViolation,
    Step,
    broken_invariants,
    check_state,
    check_step,
)

RESERVED, READY = EntryState.RESERVED, EntryState.READY


def view(key, state=READY, refcount=0, nbytes=1, retain=True):
    return EntryView(key, state, refcount, nbytes, retain)


def names(step):
    return [invariant.name for invariant in broken_invariants(step)]


def state_step(capacity, *entries):
    return Step(None, capacity, entries, entries, False)


def test_table_names_i1_to_i6_in_order():
    assert [invariant.name for invariant in INVARIANTS] == ["I1", "I2", "I3", "I4", "I5", "I6"]
    assert set(INVARIANTS_BY_NAME) == {"I1", "I2", "I3", "I4", "I5", "I6"}


def test_legal_state_breaks_nothing():
    step = state_step(10, view("a", RESERVED, 1, 4), view("b", READY, 2, 3), view("c", READY, 0, 3))
    assert names(step) == []


def test_i1_protected_bytes_over_capacity():
    # 6 reserved + 5 pinned = 11 > 10; ready is only 5.
    assert names(state_step(10, view("a", RESERVED, 1, 6), view("b", READY, 1, 5))) == ["I1"]


def test_i2_ready_bytes_over_capacity():
    # 4 pinned + 7 idle = 11 ready > 10; protected is 4.
    assert names(state_step(10, view("a", READY, 1, 4), view("b", READY, 0, 7))) == ["I2"]


def test_i3_reservation_without_reference():
    assert names(state_step(10, view("a", RESERVED, 0, 2))) == ["I3"]


def test_i4_idle_transient_entry():
    assert names(state_step(10, view("a", READY, 0, 2, retain=False))) == ["I4"]


def test_i5_evicting_an_in_use_entry():
    before = (view("a", READY, 1, 2), view("b", READY, 0, 2))
    after = (view("b", READY, 0, 2), view("c", READY, 1, 2))
    assert names(Step("commit", 4, before, after, False)) == ["I5"]


def test_i5_evicting_newest_idle_first():
    before = (view("a"), view("b"), view("c", RESERVED, 1, 1))
    after = (view("a"), view("c", READY, 1, 1))
    assert names(Step("commit", 2, before, after, False)) == ["I5"]


def test_i5_oldest_idle_first_is_legal():
    before = (view("a", READY, 1), view("b"), view("c"), view("d", RESERVED, 1, 1))
    after = (view("a", READY, 1), view("c"), view("d", READY, 1, 1))
    assert names(Step("commit", 3, before, after, False)) == []


def test_i5_reservation_removed_outside_release():
    before = (view("a", RESERVED, 1, 2),)
    assert names(Step("pop", 4, before, (), False)) == ["I5"]
    assert names(Step("release", 4, before, (), False)) == []


def test_i5_reservation_replaced_with_other_size():
    before = (view("a", RESERVED, 1, 2),)
    after = (view("a", RESERVED, 1, 3),)
    assert names(Step("acquire", 4, before, after, False)) == ["I5"]


def test_i6_raise_that_changed_something():
    before = (view("a"),)
    assert names(Step("commit", 4, before, (), True)) == ["I6"]
    assert names(Step("commit", 4, before, before, True)) == []


def test_check_step_names_the_invariant():
    with pytest.raises(InvariantViolation, match="I3"):
        check_step(state_step(10, view("a", RESERVED, 0, 2)))


def test_check_state_accepts_spec_states():
    cache = CacheSpec(8)
    cache.reserve("a", 3)
    cache.put("b", b"xx")
    check_state(8, cache.snapshot())
    cache.check_invariants()


def test_from_entries_rejects_an_illegal_state():
    with pytest.raises(InvariantViolation, match="I1"):
        CacheSpec.from_entries(4, [(view("a", RESERVED, 1, 3), None), (view("b", READY, 1, 2), b"xx")])
