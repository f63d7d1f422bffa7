"""Values of several element sizes: a recipe records bytes per element (1, 2, 4, 8), the checker's
values carry it (bytes, numpy arrays, the cache's own make_value told it), a cache that sizes a value
by its element count is found, and traces old (no element size) and new replay."""

from __future__ import annotations

import json

import numpy
import pytest

from cacheproof.cli import main
from cacheproof.contract.calls import Call, ValueRecipe, decode_value, drawn_recipe, encode_value
from cacheproof.contract.values import is_storage_free, storage_free_value, value_for
from cacheproof.sandbox.fault_search import _simpler
from cacheproof.spec import CacheSpec
from cacheproof.trace.format import TraceFormatError, parse_trace, spec_trace, trace_text
from model_tests.broken_caches import SizesByElementCount
from model_tests.cache_checks import check_cache


def test_a_drawn_recipe_takes_an_element_size_dividing_its_bytes_picked_by_the_tag():
    assert [drawn_recipe(8, tag).element_size for tag in range(4)] == [1, 2, 4, 8]
    assert [drawn_recipe(12, tag).element_size for tag in range(3)] == [1, 2, 4]
    assert {drawn_recipe(6, tag).element_size for tag in range(9)} == {1, 2}
    assert {drawn_recipe(7, tag).element_size for tag in range(9)} == {1}  # an odd size: one byte per element
    assert drawn_recipe(0, 5).element_size == 1  # the empty value


@pytest.mark.parametrize("element_size", [2, 4, 8])
def test_a_cache_without_make_value_gets_an_array_of_the_element_size(element_size):
    value = value_for(CacheSpec(64), 24, 9, element_size=element_size)
    assert isinstance(value, numpy.ndarray) and value.itemsize == element_size
    assert value.nbytes == 24 and value.size == 24 // element_size and not value.flags.writeable


def test_one_byte_elements_and_recipes_without_an_element_size_stay_bytes():
    assert value_for(CacheSpec(64), 3, 7, element_size=1) == bytes([7]) * 3
    assert value_for(CacheSpec(64), 4, 300) == bytes([300 % 256]) * 4  # as before recipes had one
    assert value_for(CacheSpec(64), 0, 1, element_size=1) == b""


def test_an_oversized_recipe_is_a_storage_free_view_of_its_element_size():
    value = value_for(CacheSpec(8), 2**40, 3, element_size=4)
    assert value.itemsize == 4 and value.nbytes == 2**40 and is_storage_free(value)
    assert storage_free_value(16, 3).itemsize == 1 and storage_free_value(16, 3, 8).shape == (2,)


class _Maker:
    def __init__(self):
        self.calls = []


class TakesElementSize(_Maker):
    def make_value(self, nbytes, tag, element_size=None):
        self.calls.append((nbytes, tag, element_size))
        return b"x" * nbytes


class TakesTwo(_Maker):
    def make_value(self, nbytes, tag):
        self.calls.append((nbytes, tag))
        return b"y" * nbytes


def test_make_value_is_told_the_element_size_only_when_it_takes_one():
    told, untold = TakesElementSize(), TakesTwo()
    value_for(told, 8, 1, element_size=4)
    value_for(told, 8, 1)
    value_for(untold, 8, 1, element_size=4)
    assert told.calls == [(8, 1, 4), (8, 1, None)] and untold.calls == [(8, 1)]


def test_the_built_in_cache_makes_a_dtype_of_the_recipes_element_size():
    torch = pytest.importorskip("torch")
    from cacheproof.impl import TensorLRUCache

    cache = TensorLRUCache(64, device="cpu")
    for element_size, tag in ((1, 0), (2, 5), (4, 2), (8, 7)):
        value = value_for(cache, 16, tag, element_size=element_size)
        assert isinstance(value, torch.Tensor) and value.element_size() == element_size and value.nbytes == 16


class RecordsElementSizes(CacheSpec):
    """The spec, noting the element size of every value it is handed."""

    seen: set = set()

    def commit(self, key, value):
        RecordsElementSizes.seen.add(getattr(value, "itemsize", 1))
        return super().commit(key, value)

    def put(self, key, value):
        RecordsElementSizes.seen.add(getattr(value, "itemsize", 1))
        return super().put(key, value)


def test_a_default_check_hands_a_plain_cache_values_of_every_element_size():
    RecordsElementSizes.seen = set()
    report = check_cache(RecordsElementSizes, examples=60, seed=0)
    assert report.counterexample is None
    assert RecordsElementSizes.seen == {1, 2, 4, 8}


def test_a_cache_that_sizes_values_by_element_count_is_found_at_seed_0():
    report = check_cache(SizesByElementCount, examples=200, seed=0)
    assert report.counterexample is not None
    recipes = [a for call in report.counterexample.calls for a in call.args if isinstance(a, ValueRecipe)]
    assert any(recipe.element_size > 1 for recipe in recipes), report.counterexample.calls


def test_recipes_round_trip_and_old_recipes_keep_their_form():
    new = ValueRecipe(8, 3, 4)
    assert decode_value(json.loads(json.dumps(encode_value(new)))) == new
    old = {"nbytes": 4, "tag": 7}
    assert decode_value(old) == ValueRecipe(4, 7, None) and encode_value(decode_value(old)) == old


def test_argument_simplification_keeps_a_recipes_element_size_dividing_its_bytes():
    simpler = _simpler(ValueRecipe(8, 3, 8))
    assert simpler and all(recipe.problem() is None for recipe in simpler)
    assert ValueRecipe(8, 3, 4) in simpler and ValueRecipe(4, 3, 8) not in simpler


HEADER = '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 16}'


@pytest.mark.parametrize("element_size", [3, 8, "2"])
def test_a_trace_with_an_impossible_element_size_names_the_line(element_size):
    line = json.dumps({"op": "put", "args": [1, {"nbytes": 12, "tag": 0, "element_size": element_size}],
                       "kwargs": {}, "result": True})
    with pytest.raises(TraceFormatError, match="line 2: a value recipe's element_size"):
        parse_trace("\n".join([HEADER, line]))


def _replay(tmp_path, text: str, impl: str) -> int:
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    return main(["replay", str(path), "--impl", impl, "--quiet"])


def test_a_trace_without_element_sizes_replays(tmp_path):
    lines = [HEADER,
             '{"op": "acquire", "args": [0, 4], "kwargs": {}, "result": "NEW_RESERVATION"}',
             '{"op": "commit", "args": [0, {"nbytes": 4, "tag": 7}], "kwargs": {}, "result": []}',
             '{"op": "get", "args": [0], "kwargs": {}, "result": {"nbytes": 4, "tag": 7}}']
    text = "\n".join(lines) + "\n"
    assert _replay(tmp_path, text, "cacheproof.spec:CacheSpec") == 0
    assert _replay(tmp_path, text, "model_tests.broken_caches:SizesByElementCount") == 0  # bytes: no element size


def test_a_trace_written_now_replays_and_finds_the_element_count_bug(tmp_path):
    calls = [Call("acquire", (0, 8)), Call("commit", (0, drawn_recipe(8, 2))), Call("get", (0,))]
    assert calls[1].args[1].element_size == 4
    text = trace_text(spec_trace(16, calls))
    assert '"element_size": 4' in text
    assert _replay(tmp_path, text, "cacheproof.spec:CacheSpec") == 0
    assert _replay(tmp_path, text, "model_tests.broken_caches:SizesByElementCount") == 1


def test_the_monitor_records_the_element_size_of_the_values_it_sees():
    torch = pytest.importorskip("torch")
    from cacheproof.trace.monitor import monitor

    cache = monitor(CacheSpec(64))
    cache.put("half", torch.zeros(4, dtype=torch.float16))
    cache.put("wide", numpy.zeros(2, dtype=numpy.float64))
    cache.put("raw", b"abc")
    recorded = [traced.call.args[1] for traced in cache.trace.calls]
    assert recorded == [ValueRecipe(8, 0, 2), ValueRecipe(16, 0, 8), ValueRecipe(3, 0, 1)]
