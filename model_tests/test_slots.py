"""The encoder slot-budget kind (`--spec slots`, docs/slots-contract.md): the spec's rules, its
invariants' witnesses, its generator, and every capability on it: the checker (sampled and
exhaustive) on the reference budget of model_tests/slot_budgets.py and its broken twins, replay,
the monitor, the HTML report, the generated docs, and the one-line refusals (prove, no --impl)."""

from __future__ import annotations

import json
import random

import pytest

from cacheproof.check.programs.generators import generator_for
from cacheproof.cli import main
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError
from cacheproof.spec.slots.budget import SlotBudgetSpec
from cacheproof.spec.slots.invariants import SLOT_INVARIANTS_BY_NAME, InvariantViolation, SlotStep
from cacheproof.spec.slots.semantics import SlotSemantics
from cacheproof.trace.monitor import DivergenceError, monitor
from model_tests.slot_budgets import BROKEN, CACHING_BROKEN, FreesTwice

TRUSTED = SlotSemantics(misuse="trusted")
CACHING = SlotSemantics(caching="lru")


# The spec's rules ---------------------------------------------------------------------------------

def test_a_schedule_takes_its_slots_up_to_exactly_the_free_ones_less_the_pending():
    budget = SlotBudgetSpec(6)
    assert budget.schedule(1, "a", 4, budget=4) is True and budget.free_slots() == 2
    assert budget.schedule(2, "b", 2, budget=2, pending=1) is False  # 2 + 1 pending > 2 free
    assert budget.schedule(2, "b", 3, budget=2) is False  # over the compute budget
    assert budget.free_slots() == 2 and budget.inputs_of(2) == ()
    assert budget.schedule(2, "b", 2, budget=2) is True and budget.free_slots() == 0  # equality admits


def test_nothing_is_cached_two_requests_of_one_item_each_take_its_slots():
    budget = SlotBudgetSpec(10)
    assert budget.schedule(1, "a", 3, budget=9) and budget.schedule(2, "a", 3, budget=9)
    assert budget.schedule(1, "a", 3, budget=9)
    assert budget.free_slots() == 1
    assert budget.inputs_of(1) == (("a", 3, True), ("a", 3, True))


def test_items_are_named_at_the_second_step_end_once_per_scheduling():
    budget = SlotBudgetSpec(10)
    budget.schedule(1, "a", 1, budget=9)
    budget.schedule(2, "a", 1, budget=9)
    assert budget.end_step() == []
    budget.schedule(1, "b", 1, budget=9)
    assert budget.end_step() == ["a", "a"]
    assert budget.end_step() == ["b"]
    assert budget.end_step() == []


def test_caching_a_hit_shares_the_item_s_one_entry_and_needs_no_budget():
    budget = SlotBudgetSpec(10, CACHING)
    assert budget.schedule(1, "a", 4, budget=4) is True and budget.free_slots() == 6
    assert budget.schedule(2, "a", 4, budget=0) is True and budget.free_slots() == 6  # a hit
    assert budget.schedule(1, "a", 4, budget=0) is True  # the same request again: one more input
    assert budget.cached_items() == (("a", 4, 2),) and budget.holding_requests() == (1, 2)
    before = budget.snapshot()
    with pytest.raises(InvalidArgumentError, match="item 'a' is cached with 4 slots"):
        budget.schedule(3, "a", 5, budget=9)
    assert budget.snapshot() == before


def test_caching_an_item_goes_idle_at_its_last_input_s_free_and_stays_until_evicted():
    budget = SlotBudgetSpec(10, CACHING)
    budget.schedule(1, "a", 4, budget=9)
    budget.schedule(1, "a", 4, budget=9)
    budget.schedule(2, "b", 3, budget=9)
    budget.free_input(1, 0)
    assert budget.cached_items() == (("a", 4, 1), ("b", 3, 1))  # one input of request 1 still holds "a"
    budget.free(2)
    budget.free_input(1, 1)
    assert budget.cached_items() == (("b", 3, 0), ("a", 4, 0)) and budget.free_slots() == 3
    assert budget.holding_requests() == ()
    assert budget.schedule(3, "c", 5, budget=9, pending=2) is True  # 7 of 3 free: "b" then "a" evicted
    assert budget.free_slots() == 5 and budget.pending_items() == ((), ("b", "a"))
    assert budget.schedule(3, "a", 2, budget=9) is True  # cached again: no longer named
    assert budget.end_step() == ["b"] and budget.end_step() == []


def test_caching_a_miss_that_idle_items_cannot_make_room_for_evicts_nothing():
    budget = SlotBudgetSpec(6, CACHING)
    budget.schedule(1, "a", 2, budget=9)
    budget.schedule(2, "b", 2, budget=9)
    budget.free(1)
    before = budget.snapshot()
    assert budget.schedule(3, "c", 5, budget=9) is False  # 2 free + 2 idle < 5
    assert budget.schedule(3, "c", 4, budget=3) is False  # over the compute budget: no eviction
    assert budget.snapshot() == before


def test_frees_give_back_what_is_held_once_and_forget_the_request():
    budget = SlotBudgetSpec(10)
    budget.schedule(1, "a", 2, budget=9)
    budget.schedule(1, "b", 3, budget=9)
    budget.free_input(1, 0)
    assert budget.free_slots() == 7
    budget.free(1)
    assert budget.free_slots() == 10 and budget.live_requests() == ()
    budget.free(1)  # a request holding nothing: nothing changes
    assert budget.free_slots() == 10


def test_reset_frees_every_slot_and_forgets_requests_and_items():
    budget = SlotBudgetSpec(5)
    budget.schedule(1, "a", 5, budget=5)
    budget.end_step()
    budget.reset()
    assert budget.free_slots() == 5 and budget.live_requests() == () and budget.end_step() == []


@pytest.mark.parametrize("call, error", [
    (lambda b: b.schedule("1", "a", 1, budget=1), InvalidArgumentError),
    (lambda b: b.schedule(1, 7, 1, budget=1), InvalidArgumentError),
    (lambda b: b.schedule(1, "a", 0, budget=1), InvalidArgumentError),
    (lambda b: b.schedule(1, "a", True, budget=1), InvalidArgumentError),
    (lambda b: b.schedule(1, "a", 1, budget=-1), InvalidArgumentError),
    (lambda b: b.schedule(1, "a", 1, budget=1, pending=-1), InvalidArgumentError),
    (lambda b: b.free_input(1, 0), WrongStateError),  # freed already
    (lambda b: b.free_input(1, 1), WrongStateError),  # never scheduled
    (lambda b: b.free_input(2, 0), WrongStateError),  # an unknown request
    (lambda b: b.free_input(1, None), InvalidArgumentError),
    (lambda b: b.free(None), InvalidArgumentError),
])
def test_misuse_is_a_typed_error_that_changes_nothing(call, error):
    budget = SlotBudgetSpec(4)
    budget.schedule(1, "a", 2, budget=4)
    budget.free_input(1, 0)
    before = budget.snapshot()
    with pytest.raises(error):
        call(budget)
    assert budget.snapshot() == before


def test_under_trusted_callers_freeing_a_request_after_one_of_its_inputs_is_misuse():
    for semantics, refused in ((SlotSemantics(), False), (TRUSTED, True)):
        budget = SlotBudgetSpec(4, semantics)
        budget.schedule(1, "a", 1, budget=4)
        budget.schedule(1, "b", 1, budget=4)
        budget.free_input(1, 0)
        if refused:
            with pytest.raises(WrongStateError, match="freed an input already"):
                budget.free(1)
            assert budget.free_slots() == 3
        else:
            budget.free(1)
            assert budget.free_slots() == 4


def test_bad_sizes_and_semantics_are_refused():
    with pytest.raises(InvalidArgumentError, match="num_slots"):
        SlotBudgetSpec(0)
    with pytest.raises(InvalidArgumentError, match="misuse"):
        SlotSemantics(misuse="lenient")
    with pytest.raises(InvalidArgumentError, match="valid values are checked, trusted"):
        SlotSemantics().with_overrides("misuse=sometimes")


# Invariants ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, step, witness", [
    ("S1", SlotStep("free", 4, 5), "the budget has 5 free slots of 4"),
    ("S1", SlotStep("schedule", 4, -1), "the budget has -1 free slots of 4"),
    ("S2", SlotStep(None, 4, 3, after=(3, ((1, (("a", 2, True),)),), (), ())),
     "3 slots are free while scheduled inputs hold 2 of 4"),
    ("S3", SlotStep("end_step", 4, 4, pending_before=(("b",), ("a",)), result=["b"]),
     "end_step answered ['b']; the step before the last scheduled ['a']"),
])
def test_each_invariant_names_the_values_that_break_it(name, step, witness):
    assert SLOT_INVARIANTS_BY_NAME[name].witness(step) == witness
    assert not SLOT_INVARIANTS_BY_NAME[name].holds(step)


def test_the_spec_keeps_its_invariants_and_checks_its_own_state():
    budget = SlotBudgetSpec(4)
    budget.schedule(1, "a", 2, budget=4)
    for expected in ([], ["a"]):
        pending = budget.pending_items()
        answer = budget.end_step()
        step = SlotStep("end_step", 4, budget.free_slots(), pending, budget.snapshot(), result=answer)
        assert answer == expected and all(invariant.holds(step) for invariant in SLOT_INVARIANTS_BY_NAME.values())
    budget._free = 3  # a state no operation makes: the spec's own check names it
    with pytest.raises(InvariantViolation, match="S2 broken"):
        budget.check_invariants()


# The generator ------------------------------------------------------------------------------------

def test_without_misuse_the_generator_makes_no_call_the_trusted_spec_refuses():
    generator, rng = generator_for("slots"), random.Random(0)
    refused = 0
    for _ in range(200):
        model = SlotBudgetSpec(generator.size(rng), TRUSTED)
        for _ in range(30):
            call = generator.draw_call(rng, model, ("schedule", "free_input", "free", "end_step"), False)
            try:
                getattr(model, call.op)(*call.args, **call.kwargs)
            except (InvalidArgumentError, WrongStateError):
                refused += 1
    assert refused == 0


# The checker and the other capabilities -----------------------------------------------------------

def _check(tmp_path, impl: str, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "report.json"
    status = main(["check", "--spec", "slots", "--impl", impl, "--seed", "0", "--max-divergences", "1", "--quiet",
                   *flags, "--json", str(path)])
    return status, json.loads(path.read_text())


@pytest.mark.parametrize("impl", ["model_tests.slot_budgets:SlotBudget", "model_tests.slot_budgets:HeldSlotsBudget"])
def test_the_correct_budgets_are_never_flagged_and_every_outcome_is_reached(impl, tmp_path):
    status, report = _check(tmp_path, impl, "--examples", "200")
    assert status == 0 and report["ok"] is True
    assert report["coverage"]["reached"] == report["coverage"]["possible"], report["coverage"]


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_every_broken_budget_is_found_where_its_bug_shows(broken, tmp_path):
    status, report = _check(tmp_path, f"model_tests.slot_budgets:{broken}", "--examples", "200")
    assert status == 1
    [divergence] = report["divergences"]
    named = [found["name"] for found in divergence["broken_invariants"]]
    assert BROKEN[broken] in named or divergence["calls"][-1]["op"] == BROKEN[broken], (named, divergence["calls"])


def test_the_caching_reference_conforms_and_reaches_every_outcome(tmp_path):
    status, report = _check(tmp_path, "model_tests.slot_budgets:CachingSlotBudget", "--examples", "200")
    assert status == 0 and report["ok"] is True and report["profile"] == "contract-caching"
    assert report["coverage"]["reached"] == report["coverage"]["possible"], report["coverage"]
    assert main(["check", "--spec", "slots", "--impl", "model_tests.slot_budgets:CachingSlotBudget", "--exhaustive",
                 "--quiet"]) == 0


@pytest.mark.parametrize("broken", sorted(CACHING_BROKEN))
def test_every_broken_caching_budget_is_found_where_its_bug_shows(broken, tmp_path):
    status, report = _check(tmp_path, f"model_tests.slot_budgets:{broken}", "--examples", "200")
    assert status == 1
    [divergence] = report["divergences"]
    shown = CACHING_BROKEN[broken]
    assert f"{shown}() differ" in divergence["message"] or divergence["calls"][-1]["op"] == shown, divergence


def test_the_exhaustive_search_finds_the_shortest_double_free(capsys):
    assert main(["check", "--spec", "slots", "--impl", "model_tests.slot_budgets:FreesTwice", "--exhaustive",
                 "--quiet"]) == 1
    assert "shortest counterexample, 3 calls" in capsys.readouterr().out
    assert main(["check", "--spec", "slots", "--impl", "model_tests.slot_budgets:SlotBudget", "--exhaustive",
                 "--quiet"]) == 0


def test_an_implementation_s_own_pending_items_show_which_end_step_broke_s3(tmp_path):
    status, report = _check(tmp_path, "model_tests.slot_budgets:NamesItemsAtOnce", "--examples", "200")
    assert status == 1
    [divergence] = report["divergences"]
    assert [found["name"] for found in divergence["broken_invariants"]] == ["S3"], divergence["broken_invariants"]


def test_replay_the_report_page_and_the_monitor_read_the_kind(tmp_path):
    trace = tmp_path / "trace.jsonl"
    status, _ = _check(tmp_path, "model_tests.slot_budgets:FreesTwice", "--examples", "200", "--trace-out", str(trace))
    assert status == 1
    assert main(["replay", str(trace), "--quiet"]) == 0
    assert main(["replay", str(trace), "--impl", "model_tests.slot_budgets:FreesTwice", "--quiet"]) == 1
    page = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "report.json"), "-o", str(page), "--quiet"]) == 0
    html = page.read_text()
    assert "breaks S1" in html and 'data-figure="in use"' in html
    budget = monitor(FreesTwice(4), kind="slots")
    budget.schedule(1, "a", 2, budget=4)
    budget.free_input(1, 0)
    with pytest.raises(DivergenceError) as raised:
        budget.free(1)
    assert "your implementation breaks S1: the budget has 6 free slots of 4" in raised.value.message


def test_what_cannot_serve_the_kind_refuses_in_one_line(capsys):
    assert main(["prove", "--spec", "slots"]) == 2
    assert main(["check", "--spec", "slots", "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "cacheproof prove: --spec slots has no z3 model of its invariants yet; check it with "
        "`cacheproof check --spec slots`",
        "cacheproof check: --spec slots has no built-in implementation to check by default: name yours with "
        "--impl MODULE:FACTORY",
    ]


def test_the_generated_invariant_table_is_current_and_names_every_invariant():
    from pathlib import Path

    from cacheproof.docs.command import render

    text = (Path(__file__).resolve().parent.parent / "docs" / "slots-invariants.md").read_text()
    assert text == render("slots-invariants.md")
    assert all(f"| {name} |" in text for name in SLOT_INVARIANTS_BY_NAME)


def test_vllm_s_budget_without_vllm_is_a_one_line_usage_error(capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: model_tests/engines/test_vllm_slots.py checks its budget")
    assert main(["check", "--spec", "slots", "--impl", "cacheproof.engines.vllm:encoder_decoder_slots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs the real vLLM package (vllm==0.34.0)" in err, err
