"""KVBlockPool: hand-worked outcomes of the block-pool contract, misuse changing nothing, the meta
device, the block-table kernel fed from the pool's holdings, and unpin / writable / reused() made
side by side on the pool, the manager over it and the spec."""

from __future__ import annotations

import random

import pytest
import torch

from cacheproof.impl.kv_block_pool import KVBlockPool
from cacheproof.impl.kv_cache_manager import KVCacheManager
from cacheproof.spec.blocks.operations import POOL_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from model_tests.block_walk import differential_walk
from model_tests.broken_kv_block_pools import BROKEN_KV_POOLS, UntoldReuseManager


def small_pool() -> KVBlockPool:
    return KVBlockPool(6, 4, kv_shape=(2, 3), dtype=torch.float32)


def test_storage_shape_and_fresh_state() -> None:
    pool = small_pool()
    assert pool.kv.shape == (6, 4, 2, 3) and pool.kv.dtype == torch.float32
    assert pool.num_blocks == 6 and pool.num_free() == 5
    assert pool.snapshot() == ((1, 2, 3, 4, 5), ((0, None),) * 6, ())


def test_hand_worked_walk() -> None:
    pool = small_pool()
    assert pool.allocate(1, 3) == (1, 2, 3)
    pool.cache_blocks(1, (1, 2), (10, 11))
    assert pool.lookup((10, 11, 12)) == (1, 2)
    assert pool.lookup((11,)) == (2,)
    assert pool.lookup((12, 10)) == ()
    # Reverse order, as an engine frees a request: 3 has no hash -> head; 2, 1 -> tail in order.
    pool.free(1, (3, 2, 1))
    assert pool.snapshot() == ((3, 4, 5, 2, 1), ((0, None), (0, 10), (0, 11), (0, None), (0, None), (0, None)), ())
    assert pool.lookup((10, 11)) == (1, 2)  # freed blocks stay findable
    assert pool.allocate(2, 2) == (3, 4)
    pool.touch(2, (1,))  # prefix hit on a free hashed block: it leaves the queue
    assert pool.snapshot()[0] == (5, 2)
    assert pool.allocate(2, 2) == (5, 2)  # 2 is taken from the queue and loses hash 11
    assert pool.lookup((10, 11)) == (1,)
    assert pool.snapshot() == (
        (),
        ((0, None), (1, 10), (1, None), (1, None), (1, None), (1, None)),
        ((2, (1, 2, 3, 4, 5)),),  # holdings sorted (the contract snapshot)
    )
    assert pool.num_free() == 0


def test_duplicate_hashes_first_inserted_wins_until_evicted() -> None:
    pool = small_pool()
    pool.allocate(1, 2)
    pool.cache_blocks(1, (2,), (7,))
    pool.cache_blocks(1, (1,), (7,))
    assert pool.lookup((7,)) == (2,)
    assert pool.evict((2, 2, 3)) == (2,)
    assert pool.lookup((7,)) == (1,)
    assert pool.evict((1,)) == (1,)
    assert pool.lookup((7,)) == ()


def test_evict_keeps_queue_place_and_allocate_drops_hash_lazily() -> None:
    pool = small_pool()
    pool.allocate(1, 2)
    pool.cache_blocks(1, (1, 2), (5, 6))
    pool.free(1, (1, 2))
    assert pool.snapshot()[0] == (3, 4, 5, 1, 2)
    assert pool.evict((1,)) == (1,)
    assert pool.snapshot()[0] == (3, 4, 5, 1, 2)
    assert pool.snapshot()[1][1] == (0, None) and pool.snapshot()[1][2] == (0, 6)
    assert pool.allocate(3, 5) == (3, 4, 5, 1, 2)
    assert pool.lookup((6,)) == ()


def test_unhashed_blocks_freed_together_go_to_the_head_in_order() -> None:
    pool = small_pool()
    pool.allocate(1, 3)
    pool.free(1, (2, 1))
    assert pool.snapshot()[0] == (2, 1, 4, 5)


def test_shared_block_needs_every_holder_to_free() -> None:
    pool = small_pool()
    pool.allocate(1, 1)
    pool.cache_blocks(1, (1,), (9,))
    pool.touch(2, (1,))
    pool.touch(2, (1,))
    assert pool.snapshot()[1][1] == (3, 9)
    assert pool.snapshot()[2] == ((1, (1,)), (2, (1, 1)))
    pool.free(2, (1, 1))
    pool.free(1, (1,))
    assert pool.snapshot() == ((2, 3, 4, 5, 1), ((0, None), (0, 9)) + ((0, None),) * 4, ())


def test_reset_only_when_nothing_is_in_use() -> None:
    pool = small_pool()
    pool.allocate(1, 1)
    pool.cache_blocks(1, (1,), (4,))
    before = pool.snapshot()
    assert pool.reset() is False
    assert pool.snapshot() == before and pool.lookup((4,)) == (1,)
    pool.free(1, (1,))
    assert pool.reset() is True
    assert pool.lookup((4,)) == ()
    assert pool.snapshot() == ((2, 3, 4, 5, 1), ((0, None),) * 6, ())


def misuse_setup() -> KVBlockPool:
    """Request 1 holds 1 (hash 10) and 2; block 3 is free with hash 12; 4, 5 free, unhashed."""
    pool = small_pool()
    pool.allocate(1, 3)
    pool.cache_blocks(1, (1, 3), (10, 12))
    pool.free(1, (3,))
    return pool


MISUSE = [
    (lambda p: p.allocate(2, -1), InvalidArgumentError),
    (lambda p: p.allocate(2, 4), CapacityError),
    (lambda p: p.allocate(2, 1.0), InvalidArgumentError),
    (lambda p: p.allocate("r", 1), InvalidArgumentError),
    (lambda p: p.touch(2, (3, 0)), InvalidArgumentError),
    (lambda p: p.touch(2, (3, 6)), InvalidArgumentError),
    (lambda p: p.touch(2, (3, -1)), InvalidArgumentError),
    (lambda p: p.touch(2, (3, True)), InvalidArgumentError),
    (lambda p: p.touch(2, (3, 4)), WrongStateError),
    (lambda p: p.cache_blocks(1, (2, 1), (20, 21)), WrongStateError),
    (lambda p: p.cache_blocks(2, (2,), (20,)), WrongStateError),
    (lambda p: p.cache_blocks(1, (2,), (20, 21)), InvalidArgumentError),
    (lambda p: p.cache_blocks(1, (2, 0), (20, 21)), InvalidArgumentError),
    (lambda p: p.cache_blocks(1, (2,), ("h",)), InvalidArgumentError),
    (lambda p: p.cache_blocks(1, (2, 2), (20, 21)), InvalidArgumentError),
    (lambda p: p.lookup((10, "h")), InvalidArgumentError),
    (lambda p: p.free(1, (2, 3)), WrongStateError),
    (lambda p: p.free(1, (2, 2)), WrongStateError),
    (lambda p: p.free(2, (1,)), WrongStateError),
    (lambda p: p.free(1, (2, 0)), InvalidArgumentError),
    (lambda p: p.evict((1, 0)), InvalidArgumentError),
    (lambda p: p.evict((1, 9)), InvalidArgumentError),
    (lambda p: p.unpin(1, (2, 3)), WrongStateError),
    (lambda p: p.unpin(1, (2, 2)), WrongStateError),
    (lambda p: p.unpin(2, (1,)), WrongStateError),
    (lambda p: p.unpin(1, (2, 0)), InvalidArgumentError),
    (lambda p: p.unpin(1, (2, 6)), InvalidArgumentError),
    (lambda p: p.unpin("r", (2,)), InvalidArgumentError),
    (lambda p: p.writable((2, 0)), InvalidArgumentError),
    (lambda p: p.writable((2, "b")), InvalidArgumentError),
]


@pytest.mark.parametrize("call, error", MISUSE)
def test_misuse_raises_typed_error_and_changes_nothing(call, error) -> None:
    pool = misuse_setup()
    before = pool.snapshot()
    with pytest.raises(error):
        call(pool)
    assert pool.snapshot() == before
    assert pool.lookup((10,)) == (1,) and pool.lookup((12,)) == (3,) and pool.num_free() == 3


def test_double_free_is_a_wrong_state_error() -> None:
    pool = small_pool()
    pool.allocate(1, 1)
    pool.free(1, (1,))
    with pytest.raises(WrongStateError):
        pool.free(1, (1,))
    assert pool.snapshot()[1][1] == (0, None)


def test_meta_device_runs_any_size() -> None:
    pool = KVBlockPool(2**20, 16, kv_shape=(2, 32, 128), dtype=torch.float16, device="meta")
    assert pool.kv.device.type == "meta" and pool.kv.shape == (2**20, 16, 2, 32, 128)
    blocks = pool.allocate(1, 128)
    assert blocks == tuple(range(1, 129))
    pool.cache_blocks(1, blocks, tuple(range(128)))
    pool.free(1, blocks[::-1])
    assert pool.num_free() == 2**20 - 1 and pool.lookup(tuple(range(3))) == (1, 2, 3)


def test_storage_rows_are_the_blocks() -> None:
    pool = small_pool()
    (block,) = pool.allocate(1, 1)
    pool.kv.zero_()
    pool.kv[block] = 7.0
    assert pool.kv[block].eq(7.0).all() and pool.kv.sum().item() == 7.0 * 4 * 2 * 3


def test_block_table_kernel_from_hand_worked_holdings() -> None:
    pool = small_pool()
    pool.allocate(1, 2)
    pool.allocate(2, 1)
    pool.cache_blocks(1, (1,), (5,))
    pool.touch(2, (1,))
    buffers = pool.page_buffers([2, 1, 9])
    assert [b.tolist() for b in buffers] == [[3, 1], [1, 2], []]
    table = pool.block_table([2, 1, 9])
    assert table.dtype == torch.int32
    assert table.tolist() == [[3, 1], [1, 2], [0, 0]]


def test_block_table_kernel_equals_holdings_on_a_random_walk() -> None:
    rng = random.Random(5)
    pool = KVBlockPool(64, 16, kv_shape=(1,), device="meta")
    for _ in range(400):
        request = rng.randrange(6)
        held = dict(pool.holdings()).get(request, ())
        roll = rng.random()
        if roll < 0.4 and pool.num_free():
            pool.allocate(request, rng.randint(1, min(4, pool.num_free())))
        elif roll < 0.6 and held:
            pool.free(request, tuple(rng.sample(held, rng.randint(1, len(held)))))
        elif roll < 0.8:
            other = [b for r, bs in pool.holdings() if r != request for b in bs]
            if other:
                pool.touch(request, (rng.choice(other),))
        requests = list(range(6))
        rows = [list(dict(pool.holdings()).get(r, ())) for r in requests]
        width = max(map(len, rows))
        assert pool.block_table(requests).tolist() == [row + [0] * (width - len(row)) for row in rows]


def test_hits_on_free_blocks_are_skipped_when_allocating_and_compacted() -> None:
    pool = small_pool()
    pool.allocate(1, 4)
    pool.cache_blocks(1, (1, 2, 3), (31, 32, 33))
    pool.free(1, (1, 2, 3, 4))  # 4 unhashed -> head; 1, 2, 3 -> tail
    assert pool.snapshot()[0] == (4, 5, 1, 2, 3)
    pool.touch(2, (2,))  # leaves the middle of the queue
    assert pool.snapshot()[0] == (4, 5, 1, 3) and pool.num_free() == 4
    assert pool.evict((2,)) == (2,)
    pool.free(2, (2,))  # now unhashed: back at the head
    assert pool.snapshot()[0] == (2, 4, 5, 1, 3)
    pool.touch(3, (1, 3))
    assert pool.allocate(3, 3) == (2, 4, 5) and pool.num_free() == 0
    pool.free(3, (1, 3, 2, 4, 5))
    assert pool.snapshot()[0] == (2, 4, 5, 1, 3)


def test_queue_stays_exact_over_many_hits_and_frees() -> None:
    pool = KVBlockPool(9, 1, kv_shape=(1,), device="meta")
    pool.allocate(1, 8)
    pool.cache_blocks(1, tuple(range(1, 9)), tuple(range(101, 109)))
    pool.free(1, tuple(range(8, 0, -1)))
    assert pool.snapshot()[0] == (8, 7, 6, 5, 4, 3, 2, 1)
    for round_ in range(200):  # each hit leaves a dead entry behind until compaction
        block = 1 + round_ % 8  # hit, then freed to the tail: 1, 2, ..., 8 end up in order
        pool.touch(7, (block,))
        pool.free(7, (block,))
    assert pool.snapshot()[0] == (1, 2, 3, 4, 5, 6, 7, 8) and pool.num_free() == 8
    assert pool.allocate(2, 8) == (1, 2, 3, 4, 5, 6, 7, 8)


def test_unpin_queues_at_the_tail_and_the_reusing_allocate_tells_once() -> None:
    pool = small_pool()
    pool.allocate(1, 3)
    pool.cache_blocks(1, (1,), (10,))
    pool.unpin(1, (2, 1))  # unhashed 2 too goes to the tail, in the order given
    assert pool.snapshot()[0] == (4, 5, 2, 1) and pool.reused() == ()
    assert pool.writable((3, 2, 3, 1)) == (3,)  # 2 is free, 1 is free and hashed
    assert pool.allocate(2, 2) == (4, 5) and pool.reused() == ()
    assert pool.allocate(2, 2) == (2, 1) and pool.reused() == (1, 2)  # told once, sorted
    assert pool.lookup((10,)) == () and pool.reused() == ()
    pool.free(2, (2, 1))
    assert pool.allocate(3, 2) == (2, 1) and pool.reused() == ()  # the watch ended with the first reuse


def test_a_block_unpinned_while_shared_stays_watched_until_reused() -> None:
    pool = small_pool()
    pool.allocate(1, 1)
    pool.touch(2, (1,))
    pool.unpin(1, (1,))  # ref 2 -> 1: still in use, watched
    assert pool.snapshot()[1][1] == (1, None) and pool.writable((1,)) == (1,)
    pool.free(2, (1,))  # unhashed: the head, as free puts it
    assert pool.snapshot()[0] == (1, 2, 3, 4, 5)
    assert pool.allocate(3, 1) == (1,) and pool.reused() == (1,)


def test_reset_tells_every_reader_and_a_refused_reset_none() -> None:
    pool = small_pool()
    pool.allocate(1, 3)
    pool.unpin(1, (3, 1))
    assert pool.reset() is False and pool.reused() == ()
    pool.free(1, (2,))
    assert pool.reset() is True and pool.reused() == (1, 3)
    assert pool.reset() is True and pool.reused() == ()


def test_a_call_that_raises_announces_nothing() -> None:
    pool = small_pool()
    pool.allocate(1, 5)
    pool.unpin(1, (5,))
    with pytest.raises(CapacityError):
        pool.allocate(2, 2)
    assert pool.reused() == ()
    assert pool.allocate(2, 1) == (5,) and pool.reused() == (5,)
    with pytest.raises(WrongStateError):
        pool.unpin(2, (1,))
    assert pool.reused() == ()


SIDE_BY_SIDE = [
    ("allocate", 1, 3), ("cache_blocks", 1, (2,), (20,)), ("unpin", 1, (1, 2)), ("writable", (3, 1, 3)),
    ("unpin", 1, (3, 3)), ("touch", 2, (2,)), ("allocate", 2, 3), ("writable", (1, 2, 4, 5)),
    ("unpin", 2, (2, 4)), ("free", 2, (1, 5)), ("num_free",), ("allocate", 3, 4), ("unpin", 3, (0,)),
    ("free", 3, (2, 3, 4, 5)), ("unpin", 1, (3,)), ("reset",), ("reset",), ("writable", (0,)),
]
"""Pool-level calls made on the pool, the manager and the spec alike (a few raise)."""


@pytest.mark.parametrize("factory", [lambda: KVBlockPool(6, 4, kv_shape=(1,)), lambda: KVCacheManager(6)],
                         ids=["pool", "manager"])
def test_unpin_writable_and_reused_agree_with_the_spec_call_by_call(factory) -> None:
    impl, spec = factory(), BlockPoolSpec(6)
    for name, *args in SIDE_BY_SIDE:
        outcomes = []
        for target in (spec, impl):
            try:
                outcomes.append(("returned", getattr(target, name)(*args)))
            except (CapacityError, InvalidArgumentError, WrongStateError) as error:
                outcomes.append(("raised", type(error).__name__))
        assert outcomes[1] == outcomes[0], (name, args)
        assert impl.snapshot() == spec.snapshot(), (name, args)
        assert impl.reused() == spec.reused(), (name, args)


def test_the_manager_tells_the_reader_of_a_block_allocate_slots_reuses() -> None:
    manager, spec = KVCacheManager(4), BlockPoolSpec(4)
    for target in (manager, spec):
        target.allocate(1, 3)
        target.unpin(1, (1,))
        assert target.allocate_slots(7, (5, 5, 5)) is None and target.reused() == ()  # 2 blocks, 1 free
        assert target.allocate_slots(7, (5, 5)) == (1,) and target.reused() == (1,)
        assert target.find_cached_prefix((5, 5, 5)) == 2 and target.reused() == ()


@pytest.mark.parametrize("seed", range(3))
def test_random_walks_agree_with_the_spec(seed) -> None:
    assert differential_walk(lambda n: KVBlockPool(n, kv_shape=(1,), device="meta"), seed, 2000,
                             operations=POOL_OPERATIONS) is None
    assert differential_walk(KVCacheManager, seed, 2000) is None


@pytest.mark.parametrize("broken", BROKEN_KV_POOLS, ids=lambda cls: cls.__name__)
def test_random_walk_catches_each_broken_torch_pool(broken) -> None:
    divergence = differential_walk(broken, 0, 2000)
    assert divergence is not None
    assert divergence.reason == ("reused" if broken is UntoldReuseManager else "snapshot"), divergence
