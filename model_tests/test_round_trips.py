"""Shrinking trades a round trip for one repeated call (issue 32, item 6: counterexamples no longer
than the state machine's).

`RecencyClockWrapsAt32` stamps every move to newest with a 5-bit clock: its bug needs a count of
moves, and its shortest counterexample (its docstring, replayed by test_search_power) is 34 calls.
SEED_0 is the counterexample `cacheproof check` reported at seed 0 before (39 calls, capacity 3;
the state machine's was 35): every pass of the shrinker before had nothing left to remove there,
since its moves are made by pairs of calls (`reserve(1, 1); release(1)`), and removing either
call of a pair, or any chunk of calls, changes the count of moves or the state. The model's
states show those pairs as round trips, and a get repeated in the stead of each keeps the count:
the program shrinks to the shortest.
"""

from __future__ import annotations

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, divergence_kind, shrink_program
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.sandbox.fault_search import DIVERGENCE, Failure, shrink_failure
from model_tests.broken_sharing_caches import RecencyClockWrapsAt32
from model_tests.cache_checks import KIND, replayed

SHORTEST = 34
"""RecencyClockWrapsAt32's shortest counterexample, in calls (its docstring)."""
CAPACITY = 3
SEED_0_TEXT = """
put 2 v1; put 1 v1; put 3 v3; reserve 1 1; release 1; reserve 2 1; release 2; put 2 v1; put 3 v1; put 0 v1;
put 1 v1; get 1; evict 3; reserve 3 1; put 1 v1; release 3; put 2 v2; put 0 v1; get 0; put 3 v1; get 3;
put 2 v1; put 1 v1; get 1; put 0 v3; put 2 v1; get 2; put 0 v1; reserve 1 1; release 1; get 2; put 1 v2;
put 0 v2; put 1 v2; reserve 0 1; put 2 v1; get 1; get 1; evict 2
"""
"""The 39 calls, one `op args...` each; `vN` is a value of N bytes (tag 1, one byte per element)."""


def _calls(text: str) -> list[Call]:
    def argument(word: str):
        return ValueRecipe(int(word[1:]), 1, 1) if word.startswith("v") else int(word)
    return [Call(op, tuple(map(argument, words))) for op, *words in (part.split() for part in text.split(";"))]


def test_a_count_of_moves_made_by_pairs_of_calls_shrinks_to_the_shortest():
    calls = _calls(SEED_0_TEXT)
    assert len(calls) == 39
    step, difference = replayed(RecencyClockWrapsAt32, CAPACITY, calls)
    assert step == len(calls) - 1, "the program fails at its last call"
    setup = ProgramSetup(KIND, lambda size: KIND.new(size), RecencyClockWrapsAt32, generator_for(KIND.name), KIND.names,
                         True, len(calls))
    shrunk = shrink_program(setup, ProgramCounterexample(CAPACITY, tuple(calls), difference))
    assert len(shrunk.calls) == SHORTEST, shrunk.calls
    found = replayed(RecencyClockWrapsAt32, shrunk.size, shrunk.calls)
    assert found is not None and found[0] == SHORTEST - 1
    assert divergence_kind(found[1]) == divergence_kind(difference)


def test_two_calls_apart_that_only_together_keep_the_state_are_traded_for_one_repeated_call():
    """The shrinker for every kind, on a toy: `open(k)` and `close(k)` move a key in and out of the
    model's set of open keys, `tick()` changes nothing there; the implementation fails at `check()`
    once five ticks or effective opens were counted and no key is open. Six calls are the fewest
    (five ticks); removing `open(1)` or `close(1)` alone, or any chunk, no longer fails."""
    tick, check = Call("tick", ()), Call("check", ())
    calls = [Call("open", (1,)), tick, tick, Call("close", (1,)), tick, tick, check]

    def states(calls: list[Call]) -> list[frozenset]:
        open_keys, seen = frozenset(), [frozenset()]
        for call in calls:
            if call.op == "open":
                open_keys |= {call.args[0]}
            elif call.op == "close":
                open_keys -= {call.args[0]}
            seen.append(open_keys)
        return seen

    def attempt(candidate: list[Call]) -> Failure | None:
        counted, open_keys = 0, set()
        for step, call in enumerate(candidate):
            counted += call.op == "tick" or call.op == "open" and call.args[0] not in open_keys
            if call.op == "open":
                open_keys.add(call.args[0])
            elif call.op == "close":
                open_keys.discard(call.args[0])
            elif call.op == "check" and counted == 5 and not open_keys:
                return Failure(step, "five counted", DIVERGENCE)
        return None

    assert attempt(calls) == Failure(6, "five counted", DIVERGENCE)
    assert shrink_failure(attempt, calls, Failure(6, "five counted", DIVERGENCE), 60.0)[0] == calls, \
        "without the model's states nothing is removed"
    shrunk, found, cut_short = shrink_failure(attempt, calls, Failure(6, "five counted", DIVERGENCE), 60.0, states=states)
    assert shrunk == [tick] * 5 + [check] and found.step == 5 and not cut_short
