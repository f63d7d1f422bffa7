"""SGLang's real MultiModalStaticCache (sglang 0.5.23, installed --no-deps by tools/engines_venv.sh)
through cacheproof.engines.sglang:mm_cache: the one command, with no flags but a budget, conforms
under the adapter's own profile, and the class still has the API the adapter and the stand-in
(model_tests/real_file_stand_ins.py, `SIGNATURES`) were written against. Runs in the engines venv
(`.venv-engines/bin/python -m pytest -q model_tests/engines`); skips where sglang does not import."""

from __future__ import annotations

import inspect

import pytest

try:
    from sglang.srt.mem_cache.multimodal_cache import EmbeddingResult, MultiModalStaticCache
except ImportError as error:  # noqa: F841
    pytest.skip(f"sglang is not importable here ({error}); build the engines venv with "
                "`bash tools/engines_venv.sh VENV` and run with its python", allow_module_level=True)

import dataclasses  # noqa: E402

from cacheproof.cli import main  # noqa: E402
from cacheproof.engines import sglang as engine  # noqa: E402
from model_tests import sglang_broken_mm  # noqa: E402
from model_tests.real_file_stand_ins import SIGNATURES  # noqa: E402

BUDGET = 60


def _unannotated(function) -> str:
    """The signature as SIGNATURES records it: names, kinds and defaults, no annotations."""
    signature = inspect.signature(function)
    bare = [parameter.replace(annotation=inspect.Parameter.empty) for parameter in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


@pytest.mark.parametrize("name", sorted(SIGNATURES["MultiModalStaticCache"]))
def test_the_real_class_has_the_recorded_signature(name):
    assert _unannotated(getattr(MultiModalStaticCache, name)) == SIGNATURES["MultiModalStaticCache"][name]


def test_the_adapter_s_expectations_hold_on_the_real_class():
    assert all(hasattr(MultiModalStaticCache, member) for member in engine.MEMBERS)
    assert isinstance(inspect.getattr_static(MultiModalStaticCache, "combine_hashes"), staticmethod)
    fields = {field.name: field for field in dataclasses.fields(EmbeddingResult)}
    assert "embedding" in fields and fields["embedding"].kw_only
    assert engine.mm_cache.profile() == "sglang-mm-cache"
    adapted = engine.mm_cache(16)
    assert type(adapted.cache) is MultiModalStaticCache and adapted._result is EmbeddingResult
    assert {"mm_cache", "current_size", "max_size"} <= set(vars(adapted.cache))


def test_a_hand_worked_walk_on_the_real_class():
    cache = engine.mm_cache(4)
    one, two = cache.make_value(2, 1), cache.make_value(2, 2)
    assert cache.put(1, one) and cache.put(2, two)
    assert cache.put(1, cache.make_value(1, 3))  # present: kept as it was, made newest
    assert [view.key for view in cache.snapshot()] == [2, 1] and cache.get(1).equal(one)
    assert cache.put(3, cache.make_value(5, 4)) is False and len(cache) == 2  # refused before evicting
    assert cache.put(3, cache.make_value(2, 5)) and 2 not in cache and 1 in cache
    assert cache.pop(1).equal(one) and cache.pop(1) is None
    assert cache.stats().ready_bytes == cache.cache.current_size == 2
    cache.clear()
    assert len(cache) == 0 and cache.stats().free_bytes == 4


def test_the_one_command_conforms_under_the_adapter_s_profile(capsys):
    status = main(["check", "--impl", "cacheproof.engines.sglang:mm_cache", "--examples", str(BUDGET), "--quiet"])
    captured = capsys.readouterr()
    assert status == 0, captured.out + captured.err


def test_a_value_is_one_item_of_a_batch():
    value = engine.mm_cache(64).make_value(8, 3, 4)
    assert value.numel() * value.element_size() == 8
    assert value.untyped_storage().nbytes() == 16  # the batch: this item and one more
    stored = MultiModalStaticCache(64)
    assert stored.set(1, EmbeddingResult(embedding=value))
    assert stored.current_size == 8 and stored.get_single(1).embedding.untyped_storage().nbytes() == 8


def test_gets_take_turns_between_sglang_s_two_reads():
    reads = []

    class Counting(MultiModalStaticCache):
        def get(self, mm_hashes, combined_hash=None):
            reads.append("get")
            return super().get(mm_hashes, combined_hash)

        def get_single(self, mm_hash):
            reads.append("get_single")
            return super().get_single(mm_hash)

    cache = engine.mm_cache(16, cache_class=Counting)
    value = cache.make_value(4, 1)
    assert cache.put(7, value)
    assert [cache.get(7).equal(value), cache.get(7).equal(value), cache.get(8)] == [True, True, None]
    assert reads == ["get", "get_single", "get"]


@pytest.mark.parametrize("name", sorted(sglang_broken_mm.FACTORIES))
def test_each_broken_subclass_is_found(name, capsys):
    assert type(sglang_broken_mm.FACTORIES[name](8).cache) in sglang_broken_mm.BROKEN_MM_CLASSES
    status = main(["check", "--impl", f"model_tests.sglang_broken_mm:{name}", "--profile", "sglang-mm-cache",
                   "--examples", str(BUDGET), "--quiet"])
    assert status == 1, capsys.readouterr().out
