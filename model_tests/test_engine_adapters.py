"""The adapters over the engines' own classes (examples/trtllm_adapter.py, vllm_adapter.py,
sglang_adapter.py): over the real class where its package is installed, over the stand-ins of
model_tests/engine_stand_ins.py everywhere. Under the matching profile the first counterexample
is a bug, never a design difference."""

from __future__ import annotations

import importlib.util

import pytest

from cacheproof.cli import main
from cacheproof.spec.cache.profiles import profile_named
from model_tests import engine_stand_ins
from model_tests.cache_checks import check_cache

BUDGET = 40


def check(factory, profile: str, operations: tuple[str, ...] | None = None):
    chosen = profile_named(profile)
    return check_cache(factory, examples=BUDGET, seed=0, semantics=chosen.semantics,
                       operations=operations or chosen.operations)


RESERVING_OPS = ("acquire", "commit", "put", "get", "release", "clear", "contains")
"""The operations TensorRT-LLM's reserving TensorLRUCache has (examples/trtllm_reserving_adapter.py)."""


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize(
    "package, impl, profile",
    [
        ("tensorrt_llm", "examples.trtllm_adapter:factory", "plain-lru"),
        ("vllm", "examples.vllm_adapter:factory", "vllm-encoder-cache"),
        ("sglang", "examples.sglang_adapter:factory", "sglang-mm-cache"),
        ("tensorrt_llm", "examples.trtllm_reserving_adapter:factory", "trtllm-tensor-lru"),
    ],
)
def test_the_real_class(package, impl, profile, capsys):
    if not installed(package):
        pytest.skip(f"{package} is not installed here; the stand-in tests below "
                    f"run the same adapter code")
    ops = ["--ops", ",".join(RESERVING_OPS)] if "reserving" in impl else []
    status = main(["check", "--max-divergences", "1", "--impl", impl, "--profile", profile, *ops, "--examples", str(BUDGET), "--quiet"])
    out = capsys.readouterr().out
    assert status in (0, 1), out
    if package == "sglang":  # the oversized set that evicts everything, unless a release fixed it
        assert status == 0 or "len(): spec" in out, out


@pytest.mark.parametrize(
    "package, impl",
    [("tensorrt_llm", "examples.trtllm_adapter:factory"), ("vllm", "examples.vllm_adapter:factory"),
     ("sglang", "examples.sglang_adapter:factory")],
)
def test_without_the_package_the_factory_is_a_usage_error_naming_it(package, impl, capsys):
    if installed(package):
        pytest.skip(f"{package} is installed")
    assert main(["check", "--max-divergences", "1", "--impl", impl, "--examples", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{package} is not installed (pip install {package})" in err or f"`pip install {package}`" in err


def test_trtllm_adapter_over_the_stand_in_conforms_to_plain_lru():
    report = check(engine_stand_ins.trtllm_stand_in, "plain-lru")
    assert report.ok, report.counterexample and report.counterexample.message


def test_the_trtllm_adapter_checks_the_class_s_own_byte_counter():
    class MiscountsReplacement(engine_stand_ins.StandInTensorLRUCache):
        def put(self, key, value):
            present = key in self._items
            stored = super().put(key, value)
            if present:
                self.current_bytes += 1  # a replacement miscounted by one byte
            return stored

    from examples.trtllm_adapter import TrtllmTensorLRUAdapter

    report = check(lambda capacity: TrtllmTensorLRUAdapter(capacity, MiscountsReplacement), "plain-lru")
    assert report.counterexample is not None and "stats" in [view for view, _, _ in report.counterexample.difference.views]


def test_vllm_adapter_over_the_stand_in_conforms_to_vllm_encoder_cache():
    report = check(engine_stand_ins.vllm_stand_in, "vllm-encoder-cache")
    assert report.ok, report.counterexample and report.counterexample.message


def test_sglang_adapter_finds_the_oversized_set_bug_first_and_the_fix_conforms():
    example = check(engine_stand_ins.sglang_stand_in, "sglang-mm-cache").counterexample
    assert example is not None and example.calls[-1].op == "put"
    assert example.difference.views[0] == ("len", 1, 0), "the first difference: len(), the spec's 1, the cache's 0"
    assert len(example.calls) == 2
    fixed = check(engine_stand_ins.sglang_fixed_stand_in, "sglang-mm-cache")
    assert fixed.ok, fixed.counterexample and fixed.counterexample.message


def test_under_plain_lru_the_sglang_design_difference_shows_instead():
    """Why SGLang has its own profile: plain-lru replaces on a put of a present key, SGLang keeps."""
    example = check(engine_stand_ins.sglang_fixed_stand_in, "plain-lru").counterexample
    assert example is not None
    assert any(call.op == "put" and call.args[0] == example.calls[-1].args[0] for call in example.calls[:-1])


def test_trtllm_reserving_adapter_finds_the_put_that_evicts_itself_first_and_the_fix_conforms():
    example = check(engine_stand_ins.trtllm_reserving_stand_in, "trtllm-tensor-lru", RESERVING_OPS).counterexample
    assert example is not None and example.calls[-1].op == "put"
    assert (example.difference.expected.result, example.difference.actual.result) == (False, True), example.message
    fixed = check(engine_stand_ins.trtllm_reserving_fixed_stand_in, "trtllm-tensor-lru", RESERVING_OPS)
    assert fixed.ok, fixed.counterexample and fixed.counterexample.message
