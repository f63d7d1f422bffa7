"""The rules over numbers, with hand-computed expectations, and the symbolic-branch contract."""

from __future__ import annotations

from cacheproof.spec.cache import rules
from cacheproof.spec.cache.rules import Bytes


def test_derived_counts():
    b = Bytes(capacity=100, reserved=30, pinned=20, idle=40)
    assert rules.ready(b) == 60
    assert rules.protected(b) == 50
    assert rules.free(b) == 40


def test_reservation_fits_at_the_boundary():
    b = Bytes(100, 30, 20, 40)
    assert rules.reservation_fits(b, 50)  # 50 + 50 == 100
    assert not rules.reservation_fits(b, 51)


def test_seed_003_hundred_byte_example():
    # An idle 40-byte entry and an 80-byte reservation: pinning the 40 would protect 120 > 100.
    b = Bytes(100, reserved=80, pinned=0, idle=40)
    assert not rules.reservation_fits(b, 40)
    # Committing the 80 must evict the 40: 40 + 80 - 100 = 20 bytes at least.
    assert rules.bytes_to_evict(b, 80) == 20


def test_eviction_can_make_room_ignores_reservations():
    b = Bytes(10, reserved=9, pinned=4, idle=6)
    assert rules.eviction_can_make_room(b, 6)
    assert not rules.eviction_can_make_room(b, 7)


def test_bytes_to_evict_is_never_negative():
    assert rules.bytes_to_evict(Bytes(10, 0, 2, 3), 4) == 0
    assert rules.bytes_to_evict(Bytes(10, 0, 2, 3), 6) == 1


def test_updates():
    b = Bytes(100, 10, 20, 30)
    assert rules.after_reserve(b, 5) == Bytes(100, 15, 20, 30)
    assert rules.after_pin(b, 5) == Bytes(100, 10, 25, 25)
    assert rules.after_commit(b, 10, 7) == Bytes(100, 0, 30, 23)
    assert rules.after_put(b, 4, 6) == Bytes(100, 10, 20, 28)
    assert rules.after_evict(b, 30) == Bytes(100, 10, 20, 0)
    assert rules.after_abandon(b, 10) == Bytes(100, 0, 20, 30)
    assert rules.after_last_release(b, 20, True) == Bytes(100, 10, 0, 50)
    assert rules.after_last_release(b, 20, False) == Bytes(100, 10, 0, 30)
    assert rules.after_clear(b) == Bytes(100, 0, 0, 0)


def test_branches_go_through_the_logic():
    calls = []

    def choose(condition, if_true, if_false):
        calls.append(condition)
        return ("if", condition, if_true, if_false)

    logic = rules.CONCRETE._replace(choose=choose)
    result = rules.bytes_to_evict(Bytes(10, 0, 2, 3), 6, logic)
    assert calls == [True] and result == ("if", True, 1, 0)
