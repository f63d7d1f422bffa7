"""`run_check`: hold a cache to the spec with the state machine, and report a shrunk counterexample."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hypothesis import HealthCheck, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis.errors import Flaky
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from cacheproof.check import calls as call_format
from cacheproof.check.calls import Call
from cacheproof.check.differential import Divergence, run_spec_call
from cacheproof.check.fault_search import DIVERGENCE, HANG, Failure, first_failure, not_deterministic
from cacheproof.check.fault_search import shrink_failure, shrink_seconds
from cacheproof.check.faults import CacheFault
from cacheproof.check.guarded_call import DEFAULT_CALL_TIMEOUT, GuardedFactory, Watch, hang_message, supervised
from cacheproof.check.factories import PROBE_CAPACITY_BYTES, probe_factory
from cacheproof.check.isolation import IsolatedFactory
from cacheproof.check.machine import Tally, machine_for
from cacheproof.check.scope import SMALL, SMALL_KEYS, WIDE_KEYS, Phase
from cacheproof.check.values import MAX_VALUE_BYTES, is_storage_free
from cacheproof.spec import CacheSpec
from cacheproof.spec.profiles import ALL_OPERATIONS
from cacheproof.spec.semantics import CONTRACT, Semantics

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS_PER_EXAMPLE = 100
NONDETERMINISM_REPLAYS = 4
"""Replays of a sequence Hypothesis found flaky, looking for a run that answers differently."""

REAL_VALUE_CAPACITY = 1 << 16
"""Capacities are capped here (by default) for a cache whose values hold real memory (make_value
returns values that are not storage-free): making values costs time per byte. At most
MAX_VALUE_BYTES (`--max-capacity` raises it that far)."""

_PROBE_VALUE_BYTES = 64

LONG_SEQUENCE = 200
LONG_SHRINK_SECONDS = 10.0
"""A divergence after LONG_SEQUENCE calls or more (a long life's) gets this shrinking budget: every
attempt replays hundreds of calls, and a fault that needs them cannot be shrunk below them anyway."""

_MEMBERSHIP = re.compile(r"(.+) in cache: spec (True|False), this cache")

_INSPECTIONS = {"snapshot()": "cache.snapshot()", "stats()": "cache.stats()", "len()": "len(cache)"}
_FAILED_INSPECTION = re.compile(
    r"(?P<code>cache\.snapshot\(\)|cache\.stats\(\)|len\(cache\)|snapshot\(\)|stats\(\)|len\(\)|\S+ in cache) "
    r"(?P<what>raised|returned|did not return|killed the process)\b.*, after "
)
_ENDINGS = {"raised": "raises", "returned": "returns what the contract does not allow", "did not return": "does not return",
            "killed the process": "kills the process"}


def failed_inspection(message: str) -> tuple[str, str] | None:
    """(code, ending) when `message` says an inspection after the last call failed ("snapshot() raised
    ..., after cache.put(...)", "3 in cache did not return within 10 s, after ..."): the line the
    snippet ends with, e.g. ("cache.snapshot()", "raises"); None when the call itself failed."""
    found = _FAILED_INSPECTION.match(message)
    if found is None:
        return None
    code = _INSPECTIONS.get(found["code"], found["code"])
    return (f"print({code})" if found["what"] == "returned" else code), _ENDINGS[found["what"]]


@dataclass(frozen=True)
class Counterexample:
    """The shrunk sequence of calls on a fresh cache of `capacity_bytes` that diverges at its last call."""

    capacity_bytes: int
    calls: tuple[Call, ...]
    message: str
    spec_errors: tuple[str | None, ...] = ()  # per call, the contract error the spec raised
    ending: str = "diverges here"  # what the last call does: diverges here, does not return, ...

    def to_json(self) -> dict:
        return {
            "capacity_bytes": self.capacity_bytes,
            "calls": [call_format.to_json(call) for call in self.calls],
        }

    def trace_calls(self) -> tuple[Call, ...]:
        """The calls a trace of this counterexample records: the calls, and when the divergence is
        `key in cache` for a key no call names (1 beside "1", say), a last `contains` call of it, so
        that a replay, which checks `in` only for keys the trace names, sees it too."""
        membership = _MEMBERSHIP.match(self.message)
        if membership is None:
            return self.calls
        named = [call.args[0] for call in self.calls if call.args and call.op != "evict"]
        for key in (*named, *SMALL_KEYS, *WIDE_KEYS):
            if _hashable(key) and repr(key) == membership.group(1):
                return (*self.calls, Call("contains", (key,)))
        return self.calls

    def to_python(self, impl: str) -> str:
        """A runnable snippet: build the cache from `impl` ("module:factory") and make the calls."""
        module, _, factory = impl.partition(":")
        lines = [
            f"# cacheproof counterexample: {self.message}",
            "from cacheproof.check.values import raises, value_for",
            f"from {module} import {factory} as factory",
            "",
            f"cache = factory({self.capacity_bytes})",
        ]
        errors = self.spec_errors or (None,) * len(self.calls)
        last = len(self.calls) - 1
        for index, (call, error) in enumerate(zip(self.calls, errors)):
            line = call_format.to_python(call)
            if error is not None:
                line = f"with raises({error!r}):\n    {line}"
            elif index == last:
                line = f"print({line})"
            lines.append(line)
        inspection = failed_inspection(self.message)
        if inspection is None:
            lines[-1] += f"  # <- {self.ending}"
        else:
            lines.append(f"{inspection[0]}  # <- {inspection[1]}")
        membership = _MEMBERSHIP.match(self.message)
        if membership is not None:
            lines.append(f"print({membership.group(1)} in cache)  # <- the spec says {membership.group(2)}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ScopeCovered:
    """What the examples of a run actually reached (cacheproof.check.scope)."""

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
    ok: bool
    examples: int
    steps: int
    seconds: float
    counterexample: Counterexample | None
    interrupted: bool = False  # the user's Ctrl-C stopped the run: no verdict
    scope: ScopeCovered = ScopeCovered()

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        if self.interrupted:
            return {"ok": None, "interrupted": True, "examples": self.examples, "steps": self.steps,
                    "seconds": round(self.seconds, 3)}
        return {
            "ok": self.ok,
            "examples": self.examples,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second, 1),
            "scope": self.scope.to_json(),
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


def check_settings(examples: int, steps_per_example: int, shrink: bool = True) -> settings:
    """The Hypothesis settings of a run: no deadline, no database, no health checks, no blob;
    `shrink=False` reports the first failure as found (the checker still shrinks it)."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps_per_example,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(HypothesisPhase.generate, HypothesisPhase.shrink) if shrink else (HypothesisPhase.generate,),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


class CheckInterrupted(KeyboardInterrupt):
    """The user's Ctrl-C stopped `run_check`; `.report` holds the examples and steps so far (no verdict)."""

    def __init__(self, report: CheckReport) -> None:
        super().__init__("interrupted")
        self.report = report


def run_check(
    factory: Callable[[int], Any],
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int | None = 0,
    steps_per_example: int = DEFAULT_STEPS_PER_EXAMPLE,
    on_example: Callable[[Tally], None] | None = None,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    impl: str = "factory",
    isolate: bool = False,
    semantics: Semantics = CONTRACT,
    operations: tuple[str, ...] | None = None,
    bad_arguments: bool = True,
    phases: Sequence[Phase] | None = None,
    max_capacity: int | None = None,
) -> CheckReport:
    """Run `examples` random call sequences on `factory(capacity)` beside `CacheSpec`.

    Deterministic for a given seed (None draws a random one). Hypothesis's own printing is
    silenced; the shrunk failure comes back as `CheckReport.counterexample`. A call that does not
    return within `call_timeout` seconds (None: no limit) is a counterexample too; a factory that
    fails is `UsageAbort`; the user's Ctrl-C raises `CheckInterrupted` (see docs/robustness.md).
    `isolate=True` runs the cache in a child process built from `impl` ("module:factory"; `factory`
    is then unused), so that crashes are counterexamples too.
    The spec runs with `semantics` (spec/semantics.py); only calls in `operations` (None: all) are
    made, and a cache lacking one of them is `UsageAbort`; `bad_arguments=False` makes no bad calls.
    `phases` (default: `examples` examples of `steps_per_example` steps in the small scope) say
    which scopes the examples are drawn from, in order (`cacheproof.check.scope.THOROUGH`). A cache
    whose make_value returns values that hold memory gets capacities of at most `max_capacity`
    (default REAL_VALUE_CAPACITY; at most MAX_VALUE_BYTES); the report's `scope` says what was reached.
    """
    phases = tuple(phases) if phases is not None else (Phase(SMALL, examples, steps_per_example),)
    if max_capacity is not None and not 1 <= max_capacity <= MAX_VALUE_BYTES:
        raise ValueError(f"max_capacity must be 1..{MAX_VALUE_BYTES} bytes, got {max_capacity}")
    tally = Tally()
    tally.on_example = on_example
    watch = Watch(call_timeout)
    watch.last_call = lambda: tally.calls[-1] if tally.calls else None
    guarded = IsolatedFactory(impl, watch) if isolate else GuardedFactory(factory, watch, impl)
    capacity_cap: list[int | None] = [None]

    def hypothesis_run() -> None:
        probe_factory(guarded, impl, operations)
        if any(phase.scope.wide_capacities for phase in phases):
            capacity_cap[0] = capacity_cap_of(guarded, max_capacity or REAL_VALUE_CAPACITY)
        for phase in phases:
            machine = machine_for(
                guarded, tally, semantics=semantics, operations=operations or ALL_OPERATIONS,
                bad_arguments=bad_arguments, scope=phase.scope, max_capacity=capacity_cap[0],
            )
            if seed is not None:
                machine._hypothesis_internal_use_seed = seed
            with with_reporter(lambda message: None):
                run_state_machine_as_test(machine, settings=check_settings(phase.examples, phase.steps, phase.shrink))

    def describe_hang(name: str, args: tuple) -> str:
        return hang_message(name, args, call_timeout, tally.calls[-1] if tally.calls else None)

    counterexample = None
    started = time.perf_counter()
    try:
        try:
            supervised(hypothesis_run, watch, describe_hang)
        except Divergence:
            counterexample = _shrunk(guarded, watch, tally.capacity_bytes, tally.calls, None, semantics)
        except CacheFault as fault:
            failure = Failure(len(tally.calls) - 1, fault.message, fault.kind)
            counterexample = _shrunk(guarded, watch, tally.capacity_bytes, tally.calls, failure, semantics)
        except Flaky:
            counterexample = _not_deterministic(guarded, watch, tally, semantics)
    except KeyboardInterrupt:
        seconds = time.perf_counter() - started
        raise CheckInterrupted(CheckReport(
            False, tally.examples, tally.steps, seconds, None, interrupted=True,
            scope=ScopeCovered.of(tally, phases, capacity_cap[0]),
        )) from None
    finally:
        guarded.close()
    seconds = time.perf_counter() - started
    scope = ScopeCovered.of(tally, phases, capacity_cap[0])
    return CheckReport(counterexample is None, tally.examples, tally.steps, seconds, counterexample, scope=scope)


def capacity_cap_of(factory: Callable[[int], Any], cap: int) -> int | None:
    """None when the values the checker makes for `factory`'s caches hold no memory (it has no
    make_value, or make_value returns storage-free values), else `cap`: such a cache is checked at
    capacities of at most `cap` bytes. A make_value that fails here is capped too (the run reports it)."""
    cache = factory(PROBE_CAPACITY_BYTES)
    make_value = getattr(cache, "make_value", None)
    if make_value is None:
        return None
    try:
        return None if is_storage_free(make_value(_PROBE_VALUE_BYTES, 0)) else cap
    except Exception:  # noqa: BLE001  (make_value's failure is found again, and reported, by the examples)
        return cap


def _shrunk(
    factory: Callable[[int], Any], watch: Watch, capacity_bytes: int, calls: list[Call], failure: Failure | None,
    semantics: Semantics = CONTRACT,
) -> Counterexample:
    """Hypothesis's shrunk failure, shrunk once more by dropping calls that do not matter.

    `failure` is given for a hang or crash (the sequence ends at the call that caused it); a
    divergence is found again by replaying. A sequence that no longer fails on replay is reported
    as not deterministic.
    """
    def attempt(candidate: list[Call]) -> Failure | None:
        return first_failure(factory, capacity_bytes, candidate, watch, semantics)

    first = failure
    if first is None:
        first = attempt(calls)
        if first is None:
            return _counterexample(capacity_bytes, calls, not_deterministic(calls, "a divergence in the run", None), semantics=semantics)
    seconds = shrink_seconds(watch.timeout)
    if first.kind == DIVERGENCE and first.step >= LONG_SEQUENCE:
        seconds = min(seconds, LONG_SHRINK_SECONDS)
    calls, found, cut_short = shrink_failure(attempt, calls, first, seconds)
    message = found.message + (" (shrinking stopped when its time budget ran out)" if cut_short else "")
    ending = {DIVERGENCE: "diverges here", HANG: "does not return"}.get(found.kind, "kills the process")
    return _counterexample(capacity_bytes, calls, message, ending, semantics)


def _not_deterministic(
    factory: Callable[[int], Any], watch: Watch, tally: Tally, semantics: Semantics = CONTRACT
) -> Counterexample:
    """Hypothesis saw a failure it could not reproduce: name the cache as not deterministic."""
    if tally.first_divergence is None:
        return _counterexample(tally.capacity_bytes, tally.calls, not_deterministic(tally.calls, "a failure", None), semantics=semantics)
    capacity_bytes, calls, message = tally.first_divergence
    for _ in range(NONDETERMINISM_REPLAYS):
        again = first_failure(factory, capacity_bytes, calls, watch, semantics)
        if again is None or again.message != message:
            return _counterexample(capacity_bytes, calls, not_deterministic(calls, message, again), semantics=semantics)
    return _shrunk(factory, watch, capacity_bytes, list(calls), again, semantics)


def _counterexample(
    capacity_bytes: int, calls: Sequence[Call], message: str, ending: str = "diverges here",
    semantics: Semantics = CONTRACT,
) -> Counterexample:
    spec = CacheSpec(capacity_bytes, semantics)
    spec_errors = tuple(run_spec_call(spec, call).error for call in calls)
    return Counterexample(
        capacity_bytes,
        tuple(calls),
        message,
        tuple(None if error is None else type(error).__name__ for error in spec_errors),
        ending,
    )


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True
