"""`cache_test_case`: the generated TestCase fails on a broken cache, passes on the spec, and runs
under the active Hypothesis profile."""

from __future__ import annotations

import functools
import importlib
import io
import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

import pytest
from cacheproof.spec import CacheSpec
from hypothesis import settings

from cacheproof.testing import active_settings, cache_test_case
from model_tests.broken_caches import ReleaseOfIdleIsNoop


@pytest.fixture
def quick_profile():
    """A small, derandomized profile without an example database (nothing is written to the repo)."""
    previous = settings.get_current_profile_name()
    settings.register_profile("cacheproof-kit-test", max_examples=25, derandomize=True, database=None)
    settings.load_profile("cacheproof-kit-test")
    yield
    settings.load_profile(previous)


def _run(test_case: type[unittest.TestCase]) -> unittest.TestResult:
    return unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(test_case())


def test_broken_cache_fails_with_a_reproducing_snippet(quick_profile):
    result = _run(cache_test_case(ReleaseOfIdleIsNoop))
    assert not result.wasSuccessful()
    assert len(result.failures) == 1 and not result.errors
    report = result.failures[0][1]
    assert "WrongStateError" in report
    assert "from model_tests.broken_caches import ReleaseOfIdleIsNoop as factory" in report
    assert "# <- diverges here" in report


def test_spec_passes(quick_profile):
    result = _run(cache_test_case(CacheSpec))
    assert result.wasSuccessful() and result.testsRun == 1


def test_the_active_profile_decides_the_number_of_examples(quick_profile):
    made = []

    def counting_factory(capacity_bytes: int) -> CacheSpec:
        made.append(capacity_bytes)
        return CacheSpec(capacity_bytes)

    settings.register_profile("cacheproof-kit-test", max_examples=7, derandomize=True, database=None)
    assert _run(cache_test_case(counting_factory, steps=5)).wasSuccessful()
    assert len(made) == 7
    assert active_settings(5).max_examples == 7 and active_settings(5).stateful_step_count == 5


def test_explicit_settings_on_the_class_win(quick_profile):
    made = []
    test_case = cache_test_case(lambda capacity: made.append(capacity) or CacheSpec(capacity), name="Spec")
    test_case.settings = settings(max_examples=3, database=None, derandomize=True, stateful_step_count=4)
    assert test_case.__name__ == "TestSpec"
    assert _run(test_case).wasSuccessful()
    assert len(made) == 3


def test_without_a_loaded_profile_cacheproofs_own_is_used_for_these_tests_only(monkeypatch):
    previous = settings.get_current_profile_name()
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "cacheproof-thorough")
    settings.load_profile("default")
    try:
        assert active_settings().max_examples == 2000  # cacheproof's "cacheproof-thorough" settings
        assert settings.get_current_profile_name() == "default"  # the global profile is left alone
    finally:
        settings.load_profile(previous)


# concurrent_cache_test_case -----------------------------------------------------------------


def test_a_racy_cache_fails_the_concurrent_test_case_with_a_runnable_script():
    from cacheproof.testing import concurrent_cache_test_case
    from model_tests.racy_caches import LostRefcountUpdate

    test_case = concurrent_cache_test_case(LostRefcountUpdate, scenarios=100)
    assert test_case.__name__ == "TestLostRefcountUpdateConcurrently"
    result = _run(test_case)
    assert len(result.failures) == 1 and not result.errors
    report = result.failures[0][1]
    assert "not linearizable: no order of the" in report
    assert "observed history:" in report
    assert "from model_tests.racy_caches import LostRefcountUpdate as factory" in report


def test_a_locked_cache_passes_the_concurrent_test_case():
    from cacheproof.testing import concurrent_cache_test_case
    from model_tests.racy_caches import LockedCacheSpec

    made = []

    def counting_factory(capacity_bytes: int) -> LockedCacheSpec:
        made.append(capacity_bytes)
        return LockedCacheSpec(capacity_bytes)

    test_case = concurrent_cache_test_case(counting_factory, threads=2, runs=3)
    test_case.scenarios = 10
    result = _run(test_case)
    assert result.wasSuccessful() and result.testsRun == 1
    assert len(made) == 10 * 3


# What pytest shows a user ---------------------------------------------------------------------

_USERS_TEST_FILE = """
from hypothesis import settings
from cacheproof.testing import cache_test_case
from model_tests.broken_caches import GetTakesReference

settings.register_profile("tiny", max_examples=30, derandomize=True, database=None)
settings.load_profile("tiny")
TestMyCache = cache_test_case(GetTakesReference, steps=20)
"""


def test_pytest_shows_the_snippet_and_the_divergence_only(tmp_path):
    (tmp_path / "test_users_cache.py").write_text(_USERS_TEST_FILE)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "test_users_cache.py"],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    lines = out.splitlines()
    assert not [line for line in lines if re.match(r"^E?\s*state\.", line)], out  # Hypothesis's rule dump
    assert "Falsifying example" not in out and "Failing test case" not in out, out
    assert "from model_tests.broken_caches import GetTakesReference as factory" in out
    assert "# <- diverges here" in out
    assert "model_tests.broken_caches:GetTakesReference diverges from the cache spec" in out
    assert "TestGetTakesReference" in out
    assert len(lines) < 45, out  # the session header, the divergence and the snippet (one assertion per difference)


def _make_cache(capacity_bytes: int) -> CacheSpec:
    return CacheSpec(capacity_bytes)


@pytest.mark.parametrize(
    "factory, expected",
    [
        (ReleaseOfIdleIsNoop, "TestReleaseOfIdleIsNoop"),
        (CacheSpec, "TestCacheSpec"),
        (_make_cache, "Test_make_cache"),
        (functools.partial(ReleaseOfIdleIsNoop), "TestReleaseOfIdleIsNoop"),
        (lambda capacity: CacheSpec(capacity), "TestCache"),
    ],
)
def test_each_class_is_named_after_the_cache_it_tests(factory, expected):
    first = cache_test_case(CacheSpec)
    made = cache_test_case(factory)
    assert made.__name__ == made.__qualname__ == expected
    assert made.__module__ == __name__  # reports name the user's test file, not cacheproof.testing
    assert first.__name__ == "TestCacheSpec"


def test_two_caches_of_the_same_name_get_test_classes_of_their_own(tmp_path, monkeypatch):
    """A user's cache and a buggy copy of it, both classes called MyCache, in one test file."""
    (tmp_path / "users_cache.py").write_text("from cacheproof.spec import CacheSpec\nclass MyCache(CacheSpec):\n    pass\n")
    (tmp_path / "users_buggy.py").write_text(
        "from model_tests.broken_caches import GetTakesReference\nclass MyCache(GetTakesReference):\n    pass\n"
    )
    (tmp_path / "test_users_two.py").write_text(
        "import users_buggy, users_cache\nfrom cacheproof.testing import cache_test_case\n"
        "TestMine = cache_test_case(users_cache.MyCache)\nTestBuggy = cache_test_case(users_buggy.MyCache)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("test_users_two", "users_cache", "users_buggy"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # removed again after the test
    module = importlib.import_module("test_users_two")
    assert module.TestMine.__name__ == "TestMyCache" and module.TestBuggy.__name__ == "TestMyCacheFromUsers_buggy"
    assert repr(module.TestBuggy()) == "<TestMyCacheFromUsers_buggy testing users_buggy:MyCache>"
    assert module.TestBuggy.__module__ == "test_users_two"
