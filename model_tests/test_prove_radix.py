"""`cacheproof prove --spec radix`: the tree model's obligations are proved, a broken step of the
model is a counterexample, the refinement check runs the spec as written and finds a spec whose
split drops the lock, and the command's exit status and JSON report say so."""

from __future__ import annotations

import json

import z3

from cacheproof.cli import main
from cacheproof.prove.radix import model, proofs, refinement
from cacheproof.spec.radix.semantics import RADIX_PROFILES
from cacheproof.spec.radix.tree import RadixCacheSpec

SMALL = refinement.Bound(max_slots=2, max_states=8)


def test_every_obligation_is_proved_in_small_trees_and_the_aggregate() -> None:
    results = proofs.prove(3)
    assert [r for r in results if not r.proved] == []
    assert {r.model for r in results} == {"aggregate", "tree<=3"}
    assert {(r.invariant, r.operation) for r in results if r.model == "tree<=3"} == {
        (name, step) for name in ("W", "R1", "R2", "R3", "R6") for step in model.STEPS}


def counts_only(delta: int):
    """A lock step that changes the lock counts on the path and nothing else: no guard, no counter."""
    def step(s, t, p):
        on = [z3.And(s.alive[j], model.above(s, j, p.x)) for j in range(s.n)]
        return z3.And(*[z3.And(t.lock[j] == s.lock[j] + z3.If(on[j], delta, 0), t.alive[j] == s.alive[j],
                               t.parent[j] == s.parent[j], t.length[j] == s.length[j]) for j in range(s.n)],
                      t.free == s.free, t.evictable == s.evictable, t.protected == s.protected)
    return step


def test_a_lock_that_forgets_the_counters_breaks_r2(monkeypatch) -> None:
    monkeypatch.setitem(model.STEPS, "lock", counts_only(+1))
    broken = {(r.invariant, r.operation) for r in proofs.prove_bounded(3) if not r.proved}
    assert broken == {("R2", "lock")}


def test_an_unguarded_unlock_breaks_r1(monkeypatch) -> None:
    monkeypatch.setitem(model.STEPS, "unlock", counts_only(-1))
    failed = [r for r in proofs.prove_bounded(3) if not r.proved]
    assert {r.operation for r in failed} == {"unlock"} and "R1" in {r.invariant for r in failed}
    example = next(r for r in failed if r.invariant == "R1").counterexample.to_json()
    assert example["step"] == "unlock" and example["before"]["nodes"]


def test_the_spec_refines_the_model_under_every_profile() -> None:
    for profile in RADIX_PROFILES.values():
        report = refinement.check_refinement(SMALL, profile.semantics)
        assert report.agrees and report.calls > 100, (profile.name, report.line())


def test_a_spec_whose_split_drops_the_lock_disagrees(monkeypatch) -> None:
    split = RadixCacheSpec._split

    def split_dropping_the_lock(self, child, at):
        head = split(self, child, at)
        head.lock = 0
        return head

    monkeypatch.setattr(RadixCacheSpec, "_split", split_dropping_the_lock)
    report = refinement.check_refinement(refinement.Bound(max_slots=2, vocabulary=(0,), max_tokens=2, max_states=20))
    assert not report.agrees
    op, _, _ = report.disagreements[0].calls[-1]
    assert op in ("match_prefix", "insert", "lock") and "RadixCacheSpec(" in report.disagreements[0].python()


def test_the_command_exits_0_and_writes_its_report(tmp_path, capsys) -> None:
    out = tmp_path / "prove.json"
    assert main(["prove", "--spec", "radix", "--slots", "3", "--refine-capacity", "2", "--refine-entries", "6",
                 "--json", str(out)]) == 0
    body = json.loads(out.read_text())
    assert body["spec"] == "radix" and body["ok"] is True and body["bound"] == {"nodes": 3, "refine_slots": 2, "refine_states": 6}
    (target,) = body["targets"]
    assert target["refinement"]["agrees"] is True and len(target["obligations"]) == 36
    assert "spec refines model" in capsys.readouterr().out


def test_a_bad_slots_value_is_a_usage_error(capsys) -> None:
    assert main(["prove", "--spec", "radix", "--slots", "1"]) == 2
    assert "--slots 1: the radix model needs trees of >= 2 nodes" in capsys.readouterr().err
