"""vLLM's real EncoderDecoderCacheManager (vllm 0.34.0) through
cacheproof.engines.vllm:encoder_decoder_slots, held to the slot-budget kind (`--spec slots`): the
unmodified manager conforms under its profile `vllm-encoder-decoder` and not under the contract
(it gives an input's slots back twice), every broken subclass of model_tests/vllm_broken_slots.py
is found and the correct one never. Runs in the engines venv; skips where vllm does not import."""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main

try:
    from vllm.v1.core.encoder_cache_manager import EncoderDecoderCacheManager
except ImportError as error:  # noqa: F841
    pytest.skip(f"vllm is not importable here ({error}); run with .venv-engines/bin/python", allow_module_level=True)

from model_tests import vllm_broken_slots  # noqa: E402 - needs vLLM

IMPL = "cacheproof.engines.vllm:encoder_decoder_slots"

FOUND = {
    "FreeSlotsNeverSet": "AttributeError",  # #124: the first schedule crashes
    "EmbedsNeverCounted": "UnboundLocalError",  # #129
    "RefusesTheLastSlots": "the spec returned True, the implementation returned False",  # #134
    "HashNeverAllocated": "cache.schedule(0, 'c', 1, budget=5, pending=0): pending_items() differs",  # #139
    "ToFreeNeverRefilled": "cache.end_step(): pending_items() differs",  # #144: the step before's items lost
    "NamesHashesAtOnce": "cache.end_step(): the spec returned [], the implementation returned [",  # a step early
}
"""What the first divergence of each broken subclass says."""


def _check(tmp_path, impl: str, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "report.json"
    status = main(["check", "--spec", "slots", "--impl", impl, "--seed", "0", "--max-divergences", "1", "--quiet",
                   *flags, "--json", str(path)])
    return status, json.loads(path.read_text())


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


@pytest.mark.parametrize("name", sorted(cls.__name__ for cls in vllm_broken_slots.BROKEN))
def test_each_broken_subclass_is_found(name, tmp_path):
    status, report = _check(tmp_path, f"model_tests.vllm_broken_slots:{name}", "--examples", "60")
    assert status == 1 and report["profile"] == "vllm-encoder-decoder", report
    assert FOUND[name] in report["divergences"][0]["message"], report["divergences"][0]["message"]


def test_the_correct_subclass_is_never_flagged(tmp_path):
    status, report = _check(tmp_path, "model_tests.vllm_broken_slots:CountsFromTheTop", "--examples", "150")
    assert status == 0 and report["ok"] is True and report["profile"] == "vllm-encoder-decoder"
