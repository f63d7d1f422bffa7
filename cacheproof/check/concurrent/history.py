"""Run a concurrent scenario of any spec kind on a fresh implementation and record its history.

What is recorded, per call of the prefix and of every thread: its outcome as the differential step
records one (`contract.steps.outcome_of`: the result, a contract error by its class names, or a
crash), and, for thread calls, the moments of invocation and of response as positions in one
global order (a shared counter, taken just before the call starts and just after it returns).
After the threads join, the final views: every view of the kind (`SpecKind.views`), each read as
the kind's `view_readers` say (`contract.steps.view_of`), the same views the sequential check
compares after every call. A thread still running after the timeout (DEFAULT_TIMEOUT, or
`--call-timeout`) is recorded as stuck, and so is a prefix call or a view that never returns, and
the making of a value the scenario's calls pass (`History.stuck_making`), which gets a timeout of
its own before the prefix starts.
"""

from __future__ import annotations

import itertools
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from cacheproof.check.concurrent.scenarios import Scenario
from cacheproof.cmdline.reports import plain
from cacheproof.contract.calls import Call, ValueRecipe, to_json, to_python
from cacheproof.contract.steps import StepOutcome, outcome_of, view_of
from cacheproof.spec.kind import SpecKind

SWITCH_INTERVAL = 1e-6
"""Seconds between the interpreter's thread switches while scenarios run (Python's default: 0.005)."""

DEFAULT_TIMEOUT = 10.0
"""Seconds a scenario's threads get to finish before they count as stuck (deadlock, lost wake-up)."""

SCENARIO_THREAD_PREFIX = "cacheproof scenario thread "
"""The name of a scenario's thread i is this prefix and i, in every runner and printed script, so that
a traceback or a stuck thread names it, and a test's racy cache can tell the scenario's threads apart
(model_tests/forced_interleaving.py)."""


def outcome_json(outcome: StepOutcome) -> dict:
    """An outcome as JSON can hold it (`cmdline.reports.plain` for the result)."""
    if outcome.crash is not None:
        return {"crash": outcome.crash}
    if outcome.error is not None:
        return {"raises": outcome.error, "classes": list(outcome.error_classes)}
    return {"returns": plain(outcome.result)}


class Event(NamedTuple):
    """One thread call: invoked and responded are positions in the run's global order (None: never returned)."""

    thread: int
    index: int
    call: Call
    invoked: int
    responded: int | None
    outcome: StepOutcome | None

    def to_json(self) -> dict:
        return {"thread": self.thread, "index": self.index, "call": to_json(self.call), "invoked": self.invoked,
                "responded": self.responded, "outcome": None if self.outcome is None else outcome_json(self.outcome)}


@dataclass(frozen=True)
class History:
    """What one run of a scenario did. `final` maps each view of the kind to the implementation's
    answer (None when a thread was stuck: the implementation is still in use); `final_error` says
    why the views could not be read (they never returned)."""

    prefix: tuple[StepOutcome, ...]
    events: tuple[Event, ...]  # in order of invocation
    final: dict[str, Any] | None
    stuck: tuple[int, ...] = ()  # threads that had not returned at the timeout
    prefix_stuck: bool = False  # the prefix call after the recorded ones never returned (no thread ran)
    stuck_making: str | None = None  # the make_value that never returned, before any call ("cache.make_value(5, 1)")
    final_error: str | None = None
    values: dict[ValueRecipe, Any] = field(default_factory=dict)  # each recipe's value, as the implementation makes it

    def to_json(self) -> dict:
        return {
            "prefix": [outcome_json(outcome) for outcome in self.prefix],
            "events": [event.to_json() for event in self.events],
            "final": None if self.final is None else {view: plain(answer) for view, answer in self.final.items()},
            "stuck": list(self.stuck),
            "prefix_stuck": self.prefix_stuck,
            "stuck_making": self.stuck_making,
        }

    def lines(self) -> list[str]:
        """The history in real-time order: one line per invocation and per response."""
        moments: list[tuple[int, str]] = []
        for event in self.events:
            call = to_python(event.call)
            moments.append((event.invoked, f"thread {event.thread} calls   {call}"))
            if event.responded is not None:
                moments.append((event.responded, f"thread {event.thread} returns {call}: {event.outcome.describe()}"))
            else:
                moments.append((sys.maxsize, f"thread {event.thread} never returns from {call}"))
        return [text for _, text in sorted(moments)]


class Recorder:
    """Collects a scenario's outcomes while it runs. Safe to call from the scenario's threads:
    it only appends to lists and draws from one counter, both atomic in CPython.

    Every value a call passes is made by the implementation (`make_values`) before the prefix
    starts, within a timeout of its own: making a value is not a call of the contract, and the first
    one may import the implementation's tensor library. `making` is the recipe being made."""

    def __init__(self, kind: SpecKind, scenario: Scenario) -> None:
        self.kind, self.scenario = kind, scenario
        self._clock = itertools.count()
        self._prefix: list[StepOutcome] = []
        self._events: list[Event] = []
        self._invoked: dict[tuple[int, int], int] = {}  # (thread, index) -> invocation, kept for stuck calls
        self.values: dict[ValueRecipe, Any] = {}
        self.making: ValueRecipe | None = None
        self._prefix_calls: tuple[Call, ...] = ()
        self._thread_calls: tuple[tuple[Call, ...], ...] = ()

    def make_values(self, implementation: Any) -> None:
        """Make every value the scenario's calls pass, as `implementation` makes it."""
        self._prefix_calls = tuple(self._made(implementation, call) for call in self.scenario.prefix)
        self._thread_calls = tuple(tuple(self._made(implementation, call) for call in calls)
                                   for calls in self.scenario.threads)

    def _made(self, implementation: Any, call: Call) -> Call:
        """`call` with each value recipe made by `implementation` (a fresh value per call, as the
        sequential check passes them); a recipe whose making raises is left for the call to make
        (and fail on)."""
        def made(argument: Any) -> Any:
            if not isinstance(argument, ValueRecipe):
                return argument
            self.making = argument
            try:
                value = argument.value(implementation)
            except Exception:  # noqa: BLE001 - the call makes it again and records the failure
                return argument
            finally:
                self.making = None
            self.values.setdefault(argument, value)
            return value
        return Call(call.op, tuple(made(a) for a in call.args), {name: made(a) for name, a in call.kwargs.items()})

    def run_prefix(self, implementation: Any) -> None:
        """Make the prefix's calls in order, recording each outcome."""
        for call in self._prefix_calls:
            self._prefix.append(self._outcome(implementation, call))

    def run_thread(self, implementation: Any, thread: int, barrier: threading.Barrier) -> None:
        """Wait at `barrier`, then make the thread's calls in order, recording when each started and returned."""
        barrier.wait()
        for index, (call, made) in enumerate(zip(self.scenario.threads[thread], self._thread_calls[thread])):
            invoked = self._invoked[thread, index] = next(self._clock)
            outcome = self._outcome(implementation, made)
            self._events.append(Event(thread, index, call, invoked, next(self._clock), outcome))

    def _outcome(self, implementation: Any, call: Call) -> StepOutcome:
        """`outcome_of`, and a BaseException (SystemExit) that a call raises in its thread a crash."""
        try:
            return outcome_of(implementation, call, self.kind.error_names)
        except BaseException as error:  # a broken implementation may raise anything; recorded, not hidden
            return StepOutcome(crash=f"{type(error).__name__}: {error}")

    def finish(self, implementation: Any, stuck: tuple[int, ...] = (), *, prefix_stuck: bool = False,
               timeout: float = DEFAULT_TIMEOUT) -> History:
        """The history, with the final views (none if a call is stuck: the implementation is still in use)."""
        prefix = tuple(self._prefix)
        making = self.making
        if making is not None:
            return History((), (), None, (), stuck_making=f"cache.make_value({making.nbytes}, {making.tag})")
        if prefix_stuck:
            return History(prefix, (), None, (), prefix_stuck=True)
        events = list(self._events)
        done = {(event.thread, event.index) for event in events}
        for thread in stuck:
            calls = self.scenario.threads[thread]
            waiting = next(index for index in range(len(calls)) if (thread, index) not in done)
            invoked = self._invoked.get((thread, waiting), sys.maxsize)  # maxsize: still at the barrier
            events.append(Event(thread, waiting, calls[waiting], invoked, None, None))
        events.sort(key=lambda event: event.invoked)
        if stuck:
            return History(prefix, tuple(events), None, tuple(stuck))
        final, error = _views_within(timeout, self.kind, self.scenario, implementation)
        return History(prefix, tuple(events), final, (), final_error=error, values=self.values)


def run_scenario(kind: SpecKind, factory: Callable[[int], Any], scenario: Scenario, *,
                 timeout: float = DEFAULT_TIMEOUT) -> History:
    """Build `factory(size)`, make the scenario's values, run the prefix, start one thread per call
    list on a barrier, join, read the views. Call with the switch interval already lowered (see
    `fast_switching`) to meet many interleavings."""
    implementation = factory(scenario.size)
    recorder = Recorder(kind, scenario)
    values_made = threading.Event()

    def values_then_prefix() -> None:
        recorder.make_values(implementation)
        values_made.set()
        recorder.run_prefix(implementation)

    prefix = threading.Thread(target=values_then_prefix, daemon=True)
    prefix.start()
    if not values_made.wait(timeout):
        return recorder.finish(implementation)
    prefix.join(timeout)
    if prefix.is_alive():
        return recorder.finish(implementation, prefix_stuck=True)
    barrier = threading.Barrier(len(scenario.threads))
    threads = [threading.Thread(target=recorder.run_thread, args=(implementation, t, barrier),
                                name=f"{SCENARIO_THREAD_PREFIX}{t}", daemon=True)
               for t in range(len(scenario.threads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    stuck = tuple(index for index, thread in enumerate(threads) if thread.is_alive())
    return recorder.finish(implementation, stuck, timeout=timeout)


def _views_within(timeout: float, kind: SpecKind, scenario: Scenario,
                  implementation: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The kind's views of `implementation` (`view_of`, read as its `view_readers` say, given a fresh
    model for the semantics), read in a thread of their own: views that never return are an error."""
    model = scenario.new_model(kind)
    read: list[dict[str, Any]] = []
    inspector = threading.Thread(
        target=lambda: read.append({view: view_of(implementation, view, kind.view_readers, model)
                                    for view in kind.views}), daemon=True)
    inspector.start()
    inspector.join(timeout)
    if not read:
        return None, f"{', '.join(f'{view}()' for view in kind.views)} did not return within {timeout:g} s"
    return read[0], None


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
