"""The Hypothesis state machine that drives the spec and a cache under test side by side.

One rule per operation, plus one for bad arguments, and in the long scope one that makes a burst
of calls. Each rule usually picks a key whose state suits the operation (a RESERVED key for
commit, an in-use key for release, an idle key for acquire and pop, an absent key for reserve and
put) and sometimes any key of the example's universe; sizes sit on the boundaries (1, capacity,
capacity - 1, fractions, and in the wide scope 2**31 and 2**32). What keys, capacities and sizes an
example may reach is its `Scope` (cacheproof.check.sequential.scope). After every step the outcome, len(),
`in`, stats() and snapshot() are compared and the spec's invariant table is evaluated on the step.

`machine_for` builds the machine class of one scope: rules exist only for the checked operations
(no preconditions to evaluate on every step).
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Hashable
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.errors import StopTest, UnsatisfiedAssumption
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from cacheproof.check.programs.cache_calls import (
    BAD_KINDS, BAD_OPERATIONS, PICKS_PER_KEY, SUITED_PERCENT, bad_call, misuses, size_for,
)
from cacheproof.contract.calls import Call, drawn_recipe
from cacheproof.contract.outcomes import Divergence, step_difference
from cacheproof.check.sequential.distinct import SearchDone
from cacheproof.check.sequential.scope import (
    SMALL,
    SMALL_KEYS,
    Scope,
    capacities,
    size_picks,
    universes,
)
from cacheproof.spec import EntryState
from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.spec.cache.operations import ALL_OPERATIONS, CACHE_OPERATIONS, KEYED_OPERATIONS
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.kinds import new_spec
from cacheproof.spec.kind import Model

KEYS: tuple[Hashable, ...] = SMALL_KEYS
"""The small scope's key universe (what replays and the concurrent checker compare `in` over)."""


tags = st.integers(0, 255)

_KEYED = frozenset(KEYED_OPERATIONS)


def key_picks(scope: Scope) -> st.SearchStrategy[tuple[int, int]]:
    """(bias, index): bias < 80 picks among the keys that suit the operation, else among all keys."""
    return st.tuples(st.integers(0, 99), st.integers(0, scope.max_keys * PICKS_PER_KEY - 1))


class Tally:
    """Counts across all examples of one run, the calls of the latest example, and the scope covered.

    `examples` counts what `max_examples` (`check --examples`) counts: the call sequences that ran
    to their end, the first failing one included. Sequences Hypothesis abandons midway because it
    ran out of data (`discarded`) and its shrinking attempts after a failure (`shrinking`) are
    counted apart, and so are those ended by `reject()` or `SearchDone` (`rejected`: a divergence of
    a kind already reported, cacheproof.check.sequential.distinct); `steps` counts every call made.
    `first_failure_example` is the ordinal, among `examples + rejected`, of the first example that
    failed, and `first_failure_at` the `time.perf_counter()` when it ended.
    """

    def __init__(self) -> None:
        self.examples = 0
        self.discarded = 0
        self.shrinking = 0
        self.rejected = 0
        self.failed = False
        self.coverage = OutcomeCoverage(CACHE_OPERATIONS)  # the spec's outcomes reached, per operation
        self.first_failure_example: int | None = None
        self.first_failure_at: float | None = None
        self.steps = 0
        self.capacity_bytes = 0
        self.calls: list[Call] = []
        self.first_divergence: tuple[int, tuple[Call, ...], str] | None = None  # (capacity, calls, message)
        self.smallest: tuple[int, tuple[Call, ...], str] | None = None  # the run's shortest divergence, likewise
        self.found_at: int | None = None  # the failing example the run shrinks, counted as examples + rejected
        self.on_example: Callable[[Tally], None] | None = None
        self.is_known: Callable[[int, list[Call]], bool] | None = None  # a divergence of a reported kind?
        self.most_live = 0  # the most entries live at once in one example
        self.most_keys = 0  # the most distinct keys one example used
        self.key_types: set[str] = set()  # type names of every key used
        self.largest_capacity = 0
        self.longest_sequence = 0  # the most calls in one example

    def note_example(self, calls: list[Call]) -> None:
        """Add the keys and length of one finished example to the scope covered."""
        keys = set()
        for call in calls:
            if call.op in _KEYED and call.args:
                try:
                    keys.add(call.args[0])
                except TypeError:  # a bad argument's unhashable key
                    continue
        self.most_keys = max(self.most_keys, len(keys))
        self.key_types.update(type(key).__name__ for key in keys)
        self.longest_sequence = max(self.longest_sequence, len(calls))

    def new_run(self) -> None:
        """A run of Hypothesis starts (the first, or one searching for further kinds): no failure yet."""
        self.first_divergence = self.smallest = self.found_at = None
        self.failed = False

    def note_divergence(self, message: str) -> None:
        """The latest example diverges at its last call (in a kind not reported yet): the run's
        first divergence, and its shortest so far (what a Ctrl-C while Hypothesis shrinks reports)."""
        diverging = (self.capacity_bytes, tuple(self.calls), message)
        if self.first_divergence is None:
            self.first_divergence = diverging
        if self.smallest is None or len(self.calls) < len(self.smallest[1]):
            self.smallest = diverging

    def example_ended(self, error: BaseException | None) -> None:
        """Count an example that ended with `error` in flight (None: it ran all its calls)."""
        if isinstance(error, StopTest):
            self.discarded += 1
        elif self.failed:
            self.shrinking += 1
        elif isinstance(error, (UnsatisfiedAssumption, SearchDone)):  # a divergence of a kind already reported
            self.rejected += 1
        else:
            self.examples += 1
            self.failed = error is not None
            if self.failed:
                self.found_at = self.examples + self.rejected
            if self.failed:
                self.note_failure(self.examples + self.rejected)

    def note_failure(self, ordinal: int) -> None:
        """The example of this ordinal failed: the first failure, unless one was noted before."""
        if self.first_failure_example is None:
            self.first_failure_example = ordinal
            self.first_failure_at = time.perf_counter()


class CacheMachine(RuleBasedStateMachine):
    """Spec vs cache. `machine_for` makes the subclasses that run, with rules and settings bound."""

    factory: Callable[[int], Any]
    tally: Tally
    scope: Scope = SMALL
    max_capacity: int | None = None  # capacities are capped here for caches whose values hold memory
    semantics: Semantics = CONTRACT
    operations: tuple[str, ...] = ALL_OPERATIONS
    bad_arguments: bool = True

    def __init__(self) -> None:
        super().__init__()
        self.spec: Model | None = None
        self.cache: Any = None
        self.capacity = 0
        self.keys: tuple[Hashable, ...] = self.scope.key_pool
        tally = type(self).tally
        tally.calls = []
        if tally.on_example is not None:
            tally.on_example(tally)

    def start(self, capacity: int, keys: tuple[Hashable, ...]) -> None:
        """A fresh spec and cache of `capacity` bytes; the example calls on `keys` only."""
        self.capacity = capacity
        self.keys = keys
        self.spec = new_spec(capacity, type(self).semantics)
        self.cache = type(self).factory(capacity)
        tally = self.tally
        tally.capacity_bytes = capacity
        tally.largest_capacity = max(tally.largest_capacity, capacity)

    def teardown(self) -> None:
        self.tally.example_ended(sys.exc_info()[1])  # Hypothesis calls teardown in a `finally`
        self.tally.note_example(self.tally.calls)

    # What each rule does, from its raw picks (the bursts reuse these) -----------------------

    def do_reserve(self, pick, size, retain) -> None:
        key = self._key(pick, self._absent())
        self._step(Call("reserve", (key, self._size(size)), self._retain_kwargs(retain)))

    def do_acquire(self, pick, size, retain, agree) -> None:
        key = self._key(pick, self._in_state(idle=True) or self._present())
        entry = self._entry(key)
        if entry is not None and agree < 8:
            self._step(Call("acquire", (key, entry.nbytes), {} if entry.retain else {"retain": False}))
        else:
            self._step(Call("acquire", (key, self._size(size)), self._retain_kwargs(retain)))

    def do_commit(self, pick, size, tag, agree) -> None:
        key = self._key(pick, self._in_state(state=EntryState.RESERVED))
        entry = self._entry(key)
        nbytes = self._size(size)
        if entry is not None:
            nbytes = entry.nbytes if agree < 8 else nbytes + (nbytes == entry.nbytes)
        self._step(Call("commit", (key, drawn_recipe(nbytes, tag))))

    def do_put(self, pick, size, tag) -> None:
        key = self._key(pick, self._absent())
        self._step(Call("put", (key, drawn_recipe(self._size(size), tag))))

    def do_get(self, pick) -> None:
        self._step(Call("get", (self._key(pick, self._in_state(state=EntryState.READY)),)))

    def do_release(self, pick) -> None:
        self._step(Call("release", (self._key(pick, self._in_state(in_use=True)),)))

    def do_evict(self, size, zero) -> None:
        self._step(Call("evict", (0 if zero else self._size(size),)))

    def do_pop(self, pick) -> None:
        self._step(Call("pop", (self._key(pick, self._in_state(idle=True)),)))

    def do_clear(self) -> None:
        self._step(Call("clear"))

    def do_contains(self, pick) -> None:
        self._step(Call("contains", (self._key(pick, self._present()),)))

    def do_bad_argument(self, operation, bad, pick, tag) -> None:
        """Only operations in the subset; where arguments are not all checked, the drawn pair if the
        semantics make it (`misuses`), else a put of the drawn bad kind if they make that, else
        their first (the oversized put)."""
        made = misuses(self.semantics.argument_checks)
        if (operation, bad) not in made:
            operation, bad = ("put", bad) if ("put", bad) in made else made[0]
        if operation not in self.operations:
            return
        key = self._key(pick, self._present())
        self._step(bad_call(operation, bad, key, tag, self.capacity))

    def do_burst(self, seed: int, length: int) -> None:
        """`length` calls of the checked operations, their picks drawn from random.Random(seed)."""
        rng = random.Random(seed)
        operations = [op for op in self.operations if op in _BURST_PICKS]
        for _ in range(length):
            op = operations[rng.randrange(len(operations))]
            getattr(self, f"do_{op}")(*(draw(rng, self.scope) for draw in _BURST_PICKS[op]))

    # Picking arguments --------------------------------------------------------------------

    def _key(self, pick: tuple[int, int], suited: list[Hashable]) -> Hashable:
        bias, index = pick
        if bias < SUITED_PERCENT and suited:
            return suited[index % len(suited)]
        return self.keys[index % len(self.keys)]

    def _size(self, pick: tuple[int, int]) -> int:
        return size_for(pick[0], pick[1], self.capacity, len(self.keys))

    @staticmethod
    def _retain_kwargs(retain: int) -> dict:
        return {"retain": False} if retain < 3 else {}

    def _entry(self, key: Hashable):
        for entry in self.spec.snapshot():
            if entry.key == key and type(entry.key) is type(key):
                return entry
        return None

    def _present(self) -> list[Hashable]:
        return [e.key for e in self.spec.snapshot()]

    def _absent(self) -> list[Hashable]:
        present = set(self._present())
        return [key for key in self.keys if key not in present]

    def _in_state(self, *, state=None, idle=False, in_use=False) -> list[Hashable]:
        return [
            e.key
            for e in self.spec.snapshot()
            if (state is None or e.state is state)
            and (not idle or (e.state is EntryState.READY and e.refcount == 0))
            and (not in_use or e.refcount > 0)
        ]

    # The differential step ----------------------------------------------------------------

    def _step(self, call: Call) -> None:
        tally = self.tally
        tally.calls.append(call)
        tally.steps += 1
        keys = _keys_of(call, self.keys) if hasattr(self.cache, "snapshot") else self.keys
        difference = step_difference(self.spec, self.cache, call, keys, tally.coverage.record)
        tally.most_live = max(tally.most_live, len(self.spec))
        if difference is not None:
            if tally.is_known is not None and tally.is_known(tally.capacity_bytes, tally.calls):
                reject()  # a kind already reported (cacheproof.check.sequential.distinct): the example ends, not counted
            tally.note_divergence(difference)
            raise Divergence(difference)


def _keys_of(call: Call, universe: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
    if call.op in ("evict", "clear") or not call.args:
        return universe
    key = call.args[0]
    try:
        hash(key)
    except TypeError:
        return ()
    return (key,)


def _pick(rng: random.Random, scope: Scope) -> tuple[int, int]:
    return rng.randrange(100), rng.randrange(scope.max_keys * PICKS_PER_KEY)


def _size_pick(rng: random.Random, scope: Scope) -> tuple[int, int]:
    return rng.randrange(scope.size_kinds), rng.randrange(2**62)


def _tenth(rng: random.Random, scope: Scope) -> int:
    return rng.randrange(10)


def _tag(rng: random.Random, scope: Scope) -> int:
    return rng.randrange(256)


def _coin(rng: random.Random, scope: Scope) -> bool:
    return rng.random() < 0.5


_BURST_PICKS: dict[str, tuple[Callable[[random.Random, Scope], Any], ...]] = {
    "reserve": (_pick, _size_pick, _tenth),
    "acquire": (_pick, _size_pick, _tenth, _tenth),
    "commit": (_pick, _size_pick, _tag, _tenth),
    "put": (_pick, _size_pick, _tag),
    "get": (_pick,),
    "release": (_pick,),
    "evict": (_size_pick, _coin),
    "pop": (_pick,),
    "clear": (),
    "contains": (_pick,),
}
"""The raw picks of each operation's `do_` method, as a burst draws them (the rules' draws, seeded)."""


def _rules(scope: Scope, operations: tuple[str, ...], bad_arguments: bool, max_capacity: int | None) -> dict:
    """The rule methods of a machine for `scope`: one per operation in `operations`, the bad-argument
    rule if `bad_arguments`, the burst rule if the scope has bursts."""
    keys, sizes, retain, agree = key_picks(scope), size_picks(scope), st.integers(0, 9), st.integers(0, 9)
    setups = st.tuples(capacities(scope, max_capacity), universes(scope))

    @initialize(setup=setups)
    def new_cache(self, setup) -> None:
        self.start(*setup)

    def reserve(self, pick, size, retain) -> None:
        self.do_reserve(pick, size, retain)

    def acquire(self, pick, size, retain, agree) -> None:
        self.do_acquire(pick, size, retain, agree)

    def commit(self, pick, size, tag, agree) -> None:
        self.do_commit(pick, size, tag, agree)

    def put(self, pick, size, tag) -> None:
        self.do_put(pick, size, tag)

    def get(self, pick) -> None:
        self.do_get(pick)

    def release(self, pick) -> None:
        self.do_release(pick)

    def evict(self, size, zero) -> None:
        self.do_evict(size, zero)

    def pop(self, pick) -> None:
        self.do_pop(pick)

    def clear(self) -> None:
        self.do_clear()

    def contains(self, pick) -> None:
        self.do_contains(pick)

    def bad_argument(self, operation, bad, pick, tag) -> None:
        self.do_bad_argument(operation, bad, pick, tag)

    def burst(self, seed, length) -> None:
        self.do_burst(seed, length)

    strategies = {
        "reserve": {"pick": keys, "size": sizes, "retain": retain},
        "acquire": {"pick": keys, "size": sizes, "retain": retain, "agree": agree},
        "commit": {"pick": keys, "size": sizes, "tag": tags, "agree": agree},
        "put": {"pick": keys, "size": sizes, "tag": tags},
        "get": {"pick": keys},
        "release": {"pick": keys},
        "evict": {"size": sizes, "zero": st.booleans()},
        "pop": {"pick": keys},
        "clear": {},
        "contains": {"pick": keys},
    }
    bodies = locals()
    methods = {"new_cache": new_cache}
    for op in operations:
        methods[op] = rule(**strategies[op])(bodies[op])
    if bad_arguments:
        methods["bad_argument"] = rule(
            operation=st.sampled_from(BAD_OPERATIONS), bad=st.sampled_from(BAD_KINDS), pick=keys, tag=tags
        )(bad_argument)
    if scope.burst:
        methods["burst"] = rule(seed=st.integers(0, 2**32 - 1), length=st.integers(1, scope.burst))(burst)
    return methods


def machine_for(
    factory: Callable[[int], Any],
    tally: Tally | None = None,
    *,
    semantics: Semantics = CONTRACT,
    operations: tuple[str, ...] = ALL_OPERATIONS,
    bad_arguments: bool = True,
    scope: Scope = SMALL,
    max_capacity: int | None = None,
) -> type[CacheMachine]:
    """A `CacheMachine` subclass bound to `factory`; its `.TestCase` runs under pytest/unittest.

    The spec runs with `semantics`; no call outside `operations` is ever made; `bad_arguments=False`
    drops the bad-argument rule. Examples are drawn from `scope`, capacities capped at
    `max_capacity` (None: no cap; see `cacheproof.contract.values.MAX_VALUE_BYTES`).
    """
    operations = tuple(op for op in ALL_OPERATIONS if op in operations)
    return type(
        "CacheMachine",
        (CacheMachine,),
        {
            "factory": staticmethod(factory),
            "tally": tally or Tally(),
            "semantics": semantics,
            "operations": operations,
            "bad_arguments": bad_arguments,
            "scope": scope,
            "max_capacity": max_capacity,
            **_rules(scope, operations, bad_arguments, max_capacity),
        },
    )
