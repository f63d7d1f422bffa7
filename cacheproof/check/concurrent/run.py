"""`run_concurrent_check`: draw concurrent scenarios, run each many times, check every history for
linearizability against the spec, and shrink the first failure.

A scenario is run `runs` times, each on a fresh cache with the interpreter switching threads every
microsecond, so its threads meet many interleavings. Histories with the same real-time order and
outcomes get one verdict. The failing scenario is shrunk greedily (a thread fewer, a call fewer, a
prefix call fewer) while it still fails within a bounded number of runs (`_rerun_budget`, then
SHRINK_RUNS); the history reported is the smallest scenario's failing run.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from cacheproof.contract import calls as call_format
from cacheproof.check.concurrent.history import DEFAULT_TIMEOUT, History, fast_switching, run_scenario
from cacheproof.check.concurrent.scenarios import Scenario, draw_scenario, shrink_greedily
from cacheproof.check.sequential.machine import KEYS
from cacheproof.check.concurrent.linearizability import Verdict, check_history
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

DEFAULT_SCENARIOS = 200
DEFAULT_RUNS = 20
"""Runs of each scenario (fresh cache each time)."""

SHRINK_RUNS = 300
MIN_SHRINK_RUNS = 40
"""A smaller scenario replaces the failing one if one of its runs fails: 20 times the runs the
current failure took, between MIN_SHRINK_RUNS and SHRINK_RUNS."""

SHRINK_SECONDS = 30.0
"""Shrinking stops after this long, keeping the smallest failing scenario found so far."""


@dataclass(frozen=True)
class ConcurrentCounterexample:
    """A scenario, one run of it that no sequential order explains, and why."""

    scenario: Scenario
    history: History
    reason: str
    runs_to_fail: int  # runs of the shrunk scenario until this history showed

    def to_python(self, impl: str) -> str:
        """A runnable script: builds the cache, runs the prefix, starts the threads on a barrier,
        reruns until a history is not linearizable and then fails with an AssertionError."""
        module, _, factory = impl.partition(":")
        comments = [f"#   {call_format.to_python(call)}" for call in self.scenario.prefix] or ["#   (none)"]
        for thread, calls in enumerate(self.scenario.threads):
            comments.append(f"# thread {thread}: " + "; ".join(call_format.to_python(call) for call in calls))
        return "\n".join([
            "# cacheproof concurrent counterexample. Why no sequential order explains it:",
            *(f"#   {line}" for line in _wrapped(self.reason)),
            "# prefix:",
            *comments,
            "import sys",
            "import threading",
            "",
            "sys.path.insert(0, \".\")  # the cache's module is found from the current folder, as with --impl",
            "",
            "from cacheproof.contract.calls import Call, ValueRecipe",
            "from cacheproof.check.concurrent.history import SCENARIO_THREAD_PREFIX, Recorder, fast_switching",
            "from cacheproof.check.concurrent.scenarios import Scenario",
            "from cacheproof.check.concurrent.linearizability import check_history",
            "from cacheproof.spec.cache.semantics import Semantics",
            f"from {module} import {factory} as factory",
            "",
            f"SCENARIO = {self.scenario.to_python()}",
            "ATTEMPTS = 10_000",
            "",
            "",
            "def run_thread(cache, barrier, recorder, thread):",
            "    barrier.wait()",
            "    for index, call in enumerate(SCENARIO.threads[thread]):",
            "        recorder.call(cache, thread, index, call)",
            "",
            "",
            "def attempt():",
            "    cache = factory(SCENARIO.capacity_bytes)",
            "    recorder = Recorder(SCENARIO)",
            "    prefix = threading.Thread(target=recorder.run_prefix, args=(cache,), daemon=True)",
            "    prefix.start()",
            f"    prefix.join({DEFAULT_TIMEOUT})",
            "    if prefix.is_alive():",
            "        return recorder.finish(cache, prefix_stuck=True)",
            "    barrier = threading.Barrier(len(SCENARIO.threads))",
            "    threads = [",
            "        threading.Thread(target=run_thread, args=(cache, barrier, recorder, thread),",
            "                         name=f\"{SCENARIO_THREAD_PREFIX}{thread}\", daemon=True)",
            "        for thread in range(len(SCENARIO.threads))",
            "    ]",
            "    for thread in threads:",
            "        thread.start()",
            "    for thread in threads:",
            f"        thread.join({DEFAULT_TIMEOUT})",
            "    stuck = tuple(index for index, thread in enumerate(threads) if thread.is_alive())",
            "    return recorder.finish(cache, stuck)",
            "",
            "",
            "with fast_switching():",
            "    for attempt_number in range(1, ATTEMPTS + 1):",
            "        history = attempt()",
            "        verdict = check_history(SCENARIO, history)",
            "        assert verdict.ok is not False, f\"attempt {attempt_number}: {verdict.reason}\\n\" + \"\\n\".join(history.lines())",
            "print(f\"no anomaly in {ATTEMPTS} attempts\")",
            "",
        ])


def _wrapped(text: str, width: int = 96) -> list[str]:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line]


@dataclass(frozen=True)
class ConcurrentReport:
    ok: bool
    threads: int
    scenarios: int
    runs: int
    seconds: float
    counterexample: ConcurrentCounterexample | None
    seconds_to_failure: float | None = None  # from the start to the first failing history, before shrinking
    seed: int | None = None  # the seed the scenarios were drawn from (drawn at random when None was asked)
    unknown: int = 0  # histories whose linearizability search ran past its budget (neither verdict)

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds if self.seconds > 0 else 0.0

    @property
    def scenarios_per_second(self) -> float:
        return self.scenarios / self.seconds if self.seconds > 0 else 0.0


class _Checker:
    """Runs scenarios and checks their histories, one verdict per distinct history."""

    def __init__(self, factory: Callable[[int], Any], timeout: float) -> None:
        self.factory = factory
        self.timeout = timeout
        self.runs = 0
        self.unknown = 0
        self._scenario: Scenario | None = None
        self._verdicts: dict[tuple, Verdict] = {}

    def first_failure(self, scenario: Scenario, runs: int) -> tuple[History, Verdict, int] | None:
        """Run `scenario` up to `runs` times; the first non-linearizable history, its verdict and run number."""
        for run in range(1, runs + 1):
            history = run_scenario(self.factory, scenario, timeout=self.timeout)
            self.runs += 1
            verdict = self._verdict(scenario, history)
            if verdict.ok is None:
                self.unknown += 1
            elif not verdict.ok:
                return history, verdict, run
        return None

    def _verdict(self, scenario: Scenario, history: History) -> Verdict:
        if scenario is not self._scenario:
            self._scenario, self._verdicts = scenario, {}
        key = _shape(history)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = check_history(scenario, history)
        return verdict


def _shape(history: History) -> tuple:
    """What the verdict depends on: outcomes, final state, and which call returned before which began."""
    events = history.events
    precedence = tuple(
        tuple(j for j, other in enumerate(events) if other.responded is not None and event.responded is not None
              and other.responded < event.invoked)
        for event in events
    )
    return (
        history.prefix,
        tuple((e.thread, e.index, e.observed, e.responded is None) for e in events),
        precedence,
        history.final,
        history.stuck,
        history.prefix_stuck,
    )


def run_concurrent_check(
    factory: Callable[[int], Any],
    *,
    threads: int = 3,
    scenarios: int = DEFAULT_SCENARIOS,
    runs: int = DEFAULT_RUNS,
    seed: int | None = 0,
    timeout: float = DEFAULT_TIMEOUT,
    shrink_runs: int = SHRINK_RUNS,
    shrink_seconds: float = SHRINK_SECONDS,
    on_scenario: Callable[[int, int], None] | None = None,
    semantics: Semantics = CONTRACT,
    operations: tuple[str, ...] = ALL_OPERATIONS,
    keys: tuple[Hashable, ...] = KEYS,
) -> ConcurrentReport:
    """Check `scenarios` scenarios of `threads` threads, each run `runs` times, on `factory(capacity)`.

    The same seed draws the same scenarios (the interleavings met are up to the OS scheduler);
    `semantics` and `operations` (a profile's, --semantics, --ops) choose the spec and the calls,
    `keys` (default: the small scope's six ints) what the calls name.
    `on_scenario(scenarios done, runs done)` is called after each scenario.
    """
    seed = random.randrange(2**32) if seed is None else seed
    checker = _Checker(factory, timeout)
    started = time.perf_counter()
    counterexample = None
    seconds_to_failure = None
    done = 0
    with fast_switching():
        for number in range(scenarios):
            scenario = draw_scenario(random.Random(f"{seed}:{number}"), threads, semantics, operations, keys)
            failure = checker.first_failure(scenario, runs)
            done += 1
            if on_scenario is not None:
                on_scenario(done, checker.runs)
            if failure is not None:
                seconds_to_failure = time.perf_counter() - started
                counterexample = _shrunk(checker, scenario, failure, shrink_runs, shrink_seconds)
                break
    seconds = time.perf_counter() - started
    return ConcurrentReport(
        counterexample is None, threads, done, checker.runs, seconds, counterexample, seconds_to_failure, seed,
        checker.unknown,
    )


def _shrunk(
    checker: _Checker, scenario: Scenario, failure: tuple[History, Verdict, int], shrink_runs: int, seconds: float
) -> ConcurrentCounterexample:
    """Greedy shrinking (`scenarios.shrink_greedily`): first with a rerun budget scaled to how soon
    the race showed, then with `shrink_runs`."""
    scenario, failure = shrink_greedily(
        scenario, failure, checker.first_failure, seconds,
        attempts=lambda found: tuple(dict.fromkeys((_rerun_budget(found[2], shrink_runs), shrink_runs))),
    )
    history, verdict, run = failure
    return ConcurrentCounterexample(scenario, history, verdict.reason, run)


def _rerun_budget(runs_to_fail: int, most: int) -> int:
    """Runs a smaller candidate gets first: 20 times what the current failure needed, at least
    MIN_SHRINK_RUNS, at most `most`; a race that showed at once is expected to show soon again.
    When no candidate fails within that, they are all tried again with `most`."""
    return min(most, max(MIN_SHRINK_RUNS, 20 * runs_to_fail))
