"""spec/cache/steps.py: the per-entry steps, written once for the spec and the per-entry prover model.

The steps state the contract's per-entry rules (docs/contract.md): checked here on ints against
that text, on z3 terms against the ints, and shown to be what both `CacheSpec` and the prover run:
a wrong step changes the spec's behaviour and makes the proof fail.
"""

from __future__ import annotations

import itertools

import pytest
import z3
from cacheproof.spec import Acquired, CacheSpec, EntryState, EntryView
from cacheproof.spec.cache import rules, steps

from cacheproof.prove.cache import entry_model
from cacheproof.prove.induction import Z3_LOGIC

FLAGS = (False, True)
REFCOUNTS = (0, 1, 2, 3)


def test_the_steps_state_the_contract_on_ints():
    # A new reservation holds its producer's reference; a put entry is idle and retained.
    assert (steps.RESERVATION_REFCOUNT, steps.PUT_REFCOUNT, steps.PUT_RETAIN) == (1, 0, True)
    assert [steps.acquired(r) for r in REFCOUNTS] == [1, 2, 3, 4]
    assert [steps.released(r) for r in REFCOUNTS] == [-1, 0, 1, 2]
    assert [steps.is_referenced(r) for r in REFCOUNTS] == [False, True, True, True]
    # Idle: READY with no reference; a RESERVED entry is never idle.
    assert [(ready, r) for ready in FLAGS for r in REFCOUNTS if steps.is_idle(ready, r)] == [(True, 0)]
    # The last release removes a reservation (abandoned) and a transient entry, keeps a retained READY one.
    kept = [(ready, retain) for ready in FLAGS for retain in FLAGS if not steps.removed_at_last_release(ready, retain)]
    assert kept == [(True, True)]


def _z3_value(term) -> object:
    value = z3.simplify(term)
    return z3.is_true(value) if z3.is_bool(value) else value.as_long()


def test_the_steps_mean_the_same_on_z3_terms():
    for ready, retain, refcount in itertools.product(FLAGS, FLAGS, REFCOUNTS):
        r, b, t = z3.IntVal(refcount), z3.BoolVal(ready), z3.BoolVal(retain)
        assert _z3_value(steps.acquired(r)) == steps.acquired(refcount)
        assert _z3_value(steps.released(r)) == steps.released(refcount)
        assert _z3_value(steps.is_referenced(r)) == steps.is_referenced(refcount)
        assert _z3_value(steps.is_idle(b, r, Z3_LOGIC)) == steps.is_idle(ready, refcount)
        assert _z3_value(steps.removed_at_last_release(b, t, Z3_LOGIC)) == steps.removed_at_last_release(ready, retain)


def _proof_failures(slots: int = 3) -> set[tuple[str, str]]:
    return {(r.invariant, r.operation) for r in entry_model.prove(slots) if not r.proved}


def test_a_wrong_refcount_step_changes_the_spec_and_fails_the_proof(monkeypatch):
    """The issue's first example: acquire adding -1 instead of +1, now one edit in one place."""
    monkeypatch.setattr(steps, "acquired", lambda refcount: refcount - 1)
    cache = CacheSpec(4)
    assert cache.acquire("k", 1) is Acquired.NEW_RESERVATION
    assert cache.acquire("k", 1) is Acquired.RESERVATION_HIT
    assert cache.snapshot() == (EntryView("k", EntryState.RESERVED, 0, 1, True),)  # I3 broken
    assert ("I3", "acquire") in _proof_failures()


def test_a_wrong_last_reference_test_changes_the_spec_and_fails_the_proof(monkeypatch):
    """The issue's second example: `refcount > 0` weakened to `>= 0` keeps a transient entry at 0."""
    monkeypatch.setattr(steps, "is_referenced", lambda refcount: refcount >= 0)
    cache = CacheSpec(4)
    cache.acquire("k", 1, retain=False)
    cache.commit("k", b"x")
    assert cache.release("k") is False
    assert cache.snapshot() == (EntryView("k", EntryState.READY, 0, 1, False),)  # I4 broken
    assert {("I3", "release"), ("I4", "release")} <= _proof_failures()


@pytest.mark.parametrize("keeps", ["reservation", "transient"])
def test_a_wrong_removal_step_fails_the_proof(monkeypatch, keeps):
    real = steps.removed_at_last_release
    wrong = {
        "reservation": lambda ready, retain, logic=rules.CONCRETE: logic.all_of(ready, logic.negate(retain)),
        "transient": lambda ready, retain, logic=rules.CONCRETE: logic.negate(ready),
    }[keeps]
    assert any(real(r, t) != wrong(r, t) for r in FLAGS for t in FLAGS)
    monkeypatch.setattr(steps, "removed_at_last_release", wrong)
    broken = "I3" if keeps == "reservation" else "I4"
    assert (broken, "release") in _proof_failures()
