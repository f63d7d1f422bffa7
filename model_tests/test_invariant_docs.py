"""docs/invariants.md is generated from the invariant table and the proofs, and is current."""

from __future__ import annotations

from pathlib import Path

from cacheproof.docs import invariants as invariant_docs
from cacheproof.spec.cache.invariants import INVARIANTS

DOC = Path(__file__).resolve().parent.parent / "docs" / "invariants.md"


def test_committed_file_is_current():
    assert DOC.read_text() == invariant_docs.render(), "run `cacheproof docs` and commit docs/invariants.md"


def test_every_invariant_is_rendered_with_its_predicate_and_status():
    text = invariant_docs.render()
    for invariant in INVARIANTS:
        assert f"## {invariant.name}\n" in text
        assert f"def {invariant.holds.__name__}(" in text
        assert invariant.rule in text
    assert "counterexample" not in text.split("## Supporting obligations")[0].split("## I1")[1]
