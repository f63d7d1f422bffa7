"""`run_concurrent_check`: the one concurrent checker of every spec kind. Draw concurrent scenarios,
run each many times, check every history for linearizability against the kind's spec (its outcomes
and its final views), and shrink the first failure.

A scenario (`scenarios.draw_scenario`, the kind's call generator) is run `runs` times, each on a
fresh implementation with the interpreter switching threads every microsecond, so its threads meet
many interleavings. Histories with the same real-time order, outcomes and views get one verdict.
The failing scenario is shrunk greedily (a thread fewer, a call fewer, a prefix call fewer) while
it still fails within a bounded number of runs (`_rerun_budget`, then SHRINK_RUNS); the history
reported is the smallest scenario's failing run.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from cacheproof.check.concurrent.history import DEFAULT_TIMEOUT, History, fast_switching, run_scenario
from cacheproof.check.concurrent.linearizability import Verdict, check_history
from cacheproof.check.concurrent.scenarios import Scenario, draw_scenario, shrink_greedily
from cacheproof.check.programs.generators import CallGenerator, generator_for
from cacheproof.spec.kind import SpecKind

DEFAULT_SCENARIOS = 200
DEFAULT_RUNS = 20
"""Runs of each scenario (a fresh implementation each time)."""

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

    def to_python(self, kind: SpecKind, impl: str) -> str:
        """A runnable script: builds the implementation, runs the scenario on it again and again
        (`history.run_scenario`), and fails with an AssertionError at the first history that is not
        linearizable."""
        module, _, factory = impl.partition(":")
        comments = [f"#   {call}" for call in self.scenario.describe().splitlines()]
        semantics = self.scenario.semantics
        imports = [] if semantics is None else [f"from {type(semantics).__module__} import {type(semantics).__name__}"]
        return "\n".join([
            "# cacheproof concurrent counterexample. Why no sequential order explains it:",
            *(f"#   {line}" for line in _wrapped(self.reason)),
            "# the scenario:",
            *comments,
            "import sys",
            "",
            "sys.path.insert(0, \".\")  # the implementation's module is found from the current folder, as with --impl",
            "",
            "from cacheproof.check.concurrent.history import fast_switching, run_scenario",
            "from cacheproof.check.concurrent.linearizability import check_history",
            "from cacheproof.check.concurrent.scenarios import Scenario",
            "from cacheproof.contract.calls import Call, ValueRecipe",
            "from cacheproof.spec.kinds import get_kind",
            *imports,
            f"from {module} import {factory} as factory",
            "",
            f"KIND = get_kind({kind.name!r})",
            f"SCENARIO = {self.scenario.to_python()}",
            "ATTEMPTS = 10_000",
            "",
            "with fast_switching():",
            "    for attempt in range(1, ATTEMPTS + 1):",
            f"        history = run_scenario(KIND, factory, SCENARIO, timeout={DEFAULT_TIMEOUT})",
            "        verdict = check_history(KIND, SCENARIO, history)",
            "        assert verdict.ok is not False, f\"attempt {attempt}: {verdict.reason}\\n\" + \"\\n\".join(history.lines())",
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
    kind: str
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

    def __init__(self, kind: SpecKind, factory: Callable[[int], Any], timeout: float) -> None:
        self.kind, self.factory, self.timeout = kind, factory, timeout
        self.runs = 0
        self.unknown = 0
        self._scenario: Scenario | None = None
        self._verdicts: dict[Hashable, Verdict] = {}

    def first_failure(self, scenario: Scenario, runs: int) -> tuple[History, Verdict, int] | None:
        """Run `scenario` up to `runs` times; the first non-linearizable history, its verdict and run number."""
        for run in range(1, runs + 1):
            history = run_scenario(self.kind, self.factory, scenario, timeout=self.timeout)
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
            verdict = check_history(self.kind, scenario, history)
            if key is not None:
                self._verdicts[key] = verdict
        return verdict


def _shape(history: History) -> Hashable | None:
    """What the verdict depends on: outcomes, final views, and which call returned before which
    began; None when some answer has no faithful text (a long value whose repr is elided), so that
    the history gets a verdict of its own."""
    events = history.events
    precedence = tuple(
        tuple(j for j, other in enumerate(events) if other.responded is not None and event.responded is not None
              and other.responded < event.invoked)
        for event in events
    )
    answers = (*history.prefix, *(event.outcome for event in events),
               *(() if history.final is None else history.final.items()))
    text = repr(answers)
    if "..." in text:
        return None
    return (text, tuple((e.thread, e.index, e.responded is None) for e in events), precedence,
            history.stuck, history.prefix_stuck, history.stuck_making, history.final_error)


def run_concurrent_check(
    kind: SpecKind,
    factory: Callable[[int], Any],
    *,
    generator: CallGenerator | None = None,
    threads: int = 3,
    scenarios: int = DEFAULT_SCENARIOS,
    runs: int = DEFAULT_RUNS,
    seed: int | None = 0,
    timeout: float = DEFAULT_TIMEOUT,
    shrink_runs: int = SHRINK_RUNS,
    shrink_seconds: float = SHRINK_SECONDS,
    on_scenario: Callable[[int, int], None] | None = None,
    semantics: Any = None,
    operations: tuple[str, ...] | None = None,
    misuse: bool = True,
) -> ConcurrentReport:
    """Check `scenarios` scenarios of `threads` threads, each run `runs` times, on `factory(size)`
    against `kind`'s spec.

    The same seed draws the same scenarios (the interleavings met are up to the OS scheduler);
    `generator` draws the calls (default: the kind's, in its default scope; a scope's `--keys`
    domain is the generator's); `semantics` and `operations` (a profile's, --semantics, --ops)
    choose the spec and the calls, `misuse` whether calls the contract rejects are drawn.
    `on_scenario(scenarios done, runs done)` is called after each scenario.
    """
    seed = random.randrange(2**32) if seed is None else seed
    checker = _Checker(kind, factory, timeout)
    started = time.perf_counter()
    counterexample = None
    seconds_to_failure = None
    done = 0
    with fast_switching():
        for number in range(scenarios):
            scenario = draw_scenario(kind, generator_for(kind.name) if generator is None else generator,
                                     random.Random(f"{seed}:{number}"), threads, semantics=semantics,
                                     operations=operations, misuse=misuse)
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
        counterexample is None, kind.name, threads, done, checker.runs, seconds, counterexample, seconds_to_failure,
        seed, checker.unknown,
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
