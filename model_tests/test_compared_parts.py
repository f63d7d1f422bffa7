"""A view's compared part (`ViewReader.compared`): the tensor cache's stats() is compared by its
contract fields as a tuple, and its answer, the dict a report shows, is made only where they differ."""

from __future__ import annotations

import dataclasses

from cacheproof.contract.calls import Call
from cacheproof.contract.steps import differential_step
from cacheproof.spec import CacheSpec
from cacheproof.spec.cache.kind import CACHE_VIEWS
from cacheproof.spec.kinds import get_kind

KIND = get_kind("cache")


def _counting_readers():
    """The cache's readers, the stats answer counting the results it reads."""
    read = []
    stats = CACHE_VIEWS["stats"]
    readers = dict(KIND.view_readers, stats=stats._replace(answer=lambda result, model: read.append(result)
                                                            or stats.answer(result, model)))
    return readers, read


def _step(implementation, readers):
    model = CacheSpec(64)
    return differential_step(model, implementation, Call("acquire", (1, 8)), KIND.compared_views,
                             error_names=KIND.error_names, readers=readers)


class CountsHitsTwice(CacheSpec):
    """Counts each hit twice: a counter stats() shows that the contract does not compare."""

    def stats(self):
        own = super().stats()
        return dataclasses.replace(own, hits=own.hits * 2 + 1)


class OverstatesFreeBytes(CacheSpec):
    def stats(self):
        own = super().stats()
        return dataclasses.replace(own, free_bytes=own.free_bytes + 1)


class StatsWithoutEntries:
    """A stats() answer that lacks the contract's `entries` field."""

    def __init__(self, stats):
        for field in ("capacity_bytes", "ready_bytes", "reserved_bytes", "pinned_bytes", "idle_bytes", "free_bytes"):
            setattr(self, field, getattr(stats, field))


class LacksEntriesField(CacheSpec):
    def stats(self):
        return StatsWithoutEntries(super().stats())


def test_agreeing_stats_make_no_answer_on_either_side():
    readers, read = _counting_readers()
    assert _step(CacheSpec(64), readers) is None
    assert read == []


def test_a_counter_the_contract_does_not_compare_agrees_without_an_answer():
    readers, read = _counting_readers()
    assert _step(CountsHitsTwice(64), readers) is None
    assert read == []


def test_differing_stats_are_reported_field_by_field_as_before():
    readers, read = _counting_readers()
    difference = _step(OverstatesFreeBytes(64), readers)
    [(view, spec_answer, answer)] = difference.views
    assert view == "stats"
    # capacity 64, one 8-byte reservation: reserved, not ready, so all 64 bytes are free
    assert (spec_answer["free_bytes"], answer["free_bytes"]) == (64, 65)
    assert spec_answer["reserved_bytes"] == answer["reserved_bytes"] == 8
    assert {field: value for field, value in answer.items() if field != "free_bytes"} == \
        {field: value for field, value in spec_answer.items() if field != "free_bytes"}
    assert [result.free_bytes for result in read] == [65]  # the implementation's answer made (the spec's by its reader)


def test_a_stats_answer_without_a_contract_field_still_says_which():
    difference = _step(LacksEntriesField(64), KIND.view_readers)
    [(view, _, answer)] = difference.views
    assert view == "stats" and "which has no field entries" in answer


def test_the_specs_counted_stats_are_its_stats_compared_fields_in_every_state_a_program_reaches():
    """`model_compared` (the spec's `counted_stats()`, no stats built) against `compared` of the
    spec's own stats(), after every call of 200 seeded programs: one order of the fields, one value."""
    import random

    from cacheproof.check.programs.draws import swarm
    from cacheproof.check.programs.generators import generator_for
    from cacheproof.contract.steps import outcome_of

    stats = CACHE_VIEWS["stats"]
    generator, draws, states = generator_for("cache"), random.Random(0), 0
    for _ in range(200):
        operations = swarm(draws, KIND.names)
        spec = CacheSpec(generator.size(draws))
        for _ in range(40):
            outcome_of(spec, generator.draw_call(draws, spec, operations, True), KIND.error_names)
            assert stats.model_compared(spec) == stats.compared(spec.stats())
            states += spec.counted_stats()[2] > 0 and spec.counted_stats()[3] > 0  # reserved and pinned at once
    assert states > 0  # the programs reached states with several kinds of bytes at once
