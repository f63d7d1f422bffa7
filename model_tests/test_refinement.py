"""The bounded refinement check (cacheproof/prove/cache/refinement.py): the spec as written refines the
per-entry model on every small state; the bounded states are exactly the I1-I4 states; the numpy
evaluation of the model's terms is z3's; and a spec that departs from the model is reported with
a snippet that fails when run."""

from __future__ import annotations

import itertools
import json
import random
import sys
import types
from pathlib import Path

import cacheproof.spec
import numpy as np
import pytest
from cacheproof.spec import CacheSpec, EntryState, EntryView
from cacheproof.spec.cache.invariants import Step, broken_invariants
from cacheproof.prove.command import modelled
from cacheproof.spec.cache.profiles import PROFILES
from cacheproof.spec.cache.semantics import Semantics

from cacheproof.prove.cache import refinement
from cacheproof.prove.cache.array_eval import z3_value

SMALL = refinement.Bound(max_capacity=2, max_entries=2)


@pytest.fixture(scope="module")
def default_report() -> refinement.RefinementReport:
    return refinement.check_refinement()


def test_the_spec_refines_the_model_on_the_default_bound(default_report):
    assert default_report.agrees, [d.describe() for d in default_report.disagreements]
    assert default_report.disagreements == ()
    assert default_report.states > 500 and default_report.calls > 50 * default_report.states
    line = default_report.line()
    assert line.startswith(f"spec refines model: {default_report.states} states, {default_report.calls} calls, agree (")


def _all_small_states(capacity: int, max_entries: int) -> set[tuple[EntryView, ...]]:
    """Every sequence of entries with keys a, b, ... (any state, refcount 0..2, nbytes 1..capacity)
    that breaks none of I1-I4, judged by spec/cache/invariants.py."""
    fields = list(itertools.product(EntryState, range(3), range(1, capacity + 1), (True, False)))
    found = set()
    for count in range(max_entries + 1):
        for chosen in itertools.product(fields, repeat=count):
            entries = tuple(EntryView("ab"[i], *f) for i, f in enumerate(chosen))
            step = Step(None, capacity, entries, entries, False)
            if not [i for i in broken_invariants(step) if i.name in ("I1", "I2", "I3", "I4")]:
                found.add(entries)
    return found


def test_the_bounded_states_are_exactly_the_states_that_keep_the_invariants():
    by_capacity: dict[int, set] = {}
    for capacity, entries in refinement.bounded_states(SMALL):
        by_capacity.setdefault(capacity, set()).add(entries)
    assert sorted(by_capacity) == [1, 2]
    for capacity, states in by_capacity.items():
        assert states == _all_small_states(capacity, 2)


def test_three_entry_states_keep_refcounts_of_at_most_one():
    states = [entries for _, entries in refinement.bounded_states(refinement.Bound(2, 3))]
    assert any(len(entries) == 3 for entries in states)
    assert any(e.refcount == 2 for entries in states for e in entries)
    assert all(e.refcount <= 1 for entries in states if len(entries) == 3 for e in entries)


def test_the_array_evaluation_is_z3s_evaluation():
    """The compiled numpy programs give z3's own values, on random rows of every operation."""
    model = refinement._Model(SMALL.max_entries + 1)
    states = list(refinement.bounded_states(SMALL))
    rng = random.Random(1)
    names = model.columns()
    for operation in refinement.entry_model.OPERATIONS:
        for _ in range(4):
            capacity, entries = rng.choice(states)
            call = rng.choice([c for c in refinement.bounded_calls(capacity, entries) if c.op == operation])
            key = call.args[0] if operation not in ("evict", "clear") else None
            lay = refinement.layout(capacity, entries, key, model.num_slots)
            assignment = dict(zip(names, [*lay.pre, *refinement._parameters(call)]))
            for outcomes, program in model.programs(operation):
                frontier = rng.choice(model.frontiers) if outcomes[0].exact else None
                values = {**assignment, model.frontier.decl().name(): frontier}
                arrays = {name: np.array([value]) for name, value in values.items() if value is not None}
                outputs = program(arrays)
                terms = [t for o in outcomes for t in [model.guard(o), *refinement._after_terms(model, o)]]
                assert len(outputs) == len(terms)
                for term, output in zip(terms, outputs):
                    assert int(np.asarray(output).ravel()[0]) == int(z3_value(term, values)), (operation, str(term)[:200])


def _mutant_spec(old: str, new: str) -> type:
    """`CacheSpec` from spec/cache/model.py with one edit, as a class of its own module."""
    source = Path(cacheproof.spec.cache.model.__file__).read_text()
    assert source.count(old) == 1, old
    module = types.ModuleType("cacheproof.spec.cache_spec_mutant")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(source.replace(old, new), "cache_spec_mutant.py", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.CacheSpec


MUTANTS = {
    "commit accepts only values of another size": (
        "        if size != entry.nbytes and self.semantics", "        if size == entry.nbytes and self.semantics"
    ),
    "acquire names the hit kind backwards": (
        "Acquired.RESERVATION_HIT if entry.state is RESERVED", "Acquired.RESERVATION_HIT if entry.state is not RESERVED"
    ),
    "eviction stops before it makes room": (
        "if rules.has_room(rules.after_evict(self._bytes, evicted_bytes), incoming):",
        "if not rules.has_room(rules.after_evict(self._bytes, evicted_bytes), incoming):",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_spec_edit_is_a_disagreement_with_a_snippet_that_fails(name, monkeypatch):
    mutant = _mutant_spec(*MUTANTS[name])
    report = refinement.check_refinement(SMALL, spec_class=mutant)
    assert not report.agrees and report.disagreements
    assert "DISAGREE on" in report.line()
    monkeypatch.setattr(cacheproof.spec, "CacheSpec", mutant)
    for disagreement in report.disagreements:
        with pytest.raises(AssertionError, match="spec .* != model"):
            exec(disagreement.python(), {})
    monkeypatch.setattr(cacheproof.spec, "CacheSpec", CacheSpec)
    for disagreement in report.disagreements:
        exec(disagreement.python(), {})  # the real spec does what the model says


def test_prove_exits_1_and_writes_the_disagreement(monkeypatch, tmp_path, capsys):
    from cacheproof.cli import main

    mutant = _mutant_spec(*MUTANTS["commit accepts only values of another size"])
    monkeypatch.setattr(refinement, "CacheSpec", mutant)
    report = tmp_path / "prove.json"
    arguments = ["prove", "--slots", "2", "--refine-capacity", "2", "--refine-entries", "1", "--json", str(report)]
    assert main(arguments) == 1
    out = capsys.readouterr().out
    assert "# spec and model disagree: " in out and "spec refines model: " in out and "DISAGREE" in out
    data = json.loads(report.read_text())
    refined = data["targets"][0]["refinement"]
    assert data["ok"] is False and refined["agrees"] is False
    assert refined["disagreements"][0]["python"].startswith("# The spec and the per-entry model part")


@pytest.mark.parametrize("flags", [["--refine-capacity", "0"], ["--refine-entries", "-1"], ["--refine-capacity", "x"]])
def test_prove_refuses_a_bound_out_of_range(flags, capsys):
    from cacheproof.cli import main

    assert main(["prove", *flags]) == 2
    assert f"argument {flags[0]}: must be an integer >= " in capsys.readouterr().err


# Under every semantics --------------------------------------------------------------------------

SEMANTIC_MUTANTS = {  # (old, new, the profile whose option the edit changes)
    "get refreshes where it should not": (
        'if self.semantics.refreshes("get"):',
        'if not self.semantics.refreshes("get"):',
        "vllm-encoder-cache",
    ),
    "commit evicts although the reservation made room": (
        "evicted, evicted_bytes = [], 0  # the reservation made the room already",
        "evicted, evicted_bytes = self._evict_until_room(entry.nbytes)",
        "vllm-encoder-cache",
    ),
    "clear of a busy cache raises where it drops": (
        'if busy and self.semantics.clear_busy == "error":',
        'if busy and self.semantics.clear_busy in ("error", "drop"):',
        "vllm-encoder-cache",
    ),
    "put replaces a present entry in place": (
        "if present is None:",
        "if True:",
        "plain-lru",
    ),
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_spec_refines_the_model_under_every_profile(profile):
    """Under the profile's modelled semantics (`prove.modelled`: the z3 model lacks two fields)."""
    report = refinement.check_refinement(SMALL, semantics=modelled(profile, PROFILES[profile].semantics).semantics)
    assert report.agrees, [d.describe() for d in report.disagreements]
    assert report.states > 20 and report.calls > 20 * report.states


@pytest.mark.parametrize("name", sorted(SEMANTIC_MUTANTS))
def test_a_spec_edit_in_an_option_branch_is_a_disagreement_under_that_option(name, monkeypatch):
    old, new, profile = SEMANTIC_MUTANTS[name]
    semantics = PROFILES[profile].semantics
    mutant = _mutant_spec(old, new)
    changes_the_contract = name == "get refreshes where it should not"  # the others edit a branch the contract never takes
    assert refinement.check_refinement(SMALL, spec_class=mutant).agrees is not changes_the_contract
    report = refinement.check_refinement(SMALL, spec_class=mutant, semantics=semantics)
    assert not report.agrees and report.disagreements
    monkeypatch.setattr(cacheproof.spec, "CacheSpec", mutant)
    for disagreement in report.disagreements:
        assert disagreement.semantics == semantics and "semantics=Semantics(" in disagreement.python()
        with pytest.raises(AssertionError, match="spec .* != model"):
            exec(disagreement.python(), {})
    monkeypatch.setattr(cacheproof.spec, "CacheSpec", CacheSpec)
    for disagreement in report.disagreements:
        exec(disagreement.python(), {})


def test_trusted_arguments_leave_out_the_calls_a_caller_may_not_make():
    checked = [repr(call) for call in refinement.bounded_calls(2, ())]
    trusted = [repr(call) for call in refinement.bounded_calls(2, (), Semantics(argument_checks="trusted"))]
    assert set(trusted) < set(checked)
    left_out = [call for call in refinement.bounded_calls(2, ()) if repr(call) not in set(trusted)]
    assert left_out and all(_size_of(call) < (0 if call.op == "evict" else 1) for call in left_out)


def _size_of(call) -> int:
    if call.op == "evict":
        return call.args[0]
    size = call.args[1]
    return size if isinstance(size, int) else size.nbytes
