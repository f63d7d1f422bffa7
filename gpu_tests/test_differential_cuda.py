"""The differential check (`cache_test_case`: the program checker of every kind) against
TensorLRUCache on CUDA (stream-aware), and the tensor cache's check with its default factory, which
picks CUDA when it is there."""

from __future__ import annotations

import unittest

import torch

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.impl import TensorLRUCache
from cacheproof.spec.kinds import get_kind
from cacheproof.testing import cache_test_case

_NEEDS_CUDA = unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")


def _cuda_cache(capacity_bytes: int) -> TensorLRUCache:
    return TensorLRUCache(capacity_bytes, device="cuda", stream_aware=True)


TestTensorLRUCacheOnCuda = _NEEDS_CUDA(cache_test_case(_cuda_cache, name="TensorLRUCacheOnCuda"))


@_NEEDS_CUDA
class TestDefaultCheckOnCuda(unittest.TestCase):
    def test_default_factory_lands_on_cuda_and_conforms(self) -> None:
        self.assertEqual(TensorLRUCache(8).device.type, "cuda")
        report = run_program_check(get_kind("cache"), TensorLRUCache, generator_for("cache"), examples=100)
        self.assertTrue(report.ok, report.counterexample)


@_NEEDS_CUDA
class TestConcurrentCheckOnCuda(unittest.TestCase):
    """Linearizability of the bookkeeping when commit/put copy device tensors outside the lock
    (stream ordering itself is checked by test_tensor_lru_cache_cuda.py)."""

    def test_stream_aware_cache_is_linearizable_under_four_threads(self) -> None:
        from cacheproof.check.concurrent.run import run_concurrent_check
        from cacheproof.spec.kinds import get_kind

        report = run_concurrent_check(get_kind("cache"), _cuda_cache, threads=4, scenarios=50)
        self.assertTrue(report.ok, None if report.counterexample is None else report.counterexample.reason)
