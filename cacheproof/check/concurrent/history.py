"""Run a concurrent scenario on a fresh cache and record its history.

What is recorded, per call of the prefix and of every thread: the outcome (the result in a
comparable form, or the raised error's class names, its MRO) and, for thread calls, the moment of
invocation and of response as positions in one global order (a shared counter, taken just before
the call starts and just after it returns). After the threads join, a final observation: len(),
stats() (the compared fields) and snapshot() when the cache has them, else `key in cache` for every
key. A thread still running after the timeout (DEFAULT_TIMEOUT, or `--call-timeout`) is recorded as stuck.

A get/pop result is recorded as the recipes of the scenario whose value it equals (so the history is
plain data, free of the cache's tensors).
"""

from __future__ import annotations

import enum
import itertools
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Hashable, NamedTuple

from cacheproof.contract import calls as call_format
from cacheproof.contract.calls import Call, ValueRecipe, invoke
from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.contract.outcomes import STATS_FIELDS, error_classes, normalize_snapshot
from cacheproof.check.sequential.machine import KEYS
from cacheproof.contract.values import values_equal
from cacheproof.spec.kinds import get_kind

SWITCH_INTERVAL = 1e-6
"""Seconds between the interpreter's thread switches while scenarios run (Python's default: 0.005)."""

DEFAULT_TIMEOUT = 10.0
"""Seconds a scenario's threads get to finish before they count as stuck (deadlock, lost wake-up)."""

SCENARIO_THREAD_PREFIX = "cacheproof scenario thread "
"""The name of a scenario's thread i is this prefix and i, in every runner and printed script, so that
a traceback or a stuck thread names it, and a test's racy cache can tell the scenario's threads apart
(model_tests/forced_interleaving.py)."""

_VALUE_OPERATIONS = ("get", "pop")

CONTRACT_ERRORS = get_kind("cache").error_names
"""Class names of the contract's errors (`SpecKind.error_names`); any other exception from a cache
call is a crash."""


class Observed(NamedTuple):
    """A call's outcome as plain data: `result` = (kind, payload), or `error` with its class names."""

    result: tuple | None = None
    error: str | None = None
    error_classes: tuple[str, ...] = ()
    message: str = ""  # kept only for errors that are not the contract's (crashes)

    def to_json(self) -> dict:
        if self.error is not None:
            return {"raises": self.error, "classes": list(self.error_classes), "message": self.message}
        kind, payload = self.result
        return {"kind": kind, "returns": call_format.encode_value(payload)}

    @classmethod
    def from_json(cls, data: dict) -> "Observed":
        if "raises" in data:
            return cls(error=data["raises"], error_classes=tuple(data["classes"]), message=data.get("message", ""))
        return cls(result=(data["kind"], call_format.decode_value(data["returns"])))

    def describe(self) -> str:
        if self.error is not None:
            return f"raises {self.error}" + (f": {self.message}" if self.message else "")
        kind, payload = self.result
        if kind == "value":
            if not payload:
                return "returns a value unlike any the scenario stored"
            return "returns the value of " + " or ".join(r.python() for r in payload)
        if kind == "list":
            return f"returns {list(payload)!r}"
        return f"returns {payload!r}" if kind != "enum" else f"returns {payload}"


def comparable_result(operation: str, result: Any, value_recipes: Callable[[Any], tuple] | None = None) -> tuple:
    """(kind, payload) for a result; get/pop values as the tuple of recipes they equal."""
    if operation in _VALUE_OPERATIONS and value_recipes is not None and result is not None:  # None: a miss
        return ("value", value_recipes(result))
    if isinstance(result, enum.Enum):
        return ("enum", result.name)
    if isinstance(result, list):
        return ("list", tuple(result))
    if result is None or isinstance(result, (bool, int, str)):
        return (type(result).__name__, result)
    try:
        return ("object", repr(result))
    except Exception as error:  # the cache's own result type may fail to print
        return ("object", f"<a {type(result).__name__} whose repr raised {type(error).__name__}>")


def observed_error(error: BaseException) -> Observed:
    """The error by class names; its message too when it is not a contract error (a crash)."""
    classes = error_classes(error)
    message = "" if CONTRACT_ERRORS.intersection(classes) else str(error)
    return Observed(error=type(error).__name__, error_classes=classes, message=message)


class Event(NamedTuple):
    """One thread call: invoked and responded are positions in the run's global order (None: never returned)."""

    thread: int
    index: int
    call: Call
    invoked: int
    responded: int | None
    observed: Observed | None

    def to_json(self) -> dict:
        return {
            "thread": self.thread,
            "index": self.index,
            "call": call_format.to_json(self.call),
            "invoked": self.invoked,
            "responded": self.responded,
            "outcome": None if self.observed is None else self.observed.to_json(),
        }


class Observation(NamedTuple):
    """The cache after the threads joined; None fields: the cache has no such view."""

    length: int | None
    stats: tuple | None  # STATS_FIELDS values
    snapshot: tuple | None  # normalize_snapshot form
    present: tuple | None  # (key, key in cache) per key, when there is no snapshot
    error: str | None = None  # inspecting the cache raised this

    def to_json(self) -> dict:
        return {
            "len": self.length,
            "stats": None if self.stats is None else dict(zip(STATS_FIELDS, self.stats)),
            "snapshot": None if self.snapshot is None else [list(entry) for entry in self.snapshot],
            "present": None if self.present is None else [list(item) for item in self.present],
            "error": self.error,
        }


@dataclass(frozen=True)
class History:
    """What one run of a scenario did."""

    prefix: tuple[Observed, ...]
    events: tuple[Event, ...]  # in order of invocation
    final: Observation | None  # None when a thread was stuck
    stuck: tuple[int, ...] = ()  # threads that had not returned at the timeout
    prefix_stuck: bool = False  # the prefix call after the recorded ones never returned (no thread ran)

    def to_json(self) -> dict:
        return {
            "prefix": [observed.to_json() for observed in self.prefix],
            "events": [event.to_json() for event in self.events],
            "final": None if self.final is None else self.final.to_json(),
            "stuck": list(self.stuck),
            "prefix_stuck": self.prefix_stuck,
        }

    def lines(self) -> list[str]:
        """The history in real-time order: one line per invocation and per response."""
        moments: list[tuple[int, str]] = []
        for event in self.events:
            call = call_format.to_python(event.call)
            moments.append((event.invoked, f"thread {event.thread} calls   {call}"))
            if event.responded is not None:
                moments.append((event.responded, f"thread {event.thread} returns {call} -> {event.observed.describe()}"))
            else:
                moments.append((sys.maxsize, f"thread {event.thread} never returns from {call}"))
        return [text for _, text in sorted(moments)]


class Recorder:
    """Collects a scenario's outcomes while it runs. Safe to call from the scenario's threads:
    it only appends to lists and draws from one counter, both atomic in CPython."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self._clock = itertools.count()
        self._prefix: list[tuple[Call, Any, BaseException | None]] = []
        self._events: list[tuple[int, int, Call, int, int | None, Any, BaseException | None]] = []
        self._invoked: dict[tuple[int, int], int] = {}  # (thread, index) -> invocation, kept for stuck calls

    def run_prefix(self, cache: Any) -> None:
        """Make the prefix's calls in order, recording each outcome."""
        for call in self.scenario.prefix:
            result, error = _call(cache, call)
            self._prefix.append((call, result, error))

    def call(self, cache: Any, thread: int, index: int, call: Call) -> None:
        """Make one thread call, recording when it started and returned."""
        invoked = self._invoked[thread, index] = next(self._clock)
        result, error = _call(cache, call)
        self._events.append((thread, index, call, invoked, next(self._clock), result, error))

    def finish(
        self, cache: Any, stuck: tuple[int, ...] = (), *, prefix_stuck: bool = False, timeout: float = DEFAULT_TIMEOUT
    ) -> History:
        """The history, with the final observation (none if a call is stuck: the cache is still in use)."""
        recipes = _recipe_matcher(cache, self.scenario.recipes())
        prefix = tuple(_observed(call, result, error, recipes) for call, result, error in self._prefix)
        if prefix_stuck:
            return History(prefix, (), None, (), prefix_stuck=True)
        events = [
            Event(thread, index, call, invoked, responded, _observed(call, result, error, recipes))
            for thread, index, call, invoked, responded, result, error in self._events
        ]
        done = {(event.thread, event.index) for event in events}
        for thread in stuck:
            calls = self.scenario.threads[thread]
            waiting = next(index for index in range(len(calls)) if (thread, index) not in done)
            invoked = self._invoked.get((thread, waiting), sys.maxsize)  # maxsize: still at the barrier
            events.append(Event(thread, waiting, calls[waiting], invoked, None, None))
        events.sort(key=lambda event: event.invoked)
        final = None if stuck else _observe_within(timeout, cache, _keys(self.scenario))
        return History(prefix, tuple(events), final, tuple(stuck))


def observe(cache: Any, keys: tuple[Hashable, ...]) -> Observation:
    """len(), stats() and snapshot() (else `in` per key) of the cache now."""
    try:
        length = len(cache)
        stats = None
        if hasattr(cache, "stats"):
            values = cache.stats()
            stats = tuple(getattr(values, field) for field in STATS_FIELDS)
        if hasattr(cache, "snapshot"):
            return Observation(length, stats, normalize_snapshot(cache.snapshot()), None)
        return Observation(length, stats, None, tuple((key, key in cache) for key in keys))
    except Exception as error:  # a broken cache's views may themselves fail
        return Observation(None, None, None, None, f"{type(error).__name__}: {error}")


def run_scenario(factory: Callable[[int], Any], scenario: Scenario, *, timeout: float = DEFAULT_TIMEOUT) -> History:
    """Build `factory(capacity)`, run the prefix, start one thread per call list on a barrier, join.

    Call with the switch interval already lowered (see `fast_switching`) to meet many interleavings.
    """
    cache = factory(scenario.capacity_bytes)
    recorder = Recorder(scenario)
    prefix = threading.Thread(target=recorder.run_prefix, args=(cache,), daemon=True)
    prefix.start()
    prefix.join(timeout)
    if prefix.is_alive():
        return recorder.finish(cache, prefix_stuck=True)
    barrier = threading.Barrier(len(scenario.threads))

    def run_thread(thread: int) -> None:
        barrier.wait()
        for index, call in enumerate(scenario.threads[thread]):
            recorder.call(cache, thread, index, call)

    threads = [threading.Thread(target=run_thread, args=(t,), name=f"{SCENARIO_THREAD_PREFIX}{t}", daemon=True)
               for t in range(len(scenario.threads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    stuck = tuple(index for index, thread in enumerate(threads) if thread.is_alive())
    return recorder.finish(cache, stuck, timeout=timeout)


def _observe_within(timeout: float, cache: Any, keys: tuple[Hashable, ...]) -> Observation:
    """`observe`, in a thread of its own: views that never return are recorded as an error."""
    observed: list[Observation] = []
    inspector = threading.Thread(target=lambda: observed.append(observe(cache, keys)), daemon=True)
    inspector.start()
    inspector.join(timeout)
    if not observed:
        return Observation(None, None, None, None, f"len/stats/snapshot did not return within {timeout:g} s")
    return observed[0]


class fast_switching:
    """`with fast_switching():` the interpreter switches threads every SWITCH_INTERVAL s; restored after."""

    def __init__(self, interval: float = SWITCH_INTERVAL) -> None:
        self.interval = interval
        self.previous: float | None = None

    def __enter__(self) -> "fast_switching":
        self.previous = sys.getswitchinterval()
        sys.setswitchinterval(self.interval)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.setswitchinterval(self.previous)


def _call(cache: Any, call: Call) -> tuple[Any, BaseException | None]:
    try:
        return invoke(cache, call), None
    except BaseException as error:  # a broken cache may raise anything (SystemExit too); it is recorded, not hidden
        return None, error


def _observed(call: Call, result: Any, error: BaseException | None, recipes: Callable[[Any], tuple]) -> Observed:
    if error is not None:
        return observed_error(error)
    return Observed(comparable_result(call.op, result, recipes))


def _recipe_matcher(cache: Any, recipes: tuple[ValueRecipe, ...]) -> Callable[[Any], tuple]:
    """A function from a returned value to the recipes (as the cache makes them) that it equals."""
    made: list[tuple[ValueRecipe, Any]] = []

    def matching(value: Any) -> tuple:
        if not made:
            made.extend((recipe, recipe.value(cache)) for recipe in recipes if recipe.nbytes > 0)
        return tuple(recipe for recipe, concrete in made if _equal(concrete, value))

    return matching


def _equal(expected: Any, actual: Any) -> bool:
    try:
        return values_equal(expected, actual)
    except Exception:  # a value of some unexpected kind equals nothing
        return False


def _keys(scenario: Scenario) -> tuple[Hashable, ...]:
    keys = dict.fromkeys(KEYS)
    for call in scenario.prefix + tuple(call for calls in scenario.threads for call in calls):
        if call.args and call.op != "evict":
            try:
                keys.setdefault(call.args[0], None)
            except TypeError:
                continue
    return tuple(keys)
