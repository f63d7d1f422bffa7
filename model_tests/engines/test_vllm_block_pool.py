"""The adapter over vLLM's REAL BlockPool: hand-worked contract outcomes, vLLM's double free seen
through the snapshot, and a subclass checked through `pool_class`. Skipped without vLLM."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "vllm.v1.core.block_pool",
    reason="vLLM is not installed: build the engines venv with `bash tools/engines_venv.sh VENV`",
)

from vllm.v1.core.block_pool import BlockPool  # noqa: E402

from cacheproof.engines.vllm import VllmBlockPool, block_pool  # noqa: E402
from cacheproof.spec.errors import CapacityError, InvalidArgumentError  # noqa: E402
from cacheproof.spec.blocks.pool import BlockPoolSpec  # noqa: E402


def test_fresh_pool_reads_back_from_vllm() -> None:
    pool = block_pool(6)
    assert isinstance(pool, VllmBlockPool) and type(pool.pool) is BlockPool
    assert pool.num_blocks == 6 and pool.num_free() == 5
    assert pool.snapshot() == ((1, 2, 3, 4, 5), ((0, None),) * 6, ())


def test_hand_worked_walk_on_the_real_pool() -> None:
    pool = block_pool(6)
    assert pool.allocate(1, 3) == (1, 2, 3)
    pool.cache_blocks(1, (1, 2), (10, -11))
    assert pool.lookup((10, -11, 12)) == (1, 2)
    assert pool.lookup((12, 10)) == ()
    pool.free(1, (3, 2, 1))
    assert pool.snapshot() == ((3, 4, 5, 2, 1), ((0, None), (0, 10), (0, -11), (0, None), (0, None), (0, None)), ())
    assert pool.allocate(2, 2) == (3, 4)
    pool.touch(2, (1,))
    assert pool.snapshot()[0] == (5, 2)
    assert pool.allocate(2, 2) == (5, 2)
    assert pool.lookup((10, -11)) == (1,)
    assert pool.snapshot() == (
        (),
        ((0, None), (1, 10), (1, None), (1, None), (1, None), (1, None)),
        ((2, (1, 2, 3, 4, 5)),),
    )
    with pytest.raises(CapacityError):
        pool.allocate(3, 1)
    assert pool.reset() is False


def test_duplicates_evict_and_reset() -> None:
    pool = block_pool(6)
    pool.allocate(1, 2)
    pool.cache_blocks(1, (2,), (7,))
    pool.cache_blocks(1, (1,), (7,))
    assert pool.lookup((7,)) == (2,)
    assert pool.evict((2, 2, 3)) == (2,)
    assert pool.lookup((7,)) == (1,)
    pool.free(1, (1, 2))
    assert pool.snapshot()[0] == (2, 3, 4, 5, 1)  # 2 unhashed -> head, 1 hashed -> tail
    assert pool.reset() is True
    assert pool.lookup((7,)) == () and pool.snapshot()[1] == ((0, None),) * 6


def test_ids_with_no_vllm_block_are_invalid() -> None:
    pool = block_pool(4)
    with pytest.raises(InvalidArgumentError):
        pool.touch(1, (4,))
    with pytest.raises(InvalidArgumentError):
        pool.cache_blocks(1, (1,), ("h",))


def test_real_double_free_drives_ref_to_minus_one() -> None:
    pool = block_pool(4)
    pool.allocate(1, 1)
    pool.free(1, (1,))
    pool.free(1, (1,))  # the contract's WrongStateError; vLLM decrements without a check
    assert pool.pool.blocks[1].ref_cnt == -1
    assert pool.snapshot() == ((1, 2, 3), ((0, None), (-1, None), (0, None), (0, None)), ())
    assert pool.num_free() == 3


def test_the_null_block_of_a_padded_table_is_passed_over() -> None:
    """vllm-block-pool's null_block="skip", worked by hand: the null block and its hash are passed
    over in cache_full_blocks, touch and free_blocks; whatever vLLM does to its ref_cnt, it holds
    nothing, so the snapshot shows it at 0, unqueued and unhashed."""
    pool = block_pool(4)
    assert pool.allocate(1, 1) == (1,)
    pool.cache_blocks(1, (0, 1), (5, 6))
    pool.touch(2, (0, 1, 0))
    pool.free(2, (1, 0))
    assert pool.evict((0,)) == ()
    assert pool.lookup((5,)) == () and pool.lookup((6,)) == (1,)
    assert pool.snapshot() == ((2, 3), ((0, None), (1, 6), (0, None), (0, None)), ((1, (1,)),))


def test_negative_allocation_corrupts_the_free_count() -> None:
    pool = block_pool(4)
    assert pool.allocate(1, -1) == ()  # the contract's InvalidArgumentError
    assert pool.num_free() == 4 and pool.snapshot()[0] == (1, 2, 3)


def test_pool_class_is_used() -> None:
    calls = []

    class CountingPool(BlockPool):
        def free_blocks(self, ordered_blocks, evict_first=False):
            calls.append([block.block_id for block in ordered_blocks])
            super().free_blocks(ordered_blocks, evict_first)

    pool = block_pool(4, pool_class=CountingPool)
    assert type(pool.pool) is CountingPool
    pool.free(1, pool.allocate(1, 2))
    assert calls == [[1, 2]]
    assert pool.snapshot()[0] == (1, 2, 3)


def test_free_is_called_on_the_peer_pool_which_hands_the_blocks_to_their_own() -> None:
    """Every free goes through vLLM's routing of another pool's blocks (`block.pool`), then through
    the release into the block's own pool: both halves of free_blocks run on each call."""
    calls = []

    class Peer(BlockPool):
        def free_blocks(self, ordered_blocks, evict_first=False):
            calls.append(("peer", [block.block_id for block in ordered_blocks]))
            super().free_blocks(ordered_blocks, evict_first)

    class Home(BlockPool):
        def free_blocks(self, ordered_blocks, evict_first=False):
            calls.append(("home", [block.block_id for block in ordered_blocks]))
            super().free_blocks(ordered_blocks, evict_first)

    pool = block_pool(4, pool_class=Home, peer_class=Peer)
    assert len(pool.peer.blocks) == 1 and pool.peer.blocks[0].is_null
    pool.free(1, pool.allocate(1, 2))
    assert calls == [("peer", [1, 2]), ("home", [1, 2])]
    spec = BlockPoolSpec(4)
    spec.free(1, spec.allocate(1, 2))
    assert pool.snapshot() == spec.snapshot() and pool.peer.get_num_free_blocks() == 0


def test_kv_cache_events_run_and_are_taken_after_each_call() -> None:
    """The pool is built with KV cache events on (their code runs as in a deployment whose router
    reads them) and the adapter empties the queue after each call."""
    taken: list[list[object]] = []

    class Recording(BlockPool):
        def take_events(self):
            events = super().take_events()
            taken.append(events)
            return events

    pool = block_pool(6, pool_class=Recording)
    assert pool.pool.enable_kv_cache_events is True
    pool.allocate(1, 2)
    pool.cache_blocks(1, (1, 2), (10, 11))
    assert pool.pool.kv_event_queue == []
    assert [type(event).__name__ for event in taken[-1]] == ["BlockStored"]
    assert taken[-1][0].block_hashes == [10, 11]
    pool.free(1, (1, 2))
    assert pool.reset() is True
    assert [type(event).__name__ for event in taken[-1]] == ["AllBlocksCleared"]


def test_unpinned_blocks_stay_readable_until_vllm_hands_them_out() -> None:
    """unpin_blocks worked by hand: released blocks go to the tail even unhashed, and the reader is
    told (reused()) by the get_new_blocks that hands one out and by a reset, once each."""
    pool = block_pool(5)
    assert pool.allocate(1, 3) == (1, 2, 3)
    pool.unpin(1, (2, 1))
    assert pool.reused() == ()
    assert pool.snapshot()[0] == (4, 2, 1)  # free would have put the unhashed 2, 1 at the head
    assert pool.allocate(2, 2) == (4, 2)
    assert pool.reused() == (2,)
    assert pool.num_free() == 1 and pool.reused() == ()  # told for the last call only
    pool.free(2, (4, 2))  # unhashed, to the head in the order given: 4, 2, 1
    pool.free(1, (3,))  # 3, 4, 2, 1
    assert pool.reset() is True and pool.reused() == (1,)
    assert pool.allocate(3, 4) == (3, 4, 2, 1) and pool.reused() == ()  # each reader told once


def test_writable_asks_vllms_is_block_writable() -> None:
    """A block is writable in place while held once and unhashed; the null block never is."""
    pool = block_pool(5)
    assert pool.allocate(1, 3) == (1, 2, 3)
    pool.cache_blocks(1, (1,), (7,))
    pool.touch(2, (2,))
    assert pool.writable((0, 3, 2, 1, 3)) == (3,)


def test_cache_blocks_masks_the_null_blocks_of_a_window() -> None:
    """The contract's skip takes both of vLLM's forms: blocks that start with the null block (a
    sliding window's table) pass block_mask, False exactly at the null blocks; other blocks pass
    none, the null block alone marking the skip."""
    masks = []

    class MaskRecordingPool(BlockPool):
        def cache_full_blocks(self, *args, block_mask=None, **kwargs):
            masks.append(block_mask)
            super().cache_full_blocks(*args, block_mask=block_mask, **kwargs)

    pool = block_pool(5, pool_class=MaskRecordingPool)
    assert pool.allocate(1, 2) == (1, 2)
    pool.cache_blocks(1, (0, 2, 0, 1), (5, 6, 7, 8))
    assert masks == [[False, True, False, True]]
    assert pool.lookup((6,)) == (2,) and pool.lookup((8,)) == (1,) and pool.lookup((5,)) == ()
    assert pool.allocate(1, 1) == (3,)
    pool.cache_blocks(1, (3, 0), (9, 10))
    assert masks[1] is None and pool.lookup((9,)) == (3,) and pool.lookup((10,)) == ()


def test_partial_entries_on_the_real_pool() -> None:
    """cache_partial_block and move_block_hashes at two hash units per block (`hash_block_size=2`,
    blocks of 4 tokens): a boundary inside a block, a further hash, a promotion, a copy."""
    pool = block_pool(5)
    assert pool.pool.hash_block_size == 2 and pool.block_size == 4
    assert pool.allocate(1, 3) == (1, 2, 3)
    pool.cache_partial(1, 1, (10, 11, 12))  # 3 units: inside block 1's place 2
    assert pool.events() == (((11, (12,), ()),), (), False) and pool.snapshot()[1][1] == (1, 12)
    pool.cache_blocks(1, (2,), (20,))
    pool.cache_partial(1, 2, (9,))  # 1 unit, fewer than block 2's 2: beside its hash
    assert pool.lookup((9,)) == (2,) and pool.snapshot()[1][2] == (1, 20)
    pool.cache_blocks(1, (3, 1), (30, 31))  # block 1 at place 2 covers 4 units: promoted
    assert pool.events() == (((None, (30, 31), ()),), (12,), False)
    assert pool.allocate(1, 1) == (4,)
    pool.move_hashes(1, 2, 4)
    assert pool.events() == ((), (), False)
    assert pool.snapshot()[1][2:] == ((1, None), (1, 30), (1, 20)) and pool.lookup((9,)) == (4,)
    pool.free(1, (4,))
    assert pool.evict((4,)) == (4,) and pool.events() == ((), (9, 20), False)
