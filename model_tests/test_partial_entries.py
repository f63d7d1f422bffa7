"""Partial prefix-cache entries (spec/blocks/partial.py), rule by rule on hand-worked walks, and
the generators that reach them: two hash units per block, so a chain of 1 or 3 units ends inside
a block, and cache_blocks' place 1 covers 2 units, place 2 covers 4."""

from __future__ import annotations

import pytest

from cacheproof.check.programs.generators.block_calls import BlockCalls
from cacheproof.check.programs.generators.block_exhaustive import EXHAUSTIVE
from cacheproof.spec.blocks.operations import PARTIAL_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_PROFILES, BlockSemantics
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError
from model_tests.drawn_block_calls import drawn_calls

TWO_UNITS = BlockSemantics(hash_units=2)
VLLM = BLOCK_PROFILES["vllm-block-pool"]


def _pool(num_blocks: int = 5) -> BlockPoolSpec:
    pool = BlockPoolSpec(num_blocks, TWO_UNITS)
    assert pool.allocate(1, 3) == (1, 2, 3)
    return pool


def test_a_partial_entry_becomes_the_primary_of_an_unhashed_block_and_is_announced_after_its_parent():
    pool = _pool()
    pool.cache_partial(1, 1, (10, 11, 12))
    assert pool.snapshot()[1][1] == (1, 12)
    assert pool.entries() == ((1, 3, ()),)
    assert pool.events() == (((11, (12,), ()),), (), False)
    assert pool.lookup((12,)) == (1,)
    pool.cache_partial(1, 1, (10, 11, 12))  # carried already: nothing, no event
    assert pool.events() == ((), (), False) and pool.entries() == ((1, 3, ()),)


def test_a_key_beside_a_primary_covering_as_many_units_or_more_is_a_further_hash():
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))  # place 1: covers 2 units
    pool.cache_partial(1, 1, (9,))  # 1 unit: fewer, so beside it
    assert pool.snapshot()[1][1] == (1, 20) and pool.entries() == ((1, 2, (9,)),)
    assert pool.events() == (((None, (9,), ()),), (), False)
    assert pool.lookup((9,)) == (1,) and pool.lookup((20,)) == (1,)


def test_a_longer_boundary_replaces_every_entry_of_a_block_whose_primary_covers_fewer_units():
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))
    pool.cache_partial(1, 1, (9,))
    pool.cache_partial(1, 1, (5, 6, 7))  # 3 units > 2: both entries go, announced
    assert pool.entries() == ((1, 3, ()),) and pool.snapshot()[1][1] == (1, 7)
    assert pool.events() == (((6, (7,), ()),), (9, 20), False)
    assert pool.lookup((20,)) == () and pool.lookup((9,)) == ()


def test_replace_drops_every_entry_even_of_a_key_already_carried():
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))
    pool.cache_partial(1, 1, (9,))
    pool.cache_partial(1, 1, (9,), replace=True)
    assert pool.entries() == ((1, 1, ()),) and pool.snapshot()[1][1] == (1, 9)
    assert pool.events() == (((None, (9,), ()),), (9, 20), False)


def test_cache_blocks_promotes_a_partial_entry_only_at_a_place_past_its_cover():
    pool = _pool()
    pool.cache_partial(1, 2, (1, 2, 3))  # 3 units
    with pytest.raises(WrongStateError, match="place 1"):
        pool.cache_blocks(1, (2,), (40,))  # place 1 covers 2 units: not past 3
    pool.cache_blocks(1, (1, 2), (30, 40))  # place 2 covers 4: promoted
    assert pool.entries() == ((1, 2, ()), (2, 4, ()))
    assert pool.events() == (((None, (30, 40), ()),), (3,), False)
    with pytest.raises(WrongStateError, match="hashed once"):
        pool.cache_blocks(1, (3, 2), (50, 60))  # a full block's hash is never promoted


def test_every_eviction_drops_all_entries_of_a_block_one_removal_each():
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))
    pool.cache_partial(1, 1, (9,))
    pool.free(1, (1,))
    assert pool.evict((1,)) == (1,) and pool.events() == ((), (9, 20), False)
    assert pool.hash_map() == ()
    pool.touch(2, (2,))
    pool.cache_partial(2, 2, (9,))
    pool.cache_partial(1, 2, (8,))  # request 1 holds block 2 too: a further hash
    pool.free(1, (2, 3))
    pool.free(2, (2,))
    assert pool.allocate(3, 3) == (3, 4, 1)  # block 3 freed unhashed to the head; block 2 hashed at the tail
    assert pool.allocate(3, 1) == (2,) and pool.events() == ((), (8, 9), False)


def test_move_hashes_moves_every_entry_with_its_cover_and_announces_nothing():
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))
    pool.cache_partial(1, 1, (9,))
    pool.cache_blocks(1, (3,), (9,))  # block 3 also carries 9, inserted after block 1
    pool.move_hashes(1, 1, 2)
    assert pool.events() == ((), (), False)
    assert pool.entries() == ((2, 2, (9,)), (3, 2, ()))
    assert dict(pool.hash_map()) == {9: (3, 2), 20: (2,)}  # 2 joins 9's carriers last
    assert pool.lookup((9,)) == (3,) and pool.snapshot()[1][1] == (1, None)


@pytest.mark.parametrize("call, error", [
    (("cache_partial", 1, 1, (1, 2)), InvalidArgumentError),  # ends at a block's end
    (("cache_partial", 1, 1, ()), InvalidArgumentError),
    (("cache_partial", 1, 1, (1,), "yes"), InvalidArgumentError),
    (("cache_partial", 2, 1, (1,)), WrongStateError),  # request 2 does not hold block 1
    (("move_hashes", 1, 1, 1), InvalidArgumentError),
    (("move_hashes", 1, 0, 2), InvalidArgumentError),
    (("move_hashes", 1, 3, 1), WrongStateError),  # the target carries a hash
    (("move_hashes", 1, 4, 2), WrongStateError),  # block 4 is free, not held
])
def test_misuse_raises_its_type_and_changes_nothing(call, error):
    pool = _pool()
    pool.cache_blocks(1, (1,), (20,))
    before = pool.state_key()
    op, *args = call
    kwargs = {"replace": args.pop()} if op == "cache_partial" and len(args) == 4 else {}
    with pytest.raises(error):
        getattr(pool, op)(*args, **kwargs)
    assert pool.state_key() == before and pool.events() == ((), (), False)


def test_at_one_hash_unit_per_block_no_chain_ends_inside_a_block():
    pool = BlockPoolSpec(3)
    pool.allocate(1, 1)
    with pytest.raises(InvalidArgumentError, match="1 hash units per block"):
        pool.cache_partial(1, 1, (5,))
    assert "cache_partial" not in BLOCK_PROFILES["contract"].operations


def test_the_suited_calls_reach_every_branch_of_the_partial_entries_and_none_is_misuse():
    drawn = drawn_calls(VLLM.semantics, VLLM.operations, programs=80, steps=40)
    assert [c for c, _, outcome in drawn if outcome == "InvalidArgumentError"] == []
    partial = [(c, entries) for c, entries, outcome in drawn if c.op == "cache_partial" and outcome is None]
    covers = [{b: cover for b, cover, _ in entries} for _, entries in partial]
    assert any(c.kwargs.get("replace") for c, _ in partial)
    assert any(c.args[1] in cover and cover[c.args[1]] < len(c.args[2]) for (c, _), cover in zip(partial, covers))
    assert any(c.args[1] in cover and cover[c.args[1]] >= len(c.args[2]) for (c, _), cover in zip(partial, covers))
    assert any(c.op == "move_hashes" and outcome is None for c, _, outcome in drawn)
    promotions = [c for c, entries, outcome in drawn if c.op == "cache_blocks" and outcome is None
                  and {b for b, cover, _ in entries if cover % 2} & set(c.args[1])]
    assert promotions


def test_exhaustive_enumeration_offers_the_partial_entries_and_each_is_suited():
    scope = next(iter(EXHAUSTIVE.values()))
    model = BlockPoolSpec(3, VLLM.semantics)
    model.allocate(1, 2)
    model.cache_blocks(1, (1,), (scope.hashes[0],))
    calls = BlockCalls().enabled_calls(scope, model, VLLM.operations, False)
    ops = {call.op for call in calls}
    assert set(PARTIAL_OPERATIONS) <= ops
    for call in calls:
        twin = model.copy()
        getattr(twin, call.op)(*call.args, **call.kwargs)  # suited: no error
