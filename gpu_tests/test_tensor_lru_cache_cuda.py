"""TensorLRUCache on CUDA: device placement, stream-aware hand-off between streams, and the
contract suite of model_tests/test_cache_contract.py bound to a CUDA cache."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from cacheproof.impl import TensorLRUCache

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

_SLEEP_CYCLES = 200_000_000  # about a tenth of a second of GPU time: long enough to lose a race


def _load_contract_suite() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "model_tests" / "test_cache_contract.py"
    spec = importlib.util.spec_from_file_location("cache_contract_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestTensorLRUCacheContractOnCuda(_load_contract_suite().CacheContract):
    @staticmethod
    def make_cache(capacity_bytes: int) -> TensorLRUCache:
        return TensorLRUCache(capacity_bytes, device="cuda", stream_aware=True)


def test_the_default_device_is_the_current_cuda_device() -> None:
    assert TensorLRUCache(1024).device == torch.device("cuda", torch.cuda.current_device())


def test_a_cpu_tensor_committed_lands_on_cuda() -> None:
    cache = TensorLRUCache(1 << 20, device="cuda")
    value = torch.arange(16, dtype=torch.float32)
    cache.acquire("a", 64)
    cache.commit("a", value)
    stored = cache.get("a")
    assert stored.is_cuda
    assert torch.equal(stored.cpu(), value)
    assert cache.make_value(8, 3).is_cuda
    cache.check_valid()


def test_a_cuda_view_is_stored_without_its_base_storage() -> None:
    cache = TensorLRUCache(1 << 20, device="cuda")
    big = torch.arange(1 << 20, dtype=torch.int32, device="cuda")
    assert cache.put("window", big[1000:1016])
    stored = cache.get("window")
    assert stored.untyped_storage().nbytes() == 64
    assert stored.untyped_storage().data_ptr() != big.untyped_storage().data_ptr()
    assert torch.equal(stored, big[1000:1016])


@pytest.mark.parametrize("read", ["get", "pop"])
def test_a_consumer_stream_reads_the_value_after_eviction_and_reuse(read: str) -> None:
    numel = 1 << 22
    capacity = numel * 4
    cache = TensorLRUCache(capacity, device="cuda", stream_aware=True)
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(_SLEEP_CYCLES)  # the copy below finishes late on the producer stream
        source = torch.full((numel,), 3.0, device="cuda")
        if read == "get":
            cache.acquire("a", capacity)
            cache.commit("a", source)
        else:
            cache.put("a", source)
    with torch.cuda.stream(consumer):
        value = getattr(cache, read)("a")
        torch.cuda._sleep(_SLEEP_CYCLES)  # the read below is still pending when the memory is freed
        doubled = value * 2
    del value
    if read == "get":
        cache.release("a")
        assert cache.evict(capacity) == ["a"]
    assert len(cache) == 0
    with torch.cuda.stream(producer):
        overwrites = [torch.full((numel,), -1.0, device="cuda") for _ in range(4)]
    torch.cuda.synchronize()
    assert torch.all(doubled == 6.0).item()
    assert all(torch.all(block == -1.0).item() for block in overwrites)
