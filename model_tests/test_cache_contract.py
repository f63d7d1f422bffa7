"""The contract of docs' CONTRACT.md as one test suite, bound to every cache that claims it.

`CacheContract` holds the tests; each subclass binds it to one cache factory (the pattern of
cachetools' CacheTestMixin). Every expected value is worked out by hand from the contract.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest
import torch

from cacheproof.impl import TensorLRUCache
from cacheproof.spec import (
    Acquired,
    CacheSpec,
    CacheStats,
    CapacityError,
    ConflictError,
    EntryState,
    EntryView,
    InvalidArgumentError,
    TooLargeError,
    UnknownKeyError,
    WrongStateError,
)

RESERVED, READY = EntryState.RESERVED, EntryState.READY
NEW, RES_HIT, HIT, BLOCKED = (
    Acquired.NEW_RESERVATION,
    Acquired.RESERVATION_HIT,
    Acquired.READY_HIT,
    Acquired.BLOCKED,
)
BAD_NBYTES = [True, 1.0, None, "1", 0, -1]
BAD_RETAIN = [1, 0, None, "yes"]
UNSIZABLE = ["text", 12, None, [1, 2]]


def _released_memoryview() -> memoryview:
    view = memoryview(b"abcd")
    view.release()
    return view


def _quantized() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantize_per_tensor; the type still exists
        return torch.quantize_per_tensor(torch.ones(4), 0.5, 0, torch.qint8)


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


def _sparse_csr() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse CSR is beta
        return torch.eye(4).to_sparse_csr()


UNSTORABLE = {
    # docs/contract.md, Sizing values: sizable types whose values hold no plain bytes to copy.
    "numpy object array": lambda: np.array([object(), object()], dtype=object),
    "numpy structured array with an object field": lambda: np.zeros(2, dtype=[("n", "i4"), ("o", "O")]),
    "released memoryview": _released_memoryview,
    "sparse COO tensor": lambda: torch.eye(4).to_sparse(),
    "sparse CSR tensor": _sparse_csr,
    "quantized tensor": _quantized,
    "nested tensor": _nested,
}


class HashRaises:
    """A key whose __hash__ raises something other than TypeError."""

    def __hash__(self) -> int:
        raise RuntimeError("this key cannot be hashed today")

    def __repr__(self) -> str:
        return "HashRaises()"


class EqRaisesLater:
    """A key of hash 7 (so the int key 7 collides with it and every lookup compares them) whose
    comparison raises once `arm(n)` has been called and n more comparisons have been made."""

    def __init__(self) -> None:
        self.compared = 0
        self.fuse: int | None = None

    def arm(self, comparison: int) -> None:
        self.fuse = self.compared + comparison

    def disarm(self) -> None:
        self.fuse = None

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        self.compared += 1
        if self.fuse is not None and self.compared >= self.fuse:
            raise RuntimeError(f"comparison {self.compared} of this key fails")
        return self is other

    def __repr__(self) -> str:
        return "EqRaisesLater()"


class LyingLength(bytes):
    """bytes whose __len__ claims 1 byte whatever it holds."""

    def __len__(self) -> int:
        return 1


def same_value(a: Any, b: Any) -> bool:
    """Values compare as the checker compares them: torch.equal for tensors, == otherwise."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


def observe(cache: Any) -> tuple:
    """Everything an outside caller can see of a cache."""
    return cache.snapshot(), cache.stats(), len(cache)


def raises_unchanged(cache: Any, error: type[Exception], call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """Assert the call raises `error` and leaves the cache unchanged (I6); return the message."""
    before = observe(cache)
    with pytest.raises(error) as info:
        call(*args, **kwargs)
    assert observe(cache) == before
    return str(info.value)


class CacheContract:
    """The contract's tests. A subclass sets `make_cache`; values come from `value`."""

    make_cache: Callable[[int], Any]

    def new(self, capacity_bytes: int = 100) -> Any:
        return type(self).make_cache(capacity_bytes)

    def value(self, cache: Any, nbytes: int, tag: int = 0) -> Any:
        """A value of nbytes bytes: the cache's make_value if it has one, else bytes."""
        if hasattr(cache, "make_value"):
            return cache.make_value(nbytes, tag)
        return bytes([tag % 256]) * nbytes

    def pinned(self, cache: Any, key: Any, nbytes: int, *, retain: bool = True) -> Any:
        """Make key a READY entry with refcount 1; return its value."""
        assert cache.acquire(key, nbytes, retain=retain) is NEW
        value = self.value(cache, nbytes, tag=nbytes)
        cache.commit(key, value)
        return value

    def idle(self, cache: Any, key: Any, nbytes: int, tag: int = 0) -> Any:
        """Make key an idle READY entry; return its value."""
        value = self.value(cache, nbytes, tag)
        assert cache.put(key, value) is True
        return value

    # Construction -------------------------------------------------------------------------

    def test_new_cache_is_empty(self) -> None:
        cache = self.new(100)
        assert cache.capacity_bytes == 100
        assert len(cache) == 0
        assert cache.snapshot() == ()
        assert cache.stats() == CacheStats(100, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0)

    @pytest.mark.parametrize("capacity", [0, -1, True, 1.0, None, "100"])
    def test_capacity_must_be_an_int_of_at_least_one(self, capacity: Any) -> None:
        with pytest.raises(InvalidArgumentError):
            self.new(capacity)

    # reserve ------------------------------------------------------------------------------

    def test_reserve_inserts_a_reserved_entry_at_newest(self) -> None:
        cache = self.new(100)
        self.idle(cache, "old", 10)
        assert cache.reserve("r", 30, retain=False) is True
        assert cache.snapshot() == (
            EntryView("old", READY, 0, 10, True),
            EntryView("r", RESERVED, 1, 30, False),
        )
        assert cache.stats() == CacheStats(100, 10, 30, 0, 10, 90, 2, 0, 0, 0, 0)

    def test_reserve_of_a_present_key_is_wrong_state(self) -> None:
        cache = self.new(100)
        cache.reserve("a", 10)
        self.idle(cache, "b", 10)
        raises_unchanged(cache, WrongStateError, cache.reserve, "a", 10)
        raises_unchanged(cache, WrongStateError, cache.reserve, "b", 10)

    def test_reserve_returns_false_and_changes_nothing_when_protected_bytes_overflow(self) -> None:
        cache = self.new(100)
        assert cache.reserve("a", 60) is True
        before = observe(cache)
        assert cache.reserve("b", 41) is False
        assert observe(cache) == before
        assert cache.reserve("b", 40) is True
        assert cache.stats().reserved_bytes == 100

    def test_reserve_counts_pinned_bytes(self) -> None:
        cache = self.new(100)
        self.pinned(cache, "p", 60)
        assert cache.reserve("r", 41) is False
        assert cache.reserve("r", 40) is True

    def test_reserve_does_not_count_idle_bytes(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 90)
        assert cache.reserve("b", 100) is True
        assert cache.commit("b", self.value(cache, 100)) == ["a"]
        assert cache.snapshot() == (EntryView("b", READY, 1, 100, True),)

    # acquire ------------------------------------------------------------------------------

    def test_acquire_of_an_absent_key_is_a_new_reservation(self) -> None:
        cache = self.new(100)
        assert cache.acquire("a", 10) is NEW
        assert cache.snapshot() == (EntryView("a", RESERVED, 1, 10, True),)
        assert cache.stats().misses == 1

    def test_acquire_of_a_reservation_is_a_hit_that_moves_it_to_newest(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        cache.acquire("b", 10)
        assert cache.acquire("a", 10) is RES_HIT
        assert cache.snapshot() == (
            EntryView("b", RESERVED, 1, 10, True),
            EntryView("a", RESERVED, 2, 10, True),
        )
        assert cache.stats().reserved_bytes == 20
        assert cache.stats().hits == 1

    def test_acquire_of_an_in_use_entry_adds_a_reference(self) -> None:
        cache = self.new(100)
        self.pinned(cache, "a", 10)
        assert cache.acquire("a", 10) is HIT
        assert cache.snapshot() == (EntryView("a", READY, 2, 10, True),)
        assert cache.stats().pinned_bytes == 10

    def test_acquire_of_an_in_use_entry_needs_no_room(self) -> None:
        cache = self.new(100)
        self.pinned(cache, "a", 60)
        assert cache.reserve("r", 40) is True
        assert cache.acquire("a", 60) is HIT
        assert cache.snapshot() == (
            EntryView("r", RESERVED, 1, 40, True),
            EntryView("a", READY, 2, 60, True),
        )

    def test_acquire_of_an_idle_entry_pins_it_and_moves_it_to_newest(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        self.idle(cache, "b", 20)
        assert cache.acquire("a", 10) is HIT
        assert cache.snapshot() == (
            EntryView("b", READY, 0, 20, True),
            EntryView("a", READY, 1, 10, True),
        )
        assert cache.stats() == CacheStats(100, 30, 0, 10, 20, 70, 2, 1, 0, 0, 0)

    def test_acquire_blocked_when_an_absent_key_does_not_fit(self) -> None:
        cache = self.new(100)
        cache.reserve("a", 70)
        snapshot = cache.snapshot()
        assert cache.acquire("b", 31) is BLOCKED
        assert cache.snapshot() == snapshot
        assert cache.stats().blocked == 1

    def test_seed_003_reservation_example(self) -> None:
        """Capacity 100, an idle 40-byte entry, a reservation of 80: pinning the 40 must block."""
        cache = self.new(100)
        self.pinned(cache, "img", 40)
        assert cache.release("img") is False
        assert cache.reserve("new", 80) is True
        snapshot = cache.snapshot()
        assert snapshot == (
            EntryView("img", READY, 0, 40, True),
            EntryView("new", RESERVED, 1, 80, True),
        )
        assert cache.acquire("img", 40) is BLOCKED
        assert cache.snapshot() == snapshot  # not even its recency changed
        assert cache.commit("new", self.value(cache, 80, tag=5)) == ["img"]
        assert cache.snapshot() == (EntryView("new", READY, 1, 80, True),)
        assert cache.stats() == CacheStats(100, 80, 0, 80, 0, 20, 1, 0, 1, 1, 1)

    def test_acquire_with_another_nbytes_or_retain_is_a_conflict(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        self.idle(cache, "b", 10)
        raises_unchanged(cache, ConflictError, cache.acquire, "a", 11)
        raises_unchanged(cache, ConflictError, cache.acquire, "a", 10, retain=False)
        raises_unchanged(cache, ConflictError, cache.acquire, "b", 9)
        raises_unchanged(cache, ConflictError, cache.acquire, "b", 10, retain=False)

    # commit -------------------------------------------------------------------------------

    def test_commit_makes_the_entry_ready_and_newest(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        cache.acquire("b", 10)
        value = self.value(cache, 10, tag=7)
        assert cache.commit("a", value) == []
        assert cache.snapshot() == (
            EntryView("b", RESERVED, 1, 10, True),
            EntryView("a", READY, 1, 10, True),
        )
        assert same_value(cache.get("a"), value)
        assert cache.stats() == CacheStats(100, 10, 10, 10, 0, 90, 2, 0, 2, 0, 0)

    def test_commit_keeps_the_refcount(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10, retain=False)
        cache.acquire("a", 10, retain=False)
        cache.commit("a", self.value(cache, 10))
        assert cache.snapshot() == (EntryView("a", READY, 2, 10, False),)

    def test_commit_evicts_idle_entries_oldest_first(self) -> None:
        cache = self.new(100)
        for key in "xyz":
            self.idle(cache, key, 30)
        cache.acquire("a", 50)
        assert cache.commit("a", self.value(cache, 50)) == ["x", "y"]
        assert cache.snapshot() == (
            EntryView("z", READY, 0, 30, True),
            EntryView("a", READY, 1, 50, True),
        )
        assert cache.stats().evictions == 2

    def test_commit_evicts_past_pinned_entries(self) -> None:
        cache = self.new(100)
        self.idle(cache, "x", 30)
        self.pinned(cache, "p", 30)
        self.idle(cache, "y", 30)
        cache.acquire("a", 50)
        assert cache.commit("a", self.value(cache, 50)) == ["x", "y"]
        assert cache.snapshot() == (
            EntryView("p", READY, 1, 30, True),
            EntryView("a", READY, 1, 50, True),
        )

    def test_commit_of_an_absent_key_is_unknown(self) -> None:
        cache = self.new(100)
        message = raises_unchanged(cache, UnknownKeyError, cache.commit, "a", self.value(cache, 10))
        assert "'a'" in message
        assert issubclass(UnknownKeyError, KeyError)

    def test_commit_of_a_ready_entry_is_wrong_state(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        self.pinned(cache, "b", 10)
        raises_unchanged(cache, WrongStateError, cache.commit, "a", self.value(cache, 10))
        raises_unchanged(cache, WrongStateError, cache.commit, "b", self.value(cache, 10))

    def test_commit_of_a_value_of_another_size_is_a_conflict(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        for size in (9, 11, 200):
            raises_unchanged(cache, ConflictError, cache.commit, "a", self.value(cache, size))

    @pytest.mark.parametrize("value", UNSIZABLE + [b""])
    def test_commit_of_an_unsizable_or_empty_value_is_invalid(self, value: Any) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        raises_unchanged(cache, InvalidArgumentError, cache.commit, "a", value)

    # put ----------------------------------------------------------------------------------

    def test_put_inserts_an_idle_retained_entry_at_newest(self) -> None:
        cache = self.new(100)
        cache.reserve("r", 10)
        value = self.idle(cache, "a", 10, tag=3)
        assert cache.snapshot() == (
            EntryView("r", RESERVED, 1, 10, True),
            EntryView("a", READY, 0, 10, True),
        )
        assert cache.stats() == CacheStats(100, 10, 10, 0, 10, 90, 2, 0, 0, 0, 0)
        assert same_value(cache.get("a"), value)

    def test_put_never_replaces_a_present_key(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        cache.reserve("b", 10)
        raises_unchanged(cache, WrongStateError, cache.put, "a", self.value(cache, 10, tag=1))
        raises_unchanged(cache, WrongStateError, cache.put, "b", self.value(cache, 10, tag=1))

    def test_put_of_a_value_larger_than_the_capacity_is_too_large(self) -> None:
        cache = self.new(100)
        raises_unchanged(cache, TooLargeError, cache.put, "a", self.value(cache, 101))

    def test_put_returns_false_and_changes_nothing_when_pinned_bytes_leave_no_room(self) -> None:
        cache = self.new(100)
        self.pinned(cache, "p", 70)
        self.idle(cache, "x", 20)
        before = observe(cache)
        assert cache.put("a", self.value(cache, 31)) is False
        assert observe(cache) == before
        assert cache.put("a", self.value(cache, 30)) is True
        assert cache.snapshot() == (
            EntryView("p", READY, 1, 70, True),
            EntryView("a", READY, 0, 30, True),
        )

    def test_put_does_not_count_reservations(self) -> None:
        cache = self.new(100)
        cache.reserve("r", 80)
        assert cache.put("a", self.value(cache, 50)) is True
        assert cache.stats() == CacheStats(100, 50, 80, 0, 50, 50, 2, 0, 0, 0, 0)
        assert cache.commit("r", self.value(cache, 80)) == ["a"]
        assert cache.snapshot() == (EntryView("r", READY, 1, 80, True),)

    def test_put_evicts_idle_entries_oldest_first(self) -> None:
        cache = self.new(100)
        for key in "abc":
            self.idle(cache, key, 40)
        assert cache.snapshot() == (
            EntryView("b", READY, 0, 40, True),
            EntryView("c", READY, 0, 40, True),
        )
        assert cache.stats().evictions == 1

    # get ----------------------------------------------------------------------------------

    def test_get_returns_the_value_and_moves_it_to_newest(self) -> None:
        cache = self.new(100)
        first = self.idle(cache, "a", 10, tag=1)
        self.idle(cache, "b", 10, tag=2)
        assert same_value(cache.get("a"), first)
        assert cache.snapshot() == (
            EntryView("b", READY, 0, 10, True),
            EntryView("a", READY, 0, 10, True),
        )

    def test_get_of_an_absent_or_reserved_key_fails(self) -> None:
        cache = self.new(100)
        cache.reserve("r", 10)
        raises_unchanged(cache, UnknownKeyError, cache.get, "a")
        raises_unchanged(cache, WrongStateError, cache.get, "r")

    # release ------------------------------------------------------------------------------

    def test_release_drops_one_reference(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        cache.acquire("a", 10)
        assert cache.release("a") is False
        assert cache.snapshot() == (EntryView("a", RESERVED, 1, 10, True),)

    def test_release_of_the_last_reference_removes_an_abandoned_reservation(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        assert cache.release("a") is True
        assert "a" not in cache
        assert cache.stats() == CacheStats(100, 0, 0, 0, 0, 100, 0, 0, 1, 0, 0)

    def test_release_of_the_last_reference_removes_a_transient_entry(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10, retain=False)
        cache.acquire("a", 10, retain=False)
        cache.commit("a", self.value(cache, 10))
        assert cache.release("a") is False
        assert cache.snapshot() == (EntryView("a", READY, 1, 10, False),)
        assert cache.release("a") is True
        assert len(cache) == 0
        assert cache.stats().ready_bytes == 0

    def test_release_keeps_a_retained_entry_idle_in_its_place(self) -> None:
        cache = self.new(100)
        cache.acquire("a", 10)
        cache.acquire("b", 10)
        cache.commit("a", self.value(cache, 10))
        cache.commit("b", self.value(cache, 10))
        self.idle(cache, "c", 10)
        assert cache.release("a") is False
        assert cache.snapshot() == (
            EntryView("a", READY, 0, 10, True),
            EntryView("b", READY, 1, 10, True),
            EntryView("c", READY, 0, 10, True),
        )
        assert cache.stats() == CacheStats(100, 30, 0, 10, 20, 70, 3, 0, 2, 0, 0)

    def test_a_released_entry_is_evicted_by_its_recency_not_its_release_time(self) -> None:
        cache = self.new(30)
        self.idle(cache, "a", 10)
        self.pinned(cache, "b", 10)
        self.idle(cache, "c", 10)
        cache.get("a")  # order: b, c, a
        cache.release("b")  # b turns idle, still the oldest
        assert cache.evict(20) == ["b", "c"]
        assert cache.snapshot() == (EntryView("a", READY, 0, 10, True),)

    def test_release_of_an_absent_or_unreferenced_key_fails(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        raises_unchanged(cache, UnknownKeyError, cache.release, "z")
        raises_unchanged(cache, WrongStateError, cache.release, "a")

    # evict --------------------------------------------------------------------------------

    def test_evict_of_zero_bytes_evicts_nothing(self) -> None:
        cache = self.new(30)
        for key in "abc":
            self.idle(cache, key, 10)
        assert cache.evict(0) == []
        assert len(cache) == 3

    def test_evict_takes_idle_entries_oldest_first_past_pinned_and_reserved(self) -> None:
        cache = self.new(100)
        self.idle(cache, "x", 20)
        self.pinned(cache, "p", 20)
        cache.reserve("r", 20)
        self.idle(cache, "y", 20)
        self.idle(cache, "z", 20)
        assert cache.evict(50) == ["x", "y"]
        assert cache.snapshot() == (
            EntryView("p", READY, 1, 20, True),
            EntryView("r", RESERVED, 1, 20, True),
            EntryView("z", READY, 0, 20, True),
        )
        assert cache.stats() == CacheStats(100, 40, 20, 20, 20, 60, 3, 0, 1, 0, 2)

    def test_evict_raises_capacity_error_and_evicts_nothing_when_idle_bytes_are_not_enough(self) -> None:
        cache = self.new(100)
        self.pinned(cache, "p", 60)
        self.idle(cache, "x", 20)
        self.idle(cache, "y", 20)
        raises_unchanged(cache, CapacityError, cache.evict, 41)
        assert cache.evict(40) == ["x", "y"]

    @pytest.mark.parametrize("nbytes", [-1, True, 1.0, None, "1"])
    def test_evict_nbytes_must_be_an_int_of_at_least_zero(self, nbytes: Any) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        raises_unchanged(cache, InvalidArgumentError, cache.evict, nbytes)

    def test_evict_of_more_than_the_capacity_is_too_large(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        raises_unchanged(cache, TooLargeError, cache.evict, 101)
        assert cache.evict(100) == ["a"]

    # pop ----------------------------------------------------------------------------------

    def test_pop_removes_an_idle_entry_and_returns_its_value(self) -> None:
        cache = self.new(100)
        value = self.idle(cache, "a", 10, tag=9)
        self.idle(cache, "b", 10)
        assert same_value(cache.pop("a"), value)
        assert cache.snapshot() == (EntryView("b", READY, 0, 10, True),)
        assert cache.stats().idle_bytes == 10

    def test_pop_of_an_absent_reserved_or_in_use_key_fails(self) -> None:
        cache = self.new(100)
        cache.reserve("r", 10)
        self.pinned(cache, "p", 10)
        raises_unchanged(cache, UnknownKeyError, cache.pop, "z")
        raises_unchanged(cache, WrongStateError, cache.pop, "r")
        raises_unchanged(cache, WrongStateError, cache.pop, "p")

    # clear --------------------------------------------------------------------------------

    def test_clear_removes_every_idle_entry(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        self.idle(cache, "b", 10)
        assert cache.clear() is None
        assert len(cache) == 0
        assert cache.snapshot() == ()
        assert cache.stats().ready_bytes == 0

    def test_clear_is_refused_while_an_entry_is_reserved(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        cache.reserve("r", 10)
        raises_unchanged(cache, WrongStateError, cache.clear)

    def test_clear_is_refused_while_an_entry_is_in_use(self) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        self.pinned(cache, "p", 10)
        raises_unchanged(cache, WrongStateError, cache.clear)

    # len and in ---------------------------------------------------------------------------

    def test_len_and_in_count_reserved_and_ready_entries(self) -> None:
        cache = self.new(100)
        cache.reserve("a", 10)
        self.idle(cache, ("b", 1), 10)
        assert len(cache) == 2
        assert "a" in cache
        assert ("b", 1) in cache
        assert "c" not in cache
        raises_unchanged(cache, InvalidArgumentError, cache.__contains__, ["a"])

    # Argument checks, in the contract's order --------------------------------------------

    def test_an_unhashable_key_is_reported_before_anything_else(self) -> None:
        cache = self.new(100)
        cases = [
            (cache.reserve, ([], 101)),
            (cache.acquire, ({}, 0)),
            (cache.commit, ([], "not sizable")),
            (cache.put, ([], self.value(cache, 101))),
            (cache.get, ([],)),
            (cache.release, ([],)),
            (cache.pop, ([],)),
        ]
        for call, args in cases:
            message = raises_unchanged(cache, InvalidArgumentError, call, *args)
            assert "hashable" in message
        assert "hashable" in raises_unchanged(cache, InvalidArgumentError, cache.reserve, [], 0, retain=1)

    @pytest.mark.parametrize("nbytes", BAD_NBYTES)
    def test_nbytes_must_be_an_int_of_at_least_one(self, nbytes: Any) -> None:
        cache = self.new(100)
        cache.reserve("present", 10)
        for operation in (cache.reserve, cache.acquire):
            for key in ("a", "present"):
                message = raises_unchanged(cache, InvalidArgumentError, operation, key, nbytes, retain=1)
                assert "nbytes" in message

    def test_nbytes_above_the_capacity_is_too_large_before_retain_and_state(self) -> None:
        cache = self.new(100)
        cache.reserve("present", 10)
        for operation in (cache.reserve, cache.acquire):
            raises_unchanged(cache, TooLargeError, operation, "a", 101)
            raises_unchanged(cache, TooLargeError, operation, "a", 101, retain=1)
            raises_unchanged(cache, TooLargeError, operation, "present", 101)
        raises_unchanged(cache, TooLargeError, cache.put, "present", self.value(cache, 101))

    @pytest.mark.parametrize("retain", BAD_RETAIN)
    def test_retain_must_be_a_bool(self, retain: Any) -> None:
        cache = self.new(100)
        cache.reserve("present", 10)
        for operation in (cache.reserve, cache.acquire):
            for key in ("a", "present"):
                message = raises_unchanged(cache, InvalidArgumentError, operation, key, 10, retain=retain)
                assert "retain" in message

    @pytest.mark.parametrize("value", UNSIZABLE + [b""])
    def test_a_value_is_checked_before_the_key_state(self, value: Any) -> None:
        cache = self.new(100)
        self.idle(cache, "present", 10)
        raises_unchanged(cache, InvalidArgumentError, cache.commit, "absent", value)
        raises_unchanged(cache, InvalidArgumentError, cache.put, "present", value)

    # Values the cache must never mis-store (docs/contract.md, Sizing values) -----------------

    @pytest.mark.parametrize("make", UNSTORABLE.values(), ids=UNSTORABLE.keys())
    def test_a_value_without_plain_bytes_is_invalid_in_commit_and_put(self, make: Callable[[], Any]) -> None:
        cache = self.new(100)
        cache.acquire("a", 8)
        value = make()
        message = raises_unchanged(cache, InvalidArgumentError, cache.put, "b", value)
        assert "put('b')" in message
        raises_unchanged(cache, InvalidArgumentError, cache.commit, "a", value)

    @pytest.mark.parametrize("unit", ["D", "ns"])
    def test_a_datetime64_array_is_stored_as_its_bytes(self, unit: str) -> None:
        # datetime64 values are int64 counts: 3 of them are 24 bytes. numpy exports no buffer for
        # them, which must not matter. A strided view (every other element) has its own 3 * 8 bytes.
        cache = self.new(100)
        dates = np.array(["2020-01-01", "2021-06-15", "1999-12-31", "2000-02-29", "2030-01-01", "1970-01-01"],
                         dtype=f"datetime64[{unit}]")[::2]
        assert cache.put("dates", dates) is True
        assert cache.snapshot() == (EntryView("dates", READY, 0, 24, True),)
        stored = cache.get("dates")
        if isinstance(stored, torch.Tensor):  # a cache of tensors keeps the bytes, in C order
            assert stored.cpu().numpy().tobytes() == np.ascontiguousarray(dates).tobytes()
        else:
            assert stored is dates

    def test_a_meta_tensor_is_sized_and_held_without_data(self) -> None:
        # A tensor on PyTorch's meta device has a size (2 * 3 float32 = 24 bytes) and no data; the
        # contract sizes it like any tensor, and what get returns is a meta tensor of its dtype and shape.
        cache = self.new(100)
        value = torch.empty(2, 3, dtype=torch.float32, device="meta")
        assert cache.put("m", value) is True
        assert cache.snapshot() == (EntryView("m", READY, 0, 24, True),)
        stored = cache.get("m")
        assert stored.device.type == "meta" and stored.dtype == torch.float32 and tuple(stored.shape) == (2, 3)

    def test_a_bytes_subclass_is_sized_by_its_buffer_not_its_len(self) -> None:
        # LyingLength(b"x" * 30) holds 30 bytes and says 1: it is 30 bytes, too large for 20.
        value = LyingLength(b"x" * 30)
        assert len(value) == 1
        small = self.new(20)
        raises_unchanged(small, TooLargeError, small.put, "a", value)
        cache = self.new(100)
        assert cache.put("a", value) is True
        assert cache.stats().ready_bytes == 30
        stored = cache.get("a")
        assert bytes(stored.cpu().numpy()) == b"x" * 30 if isinstance(stored, torch.Tensor) else stored is value
        cache.acquire("b", 1)
        raises_unchanged(cache, ConflictError, cache.commit, "b", value)

    @pytest.mark.parametrize("operation", ["reserve", "acquire", "commit", "put", "get", "release", "pop", "in"])
    def test_a_key_whose_hash_raises_is_invalid(self, operation: str) -> None:
        cache = self.new(100)
        self.idle(cache, "a", 10)
        call = {
            "reserve": lambda key: cache.reserve(key, 10), "acquire": lambda key: cache.acquire(key, 10),
            "commit": lambda key: cache.commit(key, self.value(cache, 10)),
            "put": lambda key: cache.put(key, self.value(cache, 10)), "get": cache.get,
            "release": cache.release, "pop": cache.pop, "in": lambda key: key in cache,
        }[operation]
        message = raises_unchanged(cache, InvalidArgumentError, call, HashRaises())
        assert "HashRaises()" in message and "not hashable" in message

    @pytest.mark.parametrize("comparison", [1, 2])
    def test_a_key_whose_comparison_raises_changes_nothing(self, comparison: int) -> None:
        # I6, docs/contract.md: a call compares its key once up front, and its first update is a
        # dict operation on the key, which raises before changing anything. So a key whose first or
        # second comparison in the call raises leaves the cache exactly as it was; the same call
        # with a well-behaved comparison then goes through. The int key 7 (in use, so it stays)
        # collides with the key; idle 8 and 9 are evicted by its put and commit.
        key = EqRaisesLater()
        cache = self.new(40)
        self.pinned(cache, 7, 10)
        self.idle(cache, 8, 10)
        self.idle(cache, 9, 10)
        calls = [
            lambda: cache.put(key, self.value(cache, 20)),  # evicts 8
            lambda: cache.get(key),
            lambda: cache.acquire(key, 20),
            lambda: cache.release(key),
            lambda: cache.pop(key),
            lambda: cache.acquire(key, 30),
            lambda: cache.commit(key, self.value(cache, 30)),  # evicts 9
            lambda: cache.acquire(key, 30),
            lambda: cache.release(key),
            lambda: cache.release(key),
            lambda: cache.reserve(key, 5) if key not in cache else None,
        ]
        raised = 0
        for call in calls:
            before = observe(cache)
            key.arm(comparison)
            try:
                call()
            except RuntimeError:
                key.disarm()
                raised += 1
                assert observe(cache) == before
                call()
            key.disarm()
        check = getattr(cache, "check_valid", None) or cache.check_invariants
        check()
        assert [view.key for view in cache.snapshot()] == [7, key]
        if comparison == 1:
            assert raised == len(calls)  # every call compares its key with 7 first
        else:
            assert raised >= 1

    # Counters -----------------------------------------------------------------------------

    def test_counters_count_hits_misses_blocks_and_evictions(self) -> None:
        cache = self.new(100)
        assert cache.acquire("a", 60) is NEW  # miss
        assert cache.acquire("a", 60) is RES_HIT  # hit
        assert cache.acquire("b", 50) is BLOCKED  # blocked
        cache.commit("a", self.value(cache, 60))
        assert cache.acquire("a", 60) is HIT  # hit
        for _ in range(3):
            cache.release("a")
        self.idle(cache, "c", 50)  # evicts a
        stats = cache.stats()
        assert (stats.hits, stats.misses, stats.blocked, stats.evictions) == (2, 1, 1, 1)


class TestCacheSpecContract(CacheContract):
    make_cache = CacheSpec


class TestTensorLRUCacheContractOnCpu(CacheContract):
    @staticmethod
    def make_cache(capacity_bytes: int) -> TensorLRUCache:
        return TensorLRUCache(capacity_bytes, device="cpu")
