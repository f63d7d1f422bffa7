"""The block pool spec: hand-worked outcomes, misuse changing nothing, semantics, the invariant
table, and the differential walk against `ListBlockPool` and every broken pool."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS, BlockStep, broken_invariants
from cacheproof.spec.blocks.manager import block_hash, chain_hashes, group_seed
from cacheproof.spec.blocks.operations import POOL_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_PROFILES, BlockSemantics
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.kinds import get_kind, new_spec
from model_tests.block_pools import BROKEN_POOLS, EVENT_BROKEN_POOLS, EventfulListPool, ListBlockPool
from model_tests.block_walk import differential_walk

NONE5 = ((0, None),) * 5


def test_pool_level_hand_worked() -> None:
    pool = BlockPoolSpec(5)
    assert pool.allocate(7, 2) == (1, 2) and pool.num_free() == 2
    pool.cache_blocks(7, (2,), (50,))
    pool.cache_blocks(7, (1,), (50,))  # a duplicate: 2 was first
    assert pool.lookup((50,)) == (2,) and pool.hash_map() == ((50, (2, 1)),)
    pool.free(7, (1, 2))  # both hashed: the tail, in the order given
    assert pool.snapshot() == ((3, 4, 1, 2), ((0, None), (0, 50), (0, 50), (0, None), (0, None)), ())
    assert pool.allocate(8, 3) == (3, 4, 1)  # 1 loses its hash (lazy eviction)
    assert pool.lookup((50,)) == (2,) and pool.hash_map() == ((50, (2,)),)
    pool.touch(9, (2,))  # a hit on a free cached block: it leaves the queue
    assert pool.num_free() == 0 and pool.snapshot()[0] == ()
    with pytest.raises(CapacityError):
        pool.allocate(9, 1)
    assert pool.evict((2, 2)) == (2,)  # in use, yet its hash goes
    assert pool.lookup((50,)) == () and pool.snapshot()[1][2] == (1, None)
    pool.free(9, (2,))  # unhashed now: the head
    assert pool.snapshot()[0] == (2,)
    assert pool.reset() is False  # 3, 4, 1 are in use
    pool.free(8, (3, 4, 1))  # unhashed: the head together, in the order given
    assert pool.snapshot()[0] == (3, 4, 1, 2)
    assert pool.reset() is True
    assert pool.snapshot() == ((3, 4, 1, 2), NONE5, ())
    pool.check_invariants()


def test_shared_block_and_holdings_sorted_with_multiplicity() -> None:
    pool = BlockPoolSpec(4)
    pool.allocate(1, 2)
    pool.cache_blocks(1, (2,), (5,))
    pool.touch(2, (2, 2))
    pool.allocate(2, 1)
    assert pool.snapshot() == ((), ((0, None), (1, None), (3, 5), (1, None)), ((1, (1, 2)), (2, (2, 2, 3))))
    pool.free(2, (3, 2))  # 3 reaches 0 (head); 2 goes 3 -> 2
    pool.free(1, (2, 1))  # 2 -> 1; 1 reaches 0 (head)
    assert pool.snapshot() == ((1, 3), ((0, None), (0, None), (1, 5), (0, None)), ((2, (2,)),))


def test_request_level_hand_worked() -> None:
    pool = BlockPoolSpec(6)
    h1 = block_hash(None, (1, 2))
    h2 = block_hash(h1, (3, 4))
    h3 = block_hash(h2, (5, 6))
    assert chain_hashes((1, 2, 3, 4, 5, 6, 7)) == (h1, h2, h3)
    assert pool.find_cached_prefix((1, 2, 3, 4, 5)) == 0
    assert pool.allocate_slots(10, (1, 2, 3, 4, 5)) == (1, 2, 3)
    assert pool.contents() == ((1, None, (1, 2)), (2, h1, (3, 4)), (3, h2, (5,)))
    assert pool.find_cached_prefix((1, 2, 3, 4, 5)) == 4
    assert pool.find_cached_prefix((1, 2, 3, 4)) == 2  # the last token is never a hit
    assert pool.allocate_slots(11, (1, 2, 3, 4, 9)) == (1, 2, 4)
    assert pool.allocate_slots(10, (1, 2, 3, 4, 5, 6, 7)) == (1, 2, 3, 5)
    assert pool.snapshot()[1][3] == (1, h3) and pool.num_free() == 0
    before = pool.state_key()
    assert pool.allocate_slots(11, (1, 2, 3, 4, 9, 9, 9)) is None
    assert pool.state_key() == before
    pool.free_request(10)  # 5 (unhashed) to the head, 3 (hashed) to the tail; 2 and 1 still held
    assert pool.snapshot() == (
        (5, 3),
        ((0, None), (1, h1), (1, h2), (0, h3), (1, None), (0, None)),
        ((11, (1, 2, 4)),),
    )
    with pytest.raises(WrongStateError):
        pool.free_request(10)
    with pytest.raises(WrongStateError):
        pool.allocate(11, 1)
    assert pool.allocate_slots(12, (1, 2, 3, 4, 5, 6, 8)) == (1, 2, 3, 5)  # 3 hit, 5 new
    assert pool.snapshot()[0] == () and pool.tables() == ((11, (1, 2, 4)), (12, (1, 2, 3, 5)))
    pool.check_invariants()


def misuse_setup() -> BlockPoolSpec:
    """Request 1 holds 1 (hash 10) and 2; 3 is free with hash 12; 5, 6 free; request 9 holds 4 (managed)."""
    pool = BlockPoolSpec(7)
    pool.allocate(1, 3)
    pool.cache_blocks(1, (1, 3), (10, 12))
    pool.free(1, (3,))
    pool.allocate_slots(9, (7,))
    return pool


MISUSE = [
    (lambda p: p.allocate(2, -1), InvalidArgumentError),
    (lambda p: p.allocate(2, True), InvalidArgumentError),
    (lambda p: p.allocate("r", 1), InvalidArgumentError),
    (lambda p: p.allocate(2, 4), CapacityError),
    (lambda p: p.allocate(9, 1), WrongStateError),
    (lambda p: p.touch(2, (3, 0)), InvalidArgumentError),
    (lambda p: p.touch(2, (7,)), InvalidArgumentError),
    (lambda p: p.touch(2, (3, 5)), WrongStateError),
    (lambda p: p.touch(9, (3,)), WrongStateError),
    (lambda p: p.cache_blocks(1, (2, 1), (20, 21)), WrongStateError),
    (lambda p: p.cache_blocks(2, (2,), (20,)), WrongStateError),
    (lambda p: p.cache_blocks(1, (2,), (20, 21)), InvalidArgumentError),
    (lambda p: p.cache_blocks(1, (2, 2), (20, 21)), InvalidArgumentError),
    (lambda p: p.cache_blocks(1, (2,), ("h",)), InvalidArgumentError),
    (lambda p: p.lookup((10, 1.5)), InvalidArgumentError),
    (lambda p: p.free(1, (2, 3)), WrongStateError),
    (lambda p: p.free(1, (2, 2)), WrongStateError),
    (lambda p: p.free(2, (1,)), WrongStateError),
    (lambda p: p.free(1, (2, 0)), InvalidArgumentError),
    (lambda p: p.evict((1, 0)), InvalidArgumentError),
    (lambda p: p.evict((1, -1)), InvalidArgumentError),
    (lambda p: p.find_cached_prefix(("a",)), InvalidArgumentError),
    (lambda p: p.allocate_slots(1, (1, 2)), WrongStateError),
    (lambda p: p.allocate_slots(9, (8, 8)), WrongStateError),
    (lambda p: p.allocate_slots(9, 7), InvalidArgumentError),
    (lambda p: p.free_request(2), WrongStateError),
    (lambda p: p.free_request(None), InvalidArgumentError),
]


@pytest.mark.parametrize("call, error", MISUSE)
def test_misuse_raises_typed_error_and_changes_nothing(call, error) -> None:
    pool = misuse_setup()
    before = pool.state_key()
    with pytest.raises(error):
        call(pool)
    assert pool.state_key() == before
    pool.check_invariants()


def test_null_block_skip_semantics() -> None:
    pool = BlockPoolSpec(4, BlockSemantics(null_block="skip"))
    pool.allocate(1, 2)
    pool.cache_blocks(1, (0, 2), (30, 31))  # the null block and its hash are skipped
    pool.touch(2, (0, 2))
    assert pool.evict((0,)) == ()
    pool.free(2, (2, 0))
    assert pool.snapshot() == ((3,), ((0, None), (1, None), (1, 31), (0, None)), ((1, (1, 2)),))
    with pytest.raises(InvalidArgumentError):
        BlockSemantics(misuse="lenient")


def test_free_of_an_unknown_request_is_an_error_or_nothing() -> None:
    for request in (3, 1):  # never allocated; allocated and freed already
        pool = BlockPoolSpec(4)
        pool.allocate_slots(1, (5, 6, 7))
        pool.free_request(1)
        before = pool.state_key()
        with pytest.raises(WrongStateError, match="never allocated, or already freed"):
            pool.free_request(request)
        assert pool.state_key() == before
        quiet = BlockPoolSpec(4, BlockSemantics(free_unknown_request="noop"))
        quiet.allocate_slots(1, (5, 6, 7))
        quiet.free_request(1)
        assert quiet.free_request(request) is None and quiet.state_key() == before
    with pytest.raises(InvalidArgumentError):
        BlockSemantics(free_unknown_request="ignore")


def test_cached_tokens_reach_the_last_hashed_block_of_each_table() -> None:
    """A request's cached tokens: its table up to its last block carrying a hash (a prefix hit and
    the blocks it filled itself), a partial last block not counted; an evicted block no longer counts."""
    spec = BlockPoolSpec(6)
    spec.allocate_slots(1, (5, 6, 7, 8, 9))
    assert spec.cached_tokens() == ((1, 4),)  # two full blocks of 2, the third holds one token
    spec.allocate_slots(2, (5, 6, 7, 1))  # hits (5, 6) only: the last token is always recomputed
    assert spec.cached_tokens() == ((1, 4), (2, 4))
    spec.evict((2,))  # request 1's second block, held, loses its hash
    assert spec.cached_tokens() == ((1, 2), (2, 4))
    assert BlockPoolSpec(6, BlockSemantics(prefix_caching="off")).cached_tokens() == ()
    off = BlockPoolSpec(6, BlockSemantics(prefix_caching="off"))
    off.allocate_slots(1, (5, 6, 7, 8, 9))
    assert off.cached_tokens() == ((1, 0),)


def test_a_load_hashes_nothing_until_it_finishes() -> None:
    """load_slots admits a new request as allocate_slots would (its hit pinned, the rest allocated,
    the request counted) but hashes none of its blocks, so no lookup finds them and no event is
    stored; finish_load hashes its full blocks as one stored group, after which it runs on. A
    loading request may not allocate, a running one may not load, and a finish needs a load."""
    spec = BlockPoolSpec(8)
    spec.allocate_slots(1, (5, 6, 7))
    spec.free_request(1)
    assert spec.load_slots(2, (5, 6, 7, 8, 9)) == (1, 2, 3)  # (5, 6) hit; block 2, unhashed, went to the head
    assert spec.prefix_cache_stats() == (1, 5, 2, False) and spec.events() == ((), (), False)
    assert spec.loading() == (2,) and spec.cached_tokens() == ((2, 2),)
    assert spec.find_cached_prefix((5, 6, 7, 8, 9)) == 2
    before = spec.state_key()
    for refused in (lambda: spec.allocate_slots(2, (5, 6, 7, 8, 9, 1)), lambda: spec.load_slots(2, (5, 6)),
                    lambda: spec.finish_load(3)):
        with pytest.raises(WrongStateError):
            refused()
        assert spec.state_key() == before
    spec.finish_load(2)
    h1 = block_hash(None, (5, 6))
    h2 = block_hash(h1, (7, 8))
    assert spec.events() == (((h1, (h2,), (7, 8)),), (), False) and spec.loading() == ()
    assert spec.find_cached_prefix((5, 6, 7, 8, 9)) == 4
    assert spec.allocate_slots(2, (5, 6, 7, 8, 9, 1)) == (1, 2, 3)
    with pytest.raises(InvalidArgumentError):
        spec.load_slots(3, (1, 2, 3), reserve=-1)
    assert spec.load_slots(3, (1, 2, 3), reserve=3) is None  # 4 blocks free: the 2 it takes would leave 2
    assert spec.loading() == () and 3 not in dict(spec.tables())
    assert spec.load_slots(3, (1, 2, 3), reserve=2) == (4, 5)
    spec.free_request(3)  # a load given up: its blocks, never hashed, go to the head, the last first
    assert spec.loading() == () and spec.snapshot()[0] == (5, 4, 6, 7)


def test_a_call_with_no_new_token_answers_the_table_or_is_refused() -> None:
    """A running request handed its own tokens again: the table, nothing changed; under
    no_new_tokens="refused" InvalidArgumentError, nothing changed."""
    for semantics in (BlockSemantics(), BlockSemantics(no_new_tokens="refused")):
        spec = BlockPoolSpec(6, semantics)
        table = spec.allocate_slots(1, (5, 6, 7))
        before = spec.state_key()
        if semantics.no_new_tokens == "answered":
            assert spec.allocate_slots(1, (5, 6, 7)) == table == (1, 2)
        else:
            with pytest.raises(InvalidArgumentError):
                spec.allocate_slots(1, (5, 6, 7))
        assert spec.state_key() == before
        assert spec.allocate_slots(1, (5, 6, 7, 8)) == (1, 2)
    with pytest.raises(InvalidArgumentError):
        BlockSemantics(no_new_tokens="ignored")


def test_prefix_cache_stats_count_the_requests_a_call_admits_and_a_reset() -> None:
    """The last call's statistics: an admitted request with its tokens and hit tokens; a probe, a
    refused allocation and a running request's call count nothing; a reset that drops every hash is
    flagged, one refused while blocks are in use is not; with prefix caching off nothing is counted."""
    spec = BlockPoolSpec(6)  # 5 blocks besides the null block
    assert spec.prefix_cache_stats() == (0, 0, 0, False)
    spec.allocate_slots(1, (5, 6, 7, 8, 9))
    assert spec.prefix_cache_stats() == (1, 5, 0, False)
    spec.find_cached_prefix((5, 6, 7, 8, 9))
    assert spec.prefix_cache_stats() == (0, 0, 0, False)
    assert spec.allocate_slots(2, (5, 6, 7, 8, 1, 2, 3, 4, 1)) is None  # hits 4 tokens, needs 3 blocks, 2 free
    assert spec.prefix_cache_stats() == (0, 0, 0, False)
    spec.allocate_slots(2, (5, 6, 7, 1))
    assert spec.prefix_cache_stats() == (1, 4, 2, False)  # (5, 6) hit; (7, 1) is the recomputed last block
    spec.allocate_slots(1, (5, 6, 7, 8, 9, 1))
    assert spec.prefix_cache_stats() == (0, 0, 0, False)
    assert spec.reset() is False
    assert spec.prefix_cache_stats() == (0, 0, 0, False)
    spec.free_request(1)
    spec.free_request(2)
    assert spec.reset() is True
    assert spec.prefix_cache_stats() == (0, 0, 0, True)
    off = BlockPoolSpec(4, BlockSemantics(prefix_caching="off"))
    off.allocate_slots(1, (5, 6, 7))
    assert off.prefix_cache_stats() == (0, 0, 0, False)


def test_request_level_without_prefix_caching_hashes_nothing_and_finds_nothing() -> None:
    """prefix_caching="off": a request's full blocks get no hash, so no later request or lookup hits
    them, and freed blocks go to the head of the queue; the contract caches the same calls."""
    off = BlockPoolSpec(5, BlockSemantics(prefix_caching="off"))
    assert off.allocate_slots(1, (5, 6, 7)) == (1, 2)
    assert off.snapshot() == ((3, 4), ((0, None), (1, None), (1, None), (0, None), (0, None)), ((1, (1, 2)),))
    assert off.find_cached_prefix((5, 6, 7)) == 0 and off.allocate_slots(2, (5, 6, 7)) == (3, 4)
    off.free_request(1)
    assert off.snapshot()[0] == (2, 1) and off.events() == ((), (), False)  # freed last first, prepended together
    on = BlockPoolSpec(5)
    on.allocate_slots(1, (5, 6, 7))
    assert on.find_cached_prefix((5, 6, 7)) == 2 and on.allocate_slots(2, (5, 6, 7)) == (1, 3)
    with pytest.raises(InvalidArgumentError):
        BlockSemantics(prefix_caching="lazy")


def test_kind_and_profiles() -> None:
    kind = get_kind("blocks")
    assert kind.size_name == "num_blocks" and isinstance(new_spec(4, kind="blocks"), BlockPoolSpec)
    assert [inv.name for inv in kind.invariants] == [f"B{i}" for i in range(1, 9)]
    assert set(BLOCK_PROFILES) == {"contract", "pool", "vllm-block-pool", "vllm-block-pool-uncached", "vllm-kv-cache-manager",
                                   "vllm-kv-cache-manager-full", "vllm-kv-cache-manager-uncached",
                                   "vllm-kv-cache-manager-swa", "vllm-kv-cache-manager-mamba",
                                   "vllm-kv-cache-manager-hybrid", "vllm-kv-cache-manager-retained"}
    off = BLOCK_PROFILES["vllm-kv-cache-manager-uncached"]
    assert off.semantics.differences() == {"misuse": "trusted", "null_block": "skip", "free_unknown_request": "noop",
                                           "prefix_caching": "off", "no_new_tokens": "refused"}
    assert off.operations == BLOCK_PROFILES["vllm-kv-cache-manager"].operations
    full = BLOCK_PROFILES["vllm-kv-cache-manager-full"]
    assert full.semantics.differences() == {"misuse": "trusted", "null_block": "skip", "free_unknown_request": "noop",
                                            "hit_events": "lookup", "no_new_tokens": "refused"}
    assert full.operations == BLOCK_PROFILES["vllm-kv-cache-manager"].operations
    uncached = BLOCK_PROFILES["vllm-block-pool-uncached"]
    assert uncached.semantics == BLOCK_PROFILES["vllm-block-pool"].semantics
    assert uncached.operations == ("allocate", "touch", "lookup", "free", "unpin", "writable", "evict", "reset", "num_free")
    manager = BLOCK_PROFILES["vllm-kv-cache-manager"]
    assert manager.semantics.differences() == {"misuse": "trusted", "null_block": "skip", "free_unknown_request": "noop",
                                               "no_new_tokens": "refused"}
    assert manager.operations == ("find_cached_prefix", "allocate_slots", "free_request", "load_slots", "finish_load",
                                  "evict", "reset", "num_free")
    assert not {"load_slots", "finish_load"} & set(BLOCK_PROFILES["contract"].operations)
    assert BLOCK_PROFILES["pool"].semantics.differences() == {} and BLOCK_PROFILES["pool"].operations == POOL_OPERATIONS
    vllm = BLOCK_PROFILES["vllm-block-pool"]
    assert vllm.semantics.differences() == {"misuse": "trusted", "null_block": "skip", "hit_events": "stored", "hash_units": 2}
    assert vllm.operations == (*POOL_OPERATIONS, "cache_partial", "move_hashes")
    assert "cache_partial" not in BLOCK_PROFILES["contract"].operations
    assert not kind.operation("lookup").mutates and kind.operation("free_request").mutates


def test_events_of_each_call_worked_by_hand() -> None:
    """The KV cache events (spec/blocks/events.py) of a hand-worked walk: stored groups with their
    parent and tokens, removals as a sorted multiset, reset's one clear, nothing for a call that raises."""
    pool = BlockPoolSpec(5, BlockSemantics(hit_events="stored"))
    assert pool.allocate(1, 2) == (1, 2) and pool.events() == ((), (), False)
    pool.cache_blocks(1, (2, 1), (8, 8))  # two blocks, one hash: announced twice, in the order given
    assert pool.events() == (((None, (8, 8), ()),), (), False)  # the pool level's blocks hold no tokens
    pool.free(1, (1, 2))
    assert pool.events() == ((), (), False)
    pool.touch(2, (2,))  # a prefix hit, re-announced under hit_events="stored"
    assert pool.events() == (((None, (8,), ()),), (), False)
    with pytest.raises(WrongStateError):
        pool.touch(2, (3,))  # free and unhashed: raises, announces nothing
    assert pool.events() == ((), (), False)
    pool.free(2, (2,))
    assert pool.allocate(3, 4) == (3, 4, 1, 2) and pool.events() == ((), (8, 8), False)  # lazy eviction of both
    pool.free(3, (1, 2, 3, 4))
    assert pool.reset() is True and pool.events() == ((), (), True)
    one = block_hash(None, (1, 2))
    two = block_hash(one, (3, 4))
    pool.allocate_slots(10, (1, 2, 3, 4, 5))  # blocks (1, 2) and (3, 4) full, (5,) not
    assert pool.events() == (((None, (one, two), (1, 2, 3, 4)),), (), False)  # with the blocks' tokens
    pool.allocate_slots(10, (1, 2, 3, 4, 5, 6))  # block (5, 6) now full: chained after (3, 4)
    assert pool.events() == (((two, (block_hash(two, (5, 6)),), (5, 6)),), (), False)
    pool.free_request(10)
    pool.allocate_slots(11, (1, 2, 3, 4, 9))  # a hit on two blocks, re-announced with their tokens
    assert pool.events() == (((None, (one, two), (1, 2, 3, 4)),), (), False)
    contract = BlockPoolSpec(3)
    contract.allocate(1, 1)
    contract.cache_blocks(1, (1,), (5,))
    contract.touch(2, (1,))  # the contract's default: a hit announces nothing
    assert contract.events() == ((), (), False)


def test_every_lookup_that_hits_reannounces_it_under_hit_events_lookup() -> None:
    """hit_events="lookup" (vLLM's kv_cache_report_mode "full"): find_cached_prefix and a first
    allocate_slots re-announce the hit they find, the latter also when it answers None; a lookup
    that finds nothing announces nothing; "stored" announces only the hit an allocation pins."""
    one = block_hash(None, (1, 2))
    hit = (((None, (one,), (1, 2)),), (), False)
    for choice, on_lookup in (("lookup", hit), ("stored", ((), (), False))):
        pool = BlockPoolSpec(3, BlockSemantics(hit_events=choice))
        pool.allocate_slots(1, (1, 2, 3))  # blocks 1 (full, cached) and 2
        assert pool.find_cached_prefix((1, 2, 9)) == 2 and pool.events() == on_lookup, choice
        assert pool.find_cached_prefix((7, 7, 7)) == 0 and pool.events() == ((), (), False)
        assert pool.allocate_slots(2, (1, 2, 4, 4, 4)) is None and pool.events() == on_lookup, choice  # 2 more blocks, 0 free
        pool.free_request(1)
        assert pool.allocate_slots(2, (1, 2, 4)) == (1, 2) and pool.events() == hit, choice


def test_invariants_bite() -> None:
    good = BlockPoolSpec(3).snapshot()
    double = ((1, 2, 2), ((0, None), (0, None), (0, None)), ())
    negative = ((1, 2), ((0, None), (0, None), (-1, None)), ())
    orphan = ((1,), ((0, None), (0, None), (1, None)), ())
    gap = BlockStep("lookup", 3, ((), ((0, None), (1, 5), (1, 7)), ((1, (1, 2)),)), good, False, ((5, 7),), (1,))

    def names(after, **fields):
        return [inv.name for inv in broken_invariants(BlockStep("free", 3, good, after, False, **fields))]

    assert names(good) == []
    assert "B1" in names(double) and "B2" in names(double)
    assert "B3" in names(negative)
    assert "B7" in names(orphan)
    assert names(((1, 2), ((0, None), (0, 4), (0, None)), ()), hash_map=((4, (2,)),)) == ["B4"]
    wrong_content = ((1, 2), ((0, None), (0, 4), (0, None)), ())
    assert names(wrong_content, contents=((1, None, (1, 2)),)) == ["B5"]
    assert [inv.name for inv in broken_invariants(gap)] == ["B6"]
    assert "B8" in [inv.name for inv in broken_invariants(BlockStep("free", 3, good, double, True))]
    assert all(inv.excludes for inv in BLOCK_INVARIANTS)


def test_chain_hashes_are_the_same_in_every_process() -> None:
    code = "from cacheproof.spec.blocks.manager import chain_hashes; print(chain_hashes((1, 2, 3, 4, 5)))"
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2")
    }
    assert outputs == {f"{chain_hashes((1, 2, 3, 4, 5))}\n"}


def test_spec_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "for name in ('hypothesis', 'torch', 'numpy', 'z3'): sys.modules[name] = None\n"
        "import cacheproof.spec.blocks.kind\n"
        "print(sorted(m for m in ('hypothesis', 'torch', 'numpy', 'z3') if sys.modules[m] is not None))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize("seed", range(4))
def test_random_walk_list_pool_agrees_and_invariants_hold(seed) -> None:
    assert differential_walk(ListBlockPool, seed, 3000) is None


@pytest.mark.parametrize("seed", range(2))
def test_random_walk_eventful_pool_agrees_on_its_events(seed) -> None:
    assert differential_walk(EventfulListPool, seed, 3000) is None


@pytest.mark.parametrize("broken", EVENT_BROKEN_POOLS, ids=lambda cls: cls.__name__)
def test_random_walk_catches_wrong_events_in_the_events_view_alone(broken) -> None:
    divergence = differential_walk(broken, 0, 2000)
    assert divergence is not None and divergence.reason == "events", divergence


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("broken", BROKEN_POOLS, ids=lambda cls: cls.__name__)
def test_random_walk_catches_each_broken_pool(broken, seed) -> None:
    divergence = differential_walk(broken, seed, 2000)
    assert divergence is not None, f"{broken.__name__} not caught in 2000 steps (seed {seed})"


def test_a_sliding_window_frees_what_it_reads_no_more_and_hits_on_its_last_blocks() -> None:
    """sliding_window=4, blocks of 2: with n tokens computed, the blocks wholly before token n - 3
    are read no more; a hit needs its last ceil(3 / 2) = 2 blocks cached."""
    pool = BlockPoolSpec(8, BlockSemantics(sliding_window=4))
    assert pool.allocate_slots(1, tuple(range(6))) == (1, 2, 3)
    # 6 computed: tokens 0-2 left the window, so block 1 (tokens 0, 1) is freed before 7 and 8 need one
    assert pool.allocate_slots(1, tuple(range(8))) == (0, 2, 3, 4)
    assert pool.snapshot()[0] == (5, 6, 7, 1)  # hashed: at the tail
    assert pool.allocate_slots(1, tuple(range(20))) is None  # 10 blocks, 4 free...
    assert pool.tables() == ((1, (0, 0, 3, 4)),)  # ...but block 2 (tokens 2, 3) was freed first
    assert pool.snapshot()[0] == (5, 6, 7, 1, 2)
    # tokens 0-6 hold three full blocks; the last two (2 and 3) are cached: a hit of 6 tokens
    assert pool.find_cached_prefix(tuple(range(8))) == 6
    assert pool.find_cached_prefix((0, 1, 2, 9, 4, 5, 6, 7)) == 2  # no two in a row: block 1, from the start
    # 6 hit tokens leave token 0-2 behind: block 1's place is the null block, 2 and 3 pinned, 5 new
    assert pool.allocate_slots(2, tuple(range(8))) == (0, 2, 3, 5)
    assert pool.snapshot()[0] == (6, 7, 1)
    # 8 computed: block 2 (tokens 2, 3) is out of the window and freed first, then 5 and 3, last
    # first (3 is request 1's still); both hashed: the tail
    pool.free_request(2)
    assert pool.snapshot()[0] == (6, 7, 1, 2, 5)


def test_a_recurrent_state_holds_its_state_blocks_caches_them_at_boundaries_and_offers_them() -> None:
    """recurrent_state="align", blocks of 2 (spec/blocks/recurrent.py): a request holds its running
    state's block and, until its next call, the one before; a call ending on a boundary caches the
    state there and offers it; a hit is one cached block, the null block before it."""
    pool = BlockPoolSpec(8, BlockSemantics(recurrent_state="align"))
    t = tuple(range(100, 120))
    assert pool.allocate_slots(1, t[:4]) == (0, 1)  # one block, at the last place
    assert pool.boundary_states() == ((1, 1, 4),)
    assert pool.allocate_slots(1, t[:6]) == (0, 1, 2)  # block 1 is the state the step starts from
    assert pool.boundary_states() == ((1, 2, 6),)
    assert pool.allocate_slots(1, t[:7]) == (0, 0, 2, 3)  # 6 computed: block 1 retired (hashed: the tail)
    assert pool.boundary_states() == () and pool.snapshot()[0] == (4, 5, 6, 7, 1)
    assert pool.allocate_slots(1, t[:8]) == (0, 0, 0, 3)  # no new place, no new block; block 3 cached at 8
    assert pool.boundary_states() == ((1, 3, 8),) and pool.snapshot()[0] == (4, 5, 6, 7, 1, 2)
    assert pool.allocate_slots(1, t[:12]) == (0, 0, 0, 3, 0, 4)  # two places: one block, a null between
    # 11 tokens hold 5 full blocks; the last cached of them is at place 3 (tokens 0-7)
    assert pool.find_cached_prefix(t[:12]) == 8
    assert pool.allocate_slots(2, t[:9]) == (0, 0, 0, 3, 5)  # block 3 adopted (pinned), 5 for the running state
    assert pool.boundary_states() == () and pool.snapshot()[0] == (6, 7, 1, 2)
    before = pool.state_key()
    with pytest.raises(WrongStateError, match="at most 1"):  # 9 tokens stop inside a block: 10 at most
        pool.allocate_slots(2, t[:12])
    assert pool.state_key() == before
    assert pool.allocate_slots(2, t[:10]) == (0, 0, 0, 0, 5)  # 9 computed: block 3 retired (request 1's still)
    assert pool.boundary_states() == ((2, 5, 10),)
    pool.free_request(1)  # 12 computed: block 3 retired first, then block 4
    assert pool.snapshot()[0] == (6, 7, 1, 2, 3, 4)
    with pytest.raises(InvalidArgumentError, match="recurrent"):
        pool.load_slots(3, t[:4])
    with pytest.raises(InvalidArgumentError, match="not both"):
        BlockSemantics(recurrent_state="align", sliding_window=4)



def test_two_groups_take_free_cache_and_hit_group_by_group() -> None:
    """window_group=4, blocks of 2, 16 blocks: a full-attention group and a window of 4 on one pool.
    Every figure here is what vLLM 0.34.0's manager over those two groups did (docs/decisions.md,
    "Several groups on one pool, measured")."""
    pool = BlockPoolSpec(16, BlockSemantics(window_group=4))
    assert pool.allocate_slots(1, tuple(range(7))) == (1, 2, 3, 4, 5, 6, 7, 8)  # the full group's 4, then the window's
    stored = pool.events()[0]
    assert [len(hashes) for _, hashes, _ in stored] == [3, 3]  # one stored event per group
    assert stored[0][0] is None and stored[1][0] == group_seed(1)  # each group's chain its own
    assert not set(stored[0][1]) & set(stored[1][1])
    assert pool.allocate_slots(1, tuple(range(8))) == (1, 2, 3, 4, 0, 0, 7, 8)  # 7 computed: the window drops 6, 5
    assert pool.snapshot()[0] == (9, 10, 11, 12, 13, 14, 15, 6, 5)
    assert pool.cached_tokens() == ((1, 8),)
    pool.free_request(1)  # the full group last first, then the window's
    assert pool.snapshot()[0] == (9, 10, 11, 12, 13, 14, 15, 6, 5, 4, 3, 2, 1, 8, 7)
    # the full group's hit is 3 blocks; the window's, within it, needs its last 2: 6 and 7, freed but cached
    assert pool.find_cached_prefix(tuple(range(8))) == 6
    assert pool.allocate_slots(2, tuple(range(8))) == (1, 2, 3, 9, 0, 6, 7, 10)
    assert pool.snapshot()[0] == (11, 12, 13, 14, 15, 5, 4, 8)
    pool.free_request(2)
    pool.evict((7,))  # the window's last hit block: its hit is 5 and 6, from the start; the full group cut to 2
    assert pool.find_cached_prefix(tuple(range(8))) == 4
    pool.evict((2,))  # the full group's hit is 1 block, so the window's is its first block alone
    assert pool.find_cached_prefix(tuple(range(8))) == 2
    before = pool.state_key()
    assert pool.allocate_slots(3, tuple(range(100, 130))) is None  # 30 blocks on 15: nothing changes
    assert pool.state_key() == before
    with pytest.raises(InvalidArgumentError, match="beside a full-attention"):
        BlockSemantics(window_group=4, sliding_window=4)


def test_a_retained_first_group_keeps_its_longer_hit_over_a_load() -> None:
    """window_group=4 under first_group_hit "cut" and "retained", the same calls: the full group's own
    hit is 3 blocks (1, 2, 3), the common hit 2 (the window's last hit block 7 evicted). A load of all 8
    tokens adopts (1, 2) under "cut" and the full group's own (1, 2, 3) under "retained"; the hit the
    request counts is the common one either way, and a plain allocation cuts to it under both. Every
    figure is what vLLM 0.34.0's manager did, with and without `retains_longer_hit` on the full group's
    manager (model_tests/engines/test_vllm_block_checks.py replays it)."""
    answers = {}
    for first_group_hit in ("cut", "retained"):
        pool = BlockPoolSpec(16, BlockSemantics(window_group=4, first_group_hit=first_group_hit))
        assert pool.allocate_slots(1, tuple(range(7))) == (1, 2, 3, 4, 5, 6, 7, 8)
        pool.free_request(1)
        pool.evict((7,))
        assert pool.find_cached_prefix(tuple(range(8))) == 4
        answers[first_group_hit] = [pool.load_slots(2, tuple(range(8))), pool.cached_tokens()]
        pool.finish_load(2)
        answers[first_group_hit] += [pool.cached_tokens(), pool.allocate_slots(3, tuple(range(8)))]
    assert answers["cut"] == [(1, 2, 8, 4, 0, 0, 9, 10), ((2, 0),), ((2, 8),), (1, 2, 3, 11, 0, 6, 9, 12)]
    assert answers["retained"] == [(1, 2, 3, 8, 0, 0, 4, 9), ((2, 0),), ((2, 8),), (1, 2, 3, 10, 0, 6, 4, 11)]
