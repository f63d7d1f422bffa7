"""docs/block-pool-invariants.md is generated from the spec and current, and the computed lifecycle
has exactly the edges the block contract describes (docs/block-pool-contract.md, worked by hand)."""

from pathlib import Path

from cacheproof.docs import block_pool
from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS

DOC = Path(__file__).resolve().parent.parent / "docs" / "block-pool-invariants.md"

CONTRACT_EDGES = {
    ("FREE", "IN_USE"): {"allocate"},
    ("IN_USE", "CACHED_IN_USE"): {"cache_blocks"},
    ("IN_USE", "FREE"): {"free"},
    ("IN_USE", "IN_USE"): {"free", "touch"},
    ("CACHED_IN_USE", "CACHED_FREE"): {"free"},
    ("CACHED_IN_USE", "CACHED_IN_USE"): {"free", "touch"},
    ("CACHED_IN_USE", "IN_USE"): {"evict"},
    ("CACHED_FREE", "CACHED_IN_USE"): {"touch"},
    ("CACHED_FREE", "IN_USE"): {"allocate"},
    ("CACHED_FREE", "FREE"): {"evict", "reset"},
}


def test_the_committed_document_is_current():
    assert DOC.read_text() == block_pool.render(), "docs/block-pool-invariants.md is stale: run `cacheproof docs`"


def test_every_invariant_is_documented_with_the_bug_it_excludes():
    text = DOC.read_text()
    for invariant in BLOCK_INVARIANTS:
        assert f"| {invariant.name} | {invariant.rule} | {invariant.excludes} |" in text


def test_the_computed_lifecycle_is_the_contracts():
    assert block_pool.lifecycle_edges() == CONTRACT_EDGES


def test_a_free_block_never_becomes_cached_without_being_used():
    edges = block_pool.lifecycle_edges()
    assert ("FREE", "CACHED_FREE") not in edges and ("FREE", "CACHED_IN_USE") not in edges
