"""`run_check`: hold a cache to the spec with the state machine, and report a shrunk counterexample."""

from __future__ import annotations

import hypothesis

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky, Unsatisfiable
from hypothesis.reporting import with_reporter

from cacheproof.cmdline.databases import RunStop, namespaced
from cacheproof.contract.calls import Call, to_python
from cacheproof.check.seeded_draws import seeded_draws
from cacheproof.contract.outcomes import Divergence
from cacheproof.check.sequential.distinct import SEARCH_SECONDS, KnownKinds, SearchDone
from cacheproof.sandbox.fault_search import DIVERGENCE, HANG, Failure, first_failure, not_deterministic
from cacheproof.sandbox.fault_search import same_divergence, shrink_failure, shrink_seconds
from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox.guarded_call import DEFAULT_CALL_TIMEOUT, GuardedFactory, Watch, hang_message, supervised
from cacheproof.sandbox.factories import capacity_cap_of, probe_factory
from cacheproof.sandbox.isolation import IsolatedFactory
from cacheproof.check.sequential.machine import Tally, machine_for
from cacheproof.check.sequential.counterexample import Counterexample, counterexample_from
from cacheproof.check.sequential.counterexample import interrupted_counterexample, replayed
from cacheproof.check.sequential.programs import program_test
from cacheproof.check.programs.run import HYPOTHESIS_SHRINK_ATTEMPTS
from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.sequential.scope import SMALL, Phase, with_key_domain
from cacheproof.contract.values import MAX_VALUE_BYTES, REAL_VALUE_CAPACITY  # noqa: F401  (re-exported)

from cacheproof.spec.cache.operations import CACHE_OPERATIONS
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

T = TypeVar("T")

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS_PER_EXAMPLE = 100
MINIMUM_SHRINK_SECONDS_AFTER_FIRST = 3.0
"""Shrinking a further kind of divergence gets at least this long, even at the end of the search."""
NONDETERMINISM_REPLAYS = 4
"""Replays of a sequence Hypothesis found flaky, looking for a run that answers differently."""

class _HypothesisShrinkDone(RunStop):
    """Ends Hypothesis's shrinking after HYPOTHESIS_SHRINK_ATTEMPTS (not a failure to Hypothesis)."""


LONG_SEQUENCE = 200
LONG_SHRINK_SECONDS = 10.0
"""A divergence after LONG_SEQUENCE calls or more (a long life's) gets this shrinking budget: every
attempt replays hundreds of calls, and a fault that needs them cannot be shrunk below them anyway."""

@dataclass(frozen=True)
class ScopeCovered:
    """What the examples of a run actually reached (cacheproof.check.sequential.scope)."""

    scopes: tuple[str, ...] = ("small",)
    most_live_entries: int = 0
    most_distinct_keys: int = 0
    key_types: tuple[str, ...] = ()
    largest_capacity: int = 0
    longest_sequence: int = 0
    capacity_cap: int | None = None  # capacities were capped here: the cache's values hold memory

    @classmethod
    def of(cls, tally: Tally, phases: Sequence[Phase], capacity_cap: int | None) -> ScopeCovered:
        return cls(
            tuple(dict.fromkeys(phase.scope.name for phase in phases)), tally.most_live, tally.most_keys,
            tuple(sorted(tally.key_types)), tally.largest_capacity, tally.longest_sequence, capacity_cap,
        )

    def to_json(self) -> dict:
        return {
            "scopes": list(self.scopes),
            "most_live_entries": self.most_live_entries,
            "most_distinct_keys": self.most_distinct_keys,
            "key_types": list(self.key_types),
            "largest_capacity": self.largest_capacity,
            "longest_sequence": self.longest_sequence,
            "capacity_cap": self.capacity_cap,
        }

    def rows(self) -> dict[str, str]:
        """The report table's scope rows."""
        cap = "" if self.capacity_cap is None else (
            f" (capped at {self.capacity_cap} bytes: this cache's values hold real memory)"
        )
        return {
            "scope": " + ".join(self.scopes),
            "most live entries": str(self.most_live_entries),
            "most distinct keys": f"{self.most_distinct_keys} ({', '.join(self.key_types) or '-'})",
            "largest capacity": f"{self.largest_capacity} bytes{cap}",
            "longest sequence": f"{self.longest_sequence} calls",
        }


@dataclass(frozen=True)
class CheckReport:
    """A check's verdict. `examples` counts what --examples budgets: the call sequences run to their
    end, the failing ones included, and those ended as a divergence of a kind already reported."""

    ok: bool
    examples: int
    steps: int
    seconds: float
    counterexample: Counterexample | None  # the first one found
    interrupted: bool = False  # the user's Ctrl-C stopped the run (no verdict when nothing failed before it)
    shrinking_interrupted: bool = False  # ...while shrinking the last counterexample, which is not minimal
    scope: ScopeCovered = ScopeCovered()
    counterexamples: tuple[Counterexample, ...] = ()  # every distinct divergence, the first one first
    first_failure_example: int | None = None  # the ordinal of the first failing example, counted as `examples`
    first_failure_seconds: float | None = None  # from the start to the end of that example, before shrinking
    coverage: OutcomeCoverage | None = None  # the spec's outcomes the run reached, per operation
    first_report_seconds: float | None = None  # from the start to the first counterexample, shrunk

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


def check_settings(examples: int, steps_per_example: int, shrink: bool = True, database: ExampleDatabase | None = None) -> settings:
    """The Hypothesis settings of a run: no deadline, no health checks, no blob, no database unless
    one is given (its failures are then replayed first: docs/scale.md); `shrink=False` leaves
    shrinking to `fault_search.shrink_failure` alone."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps_per_example,
        deadline=None,
        database=database,
        derandomize=False,
        phases=((HypothesisPhase.reuse,) if database is not None else ())
        + ((HypothesisPhase.generate, HypothesisPhase.shrink) if shrink else (HypothesisPhase.generate,)),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


class CheckInterrupted(KeyboardInterrupt):
    """The user's Ctrl-C stopped `run_check`; `.report` holds the examples and steps so far (no verdict)."""

    def __init__(self, report: CheckReport) -> None:
        super().__init__("interrupted")
        self.report = report


@dataclass(frozen=True)
class CheckOptions:
    """The options of one check, as one value (`cacheproof check`'s flags map onto these fields).

    `examples` random call sequences of `steps_per_example` calls, drawn from `seed` (None draws a
    random one); `on_example` is called after each; a call that does not return within
    `call_timeout` seconds (None: no limit) is a counterexample; `isolate` runs the cache in a child
    process built from `impl` ("module:factory"); the spec runs under `semantics`, only calls in
    `operations` (None: all) are made, `bad_arguments=False` makes no bad calls; `phases` override
    the scopes (default: one small-scope phase of `examples`); `max_capacity` caps capacities for
    caches whose values hold memory; up to `max_divergences` distinct divergences are reported.
    With `budget_seconds`, programs are drawn until that time is spent (or a failure is found and
    shrunk), and the examples of the phases are only an upper bound. `on_counterexample(example,
    seconds)` is called with the first counterexample as soon as it is shrunk, before the search for
    further kinds (`cacheproof check` prints it then). `on_shrink(found_at, length)` is called
    during shrinking (instead of `on_example`): the failing example's number (None for a further
    kind seen on the way) and the length of the smallest failing sequence so far. `keys` names the
    key domain of every phase (`cacheproof.contract.keys.KEY_DOMAINS`; None: each scope's own).
    `database` (None: none) keeps the failing programs of the first run (not those of the search
    for further kinds, which rejects the known ones), apart for each impl, semantics and phase
    (`cacheproof.cmdline.databases.namespaced`), and replays them first.
    """

    examples: int = DEFAULT_EXAMPLES
    seed: int | None = 0
    steps_per_example: int = DEFAULT_STEPS_PER_EXAMPLE
    on_example: Callable[[Tally], None] | None = None
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT
    impl: str = "factory"
    isolate: bool = False
    semantics: Semantics = CONTRACT
    operations: tuple[str, ...] | None = None
    bad_arguments: bool = True
    phases: Sequence[Phase] | None = None
    max_capacity: int | None = None
    max_divergences: int = 1
    budget_seconds: float | None = None
    on_counterexample: Callable[[Counterexample, float], None] | None = None
    on_shrink: Callable[[int | None, int], None] | None = None
    keys: str | None = None
    database: ExampleDatabase | None = None


def run_check(factory: Callable[[int], Any], options: CheckOptions | None = None, **fields: Any) -> CheckReport:
    """Run the check `options` (or `CheckOptions(**fields)`; fields given beside options replace
    theirs) describes: `examples` random call sequences on `factory(capacity)` beside the spec.

    Deterministic for a given seed (None draws a random one). Hypothesis's own printing is
    silenced; the shrunk failure comes back as `CheckReport.counterexample`. A call that does not
    return within `call_timeout` seconds (None: no limit) is a counterexample too; a factory that
    fails is `UsageAbort`; the user's Ctrl-C raises `CheckInterrupted` before any failure is found,
    and after it returns the report of the counterexamples so far, the one being shrunk too, as the
    smallest failing sequence found (`shrinking_interrupted`; see docs/robustness.md).
    `isolate=True` runs the cache in a child process built from `impl` ("module:factory"; `factory`
    is then unused), so that crashes are counterexamples too.
    The spec runs with `semantics` (spec/cache/semantics.py); only calls in `operations` (None: all) are
    made, and a cache lacking one of them is `UsageAbort`; `bad_arguments=False` makes no bad calls.
    `phases` (default: `examples` examples of `steps_per_example` steps in the small scope) say
    which scopes the examples are drawn from, in order (`cacheproof.check.sequential.scope.THOROUGH`). A cache
    whose make_value returns values that hold memory gets capacities of at most `max_capacity`
    (default REAL_VALUE_CAPACITY; at most MAX_VALUE_BYTES); the report's `scope` says what was reached.
    Up to `max_divergences` distinct divergences are searched for and reported, each shrunk
    (`CheckReport.counterexamples`, see `cacheproof.check.sequential.distinct`); the first is `counterexample`.
    The default, 1, stops at the first; `cacheproof check` searches for MAX_DIVERGENCES.
    """
    options = replace(options or CheckOptions(), **fields)
    examples, seed, steps_per_example = options.examples, options.seed, options.steps_per_example
    on_example, call_timeout, impl, isolate = options.on_example, options.call_timeout, options.impl, options.isolate
    semantics, operations, bad_arguments = options.semantics, options.operations, options.bad_arguments
    phases, max_capacity, max_divergences = options.phases, options.max_capacity, options.max_divergences
    phases = tuple(phases) if phases is not None else (Phase(SMALL, examples, steps_per_example),)
    phases = tuple(replace(phase, scope=with_key_domain(phase.scope, options.keys)) for phase in phases)
    if max_capacity is not None and not 1 <= max_capacity <= MAX_VALUE_BYTES:
        raise ValueError(f"max_capacity must be 1..{MAX_VALUE_BYTES} bytes, got {max_capacity}")
    tally = Tally()

    def each_example(counted: Tally) -> None:
        """While Hypothesis shrinks the run's failure its attempts are not examples: `on_shrink`."""
        if counted.failed and counted.smallest is not None:
            if options.on_shrink is not None:
                options.on_shrink(counted.found_at, len(counted.smallest[1]))
        elif on_example is not None:
            on_example(counted)

    tally.on_example = each_example
    checked = operations or ALL_OPERATIONS
    tally.coverage = OutcomeCoverage(op for op in CACHE_OPERATIONS if op.name in checked)
    deadline = None if options.budget_seconds is None else time.perf_counter() + options.budget_seconds

    def before_program() -> None:
        """Ends a search whose time budget is spent, or a search for further kinds whose share of the
        examples is (rejected examples count, which Hypothesis's max_examples does not); never a
        shrinking: a failure is reported whole. Ends Hypothesis's shrinking of a failing program after
        HYPOTHESIS_SHRINK_ATTEMPTS: the checker's own shrinking takes the smallest failure from there."""
        if tally.failed:
            shrink_attempts[0] += 1
            if shrink_attempts[0] > HYPOTHESIS_SHRINK_ATTEMPTS:
                raise _HypothesisShrinkDone()
        elif deadline is not None and time.perf_counter() > deadline and tally.examples + tally.rejected > 0 \
                or known.share_spent():  # a budget spent before any example still runs one: no verdict rests on none
            raise SearchDone()

    shrink_attempts = [0]
    watch = Watch(call_timeout)
    watch.last_call = lambda: tally.calls[-1] if tally.calls else None
    guarded = IsolatedFactory(impl, watch) if isolate else GuardedFactory(factory, watch, impl)
    capacity_cap: list[int | None] = [None]
    known = KnownKinds(guarded, semantics, lambda: tally.examples + tally.rejected, note_sightings=not isolate)
    if max_divergences > 1:
        tally.is_known = known.is_known

    def machine_of(phase: Phase) -> type:
        return machine_for(
            guarded, tally, semantics=semantics, operations=operations or ALL_OPERATIONS,
            bad_arguments=bad_arguments, scope=phase.scope, max_capacity=capacity_cap[0],
        )

    def hypothesis_run(run: int, budget: int) -> None:
        """Run 0: every phase, as they are; a later run (the search for further kinds): the first
        phase's scope, on `budget` examples, a new seed, and no shrinking by Hypothesis."""
        if run == 0:
            probe_factory(guarded, impl, operations)
            if any(phase.scope.wide_capacities for phase in phases):
                capacity_cap[0] = capacity_cap_of(guarded, max_capacity or REAL_VALUE_CAPACITY)
        runs = phases if run == 0 else (Phase(phases[0].scope, budget, phases[0].steps, False),)
        for phase in runs:
            database = None if options.database is None or run > 0 else namespaced(
                options.database, "cache", impl, semantics, operations or ALL_OPERATIONS, bad_arguments, phase.scope,
                phase.steps, capacity_cap[0],
            )
            test = program_test(machine_of(phase), phase, capacity_cap[0], before_program)
            if seed is not None:
                test = hypothesis.seed(seed + run)(test)
            test = check_settings(phase.examples, phase.steps, phase.shrink, database)(test)  # after @seed, which drops the database
            with with_reporter(lambda message: None), seeded_draws():
                test()

    def describe_hang(name: str, args: tuple) -> str:
        return hang_message(name, args, call_timeout, tally.calls[-1] if tally.calls else None)

    shrinking: list[tuple[int, tuple[Call, ...], Failure] | None] = [None]  # the smallest so far of `shrunk`

    def shrunk(capacity_bytes: int, calls: list[Call], failure: Failure | None, found_at: int | None,
               kind: str | None = None, seconds: float | None = None) -> Counterexample:
        """`_shrunk`, followed: its smallest failing sequence so far is what a Ctrl-C reports."""
        def noted(smallest: list[Call], failed: Failure) -> None:
            shrinking[0] = (capacity_bytes, tuple(smallest), failed)
            if options.on_shrink is not None:
                options.on_shrink(found_at, len(smallest))

        example = _shrunk(guarded, watch, capacity_bytes, calls, failure, semantics, known, kind, seconds, noted)
        shrinking[0] = tally.smallest = None
        return example

    def one_run(run: int, budget: int) -> Counterexample | None:
        known.new_run(budget)
        tally.new_run()
        shrink_attempts[0] = 0
        try:
            supervised(lambda: hypothesis_run(run, budget), watch, describe_hang)
        except (SearchDone, Unsatisfiable):  # the run's share is spent, or every example was of a known kind
            return None
        except Divergence:
            return shrunk(tally.capacity_bytes, tally.calls, None, tally.found_at, seconds=_search_seconds_left(known, watch))
        except _HypothesisShrinkDone:
            capacity_bytes, calls, _ = tally.smallest
            return shrunk(capacity_bytes, list(calls), None, tally.found_at, seconds=_search_seconds_left(known, watch))
        except CacheFault as fault:  # a hang or a crash: the example running never ended
            failure = Failure(len(tally.calls) - 1, fault.message, fault.kind)
            tally.note_failure(tally.examples + tally.rejected + 1)
            return shrunk(tally.capacity_bytes, tally.calls, failure, tally.examples + tally.rejected + 1)  # the one running
        except Flaky:
            return _not_deterministic(guarded, watch, tally, semantics)
        return None

    counterexamples: list[Counterexample] = []
    interrupted = (False, False)  # (by the user's Ctrl-C, while shrinking)
    first_report_at: list[float | None] = [None]
    started = time.perf_counter()
    try:
        try:
            budget = phases[0].examples
            while budget > 0 and len(counterexamples) < max_divergences:
                at_start = tally.examples + tally.rejected
                found = one_run(len(counterexamples), budget)
                if found is None:
                    break
                counterexamples.append(found)
                if len(counterexamples) == 1:
                    first_report_at[0] = time.perf_counter()
                    if options.on_counterexample is not None:
                        options.on_counterexample(found, first_report_at[0] - started)
                if found.kind is None or found.kind in known.kinds:  # a hang, a crash, not deterministic
                    break
                known.kinds.add(found.kind)
                if known.deadline is None:
                    known.deadline = time.perf_counter() + SEARCH_SECONDS
                _supervised_or_none(known.classify_seen, watch)
                for kind, capacity_bytes, calls in known.unreported():
                    if len(counterexamples) >= max_divergences or time.perf_counter() > known.deadline:
                        break
                    sighted = shrunk(capacity_bytes, list(calls), None, None, kind, _search_seconds_left(known, watch))
                    if sighted.kind == kind:
                        counterexamples.append(sighted)
                        known.kinds.add(kind)
                    known.sightings.pop(kind)
                spent = (known.examples_at_new + 1 if known.examples_at_new is not None  # the diverging one too
                         else tally.examples + tally.rejected)
                budget -= spent - at_start
        except KeyboardInterrupt:
            unshrunk = _unshrunk(guarded, watch, shrinking[0], tally, semantics)
            counterexamples += [] if unshrunk is None else [unshrunk]
            if not counterexamples:
                seconds = time.perf_counter() - started
                raise CheckInterrupted(CheckReport(
                    False, tally.examples + tally.rejected, tally.steps, seconds, None, interrupted=True,
                    scope=ScopeCovered.of(tally, phases, capacity_cap[0]), **_first_failure(tally, started),
                )) from None
            interrupted = (True, unshrunk is not None)
    finally:
        guarded.close()
    seconds = time.perf_counter() - started
    first = counterexamples[0] if counterexamples else None
    scope = ScopeCovered.of(tally, phases, capacity_cap[0])
    tally.coverage.programs = tally.examples + tally.rejected
    return CheckReport(first is None, tally.examples + tally.rejected, tally.steps, seconds, first, scope=scope,
                       counterexamples=tuple(counterexamples), coverage=tally.coverage,
                       interrupted=interrupted[0], shrinking_interrupted=interrupted[1],
                       first_report_seconds=None if first_report_at[0] is None else first_report_at[0] - started,
                       **_first_failure(tally, started))


def _first_failure(tally: Tally, started: float) -> dict[str, Any]:
    """The report's fields of the first failing example: its ordinal and its time from `started`."""
    at = tally.first_failure_at
    return {"first_failure_example": tally.first_failure_example,
            "first_failure_seconds": None if at is None else at - started}


def _shrunk(
    factory: Callable[[int], Any], watch: Watch, capacity_bytes: int, calls: list[Call], failure: Failure | None,
    semantics: Semantics = CONTRACT, known: KnownKinds | None = None, kind: str | None = None,
    seconds: float | None = None, noted: Callable[[list[Call], Failure], None] | None = None,
) -> Counterexample:
    """Hypothesis's shrunk failure, shrunk once more by dropping calls that do not matter.

    `failure` is given for a hang or crash (the sequence ends at the call that caused it); a
    divergence is found again by replaying. A sequence that no longer fails on replay is reported
    as not deterministic. With `known` kinds, a candidate that diverges in one of them does not
    count as failing: shrinking keeps the divergence new; with `kind`, it keeps that kind.
    `seconds`: the shrinking budget (default `shrink_seconds`); `noted` is told the smallest
    failing sequence so far (`shrink_failure`'s `on_attempt`).
    """
    def attempt(candidate: list[Call]) -> Failure | None:
        found = first_failure(factory, capacity_bytes, candidate, watch, semantics)
        if found is None or found.kind != DIVERGENCE or known is None or not (known.kinds or kind):
            return found
        seen = _supervised_or_none(lambda: known.kind(capacity_bytes, candidate[: found.step + 1]), watch)
        return found if (seen == kind if kind is not None else seen not in known.kinds) else None

    first = failure
    if first is None:
        first = attempt(calls)
        if first is None:
            seen = f"a divergence at {to_python(calls[-1])}" if calls else "a divergence"
            return counterexample_from(capacity_bytes, calls, not_deterministic(calls, seen, None), semantics=semantics)
    budget = shrink_seconds(watch.timeout) if seconds is None else seconds
    if first.kind == DIVERGENCE and first.step >= LONG_SEQUENCE:
        budget = min(budget, LONG_SHRINK_SECONDS)
    calls, found, cut_short = shrink_failure(attempt, calls, first, budget, noted, same_divergence(factory, capacity_bytes, watch, semantics))
    message = found.message + (" (shrinking stopped when its time budget ran out)" if cut_short else "")
    if found.kind != DIVERGENCE:
        ending = "does not return" if found.kind == HANG else "kills the process"
        return counterexample_from(capacity_bytes, calls, message, ending, semantics)
    step = _supervised_or_none(lambda: replayed(factory, capacity_bytes, calls, semantics), watch)
    return counterexample_from(capacity_bytes, calls, message, semantics=semantics, step=step)


def _unshrunk(
    factory: Any, watch: Watch, shrinking: tuple[int, tuple[Call, ...], Failure] | None, tally: Tally,
    semantics: Semantics,
) -> Counterexample | None:
    """After the user's Ctrl-C: the counterexample of the smallest failing sequence found by the
    shrinking under way (`shrink_failure`'s, else Hypothesis's: `tally.smallest`), None when there is
    none, when it does not fail again (`interrupted_counterexample`) or on a second Ctrl-C."""
    if shrinking is None and tally.smallest is not None:
        capacity_bytes, calls, message = tally.smallest
        shrinking = (capacity_bytes, calls, Failure(len(calls) - 1, message, DIVERGENCE))
    if shrinking is None:
        return None
    try:
        return interrupted_counterexample(factory, watch, *shrinking, semantics)
    except KeyboardInterrupt:
        return None


def _search_seconds_left(known: KnownKinds, watch: Watch) -> float:
    """The shrinking budget of a further kind: what is left of the search's time, at least
    MINIMUM_SHRINK_SECONDS_AFTER_FIRST, at most `shrink_seconds`; the first kind gets `shrink_seconds`."""
    if known.deadline is None:
        return shrink_seconds(watch.timeout)
    left = known.deadline - time.perf_counter()
    return min(shrink_seconds(watch.timeout), max(MINIMUM_SHRINK_SECONDS_AFTER_FIRST, left))


def _supervised_or_none(work: Callable[[], T], watch: Watch) -> T | None:
    """`work()` supervised; None when the cache hangs or crashes in it."""
    try:
        return supervised(work, watch)
    except CacheFault:
        return None


def _not_deterministic(
    factory: Callable[[int], Any], watch: Watch, tally: Tally, semantics: Semantics = CONTRACT
) -> Counterexample:
    """Hypothesis saw a failure it could not reproduce: name the cache as not deterministic."""
    if tally.first_divergence is None:
        return counterexample_from(tally.capacity_bytes, tally.calls, not_deterministic(tally.calls, "a failure", None), semantics=semantics)
    capacity_bytes, calls, message = tally.first_divergence
    for _ in range(NONDETERMINISM_REPLAYS):
        again = first_failure(factory, capacity_bytes, calls, watch, semantics)
        if again is None or again.message != message:
            return counterexample_from(capacity_bytes, calls, not_deterministic(calls, message, again), semantics=semantics)
    return _shrunk(factory, watch, capacity_bytes, list(calls), again, semantics)
