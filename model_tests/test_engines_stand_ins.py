"""The installed adapters (cacheproof.engines) over stand-ins written from the real files
(model_tests/real_file_stand_ins.py), whose public API must match the signature record taken from
those files: an API drift fails here. One command per engine, no flags."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from cacheproof.cli import main
from cacheproof.spec import InvalidArgumentError
from model_tests import real_file_stand_ins as real


def _plain(signature: inspect.Signature) -> str:
    return re.sub(r"= ", "=", re.sub(r": [^,=)]+", "", str(signature.replace(return_annotation=inspect.Signature.empty))))


@pytest.mark.parametrize("cls", [real.TensorLRUCache, real.MultiModalStaticCache])
def test_each_stand_in_has_the_public_api_recorded_from_the_real_file(cls):
    for name, recorded in real.SIGNATURES[cls.__name__].items():
        assert _plain(inspect.signature(getattr(cls, name))) == recorded, (cls.__name__, name)


def run(impl: str, *flags: str) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["check", "--impl", impl, "--quiet", *flags])
    return status, out.getvalue(), err.getvalue()


def test_trtllm_533f124_first_counterexample_is_the_put_refused_beside_a_reservation():
    status, out, _ = run("model_tests.real_file_stand_ins:trtllm_533f124", "--max-divergences", "1")
    assert status == 1
    assert re.search(r"counterexample \(2 calls\): cache\.put\(.*the spec returned True, the implementation returned False", out), out


def test_sglang_0_5_23_conforms_and_the_earlier_set_flushes(tmp_path):
    assert run("model_tests.real_file_stand_ins:sglang_0_5_23", "--examples", "60")[0] == 0
    report = tmp_path / "flushing.json"
    status, out, _ = run("model_tests.real_file_stand_ins:sglang_flushing", "--max-divergences", "1",
                         "--json", str(report))
    assert status == 1 and "): len(), " in out, out  # len() is the first view that differs
    (divergence,) = json.loads(report.read_text())["divergences"]
    views = {view["view"]: view for view in divergence["state_diff"]["views"]}
    assert (views["len"]["spec"], views["len"]["implementation"]) == (1, 0), views


def test_upstream_trtllm_conforms_to_plain_lru():
    from model_tests.engine_stand_ins import StandInTensorLRUCache

    assert run("model_tests.test_engines_stand_ins:upstream", "--examples", "60")[0] == 0


def upstream(capacity_bytes):
    from cacheproof.engines.trtllm import tensor_lru_cache
    from model_tests.engine_stand_ins import StandInTensorLRUCache

    return tensor_lru_cache(capacity_bytes, cache_class=StandInTensorLRUCache)


upstream.profile = "plain-lru"


class _NoEnsureCapacity(real.TensorLRUCache):
    ensure_capacity = property(lambda self: (_ for _ in ()).throw(AttributeError("ensure_capacity")))


def missing_method(capacity_bytes):
    from cacheproof.engines.trtllm import tensor_lru_cache

    return tensor_lru_cache(capacity_bytes, cache_class=type("Older", (), {
        name: getattr(real.TensorLRUCache, name) for name in ("__init__", "acquire", "commit", "release", "put", "get")}))


missing_method.profile = "trtllm-tensor-lru"


def test_a_class_missing_a_method_exits_2_naming_it():
    status, out, err = run("model_tests.test_engines_stand_ins:missing_method")
    assert status == 2 and "ensure_capacity" in err and "counterexample" not in out


@pytest.mark.parametrize("impl", ["model_tests.real_file_stand_ins:sglang_0_5_23", "model_tests.test_engines_stand_ins:upstream"])
def test_threads_run_on_the_engine_adapters_without_a_false_alarm(impl):
    status, out, err = run(impl, "--threads", "3", "--examples", "10")
    assert status == 0, out + err


def test_sglang_s_set_must_assert_its_value_type_and_is_found_without_it():
    stand_in = real.sglang_0_5_23(8)
    with pytest.raises(InvalidArgumentError, match=r"put\(1\): SGLang's set refuses a str, not an EmbeddingResult"):
        stand_in.put(1, "not sizable")
    assert len(stand_in) == 0
    status, out, _ = run("model_tests.real_file_stand_ins:sglang_unchecked_set", "--max-divergences", "1")
    assert status == 1 and "AttributeError" in out, out
    trusted = run("model_tests.real_file_stand_ins:sglang_unchecked_set", "--examples", "60",
                  "--semantics", "argument_checks=trusted")
    assert trusted[0] == 0, trusted[1]  # the misuse is made only where the profile checks a value's type
