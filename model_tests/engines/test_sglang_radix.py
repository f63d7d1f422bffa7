"""The adapter over SGLang's REAL RadixCache and token allocator: hand-worked outcomes read back
from SGLang's objects, the unmodified class conforming under `sglang-radix`, each broken subclass
(model_tests/sglang_broken_radix.py) found, SGLang's unchecked `dec_lock_ref` seen by the
contract, the request level through SGLang's scheduler functions (two findings shown on SGLang's own
calls), the paged tree over SGLang's paged allocator (and the two ways its pages differ from the
spec's allocator), and the profile kept by a wrapper factory. Skipped without SGLang."""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "sglang.srt.mem_cache.radix_cache",
    reason="SGLang's RadixCache does not import: build the engines venv with `bash tools/engines_venv.sh VENV`",
)

from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey  # noqa: E402

from cacheproof.check.programs.command import built_profile  # noqa: E402
from cacheproof.cli import main  # noqa: E402
from cacheproof.check.programs.generators import generator_for  # noqa: E402
from cacheproof.check.programs.run import run_program_check  # noqa: E402
from cacheproof.engines.sglang import SglangRadixCache, radix_cache  # noqa: E402
from cacheproof.engines.sglang_radix import paged_radix_cache  # noqa: E402
from cacheproof.spec.errors import CapacityError, InvalidArgumentError  # noqa: E402
from cacheproof.spec.kinds import get_kind  # noqa: E402
from model_tests.engine_profiles import check_under_profile  # noqa: E402
from model_tests import sglang_broken_radix  # noqa: E402

KIND = get_kind("radix")
SGLANG = KIND.profiles["sglang-radix"]




def nodes(cache: SglangRadixCache) -> tuple:
    """(tokens, slot names, lock) per node, from the snapshot (access ranks aside)."""
    return tuple((prefix + key, slots, lock) for prefix, key, slots, _, lock, _, _ in cache.snapshot()[2])


def test_fresh_tree_reads_back_from_sglang() -> None:
    cache = radix_cache(5)
    assert isinstance(cache, SglangRadixCache) and type(cache.cache) is RadixCache
    assert cache.profile == "sglang-radix" and radix_cache.profile() == "sglang-radix"
    assert cache.snapshot() == (5, (0, 0), (), ())


def test_sglang_s_kv_cache_events_read_back_as_the_pages_they_name() -> None:
    """SGLang's own events (enable_kv_cache_events), their hashes read back as paths: the figures of
    the spec's hand-worked walk (model_tests/test_radix.py), and the paged tree's two-token pages."""
    cache = radix_cache(8)
    assert cache.events() == ((), (), False)  # the construction's clearing is no call of the contract's
    assert cache.insert((1, 2, 3)) == 0
    assert cache.events() == (((None, (1,), (1,)), ((1,), (1, 2), (2,)), ((1, 2), (1, 2, 3), (3,))), (), False)
    assert cache.insert((1, 2, 4)) == 2
    assert cache.events() == ((((1, 2), (1, 2, 4), (4,)),), (), False)
    assert cache.match_prefix((1, 2)) == 2 and cache.events() == ((), (), False)
    assert cache.evict(2) == 2
    assert cache.events() == ((), ((1, 2, 3), (1, 2, 4)), False)
    assert cache.reset() and cache.events() == ((), (), True)
    paged = paged_radix_cache(8)
    assert paged.insert((1, 2, 3, 4)) == 0
    assert paged.events() == (((None, (1, 2), (1, 2)), ((1, 2), (1, 2, 3, 4), (3, 4))), (), False)
    assert paged._pages.path(12345) == 12345  # a hash no page of any sequence has stays SGLang's int


def test_namespaces_reach_sglangs_keys_and_read_back_from_its_nodes() -> None:
    """A namespace is RadixKey's extra_key (radix_cache) or cache_salt (paged_radix_cache): the same
    tokens in two namespaces are two of SGLang's nodes, each read back with its namespace; a
    request keeps its Req's; the events name pages by their tokens (an extra key leaves SGLang's
    hashes as they are, a salt seeds them, and both read back as paths)."""
    cache = radix_cache(8)
    assert cache.insert((1, 2)) == 0 and cache.insert((1, 2), namespace="a") == 0
    assert cache.events() == (((None, (1,), (1,)), ((1,), (1, 2), (2,))), (), False)
    assert cache.match_prefix((1, 2), namespace="b") == 0 and cache.prefill(1, (1, 2, 3), namespace="a") == 2
    assert cache.requests[1].extra_key == "a"
    assert [(node[6], node[0] + node[1]) for node in cache.snapshot()[2]] == [(None, (1, 2)), ("a", (1, 2))]
    assert cache.snapshot()[3][0][4] == "a"
    paged = paged_radix_cache(8)
    assert paged.insert((1, 2, 3, 4), namespace="s") == 0 and paged.insert((1, 2), namespace="t") == 0
    assert [node.key.cache_salt for node in paged.cache.root_node.children.values()] == ["s", "t"]
    assert paged.events() == (((None, (1, 2), (1, 2)),), (), False)
    with pytest.raises(InvalidArgumentError):
        paged.insert((1, 2), namespace=1)


@pytest.mark.parametrize("factory, profile", [(radix_cache, "sglang-radix"), (paged_radix_cache, "sglang-radix-paged")])
def test_a_child_key_without_its_namespace_is_found(factory, profile, monkeypatch) -> None:
    """SGLang's RadixKey.child_key_at with the namespace dropped (the duel's #193 and #194): two
    namespaces share a child, and a match across them raises SGLang's ValueError."""
    plain = RadixKey.child_key_at

    def namespace_dropped(self, offset, page_size=1):
        return plain(RadixKey(self.token_ids, is_bigram=self.is_bigram, limit=self.limit), offset, page_size)

    assert check_under_profile("radix", profile, factory, examples=100).ok
    monkeypatch.setattr(RadixKey, "child_key_at", namespace_dropped)
    report = check_under_profile("radix", profile, factory, examples=100)
    assert not report.ok and report.counterexample.difference.actual.crash.startswith("ValueError: RadixKey"), report


def test_hand_worked_walk_on_the_real_tree() -> None:
    cache = radix_cache(6)
    assert cache.insert((1, 2, 3)) == 0
    assert cache.insert((1, 2, 4)) == 2  # the two duplicate slots go back to SGLang's allocator
    assert cache.allocator.available_size() == 2
    assert nodes(cache) == (((1, 2), (0, 1), 0), ((1, 2, 3), (2,), 0), ((1, 2, 4), (3,), 0))
    assert cache.match_prefix((1, 5)) == 1  # ends inside (1, 2): SGLang splits it
    assert nodes(cache)[0] == ((1,), (0,), 0)
    assert cache.lock((1, 2, 4)) == 3
    assert (cache.evictable_size(), cache.protected_size(), cache.total_size()) == (1, 3, 4)
    assert cache.evict(1) == 1  # the one unlocked leaf, (1, 2, 3)
    assert [tokens for tokens, _, _ in nodes(cache)] == [(1,), (1, 2), (1, 2, 4)]
    assert cache.reset() is False  # a lock is held
    assert cache.unlock((1, 2, 4)) == 3
    assert cache.evict(1) == 1 and cache.evictable_size() == 2
    assert cache.reset() is True and cache.snapshot() == (6, (0, 0), (), ())


def test_stored_tokens_come_from_the_kv_storage_at_sglangs_slots() -> None:
    cache = radix_cache(4)
    cache.insert((7, 8))
    ((_, key, _, stored, _, _, _),) = cache.snapshot()[2]
    assert key == stored == (7, 8)
    assert [int(cache.kv[int(slot)]) for slot in cache.cache.root_node.children[7].value] == [7, 8]


def test_an_insert_short_of_slots_is_a_capacity_error_that_takes_none() -> None:
    cache = radix_cache(2)
    with pytest.raises(CapacityError):
        cache.insert((1, 2, 3))
    assert cache.snapshot() == (2, (0, 0), (), ())
    with pytest.raises(InvalidArgumentError):
        cache.insert((1, "2"))


def test_real_dec_lock_ref_drives_lock_ref_below_zero() -> None:
    cache = radix_cache(4)
    cache.insert((1, 2))
    cache.unlock((1, 2))  # the contract's WrongStateError; SGLang decrements without a check
    assert cache.cache.root_node.children[1].lock_ref == -1
    assert cache.lock((1, 2)) == 2  # a request's lock now leaves the count at 0 ...
    assert nodes(cache) == (((1, 2), (0, 1), 0),)
    assert cache.evict(2) == 2 and cache.total_size() == 0  # ... and its prefix is evicted under it


def test_request_level_walk_through_sglangs_scheduler_functions() -> None:
    cache = radix_cache(8)
    assert cache.prefill(1, (1, 2, 3)) == 0  # nothing cached: three slots of the request's own
    assert cache.allocator.available_size() == 5 and cache.cache.total_size() == 0
    assert cache.checkpoint(1, up_to=2) == 0  # (1, 2) cached with the request's slots, its lock moved there
    req = cache.requests[1]
    node12 = cache.cache.root_node.children[1]
    assert (req.kv.cache_protected_len, req.last_node, node12.lock_ref) == (2, node12, 1)
    assert cache.prefill(2, (1, 2, 4)) == 2  # the match of (1, 2), locked by both; one new slot
    assert node12.lock_ref == 2 and cache.allocator.available_size() == 4
    row = cache.cache.req_to_token_pool.req_to_token[cache.requests[2].kv.req_pool_idx, :2]
    assert row.tolist() == node12.value.tolist()  # the scheduler's row holds the tree's slots of the prefix
    assert cache.release(1) == 2  # (1, 2) was cached: (3,) joins as a leaf, the lock dropped
    assert (node12.lock_ref, cache.evictable_size(), cache.protected_size()) == (1, 1, 2)
    assert cache.release(2) == 2
    assert (node12.lock_ref, cache.evictable_size(), cache.protected_size()) == (0, 4, 0)
    assert cache.allocator.available_size() == 4 and cache.requests == {}
    assert cache.evict(1) == 1  # (3,), touched before (4,)
    assert [tokens for tokens, _, _ in nodes(cache)] == [(1, 2), (1, 2, 4)]


def test_a_running_request_is_sglangs_own_req() -> None:
    """prefill builds SGLang's `Req` and lets its own methods set the admission's fields: the match
    cap of Req's rule (one token short of the prompt), the row from ReqToTokenPool.alloc."""
    from sglang.srt.managers.schedule_batch import Req, ReqKvInfo

    cache = radix_cache(8)
    cache.insert((1, 2, 3))
    assert cache.prefill(7, (1, 2, 3)) == 2  # all three cached, yet Req's cap leaves the last to compute
    req = cache.requests[7]
    assert type(req) is Req and type(req.kv) is ReqKvInfo and req.rid == "7"
    assert (tuple(req.origin_input_ids), req.extend_end, req.kv.cache_protected_len) == ((1, 2, 3), 3, 2)
    assert req.kv.req_pool_idx is not None and req.kv.kv_committed_len == req.kv.kv_allocated_len == 3
    assert cache.release(7) == 3 and req.finished() and not req.kv.holds_kv


def test_release_kv_cache_reads_the_published_server_args() -> None:
    from sglang.srt.runtime_context import get_serving, get_spec

    radix_cache(2)
    assert get_spec().speculative_algorithm is None and get_serving().strip_thinking_cache is False


def test_an_admission_short_of_slots_is_refused_before_sglangs_match() -> None:
    cache = radix_cache(3)
    cache.prefill(1, (1, 2, 3))
    with pytest.raises(CapacityError):
        cache.prefill(2, (5, 6))  # no slot free, none evictable
    cache.release(1)
    before = cache.snapshot()
    with pytest.raises(CapacityError):
        cache.prefill(2, (1, 2, 5, 6))  # 2 new tokens; 3 evictable, 2 of them the pinned match
    assert cache.snapshot() == before and [tokens for tokens, _, _ in nodes(cache)] == [(1, 2, 3)]
    assert cache.prefill(2, (1, 2, 5)) == 2  # 1 new token: the leaf (3,) split off and evicted for it
    assert [tokens for tokens, _, _ in nodes(cache)] == [(1, 2)] and cache.allocator.available_size() == 0


def test_sglangs_own_order_splits_before_the_budget_is_known() -> None:
    """The finding of docs/engines.md: SGLang's scheduler matches a waiting Req (init_next_round_input)
    before PrefillAdder checks its budget, so a request refused for want of slots has split a node."""
    cache = radix_cache(3)
    cache.prefill(1, (1, 2, 3))
    cache.release(1)
    req = cache._new_req(2, (1, 2, 5, 6), None)
    req.init_next_round_input(cache.cache)  # the scheduler's match of a waiting Req (match_kv_cache)
    assert req.prefix_len == 2 and [tokens for tokens, _, _ in nodes(cache)] == [(1, 2), (1, 2, 3)]
    new_tokens, pinned = 4 - req.prefix_len, req.prefix_len  # PrefillAdder pins the match (lock_ref 0 before)
    assert new_tokens > cache.allocator.available_size() + cache.evictable_size() - pinned  # ... and refuses it


def test_sglangs_checkpoint_below_the_protected_length_frees_tree_slots() -> None:
    """The finding of docs/engines.md: RadixCache.checkpoint with up_to below cache_protected_len moves
    the lock up and lowers cache_protected_len, so release_kv_cache frees slots the tree still owns."""
    cache = radix_cache(8)
    cache.prefill(1, (1, 2, 3, 4))
    cache.checkpoint(1, up_to=3)
    req = cache.requests[1]
    req.extend_end = 1
    cache._names["checkpoint_kv_cache"](req, cache.cache)  # SGLang's own call, below the protected 3
    assert req.kv.cache_protected_len == 1 and tuple(req.last_node.key.token_ids) == (1,)
    cache.release(1)
    assert cache.allocator.available_size() + cache.cache.total_size() == 10  # 8 slots: two owned twice


def test_paged_tree_walk_on_sglangs_paged_allocator() -> None:
    cache = paged_radix_cache(8)  # four pages of two
    assert cache.profile == "sglang-radix-paged" and cache.allocator.page_size == 2
    assert cache.insert((1, 2, 3, 4)) == 0 and cache.allocator.available_size() == 4
    assert cache.insert((1, 2, 5, 6)) == 2 and cache.allocator.available_size() == 2  # the duplicate page back
    assert cache.match_prefix((1, 2, 3)) == 2  # whole pages: (1, 2, 3) is matched as (1, 2)
    assert cache.match_prefix((1, 3)) == 0  # the first page differs
    assert cache.lock((1, 2, 3, 4)) == 4 and cache.evict(2) == 2  # (5, 6), the one unlocked leaf
    assert [(tokens, lock) for tokens, _, lock in nodes(cache)] == [((1, 2), 1), ((1, 2, 3, 4), 1)]
    with pytest.raises(InvalidArgumentError):
        cache.insert((7, 8, 9))  # a part page has no form in SGLang's paged allocator


def test_paged_tree_conforms_on_pools_of_any_size() -> None:
    """The radix generator draws pools of 1..48 slots, odd ones too: under `sglang-radix-paged` (pool
    "whole-pages") the spec holds the same whole pages SGLang's paged allocator does."""
    report = check_under_profile("radix", "sglang-radix-paged", paged_radix_cache, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()


def test_sglangs_paged_pool_holds_whole_pages_only() -> None:
    """The finding of docs/engines.md: a pool of 5 tokens in pages of 2 is 2 pages, 4 slots."""
    cache = paged_radix_cache(5)
    assert cache.allocator.num_pages == 2 and cache.snapshot()[0] == 4


def test_sglangs_paged_admission_takes_whole_pages() -> None:
    """The finding of docs/engines.md: 3 new tokens take 2 pages (4 slots), the spec's allocator 3."""
    cache = paged_radix_cache(8)
    assert cache.prefill(1, (1, 2, 3)) == 0 and cache.allocator.available_size() == 4
    assert cache.release(1) == 0 and cache.allocator.available_size() == 6  # (1, 2) cached, the part page freed
    assert [tokens for tokens, _, _ in nodes(cache)] == [(1, 2)]


def test_unmodified_tree_conforms_under_the_sglang_profile() -> None:
    report = check_under_profile("radix", "sglang-radix", radix_cache, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()


@pytest.mark.parametrize("name", sorted(sglang_broken_radix.FACTORIES))
def test_each_broken_subclass_is_found(name: str) -> None:
    factory = sglang_broken_radix.FACTORIES[name]
    assert type(factory(4).cache) in sglang_broken_radix.BROKEN_RADIX_CLASSES
    found = any(not check_under_profile("radix", "sglang-radix", factory, examples=150, seed=seed).ok for seed in (1, 2))
    assert found, f"{name} was not found in two seeded runs of 150 programs"


def test_the_contract_reports_the_unchecked_unlock() -> None:
    report = run_program_check(KIND, radix_cache, generator_for("radix"), examples=100, semantics=SGLANG.semantics
                               .with_overrides("misuse=checked"), operations=("insert", "unlock"), max_divergences=3)
    unlocks = [example for example in report.counterexamples if example.difference.call.op == "unlock"
               and example.difference.expected.error == "WrongStateError"]
    assert unlocks, [example.difference.describe() for example in report.counterexamples]
    assert unlocks[0].difference.actual.error is None and len(unlocks[0].calls) <= 3  # SGLang decrements


def test_a_wrapper_factory_keeps_the_profile(tmp_path) -> None:
    def wrapper(capacity_tokens: int) -> SglangRadixCache:
        return radix_cache(capacity_tokens, cache_class=sglang_broken_radix.MostRecentFirstRadix)

    assert not hasattr(wrapper, "profile") and built_profile(get_kind("radix"), wrapper) == "sglang-radix"
    out = tmp_path / "check.json"
    code = main(["check", "--spec", "radix", "--impl", "model_tests.sglang_broken_radix:most_recent_first",
                 "--examples", "40", "--seed", "1", "--quiet", "--json", str(out)])
    body = json.loads(out.read_text())
    assert (code, body["profile"]) == (1, "sglang-radix"), body
