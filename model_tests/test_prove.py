"""The z3 proofs: they pass, they fail on a weakened rule with a counterexample that is real on
the concrete spec (and that the Hypothesis checker also finds), and the symbolic transitions
agree with `CacheSpec` on thousands of random concrete states."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import z3

from cacheproof.prove.cache import aggregate_model
from cacheproof.prove.cache import entry_model
from cacheproof.prove import command as prove
from cacheproof.cli import main
from cacheproof.prove.cache.counterexample import FROM_OPERATIONS, breaks_invariant
from cacheproof.contract.calls import invoke
from cacheproof.sandbox.fault_search import SPEC_BROKEN
from cacheproof.spec import CacheSpec
from cacheproof.spec.cache import invariants, rules
from cacheproof.spec.cache.profiles import PROFILES
from cacheproof.spec.cache.semantics import OPTIONS, REFRESHING_CALLS, Semantics
from cacheproof.spec.errors import CacheError
from cacheproof.spec.cache.types import Acquired, EntryState
from model_tests.cache_checks import check_cache

SLOTS = 4


@pytest.fixture(scope="module")
def proved_results() -> list[prove.ProofResult]:
    return prove.prove_all(SLOTS)


def test_every_obligation_is_proved(proved_results):
    failed = [(r.model, r.invariant, r.operation, r.outcome) for r in proved_results if not r.proved]
    assert failed == []


def test_every_operation_and_invariant_is_covered(proved_results):
    covered = {(r.model, r.invariant, r.operation) for r in proved_results}
    for operation in entry_model.OPERATIONS:
        for name in ("WF", "I1", "I2", "I3", "I4", "I5", "I6"):
            assert ("entries", name, operation) in covered
        for name in ("I1", "I2", "I6"):
            assert ("aggregate", name, operation) in covered
    names = {r.invariant for r in proved_results if r.model == "liveness"}
    assert names == {"L1", "L2", "L3"}


def test_cli_prove_writes_json_and_exits_0(tmp_path, capsys):
    report = tmp_path / "prove.json"
    assert main(["prove", "--slots", "3", "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["bound"]["slots"] == 3
    assert all(o["verdict"] == "proved" and o["counterexample"] is None for o in data["targets"][0]["obligations"])
    assert "proved" in capsys.readouterr().out


# A weakened rule ------------------------------------------------------------------------------


def _reservation_fits_one_byte_over(b: rules.Bytes, nbytes: Any) -> Any:
    return rules.protected(b) + nbytes <= b.capacity + 1


def _has_room_one_byte_over(b: rules.Bytes, incoming: Any) -> Any:
    return rules.ready(b) + incoming <= b.capacity + 1


WEAKENINGS = {
    "reservation_fits": (
        _reservation_fits_one_byte_over,
        "I1",
        {("reserve", "True"), ("acquire", "NEW_RESERVATION"), ("acquire", "READY_HIT/idle")},
    ),
    "has_room": (_has_room_one_byte_over, "I2", {("commit", "evicted"), ("put", "True")}),
}


@pytest.fixture(params=sorted(WEAKENINGS))
def weakened(request, monkeypatch):
    """(rule name, its real function, the invariant it breaks, the (operation, outcome)s that break it)."""
    name = request.param
    real = getattr(rules, name)
    weaker, invariant, broken = WEAKENINGS[name]
    monkeypatch.setattr(rules, name, weaker)
    return name, real, invariant, broken


def test_weakened_rule_gives_counterexamples(weakened, tmp_path):
    _, _, invariant, expected = weakened
    results = prove.prove_all(SLOTS)
    broken = {(r.model, r.invariant, r.operation, r.outcome) for r in results if not r.proved}
    for model in ("aggregate", "entries"):
        assert {(model, invariant, operation, outcome) for operation, outcome in expected} <= broken
    assert {name for _, name, _, _ in broken} == {invariant}
    assert all(r.counterexample is not None for r in results if not r.proved)
    report = tmp_path / "prove.json"
    assert main(["prove", "--slots", "3", "--json", str(report)]) == 1
    data = json.loads(report.read_text())
    assert data["ok"] is False
    written = [o["counterexample"] for o in data["targets"][0]["obligations"] if o["verdict"] != "proved"]
    assert written and all(cx["calls"] and cx["python"] for cx in written)


def test_weakened_rule_counterexamples_break_the_concrete_spec(weakened):
    failed = [r for r in prove.prove_all(SLOTS) if not r.proved]
    assert failed
    for result in failed:
        counterexample = result.counterexample
        assert breaks_invariant(counterexample), counterexample.python()
        with pytest.raises(AssertionError, match=f"{result.invariant} broken"):
            exec(counterexample.python(), {})
    assert any(r.counterexample.built_by == FROM_OPERATIONS and r.counterexample.setup for r in failed)


def test_weakened_rule_counterexamples_hold_with_the_real_rule(weakened, monkeypatch):
    name, real, _, _ = weakened
    counterexamples = [r.counterexample for r in prove.prove_all(SLOTS) if not r.proved]
    monkeypatch.setattr(rules, name, real)
    assert counterexamples
    assert not any(breaks_invariant(counterexample) for counterexample in counterexamples)


def test_weakened_rule_is_found_by_the_hypothesis_checker(weakened):
    report = check_cache(CacheSpec, examples=300, seed=0)
    assert not report.ok
    example = report.counterexample
    assert example.calls and example.fault is not None and example.fault.kind == SPEC_BROKEN
    assert example.message.startswith("the spec broke its own invariant after ")
    assert "not of the implementation" in example.message
    spec = CacheSpec(example.size)
    with pytest.raises(invariants.InvariantViolation):  # the calls break the weakened spec itself, at the last
        for call in example.calls:
            try:
                invoke(spec, call)
            except CacheError:
                pass
            spec.check_invariants()
    assert call == example.calls[-1]


# The model and the spec agree ---------------------------------------------------------------

AGREEMENT_TRIALS = 2000
KEYS = ("a", "b", "c", "d")
AGREEMENT_SLOTS = len(KEYS) + 1


class _EntryTransitions:
    """The per-entry model's outcomes for every operation, built once over symbols."""

    def __init__(self) -> None:
        self.cache = entry_model.symbolic_cache("", AGREEMENT_SLOTS)
        self.parameters = entry_model.symbolic_parameters()
        self.frontier = z3.Int("eviction_frontier")
        self.outcomes = {
            op: [(o, z3.And(o.guard, o.exact()) if o.exact else o.guard) for o in entry_model.outcomes(op, self.cache, self.parameters)]
            for op in entry_model.OPERATIONS
        }


@pytest.fixture(scope="module")
def transitions() -> _EntryTransitions:
    return _EntryTransitions()


def _random_reachable_spec(rng: random.Random) -> CacheSpec:
    capacity = rng.choice([1, 2, 3, 4, 6, 8, 12])
    cache = CacheSpec(capacity)
    for _ in range(rng.randrange(12)):
        _random_call(rng, cache)
    return cache


def _random_call(rng: random.Random, cache: CacheSpec) -> tuple[str, tuple, dict, Any, str | None]:
    operation = rng.choice(entry_model.OPERATIONS)
    key = rng.choice(KEYS)
    nbytes = rng.randrange(-1, cache.capacity_bytes + 2)
    value_size = rng.randrange(0, cache.capacity_bytes + 2)
    if operation in ("reserve", "acquire"):
        args, kwargs = (key, nbytes), {"retain": rng.random() < 0.7}
    elif operation in ("commit", "put"):
        present = {e.key: e for e in cache.snapshot()}
        if operation == "commit" and key in present and rng.random() < 0.8:
            value_size = present[key].nbytes
        args, kwargs = (key, bytes(value_size)), {}
    elif operation == "evict":
        args, kwargs = (nbytes,), {}
    elif operation == "clear":
        args, kwargs = (), {}
    else:
        args, kwargs = (key,), {}
    try:
        return operation, args, kwargs, getattr(cache, operation)(*args, **kwargs), None
    except CacheError as error:
        return operation, args, kwargs, None, type(error).__name__


def _slot_values(t: _EntryTransitions, snapshot, capacity: int, key: Any) -> list[tuple[Any, Any]]:
    """Substitution pairs putting `snapshot` into the slots, the call's key (if present) in slot 0."""
    others = [e for e in snapshot if e.key != key]
    entries = {e.key: e for e in snapshot}
    order = {e.key: rank for rank, e in enumerate(snapshot)}
    absent_ranks = iter(range(len(snapshot), AGREEMENT_SLOTS))
    pairs = [(t.cache.capacity, z3.IntVal(capacity)), (t.cache.clock, z3.IntVal(AGREEMENT_SLOTS))]
    slot_entries = [entries.get(key)] + others
    slot_entries += [None] * (AGREEMENT_SLOTS - len(slot_entries))
    for slot, entry in zip(t.cache.slots, slot_entries):
        if entry is None:
            values = (False, False, 0, 0, True, next(absent_ranks))
        else:
            values = (True, entry.state is EntryState.READY, entry.nbytes, entry.refcount, entry.retain, order[entry.key])
        pairs += [(term, z3.BoolVal(v) if isinstance(v, bool) else z3.IntVal(v)) for term, v in zip(slot, values)]
    return pairs, slot_entries


def _evaluate(term: Any, pairs) -> Any:
    if not z3.is_expr(term):
        return term
    value = z3.simplify(z3.substitute(term, *pairs))
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    return value.as_long()


def _model_snapshot(after: entry_model.SlotCache, pairs, slot_entries, key) -> list[tuple]:
    present = []
    for slot, entry in zip(after.slots, slot_entries):
        if not _evaluate(slot.present, pairs):
            continue
        name = entry.key if entry is not None else key
        state = EntryState.READY if _evaluate(slot.ready, pairs) else EntryState.RESERVED
        fields = (name, state, _evaluate(slot.refcount, pairs), _evaluate(slot.nbytes, pairs), _evaluate(slot.retain, pairs))
        present.append((_evaluate(slot.rank, pairs), fields))
    return [fields for _, fields in sorted(present, key=lambda ranked: ranked[0])]


def test_entry_model_agrees_with_the_spec_on_random_states(transitions):
    rng = random.Random(4)
    for trial in range(AGREEMENT_TRIALS):
        cache = _random_reachable_spec(rng)
        before = cache.snapshot()
        operation, args, kwargs, result, error = _random_call(rng, cache)
        key = args[0] if operation not in ("evict", "clear") else None
        pairs, slot_entries = _slot_values(transitions, before, cache.capacity_bytes, key)
        size = args[1] if operation in ("reserve", "acquire") else len(args[1]) if operation in ("commit", "put") else args[0] if operation == "evict" else 0
        pairs += [(transitions.parameters.nbytes, z3.IntVal(size)), (transitions.parameters.retain, z3.BoolVal(kwargs.get("retain", True)))]
        frontiers = range(-1, AGREEMENT_SLOTS + 1)
        matches = []
        for outcome, guard in transitions.outcomes[operation]:
            for frontier in frontiers if outcome.exact else [None]:
                with_frontier = pairs + ([(transitions.frontier, z3.IntVal(frontier))] if frontier is not None else [])
                if _evaluate(guard, with_frontier):
                    matches.append((outcome, _model_snapshot(outcome.after, with_frontier, slot_entries, key)))
        context = f"trial {trial}: {before} {operation}{args} {kwargs} -> {error or result}"
        assert matches, context
        assert len({m[0].name for m in matches}) == 1, context
        outcome = matches[0][0]
        assert outcome.error == error, context
        if isinstance(result, Acquired):
            assert outcome.name.startswith(result.name), context
        for _, model_after in matches:
            assert model_after == [tuple(e) for e in cache.snapshot()], context


def test_aggregate_model_agrees_with_the_spec_on_random_states():
    b, p = aggregate_model.symbolic_bytes(), aggregate_model.symbolic_parameters()
    by_operation = {op: aggregate_model.outcomes(op, b, p) for op in aggregate_model.OPERATIONS}
    rng = random.Random(5)
    for trial in range(AGREEMENT_TRIALS):
        cache = _random_reachable_spec(rng)
        before, snapshot = cache.stats(), {e.key: e for e in cache.snapshot()}
        operation, args, kwargs, result, error = _random_call(rng, cache)
        after = cache.stats()
        evicted = [snapshot[k].nbytes for k in result] if operation in ("commit", "evict") and error is None else []
        if operation == "put" and result:
            evicted = [e.nbytes for k, e in snapshot.items() if k not in {x.key for x in cache.snapshot()}]
        key_entry = snapshot.get(args[0]) if args and operation not in ("evict",) else None
        size = (
            args[1] if operation in ("reserve", "acquire")
            else len(args[1]) if operation in ("commit", "put")
            else args[0] if operation == "evict"
            else key_entry.nbytes if key_entry is not None else 0
        )
        values = [
            (b.capacity, before.capacity_bytes), (b.reserved, before.reserved_bytes),
            (b.pinned, before.pinned_bytes), (b.idle, before.idle_bytes),
            (p.nbytes, size), (p.evicted, sum(evicted)), (p.last, evicted[-1] if evicted else 0),
        ]
        pairs = [(term, z3.IntVal(v)) for term, v in values]
        pairs.append((p.retain, z3.BoolVal(kwargs.get("retain", key_entry.retain if key_entry else True))))
        expected = (after.capacity_bytes, after.reserved_bytes, after.pinned_bytes, after.idle_bytes)
        context = f"trial {trial}: {before} {operation}{args} -> {error or result}; evicted {evicted}"
        candidates = [
            o for o in by_operation[operation] if o.error == error and _evaluate(o.guard, pairs)
        ]
        assert candidates, context
        assert any(tuple(_evaluate(x, pairs) for x in o.after) == expected for o in candidates), context


# Under every semantics --------------------------------------------------------------------------

WAIVED_BY_PROFILE = {
    "contract": set(),
    "trtllm-tensor-lru": {"I5"},  # put replaces an idle entry that need not be the oldest
    "plain-lru": {"I5"},
    "sglang-mm-cache": set(),  # a put of a present key keeps the old entry: nothing is removed
    "vllm-encoder-cache": {"I5"},  # clear drops reservations and in-use entries
    "vllm-encoder-cache-0.34": {"I5"},  # proved without its two unmodelled fields (prove.modelled): as vllm-encoder-cache
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_proves_every_invariant_but_the_ones_its_options_break(name):
    semantics = prove.modelled(name, PROFILES[name].semantics).semantics
    results = prove.prove_all(3, semantics)
    assert [(r.model, r.invariant, r.operation, r.outcome) for r in results if r.failed] == []
    assert {r.invariant for r in results if r.waived} == WAIVED_BY_PROFILE[name]
    assert prove.unconfirmed_waivers(results, semantics) == []
    for result in (r for r in results if r.waived):
        counterexample = result.counterexample
        assert counterexample.semantics == semantics
        assert breaks_invariant(counterexample), counterexample.python()
        with pytest.raises(AssertionError, match=f"{result.invariant} broken"):
            exec(counterexample.python(), {})


def test_reservation_time_eviction_proves_that_reserved_bytes_count_as_used():
    results = prove.prove_all(3, Semantics(eviction_time="reservation"))
    assert not [r for r in results if not r.proved]
    covered = {(r.model, r.invariant, r.operation) for r in results}
    for operation in ("reserve", "acquire", "commit", "put", "release", "clear"):
        assert ("entries", "R", operation) in covered and ("aggregate", "R", operation) in covered
    assert "R" not in {r.invariant for r in prove.prove_all(2)}


def test_an_option_that_breaks_an_unwaived_invariant_fails_the_proof(monkeypatch, capsys):
    arguments = ["prove", "--slots", "2", "--no-refine", "--semantics", "clear_busy=drop"]
    assert main(arguments) == 0
    out = capsys.readouterr().out
    assert "does not hold under clear_busy=drop: counterexample: I5 / clear -> None (entries)" in out
    assert "1 do not hold as waived (I5 under clear_busy=drop)" in out
    monkeypatch.setattr(invariants, "WAIVERS", ())
    assert main(arguments) == 1
    out = capsys.readouterr().out
    assert "COUNTEREXAMPLE (None)" in out and "# counterexample: I5 / clear -> None (entries)" in out
    assert "1 FAILED" in out


def test_a_waiver_the_proofs_cannot_confirm_fails_the_proof(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(invariants, "WAIVERS", (invariants.Waiver("put_present", "keep", "I1", "said without proof"),))
    report = tmp_path / "prove.json"
    assert main(["prove", "--slots", "2", "--no-refine", "--semantics", "put_present=keep", "--json", str(report)]) == 1
    assert "# waiver not confirmed: I1 is waived under put_present=keep" in capsys.readouterr().out
    data = json.loads(report.read_text())
    (target,) = data["targets"]
    assert data["ok"] is False and target["semantics"] == {"put_present": "keep"}
    assert target["unconfirmed_waivers"] and all(o["verdict"] == "proved" for o in target["obligations"])


def test_the_semantic_targets_cover_every_profile_and_option_value():
    targets = prove.semantic_targets()
    labels = [t.label for t in targets]
    assert len(set(labels)) == len(labels) and [label.split()[0] for label in labels[: len(PROFILES)]] == list(PROFILES)
    seen = {(name, value) for t in targets for name, value in t.semantics.differences().items()}
    for name, values in OPTIONS.items():
        if name in prove.UNMODELLED_FIELDS:  # the z3 models lack them: no target sets them
            assert all(getattr(t.semantics, name) == getattr(Semantics(), name) for t in targets)
        elif name != "snapshot_order":  # the checker's comparison level: the spec never reads it
            assert {(name, v) for v in values if v != getattr(Semantics(), name)} <= seen
    toggled = {t.semantics.refresh_on for t in targets[len(PROFILES) :] if t.label.startswith("refresh_on=")}
    assert toggled == {Semantics().refresh_on ^ {call} for call in REFRESHING_CALLS}


def test_a_profile_with_unmodelled_fields_is_proved_without_them_and_says_so():
    target = prove.modelled("vllm-encoder-cache-0.34", PROFILES["vllm-encoder-cache-0.34"].semantics)
    assert target.label == ("vllm-encoder-cache-0.34 without abandoned_reservation=kept, commit_size=reserved "
                            "(not modelled: checked only)")
    assert target.semantics == PROFILES["vllm-encoder-cache"].semantics
    assert prove.modelled("plain-lru", PROFILES["plain-lru"].semantics) == ("plain-lru", PROFILES["plain-lru"].semantics)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--profile", "nope"], "unknown profile 'nope'"),
        (["--semantics", "clear_busy=maybe"], "clear_busy='maybe'"),
        (["--all-semantics", "--profile", "plain-lru"], "--all-semantics proves every profile"),
    ],
)
def test_prove_refuses_unknown_semantics(flags, message, capsys):
    assert main(["prove", "--slots", "2", "--no-refine", *flags]) == 2
    assert message in capsys.readouterr().err


WAIVED_BY_OPTION = {"put_present=replace": {"I5"}, "clear_busy=drop": {"I5"}}
"""What the issue's engines do differently and the invariants that it breaks; every other option keeps all."""


def test_each_single_option_breaks_exactly_the_invariants_the_waiver_table_names():
    for target in prove.semantic_targets()[len(PROFILES) :]:
        results = entry_model.prove(2, target.semantics)
        broken = {r.invariant for r in results if not r.proved}
        assert broken == WAIVED_BY_OPTION.get(target.label, set()) == set(invariants.waivers(target.semantics)), target
        assert all(r.waived == target.label for r in results if not r.proved)


def test_all_semantics_proves_each_target_and_writes_one_report_each(monkeypatch, capsys, tmp_path):
    chosen = [prove.Target("contract", Semantics()), prove.Target("clear_busy=drop", Semantics(clear_busy="drop"))]
    monkeypatch.setattr(prove, "semantic_targets", lambda: chosen)
    report = tmp_path / "prove.json"
    assert main(["prove", "--slots", "2", "--no-refine", "--all-semantics", "--quiet", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "== semantics: contract (the contract)" in out and "== semantics: clear_busy=drop (clear_busy=drop)" in out
    assert "2/2 semantics proved and refined" in out
    data = json.loads(report.read_text())
    assert data["ok"] is True and [t["label"] for t in data["targets"]] == ["contract", "clear_busy=drop"]
    waived = [o for o in data["targets"][1]["obligations"] if o["waived"]]
    assert waived and all(o["invariant"] == "I5" and o["counterexample"]["semantics"] == {"clear_busy": "drop"} for o in waived)
    assert not any(o["waived"] for o in data["targets"][0]["obligations"])
