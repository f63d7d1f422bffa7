"""Issue 35, item 6: a cache counterexample's numbers are as low as its failure allows.

`cacheproof check` shrinks a divergence, then lowers its numbers (keys, byte counts: every
occurrence of a number at one argument position together) and its capacity. This test does not
reuse the shrinker's candidates: for every number of the shrunk program it tries every smaller one
(a value keeps at least one byte: an empty value is a misuse), and every smaller capacity, each
replayed by the checker's own step on a fresh spec and implementation; none may fail the same way.
A capacity and a byte count above 2**31 are lowered in a count of replays that grows with their
logarithm, not with the distance to the least that fails (issue 32).
"""

from __future__ import annotations

import pytest

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, divergence_kind, shrink_program
from cacheproof.contract.calls import Call, ValueRecipe
from model_tests import broken_caches, broken_scope_caches
from model_tests.cache_checks import KIND, check_cache, replayed

BROKEN = (broken_caches.OffByOneCapacity, broken_caches.EvictsPinnedEntries, broken_caches.ReleaseOfIdleIsNoop,
          broken_caches.GetDoesNotPromote, broken_caches.StalePinnedCounter)


def _number(argument) -> int | None:
    if type(argument) is int:
        return argument
    if isinstance(argument, ValueRecipe):
        return argument.nbytes
    return None


def _with(calls: tuple[Call, ...], position: int, number: int, lower: int) -> list[Call]:
    """Every occurrence of `number` at argument `position` made `lower`."""
    def changed(argument):
        if _number(argument) != number:
            return argument
        return argument.resized(lower) if isinstance(argument, ValueRecipe) else lower
    return [call._replace(args=tuple(changed(a) if i == position else a for i, a in enumerate(call.args)))
            for call in calls]


def _fails_the_same_way(factory, size: int, calls: list[Call], kind: tuple) -> bool:
    found = replayed(factory, size, calls)
    return found is not None and divergence_kind(found[1]) == kind


@pytest.mark.parametrize("factory", BROKEN, ids=lambda factory: factory.__name__)
def test_no_smaller_number_or_capacity_fails_the_same_way(factory):
    report = check_cache(factory, examples=300, seed=0)
    assert not report.ok
    example = report.counterexamples[0]
    kind = divergence_kind(example.difference)
    assert _fails_the_same_way(factory, example.size, list(example.calls), kind), "the counterexample replays"
    numbers = {(position, _number(argument), isinstance(argument, ValueRecipe))
               for call in example.calls for position, argument in enumerate(call.args) if _number(argument)}
    lower = [(position, number, smaller) for position, number, recipe in sorted(numbers)
             for smaller in range(1 if recipe else 0, number)
             if _fails_the_same_way(factory, example.size, _with(example.calls, position, number, smaller), kind)]
    assert lower == [], f"{example.calls} at {example.size} fails the same way with (position, number, lower) {lower}"
    smaller_sizes = [size for size in range(1, example.size)
                     if _fails_the_same_way(factory, size, list(example.calls), kind)]
    assert smaller_sizes == [], f"{example.calls} fails the same way at capacities {smaller_sizes} < {example.size}"


WIDE_CAPACITY = 4_831_819_167
WIDE_CALLS = (Call("acquire", ((), 4_294_967_146)),)
"""What the wide scope's search found of ByteCountersWrapAt32Bits at seed 0 (test_scope's phase),
its calls dropped: a capacity and a byte count above 2**31, whose lowering had one candidate left
that failed, one less, so it took a replay per byte (about 120 s at the default call timeout)."""
WRAPS_AT = 2**31
"""ByteCountersWrapAt32Bits keeps its byte counts in signed 32-bit ints: 2**31 is the least that wraps."""
MOST_REPLAYS = 150
"""Shrinking that counterexample replays at most this many programs (bisections of numbers near 2**32
take about 32 replays each; one byte a replay took billions)."""


def test_a_capacity_and_a_byte_count_above_2_31_are_bisected_down_to_the_least_that_wraps():
    replays = []

    def counted(size: int) -> broken_scope_caches.ByteCountersWrapAt32Bits:
        replays.append(size)
        assert len(replays) <= MOST_REPLAYS, f"more than {MOST_REPLAYS} replays; sizes tried last: {replays[-5:]}"
        return broken_scope_caches.ByteCountersWrapAt32Bits(size)

    step, difference = replayed(broken_scope_caches.ByteCountersWrapAt32Bits, WIDE_CAPACITY, WIDE_CALLS)
    assert step == 0
    setup = ProgramSetup(KIND, lambda size: KIND.new(size), counted, generator_for(KIND.name), KIND.names, True, 1)
    shrunk = shrink_program(setup, ProgramCounterexample(WIDE_CAPACITY, WIDE_CALLS, difference))
    assert (shrunk.size, shrunk.calls) == (WRAPS_AT, (Call("acquire", ((), WRAPS_AT)),)), shrunk
    assert not shrunk.cut_short
    assert replayed(broken_scope_caches.ByteCountersWrapAt32Bits, WRAPS_AT - 1, [Call("acquire", ((), WRAPS_AT - 1))]) is None
