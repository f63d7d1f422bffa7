"""`cacheproof check --spec KIND --threads N` for the kinds other than the tensor cache.

A scenario is a fresh implementation of some size, a prefix of calls run alone, then N threads each
making a few calls at once (released together by a barrier, the interpreter switching threads
every few microseconds). Calls are drawn by the kind's call generator: the prefix from the model's
state, each thread's calls from a copy of the model after the prefix, as if it ran alone. Each
scenario runs `runs` times; every history is checked for linearizability (`search.linearize_parts`
over the kind's model: `copy()` to step, `state_key()` to memoise) and its final views against
the spec's. A thread that never returns, or a call that raises an error outside the contract, fails
the history outright. A failing scenario is shrunk greedily (a call dropped while some run of the
smaller scenario still fails) and reported with the history that failed.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import hypothesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from cacheproof.check.concurrent.history import SCENARIO_THREAD_PREFIX, fast_switching
from cacheproof.check.concurrent.scenarios import shrink_greedily
from cacheproof.check.concurrent.search import linearize_parts
from cacheproof.check.programs.draws import DataDraws
from cacheproof.check.programs.generators import CallGenerator
from cacheproof.check.sequential.draws import seeded_draws
from cacheproof.contract.calls import Call, to_python
from cacheproof.contract.steps import StepOutcome, differing_views, outcome_of, outcomes_agree, view_of
from cacheproof.spec.kind import SpecKind

DEFAULT_TIMEOUT = 10.0
SEARCH_SECONDS = 20.0
SHRINK_SECONDS = 60.0


@dataclass(frozen=True)
class ProgramScenario:
    """A fresh implementation of `size`, the `prefix` alone, then one thread per entry of `threads`."""

    size: int
    prefix: tuple[Call, ...]
    threads: tuple[tuple[Call, ...], ...]

    @property
    def calls(self) -> int:
        return len(self.prefix) + sum(len(calls) for calls in self.threads)

    def describe(self) -> str:
        lines = [f"size {self.size}; prefix: " + ("; ".join(to_python(c) for c in self.prefix) or "none")]
        lines += [f"thread {t}: " + "; ".join(to_python(c) for c in calls) for t, calls in enumerate(self.threads)]
        return "\n".join(lines)


@dataclass(frozen=True)
class ProgramEvent:
    thread: int
    call: Call
    invoked: int
    responded: int | None
    outcome: StepOutcome | None


@dataclass
class ProgramConcurrentReport:
    kind: str
    threads: int
    scenarios: int = 0
    runs: int = 0
    unknown: int = 0
    seconds: float = 0.0
    counterexample: ProgramScenario | None = None
    reason: str = ""
    history: list[str] = field(default_factory=list)
    seconds_to_failure: float | None = None  # from the start to the first failing history, before shrinking

    @property
    def ok(self) -> bool:
        return self.counterexample is None


def run_scenario(factory: Callable[[int], Any], scenario: ProgramScenario, kind: SpecKind,
                 timeout: float = DEFAULT_TIMEOUT) -> tuple[list[StepOutcome], list[ProgramEvent], dict | None]:
    """Run `scenario` once: the prefix outcomes, the thread events (responded None: never returned),
    and the final views of `kind` (None when a thread is stuck)."""
    implementation = factory(scenario.size)
    prefix = [outcome_of(implementation, call, kind.error_names) for call in scenario.prefix]
    clock = itertools.count()
    events: list[ProgramEvent] = []
    started: dict[int, tuple[Call, int]] = {}
    barrier = threading.Barrier(len(scenario.threads))

    def run_thread(thread: int) -> None:
        barrier.wait()
        for call in scenario.threads[thread]:
            invoked = next(clock)
            started[thread] = (call, invoked)
            outcome = outcome_of(implementation, call, kind.error_names)
            events.append(ProgramEvent(thread, call, invoked, next(clock), outcome))
        started.pop(thread, None)

    workers = [threading.Thread(target=run_thread, args=(t,), name=f"{SCENARIO_THREAD_PREFIX}{t}", daemon=True)
               for t in range(len(scenario.threads))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout)
    stuck = [t for t, worker in enumerate(workers) if worker.is_alive()]
    for thread in stuck:
        call, invoked = started.get(thread, (scenario.threads[thread][0], -1))
        events.append(ProgramEvent(thread, call, invoked, None, None))
    final = None if stuck else {view: view_of(implementation, view) for view in kind.views}
    return prefix, sorted(events, key=lambda e: e.invoked), final


class _HistoryModel:
    """The kind's model as `search.SequentialModel` over one history's thread calls."""

    def __init__(self, events: list[ProgramEvent], final: dict, kind: SpecKind) -> None:
        self.events, self.final, self.views, self.error_names = events, final, kind.views, kind.error_names

    def step(self, model: Any, index: int) -> tuple[Any, str]:
        event = self.events[index]
        after = model.copy()
        expected = outcome_of(after, event.call, self.error_names)
        if outcomes_agree(event.call.op, expected, event.outcome):
            return after, ""
        return None, f"thread {event.thread}'s {to_python(event.call)} {event.outcome.describe()}, there the spec {expected.describe()}"

    def key(self, model: Any) -> Any:
        return model.state_key()

    def final_difference(self, model: Any) -> str | None:
        differing = differing_views(model, self.final, self.views)
        return "; ".join(f"{view}() is {seen!r}, the spec's {wanted!r}" for view, wanted, seen in differing) or None

    def describe(self, model: Any) -> str:
        return f"spec snapshot {model.snapshot()!r}"


def check_history(kind: SpecKind, new_model: Callable[[int], Any], scenario: ProgramScenario, prefix: list[StepOutcome],
                  events: list[ProgramEvent], final: dict | None, budget: float = SEARCH_SECONDS) -> tuple[bool | None, str]:
    """(True, "") linearizable, (False, why) not, (None, why) unknown (the search ran out of budget)."""
    for event in events:
        if event.responded is None:
            return False, f"thread {event.thread} never returned from {to_python(event.call)} (a deadlock or a hang)"
        if event.outcome.crash is not None:
            return False, f"thread {event.thread}'s {to_python(event.call)} {event.outcome.describe()}"
    model = new_model(scenario.size)
    for call, seen in zip(scenario.prefix, prefix):
        expected = outcome_of(model, call, kind.error_names)
        if not outcomes_agree(call.op, expected, seen):
            return False, f"the prefix alone diverges at {to_python(call)}: {seen.describe()}, the spec {expected.describe()}"
    search = linearize_parts(_HistoryModel(events, final, kind), model, [e.invoked for e in events],
                             [e.responded for e in events], kind.parts(model, [(e.call.op, e.call.args) for e in events]), budget)
    if search.ok is None:
        return None, f"unknown: the search ran past its {budget:g} s budget"
    if search.ok:
        return True, ""
    order = ", then ".join(to_python(events[i].call) for i in search.deepest)
    return False, f"no order of the {len(events)} concurrent calls explains them; the longest that does is {order or 'none'}; after it {search.why}"


def run_program_concurrent_check(
    kind: SpecKind, factory: Callable[[int], Any], generator: CallGenerator, *, threads: int = 3, scenarios: int = 100,
    runs: int = 20, seed: int = 0, semantics: Any = None, operations: tuple[str, ...] | None = None,
    misuse: bool = True, timeout: float = DEFAULT_TIMEOUT, on_scenario: Callable[[int, int], None] | None = None,
) -> ProgramConcurrentReport:
    """Draw `scenarios` scenarios of `threads` threads from `seed`, run each `runs` times (module doc)."""
    operations = operations or kind.names
    report = ProgramConcurrentReport(kind.name, threads)
    started = time.perf_counter()

    def new_model(size: int) -> Any:
        return kind.new(size) if semantics is None else kind.new(size, semantics)

    def failure(scenario: ProgramScenario) -> tuple[str, list[str]] | None:
        for _ in range(runs):
            report.runs += 1
            prefix, events, final = run_scenario(factory, scenario, kind, timeout)
            ok, why = check_history(kind, new_model, scenario, prefix, events, final)
            if ok is None:
                report.unknown += 1
            elif not ok:
                return why, [f"thread {e.thread} [{e.invoked}-{e.responded}] {to_python(e.call)} "
                             f"{e.outcome.describe() if e.outcome else 'never returned'}" for e in events]
        return None

    def scenario_test(data: st.DataObject) -> None:
        draws = DataDraws(data)
        size = generator.size(draws)
        model = new_model(size)
        prefix = []
        for _ in range(data.draw(st.integers(0, 6), label="prefix calls")):
            call = generator.draw_call(draws, model, operations, misuse)
            outcome_of(model, call, kind.error_names)
            prefix.append(call)
        per_thread = []
        for _ in range(threads):
            alone, calls = model.copy(), []
            for _ in range(data.draw(st.integers(1, 3), label="thread calls")):
                call = generator.draw_call(draws, alone, operations, misuse)
                outcome_of(alone, call, kind.error_names)
                calls.append(call)
            per_thread.append(tuple(calls))
        scenario = ProgramScenario(size, tuple(prefix), tuple(per_thread))
        if report.counterexample is None:  # not Hypothesis's replay of the failing scenario
            report.scenarios += 1
        found = failure(scenario)
        if on_scenario is not None:
            on_scenario(report.scenarios, report.runs)
        if found is not None:
            if report.seconds_to_failure is None:
                report.seconds_to_failure = time.perf_counter() - started
            report.counterexample, (report.reason, report.history) = scenario, found
            raise AssertionError(found[0])

    test = settings(max_examples=scenarios, deadline=None, database=None, phases=(Phase.generate,),
                    suppress_health_check=list(HealthCheck), print_blob=False)(hypothesis.given(st.data())(scenario_test))
    with fast_switching():
        try:
            with seeded_draws():
                hypothesis.seed(seed)(test)()
        except (AssertionError, Flaky):  # Flaky: a race that did not recur when Hypothesis replayed it
            if report.counterexample is None:
                raise
            report.counterexample = _shrunk(report.counterexample, failure, report)
    report.seconds = time.perf_counter() - started
    return report


def _shrunk(scenario: ProgramScenario, failure: Callable, report: ProgramConcurrentReport) -> ProgramScenario:
    """`scenarios.shrink_greedily` over the program scenario; the report keeps the last failing
    history."""
    found = (report.reason, report.history)
    scenario, (report.reason, report.history) = shrink_greedily(
        scenario, found, lambda candidate, _: failure(candidate), SHRINK_SECONDS)
    return scenario
