"""Every printed counterexample fails when run, where the checker saw the difference, and passes on a
correct cache (issue 11 point 2): the snippets `cacheproof check` prints for the broken profile
caches and the caches whose inspections or values fail. The contract's broken caches are run the
same way in test_checker_bites.py, on the output of the check it already makes."""

from __future__ import annotations

import pytest

from cacheproof.cli import main
from model_tests.snippet_runs import assert_fails_where_it_diverges, on_cache, run_snippet, snippets_in

PROFILE_CASES = [
    ("PutEvictsItselfCache", ["--profile", "trtllm-tensor-lru"],
     "examples.trtllm_tensor_lru_cache", "TrtllmTensorLRUCache"),
    ("OversizedSetEvictsAllCache", ["--profile", "plain-lru"], "examples.plain_lru_cache", "PlainLRUCache"),
    ("GetRefreshesCache", ["--profile", "plain-lru"], "examples.plain_lru_cache", "PlainLRUCache"),
    ("OversizedSetEvictsAllCache", ["--ops", "put,get,pop,clear,contains"], "cacheproof.spec", "CacheSpec"),
]


def _check_output(impl: str, extra: list[str], capsys, examples: int = 60, divergences: int = 3) -> str:
    status = main(["check", "--impl", impl, "--examples", str(examples), "--steps", "30",
                   "--max-divergences", str(divergences), *extra])
    output = capsys.readouterr().out
    assert status == 1, output
    return output


@pytest.mark.parametrize("name, flags, module, correct", PROFILE_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_profile_cache_snippets_fail_and_pass_on_a_conforming_cache(name, flags, module, correct, capsys):
    snippets = snippets_in(_check_output(f"model_tests.broken_profile_caches:{name}", flags, capsys, examples=200))
    assert snippets
    for snippet in snippets:
        assert_fails_where_it_diverges(snippet)
        fixed = run_snippet(on_cache(snippet, module, correct))
        assert fixed.returncode == 0, f"{fixed.error}\n{snippet}"


@pytest.mark.parametrize("name, error", [
    ("SnapshotRaises", "RuntimeError"),
    ("StatsRaises", "ValueError"),
    ("LenRaises", "OverflowError"),
    ("MakeValueRaises", "MemoryError"),
    ("GetReturnsUncomparable", "TypeError"),
])
def test_snippets_of_failing_inspections_and_values_raise_there(name, error, capsys):
    snippets = snippets_in(_check_output(f"model_tests.faulty_caches:{name}", [], capsys, divergences=2))
    assert snippets
    errors = []
    for snippet in snippets:
        run = assert_fails_where_it_diverges(snippet)
        assert run.error.startswith(error) or run.error.startswith("AssertionError"), run.error
        errors.append(run.error)
        fixed = run_snippet(on_cache(snippet, "cacheproof.spec", "CacheSpec"))
        assert fixed.returncode == 0, f"{fixed.error}\n{snippet}"
    assert any(snippet_error.startswith(error) for snippet_error in errors), f"no snippet raises {error}"
