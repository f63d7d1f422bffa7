"""The checker of the block pool kind (`cacheproof check --spec blocks`), proven by the bugs it
catches: every broken pool of model_tests/block_pools.py and model_tests/broken_kv_block_pools.py is
found with a shrunk counterexample whose snippet fails when run, the correct pools are never
flagged, a race is found under --threads and a locked pool is linearizable, and a pool missing an
operation is a usage error naming it."""

from __future__ import annotations

import importlib
import threading
from collections import Counter

import pytest

from cacheproof.check.concurrent.run import run_concurrent_check
from cacheproof.check.programs.command import snippet_of
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.cli import main
from cacheproof.sandbox.fault_search import SPEC_BROKEN
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.kinds import get_kind
from model_tests import block_pools
from model_tests.forced_interleaving import RacyWindow, counts_completed_calls

KIND = get_kind("blocks")
BROKEN = ["DoubleFreePool", "HeadFreePool", "StaleHashMapPool", "GapLookupPool", "TouchLeavesQueuedPool",
          "ResetInUsePool", "CounterDriftPool", "ForwardFreeRequestPool", "LastInsertedLookupPool",
          "SilentLazyEvictionPool", "WrongParentPool", "ShortTokensPool"]
BROKEN_KV_POOLS = ["HeadUnpinManager", "UntoldReuseManager"]
"""The broken torch pools (model_tests/broken_kv_block_pools.py), behind the built-in manager."""
BROKEN_IMPLS = [f"model_tests.block_pools:{name}" for name in BROKEN] + [
    f"model_tests.broken_kv_block_pools:{name}" for name in BROKEN_KV_POOLS]


def _check(factory, **options):
    return run_program_check(KIND, factory, generator_for("blocks"), **options)


def _factory(impl: str):
    """The factory that MODULE:NAME names."""
    module, name = impl.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("factory", [BlockPoolSpec, block_pools.ListBlockPool, block_pools.EventfulListPool,
                                     "cacheproof.impl.kv_cache_manager:kv_cache_manager"],
                         ids=["spec", "list pool", "eventful list pool", "torch manager"])
def test_correct_pools_conform(factory):
    report = _check(_factory(factory) if isinstance(factory, str) else factory, examples=150, seed=0)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.examples == 150 and report.steps > 150


@pytest.mark.parametrize("impl", BROKEN_IMPLS, ids=lambda impl: impl.split(":")[1])
def test_every_broken_pool_is_found_with_a_snippet_that_fails(impl):
    report = _check(_factory(impl), examples=400, seed=0)
    assert not report.ok, f"{impl} was not found"
    example = report.counterexample
    assert len(example.calls) <= 12, example.calls
    snippet = snippet_of(KIND, impl, example, None)
    with pytest.raises(Exception):  # an assertion of the spec's outcome, or the pool's own crash at that call
        exec(compile(snippet, "<snippet>", "exec"), {})


@pytest.mark.parametrize("name", ["SilentLazyEvictionPool", "WrongParentPool", "ShortTokensPool"])
def test_wrong_events_are_found_in_the_events_view_alone(name):
    """A pool whose state is right and whose KV cache events are wrong differs in events() only."""
    report = _check(getattr(block_pools, name), examples=400, seed=0)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["events"]


def test_an_untold_reuse_is_found_in_the_reused_view_alone():
    """A torch pool whose state is right and whose allocate tells no reader differs in reused() only."""
    report = _check(_factory("model_tests.broken_kv_block_pools:UntoldReuseManager"), examples=400, seed=0)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["reused"]


def test_the_snippet_of_a_divergence_passes_on_the_correct_pool():
    """The snippet asserts the spec's behaviour: on a correct pool it runs through."""
    report = _check(block_pools.DoubleFreePool, examples=200, seed=0)
    snippet = snippet_of(KIND, "model_tests.block_pools:ListBlockPool", report.counterexample, None)
    exec(compile(snippet, "<snippet>", "exec"), {})


def test_distinct_divergences_are_each_reported():
    report = _check(block_pools.DoubleFreePool, examples=300, seed=0, max_divergences=3)
    kinds = [example.kind_of() for example in report.counterexamples]
    assert len(kinds) == len(set(kinds)) >= 1


class LockedListPool(block_pools.ListBlockPool):
    """ListBlockPool with every operation and view under one lock: linearizable by construction."""

    def __init__(self, num_blocks: int) -> None:
        super().__init__(num_blocks)
        self._lock = threading.Lock()
        self.racy_window = RacyWindow()


def _locked(name: str):
    def method(self, *args, **kwargs):
        with self._lock:
            return getattr(block_pools.ListBlockPool, name)(self, *args, **kwargs)

    return method


_LOCKED = tuple(name for name in KIND.default_operations + KIND.views if hasattr(block_pools.ListBlockPool, name))
for _name in _LOCKED:
    setattr(LockedListPool, _name, _locked(_name))
counts_completed_calls(LockedListPool, _LOCKED)


class RacyAllocatePool(LockedListPool):
    """Allocation reads the free queue's head outside the lock, lets another thread's call complete
    (a forced racy window, model_tests/forced_interleaving.py), then takes those blocks: two threads
    can both take one block (a pool shared without a lock around its allocation)."""

    def allocate(self, request, n):
        if not (isinstance(n, int) and 0 < n <= self.num_free()):
            return super().allocate(request, n)
        seen = list(self._free)[:n]
        self.racy_window.open()
        with self._lock:
            for block in seen:
                self._free.pop(block, None)
                self._refs[block] += 1
                self._holdings.setdefault(request, Counter())[block] += 1
            self._num_free = len(self._free)
        return tuple(seen)


counts_completed_calls(RacyAllocatePool, ("allocate",))


POOL_OPS = ("allocate", "touch", "cache_blocks", "lookup", "free", "evict", "reset", "num_free")


def test_a_locked_pool_is_linearizable_under_threads():
    report = run_concurrent_check(KIND, LockedListPool, threads=3, scenarios=25, runs=5, seed=0, operations=POOL_OPS)
    assert report.ok, report.counterexample.reason
    assert report.scenarios == 25 and report.runs >= 125


def test_a_racy_allocation_is_not_linearizable():
    report = run_concurrent_check(KIND, RacyAllocatePool, threads=2, scenarios=200, runs=10, seed=0,
                                  operations=("allocate", "num_free", "free"))
    assert not report.ok
    assert "allocate" in report.counterexample.scenario.describe()
    assert report.counterexample.scenario.calls <= 6


def test_a_pool_missing_an_operation_is_a_usage_error(capsys):
    code = main(["check", "--spec", "blocks", "--impl", "cacheproof.impl.kv_block_pool:KVBlockPool",
                 "--ops", "allocate,free,find_cached_prefix", "--examples", "5"])
    assert code == 2
    assert "lacks find_cached_prefix" in capsys.readouterr().err


def test_check_spec_blocks_exits_one_on_a_broken_pool_and_zero_on_a_correct_one(capsys):
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:ListBlockPool",
                 "--examples", "60", "--quiet"]) == 0
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool",
                 "--examples", "200", "--quiet", "--max-divergences", "1"]) == 1
    assert "cache.free(" in capsys.readouterr().out


def test_isolate_reports_a_pool_that_ends_the_process_as_a_crash(capsys):
    code = main(["check", "--spec", "blocks", "--isolate", "--impl", "model_tests.block_pools:ExitsOnDoubleFreePool",
                 "--examples", "100", "--quiet", "--max-divergences", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "cache.free(" in out and "killed the process running the cache (exit status 134)" in out


def test_isolate_passes_a_correct_pool(capsys):
    assert main(["check", "--spec", "blocks", "--isolate", "--impl", "model_tests.block_pools:ListBlockPool",
                 "--examples", "20", "--quiet"]) == 0
    assert "conforms: 20 examples" in capsys.readouterr().out


def test_the_built_in_manager_is_linearizable_under_threads():
    """KVCacheManager holds one lock per operation; without it, allocate_slots raced a pool-level
    allocate and raised CapacityError where the spec returns None (found by this check)."""
    from cacheproof.impl.kv_cache_manager import kv_cache_manager

    report = run_concurrent_check(KIND, kv_cache_manager, threads=3, scenarios=60, runs=10, seed=0)
    assert report.ok, report.counterexample.reason


def test_a_pool_spec_that_breaks_its_own_invariant_is_a_counterexample_not_an_error(monkeypatch):
    """The program pipeline of every kind reports the model breaking its own invariant (here its
    allocate leaving the taken blocks in the free queue) as a shrunk counterexample, not a traceback."""
    def take_leaving_them_queued(pool, request, n):
        taken = pool._queue[:n]
        for block in taken:
            pool._ref[block] = 1
        pool._held.setdefault(request, []).extend(taken)
        return taken

    monkeypatch.setattr(BlockPoolSpec, "_take", take_leaving_them_queued)
    report = _check(BlockPoolSpec, examples=100, seed=0)
    example = report.counterexample
    assert example is not None and example.fault is not None and example.fault.kind == SPEC_BROKEN
    (call,) = example.calls  # one call that takes blocks: allocate, or allocate_slots (the same _take)
    assert call.op in ("allocate", "allocate_slots"), example.calls
    assert example.message.startswith(f"the spec broke its own invariant after cache.{call.op}("), example.message
    assert "(a bug of the spec or its profile, not of the implementation)" in example.message
