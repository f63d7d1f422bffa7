"""KVCacheManager: hand-worked request-level outcomes, the tokens read back from the token tensor,
the meta device, and the program checker run in-process on it and on broken pools."""

from __future__ import annotations

import pytest
import torch

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.impl.kv_cache_manager import KVCacheManager, kv_cache_manager
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError
from cacheproof.spec.kinds import get_kind
from model_tests.block_pools import DoubleFreePool, ForwardFreeRequestPool, HeadFreePool, ListBlockPool

H1 = hash(((0, 1),))
H2 = hash((H1, (2, 0)))
H3 = hash((H2, (1, 2)))


def test_hand_worked_requests() -> None:
    m = KVCacheManager(6)
    assert m.allocate_slots(1, (0, 1, 2, 0, 1)) == (1, 2, 3)
    assert m.snapshot() == ((4, 5), ((0, None), (1, H1), (1, H2), (1, None), (0, None), (0, None)), ((1, (1, 2, 3)),))
    assert m.contents() == ((1, None, (0, 1)), (2, H1, (2, 0)), (3, H2, (1,)))
    assert m.find_cached_prefix((0, 1, 2, 0, 9)) == 4
    assert m.find_cached_prefix((0, 1, 2, 0)) == 2  # the last token is never a hit
    assert m.allocate_slots(1, (0, 1, 2, 0, 1, 2)) == (1, 2, 3)  # block 3 fills and is hashed
    assert m.snapshot()[1][3] == (1, H3)
    assert m.allocate_slots(2, (0, 1, 2, 0, 7)) == (1, 2, 4)  # hit on 1, 2; block 4 from the head
    assert m.tables() == ((1, (1, 2, 3)), (2, (1, 2, 4)))
    m.free_request(1)  # 3, 2, 1: only 3 reaches 0 (hashed: tail)
    assert m.snapshot()[0] == (5, 3)
    m.free_request(2)  # 4, 2, 1: 4 unhashed to the head, 2 and 1 hashed to the tail in that order
    assert m.snapshot()[0] == (4, 5, 3, 2, 1)
    assert m.allocate(3, 3) == (4, 5, 3)  # lazy eviction of 3's hash; 4's and 3's tokens forgotten
    assert m.snapshot()[1][3] == (1, None)
    assert m.contents() == ((1, None, (0, 1)), (2, H1, (2, 0)))
    with pytest.raises(WrongStateError):
        m.free_request(2)
    with pytest.raises(WrongStateError):
        m.allocate_slots(3, (1,))  # request 3 holds pool-level blocks


def test_levels_stay_apart_and_written_blocks_are_hashed_here_only() -> None:
    m = KVCacheManager(6)
    assert m.allocate_slots(1, (0, 1, 5)) == (1, 2)
    with pytest.raises(InvalidArgumentError):
        m.allocate(1, -1)  # argument checks first
    with pytest.raises(WrongStateError):
        m.allocate(1, 1)
    with pytest.raises(WrongStateError):
        m.free(1, (1,))
    m.touch(3, (2,))  # block 2 is in use, written, unhashed
    with pytest.raises(WrongStateError):
        m.cache_blocks(3, (2,), (9,))
    with pytest.raises(WrongStateError):
        m.allocate_slots(1, (0, 2, 5, 5))  # does not extend (0, 1, 5)
    assert m.tables() == ((1, (1, 2)),)


def test_too_few_blocks_is_none_and_changes_nothing() -> None:
    m = KVCacheManager(3)
    before = (m.snapshot(), m.tables(), m.contents())
    assert m.allocate_slots(1, (0, 0, 0, 0, 0)) is None
    assert (m.snapshot(), m.tables(), m.contents()) == before
    assert m.allocate_slots(1, (0, 0, 0)) == (1, 2)
    assert m.allocate_slots(1, (0, 0, 0, 0, 0)) is None
    assert m.tables() == ((1, (1, 2)),)
    assert m.contents() == ((1, None, (0, 0)), (2, hash(((0, 0),)), (0,)))
    assert m.snapshot()[1][1] == (1, hash(((0, 0),)))


def test_tokens_live_in_the_tensor() -> None:
    m = KVCacheManager(5, kv_shape=(2, 1, 3), dtype=torch.float32)
    assert m.pool.kv.shape == (5, 2, 2, 1, 3) and m.token_ids.shape == (5, 2)
    m.allocate_slots(1, (7, 8, 9))
    assert m.token_ids[1].tolist() == [7, 8] and m.token_ids[2, 0].item() == 9
    m.token_ids[2, 0] = 4  # storage is what contents() reads
    assert m.contents()[1] == (2, hash(((7, 8),)), (4,))


def test_meta_device_reads_the_cpu_shadow() -> None:
    m = KVCacheManager(4, device="meta")
    assert m.token_ids.device.type == "meta" and m.pool.kv.device.type == "meta"
    assert m.allocate_slots(1, (3, 4, 5)) == (1, 2)
    assert m.contents() == ((1, None, (3, 4)), (2, hash(((3, 4),)), (5,)))


def test_checker_finds_the_manager_conforming() -> None:
    report = run_program_check(get_kind("blocks"), kv_cache_manager, generator_for("blocks"), examples=40, seed=3)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.steps > 200


@pytest.mark.parametrize("pool", [DoubleFreePool, HeadFreePool, ForwardFreeRequestPool])
def test_checker_finds_broken_pools(pool: type[ListBlockPool]) -> None:
    report = run_program_check(get_kind("blocks"), pool, generator_for("blocks"), examples=150, seed=0)
    assert not report.ok
