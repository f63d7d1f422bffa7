"""The Hypothesis state machine that drives `CacheSpec` and a cache under test side by side.

One rule per operation, plus one for bad arguments. Each rule usually picks a key whose state
suits the operation (a RESERVED key for commit, an in-use key for release, an idle key for
acquire and pop, an absent key for reserve and put) and sometimes any key; capacities are tiny
half of the time; sizes sit on the boundaries (1, capacity, capacity - 1, fractions). After every
step the outcome, len(), `in`, stats() and snapshot() are compared and the spec's invariant table
is evaluated on the step.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Hashable

from hypothesis import strategies as st
from hypothesis.errors import StopTest
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from cacheproof.check.calls import Call, ValueRecipe
from cacheproof.check.differential import Divergence, step_difference
from cacheproof.spec import CacheSpec, EntryState
from cacheproof.spec.profiles import ALL_OPERATIONS
from cacheproof.spec.semantics import CONTRACT, Semantics

KEYS: tuple[Hashable, ...] = (0, 1, 2, 3, 4, 5)
"""The key universe: small, so that operations keep meeting the same entries."""

_SUITED_PERCENT = 80

capacities = st.one_of(st.integers(1, 8), st.integers(1, 64))
"""Capacities of 1..8 bytes half of the time, up to 64 otherwise."""

key_picks = st.tuples(st.integers(0, 99), st.integers(0, len(KEYS) * 8 - 1))
"""(bias, index): bias < 80 picks among the keys that suit the operation, else among all keys."""

size_picks = st.tuples(st.integers(0, 6), st.integers(0, 63))
"""(kind, raw): 1, capacity, capacity - 1, capacity / 2, / 3, / 4, or any size up to capacity."""

tags = st.integers(0, 255)

BAD_NBYTES = ("zero", "negative", "bool", "float", "none", "string", "too_large")


class Tally:
    """Counts across all examples of one run, and the calls of the latest example.

    `examples` counts what `max_examples` (`check --examples`) counts: the call sequences that ran
    to their end, the first failing one included. Sequences Hypothesis abandons midway because it
    ran out of data (`discarded`) and its shrinking attempts after a failure (`shrinking`) are
    counted apart; `steps` counts every call made.
    """

    def __init__(self) -> None:
        self.examples = 0
        self.discarded = 0
        self.shrinking = 0
        self.failed = False
        self.steps = 0
        self.capacity_bytes = 0
        self.calls: list[Call] = []
        self.first_divergence: tuple[int, tuple[Call, ...], str] | None = None  # (capacity, calls, message)
        self.on_example: Callable[["Tally"], None] | None = None

    def example_ended(self, error: BaseException | None) -> None:
        """Count an example that ended with `error` in flight (None: it ran all its calls)."""
        if isinstance(error, StopTest):
            self.discarded += 1
        elif self.failed:
            self.shrinking += 1
        else:
            self.examples += 1
            self.failed = error is not None


class CacheMachine(RuleBasedStateMachine):
    """Spec vs cache. Subclass with `factory` and `tally` set (see `machine_for`)."""

    factory: Callable[[int], Any]
    tally: Tally
    semantics: Semantics = CONTRACT
    operations: tuple[str, ...] = ALL_OPERATIONS
    bad_arguments: bool = True

    def __init__(self) -> None:
        super().__init__()
        self.spec: CacheSpec | None = None
        self.cache: Any = None
        self.capacity = 0
        tally = type(self).tally
        tally.calls = []
        if tally.on_example is not None:
            tally.on_example(tally)

    @initialize(capacity=capacities)
    def new_cache(self, capacity: int) -> None:
        self.capacity = capacity
        self.spec = CacheSpec(capacity, type(self).semantics)
        self.cache = type(self).factory(capacity)
        self.tally.capacity_bytes = capacity

    def teardown(self) -> None:
        self.tally.example_ended(sys.exc_info()[1])  # Hypothesis calls teardown in a `finally`

    # Rules --------------------------------------------------------------------------------

    @rule(pick=key_picks, size=size_picks, retain=st.integers(0, 9))
    @precondition(lambda self: "reserve" in self.operations)
    def reserve(self, pick, size, retain) -> None:
        key = self._key(pick, self._absent())
        self._step(Call("reserve", (key, self._size(size)), self._retain_kwargs(retain)))

    @rule(pick=key_picks, size=size_picks, retain=st.integers(0, 9), agree=st.integers(0, 9))
    @precondition(lambda self: "acquire" in self.operations)
    def acquire(self, pick, size, retain, agree) -> None:
        key = self._key(pick, self._in_state(idle=True) or self._present())
        entry = self._entry(key)
        if entry is not None and agree < 8:
            self._step(Call("acquire", (key, entry.nbytes), {} if entry.retain else {"retain": False}))
        else:
            self._step(Call("acquire", (key, self._size(size)), self._retain_kwargs(retain)))

    @rule(pick=key_picks, size=size_picks, tag=tags, agree=st.integers(0, 9))
    @precondition(lambda self: "commit" in self.operations)
    def commit(self, pick, size, tag, agree) -> None:
        key = self._key(pick, self._in_state(state=EntryState.RESERVED))
        entry = self._entry(key)
        nbytes = self._size(size)
        if entry is not None:
            nbytes = entry.nbytes if agree < 8 else nbytes + (nbytes == entry.nbytes)
        self._step(Call("commit", (key, ValueRecipe(nbytes, tag))))

    @rule(pick=key_picks, size=size_picks, tag=tags)
    @precondition(lambda self: "put" in self.operations)
    def put(self, pick, size, tag) -> None:
        key = self._key(pick, self._absent())
        self._step(Call("put", (key, ValueRecipe(self._size(size), tag))))

    @rule(pick=key_picks)
    @precondition(lambda self: "get" in self.operations)
    def get(self, pick) -> None:
        self._step(Call("get", (self._key(pick, self._in_state(state=EntryState.READY)),)))

    @rule(pick=key_picks)
    @precondition(lambda self: "release" in self.operations)
    def release(self, pick) -> None:
        self._step(Call("release", (self._key(pick, self._in_state(in_use=True)),)))

    @rule(size=size_picks, zero=st.booleans())
    @precondition(lambda self: "evict" in self.operations)
    def evict(self, size, zero) -> None:
        self._step(Call("evict", (0 if zero else self._size(size),)))

    @rule(pick=key_picks)
    @precondition(lambda self: "pop" in self.operations)
    def pop(self, pick) -> None:
        self._step(Call("pop", (self._key(pick, self._in_state(idle=True)),)))

    @rule()
    @precondition(lambda self: "clear" in self.operations)
    def clear(self) -> None:
        self._step(Call("clear"))

    @rule(pick=key_picks)
    @precondition(lambda self: "contains" in self.operations)
    def contains(self, pick) -> None:
        self._step(Call("contains", (self._key(pick, self._present()),)))

    @rule(
        operation=st.sampled_from(("reserve", "acquire", "commit", "put", "evict", "get", "release", "pop", "contains")),
        bad=st.sampled_from(BAD_NBYTES + ("unhashable_key", "unsizable_value", "empty_value", "bad_retain")),
        pick=key_picks,
        tag=tags,
    )
    @precondition(lambda self: self.bad_arguments)
    def bad_argument(self, operation, bad, pick, tag) -> None:
        """Only operations in the subset; with trusted arguments only oversized puts (put_too_large)."""
        if self.semantics.argument_checks == "trusted":
            operation, bad = "put", "too_large"  # the one bad call trusted arguments still make
        if operation not in self.operations:
            return
        key = self._key(pick, self._present())
        self._step(self._bad_call(operation, bad, key, tag))

    # Picking arguments --------------------------------------------------------------------

    def _key(self, pick: tuple[int, int], suited: list[Hashable]) -> Hashable:
        bias, index = pick
        if bias < _SUITED_PERCENT and suited:
            return suited[index % len(suited)]
        return KEYS[index % len(KEYS)]

    def _size(self, pick: tuple[int, int]) -> int:
        kind, raw = pick
        capacity = self.capacity
        size = (1, capacity, capacity - 1, capacity // 2, capacity // 3, capacity // 4, 1 + raw % capacity)[kind]
        return max(size, 1)

    @staticmethod
    def _retain_kwargs(retain: int) -> dict:
        return {"retain": False} if retain < 3 else {}

    def _entry(self, key: Hashable):
        for entry in self.spec.snapshot():
            if entry.key == key:
                return entry
        return None

    def _present(self) -> list[Hashable]:
        return [e.key for e in self.spec.snapshot()]

    def _absent(self) -> list[Hashable]:
        present = set(self._present())
        return [key for key in KEYS if key not in present]

    def _in_state(self, *, state=None, idle=False, in_use=False) -> list[Hashable]:
        return [
            e.key
            for e in self.spec.snapshot()
            if (state is None or e.state is state)
            and (not idle or (e.state is EntryState.READY and e.refcount == 0))
            and (not in_use or e.refcount > 0)
        ]

    def _bad_call(self, operation: str, bad: str, key: Hashable, tag: int) -> Call:
        nbytes: Any = 1
        value: Any = ValueRecipe(1, tag)
        kwargs: dict = {}
        if bad in BAD_NBYTES:
            nbytes = {
                "zero": 0, "negative": -1, "bool": True, "float": 1.0, "none": None, "string": "1",
                "too_large": self.capacity + 1,
            }[bad]
            value = ValueRecipe(self.capacity + 1, tag) if bad == "too_large" else value
        elif bad == "unhashable_key":
            key = [key]
        elif bad == "unsizable_value":
            value = "not sizable"
        elif bad == "empty_value":
            value = ValueRecipe(0, tag)
        elif bad == "bad_retain":
            kwargs = {"retain": 1}
        if operation in ("reserve", "acquire"):
            return Call(operation, (key, nbytes), kwargs)
        if operation in ("commit", "put"):
            return Call(operation, (key, value))
        if operation == "evict":
            return Call("evict", (nbytes,))
        return Call(operation, (key,))

    # The differential step ----------------------------------------------------------------

    def _step(self, call: Call) -> None:
        tally = self.tally
        tally.calls.append(call)
        tally.steps += 1
        keys = _keys_of(call) if hasattr(self.cache, "snapshot") else KEYS
        difference = step_difference(self.spec, self.cache, call, keys)
        if difference is not None:
            if tally.first_divergence is None:
                tally.first_divergence = (tally.capacity_bytes, tuple(tally.calls), difference)
            raise Divergence(difference)


def _keys_of(call: Call) -> tuple[Hashable, ...]:
    if call.op in ("evict", "clear") or not call.args:
        return KEYS
    key = call.args[0]
    try:
        hash(key)
    except TypeError:
        return ()
    return (key,)


def machine_for(
    factory: Callable[[int], Any],
    tally: Tally | None = None,
    *,
    semantics: Semantics = CONTRACT,
    operations: tuple[str, ...] = ALL_OPERATIONS,
    bad_arguments: bool = True,
) -> type[CacheMachine]:
    """A `CacheMachine` subclass bound to `factory`; its `.TestCase` runs under pytest/unittest.

    The spec runs with `semantics`; no call outside `operations` is ever made; `bad_arguments=False`
    drops the bad-argument rule.
    """
    return type(
        "CacheMachine",
        (CacheMachine,),
        {
            "factory": staticmethod(factory),
            "tally": tally or Tally(),
            "semantics": semantics,
            "operations": tuple(operations),
            "bad_arguments": bad_arguments,
        },
    )
