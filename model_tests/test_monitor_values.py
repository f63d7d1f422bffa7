"""The monitor holds a cache to the value as it was at commit/put: a caller reusing its buffer is no
divergence, a cache that serves the reused buffer (or any other bytes) is one, and the spec beside
the cache keeps no caller's value alive."""

from __future__ import annotations

import weakref

import numpy
import pytest
import torch

from cacheproof.impl import TensorLRUCache
from cacheproof.spec import CacheSpec, ConflictError, InvalidArgumentError, TooLargeError
from cacheproof.trace.monitor import DivergenceError, monitor


def test_a_caller_reusing_its_buffer_is_no_divergence():
    m = monitor(TensorLRUCache(64, device="cpu"))
    b = torch.zeros(8, dtype=torch.uint8)
    m.put("a", b)
    b.fill_(9)
    assert torch.equal(m.get("a"), torch.zeros(8, dtype=torch.uint8))
    m.acquire("c", 8)
    m.commit("c", b)
    b.fill_(1)
    assert torch.equal(m.pop("a"), torch.zeros(8, dtype=torch.uint8))
    assert torch.equal(m.get("c"), torch.full((8,), 9, dtype=torch.uint8))
    m.check_state()


@pytest.mark.parametrize("make", [bytearray, lambda raw: numpy.frombuffer(bytearray(raw), dtype=numpy.uint8)])
def test_reused_bytearrays_and_arrays_are_no_divergence(make):
    m = monitor(TensorLRUCache(64, device="cpu"))
    buffer = make(b"abcd")
    m.put(1, buffer)
    buffer[0] = ord("z")
    assert bytes(m.get(1).numpy()) == b"abcd"


def test_a_cache_that_serves_the_reused_buffer_is_caught():
    # the spec as a cache keeps the object it was given: after the caller refills the buffer, its
    # get returns bytes that were never put
    m = monitor(CacheSpec(64))
    b = torch.zeros(8, dtype=torch.uint8)
    m.put("a", b)
    b.fill_(9)
    with pytest.raises(DivergenceError, match=r"cache.get\('a'\): spec returns the value as it was stored"):
        m.get("a")


class ServesOtherBytes(TensorLRUCache):
    """get returns a value of the right size and dtype whose bytes differ."""

    def get(self, key):
        return super().get(key) + 1


def test_a_value_with_other_bytes_is_caught():
    m = monitor(ServesOtherBytes(64, device="cpu"))
    m.put("a", torch.zeros(4, dtype=torch.int16))
    with pytest.raises(DivergenceError, match="digest"):
        m.get("a")


def test_the_spec_beside_the_cache_keeps_no_callers_value_alive():
    m = monitor(TensorLRUCache(1 << 20, device="cpu"))
    value = torch.ones(1024, dtype=torch.float32)
    alive = weakref.ref(value)
    m.put("a", value)
    del value
    assert alive() is None  # the cache holds its copy, the spec a stand-in and a digest
    assert torch.equal(m.get("a"), torch.ones(1024, dtype=torch.float32))


def test_values_the_contract_refuses_are_refused_alike():
    m = monitor(TensorLRUCache(8, device="cpu"))
    with pytest.raises(InvalidArgumentError):
        m.put("a", "text")
    with pytest.raises(InvalidArgumentError):
        m.put("a", b"")
    with pytest.raises(TooLargeError):
        m.put("a", bytes(9))
    m.acquire("b", 4)
    with pytest.raises(ConflictError):
        m.commit("b", bytes(3))
    assert m.commit("b", bytes(4)) == []
    m.check_state()


def test_digests_of_keys_that_left_are_dropped():
    m = monitor(TensorLRUCache(64, device="cpu"))
    for key in range(2000):
        m.put(key, bytes([key % 256]) * 4)
        if key % 2:
            m.pop(key)
    held = m._held  # noqa: SLF001  (the bound is the point of the test)
    # keys leave by pop and by eviction (64 bytes hold 16 entries): one digest per value the spec holds
    assert 0 < len(m) <= 16 and len(held) == len(m)
    assert bytes(m.get(1998).numpy()) == bytes([1998 % 256]) * 4


def test_a_meta_tensor_is_held_as_one_without_alarm():
    # docs/contract.md, Sizing values: a meta tensor has a size and no data, and every cache holds
    # it as such; the monitor compares what get returns by dtype and shape.
    cache = monitor(TensorLRUCache(64, device="cpu"))
    cache.put("m", torch.empty(2, 4, dtype=torch.int16, device="meta"))
    got = cache.get("m")
    assert got.device.type == "meta" and tuple(got.shape) == (2, 4)


def test_a_meta_tensor_of_another_shape_is_caught():
    from cacheproof.trace.held_values import digest

    assert digest(torch.empty(2, 4, dtype=torch.int16, device="meta")) != digest(
        torch.empty(8, dtype=torch.int16, device="meta")
    )
    assert digest(torch.empty(8, dtype=torch.int16, device="meta")) != digest(
        torch.empty(8, dtype=torch.float16, device="meta")
    )


def test_a_value_passed_by_name_is_checked_and_recorded_by_its_size():
    m = monitor(TensorLRUCache(64, device="cpu"))
    m.put("a", value=torch.zeros(4, dtype=torch.int16))
    m.acquire(key="b", nbytes=2)
    m.commit("b", value=bytes(2))
    assert [(t.call.op, t.call.args) for t in m.trace.calls] == [("put", ("a", (8, 0, 2))), ("acquire", ("b", 2)),
                                                                 ("commit", ("b", (2, 0, 1)))]
    assert torch.equal(m.get("a"), torch.zeros(4, dtype=torch.int16))
