"""vLLM's real EncoderCacheManager (vllm 0.34.0) through cacheproof.engines.vllm:encoder_cache_slots,
held to the slot-budget kind under caching "lru" (`--spec slots`), request by request as the
scheduler drives it: the unmodified manager conforms under its profile `vllm-encoder-cache-requests`
and not where misuse is checked (it ignores a free of an input no longer held), every broken subclass
of model_tests/vllm_broken_slots.py's CACHING_BROKEN is found and the correct one never. Runs in the
engines venv; skips where vllm does not import."""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main

try:
    from vllm.v1.core.encoder_cache_manager import EncoderCacheManager
except ImportError as error:  # noqa: F841
    pytest.skip(f"vllm is not importable here ({error}); run with .venv-engines/bin/python", allow_module_level=True)

from model_tests import vllm_broken_slots  # noqa: E402 - needs vLLM

IMPL = "cacheproof.engines.vllm:encoder_cache_slots"

FOUND = {
    "OverBudgetAdmitted": "the spec returned False, the implementation returned True",  # #27
    "PendingSubtracted": "the spec returned False, the implementation crashed with AssertionError",  # #28
    "CachedIdsKept": "cache.free_input(0, 0): holding_requests() differs",  # #92: a leak per request
    "HashRefsKept": "cache.free_input(0, 0): holding_requests() differs",  # #93
}
"""What the first divergence of each broken subclass says."""


def _check(tmp_path, impl: str, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "report.json"
    status = main(["check", "--spec", "slots", "--impl", impl, "--seed", "0", "--max-divergences", "1", "--quiet",
                   *flags, "--json", str(path)])
    return status, json.loads(path.read_text())


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


def test_the_unmodified_manager_conforms_under_its_profile(tmp_path):
    status, report = _check(tmp_path, IMPL, "--examples", "200")
    assert status == 0 and report["ok"] is True and report["profile"] == "vllm-encoder-cache-requests"
    schedule = report["coverage"]["operations"]["schedule"]
    assert schedule["returns True"] and schedule["returns False"] and schedule["InvalidArgumentError"], schedule


def test_the_exhaustive_search_finds_no_divergence(capsys):
    assert main(["check", "--spec", "slots", "--impl", IMPL, "--exhaustive", "--quiet"]) == 0


def test_where_misuse_is_checked_a_free_of_an_input_not_held_is_not_refused(tmp_path):
    status, report = _check(tmp_path, IMPL, "--profile", "contract-caching", "--examples", "200")
    assert status == 1
    [divergence] = report["divergences"]
    assert divergence["calls"][-1]["op"] in ("free_input", "schedule"), divergence["calls"]
    assert "the spec raised" in divergence["message"], divergence["message"]


@pytest.mark.parametrize("name", sorted(cls.__name__ for cls in vllm_broken_slots.CACHING_BROKEN))
def test_each_broken_subclass_is_found(name, tmp_path):
    status, report = _check(tmp_path, f"model_tests.vllm_broken_slots:{name}", "--examples", "100")
    assert status == 1 and report["profile"] == "vllm-encoder-cache-requests", report
    assert FOUND[name] in report["divergences"][0]["message"], report["divergences"][0]["message"]


def test_the_correct_subclass_is_never_flagged(tmp_path):
    status, report = _check(tmp_path, "model_tests.vllm_broken_slots:FreedFilteredOnce", "--examples", "200")
    assert status == 0 and report["ok"] is True and report["profile"] == "vllm-encoder-cache-requests"
