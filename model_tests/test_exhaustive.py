"""`cacheproof check --exhaustive` (issue 37): the breadth-first search of a kind's declared scope.

Each broken implementation whose bug lies within a declared scope is found with its shortest
counterexample: the length asserted is derived from the bug (the comment beside it says why no
shorter program shows it), and the search to one call less is complete and clean, so the length is
the shortest. The correct implementations are complete and clean at a small depth here; the
default scopes at their full depth are the slow tests (conftest.py SLOW).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from cacheproof.check.programs.generators.cache_calls import EXHAUSTIVE as CACHE_SCOPES
from cacheproof.check.programs.generators.cache_calls import ExhaustiveCacheScope
from cacheproof.check.programs.exhaustive import ExhaustiveSetup, run_exhaustive
from cacheproof.check.programs.generators import exhaustive_scopes, generator_for
from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.sandbox.factories import load_factory
from cacheproof.spec import CacheSpec
from cacheproof.spec.kinds import get_kind
from cacheproof.spec.radix.semantics import RadixSemantics
from cacheproof.spec.radix.tree import RadixCacheSpec
from model_tests.report_validation import report_errors


def search(kind_name: str, impl: str, depth: int, scope: Any = None, operations: tuple[str, ...] | None = None,
           **fields):
    """The exhaustive search of `impl` (MODULE:FACTORY) to `depth` in the kind's scope `scope` (a
    name, a scope, or None: the kind's first)."""
    kind = get_kind(kind_name)
    scopes = exhaustive_scopes(kind_name)
    chosen = scopes[scope or next(iter(scopes))] if scope is None or isinstance(scope, str) else scope
    profile = kind.profiles[kind.default_profile]
    setup = ExhaustiveSetup(kind, load_factory(impl), generator_for(kind_name), chosen,
                            operations or profile.operations, True, depth, profile.semantics)
    return run_exhaustive(setup, impl=impl, **fields)


def assert_shortest(kind_name: str, impl: str, length: int, scope: str | None = None,
                    operations: tuple[str, ...] | None = None) -> None:
    """`impl` diverges at `length` calls and not before: clean and complete to length - 1, found at length."""
    if length > 1:
        shorter = search(kind_name, impl, length - 1, scope, operations)
        assert shorter.ok and shorter.complete, shorter.verdict
    found = search(kind_name, impl, length, scope, operations)
    assert found.counterexample is not None, found.verdict
    assert len(found.counterexample.calls) == length, found.counterexample.calls


CACHES = {
    "OffByOneCapacity": 1,  # a reservation of the whole capacity is refused: one call from empty
    "SizesByElementCount": 1,  # a put of a 2-byte value of 2-byte elements is sized 1 byte: one call
    "GetTakesReference": 2,  # a get needs a READY entry first
    "ReleaseOfIdleIsNoop": 2,  # a release of an absent key raises either way: the idle entry comes first
    "ClearDropsBusyEntries": 2,  # clear of an empty cache drops nothing: a busy entry comes first
    "AcquireIgnoresConflicts": 2,  # a conflicting acquire needs a present key first
    "EvictsNewestFirst": 2,  # one call from empty evicts nothing: the second put evicts in a 1-byte cache
    "TransientSurvivesRelease": 3,  # a retain=False READY entry needs reserve and commit, then the release
    "StalePinnedCounter": 3,  # a READY entry at refcount 1 needs two calls, then its last release
    "GetDoesNotPromote": 3,  # the recency order of two entries (two calls) changes at the get
    "RepinsWithoutFitCheck": 3,  # an idle entry and a reservation (two calls), then the re-pin that does not fit
    "CommitEvictsBeforeSizeCheck": 3,  # a reservation and an idle entry to evict, then the wrong-sized commit
    "ReservationEvictable": 3,  # a reservation and an idle entry, then an eviction that wants both
}
"""model_tests/broken_caches.py within the default scope, and the length of the shortest counterexample."""


@pytest.mark.parametrize("name", sorted(CACHES))
def test_each_broken_cache_within_the_default_scope_is_found_shortest(name):
    assert_shortest("cache", f"model_tests.broken_caches:{name}", CACHES[name])


def test_a_bug_of_three_keys_lies_beyond_the_default_scope_and_within_the_three_keys_one():
    # put evicts before it finds the value cannot fit: an idle entry (a put), a pinned one (a put and
    # an acquire) and a put of a third key that no eviction makes room for: 4 calls, 3 keys. The
    # default scope has two keys; the three-keys scope holds the 2-byte cache searched here (its
    # part that matters, put and acquire, for time)
    impl = "model_tests.broken_caches:PutEvictsBeforeCheckingFit"
    assert search("cache", impl, 4, operations=("put", "acquire")).ok
    two_bytes = ExhaustiveCacheScope("three-keys, 2 bytes", (2,), CACHE_SCOPES["three-keys"].keys, 4)
    assert 2 in CACHE_SCOPES["three-keys"].capacities
    assert_shortest("cache", impl, 4, scope=two_bytes, operations=("put", "acquire"))


POOLS = {
    "DoubleFreePool": 1,  # a free of a block the request does not hold is accepted: one call
    "ResetInUsePool": 2,  # reset must meet a block in use
    "ForeignFreePool": 2,  # another request's block must be allocated before the foreign free
    "OwnerBlindFreePool": 2,
    "HeadFreePool": 2,  # a hashed block must be filled before it is freed to the wrong end
    "GapLookupPool": 3,  # a cached hash takes an allocate and a cache_blocks, then the lookup past a miss
    "TouchLeavesQueuedPool": 3,  # a cached free block takes a fill and a free, then the touch
    "LastInsertedLookupPool": 3,  # two blocks of one hash take two calls, then the lookup
    "StaleHashMapPool": 3,  # a cached block, its hash evicted, then the prefix found through the stale map
    "ForwardFreeRequestPool": 3,  # a request holds two blocks after two calls (two new tokens each)
}
"""model_tests/block_pools.py within the default scope, and the length of the shortest counterexample."""


@pytest.mark.parametrize("name", sorted(POOLS))
def test_each_broken_pool_within_the_default_scope_is_found_shortest(name):
    assert_shortest("blocks", f"model_tests.block_pools:{name}", POOLS[name])


def test_a_drifting_free_count_shows_at_the_fourth_call():
    # a cached free block (a fill, a free), the prefix hit that forgets to count it, then num_free
    assert_shortest("blocks", "model_tests.block_pools:CounterDriftPool", 4,
                    operations=("allocate_slots", "free_request", "touch", "num_free"))


TREES = {
    "UnlockBelowZero": 2,  # an unlock of a path inserted but never locked
    "SizesDriftOnDelete": 2,  # an evicted leaf must be inserted first
    "MatchPastTheSplit": 2,  # a match inside a node needs the node first
    "StaleAccessTimes": 2,  # a match that should refresh a node needs the node first
    "SplitLosesLock": 3,  # a locked node (insert, lock), then the match that splits it
    "KeepsDuplicates": 3,  # a node, a live request, then the checkpoint that inserts the same tokens again
}
"""model_tests/radix_trees.py within the default scope, and the length of the shortest counterexample."""


@pytest.mark.parametrize("name", sorted(TREES))
def test_each_broken_tree_within_the_default_scope_is_found_shortest(name):
    assert_shortest("radix", f"model_tests.radix_trees:{name}", TREES[name])


def test_a_locked_leaf_evicted_shows_at_the_fourth_call():
    # the spec evicts at most the evictable size, so a locked leaf is evicted wrongly only beside an
    # unlocked one: two leaves (two inserts), a lock on the older, then evict(1)
    assert_shortest("radix", "model_tests.radix_trees:EvictsLockedLeaves", 4)


def test_namespaces_that_share_a_node_show_at_the_second_call_of_the_namespaces_scope():
    # an insert in one namespace, then a match of the same tokens in another
    assert_shortest("radix", "model_tests.radix_trees:NamespacesShareNodes", 2, scope="namespaces")


def test_the_built_in_tree_is_complete_and_clean_in_every_namespace():
    report = search("radix", "cacheproof.impl.radix_cache:radix_cache", 2, "namespaces")
    assert report.ok and report.complete, report.verdict


@pytest.mark.parametrize("kind_name, impl", [
    ("cache", "cacheproof.impl:TensorLRUCache"),
    ("cache", "cacheproof.spec:CacheSpec"),
    ("blocks", "cacheproof.impl.kv_cache_manager:kv_cache_manager"),
    ("blocks", "model_tests.block_pools:ListBlockPool"),
    ("radix", "cacheproof.impl.radix_cache:radix_cache"),
])
def test_the_built_in_and_correct_implementations_are_complete_and_clean(kind_name, impl):
    report = search(kind_name, impl, 2)
    assert report.ok and report.complete and report.snapshot_trusted, report.verdict
    assert report.frontier_depth == 2 and len(report.levels) == 3
    assert report.states == sum(report.levels)


def test_states_are_merged_so_each_is_expanded_once():
    # a 1-byte cache of keys 0 and 1, one call from empty: a reservation of either key with either
    # retain flag (reserve, or acquire's miss: the same state), a put of either key, and the empty
    # cache that every other call leaves (an error, a miss, a read, an eviction of nothing)
    one_byte = ExhaustiveCacheScope("one-byte", (1,), (0, 1), 1)
    report = search("cache", "cacheproof.spec:CacheSpec", 1, scope=one_byte)
    assert report.levels == [1, 2 * 2 + 2]
    assert report.states == 7 and report.calls > 7


def test_the_counterexample_and_the_counts_are_the_same_over_workers():
    one = search("cache", "model_tests.broken_caches:GetDoesNotPromote", 3)
    two = search("cache", "model_tests.broken_caches:GetDoesNotPromote", 3, workers=2)
    assert two.counterexample.calls == one.counterexample.calls
    assert (two.states, two.calls) == (one.states, one.calls)


def test_a_spent_budget_cuts_the_search_and_says_how_deep_it_went():
    report = search("cache", "cacheproof.spec:CacheSpec", 4, budget_seconds=0.0)
    assert not report.complete and report.ok
    assert report.frontier_depth == 0
    assert "cut by the budget at depth 0 of 4" in report.verdict


class CacheWithoutSnapshot:
    """A correct cache (the spec) that offers no snapshot() and no stats(): its state is hidden."""

    def __init__(self, capacity_bytes: int) -> None:
        self._spec = CacheSpec(capacity_bytes)
        self.capacity_bytes = capacity_bytes

    def __getattr__(self, name):
        if name in ("snapshot", "stats", "copy"):
            raise AttributeError(name)
        return getattr(self._spec, name)

    def __len__(self) -> int:
        return len(self._spec)

    def __contains__(self, key) -> bool:
        return key in self._spec


def test_an_implementation_without_a_snapshot_is_merged_on_the_spec_alone_and_the_output_says_so(capsys):
    report = search("cache", "model_tests.test_exhaustive:CacheWithoutSnapshot", 1)
    assert report.ok and report.complete and not report.snapshot_trusted
    assert report.to_json()["merge"] == "spec state and partial implementation snapshot"
    code = main(["check", "--exhaustive", "--depth", "1", "--quiet", "--impl", "model_tests.test_exhaustive:CacheWithoutSnapshot"])
    out = capsys.readouterr().out
    assert code == 0
    assert "caveat: the implementation's snapshot cannot be trusted, it offers no stats(), snapshot():" in out
    assert "no divergence in" in out


def test_the_command_prints_the_shortest_counterexample_whose_snippet_fails_and_trace_replays(tmp_path, capsys):
    report_path, trace_path = tmp_path / "report.json", tmp_path / "trace.jsonl"
    code = main(["check", "--exhaustive", "--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool",
                 "--json", str(report_path), "--trace-out", str(trace_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "exhaustive: shortest counterexample, 1 call (after " in out
    snippet = out[out.index("# cacheproof counterexample"):]
    run = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True)
    assert run.returncode != 0 and "AssertionError" in run.stderr
    report = json.loads(report_path.read_text())
    assert report_errors(report) == []
    assert report["ok"] is False and report["exhaustive"]["complete"] is True
    assert len(report["divergences"]) == 1
    assert main(["replay", str(trace_path), "--impl", "model_tests.block_pools:DoubleFreePool"]) == 1
    assert main(["replay", str(trace_path), "--impl", "model_tests.block_pools:ListBlockPool"]) == 0


def paged_tree(num_slots: int) -> RadixCacheSpec:
    """A paged tree that carries its profile, as an engine adapter's object does; the factory carries none."""
    tree = RadixCacheSpec(num_slots, RadixSemantics(page_size=2))
    tree.profile = "paged"
    return tree


def test_without_profile_the_search_takes_the_one_the_built_object_carries(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code = main(["check", "--exhaustive", "--spec", "radix", "--depth", "2", "--quiet", "--json", str(report_path),
                 "--impl", "model_tests.test_exhaustive:paged_tree"])
    assert code == 0, capsys.readouterr()
    assert json.loads(report_path.read_text())["profile"] == "paged"
    assert main(["check", "--exhaustive", "--spec", "radix", "--depth", "2", "--quiet", "--profile", "contract",
                 "--impl", "model_tests.test_exhaustive:paged_tree"]) == 1


def test_the_command_reports_a_clean_search_in_the_schema(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    code = main(["check", "--exhaustive", "--spec", "radix", "--depth", "1", "--json", str(report_path)])
    out = capsys.readouterr().out
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report_errors(report) == []
    exhaustive = report["exhaustive"]
    assert out.strip().endswith(f"exhaustive: no divergence in {exhaustive['states']} states, "
                                f"{exhaustive['calls']} calls, depth 1")
    assert exhaustive["complete"] and exhaustive["frontier_depth"] == 1 and exhaustive["scope"] == "tiny"


@pytest.mark.parametrize("argv, said", [
    (["--depth", "2"], "--depth is for --exhaustive searches"),
    (["--scope", "tiny"], "--scope is for --exhaustive searches"),
    (["--exhaustive", "--examples", "5"], "--examples is not for --exhaustive"),
    (["--exhaustive", "--steps", "5"], "--steps is not for --exhaustive"),
    (["--exhaustive", "--thorough"], "--thorough is not for --exhaustive"),
    (["--exhaustive", "--threads", "2"], "--threads is not for --exhaustive"),
    (["--exhaustive", "--scope", "huge"], "--scope 'huge': spec kind 'cache' has the exhaustive scopes tiny, three-keys"),
])
def test_bad_exhaustive_flags_are_refused_with_one_line(argv, said, capsys):
    assert main(["check", *argv]) == 2
    assert said in capsys.readouterr().err


def test_every_enabled_call_of_a_fresh_pool_suits_the_scope():
    scope = exhaustive_scopes("blocks")["tiny"]
    model = get_kind("blocks").new(3)
    calls = generator_for("blocks").enabled_calls(scope, model, get_kind("blocks").names, misuse=False)
    assert Call("allocate", (1, 2)) in calls and Call("allocate", (1, 3)) not in calls  # 2 free blocks, not 3
    assert not any(call.op in ("free", "touch", "cache_blocks", "free_request") for call in calls)  # nothing held
    misused = generator_for("blocks").enabled_calls(scope, model, get_kind("blocks").names, misuse=True)
    assert Call("free", (1, (1,))) in misused and len(misused) > len(calls)


@pytest.mark.parametrize("kind_name", ["cache", "blocks", "radix"])
def test_the_default_scope_of_each_built_in_implementation_is_searched_whole_and_clean(kind_name, capsys):
    # the yardstick: the built-in cache and block pool complete their default scope (docs/exhaustive.md)
    assert main(["check", "--exhaustive", "--spec", kind_name, "--quiet"]) == 0
    out = capsys.readouterr().out
    depth = next(iter(exhaustive_scopes(kind_name).values())).depth
    assert out.startswith("exhaustive: no divergence in ") and out.strip().endswith(f"depth {depth}")


def test_a_kind_whose_generator_declares_no_exhaustive_scope_is_refused_in_one_line(monkeypatch, capsys):
    from cacheproof.check.programs import generators

    monkeypatch.setitem(generators._REGISTRY, "radix", "model_tests.toy_set_kind:TOY_KIND")  # a module without EXHAUSTIVE
    assert main(["check", "--exhaustive", "--spec", "radix"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["cacheproof check: --exhaustive is not for --spec radix: its call generator declares no exhaustive "
                   "scope (EXHAUSTIVE in its module) to enumerate"]
