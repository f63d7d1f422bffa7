"""`program_test_case`: the pytest kit class of the block pool kind passes for a correct pool, fails
for a broken one with a runnable snippet, and takes its budget from the active Hypothesis settings."""

from __future__ import annotations

import unittest

import pytest
from hypothesis import settings

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.testing import program_test_case
from model_tests.block_pools import DoubleFreePool, ListBlockPool


def run_case(case: type[unittest.TestCase]) -> unittest.TestResult:
    result = unittest.TestResult()
    case().run(result)
    return result


def test_kit_class_passes_for_a_correct_pool():
    case = program_test_case(ListBlockPool, examples=25)
    assert case.__name__ == "TestListBlockPool" and case.__module__ == __name__
    result = run_case(case)
    assert result.wasSuccessful(), result.failures + result.errors


def test_kit_class_fails_for_a_broken_pool_with_a_failing_snippet():
    result = run_case(program_test_case(DoubleFreePool, "blocks", examples=40))
    assert len(result.failures) == 1
    message = result.failures[0][1]
    assert "model_tests.block_pools:DoubleFreePool diverges from the blocks spec: cache.free(" in message
    snippet = message[message.index("# cacheproof counterexample (blocks)"):]  # the message ends with it
    assert "from model_tests.block_pools import DoubleFreePool as factory" in snippet
    with pytest.raises(AssertionError):
        exec(compile(snippet, "snippet", "exec"), {})


def test_examples_default_to_the_active_settings(monkeypatch):
    built = []

    def counted(num_blocks: int) -> ListBlockPool:
        built.append(num_blocks)
        return ListBlockPool(num_blocks)

    previous = settings.get_current_profile_name()
    settings.register_profile("block-kit-seven", max_examples=7)
    settings.load_profile("block-kit-seven")
    try:
        result = run_case(program_test_case(counted))
    finally:
        settings.load_profile(previous)
    assert result.wasSuccessful()
    assert len(built) == 7  # one pool per example, no shrinking on a conforming pool


def test_bad_kind_or_profile_is_refused_when_the_class_is_made():
    with pytest.raises(InvalidArgumentError, match="unknown spec kind"):
        program_test_case(ListBlockPool, "pagers")
    with pytest.raises(InvalidArgumentError, match="vllm-block-pool"):
        program_test_case(ListBlockPool, profile="lru")
