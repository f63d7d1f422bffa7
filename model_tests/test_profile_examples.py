"""Under their profiles, the example caches conform and the broken variants of each profile's
semantics are found (exit 1); a plain cache is checked with --ops and nothing else."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable

from cacheproof.cli import main
from cacheproof.spec.cache.values import value_size

EXAMPLES = ["--examples", "60", "--quiet"]


class PutGetClearCache:
    """The plainest cache an engine ships: put/get/clear, len() and `in`; no pop, no stats, no snapshot."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def put(self, key: Hashable, value: Any) -> bool:
        size = value_size(value)
        if size > self.capacity_bytes:
            return False
        self._items.pop(key, None)
        while sum(map(value_size, self._items.values())) + size > self.capacity_bytes:
            self._items.popitem(last=False)
        self._items[key] = value
        return True

    def get(self, key: Hashable) -> Any:
        if key in self._items:
            self._items.move_to_end(key)
        return self._items.get(key)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


PLAIN = "model_tests.test_profile_examples:PutGetClearCache"


def test_a_plain_cache_is_checked_with_ops_and_no_monkeypatch(capsys):
    assert main(["check", "--max-divergences", "1", "--impl", PLAIN, "--profile", "plain-lru", "--ops", "put,get,clear", *EXAMPLES]) == 0
    assert main(["check", "--max-divergences", "1", "--impl", PLAIN, "--profile", "plain-lru", "--ops", "put,get,pop,clear", *EXAMPLES]) == 2
    assert "PutGetClearCache, which lacks pop: the checked operations are --ops put,get,pop,clear" in (
        capsys.readouterr().err
    )
    plain_lru = ["--impl", "examples.plain_lru_cache:PlainLRUCache", "--profile", "plain-lru"]
    assert main(["check", *plain_lru, "--ops", "put,get,pop,clear", *EXAMPLES]) == 0
    # the same cache under the contract's semantics: a plain LRU replaces on put, which the contract forbids
    assert main(["check", "--max-divergences", "1", "--impl", PLAIN, "--ops", "put,get,clear", *EXAMPLES]) == 1


def test_the_vllm_broken_variant_is_found():
    """(The example itself conforms: model_tests/test_profiles.py.)"""
    profile = ["--profile", "vllm-encoder-cache"]
    assert main(["check", "--max-divergences", "1", "--impl", "model_tests.broken_profile_caches:same_request_twice", *profile, *EXAMPLES]) == 1
    from cacheproof.spec.cache.profiles import profile_named
    from model_tests.broken_profile_caches import same_request_twice
    from model_tests.cache_checks import check_cache

    chosen = profile_named("vllm-encoder-cache")
    example = check_cache(same_request_twice, examples=60, seed=0, semantics=chosen.semantics,
                          operations=chosen.operations).counterexample
    key = example.calls[-1].args[0]  # the second holder of this key is lost
    assert sum(call.op == "acquire" and call.args[0] == key for call in example.calls) >= 2, example.calls
