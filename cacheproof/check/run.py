"""`run_check`: hold a cache to the spec with the state machine, and report a shrunk counterexample."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hypothesis import HealthCheck, Phase, settings
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
from cacheproof.check.factories import probe_factory
from cacheproof.check.isolation import IsolatedFactory
from cacheproof.check.machine import Tally, machine_for
from cacheproof.spec import CacheSpec
from cacheproof.spec.profiles import ALL_OPERATIONS
from cacheproof.spec.semantics import CONTRACT, Semantics

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS_PER_EXAMPLE = 100
NONDETERMINISM_REPLAYS = 4
"""Replays of a sequence Hypothesis found flaky, looking for a run that answers differently."""

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
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    examples: int
    steps: int
    seconds: float
    counterexample: Counterexample | None
    interrupted: bool = False  # the user's Ctrl-C stopped the run: no verdict

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
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


def check_settings(examples: int, steps_per_example: int) -> settings:
    """The Hypothesis settings of a run: no deadline, no database, no health checks, no blob."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps_per_example,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
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
    """
    tally = Tally()
    tally.on_example = on_example
    watch = Watch(call_timeout)
    watch.last_call = lambda: tally.calls[-1] if tally.calls else None
    guarded = IsolatedFactory(impl, watch) if isolate else GuardedFactory(factory, watch, impl)
    machine = machine_for(
        guarded, tally, semantics=semantics, operations=operations or ALL_OPERATIONS, bad_arguments=bad_arguments
    )
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed
    run_settings = check_settings(examples, steps_per_example)

    def hypothesis_run() -> None:
        probe_factory(guarded, impl, operations)
        with with_reporter(lambda message: None):
            run_state_machine_as_test(machine, settings=run_settings)

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
        raise CheckInterrupted(CheckReport(False, tally.examples, tally.steps, seconds, None, interrupted=True)) from None
    finally:
        guarded.close()
    seconds = time.perf_counter() - started
    return CheckReport(counterexample is None, tally.examples, tally.steps, seconds, counterexample)


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
    calls, found, cut_short = shrink_failure(attempt, calls, first, shrink_seconds(watch.timeout))
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
