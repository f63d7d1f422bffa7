"""Block-table paths on CUDA (native Triton, torch, numpy + upload) against the CPU reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cacheproof.impl import block_table as bt
from cacheproof.spec.errors import InvalidArgumentError

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA_PATHS = [bt.block_ids_numpy, bt.block_ids_torch, bt.block_ids_triton, bt.get_block_ids_per_seq]


def random_batch(rng: np.random.Generator, requests: int, max_blocks: int, high: int) -> list[np.ndarray]:
    batch = []
    for _ in range(requests):
        row = rng.integers(0, high, size=int(rng.integers(0, max_blocks + 1)), dtype=np.int64)
        row[rng.random(len(row)) < 0.05] = bt.BAD_PAGE_INDEX
        batch.append(row.astype(np.int32))
    return batch


@pytest.mark.parametrize("path", CUDA_PATHS)
@pytest.mark.parametrize(("scale", "divisor"), [(1, 1), (4, 1), (3, 7), (1, 61), (2**33, 2**33)])
@pytest.mark.parametrize(("requests", "max_blocks"), [(0, 0), (1, 0), (8, 64), (64, 2500)])
def test_cuda_paths_equal_the_reference(path, scale, divisor, requests, max_blocks):
    rng = np.random.default_rng(requests * 1000 + max_blocks + scale % 97 + divisor)
    batch = random_batch(rng, requests, max_blocks, high=2**31 // max(scale // divisor, 1) - 1)
    expected = bt.block_ids_reference(batch, scale=scale, divisor=divisor)
    got = path(batch, scale=scale, divisor=divisor, device="cuda")
    assert got.device.type == "cuda" and got.dtype == torch.int32
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("path", CUDA_PATHS)
def test_cuda_paths_reject_overflow_like_the_reference(path):
    batch = [np.array([2**31 - 1], dtype=np.int32)]
    with pytest.raises(OverflowError):
        path(batch, scale=2, device="cuda")


def test_copy_block_offsets_on_cuda_matches_the_reference():
    dst = torch.full((5, 6), 7, dtype=torch.int32, device="cuda")
    expected = dst.cpu()
    rows, ids = [4, 1, 2], [[1, 2, 3], [], np.arange(6)]
    bt.copy_block_offsets_reference(expected, rows, ids, num_blocks=6)
    bt.copy_block_offsets(dst, torch.tensor(rows), ids, num_blocks=6)
    assert torch.equal(dst.cpu(), expected)
    before = dst.clone()
    with pytest.raises(ValueError):
        bt.copy_block_offsets(dst, [0, 0], [[1], [2]], num_blocks=6)
    assert torch.equal(dst, before)


@pytest.mark.parametrize("bad_id", [6, -1, 2**31 - 1])
def test_copy_block_offsets_on_cuda_rejects_ids_outside_the_pool(bad_id):
    dst = torch.full((3, 4), 7, dtype=torch.int32, device="cuda")
    before = dst.clone()
    message = rf"block_ids\[1\] \(dst row 0\) holds block id {bad_id} at column 2"
    with pytest.raises(InvalidArgumentError, match=message):
        bt.copy_block_offsets(dst, [2, 0], [[0, 5], [1, 2, bad_id]], num_blocks=6)
    torch.cuda.synchronize()
    assert torch.equal(dst, before)
