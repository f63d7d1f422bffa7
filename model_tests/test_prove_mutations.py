"""A few one-token edits of spec/ from tools/prove_mutations.py, applied in-process: each breaks an
invariant on a random walk of the concrete spec, and the prover fails on it, by a proof
obligation (an edit of spec/cache/steps.py, which the per-entry model runs) or by the refinement check
(an edit of `CacheSpec` itself). The full run over every edit is `python tools/prove_mutations.py`
(docs/proofs.md has its numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cacheproof.spec
from cacheproof.prove.cache import entry_model, refinement
from cacheproof.spec.cache import steps
from tools import prove_mutations
from tools.prove_mutations import Mutation, load_module, mutations_of, patch_module, random_walks, restore

ROOT = Path(__file__).resolve().parent.parent
SMALL = refinement.Bound(max_capacity=2, max_entries=2)


def _edit(path: str, code: str, old: str, new: str) -> Mutation:
    """The tool's edit of `old` to `new` on the line of `path` that reads `code`."""
    found = [m for m in mutations_of(path, (ROOT / path).read_text()) if m.code == code and (m.old, m.new) == (old, new)]
    assert len(found) == 1, (path, code, old, new, found)
    return found[0]


def _mutant(mutation: Mutation, name: str):
    source = (ROOT / mutation.path).read_text()
    return load_module(name, mutation.apply(source), f"mutant of {mutation.path}")


def _walk_breaks() -> set[str]:
    return set(random_walks(walks=150, calls=30)["broken"]) & {"I1", "I2", "I3", "I4"}


STEP_EDITS = {
    "acquire adds -1": (("spec/cache/steps.py", "return refcount + 1", "+", "-"), "I3"),
    "a release keeps an entry at refcount 0": (("spec/cache/steps.py", "return refcount > 0", ">", ">="), "I4"),
}


@pytest.mark.parametrize("name", sorted(STEP_EDITS))
def test_a_step_edit_breaks_the_spec_and_fails_a_proof(name):
    (path, code, old, new), invariant = STEP_EDITS[name]
    replaced = patch_module(steps, _mutant(_edit(path, code, old, new), "cacheproof.spec.steps_mutant"))
    try:
        assert invariant in _walk_breaks()
        failed = {(r.invariant, r.operation) for r in entry_model.prove(3) if not r.proved}
    finally:
        restore(steps, replaced)
    assert any(name == invariant for name, _ in failed), failed
    assert not _walk_breaks()  # restored


SPEC_EDITS = {
    "acquire pins an idle entry when it does not fit": (
        "spec/cache/model.py", "if not rules.reservation_fits(self._bytes, nbytes):", "not ", "", 0, "I1"
    ),
    "release drops the wrong byte class": ("spec/cache/model.py", "elif entry.state is RESERVED:", "is", "is not", 0, "I2"),
}


@pytest.mark.parametrize("name", sorted(SPEC_EDITS))
def test_a_spec_edit_breaks_the_spec_and_fails_the_refinement_check(name, monkeypatch):
    path, code, old, new, occurrence, invariant = SPEC_EDITS[name]
    candidates = [m for m in mutations_of(path, (ROOT / path).read_text()) if m.code == code and (m.old, m.new) == (old, new)]
    mutant = _mutant(candidates[occurrence], "cacheproof.spec.cache_spec_mutant").CacheSpec
    monkeypatch.setattr(cacheproof.spec, "CacheSpec", mutant)
    assert invariant in _walk_breaks()
    report = refinement.check_refinement(SMALL, spec_class=mutant)
    assert not report.agrees and report.disagreements
    for disagreement in report.disagreements:
        with pytest.raises(AssertionError):
            exec(disagreement.python(), {})


def test_the_tool_lists_one_token_edits_of_code_only():
    source = 'def f(a, b):\n    """a < b"""\n    x = -1\n    return a + b if a is not None and b <= 1 else "0 == 1"\n'
    edits = {(m.old, m.new) for m in mutations_of("f.py", source)}
    assert edits == {("+", "-"), ("is not", "is"), ("and", "or"), ("<=", "<"), ("1", "0")}
    assert all(m.apply(source) != source for m in mutations_of("f.py", source))
    assert prove_mutations.DEFAULT_FILES[0] == "spec/cache/model.py"
