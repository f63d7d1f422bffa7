"""The radix kind (issue 33): the spec's rules on hand-worked cases, each invariant on a state that
breaks it, the torch cache beside the spec (cpu and meta), every broken tree of
model_tests/radix_trees.py found with the invariant its fault breaks, the correct ones never
flagged, the pytest kit and the runtime monitor on the kind.

Expected values are worked out by hand from docs/radix-contract.md, never read from the code.
"""

from __future__ import annotations

import json

import pytest

from cacheproof.cli import main
from cacheproof.impl.radix_cache import TorchRadixCache, paged_radix_cache, radix_cache
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.radix.invariants import RADIX_INVARIANTS_BY_NAME, RadixStep
from cacheproof.spec.radix.semantics import RadixSemantics
from cacheproof.spec.radix.tree import RadixCacheSpec
from cacheproof.testing.functions import CacheDivergence, cache_test
from cacheproof.trace.monitor import DivergenceError, monitor
from model_tests.radix_trees import BROKEN

PAGED = RadixSemantics(page_size=2)


def _both(num_slots: int, page_size: int = 1):
    """The spec and the torch cache, built alike."""
    return RadixCacheSpec(num_slots, RadixSemantics(page_size=page_size)), TorchRadixCache(num_slots, page_size)


def _keys(cache) -> list[tuple]:
    """(prefix + key, lock) of every node, in the snapshot's order."""
    return [(tuple(prefix) + tuple(key), lock) for prefix, key, _, _, lock, _, _ in cache.snapshot()[2]]


@pytest.fixture(params=["spec", "torch"])
def cache(request):
    """A cache of 8 slots, page size 1: the spec, or the torch cache held to the same answers."""
    return RadixCacheSpec(8) if request.param == "spec" else radix_cache(8)


def test_a_match_ending_inside_a_node_splits_it_and_answers_what_the_tree_holds(cache):
    assert cache.insert((1, 2, 3)) == 0
    assert cache.match_prefix((1, 2, 5)) == 2
    assert _keys(cache) == [((1, 2), 0), ((1, 2, 3), 0)]
    assert (cache.total_size(), cache.evictable_size(), cache.protected_size()) == (3, 3, 0)


def _spaces(cache) -> list[tuple]:
    """(namespace, prefix + key, lock) of every node, in the snapshot's order."""
    return [(node[6], tuple(node[0]) + tuple(node[1]), node[4]) for node in cache.snapshot()[2]]


def test_two_namespaces_never_share_a_node(cache):
    """docs/radix-contract.md, Names (namespace), worked by hand: the same tokens in two namespaces
    are two nodes, each with slots of its own; a match, lock and unlock see only their namespace's."""
    assert cache.insert((1, 2)) == 0
    assert cache.insert((1, 2), namespace="a") == 0  # not cached in "a": two more slots taken
    assert cache.snapshot()[0] == 4
    assert cache.match_prefix((1, 2, 3), namespace="b") == 0
    assert cache.insert((1, 2, 3), namespace="a") == 2
    assert cache.lock((1, 2, 3), namespace="a") == 3
    assert _spaces(cache) == [(None, (1, 2), 0), ("a", (1, 2), 1), ("a", (1, 2, 3), 1)]
    with pytest.raises(WrongStateError):
        cache.unlock((1, 2, 3))  # the default namespace's tree holds no lock there
    assert cache.unlock((1, 2, 3), namespace="a") == 3
    assert (cache.evictable_size(), cache.protected_size()) == (5, 0)


def test_a_request_caches_in_the_namespace_it_was_admitted_in(cache):
    cache.insert((1, 2), namespace="a")
    assert cache.prefill(1, (1, 2, 3)) == 0  # the default namespace holds nothing
    assert cache.prefill(2, (1, 2, 3), namespace="a") == 2
    assert cache.release(1) == 0 and cache.release(2) == 2
    assert _spaces(cache) == [(None, (1, 2, 3), 0), ("a", (1, 2), 0), ("a", (1, 2, 3), 0)]
    assert cache.snapshot()[0] == 8 - 6


def test_eviction_runs_over_every_namespace_least_recently_used_first(cache):
    cache.insert((1,), namespace="b")
    cache.insert((1,))
    cache.insert((1,), namespace="a")
    assert cache.evict(2) == 2  # the two oldest, whatever their namespace
    assert _spaces(cache) == [("a", (1,), 0)]


def test_a_namespace_that_is_not_a_str_is_refused_and_changes_nothing(cache):
    cache.insert((1,), namespace="a")
    before = cache.snapshot()
    for bad in (1, b"a", ("a",)):
        with pytest.raises(InvalidArgumentError):
            cache.insert((2,), namespace=bad)
    assert cache.snapshot() == before


def test_insert_answers_the_part_already_cached_and_hands_its_slots_back(cache):
    assert cache.insert((1, 2)) == 0
    assert cache.snapshot()[0] == 6
    assert cache.insert((1, 2, 3, 4)) == 2  # 4 slots taken, 2 handed back
    assert cache.snapshot()[0] == 4
    assert _keys(cache) == [((1, 2), 0), ((1, 2, 3, 4), 0)]


def test_lock_protects_the_path_and_unlock_drops_a_lock_only_where_one_was_taken(cache):
    cache.insert((1, 2, 3))
    assert cache.lock((1, 2)) == 2
    assert (cache.evictable_size(), cache.protected_size()) == (1, 2)
    before = cache.snapshot()
    with pytest.raises(WrongStateError):
        cache.unlock((1, 2, 3))  # no lock was taken at (1, 2, 3)
    assert cache.snapshot() == before
    assert cache.unlock((1, 2)) == 2
    assert (cache.evictable_size(), cache.protected_size()) == (3, 0)
    with pytest.raises(WrongStateError):
        cache.unlock((1, 2))  # below zero (SGLang #11970)
    assert cache.snapshot()[1] == (3, 0)


def test_evict_takes_the_least_recently_used_leaf_first(cache):
    cache.insert((1,))
    cache.insert((2,))
    cache.match_prefix((1,))  # (1,) is now the more recent
    assert cache.evict(1) == 1
    assert _keys(cache) == [((1,), 0)]


def test_evict_frees_whole_leaves_then_their_parents_and_never_a_locked_node(cache):
    cache.insert((1, 2))
    cache.match_prefix((1,))  # split: (1,) above (2,)
    cache.insert((3,))
    cache.lock((3,))
    assert cache.evict(2) == 2  # the leaf (1, 2), then (1,) left childless
    assert _keys(cache) == [((3,), 1)]
    before = cache.snapshot()
    with pytest.raises(CapacityError):
        cache.evict(1)  # only a locked node is left
    assert cache.snapshot() == before


def test_a_request_is_admitted_checkpointed_and_released(cache):
    assert cache.prefill(1, (1, 2, 3)) == 0
    assert cache.snapshot()[0] == 5
    assert cache.checkpoint(1, up_to=2) == 0
    assert _keys(cache) == [((1, 2), 1)]
    assert cache.prefill(2, (1, 2, 4)) == 2  # its first two tokens hit request 1's checkpoint
    assert _keys(cache) == [((1, 2), 2)]
    assert cache.release(1) == 2  # (1, 2) was cached, 3 is new
    assert _keys(cache) == [((1, 2), 1), ((1, 2, 3), 0)]
    assert cache.release(2) == 2
    assert _keys(cache) == [((1, 2), 0), ((1, 2, 3), 0), ((1, 2, 4), 0)]
    assert cache.snapshot()[0] == 4 and cache.snapshot()[3] == ()


def test_a_request_short_of_slots_evicts_or_changes_nothing():
    for cache in _both(3):
        cache.insert((1, 2))
        assert cache.prefill(1, (3, 4)) == 0  # 1 free, (1, 2) evicted for the second
        assert _keys(cache) == [] and cache.snapshot()[0] == 1
        before = cache.snapshot()
        with pytest.raises(CapacityError):
            cache.prefill(2, (5, 6))
        assert cache.snapshot() == before


def test_reset_refuses_while_a_node_is_locked_or_a_request_is_live(cache):
    cache.insert((1, 2))
    cache.lock((1,))
    assert cache.reset() is False and cache.total_size() == 2
    cache.unlock((1,))
    cache.prefill(1, (7,))
    assert cache.reset() is False
    cache.release(1)
    assert cache.reset() is True
    assert cache.total_size() == 0 and cache.snapshot()[0] == 8


@pytest.mark.parametrize("call, error", [
    (lambda c: c.match_prefix((1, "2")), InvalidArgumentError),
    (lambda c: c.insert([1, None]), InvalidArgumentError),
    (lambda c: c.evict(-1), InvalidArgumentError),
    (lambda c: c.evict(1), CapacityError),
    (lambda c: c.insert(tuple(range(9))), CapacityError),
    (lambda c: c.prefill(True, (1,)), InvalidArgumentError),
    (lambda c: c.prefill(1, ()), InvalidArgumentError),
    (lambda c: c.checkpoint(5, up_to=0), WrongStateError),
    (lambda c: c.release(5), WrongStateError),
])
def test_misuse_is_a_typed_error_that_changes_nothing(cache, call, error):
    before = cache.snapshot()
    with pytest.raises(error):
        call(cache)
    assert cache.snapshot() == before


def test_a_live_request_is_not_admitted_twice_nor_checkpointed_past_its_tokens(cache):
    cache.prefill(1, (1, 2))
    before = cache.snapshot()
    with pytest.raises(WrongStateError):
        cache.prefill(1, (1, 2))
    with pytest.raises(InvalidArgumentError):
        cache.checkpoint(1, up_to=3)
    assert cache.snapshot() == before


def test_paged_trees_match_insert_and_split_in_whole_pages():
    for cache in _both(8, page_size=2):
        assert cache.insert((1, 2, 3, 4)) == 0
        assert cache.match_prefix((1, 2, 3, 5)) == 2  # the page (3, 5) differs: the match stops at 2
        assert _keys(cache) == [((1, 2), 0), ((1, 2, 3, 4), 0)]
        with pytest.raises(InvalidArgumentError):
            cache.insert((1, 2, 3))
        assert cache.prefill(1, (1, 2, 3, 4, 5)) == 4
        assert cache.release(1) == 4  # (5,) is no whole page: its slot is freed, not cached
        assert cache.snapshot()[0] == 4


def test_a_whole_pages_pool_holds_only_the_whole_pages_of_its_slots():
    whole = RadixSemantics(page_size=2, pool="whole-pages")
    assert [RadixCacheSpec(n, whole).num_slots for n in (1, 2, 5)] == [0, 2, 4]
    assert RadixCacheSpec(5, RadixSemantics(page_size=2)).num_slots == 5  # the contract's pool: every slot
    empty = RadixCacheSpec(1, whole)
    with pytest.raises(CapacityError):
        empty.insert((1, 2))
    assert empty.copy().num_slots == 0 and empty.snapshot()[0] == 0
    five = RadixCacheSpec(5, whole)
    assert five.insert((1, 2, 3, 4)) == 0 and five.snapshot()[0] == 0
    five.check_invariants()


def test_the_snapshot_names_slots_by_first_appearance_whatever_the_allocator_hands_out():
    spec, torch_cache = _both(6)
    torch_cache.allocator.free_slots = torch_cache.allocator.free_slots.flip(0)  # 5, 4, 3, ... first
    for cache in (spec, torch_cache):
        cache.insert((1, 2))
        cache.prefill(3, (1, 2, 9))
    assert spec.snapshot() == torch_cache.snapshot()
    assert spec.snapshot()[2][0][2] == (0, 1) and spec.snapshot()[3] == ((3, (1, 2, 9), (0, 1, 2), 2, None),)


def test_the_torch_cache_on_meta_reads_its_tokens_back_from_the_shadow():
    spec, on_meta = RadixCacheSpec(6), TorchRadixCache(6, device="meta")
    for cache in (spec, on_meta):
        cache.insert((4, 5, 6))
        cache.prefill(1, (4, 5, 7))
        cache.release(1)
    assert on_meta.kv.device.type == "meta"
    assert spec.snapshot() == on_meta.snapshot()


# The invariants, each on a state that breaks it -------------------------------------------------

def _state(free=2, sizes=(2, 1), nodes=None, requests=None) -> tuple:
    """A snapshot of six slots; by default consistent: node (1,) locked by request 7 (tokens (1, 5),
    its own slot 3 for the 5), node (1, 2, 3) unlocked, two slots free."""
    nodes = (((), (1,), (0,), (1,), 1, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 1, None)) if nodes is None else nodes
    requests = ((7, (1, 5), (0, 3), 1, None),) if requests is None else requests
    return free, sizes, nodes, requests


def _step(after: tuple, operation: str | None = None, before: tuple | None = None, raised: bool = False,
          arguments: tuple = (), result=None, namespace=None) -> RadixStep:
    return RadixStep(operation, 6, 1, after if before is None else before, after, raised, arguments, result, namespace)


def test_the_spec_announces_the_pages_a_call_puts_in_and_takes_out():
    """docs/radix-contract.md, KV cache events, worked by hand: a page is named by its path, stored
    after the page before it; a split and a match announce nothing; an eviction announces the pages
    of each leaf it takes; a reset that empties the tree clears it; a call that raises, nothing."""
    tree = RadixCacheSpec(8)
    assert tree.insert((1, 2, 3)) == 0
    assert tree.events() == (((None, (1,), (1,)), ((1,), (1, 2), (2,)), ((1, 2), (1, 2, 3), (3,))), (), False)
    assert tree.insert((1, 2, 4)) == 2  # splits (1, 2, 3) after two tokens: only the new page (1, 2, 4) is stored
    assert tree.events() == ((((1, 2), (1, 2, 4), (4,)),), (), False)
    assert tree.match_prefix((1, 2)) == 2 and tree.events() == ((), (), False)
    with pytest.raises(CapacityError):
        tree.evict(9)
    assert tree.events() == ((), (), False)
    assert tree.evict(2) == 2  # the two one-token leaves under (1, 2)
    assert tree.events() == ((), ((1, 2, 3), (1, 2, 4)), False)
    assert tree.reset() and tree.events() == ((), (), True)
    paged = RadixCacheSpec(8, RadixSemantics(page_size=2))
    assert paged.insert((1, 2, 3, 4)) == 0
    assert paged.events() == (((None, (1, 2), (1, 2)), ((1, 2), (1, 2, 3, 4), (3, 4))), (), False)


def test_a_consistent_state_keeps_every_invariant():
    step = _step(_state())
    assert [name for name, invariant in RADIX_INVARIANTS_BY_NAME.items() if not invariant.holds(step)] == []


@pytest.mark.parametrize("name, step, witness", [
    ("R1", _step(_state(nodes=(((), (1,), (0,), (1,), 0, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 1, None)), sizes=(3, 0))),
     "request 7 holds tokens (1,) locked, but the node of tokens (1,) has lock 0"),
    ("R1", _step(_state(nodes=(((), (1,), (0,), (1,), -1, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 1, None)))),
     "the node of tokens (1,) has lock -1"),
    ("R2", _step(_state(sizes=(3, 0))), "evictable 3, protected 0 while its unlocked nodes hold 2"),
    ("R3", _step(_state(free=1)), "a slot was lost"),
    ("R3", _step(_state(requests=((7, (1, 5), (0, 2), 1, None),), free=3)), "KV slot 2 is owned by the node of tokens (1, 2, 3) and by request 7"),
    ("R4", _step(_state(), "match_prefix", arguments=((1, 2, 4),), result=3), "the tree holds no path (1, 2, 4)"),
    ("R4", _step(_state(), "match_prefix", arguments=((1, 2, 3),), result=1), "the tree holds (1, 2)"),
    ("R4", _step(_state(), "match_prefix", arguments=((1, 2),), result=2, namespace="a"),
     "the tree holds no path (1, 2) in namespace 'a'"),
    ("R5", _step(_state(nodes=(((), (1,), (0,), (1,), 1, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 1, "a")))),
     "the node of tokens (1, 2, 3) in namespace 'a' hangs below (1,), which no node of its namespace ends at"),
    ("R5", _step(_state(nodes=(((), (1,), (0,), (1,), 1, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 1, None),
                               ((1,), (2, 4), (4, 5), (2, 4), 0, 1, None)), free=0, sizes=(4, 1))),
     "children of one node with the same first page"),
    ("R6", _step(_state(nodes=(), requests=(), free=6, sizes=(0, 0)), "evict", before=_state(), arguments=(3,), result=3),
     "the node of tokens (1,) was locked (lock 1) and is gone after evict"),
    ("R7", _step(_state(nodes=(((), (1,), (0,), (1,), 1, 0, None), ((), (4,), (2,), (4,), 0, 1, None)), free=3, sizes=(1, 1)), "evict",
                 before=(1, (3, 1), (((), (1,), (0,), (1,), 1, 0, None), ((1,), (2, 3), (1, 2), (2, 3), 0, 2, None),
                                    ((), (4,), (5,), (4,), 0, 1, None)), ((7, (1, 5), (0, 3), 1, None),)),
                 arguments=(1,), result=2),
     "evict took the node of tokens (1, 2, 3) (access rank 2) and kept the unlocked leaf, the node of tokens (4,)"),
    ("R8", _step(_state(free=3, nodes=(((), (1,), (0,), (1,), 1, 0, None),), sizes=(0, 1)), "insert", before=_state(),
                 raised=True), "insert raised and changed the state"),
    ("R9", _step(_state(nodes=(((), (1,), (0,), (1,), 1, 0, None), ((1,), (2, 3), (1, 2), (2, 9), 0, 1, None)))),
     "holds tokens (2, 9)"),
])
def test_each_invariant_names_the_values_that_break_it(name, step, witness):
    invariant = RADIX_INVARIANTS_BY_NAME[name]
    assert not invariant.holds(step)
    assert witness in invariant.witness(step), invariant.witness(step)


def test_the_spec_checks_its_own_state_invariants_after_every_step():
    spec = RadixCacheSpec(6)
    spec.prefill(1, (1, 2, 3))
    spec.checkpoint(1, up_to=3)
    spec.check_invariants()
    spec._requests[1].prefix = 2  # the spec's own bookkeeping broken by hand
    with pytest.raises(AssertionError, match="R3"):
        spec.check_invariants()


# The checker on the kind -----------------------------------------------------------------------

def _check(tmp_path, impl: str, *flags: str) -> tuple[int, dict]:
    path = tmp_path / "report.json"
    status = main(["check", "--spec", "radix", "--impl", impl, "--seed", "0", "--max-divergences", "1", "--quiet",
                   *flags, "--json", str(path)])
    return status, json.loads(path.read_text())


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_every_broken_tree_is_found_with_the_invariant_it_breaks(broken, tmp_path):
    status, report = _check(tmp_path, f"model_tests.radix_trees:{broken}", "--examples", "300")
    assert status == 1
    [divergence] = report["divergences"]
    named = [found["name"] for found in divergence["broken_invariants"]]
    concerns = " ".join(line for line in divergence["why"] if "concern" in line)
    assert BROKEN[broken] in named or f"concern {BROKEN[broken]}:" in concerns, (named, concerns)


@pytest.mark.parametrize("impl, flags", [
    ("cacheproof.impl.radix_cache:radix_cache", ()),
    ("model_tests.radix_trees:LastInFirstOutCache", ()),
    ("cacheproof.impl.radix_cache:paged_radix_cache", ("--profile", "paged")),
    ("model_tests.radix_trees:OneNamespace", ("--semantics", "namespaces=one")),
])
def test_the_correct_trees_are_never_flagged(impl, flags, tmp_path):
    status, report = _check(tmp_path, impl, "--examples", "150", *flags)
    assert status == 0 and report["ok"] is True
    assert report["coverage"]["reached"] == report["coverage"]["possible"], report["coverage"]


def test_a_tree_without_namespaces_is_checked_under_namespaces_one_and_fails_the_keyed_contract(tmp_path):
    """Under namespaces=one the checker passes no namespace (the tree above conforms); the
    contract's keyed calls reach a tree that takes none."""
    status, report = _check(tmp_path, "model_tests.radix_trees:OneNamespace", "--examples", "150")
    assert status == 1
    [divergence] = report["divergences"]
    assert "namespace" in divergence["calls"][-1]["kwargs"] and "TypeError" in json.dumps(divergence), divergence["calls"]


def test_cache_test_holds_a_tree_to_the_radix_spec():
    cache_test(radix_cache, spec="radix", steps=20)()
    with pytest.raises(CacheDivergence, match="diverges from the radix spec"):
        cache_test(paged_radix_cache, spec="radix", steps=20)()


def test_the_monitor_stops_at_the_first_unlock_below_zero():
    from model_tests.radix_trees import UnlockBelowZero

    tree = monitor(UnlockBelowZero(4), kind="radix")
    assert tree.insert((1,)) == 0
    with pytest.raises(DivergenceError) as raised:
        tree.unlock((1,))
    assert "the spec raised WrongStateError" in raised.value.message
    assert "your implementation breaks R1: the node of tokens (1,) has lock -1" in raised.value.message


def test_prove_runs_for_the_radix_kind(capsys):
    assert main(["prove", "--spec", "radix", "--no-refine", "--slots", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "36/36 obligations proved (trees of up to 3 nodes" in out  # model_tests/test_prove_radix.py: the rest


def test_the_html_report_draws_a_radix_divergence_with_its_slot_figures(tmp_path):
    trace = tmp_path / "trace.jsonl"
    status, _ = _check(tmp_path, "model_tests.radix_trees:SplitLosesLock", "--examples", "300",
                       "--semantics", "namespaces=one", "--trace-out", str(trace))  # its first divergence breaks R1
    assert status == 1
    page = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "report.json"), "-o", str(page), "--quiet"]) == 0
    html = page.read_text()
    assert "breaks R1" in html and all(name in html for name in ("protected", "evictable", "requests&#x27; own"))
    assert main(["replay", str(trace), "--quiet"]) == 0
    assert main(["replay", str(trace), "--impl", "model_tests.radix_trees:SplitLosesLock", "--quiet"]) == 1


@pytest.mark.parametrize("profile, page_size", [("contract", 1), ("paged", 2)])
def test_the_torch_cache_on_meta_conforms_to_the_radix_contract(profile, page_size):
    from cacheproof.check.programs.generators import generator_for
    from cacheproof.check.programs.run import run_program_check
    from cacheproof.spec.kinds import get_kind

    kind = get_kind("radix")
    chosen = kind.profiles[profile]
    report = run_program_check(kind, lambda n: TorchRadixCache(n, page_size, device="meta"), generator_for("radix"),
                               examples=40, seed=0, semantics=chosen.semantics, operations=chosen.operations)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.steps > 40


def test_the_generated_invariant_table_is_current_and_names_every_invariant():
    from pathlib import Path

    from cacheproof.docs.command import render

    text = (Path(__file__).resolve().parent.parent / "docs" / "radix-invariants.md").read_text()
    assert text == render("radix-invariants.md")
    assert all(f"| {name} |" in text for name in RADIX_INVARIANTS_BY_NAME)


def test_the_shrunk_counterexample_is_a_snippet_that_fails_when_run(tmp_path):
    status, report = _check(tmp_path, "model_tests.radix_trees:SizesDriftOnDelete", "--examples", "300")
    assert status == 1
    [divergence] = report["divergences"]
    snippet = divergence["snippet"]
    assert "import SizesDriftOnDelete as factory" in snippet and "# <- diverges here" in snippet
    assert len(divergence["calls"]) <= 3  # an insert and the evict that forgets to count it, shrunk
    with pytest.raises(AssertionError):
        exec(compile(snippet, "<snippet>", "exec"), {})
