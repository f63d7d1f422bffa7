"""cacheproof.adapt: each helper does what its rule says, on the inputs adapters meet."""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import pytest

from cacheproof.adapt import (
    ErrorRule,
    References,
    SizeUnit,
    evicted_keys,
    keys_removed,
    snapshot_from_table,
    stats_from_snapshot,
    translated_errors,
    value_or_missing,
)
from cacheproof.spec import (
    CacheSpec,
    ConflictError,
    EntryState,
    EntryView,
    InvalidArgumentError,
    UnknownKeyError,
    WrongStateError,
)


def test_value_or_missing():
    assert value_or_missing("get", "k", b"v") == b"v"
    assert value_or_missing("get", "k", 0) == 0  # falsy values are values
    with pytest.raises(UnknownKeyError, match=r"get\('k'\): the key is absent"):
        value_or_missing("get", "k", None)


@pytest.mark.parametrize(
    "victims, keys",
    [
        (None, []),
        ([], []),
        (["a", "b"], ["a", "b"]),
        (("b", "a"), ["b", "a"]),
        (OrderedDict([("b", 1), ("a", 2)]), ["b", "a"]),
        ([("a", b"x"), ("b", b"y")], ["a", "b"]),
        ((key for key in "ab"), ["a", "b"]),
    ],
    ids=["none", "empty", "list", "tuple", "mapping", "pairs", "generator"],
)
def test_evicted_keys(victims, keys):
    assert evicted_keys(victims) == keys


def test_evicted_keys_refuses_a_set():
    with pytest.raises(TypeError, match="no order"):
        evicted_keys({"a", "b"})


def test_keys_removed_in_the_before_order_without_the_stored_key():
    assert keys_removed(["a", "b", "c", "d"], ["c", "new"], keep="new") == ["a", "b", "d"]
    assert keys_removed(["a", "new"], ["new"], keep="new") == ["a"]
    assert keys_removed(["a", "new"], [], keep="new") == ["a"]  # a replaced key that also left
    assert keys_removed([], ["a"]) == []


class PeerError(RuntimeError):
    pass


RULES = (
    ErrorRule(KeyError, UnknownKeyError),
    ErrorRule(PeerError, WrongStateError, r"not (ready|committed)"),
    ErrorRule((ValueError, PeerError), ConflictError, "size"),
)


@pytest.mark.parametrize(
    "raised, error, message",
    [
        (KeyError("k"), UnknownKeyError, r"^get\('k'\): KeyError: 'k'$"),
        (PeerError("entry not ready"), WrongStateError, "PeerError: entry not ready"),
        (PeerError("size 3 != 4"), ConflictError, "size 3 != 4"),
        (ValueError("size mismatch"), ConflictError, "ValueError: size mismatch"),
    ],
)
def test_translated_errors_by_type_and_message(raised, error, message):
    with pytest.raises(error, match=message) as caught:
        with translated_errors(RULES, "get", "k"):
            raise raised
    assert caught.value.__cause__ is raised


def test_untranslated_and_contract_errors_pass_unchanged():
    with pytest.raises(PeerError, match="disk on fire"):
        with translated_errors(RULES, "get", "k"):
            raise PeerError("disk on fire")
    with pytest.raises(ValueError, match="bad"):  # ValueError without "size": no rule
        with translated_errors(RULES, "get"):
            raise ValueError("bad")
    original = WrongStateError("already a contract error")
    with pytest.raises(WrongStateError) as caught:
        with translated_errors(RULES, "get"):
            raise original
    assert caught.value is original
    with translated_errors(RULES, "get"):
        pass  # nothing raised: nothing happens


def test_first_matching_rule_wins():
    rules = (ErrorRule(PeerError, ConflictError, "size"), ErrorRule(PeerError, WrongStateError))
    with pytest.raises(ConflictError):
        with translated_errors(rules, "commit", 1):
            raise PeerError("size")
    with pytest.raises(WrongStateError, match=r"^clear: PeerError: busy$"):
        with translated_errors(rules, "clear"):
            raise PeerError("busy")


class Record(NamedTuple):
    size_bytes: int
    holders: frozenset
    value: object


def test_snapshot_from_table_reads_fields_by_name_function_and_constant():
    table = OrderedDict(
        [("old", Record(2, frozenset(), b"xx")), ("busy", Record(1, frozenset({"r1", "r2"}), b"y")),
         ("pending", Record(3, frozenset({"r3"}), None))]
    )
    views = snapshot_from_table(
        table, nbytes="size_bytes", refcount=lambda r: len(r.holders), state=lambda r: r.value is not None,
    )
    assert views == (
        EntryView("old", EntryState.READY, 0, 2, True),
        EntryView("busy", EntryState.READY, 2, 1, True),
        EntryView("pending", EntryState.RESERVED, 1, 3, True),
    )
    plain = snapshot_from_table([("a", 4), ("b", 1)], nbytes=lambda size: size, newest_first=True, state=True)
    assert plain == (EntryView("b", EntryState.READY, 0, 1, True), EntryView("a", EntryState.READY, 0, 4, True))
    with pytest.raises(TypeError, match="not an EntryState"):
        snapshot_from_table({"a": 1}, nbytes=1, state=3)


def test_stats_from_snapshot_match_the_spec_s_own():
    spec = CacheSpec(10)
    spec.put("idle", b"ab")
    spec.acquire("pinned", 3)
    spec.commit("pinned", b"xyz")
    spec.reserve("reserved", 4)
    ours, theirs = stats_from_snapshot(10, spec.snapshot()), spec.stats()
    for field in ("capacity_bytes", "ready_bytes", "reserved_bytes", "pinned_bytes", "idle_bytes", "free_bytes",
                  "entries"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert (ours.reserved_bytes, ours.pinned_bytes, ours.idle_bytes, ours.free_bytes) == (4, 3, 2, 5)


def test_size_unit_is_exact():
    slot = SizeUnit(8, "slot")
    assert slot.units(24) == 3 and slot.bytes(3) == 24 and slot.units_of(b"x" * 16) == 2
    with pytest.raises(InvalidArgumentError, match="'k': 20 bytes are not a whole number of slots of 8 bytes"):
        slot.units(20, "k")
    with pytest.raises(InvalidArgumentError, match="no size"):
        slot.units_of(object(), "k")
    with pytest.raises(InvalidArgumentError, match="int >= 1"):
        SizeUnit(0)
    assert SizeUnit().units(5) == 5


def test_references_give_distinct_ids_and_return_the_latest():
    refs = References()
    first, second = refs.take("k"), refs.take("k")
    other = refs.take("j")
    assert len({first, second, other}) == 3 and refs.count("k") == 2
    assert refs.give_back("k") == second and refs.give_back("k") == first
    assert refs.give_back("k") is None and refs.count("k") == 0
    assert refs.take("k") not in (first, second)  # ids are never reused
    refs.forget("j")
    assert refs.give_back("j") is None
    refs.forget()
    assert refs.count("k") == 0


def test_as_tensor_keeps_bytes_and_size():
    import numpy
    import torch

    from cacheproof.adapt import as_tensor, make_tensor
    from cacheproof.contract.values import storage_free_value
    from cacheproof.spec.cache.values import value_size

    tensor = make_tensor(3, 258)
    assert tensor.dtype == torch.uint8 and tensor.tolist() == [2, 2, 2]
    assert as_tensor(tensor) is tensor
    assert as_tensor(b"ab").tolist() == [97, 98] and value_size(as_tensor(b"")) == 0
    assert value_size(as_tensor(storage_free_value(9))) == 9
    assert value_size(as_tensor(numpy.zeros(2, dtype=numpy.float32))) == 8
