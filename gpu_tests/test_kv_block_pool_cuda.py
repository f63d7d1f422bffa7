"""The torch KV block pool and its request-level manager with their storage on CUDA: held to the
block contract by the checker, token contents read back from device memory, and the block table
built by the kernel on the device from the pool's holdings."""

from __future__ import annotations

import pytest
import torch

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.impl.kv_block_pool import KVBlockPool
from cacheproof.impl.kv_cache_manager import KVCacheManager
from cacheproof.spec.kinds import get_kind

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_the_manager_on_cuda_conforms_to_the_block_contract():
    report = run_program_check(get_kind("blocks"), lambda n: KVCacheManager(n, device="cuda"), generator_for("blocks"),
                               examples=150, seed=0)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.steps > 150


def test_tokens_written_on_cuda_read_back_from_device_memory():
    manager = KVCacheManager(8, device="cuda")
    table = manager.allocate_slots(1, (5, 6, 7))
    assert manager.token_ids.device.type == "cuda"
    assert manager.token_ids[table[0]].tolist() == [5, 6]
    assert manager.token_ids[table[1]][0].item() == 7
    assert [tokens for _, _, tokens in manager.contents()] == [(5, 6), (7,)]


def test_the_block_table_kernel_on_cuda_equals_the_holdings():
    pool = KVBlockPool(16, 4, device="cuda")
    first = pool.allocate(1, 3)
    second = pool.allocate(2, 2)
    table = pool.block_table([1, 2], device="cuda")
    assert table.device.type == "cuda"
    assert table.cpu().tolist() == [list(first), list(second) + [0]]
    assert pool.kv.device.type == "cuda"
