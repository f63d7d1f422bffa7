"""The z3 proofs of the block-id transform and of seed 000's copy against the identity gather:
every claim is proved, the counterexamples are the expected ones and their snippets run and show
the difference, and the checker can fail."""

from __future__ import annotations

import subprocess
import sys

import z3

from cacheproof.prove import block_ids as prove_blocks


def test_every_block_transform_claim_is_proved():
    results = prove_blocks.prove_block_transform(timeout_s=60)
    assert len(results) == 8
    for result in results:
        assert result.proved, f"{result.name}: {result.detail}"
        assert result.seconds >= 0


def test_seed_000_copy_equals_the_gather_exactly_in_range():
    results = prove_blocks.prove_copy_vs_gather(timeout_s=60)
    assert len(results) == 3
    for result in results:
        assert result.proved, f"{result.name}: {result.detail}"


def test_seed_000_counterexamples_are_concrete_and_their_snippets_run():
    found = prove_blocks.seed_000_counterexamples(timeout_s=60)
    assert [(e.num_blocks, e.block_id, e.before, e.after) for e in found] == [(2, 2, "IndexError", 2), (2, -1, "1", -1)]
    for example in found:
        run = subprocess.run([sys.executable, "-c", example.snippet], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        if example.before == "IndexError":
            assert lines[0].startswith("before seed 000: IndexError: index 2 is out of bounds")
        else:
            assert lines[0] == f"before seed 000: [{example.before}]"
        assert lines[1] == f"after seed 000:  [{example.after}]"
        rejected = f"cacheproof:      InvalidArgumentError: block_ids[0] (dst row 0) holds block id {example.block_id}"
        assert lines[2].startswith(rejected)
        assert "outside [0, 2)" in lines[2]


def test_the_gather_model_is_torch_indexing():
    # The model's gather, evaluated on concrete values, against torch itself.
    import torch

    for num_blocks in (1, 2, 5):
        base = torch.arange(num_blocks, dtype=torch.int32)
        for block_id in range(-num_blocks - 2, num_blocks + 2):
            model = prove_blocks._CopyModel(z3.BitVecVal(block_id, 32), z3.BitVecVal(num_blocks, 64))
            modelled = prove_blocks._outcome_text(z3.simplify(model.gather()))
            try:
                actual = str(base[torch.tensor([block_id], dtype=torch.int32)].item())
            except IndexError:
                actual = "IndexError"
            assert modelled == actual, (num_blocks, block_id)


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
