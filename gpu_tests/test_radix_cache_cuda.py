"""The torch radix cache with its KV storage on CUDA: held to the radix contract by the checker,
page size 1 and paged, and its nodes' tokens read back from device memory."""

from __future__ import annotations

import pytest
import torch

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.impl.radix_cache import TorchRadixCache
from cacheproof.spec.kinds import get_kind

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("profile, page_size", [("contract", 1), ("paged", 2)])
def test_the_radix_cache_on_cuda_conforms_to_the_radix_contract(profile, page_size):
    kind = get_kind("radix")
    chosen = kind.profiles[profile]
    report = run_program_check(kind, lambda n: TorchRadixCache(n, page_size, device="cuda"), generator_for("radix"),
                               examples=150, seed=0, semantics=chosen.semantics, operations=chosen.operations)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.steps > 150


def test_tokens_written_on_cuda_read_back_from_device_memory():
    cache = TorchRadixCache(8, device="cuda")
    assert cache.insert((5, 6, 7)) == 0
    assert cache.kv.device.type == "cuda"
    [(_, key, slots, stored, _, _, _)] = cache.snapshot()[2]
    assert key == (5, 6, 7) and stored == (5, 6, 7) and len(slots) == 3
