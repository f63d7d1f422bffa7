"""The differential state machine against TensorLRUCache on CUDA (stream-aware), and `cacheproof check`
with its default factory, which picks CUDA when it is there."""

from __future__ import annotations

import unittest

import torch

from cacheproof.check.run import run_check
from cacheproof.impl import TensorLRUCache
from cacheproof.check.machine import machine_for

_NEEDS_CUDA = unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")


def _cuda_cache(capacity_bytes: int) -> TensorLRUCache:
    return TensorLRUCache(capacity_bytes, device="cuda", stream_aware=True)


TestTensorLRUCacheOnCuda = _NEEDS_CUDA(machine_for(_cuda_cache).TestCase)


@_NEEDS_CUDA
class TestDefaultCheckOnCuda(unittest.TestCase):
    def test_default_factory_lands_on_cuda_and_conforms(self) -> None:
        self.assertEqual(TensorLRUCache(8).device.type, "cuda")
        report = run_check(TensorLRUCache, examples=100)
        self.assertTrue(report.ok, report.counterexample)
