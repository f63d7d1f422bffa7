"""The pytest plugin and `cache_test`: a user's suite checks a cache with plain `@given` tests that
pytest, pytest-xdist and HypoFuzz run unchanged; a failure names the bound test, shows the user's
frames and a runnable snippet, and no path inside cacheproof."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.internal.reflection import function_digest

from cacheproof.contract.keys import KEY_DOMAINS
from cacheproof.spec import CacheSpec
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import kind_names
from cacheproof.testing import cache_test
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.testing.functions import CacheDivergence, Program
from cacheproof.testing.plugin import key_by

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
OURS = (str(ROOT / "cacheproof") + os.sep, str(ROOT / "spec") + os.sep, f"site-packages{os.sep}hypothesis{os.sep}")
"""Paths no failure a user sees may show: cacheproof's source, the spec's, Hypothesis's."""

USERS_CACHE = '''
from examples.minimal_cache import MinimalCache


class CrashingCache(MinimalCache):
    """Looks its entry up before releasing it, and so raises KeyError for a key it does not hold."""

    def release(self, key):
        entry = self._entries[key]  # the user's bug
        return super().release(key)
'''

USERS_TESTS = '''
from hypothesis import settings
settings.register_profile("users", max_examples=60, derandomize=True, database=None)
settings.load_profile("users")

from cacheproof.testing import cache_test
from examples.minimal_cache import MinimalCache
from model_tests.broken_caches import GetTakesReference
from users_cache import CrashingCache

test_minimal_cache = cache_test(MinimalCache, keys="tuple")
test_my_cache = cache_test(CrashingCache, keys="str")


def test_inside_a_test(cacheproof_check):
    cacheproof_check(GetTakesReference, ops=["put", "get", "release"])
'''


@pytest.fixture
def users_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's test folder: their cache, their tests, the repository importable, no CI profile."""
    pytester.makepyfile(users_cache=USERS_CACHE, test_users=USERS_TESTS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(pytester.path)]))
    for name in ("CI", "HYPOTHESIS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def _failure_of(output: str, test: str) -> str:
    """The failure section of `test` in pytest's output."""
    sections = re.split(r"^_{3,} (\S+) _{3,}$", output, flags=re.M)
    return dict(zip(sections[1::2], sections[2::2]))[test]


def _check_the_users_failures(result: pytest.RunResult, folder: Path) -> None:
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert not [path for path in OURS if path in output], output
    crash = _failure_of(output, "test_my_cache")
    assert "Failing test case: test_my_cache(" in crash
    assert re.search(r"users_cache.py:\d+: KeyError", crash) and "entry = self._entries[key]  # the user's bug" in crash
    assert "users_cache:CrashingCache diverges from the cache spec: cache.release(" in crash
    inside = _failure_of(output, "test_inside_a_test")
    assert "Failing test case: test_inside_a_test(" in inside
    assert 'cacheproof_check(GetTakesReference, ops=["put", "get", "release"])' in inside
    assert "model_tests.broken_caches:GetTakesReference diverges from the cache spec" in inside
    snippet = re.search(r"shrunk to \d+ calls:\n(.*?)\n\s*\n\s*Failing test case", crash, re.S).group(1)
    script = "\n".join(line.removeprefix("    ") for line in snippet.splitlines())
    assert "cache.release(" in script and "from users_cache import CrashingCache as factory" in script
    replay = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
                            env={**os.environ}, timeout=60)
    assert replay.returncode != 0 and "KeyError" in replay.stderr, replay.stderr


def test_a_failure_shows_the_bound_name_the_users_frames_and_a_snippet_that_fails(users_suite: pytest.Pytester) -> None:
    result = users_suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    _check_the_users_failures(result, users_suite.path)


def test_pytest_xdist_runs_the_tests_unchanged(users_suite: pytest.Pytester) -> None:
    result = users_suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert "2 workers" in result.stdout.str()
    _check_the_users_failures(result, users_suite.path)


SETTINGS_PROBE = '''
from hypothesis import settings

def test_the_active_settings():
    ci = settings.get_profile("ci")
    print("ACTIVE", settings.get_current_profile_name(), settings.default.max_examples, ci.derandomize, ci.max_examples)
'''


@pytest.mark.parametrize(
    "options, active",
    [((), "default 100"), (("--cacheproof-settings", "thorough"), "cacheproof-thorough 2000"),
     (("--hypothesis-profile", "cacheproof-ci"), "cacheproof-ci 50")],
)
def test_cacheproof_settings_load_only_when_asked_and_leave_hypothesis_ci_alone(
    users_suite: pytest.Pytester, options: tuple[str, ...], active: str,
) -> None:
    users_suite.makepyfile(test_probe=SETTINGS_PROBE)
    result = users_suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-s", "test_probe.py", *options)
    result.assert_outcomes(passed=1)
    assert f"ACTIVE {active} True " in result.stdout.str()  # Hypothesis's own ci profile: derandomized


def test_an_unknown_settings_name_is_a_usage_error(users_suite: pytest.Pytester) -> None:
    result = users_suite.runpytest_subprocess("-p", "no:cacheprovider", "--cacheproof-settings", "fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--cacheproof-settings 'fast': cacheproof's settings are ci, dev, thorough" in result.stderr.str()


# In process ------------------------------------------------------------------------------------


@pytest.fixture
def few_examples():
    """A small derandomized profile, active while the tests are made (they take it then)."""
    previous = settings.get_current_profile_name()
    settings.register_profile("cacheproof-plugin-test", max_examples=20, derandomize=True, database=None)
    settings.load_profile("cacheproof-plugin-test")
    yield
    settings.load_profile(previous)


@pytest.mark.parametrize("domain", sorted(KEY_DOMAINS))
def test_the_tests_call_with_keys_of_the_domain_asked_for(few_examples, domain: str) -> None:
    seen: list = []

    class Recording(CacheSpec):
        def put(self, key, value):
            seen.append(key)
            return super().put(key, value)

    cache_test(Recording, keys=domain, ops=["put", "get"])()
    hashable = [key for key in seen if not isinstance(key, list)]  # bad arguments put [key]
    assert hashable and set(hashable) <= set(KEY_DOMAINS[domain][:6])


def test_each_key_domain_holds_sixteen_distinct_keys_of_its_kind() -> None:
    kinds = {"int": (int,), "str": (str,), "bytes": (bytes,), "tuple": (tuple,), "mixed": (int, str, bytes, tuple)}
    assert set(KEY_DOMAINS) == set(kinds)
    for name, keys in KEY_DOMAINS.items():
        assert len(set(keys)) == len(keys) == 16 and all(type(key) in kinds[name] for key in keys), name
        assert not any(isinstance(key, bool) for key in keys)
    assert len({type(key) for key in KEY_DOMAINS["mixed"][:6]}) == 4  # the small scope meets every type


@pytest.mark.parametrize(
    "options, named",
    [({"keys": "float"}, "keys 'float': the key domains are int, str, bytes, tuple, mixed"),
     ({"scope": "huge"}, "scope 'huge': the scopes are small, wide, long"),
     ({"steps": 0}, "steps 0"),
     ({"ops": ["peek"]}, "peek"),
     ({"profile": "redis"}, "redis")],
)
def test_a_bad_option_is_refused_when_the_test_is_made(options: dict, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(named)):
        cache_test(CacheSpec, **options)


def test_each_bound_test_has_a_database_key_of_its_own() -> None:
    first, second = cache_test(CacheSpec), cache_test(CacheSpec)
    assert function_digest(first.hypothesis.inner_test) == function_digest(second.hypothesis.inner_test)
    key_by(first, "test_users.py::test_a")
    key_by(second, "test_users.py::test_b")
    assert function_digest(first.hypothesis.inner_test) != function_digest(second.hypothesis.inner_test)


def test_a_program_prints_short_and_not_as_python() -> None:
    text = repr(Program(bytes(800)))
    assert text.startswith("<Program: picks ") and len(text) < 80
    assert repr(Program(bytes(3))) == repr(Program(b""))  # trailing zeros read as none
    assert repr(Program(b"\x01")) != repr(Program(b""))


# Another spec kind: the KV block pool ------------------------------------------------------------

USERS_POOL = '''
from cacheproof.spec.blocks.pool import BlockPoolSpec


class ForgetfulPool(BlockPoolSpec):
    """Looks the request's table up before freeing it, and so raises KeyError for a request it never saw."""

    def free_request(self, request):
        table = self._tables[request]  # the user's bug
        return super().free_request(request)
'''

USERS_POOL_TESTS = '''
from hypothesis import settings
settings.register_profile("users", max_examples=100, derandomize=True, database=None)
settings.load_profile("users")

from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.testing import cache_test
from model_tests.block_pools import DoubleFreePool
from users_pool import ForgetfulPool

test_spec_pool = cache_test(BlockPoolSpec, spec="blocks")
test_my_pool = cache_test(ForgetfulPool, spec="blocks")


def test_pool_inside_a_test(cacheproof_check):
    cacheproof_check(DoubleFreePool, spec="blocks", ops=["allocate", "free", "num_free"])
'''


def test_a_block_pool_test_fails_like_a_cache_test(users_suite: pytest.Pytester) -> None:
    """cache_test(..., spec="blocks") and cacheproof_check(..., spec="blocks"): the bound name, the
    user's frames only, the pool's own exception, and a snippet that fails when run."""
    users_suite.makepyfile(users_pool=USERS_POOL, test_users=USERS_POOL_TESTS)
    result = users_suite.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert not [path for path in OURS if path in output], output
    crash = _failure_of(output, "test_my_pool")
    assert "Failing test case: test_my_pool(" in crash and "program=<Program: picks " in crash
    assert re.search(r"users_pool.py:\d+: KeyError", crash) and "table = self._tables[request]  # the user's bug" in crash
    assert "users_pool:ForgetfulPool diverges from the blocks spec: cache.free_request(" in crash
    inside = _failure_of(output, "test_pool_inside_a_test")
    assert "model_tests.block_pools:DoubleFreePool diverges from the blocks spec: cache.free(" in inside
    for failure, factory in ((crash, "ForgetfulPool"), (inside, "DoubleFreePool")):
        snippet = re.search(r"shrunk to \d+ calls:\n(.*?)\n[E ]*\n[E ]*Failing test case", failure, re.S).group(1)
        script = "\n".join(re.sub(r"^(E {7}| {4})", "", line) for line in snippet.splitlines())  # pytest's margins
        assert f"import {factory} as factory" in script and "# <- diverges here" in script
        replay = subprocess.run([sys.executable, "-c", script], cwd=users_suite.path, capture_output=True, text=True,
                                env={**os.environ}, timeout=60)
        assert replay.returncode != 0, script
    assert "KeyError" in replay.stderr or "AssertionError" in replay.stderr


@pytest.mark.parametrize(
    "options, named",
    [({"spec": "lsm-tree"}, "spec 'lsm-tree': the spec kinds are " + ", ".join(kind_names())),
     ({"spec": "blocks", "keys": "str"}, "keys 'str': spec kind 'blocks' draws its request ids from int only"),
     ({"spec": "blocks", "scope": "huge"}, "scope 'huge': the scopes are small, wide, long"),
     ({"spec": "blocks", "profile": "plain-lru"}, "profile 'plain-lru': spec kind 'blocks' has the profiles contract"),
     ({"spec": "blocks", "ops": ["reserve"]}, "not reserve"),
     ({"spec": "blocks", "ops": []}, "name at least one"),
     ({"spec": "blocks", "steps": -1}, "steps -1")],
)
def test_a_bad_option_of_a_block_pool_test_is_refused_when_it_is_made(options: dict, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=re.escape(named)):
        cache_test(BlockPoolSpec, **options)


def test_a_block_pool_test_runs_in_process_and_fails_on_a_broken_pool(few_examples) -> None:
    """The same function pytest collects, called directly: the spec itself conforms, a broken pool
    fails with the divergence and its shrunk snippet."""
    from model_tests.block_pools import DoubleFreePool

    cache_test(BlockPoolSpec, spec="blocks")()
    cache_test(BlockPoolSpec, spec="blocks", scope="wide")()  # every kind declares its scopes (issue 32)
    with pytest.raises(CacheDivergence, match=r"DoubleFreePool diverges from the blocks spec: (?s:.*)shrunk to \d+ calls"):
        cache_test(DoubleFreePool, spec="blocks")()
