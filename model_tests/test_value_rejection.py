"""Values the cache must never mis-store (issue 17), beyond the contract suite's own tests
(model_tests/test_cache_contract.py holds the ones every conforming cache must pass).

Here: the spec and TensorLRUCache agree on every value of an awkward kind, the meta device (the
storage-free checking mode), device names, a value that changes between its sizing and its copy,
and the overflow of a run layout. Expected outcomes come from docs/contract.md (Sizing values)
and docs/tensor_lru_cache.md, worked out by hand.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from cacheproof.impl import TensorLRUCache
from cacheproof.impl.block_table import MmRunLayout
from cacheproof.spec import CacheSpec, EntryState, EntryView, InvalidArgumentError
from cacheproof.spec.cache.values import value_size
from model_tests.test_cache_contract import UNSTORABLE, LyingLength, observe


def _outcome(cache: Any, value: Any) -> tuple[str, Any]:
    """What put does with the value: ("stored", nbytes) or ("raised", the error's class name)."""
    try:
        stored = cache.put("v", value)
    except Exception as error:  # the point is which error, contract or not
        return "raised", type(error).__name__
    return "stored", stored and cache.snapshot()[0].nbytes


def _quiet(make: Callable[[], Any]) -> Callable[[], Any]:
    def made() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return make()

    return made


AWKWARD = {
    **UNSTORABLE,
    "datetime64 array": lambda: np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[s]"),
    "timedelta64 array": lambda: np.array([1, 2, 3], dtype="timedelta64[ms]"),
    "structured array": lambda: np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]),
    "meta tensor": lambda: torch.empty(5, dtype=torch.int16, device="meta"),
    "non-contiguous tensor": lambda: torch.arange(12, dtype=torch.int32).reshape(3, 4).t(),
    "conjugated complex tensor": lambda: torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).conj(),
    "tensor requiring grad": lambda: torch.ones(3, requires_grad=True),
    "bool tensor": lambda: torch.tensor([True, False, True]),
    "0-d tensor": lambda: torch.tensor(3.5, dtype=torch.float64),
    "bytes subclass with a lying len": lambda: LyingLength(b"abcdefgh"),
    "non-contiguous memoryview": lambda: memoryview(bytes(range(10)))[::3],
    "memoryview of int32": lambda: memoryview(np.arange(4, dtype=np.int32)),
}

# Outcomes worked out from the sizing rule: sizes in bytes, or InvalidArgumentError.
EXPECTED = {name: ("raised", "InvalidArgumentError") for name in UNSTORABLE} | {
    "datetime64 array": ("stored", 16),
    "timedelta64 array": ("stored", 24),
    "structured array": ("stored", 36),
    "meta tensor": ("stored", 10),
    "non-contiguous tensor": ("stored", 48),
    "conjugated complex tensor": ("stored", 16),
    "tensor requiring grad": ("stored", 12),
    "bool tensor": ("stored", 3),
    "0-d tensor": ("stored", 8),
    "bytes subclass with a lying len": ("stored", 8),
    "non-contiguous memoryview": ("stored", 4),
    "memoryview of int32": ("stored", 16),
}


@pytest.mark.parametrize("name", AWKWARD)
def test_the_spec_and_the_cache_agree_on_every_value(name: str) -> None:
    make = _quiet(AWKWARD[name])
    assert _outcome(CacheSpec(100), make()) == EXPECTED[name]
    assert _outcome(TensorLRUCache(100, device="cpu"), make()) == EXPECTED[name]


@pytest.mark.parametrize("name", [name for name, outcome in EXPECTED.items() if outcome[0] == "stored"])
def test_the_cache_keeps_exactly_the_bytes_it_was_given(name: str) -> None:
    # What get returns holds the value's bytes in C order (a tensor: itself, resolved and detached;
    # anything else: a 1-D uint8 tensor of its bytes); a meta value comes back as a meta tensor.
    value = _quiet(AWKWARD[name])()
    cache = TensorLRUCache(100, device="cpu")
    assert cache.put("v", value)
    cache.check_valid()
    stored = cache.get("v")
    if isinstance(value, torch.Tensor):
        assert stored.dtype == value.dtype and tuple(stored.shape) == tuple(value.shape)
        if value.device.type == "meta":
            assert stored.device.type == "meta"
        else:
            assert torch.equal(stored, value.detach().resolve_conj())
            assert stored.data_ptr() != value.data_ptr() and not stored.requires_grad
    else:
        expected = value.tobytes() if isinstance(value, (np.ndarray, memoryview)) else bytes(memoryview(value))
        assert stored.dtype == torch.uint8 and bytes(stored.numpy()) == expected


def test_the_meta_device_holds_sizes_for_any_capacity_without_data() -> None:
    # docs/tensor_lru_cache.md, Device: on "meta" every value is held as a meta tensor of its dtype
    # and shape (a buffer as 1-D uint8 of its size) and nothing is allocated, so a 2**40-byte cache
    # takes a 2**33-byte storage-free numpy value and a 2**34-byte meta tensor.
    cache = TensorLRUCache(2**40, device="meta")
    huge_array = np.broadcast_to(np.zeros(1, dtype=np.uint8), (2**33,))
    huge_tensor = torch.empty(2**32, dtype=torch.float32, device="meta")
    assert cache.put("array", huge_array)
    assert cache.reserve("tensor", 2**34)
    cache.commit("tensor", huge_tensor)
    assert cache.put("small", torch.arange(6, dtype=torch.int16).reshape(2, 3))
    cache.check_valid()
    assert [view.nbytes for view in cache.snapshot()] == [2**33, 2**34, 12]
    array, tensor, small = cache.get("array"), cache.get("tensor"), cache.get("small")
    for got in (array, tensor, small):
        assert got.device.type == "meta"
    assert (array.dtype, tuple(array.shape)) == (torch.uint8, (2**33,))
    assert (tensor.dtype, tuple(tensor.shape)) == (torch.float32, (2**32,))
    assert (small.dtype, tuple(small.shape)) == (torch.int16, (2, 3))


def test_the_meta_device_still_refuses_what_no_cache_may_store() -> None:
    cache = TensorLRUCache(2**40, device="meta")
    for make in UNSTORABLE.values():
        before = observe(cache)
        with pytest.raises(InvalidArgumentError):
            cache.put("v", _quiet(make)())
        assert observe(cache) == before


def _missing_cuda_device() -> str:
    """A CUDA device this machine lacks: "cuda" without CUDA, else the index past the last GPU."""
    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


@pytest.mark.parametrize("device", [_missing_cuda_device(), "nonsense", "cuda:x", "mps"])
def test_a_device_that_cannot_hold_tensors_is_invalid_and_named(device: str) -> None:
    if device == "mps" and torch.backends.mps.is_available():
        device = "xla"  # a backend this torch build lacks either way
    with pytest.raises(InvalidArgumentError) as raised:
        TensorLRUCache(8, device=device)
    assert f"device {device!r}" in str(raised.value)


def test_a_torch_device_object_is_named_as_its_string() -> None:
    device = torch.device(_missing_cuda_device())
    with pytest.raises(InvalidArgumentError) as raised:
        TensorLRUCache(8, device=device)
    assert f"device {str(device)!r}" in str(raised.value)


class _ResizedWhileCopied(TensorLRUCache):
    """A caller that grows its bytearray while the cache copies it (the lock is released then)."""

    def _store(self, operation: str, key: Any, value: Any, size: int) -> Any:
        value.extend(b"!")
        return super()._store(operation, key, value, size)


def test_a_value_that_changes_size_while_copied_is_refused_unchanged() -> None:
    cache = _ResizedWhileCopied(100, device="cpu")
    assert cache.reserve("r", 8)
    before = observe(cache)
    with pytest.raises(InvalidArgumentError, match="8 bytes when it was sized and 9"):
        cache.put("p", bytearray(8))
    with pytest.raises(InvalidArgumentError, match="8 bytes when it was sized and 9"):
        cache.commit("r", bytearray(8))
    assert observe(cache) == before
    cache.check_valid()


def test_a_tensor_subclass_is_sized_by_torch_not_by_its_own_numel() -> None:
    class ClaimsOneElement(torch.Tensor):
        def numel(self) -> int:
            return 1

    value = torch.Tensor._make_subclass(ClaimsOneElement, torch.zeros(4))
    assert value.numel() == 1 and value_size(value) == 16
    for cache in (CacheSpec(100), TensorLRUCache(100, device="cpu")):
        assert cache.put("v", value)
        assert cache.snapshot() == (EntryView("v", EntryState.READY, 0, 16, True),)


def test_a_run_layout_whose_metadata_overflows_is_refused_at_construction() -> None:
    # Two runs of 2**62 tokens: 2**63 tokens, past int64 (issue 17's case).
    with pytest.raises(OverflowError, match="tokens"):
        MmRunLayout([0, 2], [0, 0], [2**62, 2**62])
    # One run of 3 * 2**59 tokens: 9 * 2**59 int64 entries take 9 * 2**62 bytes, past int64.
    with pytest.raises(OverflowError, match="bytes"):
        MmRunLayout([0, 1], [0], [3 * 2**59])
    # The largest single-run layout whose metadata bytes fit int64 is accepted (its metadata is
    # never built here): (3 * n + 2) * 8 <= 2**63 - 1.
    largest = ((2**63 - 1) // 8 - 2) // 3
    assert MmRunLayout([0, 1], [0], [largest]).num_runs == 1
    with pytest.raises(OverflowError):
        MmRunLayout([0, 1], [0], [largest + 1])
