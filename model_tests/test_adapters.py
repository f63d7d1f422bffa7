"""The example adapters diverge from the contract exactly as docs/adapters.md says, and no further.

Each divergence is a hand-written call sequence with the step where it first shows and what the
spec and the cache do there, worked out from CONTRACT.md and the design each adapter models.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
from cachetools import LRUCache

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.sequence import first_divergence
from cacheproof.spec.cache.semantics import CONTRACT
from cacheproof.spec.kinds import get_kind
from examples import cachetools_reserving_cache, vllm_style_encoder_cache
from examples.vllm_style_encoder_cache import EncoderCacheManager
from model_tests.cache_checks import check_cache, replayed


def value(nbytes: int, tag: int = 1) -> ValueRecipe:
    return ValueRecipe(nbytes, tag)


class WithoutSnapshot:
    """A cache seen without snapshot(): the checker then compares behaviour (results, len, in, stats) only."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        if name == "snapshot":
            raise AttributeError(name)
        return getattr(self._cache, name)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache


class Divergence(NamedTuple):
    """A sequence on a fresh cache of `capacity`, diverging at call `step` with `message` in the report
    (its one-line difference or one of the lines that say every difference)."""

    name: str
    capacity: int
    calls: list[Call]
    step: int
    message: str


RELEASE_ORDER = Divergence(
    "idle entries are ordered by release time, not by last use",
    2,
    [Call("acquire", (0, 1)), Call("commit", (0, value(1))), Call("put", (1, value(1))), Call("release", (0,)), Call("evict", (1,))],
    4,
    "cache.evict(1): the spec returned [0], the implementation returned [1]",
)

VLLM_STYLE_DIVERGENCES = [
    Divergence(
        "a release without a reference is a silent no-op",
        1, [Call("release", (0,))], 0, "the spec raised UnknownKeyError, the implementation returned False",
    ),
    Divergence(
        "a release of an idle entry is a silent no-op",
        1, [Call("put", (0, value(1))), Call("release", (0,))], 1, "the spec raised WrongStateError",
    ),
    Divergence(
        "reserving evicts idle entries at once (slots are claimed at allocation)",
        2, [Call("put", (0, value(2))), Call("reserve", (1, 2))], 1, "len(): spec 2; this implementation 1",
    ),
    Divergence(
        "reservations count against put",
        2, [Call("reserve", (0, 2)), Call("put", (1, value(1)))], 1, "the spec returned True, the implementation returned False",
    ),
    Divergence(
        "reservations count against evict",
        2, [Call("put", (0, value(1))), Call("reserve", (1, 1)), Call("evict", (1,))], 2, "the spec returned [], the implementation returned [0]",
    ),
    Divergence(
        "an abandoned reservation stays cached, with no value",
        1, [Call("reserve", (0, 1)), Call("release", (0,))], 1, "the spec returned True, the implementation returned False",
    ),
    Divergence(
        "retain=False is not honoured: every entry is retained",
        1,
        [Call("acquire", (0, 1), {"retain": False}), Call("commit", (0, value(1))), Call("release", (0,))],
        2,
        "the spec returned True, the implementation returned False",
    ),
    Divergence(
        "get does not refresh recency",
        2,
        [Call("put", (0, value(1))), Call("put", (1, value(1))), Call("get", (0,)), Call("evict", (1,))],
        3,
        "cache.evict(1): the spec returned [1], the implementation returned [0]",
    ),
    RELEASE_ORDER,
    Divergence(
        "a hit is not checked against the entry's retain flag (vLLM has none; another size is rejected)",
        2, [Call("put", (0, value(1))), Call("acquire", (0, 1), {"retain": False})], 1, "the spec raised ConflictError",
    ),
    Divergence(
        "the stored output is not checked against the reserved size",
        2, [Call("reserve", (0, 1)), Call("commit", (0, value(2)))], 1, "the spec raised ConflictError",
    ),
    Divergence(
        "clear resets even while entries are referenced",
        1, [Call("reserve", (0, 1)), Call("clear")], 1, "the spec raised WrongStateError",
    ),
]


def _diverges_as_documented(factory: Any, divergence: Divergence) -> None:
    found = first_divergence(lambda capacity: WithoutSnapshot(factory(capacity)), divergence.capacity, divergence.calls)
    assert found is not None, f"no divergence: {divergence.name}"
    assert found.step == divergence.step
    kind = get_kind("cache")
    (explained,) = explain_all(kind, [diverging_call(kind, divergence.capacity, CONTRACT, divergence.calls,
                                                     found.difference)])
    assert divergence.message in found.message or divergence.message in explained.lines()


# vLLM-style encoder cache ------------------------------------------------------------------------


def test_checker_finds_the_vllm_style_no_op_release() -> None:
    report = check_cache(vllm_style_encoder_cache.factory, examples=200, seed=0, max_divergences=8)
    assert not report.ok
    releases = [example for example in report.counterexamples if [call.op for call in example.calls] == ["release"]]
    assert releases, [example.message for example in report.counterexamples]
    difference = releases[0].difference
    assert (difference.expected.error, difference.actual.error, difference.actual.result) == ("UnknownKeyError", None, False)


@pytest.mark.parametrize("divergence", VLLM_STYLE_DIVERGENCES, ids=lambda d: d.name)
def test_vllm_style_divergence(divergence: Divergence) -> None:
    _diverges_as_documented(vllm_style_encoder_cache.factory, divergence)


def test_vllm_style_manager_counts_one_request_once() -> None:
    """#54284: the same item twice in one request is one reference; one free makes it evictable."""
    manager = EncoderCacheManager(4)
    manager.allocate("r1", "image", 2)
    assert manager.check_and_update_cache("r1", "image")
    manager.free_encoder_input("r1", "image", 2)
    assert manager.cached["image"] == set()
    assert list(manager.freeable) == ["image"]
    assert manager.can_allocate(4, 4, 0)  # evicts the image the request still uses
    assert manager.get_freed_keys() == ["image"]
    assert "image" not in manager.cached


def test_vllm_style_manager_slot_counters() -> None:
    manager = EncoderCacheManager(4)
    manager.allocate("r1", "a", 3)
    assert (manager.num_free_slots, manager.num_freeable_slots) == (1, 1)
    assert not manager.can_allocate(2, 4, 0)  # 2 > 1 freeable slot: nothing evicted
    manager.free_encoder_input("r1", "a", 3)
    assert (manager.num_free_slots, manager.num_freeable_slots) == (1, 4)
    assert manager.can_allocate(2, 4, 0)
    assert manager.get_freed_keys() == ["a"] and manager.get_freed_keys() == []
    assert (manager.num_free_slots, manager.num_freeable_slots) == (4, 4)


# cachetools-backed reserving cache ---------------------------------------------------------------


def test_checker_finds_the_cachetools_release_order() -> None:
    report = check_cache(cachetools_reserving_cache.factory, examples=200, seed=0)
    assert not report.ok
    example = report.counterexample
    # The documented divergence: the release that makes an entry idle leaves it where the spec does not.
    assert example.calls[-1].op == "release" and not example.difference.outcome_differs
    assert [view for view, _, _ in example.difference.views] == ["snapshot"]
    assert replayed(cachetools_reserving_cache.factory, example.size, example.calls[:-1]) is None
    found = replayed(cachetools_reserving_cache.factory, example.size, example.calls)
    assert found is not None and found[0] == len(example.calls) - 1


def test_cachetools_release_order_changes_what_is_evicted() -> None:
    _diverges_as_documented(cachetools_reserving_cache.factory, RELEASE_ORDER)


@pytest.mark.parametrize(
    "divergence", [d for d in VLLM_STYLE_DIVERGENCES if d is not RELEASE_ORDER], ids=lambda d: d.name
)
def test_cachetools_has_none_of_the_other_divergences(divergence: Divergence) -> None:
    found = first_divergence(cachetools_reserving_cache.factory, divergence.capacity, divergence.calls)
    assert found is None, found and found.message


def test_lru_cache_items_counts_as_use() -> None:
    """Why the cache keeps idle sizes apart: reading an LRUCache's items() reorders it."""
    lru = LRUCache(maxsize=2, getsizeof=len)
    lru[0], lru[1] = b"a", b"b"
    lru[0]
    list(lru.items())
    assert lru.popitem()[0] == 0


def test_cachetools_snapshot_does_not_reorder() -> None:
    cache = cachetools_reserving_cache.factory(2)
    cache.put(0, b"a")
    cache.put(1, b"b")
    cache.get(0)
    cache.snapshot()
    assert cache.evict(1) == [1]
