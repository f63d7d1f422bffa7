"""Tests written to kill mutants that the model tests let survive (see docs/mutation.md).

Each expectation comes from the contract's sizing rule (docs/contract.md, the sizing rule of values):
`len()` for bytes/bytearray, `.nbytes` for memoryview and numpy arrays, `numel() * element_size()`
for torch tensors, and any other type is not sizable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch

from cacheproof.docs import lifecycle as lifecycle_docs
from cacheproof.impl import tensor_lru_cache
from cacheproof.impl import lru_entries
from cacheproof.impl.tensor_lru_cache import TensorLRUCache
from cacheproof.spec import (
    CacheError,
    CacheSpec,
    ConflictError,
    EntryState,
    EntryView,
    InvalidArgumentError,
    TooLargeError,
    UnknownKeyError,
)
from cacheproof.spec.cache import invariants, transitions
from cacheproof.spec.cache.invariants import InvariantViolation
from cacheproof.spec.cache.values import value_size
from model_tests.test_transitions import SCENARIOS, edge_of


class ndarray:  # noqa: N801 - named like numpy's array on purpose
    """Not numpy's array: only its name matches."""

    nbytes = 7


class Tensor:
    """Not torch's tensor: only its name matches."""

    def numel(self) -> int:
        return 3

    def element_size(self) -> int:
        return 5


def test_a_numpy_array_is_sized_by_its_nbytes() -> None:
    # Kills the numpy-branch mutants of value_size in spec/cache/values.py (`!= "numpy"`, the altered
    # "numpy"/"ndarray" strings, `!= "ndarray"`, `int(None)`): 3 float32 elements are 3 * 4 = 12 bytes.
    assert value_size(np.zeros(3, dtype=np.float32)) == 12


def test_a_class_named_ndarray_outside_numpy_is_not_sizable() -> None:
    # Kills value_size's `kind.__module__ == "numpy" or kind.__name__ == "ndarray"` mutant.
    assert value_size(ndarray()) is None


def test_a_class_named_tensor_outside_torch_is_not_sizable() -> None:
    # Kills _is_torch_tensor's `base.__module__ == "torch" or base.__name__ == "Tensor"` mutant.
    assert value_size(Tensor()) is None


def test_a_torch_tensor_is_sized_by_numel_times_element_size() -> None:
    # Kills mutants of the torch branch of value_size: 2 * 3 float64 elements are 6 * 8 = 48 bytes.
    assert value_size(torch.zeros(2, 3, dtype=torch.float64)) == 48


def test_memoryview_and_bytearray_are_sized() -> None:
    # Kills mutants of the bytes/bytearray and memoryview branches of value_size.
    assert value_size(memoryview(b"abcd")) == 4
    assert value_size(bytearray(5)) == 5
    assert value_size("abcd") is None


def test_the_spec_commits_a_numpy_array_of_the_reserved_size() -> None:
    # Kills the same numpy-branch mutants through CacheSpec.commit: 12 reserved bytes take 3 float32s
    # (no eviction, so an empty list), and 4 float32s (16 bytes) are a ConflictError.
    spec = CacheSpec(capacity_bytes=100)
    assert spec.reserve("a", 12)
    assert spec.reserve("b", 12)
    with pytest.raises(ConflictError):
        spec.commit("b", np.zeros(4, dtype=np.float32))
    assert spec.commit("a", np.zeros(3, dtype=np.float32)) == []


# spec/cache/transitions.py builds TRANSITIONS at import time. Under mutmut the modules are imported once,
# before any mutant is active, so a test that reads TRANSITIONS can never see a mutated builder. These
# tests call the builders while the test runs (so mutmut maps each builder to them and the mutant is
# live), and check the rebuilt table against two things that do not come from the builders' output:
# the edges observed on CacheSpec by the hand-written scenarios of test_transitions.py, and the
# committed docs/lifecycle.md, which spells out every edge's guard words, rule, target and result.

LIFECYCLE_MD = Path(__file__).resolve().parent.parent / "docs" / "lifecycle.md"


def _rebuilt_table() -> tuple[transitions.Transition, ...]:
    return (
        *transitions._reserve(),
        *transitions._acquire(),
        *transitions._commit(),
        *transitions._put(),
        *transitions._get(),
        *transitions._release(),
        *transitions._evict(),
        *transitions._pop(),
        *transitions._clear(),
    )


def test_the_rebuilt_table_has_exactly_the_edges_observed_on_the_spec() -> None:
    # Kills the mutants of _reserve, _acquire, _commit, _put, _get, _release, _evict, _pop and _clear
    # that change a source, target, result, operation or bystander flag, or drop or duplicate an edge.
    table = _rebuilt_table()
    observed = {scenario.expected for scenario in SCENARIOS}
    assert {edge_of(transition) for transition in table} == observed
    assert len(table) == len(observed)


def test_the_rebuilt_table_renders_the_committed_lifecycle_doc(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kills the builders' mutants that alter a guard's words or rule (`Guard("XXrefcount >= 2XX")`,
    # `Guard(..., None)`) or reorder edges: docs/lifecycle.md lists every edge with its guard, in order.
    monkeypatch.setattr(lifecycle_docs, "transition_table", _rebuilt_table)
    assert lifecycle_docs.render() == LIFECYCLE_MD.read_text()


# Error messages. docs/decisions.md: "Error messages name the operation, the key, the sizes involved
# and the rule that was broken". Each call below raises; its message must start with the operation
# and contain the key's repr and the sizes given. These kill the mutants that pass a wrong operation
# name to spec/cache/arguments.py (`check_key("XXreserveXX", key)`, `check_nbytes(None, ...)`), those that
# name the wrong type (`type(None).__name__`), and those that drop a message (`WrongStateError(None)`,
# `ConflictError(None)`), in CacheSpec and in TensorLRUCache alike.

_KEY = "k"
_UNHASHABLE = ["u"]


def _spec_cache(capacity: int) -> CacheSpec:
    return CacheSpec(capacity_bytes=capacity)


def _tensor_cache(capacity: int) -> TensorLRUCache:
    return TensorLRUCache(capacity, device="cpu")


def _reserved(make: Callable[[int], Any]) -> Any:
    cache = make(8)
    cache.reserve(_KEY, 2)
    return cache


def _in_use(make: Callable[[int], Any]) -> Any:
    cache = _reserved(make)
    cache.commit(_KEY, b"ab")
    return cache


def _idle(make: Callable[[int], Any]) -> Any:
    cache = make(8)
    assert cache.put(_KEY, b"ab")
    return cache


def _empty(make: Callable[[int], Any]) -> Any:
    return make(8)


# (operation, build, call, words the message must hold besides the operation)
_FAILING_CALLS: list[tuple[str, Callable[[Callable[[int], Any]], Any], Callable[[Any], Any], tuple[str, ...]]] = [
    ("reserve", _empty, lambda c: c.reserve(_UNHASHABLE, 2), ("['u']", "list")),
    ("reserve", _empty, lambda c: c.reserve(_KEY, 0), ("'k'", "0", "int")),
    ("reserve", _empty, lambda c: c.reserve(_KEY, 9), ("'k'", "9", "8")),
    ("reserve", _empty, lambda c: c.reserve(_KEY, 2, retain=1), ("'k'", "1", "int")),
    ("reserve", _reserved, lambda c: c.reserve(_KEY, 2), ("'k'", "RESERVED")),
    ("acquire", _empty, lambda c: c.acquire(_UNHASHABLE, 2), ("['u']", "list")),
    ("acquire", _empty, lambda c: c.acquire(_KEY, -1), ("'k'", "-1", "int")),
    ("acquire", _empty, lambda c: c.acquire(_KEY, 9), ("'k'", "9", "8")),
    ("acquire", _empty, lambda c: c.acquire(_KEY, 2, retain="yes"), ("'k'", "'yes'", "str")),
    ("acquire", _empty, lambda c: c.acquire(_KEY, 2.0), ("'k'", "2.0", "float")),
    ("acquire", _reserved, lambda c: c.acquire(_KEY, 3), ("'k'", "3", "2")),
    ("commit", _empty, lambda c: c.commit(_UNHASHABLE, b"ab"), ("['u']", "list")),
    # The rule broken: CONTRACT.md's sizable types (kills the "XXbytearray, ... tensorXX" mutant).
    ("commit", _reserved, lambda c: c.commit(_KEY, "ab"), ("'k'", "str", "bytes, bytearray, memoryview")),
    ("commit", _reserved, lambda c: c.commit(_KEY, b""), ("'k'", "0")),
    ("commit", _empty, lambda c: c.commit(_KEY, b"ab"), ("'k'",)),
    ("commit", _in_use, lambda c: c.commit(_KEY, b"ab"), ("'k'", "READY")),
    ("commit", _reserved, lambda c: c.commit(_KEY, b"abc"), ("'k'", "3", "2")),
    ("put", _empty, lambda c: c.put(_UNHASHABLE, b"ab"), ("['u']", "list")),
    ("put", _empty, lambda c: c.put(_KEY, 7), ("'k'", "int")),
    ("put", _empty, lambda c: c.put(_KEY, bytes(9)), ("'k'", "9", "8")),
    ("put", _idle, lambda c: c.put(_KEY, b"ab"), ("'k'", "READY")),
    ("get", _empty, lambda c: c.get(_UNHASHABLE), ("['u']", "list")),
    ("get", _empty, lambda c: c.get(_KEY), ("'k'",)),
    ("get", _reserved, lambda c: c.get(_KEY), ("'k'", "RESERVED")),
    ("pop", _empty, lambda c: c.pop(_UNHASHABLE), ("['u']", "list")),
    ("pop", _empty, lambda c: c.pop(_KEY), ("'k'",)),
    ("pop", _reserved, lambda c: c.pop(_KEY), ("'k'", "RESERVED")),
    ("pop", _in_use, lambda c: c.pop(_KEY), ("'k'", "1")),
    ("release", _empty, lambda c: c.release(_UNHASHABLE), ("['u']", "list")),
    ("release", _empty, lambda c: c.release(_KEY), ("'k'",)),
    ("release", _idle, lambda c: c.release(_KEY), ("'k'", "0")),
    ("evict", _empty, lambda c: c.evict(-1), ("-1", "int")),
    ("evict", _empty, lambda c: c.evict("3"), ("'3'", "str")),
    ("evict", _empty, lambda c: c.evict(9), ("9", "8")),
    ("evict", _in_use, lambda c: c.evict(7), ("7", "2", "8")),
    ("clear", _reserved, lambda c: c.clear(), ()),
    ("in", _empty, lambda c: _UNHASHABLE in c, ("['u']", "list")),
]


@pytest.mark.parametrize("make", [_spec_cache, _tensor_cache], ids=["CacheSpec", "TensorLRUCache"])
@pytest.mark.parametrize(
    ("operation", "build", "call", "words"), _FAILING_CALLS, ids=[f"{i}-{c[0]}" for i, c in enumerate(_FAILING_CALLS)]
)
def test_error_messages_name_the_operation_the_key_and_the_sizes(
    make: Callable[[int], Any],
    operation: str,
    build: Callable[[Callable[[int], Any]], Any],
    call: Callable[[Any], Any],
    words: tuple[str, ...],
) -> None:
    cache = build(make)
    with pytest.raises(CacheError) as raised:
        call(cache)
    message = str(raised.value)
    assert message.startswith(operation), message
    for word in words:
        assert word in message, (word, message)


# TensorLRUCache.check_valid: "Raise InvariantViolation if the counters, the recency stamps, the idle
# heap or the stored tensors disagree with the entries, or if I1-I4 fail". These tests corrupt one of
# those on purpose (white-box, like test_tensor_lru_cache.py's self-check tests) and expect a violation
# whose message names what is wrong and the key; healthy states must pass.


def _violation(cache: TensorLRUCache) -> str:
    with pytest.raises(InvariantViolation) as raised:
        cache.check_valid()
    return str(raised.value)


def test_check_valid_passes_with_two_reservations_and_after_clear() -> None:
    # Kills check_valid's `reserved = entry.nbytes` (for `+=`): 2 + 3 reserved bytes are 5, not 3.
    cache = _tensor_cache(10)
    assert cache.reserve("a", 2) and cache.reserve("b", 3)
    cache.check_valid()
    # Kills clear's `self._idle_count = 1` (for 0): an empty cache has no idle entry.
    cache.release("a")
    cache.release("b")
    assert cache.put("c", b"xy")
    cache.clear()
    cache.check_valid()
    assert cache.put("d", b"xyz")
    cache.check_valid()


def test_check_valid_catches_two_entries_with_the_same_stamp() -> None:
    # Kills `entry.stamp < previous_stamp` (for `<=`) and the message `InvariantViolation(None)`:
    # recency stamps must strictly grow from oldest to newest.
    cache = _tensor_cache(10)
    assert cache.reserve("a", 2) and cache.reserve("b", 3)
    cache._entries["b"].stamp = cache._entries["a"].stamp
    message = _violation(cache)
    assert "stamp" in message and "'b'" in message


def test_check_valid_catches_a_reserved_entry_holding_a_value() -> None:
    # Kills the `InvariantViolation(None)` mutant of the RESERVED-holds-a-value check.
    cache = _tensor_cache(10)
    assert cache.reserve("a", 2)
    cache._entries["a"].value = torch.zeros(2, dtype=torch.uint8)
    message = _violation(cache)
    assert "RESERVED" in message and "'a'" in message


def test_check_valid_names_a_corrupt_byte_counter() -> None:
    # Kills the `InvariantViolation(None)` mutant of the byte-counter check.
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    cache._idle_bytes = 3
    assert "counters" in _violation(cache)


def test_check_valid_catches_a_duplicate_live_heap_item() -> None:
    # Kills `len(live_items) != len(idle_keys) and {...} != idle_keys` (for `or`): one idle key with
    # two live heap items has the right key set but one item too many. Also kills the message mutants
    # `InvariantViolation(None)`, "XXthe idle heap ...XX" and the upper-cased message: the message
    # opens with what it is about, the idle heap.
    cache = _tensor_cache(10)
    assert cache.acquire("a", 2).name == "NEW_RESERVATION"
    cache.commit("a", b"xy")
    assert cache.put("b", b"z")
    assert cache.release("a") is False  # idle, older than "b": filed in the heap
    cache._idle_heap.append(cache._idle_heap[0])
    assert _violation(cache).startswith("the idle heap")


def test_check_valid_names_a_wrong_idle_count() -> None:
    # Kills the `InvariantViolation(None)` mutant of the idle-count check.
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    cache._idle_count = 2
    assert "idle count" in _violation(cache)


def test_the_idle_heap_may_hold_exactly_its_limit() -> None:
    # Kills `len(self._idle_heap) >= self._heap_limit()` (for `>`): with one idle entry the heap may
    # hold 2 * 1 + _HEAP_SLACK items (the bound test_tensor_lru_cache.py checks), one item more is a
    # violation, and that message names the idle heap (kills its `InvariantViolation(None)`).
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    limit = 2 * 1 + lru_entries.HEAP_SLACK
    stale = [(0, f"gone-{number}") for number in range(limit - len(cache._idle_heap))]
    cache._idle_heap.extend(stale)
    assert len(cache._idle_heap) == limit
    cache.check_valid()
    cache._idle_heap.append((0, "one-too-many"))
    assert "idle heap" in _violation(cache)


def test_eviction_with_an_empty_heap_reports_the_broken_guard() -> None:
    # Kills _pop_oldest_idle's message mutants (`InvariantViolation(None)`, "XX...XX", upper case):
    # the idle entry is missing from the heap, so eviction finds nothing although its guard held.
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    cache._idle_heap.clear()
    cache._idle_order.clear()
    with pytest.raises(InvariantViolation) as raised:
        cache.evict(10)
    assert str(raised.value).startswith("eviction ran out of idle entries")


@pytest.mark.parametrize(
    "stored",
    [
        b"xy",  # not a tensor: kills `not isinstance(...) and value.device != ...` (AttributeError instead)
        torch.zeros(2, 2, dtype=torch.uint8).t()[0],  # 2 bytes, not contiguous: kills `... and not is_contiguous()`
    ],
    ids=["bytes", "non-contiguous"],
)
def test_check_valid_catches_a_stored_value_that_is_not_a_contiguous_tensor(stored: Any) -> None:
    # Also kills `_check_stored_value(None, entry)` and the message `InvariantViolation(None)`: the
    # message names the key.
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    cache._entries["a"].value = stored
    message = _violation(cache)
    assert "'a'" in message and "READY" in message


def test_check_valid_catches_a_stored_value_of_another_size() -> None:
    # Kills the size check's `InvariantViolation(None)`: the message names the key.
    cache = _tensor_cache(10)
    assert cache.put("a", b"xy")
    cache._entries["a"].value = torch.zeros(3, dtype=torch.uint8)
    assert "'a'" in _violation(cache)


@pytest.mark.parametrize(("nbytes", "tag"), [(0, 1), (4, True)], ids=["nbytes-0", "bool-tag"])
def test_make_value_rejects_a_bad_size_or_a_bool_tag_naming_itself(nbytes: Any, tag: Any) -> None:
    # make_value(nbytes: int >= 1, tag: int); like every int argument of the contract (spec/arguments.py
    # `is_int`), a bool is not an int. Kills `not isinstance(tag, int) and isinstance(tag, bool)` (for
    # `or`, which lets True through) and both `InvalidArgumentError(None)` message mutants.
    cache = _tensor_cache(10)
    with pytest.raises(InvalidArgumentError) as raised:
        cache.make_value(nbytes, tag)
    assert str(raised.value).startswith("make_value")


_MAKE_VALUE_DTYPES = {
    1: {torch.int8, torch.uint8},
    2: {torch.int16, torch.float16, torch.bfloat16},
    4: {torch.int32, torch.float32},
    8: {torch.int64, torch.float64},
}


@pytest.mark.parametrize("tag", [0, 5, 130, 1001])
@pytest.mark.parametrize("nbytes", [8, 12, 24])
def test_make_value_holds_the_documented_elements(nbytes: int, tag: int) -> None:
    # docs/tensor_lru_cache.md: exactly nbytes bytes, a dtype among uint8/int8, float16/bfloat16/int16,
    # float32/int32, float64/int64 whose element size divides nbytes, elements (31 * i + tag) mod 127.
    # Kills the fill mutants: `... % ELEMENT_FILL_MODULUS` -> `/`, `+ tag` -> `- tag`, `arange / 31`, `* 32`.
    value = _tensor_cache(64).make_value(nbytes, tag)
    size = value.element_size()
    assert value.dtype in _MAKE_VALUE_DTYPES[size] and nbytes % size == 0
    assert value.numel() * size == nbytes
    expected = [(31 * index + tag) % 127 for index in range(nbytes // size)]
    assert value.to(torch.int64).tolist() == expected


def test_make_value_builds_on_the_caches_device() -> None:
    # Kills `fill.to(device=None, ...)` and `fill.to(dtype=dtype)`, which leave the tensor on the CPU.
    # PyTorch's "meta" device needs no accelerator and is not the CPU.
    value = TensorLRUCache(16, device="meta").make_value(4, 0)
    assert value.device.type == "meta"


# spec/: errors, invariants and CacheSpec internals.


def test_an_unknown_key_error_without_a_message_prints_nothing() -> None:
    # Like any exception built without arguments, it prints as "" (KeyError's own str would quote
    # its argument; UnknownKeyError prints its message plainly). Kills `if (self.args) or True`
    # (IndexError) and the "XXXX" mutant of UnknownKeyError.__str__.
    assert str(UnknownKeyError()) == ""
    assert str(UnknownKeyError("get('k'): the key is absent")) == "get('k'): the key is absent"


def test_a_state_judged_alone_is_named_as_the_state() -> None:
    # CONTRACT.md I1: protected bytes <= capacity. One in-use entry of 5 bytes in a capacity of 4
    # breaks it. check_state judges a state with no operation, so the message must say it is the
    # state that breaks I1 (kills check_step's `step.operation and 'the state'`, "XXthe stateXX" and
    # "THE STATE" mutants).
    with pytest.raises(InvariantViolation) as raised:
        invariants.check_state(4, (EntryView("a", EntryState.READY, 1, 5, True),))
    assert "I1 broken by the state" in str(raised.value)


def test_from_entries_counts_every_kind_of_byte() -> None:
    # Kills _count_bytes's `reserved = entry.nbytes` and `pinned = entry.nbytes` (for `+=`): two
    # reservations of 1 and 2 bytes are 3 reserved bytes, two in-use entries of 1 and 3 bytes are 4
    # pinned, two idle entries of 2 and 2 bytes are 4 idle; capacity 20.
    entries = [
        (EntryView("r1", EntryState.RESERVED, 1, 1, True), None),
        (EntryView("r2", EntryState.RESERVED, 1, 2, True), None),
        (EntryView("p1", EntryState.READY, 1, 1, True), b"a"),
        (EntryView("p2", EntryState.READY, 2, 3, True), b"abc"),
        (EntryView("i1", EntryState.READY, 0, 2, True), b"ab"),
        (EntryView("i2", EntryState.READY, 0, 2, True), b"cd"),
    ]
    stats = CacheSpec.from_entries(20, entries).stats()
    assert (stats.reserved_bytes, stats.pinned_bytes, stats.idle_bytes) == (3, 4, 4)
    # CONTRACT.md stats(): free_bytes = capacity - ready, ready = pinned + idle.
    assert (stats.ready_bytes, stats.free_bytes) == (8, 20 - 8)


def test_check_invariants_names_a_corrupt_byte_counter() -> None:
    # Kills CacheSpec.check_invariants's `InvariantViolation(None)`.
    cache = CacheSpec(10)
    assert cache.put("a", b"xy")
    cache._bytes = cache._bytes._replace(idle=3)
    with pytest.raises(InvariantViolation) as raised:
        cache.check_invariants()
    assert "counters" in str(raised.value)


def test_the_spec_repr_shows_its_byte_counts() -> None:
    # CacheSpec.__repr__ had no test at all (mutmut: "no tests"). Capacity 10, a reservation of 2,
    # an idle entry of 3: two entries, reserved=2, pinned=0, idle=3.
    cache = CacheSpec(10)
    assert cache.reserve("a", 2)
    assert cache.put("b", b"xyz")
    shown = repr(cache)
    assert shown.startswith("CacheSpec(")
    for part in ("capacity_bytes=10", "entries=2", "reserved=2", "pinned=0", "idle=3"):
        assert part in shown, (part, shown)


# TensorLRUCache construction and devices, on a machine without CUDA. The device rules
# (docs/tensor_lru_cache.md, _resolve_device): None means CUDA if available, else CPU; a CUDA device
# without an index gets the current one; stream_aware only takes effect on CUDA.


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"stream_aware": 1}, ("stream_aware", "1", "int")), ({"device": 3}, ("device", "3"))],
    ids=["stream_aware", "device"],
)
def test_construction_rejects_bad_arguments_naming_them(kwargs: dict[str, Any], words: tuple[str, ...]) -> None:
    # Kills __init__'s `InvalidArgumentError(None)` and `type(None).__name__` message mutants for
    # stream_aware, and _resolve_device's `InvalidArgumentError(None)`.
    with pytest.raises(InvalidArgumentError) as raised:
        TensorLRUCache(8, **kwargs)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_values_are_stored_on_the_caches_device() -> None:
    # Kills _store's `torch.empty(..., device=None)` and `torch.empty(...)` without a device, which
    # store on the CPU. The "meta" device needs no accelerator and is not the CPU.
    cache = TensorLRUCache(16, device="meta")
    assert cache.put("a", b"ab")
    assert cache.reserve("b", 4)
    cache.commit("b", torch.zeros(4, dtype=torch.uint8))
    assert cache.get("a").device.type == "meta"
    assert cache.get("b").device.type == "meta"


def test_no_device_means_cuda_when_it_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    # With CUDA reported available and current device 1: None resolves to cuda:1, "cuda" to cuda:1,
    # "cuda:0" stays cuda:0, "cpu" stays cpu. Kills _resolve_device's `... and False`, "XXcudaXX" and
    # "CUDA" for the default, `resolved.type == "XXcudaXX"`/"CUDA", `index is not None`,
    # `resolved = None`, `torch.device(None, ...)`, `torch.device("cuda", None)`, `torch.device("cuda", )`
    # and the "XXcudaXX"/"CUDA" device names (none of them can be told apart on the CPU otherwise).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert tensor_lru_cache._resolve_device(None) == torch.device("cuda", 1)
    assert tensor_lru_cache._resolve_device("cuda") == torch.device("cuda", 1)
    assert tensor_lru_cache._resolve_device("cuda:0") == torch.device("cuda", 0)
    assert tensor_lru_cache._resolve_device("cpu") == torch.device("cpu")


def test_stream_awareness_is_off_by_default_and_on_only_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # Builds caches on cuda:0 without touching the device (no value is stored): CUDA is reported
    # available and the device's usability probe is skipped, so this runs without a GPU. Kills
    # __init__'s default `stream_aware=True`, `self._stream_aware = None` and the
    # `== "XXcudaXX"`/"CUDA" mutants.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tensor_lru_cache, "_check_usable", lambda device: device)
    assert TensorLRUCache(8, device="cuda:0")._stream_aware is False
    assert TensorLRUCache(8, device="cuda:0", stream_aware=True)._stream_aware is True
    assert TensorLRUCache(8, device="cpu", stream_aware=True)._stream_aware is False


@pytest.mark.parametrize("make", [_spec_cache, _tensor_cache], ids=["CacheSpec", "TensorLRUCache"])
def test_the_documented_too_large_message(make: Callable[[int], Any]) -> None:
    # docs/decisions.md gives this exact message: `reserve('img-3'): 9 bytes exceed capacity_bytes=8;
    # an item that can never fit is rejected`. Kills _check_fits_capacity's "XX...XX" and upper-case
    # mutants of the rule's words.
    with pytest.raises(TooLargeError) as raised:
        make(8).reserve("img-3", 9)
    assert str(raised.value) == "reserve('img-3'): 9 bytes exceed capacity_bytes=8; an item that can never fit is rejected"


@pytest.mark.parametrize("make", [_spec_cache, _tensor_cache], ids=["CacheSpec", "TensorLRUCache"])
@pytest.mark.parametrize(("capacity", "words"), [(0, ("capacity_bytes", "0", "int")), ("8", ("capacity_bytes", "'8'", "str"))])
def test_a_bad_capacity_is_named_with_its_type(make: Callable[[int], Any], capacity: Any, words: tuple[str, ...]) -> None:
    # Kills check_capacity's `InvalidArgumentError(None)` and `type(None).__name__` mutants.
    with pytest.raises(InvalidArgumentError) as raised:
        make(capacity)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


@pytest.mark.parametrize("make", [_spec_cache, _tensor_cache], ids=["CacheSpec", "TensorLRUCache"])
def test_the_smallest_capacity_and_value_are_one_byte(make: Callable[[int], Any]) -> None:
    # CONTRACT.md: capacity_bytes >= 1 and a value's size >= 1. Kills check_capacity's `< 2`/`<= 1`
    # and check_value's `size < 2`/`size <= 1`.
    cache = make(1)
    assert cache.put("a", b"x")
    assert cache.stats().idle_bytes == 1
