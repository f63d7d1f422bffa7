"""The z3 proofs of the block-id transform: every claim is proved, and the checker can fail."""

from __future__ import annotations

import z3

from cacheproof.prove import block_ids as prove_blocks


def test_every_block_transform_claim_is_proved():
    results = prove_blocks.prove_block_transform(timeout_s=60)
    assert len(results) == 8
    for result in results:
        assert result.proved, f"{result.name}: {result.detail}"
        assert result.seconds >= 0


def test_a_false_claim_gets_a_counterexample():
    # Without the clamp, BAD_PAGE_INDEX would become (-1 * scale) // divisor, not 0.
    page = z3.BitVec("page", 32)
    scale = z3.BitVec("scale", 64)
    unclamped = z3.SignExt(32, page) * scale
    result = prove_blocks._check(
        "unclamped BAD page maps to 0",
        [page == -1, z3.UGE(scale, 1), z3.ULE(scale, 2**62)],
        unclamped == 0,
        10_000,
    )
    assert not result.proved
    assert result.detail.startswith("counterexample")
