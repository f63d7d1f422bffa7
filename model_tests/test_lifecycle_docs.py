"""docs/lifecycle.md is current: the committed file is exactly what the generator writes."""

from __future__ import annotations

from pathlib import Path

from cacheproof.docs.lifecycle import render
from cacheproof.spec.cache.transitions import TRANSITIONS

LIFECYCLE_MD = Path(__file__).resolve().parent.parent / "docs" / "lifecycle.md"


def test_committed_lifecycle_matches_the_generator() -> None:
    assert LIFECYCLE_MD.read_text() == render(), "docs/lifecycle.md is stale: run `cacheproof docs`"


def test_render_is_deterministic() -> None:
    assert render() == render()


def test_diagram_draws_every_non_error_edge_and_no_error_edge() -> None:
    text = render()
    diagram = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    edges = [line for line in diagram.splitlines() if " --> " in line and "[*]" not in line]
    assert len(edges) == sum(1 for t in TRANSITIONS if not t.is_error)
    assert "raises" not in diagram
    errors_section = text.split("## Errors", 1)[1]
    error_rows = [line for line in errors_section.splitlines() if line.startswith("| ") and "`" in line]
    assert len(error_rows) == sum(1 for t in TRANSITIONS if t.is_error)
