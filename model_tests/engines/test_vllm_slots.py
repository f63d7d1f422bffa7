"""vLLM's real encoder managers (vllm 0.34.0) held to the slot-budget kind (`--spec slots`), one suite
for both adapters:
- EncoderDecoderCacheManager through cacheproof.engines.vllm:encoder_decoder_slots: the unmodified
  manager conforms under its profile `vllm-encoder-decoder` and not under the contract (it gives an
  input's slots back twice);
- EncoderCacheManager through :encoder_cache_slots, under caching "lru", request by request as the
  scheduler drives it: it conforms under `vllm-encoder-cache-requests` and not where misuse is
  checked (it ignores a free of an input no longer held).
Every broken subclass of model_tests/vllm_broken_slots.py is found and the correct ones never.
Runs in the engines venv; skips where vllm does not import."""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main

try:
    from vllm.v1.core.encoder_cache_manager import EncoderCacheManager, EncoderDecoderCacheManager
except ImportError as error:  # noqa: F841
    pytest.skip(f"vllm is not importable here ({error}); run with .venv-engines/bin/python", allow_module_level=True)

from model_tests import vllm_broken_slots  # noqa: E402 - needs vLLM

IMPL = "cacheproof.engines.vllm:encoder_decoder_slots"
CACHING_IMPL = "cacheproof.engines.vllm:encoder_cache_slots"

FOUND = {
    "FreeSlotsNeverSet": "AttributeError",  # #124: the first schedule crashes
    "EmbedsNeverCounted": "UnboundLocalError",  # #129
    "RefusesTheLastSlots": "the spec returned True, the implementation returned False",  # #134
    "HashNeverAllocated": "cache.schedule(0, 'c', 1, budget=5, pending=0): pending_items() differs",  # #139
    "ToFreeNeverRefilled": "cache.end_step(): pending_items() differs",  # #144: the step before's items lost
    "NamesHashesAtOnce": "cache.end_step(): the spec returned [], the implementation returned [",  # a step early
}
"""What the first divergence of each broken EncoderDecoderCacheManager says."""


CACHING_FOUND = {
    "OverBudgetAdmitted": "the spec returned False, the implementation returned True",  # #27
    "PendingSubtracted": "the spec returned False, the implementation crashed with AssertionError",  # #28
    "CachedIdsKept": "cache.free_input(0, 0): holding_requests() differs",  # #92: a leak per request
    "HashRefsKept": "cache.free_input(0, 0): holding_requests() differs",  # #93
}
"""What the first divergence of each broken EncoderCacheManager says."""


def _check(tmp_path, impl: str, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "report.json"
    status = main(["check", "--spec", "slots", "--impl", impl, "--seed", "0", "--max-divergences", "1", "--quiet",
                   *flags, "--json", str(path)])
    return status, json.loads(path.read_text())


# EncoderDecoderCacheManager (caching "none") ---------------------------------------------------

def test_the_adapter_s_expectations_hold_on_the_real_class():
    from cacheproof.engines import vllm as engine
    from cacheproof.engines.vllm_slots import MEMBERS

    assert all(hasattr(EncoderDecoderCacheManager, member) for member in MEMBERS)
    assert engine.encoder_decoder_slots.profile() == "vllm-encoder-decoder"
    budget = engine.encoder_decoder_slots(8)
    assert type(budget.manager) is EncoderDecoderCacheManager and budget.free_slots() == 8
    assert budget.schedule(1, "a", 3, budget=8) is True and budget.manager.allocated == ["a"]
    assert budget.schedule(2, "b", 6, budget=8) is False and budget.free_slots() == 5


def test_the_unmodified_manager_conforms_under_its_profile(tmp_path):
    status, report = _check(tmp_path, IMPL, "--examples", "150")
    assert status == 0 and report["ok"] is True and report["profile"] == "vllm-encoder-decoder"


def test_under_the_contract_it_gives_a_freed_input_s_slots_back_again(tmp_path):
    status, report = _check(tmp_path, IMPL, "--profile", "contract", "--examples", "150")
    assert status == 1
    [divergence] = report["divergences"]
    # a free that gives slots back twice (S1), or an argument vLLM does not check
    assert "S1" in [found["name"] for found in divergence["broken_invariants"]] or \
        divergence["calls"][-1]["op"] == "schedule", divergence["calls"]


# EncoderCacheManager, request by request (caching "lru") ---------------------------------------

def test_the_adapter_plays_the_scheduler_s_cache_path_on_the_real_class():
    from cacheproof.engines import vllm as engine
    from cacheproof.engines.vllm_slots import CACHING_MEMBERS
    from cacheproof.spec import InvalidArgumentError

    assert all(hasattr(EncoderCacheManager, member) for member in CACHING_MEMBERS)
    assert engine.encoder_cache_slots.profile() == "vllm-encoder-cache-requests"
    budget = engine.encoder_cache_slots(8)
    assert type(budget.manager) is EncoderCacheManager
    assert budget.schedule(1, "a", 3, budget=8) is True and budget.free_slots() == 5
    assert budget.schedule(2, "a", 3, budget=0) is True  # a hit: no compute budget asked
    assert budget.cached_items() == (("a", 3, 2),) and budget.holding_requests() == (1, 2)
    with pytest.raises(InvalidArgumentError, match="holds 3 embeddings"):
        budget.schedule(2, "a", 4, budget=8)
    budget.free(1)
    budget.free(2)
    assert budget.cached_items() == (("a", 3, 0),) and budget.holding_requests() == ()
    assert budget.schedule(3, "b", 8, budget=8) is True  # evicts the idle "a"
    assert budget.pending_items() == ((), ("a",)) and budget.end_step() == ["a"]


def test_the_unmodified_caching_manager_conforms_under_its_profile(tmp_path):
    status, report = _check(tmp_path, CACHING_IMPL, "--examples", "200")
    assert status == 0 and report["ok"] is True and report["profile"] == "vllm-encoder-cache-requests"
    schedule = report["coverage"]["operations"]["schedule"]
    assert schedule["returns True"] and schedule["returns False"] and schedule["InvalidArgumentError"], schedule


def test_the_exhaustive_search_finds_no_divergence_in_the_caching_manager(capsys):
    assert main(["check", "--spec", "slots", "--impl", CACHING_IMPL, "--exhaustive", "--quiet"]) == 0


def test_where_misuse_is_checked_a_free_of_an_input_not_held_is_not_refused(tmp_path):
    status, report = _check(tmp_path, CACHING_IMPL, "--profile", "contract-caching", "--examples", "200")
    assert status == 1
    [divergence] = report["divergences"]
    assert divergence["calls"][-1]["op"] in ("free_input", "schedule"), divergence["calls"]
    assert "the spec raised" in divergence["message"], divergence["message"]


# Both managers' subclasses ------------------------------------------------------------------

BROKEN_CASES = {
    **{cls.__name__: ("vllm-encoder-decoder", "60", FOUND[cls.__name__]) for cls in vllm_broken_slots.BROKEN},
    **{cls.__name__: ("vllm-encoder-cache-requests", "100", CACHING_FOUND[cls.__name__])
       for cls in vllm_broken_slots.CACHING_BROKEN},
}
"""Each broken subclass of either manager: its adapter's profile, the programs to run, what its
first divergence says."""


@pytest.mark.parametrize("name", sorted(BROKEN_CASES))
def test_each_broken_subclass_is_found(name, tmp_path):
    profile, examples, found = BROKEN_CASES[name]
    status, report = _check(tmp_path, f"model_tests.vllm_broken_slots:{name}", "--examples", examples)
    assert status == 1 and report["profile"] == profile, report
    assert found in report["divergences"][0]["message"], report["divergences"][0]["message"]


@pytest.mark.parametrize("name, profile", [("CountsFromTheTop", "vllm-encoder-decoder"),
                                           ("FreedFilteredOnce", "vllm-encoder-cache-requests")])
def test_the_correct_subclasses_are_never_flagged(name, profile, tmp_path):
    status, report = _check(tmp_path, f"model_tests.vllm_broken_slots:{name}", "--examples", "200")
    assert status == 0 and report["ok"] is True and report["profile"] == profile
