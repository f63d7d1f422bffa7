"""The block pool's prover (cacheproof/prove/blocks, docs/block-proofs.md): every obligation is
proved, a broken model gives runnable counterexamples, the refinement check ties the model to
BlockPoolSpec, and `cacheproof prove --spec blocks` exits 0."""

from __future__ import annotations

import json

import pytest
import z3

from cacheproof import cli
from cacheproof.prove.blocks import counterexample, generic, proofs, refinement, transitions
from cacheproof.prove.blocks.state import symbolic_state
from cacheproof.spec.blocks.operations import POOL_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BLOCK_PROFILES

VLLM = BLOCK_PROFILES["vllm-block-pool"].semantics


def _unproved(results):
    return [(r.model, r.invariant, r.operation, r.outcome) for r in results if not r.proved]


def test_every_obligation_is_proved_at_the_default_size():
    results = proofs.prove(proofs.DEFAULT_BLOCKS)
    assert _unproved(results) == []
    proved = {(r.invariant, r.operation) for r in results}
    for operation in transitions.OPERATIONS:
        for name in ("WF", "Q", "B1", "B2", "B3", "B4", "B7"):
            assert (name, operation) in proved
    assert ("B6", "lookup") in proved and ("B8", "free") in proved and ("B8", "allocate") in proved
    assert ("B8", "unpin") in proved and ("B8", "writable") in proved


def test_the_model_has_every_pool_level_operation_of_the_spec():
    for operation in POOL_OPERATIONS:
        shape = transitions.shapes(operation, 1)[-1]
        found = transitions.outcomes(operation, shape, symbolic_state(3), transitions.symbolic_parameters(*shape), VLLM)
        assert any(o.error is None for o in found), operation
    assert transitions.LIST_OPERATIONS == ("touch", "free", "unpin", "writable", "evict")
    assert transitions.TAKES_REQUEST == ("allocate", "touch", "cache_blocks", "free", "unpin")
    outcomes = {
        o.name for shape in transitions.shapes("unpin", 1)
        for o in transitions.outcomes("unpin", shape, symbolic_state(3), transitions.symbolic_parameters(*shape), VLLM)
    }
    assert outcomes == {"InvalidArgumentError/block", "InvalidArgumentError/null block", "WrongStateError/double free", "None"}


def test_the_generic_block_proofs_and_the_simulation_hold():
    results = generic.prove() + generic.simulation(4)
    assert _unproved(results) == []
    assert {r.invariant for r in results} == {"WF", "Q", "B2", "B3", "B7", "SIM"}


def test_the_vllm_profile_is_proved_too():
    results = proofs.prove(4, VLLM, max_list=1) + generic.prove(VLLM) + generic.simulation(4, VLLM, max_list=1)
    assert _unproved(results) == []


def _run_snippet(source: str) -> None:
    exec(compile(source, "<counterexample>", "exec"), {})


def test_a_free_without_the_holdings_check_has_counterexamples_that_fail_when_run(monkeypatch):
    monkeypatch.setattr(transitions, "double_free", lambda state, p, named: z3.BoolVal(False))
    results = proofs.prove(4, operations=("free",), max_list=1)
    failed = [r for r in results if not r.proved]
    assert {r.invariant for r in failed} >= {"B3", "WF"}
    for r in failed:
        found = r.counterexample
        assert found.setup is not None and found.built_by in (counterexample.BUILT_BY_SEARCH, counterexample.BUILT_DIRECTLY)
        assert found.call[0] == "free"
        source = found.python()
        assert "BlockPoolSpec(4)" in source
        with pytest.raises(AssertionError):
            _run_snippet(source)
    # the generic model with the same bug: B3 fails for some block
    monkeypatch.setattr(generic, "steps", _generic_free_unchecked(generic.steps))
    assert ("B3", "free") in {(r.invariant, r.operation) for r in generic.prove(operations=("free",)) if not r.proved}


def test_an_unpin_without_the_holdings_check_has_counterexamples_that_fail_when_run(monkeypatch):
    monkeypatch.setattr(transitions, "double_free", lambda state, p, named: z3.BoolVal(False))
    failed = [r for r in proofs.prove(3, operations=("unpin",), max_list=1) if not r.proved]
    assert {r.invariant for r in failed} >= {"B3", "WF"}
    for r in failed:
        assert r.counterexample.setup is not None and r.counterexample.call[0] == "unpin"
        with pytest.raises(AssertionError):
            _run_snippet(r.counterexample.python())


def _generic_free_unchecked(steps):
    def patched(operation, g, c, semantics=None):
        if operation != "free":
            return steps(operation, g, c)
        n = c.named
        after = g._replace(ref=g.ref - n, queued=z3.Or(g.queued, z3.And(n > 0, g.ref - n == 0)), caller=g.caller - n)
        return [("None", z3.And(n >= 0, z3.Implies(g.null, n == 0)), after)]

    return patched


def test_a_counterexample_is_also_a_spec_bug_when_the_spec_has_it(monkeypatch):
    """The same counterexample fails by its invariant assertion on a spec with the bug."""
    monkeypatch.setattr(transitions, "double_free", lambda state, p, named: z3.BoolVal(False))
    failed = [r for r in proofs.prove(3, operations=("free",), max_list=1) if not r.proved and r.invariant == "B3"]
    assert failed
    source = failed[0].counterexample.python()

    def free_unchecked(self, request, blocks):  # vLLM's free_blocks: no check of the holdings
        held = self._held.setdefault(request, [])
        for block in blocks:
            if block in held:
                held.remove(block)
            self._ref[block] -= 1
            if self._ref[block] == 0:
                self._queue.append(block)
        if not held:
            del self._held[request]

    monkeypatch.setattr(BlockPoolSpec, "free", free_unchecked)
    with pytest.raises(AssertionError, match="B3 broken"):
        _run_snippet(source)


def test_pre_states_are_reached_from_a_fresh_pool():
    pool = BlockPoolSpec(5)
    pool.allocate(0, 4)
    pool.cache_blocks(0, (2,), (7,))
    pool.cache_blocks(0, (4,), (7,))
    pool.touch(1, (4,))
    pool.free(0, (1, 2, 3))
    target = counterexample.spec_view(pool)
    calls, how = counterexample.reach(target, 5, pool.semantics, max_states=50)
    assert how == counterexample.BUILT_DIRECTLY  # too deep for a 50-state search
    rebuilt = BlockPoolSpec(5)
    for op, arguments in calls:
        getattr(rebuilt, op)(*arguments)
    assert counterexample.spec_view(rebuilt) == target
    small = BlockPoolSpec(3)
    small.allocate(1, 1)
    calls, how = counterexample.reach(counterexample.spec_view(small), 3, small.semantics)
    assert (calls, how) == ([("allocate", (1, 1))], counterexample.BUILT_BY_SEARCH)


SMALL = refinement.Bound(num_blocks=3, max_refs=2)


def test_the_spec_refines_the_model():
    report = refinement.check_refinement(SMALL)
    assert report.agrees, [d.python() for d in report.disagreements]
    assert report.states > 100 and report.calls > 10_000
    assert report.line().startswith(f"spec refines model: {report.states} states, {report.calls} calls, agree")
    assert refinement.check_refinement(SMALL, semantics=VLLM).agrees


def test_a_spec_freeing_hashed_blocks_to_the_head_disagrees(monkeypatch):
    def release_to_head(self, request, blocks, *, readable=False):
        freed = []
        held = self._held[request] if blocks else []
        for block in blocks:
            held.remove(block)
            self._ref[block] -= 1
            if self._ref[block] == 0:
                freed.append(block)
        if blocks and not held:
            del self._held[request]
        self._queue = freed + self._queue

    monkeypatch.setattr(BlockPoolSpec, "_release", release_to_head)
    report = refinement.check_refinement(SMALL)
    assert not report.agrees and "DISAGREE" in report.line()
    disagreement = report.disagreements[0]
    assert disagreement.call[0] == "free"
    with pytest.raises(AssertionError):
        _run_snippet(disagreement.python())


def test_the_command_exits_0_and_writes_json(tmp_path, capsys):
    out = tmp_path / "blocks.json"
    assert cli.main(["prove", "--spec", "blocks", "--quiet", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "obligations proved" in printed and "FAILED" not in printed
    assert "spec refines model:" in printed and ", agree (" in printed
    assert "proved      " not in printed  # --quiet: no per-obligation lines
    data = json.loads(out.read_text())
    assert data["ok"] and data["bound"]["blocks"] == proofs.DEFAULT_BLOCKS
    assert all(o["verdict"] == "proved" for o in data["targets"][0]["obligations"])
    assert data["targets"][0]["refinement"]["agrees"]


@pytest.mark.parametrize("check, wrong, semantics, operation", [
    ("joins_tail", lambda block, readable: block.hashed, None, "unpin"),  # unpinned unhashed blocks to the head
    ("unpin_null", lambda xs: z3.BoolVal(False), VLLM, "unpin"),  # unpin skips the null block under "skip"
    ("writable_block", lambda block: block.ref == 1, None, "writable"),  # a hashed block is writable
])
def test_a_wrong_model_of_unpin_or_writable_disagrees_with_the_spec(monkeypatch, check, wrong, semantics, operation):
    monkeypatch.setattr(transitions, check, wrong)
    report = refinement.check_refinement(SMALL, semantics=semantics or BLOCK_CONTRACT)
    assert not report.agrees
    assert {d.call[0] for d in report.disagreements} == {operation}
    for disagreement in report.disagreements:
        assert disagreement.expected is not None and disagreement.expected != disagreement.observed
        with pytest.raises(AssertionError, match="the model says"):
            _run_snippet(disagreement.python())


def test_a_spec_unpinning_unhashed_blocks_to_the_head_disagrees(monkeypatch):
    release = BlockPoolSpec._release
    monkeypatch.setattr(BlockPoolSpec, "_release", lambda self, request, blocks, readable=False: release(self, request, blocks))
    report = refinement.check_refinement(SMALL)
    assert {d.call[0] for d in report.disagreements} == {"unpin"}
    with pytest.raises(AssertionError):
        _run_snippet(report.disagreements[0].python())
