"""Search power (issue 27): the broken caches and pools of sharing classes, and the measure.

- Every broken sharing cache and pool diverges at the last call of the shortest sequence its
  docstring gives, and the correct cache or pool runs that sequence as the spec does: the
  docstrings the measure's reader relies on are replayed, not trusted.
- tools/search_power.py: its table, its target selection and its usage errors.
- The target the generation work aims at (slow): a default `cacheproof check --seed S` with its
  fixed count of examples (`--budget 0`, as under CI) finds every broken cache and pool of
  model_tests on each of the seeds 0..9 (tools/search_power.py's targets,
  the broken scope caches aside: a default run is not meant to find those, docs/scope.md). On the
  figures of docs/search-power.md it does not yet hold for every target.
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import asdict

import pytest

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.sequence import first_divergence
from examples.minimal_cache import MinimalCache
from model_tests.block_pools import ListBlockPool
from model_tests.broken_sharing_caches import BROKEN_SHARING_CACHES
from model_tests.broken_sharing_pools import BROKEN_SHARING_POOLS
from tools import search_power
from cacheproof.cmdline.budget import DEFAULT_BUDGET_SECONDS
from tools.search_power import Row, Run, Target

SEEDS = 10

SEQUENCE = re.compile(
    r"(?:Shortest|At the request level)(?:, (\d+) calls)? \((?:capacity (\d+)|(\d+) blocks)\): (.+?) ->", re.S
)
"""A documented sequence: its optional length, the capacity or number of blocks, the calls."""


def _top_level_items(text: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    return [*items, current.strip()]


def _calls(text: str, cache: bool) -> list[Call]:
    """The calls of a documented sequence: `op(args)`, `N × op(args)`; in a cache's, `put(k, n)`
    puts n bytes and `commit(k, b)` commits a value of the size k was reserved with."""
    reserved: dict = {}
    calls = []
    for item in _top_level_items(text):
        times, _, written = item.rpartition("× ")
        node = ast.parse(written, mode="eval").body
        op = node.func.id
        args = [None if isinstance(arg, ast.Name) else ast.literal_eval(arg) for arg in node.args]
        kwargs = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
        if cache and op in ("reserve", "acquire"):
            reserved.setdefault(args[0], args[1])
        if cache and op in ("put", "commit"):
            args[1] = ValueRecipe(args[1] if op == "put" else reserved[args[0]], len(calls) % 256)
        calls += [Call(op, tuple(args), kwargs)] * int(times or 1)
    return calls


def documented(cls) -> list[tuple[int | None, int, list[Call]]]:
    """Each (documented length, capacity or blocks, calls) of `cls`'s docstring."""
    found = [(int(length) if length else None, int(capacity or blocks), _calls(text, cache=capacity is not None))
             for length, capacity, blocks, text in SEQUENCE.findall(" ".join(cls.__doc__.split()))]
    assert found, f"{cls.__name__}'s docstring gives no shortest sequence"
    return found


def test_there_are_broken_caches_and_pools_of_the_sharing_classes():
    assert len(BROKEN_SHARING_CACHES) >= 10 and len(BROKEN_SHARING_POOLS) >= 4
    documents = [cls.__doc__ for cls in BROKEN_SHARING_CACHES + BROKEN_SHARING_POOLS]
    assert len(set(documents)) == len(documents)


@pytest.mark.parametrize("cache", BROKEN_SHARING_CACHES, ids=lambda cls: cls.__name__)
def test_each_broken_cache_diverges_at_the_last_call_of_its_documented_sequence(cache):
    for length, capacity, calls in documented(cache):
        assert length is None or length == len(calls)
        assert first_divergence(MinimalCache, capacity, calls) is None
        divergence = first_divergence(cache, capacity, calls)
        assert divergence is not None and divergence.step == len(calls) - 1, (calls, divergence)


def _first_difference(factory, blocks: int, calls: list[Call]) -> int | None:
    found = first_divergence(factory, blocks, calls, kind="blocks")
    return None if found is None else found.step


@pytest.mark.parametrize("pool", BROKEN_SHARING_POOLS, ids=lambda cls: cls.__name__)
def test_each_broken_pool_diverges_at_the_last_call_of_its_documented_sequences(pool):
    for _, blocks, calls in documented(pool):
        assert _first_difference(ListBlockPool, blocks, calls) is None
        assert _first_difference(pool, blocks, calls) == len(calls) - 1, calls


def test_the_targets_are_every_broken_cache_and_pool_once():
    names = [target.factory_name for target in search_power.targets()]
    assert len(names) == len(set(names))
    for cls in BROKEN_SHARING_CACHES + BROKEN_SHARING_POOLS:
        assert cls.__name__ in names
    assert "FixedTableOfEight" not in names
    assert "FixedTableOfEight" in [target.factory_name for target in search_power.targets(thorough=True)]
    blocks = [target for target in search_power.targets() if "--spec" in target.flags]
    assert {target.impl.partition(":")[0] for target in blocks} == {
        "model_tests.block_pools", "model_tests.broken_sharing_pools", "model_tests.null_block_pools"}


def test_a_run_is_the_default_check_with_its_seed_and_one_divergence(tmp_path):
    target = Target("model_tests.broken_profile_caches:GetRefreshesCache", ("--profile", "plain-lru"))
    counted = search_power.check_arguments(target, 7, tmp_path / "r.json", "count")
    assert counted[:5] == ["check", "--impl", target.impl, "--seed", "7"]
    assert "--max-divergences" in counted and "--examples" not in counted and "--steps" not in counted
    assert counted[-4:] == ["--budget", "0", "--profile", "plain-lru"]
    budgeted = search_power.check_arguments(target, 7, tmp_path / "r.json", "budget")
    assert "--budget" not in budgeted and budgeted[-2:] == ["--profile", "plain-lru"]
    thorough = Target("model_tests.broken_scope_caches:FixedTableOfEight", ("--thorough",))
    assert "--budget" not in search_power.check_arguments(thorough, 0, tmp_path / "r.json", "count")


def test_the_table_counts_found_seeds_and_times_over_the_found_ones_only():
    runs = (Run("m:A", 0, 1, 9.0, 2.0, 0.5, 4), Run("m:A", 1, 0, 30.0, 20.0, None, None),
            Run("m:A", 2, 1, 9.0, 4.0, 1.5, 3))
    table = search_power.format_table([Row("m:A", runs)])
    assert "| m:A | 2/3 | 1.5 / 1.0 | 4.0 / 3.0 | 1 | 3 calls |" in table
    assert search_power.summary([Row("m:A", runs)]) == "0 of 1 targets found on every seed"


def test_saved_runs_print_the_same_table(tmp_path, capsys):
    runs = [Run("m:A", 0, 1, 9.0, 2.0, 0.5, 4), Run("m:B", 0, 0, 9.0, 9.0, None, None), Run("m:A", 1, 1, 9.0, 4.0, 1.5, 3)]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps([asdict(run) for run in runs[:2]]))
    second.write_text(json.dumps([asdict(runs[2])]))
    assert search_power.main(["--from", str(first), str(second)]) == 1
    shown = capsys.readouterr().out
    assert "| m:A | 2/2 |" in shown and "| m:B | 0/1 |" in shown and "1 of 2 targets found on every seed" in shown


def test_an_unknown_target_or_a_bad_count_is_a_usage_error(capsys):
    assert search_power.main(["--only", "NoSuchCache"]) == 2
    assert "--only NoSuchCache: not a target" in capsys.readouterr().err
    assert search_power.main(["--seeds", "0"]) == 2


def test_each_run_sets_aside_what_would_change_its_budget_or_replay_stored_examples(monkeypatch):
    for name, value in (("CI", "true"), ("CACHEPROOF_BUDGET", "5"), ("CACHEPROOF_DATABASE", "/nowhere")):
        monkeypatch.setenv(name, value)
    with search_power._run_environment():
        assert not {"CI", "CACHEPROOF_BUDGET", "CACHEPROOF_DATABASE"} & set(os.environ)
    assert os.environ["CI"] == "true" and os.environ["CACHEPROOF_DATABASE"] == "/nowhere"


@pytest.mark.parametrize("target", search_power.targets(), ids=lambda target: target.name)
def test_a_default_run_finds_each_broken_cache_on_ten_of_ten_seeds(target):
    """The interactive default searches for DEFAULT_BUDGET_SECONDS of wall time, which a loaded
    machine spends on fewer programs; the same search with a budget it cannot run out of, held to
    the default budget in CPU seconds, says the same of an idle machine wherever the test runs."""
    runs = [search_power.run_once(target, seed, "long-budget") for seed in range(SEEDS)]
    assert all(run.status in (0, 1) for run in runs), [(run.seed, run.status) for run in runs]
    missed = [run.seed for run in runs if not run.found or run.cpu_seconds > DEFAULT_BUDGET_SECONDS]
    assert not missed, (f"{target.name}: found within {DEFAULT_BUDGET_SECONDS} CPU s on {SEEDS - len(missed)} of "
                        f"{SEEDS} seeds; missed on seeds {missed}")

