"""A checker is proven by the bugs it catches: `cacheproof check` exits 1 on every broken cache,
the counterexample it prints is legal for the spec and wrong for the broken cache, and its snippet
fails when run, where the checker saw the difference, and passes on the spec."""

from __future__ import annotations

import json

import pytest

from cacheproof.contract import calls as call_format
from cacheproof.cli import main
from cacheproof.contract.sequence import first_divergence
from cacheproof.spec import CacheSpec
from model_tests.broken_caches import BROKEN_CACHES
from model_tests.snippet_runs import assert_fails_where_it_diverges, on_cache, run_snippet, snippets_in

CONTRACT_ERRORS = {
    "InvalidArgumentError", "TooLargeError", "UnknownKeyError", "WrongStateError", "ConflictError", "CapacityError",
}


def test_there_are_at_least_eight_broken_caches():
    assert len(BROKEN_CACHES) >= 8
    assert len({cls.__doc__ for cls in BROKEN_CACHES}) == len(BROKEN_CACHES)


@pytest.mark.parametrize("broken", BROKEN_CACHES, ids=lambda cls: cls.__name__)
def test_check_finds_the_bug(broken, tmp_path, capsys):
    path = tmp_path / "report.json"
    impl = f"model_tests.broken_caches:{broken.__name__}"
    status = main(["check", "--impl", impl, "--max-divergences", "1", "--json", str(path)])
    output = capsys.readouterr().out
    assert status == 1, output
    (snippet,) = snippets_in(output)
    assert_fails_where_it_diverges(snippet)
    fixed = run_snippet(on_cache(snippet, "cacheproof.spec", "CacheSpec"))
    assert fixed.returncode == 0, f"{fixed.error}\n{snippet}"
    counterexample = json.loads(path.read_text())["divergences"][0]
    calls = [call_format.from_json(call) for call in counterexample["calls"]]
    capacity = counterexample["size"]
    assert first_divergence(CacheSpec, capacity, calls) is None
    divergence = first_divergence(broken, capacity, calls)
    assert divergence is not None and divergence.step == len(calls) - 1
    cache_side = divergence.difference.actual
    assert cache_side.crash is None and (cache_side.error is None or cache_side.error in CONTRACT_ERRORS), (
        f"the broken cache must be caught by its bug, not by an unrelated crash: {divergence.message}"
    )
