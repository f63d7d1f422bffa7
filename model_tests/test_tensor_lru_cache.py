"""TensorLRUCache beyond the contract: value copies, device placement, make_value, threads,
the idle index's cost bounds, agreement with CacheSpec over random call sequences, and its own
arithmetic (a bug in a rule of the spec is not shared: the checker sees the two disagree)."""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import cacheproof.impl.lru_entries as lru_entries
from model_tests.cache_checks import check_cache
from cacheproof.impl import TensorLRUCache
from cacheproof.spec.cache import rules
from cacheproof.spec import (
    Acquired,
    CacheError,
    CacheSpec,
    EntryState,
    InvalidArgumentError,
)
from cacheproof.spec.cache.invariants import InvariantViolation, check_state


def cpu_cache(capacity_bytes: int = 1 << 20, **kwargs: Any) -> TensorLRUCache:
    return TensorLRUCache(capacity_bytes, device="cpu", **kwargs)


# Stored copies -----------------------------------------------------------------------------


def test_commit_stores_a_copy_that_does_not_alias_the_callers_tensor() -> None:
    cache = cpu_cache()
    value = torch.arange(16, dtype=torch.float32, requires_grad=True)
    cache.acquire("a", 64)
    cache.commit("a", value)
    with torch.no_grad():
        value.add_(100)
    stored = cache.get("a")
    assert torch.equal(stored, torch.arange(16, dtype=torch.float32))
    assert stored.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()
    assert not stored.requires_grad


def test_put_of_a_view_keeps_only_the_views_bytes() -> None:
    cache = cpu_cache()
    big = torch.arange(1 << 16, dtype=torch.int32)
    window = big[100:116]
    assert cache.put("window", window)
    stored = cache.get("window")
    assert torch.equal(stored, torch.arange(100, 116, dtype=torch.int32))
    assert stored.untyped_storage().nbytes() == 64


def test_a_strided_view_is_stored_contiguous() -> None:
    cache = cpu_cache()
    big = torch.arange(1024 * 64, dtype=torch.int16).view(1024, 64)
    column_pair = big[:, 10:12]
    assert cache.put("columns", column_pair)
    stored = cache.get("columns")
    assert stored.is_contiguous()
    assert stored.shape == (1024, 2)
    assert stored.untyped_storage().nbytes() == 1024 * 2 * 2
    assert torch.equal(stored, column_pair)


def test_values_land_on_the_cache_device() -> None:
    cache = TensorLRUCache(1024, device=torch.device("cpu"))
    cache.put("a", torch.ones(4))
    assert cache.get("a").device == torch.device("cpu")
    assert cache.device == torch.device("cpu")


def test_the_default_device_is_cuda_when_available_else_cpu() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert TensorLRUCache(1024).device.type == expected


def test_a_device_of_another_type_is_invalid() -> None:
    with pytest.raises(InvalidArgumentError):
        TensorLRUCache(1024, device=3.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        TensorLRUCache(1024, stream_aware=1)  # type: ignore[arg-type]


def test_stream_awareness_is_a_no_op_on_cpu() -> None:
    cache = cpu_cache(stream_aware=True)
    cache.put("a", torch.arange(4))
    assert torch.equal(cache.get("a"), torch.arange(4))
    assert torch.equal(cache.pop("a"), torch.arange(4))


@pytest.mark.parametrize(
    "value, expected",
    [
        (b"abc", [97, 98, 99]),
        (bytearray(b"\x00\xff"), [0, 255]),
        (memoryview(b"xyz")[::2], [120, 122]),
        (np.array([1, 258], dtype=np.int16), [1, 0, 2, 1]),
    ],
)
def test_buffer_values_are_stored_as_uint8_tensors_of_their_bytes(value: Any, expected: list[int]) -> None:
    cache = cpu_cache()
    assert cache.put("a", value)
    stored = cache.get("a")
    assert stored.dtype == torch.uint8
    assert stored.tolist() == expected
    assert cache.stats().ready_bytes == len(expected)


def test_a_buffer_value_is_copied() -> None:
    cache = cpu_cache()
    value = bytearray(b"abcd")
    cache.put("a", value)
    value[0] = 0
    assert cache.get("a").tolist() == [97, 98, 99, 100]


# make_value -------------------------------------------------------------------------------


def test_make_value_has_exactly_nbytes_on_the_device() -> None:
    cache = cpu_cache()
    for nbytes in range(1, 40):
        for tag in range(8):
            value = cache.make_value(nbytes, tag)
            assert value.numel() * value.element_size() == nbytes
            assert value.device == torch.device("cpu")
            assert value.is_contiguous()


def test_make_value_varies_the_dtype_with_the_tag() -> None:
    cache = cpu_cache()
    assert {cache.make_value(8, tag).dtype for tag in range(12)} == {
        torch.int8, torch.uint8, torch.int16, torch.float16, torch.bfloat16,
        torch.int32, torch.float32, torch.int64, torch.float64,
    }
    assert {cache.make_value(3, tag).dtype for tag in range(8)} == {torch.int8, torch.uint8}
    assert {cache.make_value(6, tag).dtype.itemsize for tag in range(8)} == {1, 2}


def test_make_value_takes_the_recipes_element_size() -> None:
    cache = cpu_cache()
    for element_size, dtypes in ((1, {torch.uint8, torch.int8}), (2, {torch.float16, torch.bfloat16, torch.int16}),
                                 (4, {torch.float32, torch.int32}), (8, {torch.float64, torch.int64})):
        values = [cache.make_value(24, tag, element_size) for tag in range(16)]
        assert {value.dtype for value in values} == dtypes
        assert all(value.element_size() == element_size and value.nbytes == 24 for value in values)
    assert cache.make_value(24, 0, 8).tolist() == [(31 * i) % 127 for i in range(3)]
    for bad in (3, 8, 16, True, 8.0):
        with pytest.raises(InvalidArgumentError, match="element_size"):
            cache.make_value(12, 0, bad)  # 8 does not divide 12; 3 and 16 are no element size


def test_make_value_is_deterministic_and_tag_dependent() -> None:
    cache = cpu_cache()
    assert torch.equal(cache.make_value(64, 5), cache.make_value(64, 5))
    assert not torch.equal(cache.make_value(64, 1), cache.make_value(64, 9))  # same dtype, other fill


def test_make_value_rejects_bad_sizes() -> None:
    cache = cpu_cache()
    for nbytes in (0, -1, True, 1.0):
        with pytest.raises(InvalidArgumentError):
            cache.make_value(nbytes, 0)  # type: ignore[arg-type]


# Self-checks ------------------------------------------------------------------------------


def test_check_valid_passes_on_a_healthy_cache_and_catches_a_corrupt_counter() -> None:
    cache = cpu_cache(100)
    cache.put("a", cache.make_value(10, 0))
    cache.acquire("b", 20)
    cache.check_valid()
    cache._idle_bytes = 11
    with pytest.raises(InvariantViolation):
        cache.check_valid()


def test_check_valid_catches_an_idle_entry_missing_from_the_idle_index() -> None:
    in_order = cpu_cache(100)
    in_order.put("a", in_order.make_value(10, 0))  # filed in the ordered tier
    in_order._idle_order.clear()
    with pytest.raises(InvariantViolation):
        in_order.check_valid()
    out_of_order = cpu_cache(100)
    out_of_order.acquire("a", 10)
    out_of_order.commit("a", out_of_order.make_value(10, 0))
    out_of_order.put("b", out_of_order.make_value(10, 1))
    out_of_order.release("a")  # idle, older than "b": filed in the heap
    assert [key for _, key in out_of_order._idle_heap] == ["a"]
    out_of_order.check_valid()
    out_of_order._idle_heap.clear()
    with pytest.raises(InvariantViolation):
        out_of_order.check_valid()


def test_repr_shows_counts_not_tensors() -> None:
    cache = cpu_cache(100)
    cache.put("a", cache.make_value(10, 0))
    cache.reserve("b", 20)
    assert repr(cache) == (
        "TensorLRUCache(capacity_bytes=100, device=cpu, entries=2, reserved=20, pinned=0, idle=10)"
    )


# Cost bounds ------------------------------------------------------------------------------


def test_eviction_looks_only_at_idle_entries_past_many_pinned_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = cpu_cache(10_000)
    cache.acquire("older", 8)
    cache.commit("older", cache.make_value(8, 0))
    cache.put("idle", cache.make_value(8, 1))
    for key in range(1000):
        cache.acquire(key, 8)
        cache.commit(key, cache.make_value(8, key))
    cache.release("older")  # idle now, and older than "idle": filed in the heap
    assert len(cache._idle_order) + len(cache._idle_heap) == 2  # the idle index holds the idle entries only
    pops = []
    real_heappop = lru_entries.heapq.heappop

    def counting_heappop(heap: list) -> Any:
        pops.append(heap[0])
        return real_heappop(heap)

    monkeypatch.setattr(lru_entries.heapq, "heappop", counting_heappop)
    assert cache.evict(10_000 - 8000) == ["older", "idle"]
    assert [key for _, key in pops] == ["older"]
    assert len(cache._idle_heap) == 0 and len(cache._idle_order) == 0
    cache.check_valid()


def test_an_idle_entry_read_while_idle_is_evicted_by_its_new_recency() -> None:
    # get moves an idle entry to newest without touching the idle index; eviction files it again.
    cache = cpu_cache(4 * 8)
    for key in "abcd":
        cache.put(key, cache.make_value(8, 0))
    cache.get("a")
    cache.get("b")
    assert cache.evict(16) == ["c", "d"]
    assert cache.evict(24) == ["a"]
    cache.check_valid()


def test_stale_heap_items_stay_bounded_over_a_long_run() -> None:
    cache = cpu_cache(1 << 20)
    rng = random.Random(7)
    keys = list(range(50))
    for key in keys:
        cache.put(key, cache.make_value(16, key))
    for _ in range(20_000):
        key = rng.choice(keys)
        if rng.random() < 0.5:
            cache.get(key)
        else:
            cache.acquire(key, 16)
            cache.release(key)
        assert len(cache._idle_heap) <= 2 * len(keys) + lru_entries.HEAP_SLACK
    cache.check_valid()


def test_the_heap_stays_bounded_after_an_eviction_shrinks_the_idle_set() -> None:
    cache = cpu_cache(50 * 16)
    for key in range(50):
        cache.put(key, cache.make_value(16, key))
    for _ in range(8):
        for key in range(40, 50):
            cache.get(key)  # 80 stale items, all newer than keys 0..39
    assert cache.evict(40 * 16) == list(range(40))
    assert len(cache._idle_heap) <= 2 * 10 + lru_entries.HEAP_SLACK
    cache.check_valid()


# Agreement with the spec --------------------------------------------------------------------


def _random_call(rng: random.Random, capacity: int) -> tuple[str, tuple, dict]:
    key = rng.randrange(6)
    nbytes = 1 + key * 3  # one size per key, so acquires of a key mostly agree
    retain = key % 3 != 0
    operation = rng.choice(["reserve", "acquire", "acquire", "commit", "put", "get", "release", "release",
                            "evict", "pop", "clear"])
    if operation in ("reserve", "acquire"):
        return operation, (key, nbytes), {"retain": retain}
    if operation in ("commit", "put"):
        return operation, (key, nbytes + (rng.random() < 0.1)), {}
    if operation == "evict":
        return operation, (rng.randrange(capacity + 1),), {}
    if operation == "clear":
        return operation, (), {}
    return operation, (key,), {}


def _outcome(cache: Any, operation: str, args: tuple, kwargs: dict, make: Any) -> Any:
    if operation in ("commit", "put"):
        args = (args[0], make(args[1], args[0]))
    try:
        result = getattr(cache, operation)(*args, **kwargs)
    except CacheError as error:
        return type(error).__name__
    if isinstance(result, torch.Tensor):
        return ("value", result.numel() * result.element_size())
    if isinstance(result, (bytes, bytearray)):
        return ("value", len(result))
    return result


@pytest.mark.parametrize("seed", range(4))
def test_random_call_sequences_agree_with_the_spec(seed: int) -> None:
    rng = random.Random(seed)
    capacity = 24
    spec, cache = CacheSpec(capacity), cpu_cache(capacity)
    for step in range(1500):
        operation, args, kwargs = _random_call(rng, capacity)
        expected = _outcome(spec, operation, args, kwargs, lambda n, tag: bytes([tag]) * n)
        actual = _outcome(cache, operation, args, kwargs, cache.make_value)
        assert actual == expected, (step, operation, args)
        assert cache.snapshot() == spec.snapshot(), (step, operation, args)
        assert cache.stats() == spec.stats(), (step, operation, args)
    cache.check_valid()


# Threads ----------------------------------------------------------------------------------


def _worker(cache: TensorLRUCache, seed: int, steps: int) -> list[int]:
    """Random calls on shared keys; returns the keys this thread still holds a reference to."""
    rng = random.Random(seed)
    held: list[int] = []
    for _ in range(steps):
        key = rng.randrange(24)
        nbytes = 64 * (1 + key % 4)
        retain = key % 5 != 0
        choice = rng.random()
        try:
            if len(held) > 3:
                cache.release(held.pop(rng.randrange(len(held))))
            elif choice < 0.3:
                acquired = cache.acquire(key, nbytes, retain=retain)
                if acquired is not Acquired.BLOCKED:
                    held.append(key)
                if acquired is Acquired.NEW_RESERVATION and rng.random() < 0.8:
                    cache.commit(key, cache.make_value(nbytes, key))
            elif choice < 0.4 and held:
                mine = rng.choice(held)
                cache.commit(mine, cache.make_value(64 * (1 + mine % 4), mine))
            elif choice < 0.6 and held:
                cache.release(held.pop(rng.randrange(len(held))))
            elif choice < 0.8:
                cache.get(key)
            elif choice < 0.9:
                cache.put(key, cache.make_value(nbytes, key))
            elif choice < 0.95:
                cache.evict(rng.randrange(1024))
            else:
                cache.pop(key)
        except CacheError:
            pass
    return held


def test_eight_threads_keep_the_cache_consistent_and_every_reference_releasable() -> None:
    cache = cpu_cache(2048)
    with ThreadPoolExecutor(max_workers=8) as pool:
        holdings = list(pool.map(lambda seed: _worker(cache, seed, 1500), range(8)))
    cache.check_valid()
    check_state(cache.capacity_bytes, cache.snapshot())
    expected_refcounts: dict[int, int] = {}
    for held in holdings:
        for key in held:
            expected_refcounts[key] = expected_refcounts.get(key, 0) + 1
    assert {view.key: view.refcount for view in cache.snapshot() if view.refcount > 0} == expected_refcounts
    for held in holdings:
        for key in held:
            cache.release(key)
    stats = cache.stats()
    assert (stats.pinned_bytes, stats.reserved_bytes) == (0, 0)
    assert all(view.state is EntryState.READY and view.refcount == 0 for view in cache.snapshot())
    cache.check_valid()
    cache.clear()
    assert len(cache) == 0


# Its own arithmetic ---------------------------------------------------------------------------

RULE_BUGS = {
    # rule: (the buggy rule, what it gets wrong)
    "reservation_fits": (
        lambda b, nbytes: rules.protected(b) + nbytes < b.capacity,
        "a reservation that exactly fills the capacity is refused",
    ),
    "has_room": (
        lambda b, incoming: rules.ready(b) + incoming < b.capacity,
        "eviction frees one entry more than the incoming bytes need",
    ),
    "eviction_can_make_room": (
        lambda b, incoming: b.pinned + incoming < b.capacity,
        "put refuses a value that fits once every idle entry is evicted",
    ),
}


@pytest.mark.parametrize("rule", RULE_BUGS)
def test_a_bug_in_a_spec_rule_is_a_divergence_not_a_shared_bug(rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorLRUCache computes its guards and byte counts itself (pyproject's import-linter contract
    keeps it from importing the spec's rules, steps and transitions): with one rule of the spec
    broken, the checker finds the real cache disagreeing with the spec, where the spec checked
    against itself (the common mode of a shared rule) finds nothing."""
    assert check_cache(cpu_cache, examples=100, seed=0).ok  # the real rules: they agree
    buggy, _ = RULE_BUGS[rule]
    monkeypatch.setattr(rules, rule, buggy)
    assert check_cache(CacheSpec, examples=100, seed=0).ok  # a bug both sides share is invisible
    report = check_cache(cpu_cache, examples=100, seed=0)
    assert not report.ok
    assert report.counterexample is not None and report.counterexample.calls


# Beside a plain LRU --------------------------------------------------------------------------


def test_the_plain_lru_of_the_bench_is_a_byte_bounded_lru_of_copies() -> None:
    from cacheproof.bench.cache import PlainTensorLRU

    plain = PlainTensorLRU(3 * 8)
    value = torch.zeros(2, dtype=torch.float32)
    for key in "abc":
        assert plain.put(key, value)
    assert plain.get("a") is not value and torch.equal(plain.get("a"), value)
    assert plain.put("d", value)  # evicts "b", the oldest once "a" was read
    assert plain.get("b") is None and plain.get("a") is not None and plain.get("c") is not None


def test_the_cache_bench_prints_the_ratios_to_a_plain_lru_side_by_side_at_each_key_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    from cacheproof.cli import main

    path = tmp_path / "ops.json"
    assert main(["bench", "cache", "--ops-only", "--calls", "1000", "--keys", "500", "--keys", "3000",
                 "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    for operation in ("put", "get", "lifecycle"):
        for held in ("500 keys", "3000 keys"):
            row = next(line for line in printed.splitlines() if line.strip("│ ").startswith(f"{operation} ({held})"))
            assert " vs " in row and "x the plain LRU's" in row, row
    last = printed.strip().splitlines()[-1]
    assert last.startswith("ratios to the plain LRU: 500 keys: put ") and "; 3000 keys: put " in last
    figures = json.loads(path.read_text())["figures"]["operations"]
    assert list(figures) == ["500 keys", "3000 keys"]
    for by_operation in figures.values():
        assert list(by_operation) == ["put", "get", "lifecycle"]
        for row in by_operation.values():  # the ratio is of the times, the inverse of the rates' ratio
            rates = row["plain_lru_per_second"] / row["tensor_lru_cache_per_second"]
            assert row["ratio"] == pytest.approx(rates, rel=0.02, abs=0.01)
