"""`run_check`: hold a cache to the spec with the state machine, and report a shrunk counterexample."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, settings
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from cacheproof.check import calls as call_format
from cacheproof.check.calls import Call
from cacheproof.check.differential import Divergence, run_spec_call
from cacheproof.check.machine import Tally, machine_for
from cacheproof.check.sequence import first_divergence, shrink
from cacheproof.spec import CacheSpec

DEFAULT_EXAMPLES = 200
DEFAULT_STEPS_PER_EXAMPLE = 100


@dataclass(frozen=True)
class Counterexample:
    """The shrunk sequence of calls on a fresh cache of `capacity_bytes` that diverges at its last call."""

    capacity_bytes: int
    calls: tuple[Call, ...]
    message: str
    spec_errors: tuple[str | None, ...] = ()  # per call, the contract error the spec raised

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
        lines[-1] += "  # <- diverges here"
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    examples: int
    steps: int
    seconds: float
    counterexample: Counterexample | None

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "examples": self.examples,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second, 1),
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


def run_check(
    factory: Callable[[int], Any],
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int | None = 0,
    steps_per_example: int = DEFAULT_STEPS_PER_EXAMPLE,
    on_example: Callable[[Tally], None] | None = None,
) -> CheckReport:
    """Run `examples` random call sequences on `factory(capacity)` beside `CacheSpec`.

    Deterministic for a given seed (None draws a random one). Hypothesis's own printing is
    silenced; the shrunk failure comes back as `CheckReport.counterexample`.
    """
    tally = Tally()
    tally.on_example = on_example
    machine = machine_for(factory, tally)
    if seed is not None:
        machine._hypothesis_internal_use_seed = seed
    run_settings = settings(
        max_examples=examples,
        stateful_step_count=steps_per_example,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    counterexample = None
    started = time.perf_counter()
    try:
        with with_reporter(lambda message: None):
            run_state_machine_as_test(machine, settings=run_settings)
    except Divergence:
        counterexample = _shrunk(factory, tally.capacity_bytes, tally.calls)
    seconds = time.perf_counter() - started
    return CheckReport(counterexample is None, tally.examples, tally.steps, seconds, counterexample)


def _shrunk(factory: Callable[[int], Any], capacity_bytes: int, calls: list[Call]) -> Counterexample:
    """Hypothesis's shrunk failure, shrunk once more by dropping calls that do not matter."""
    calls = shrink(factory, capacity_bytes, calls)
    divergence = first_divergence(factory, capacity_bytes, calls)
    spec = CacheSpec(capacity_bytes)
    spec_errors = tuple(run_spec_call(spec, call).error for call in calls)
    return Counterexample(
        capacity_bytes,
        tuple(calls),
        divergence.message if divergence is not None else "diverged only inside the state machine",
        tuple(None if error is None else type(error).__name__ for error in spec_errors),
    )
