"""Concurrent scenarios of any spec kind: a fresh implementation of some size, a sequential prefix
of calls, then N threads each running a short list of calls on it at once.

Calls are drawn by the kind's call generator (`cacheproof.check.programs.generators`), the one the
sequential check draws programs with: the size first, then the prefix from the model's state as it
grows, then each thread's calls from a copy of the model after the prefix followed by that thread's
own earlier calls, as if it ran alone; so a thread tends to take, use and give back what the other
threads are contending for too. Under other semantics (a profile, --semantics) the model the calls
are drawn against is built with them, and only the chosen operations are drawn; the scenario
carries its semantics, so that its check and its script use the same spec.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from cacheproof.check.programs.draws import integer
from cacheproof.check.programs.generators import CallGenerator
from cacheproof.contract.calls import Call, ValueRecipe, from_json, to_json, to_python
from cacheproof.contract.steps import outcome_of
from cacheproof.spec.kind import SpecKind

MIN_THREADS, MAX_THREADS = 1, 4
CALLS_PER_THREAD = (2, 5)
MAX_PREFIX = 6


@dataclass(frozen=True)
class Scenario:
    """A fresh implementation of `size` (the kind's `size_name`), the `prefix` run alone, then one
    thread per entry of `threads`, under `semantics` (None: the kind's contract)."""

    size: int
    prefix: tuple[Call, ...]
    threads: tuple[tuple[Call, ...], ...]
    semantics: Any = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(threads, concurrent calls, prefix calls): what shrinking makes smaller."""
        return (len(self.threads), sum(len(calls) for calls in self.threads), len(self.prefix))

    @property
    def calls(self) -> int:
        return len(self.prefix) + sum(len(calls) for calls in self.threads)

    def recipes(self) -> tuple[ValueRecipe, ...]:
        """Every value recipe the scenario passes, once each, in order of appearance."""
        seen: dict[ValueRecipe, None] = {}
        for call in self.prefix + tuple(call for calls in self.threads for call in calls):
            for argument in (*call.args, *call.kwargs.values()):
                if isinstance(argument, ValueRecipe):
                    seen.setdefault(argument, None)
        return tuple(seen)

    def new_model(self, kind: SpecKind) -> Any:
        """A fresh model of `kind` at the scenario's size and semantics."""
        return kind.new(self.size) if self.semantics is None else kind.new(self.size, self.semantics)

    def describe(self) -> str:
        lines = [f"size {self.size}; prefix: " + ("; ".join(to_python(c) for c in self.prefix) or "none")]
        lines += [f"thread {t}: " + "; ".join(to_python(c) for c in calls) for t, calls in enumerate(self.threads)]
        return "\n".join(lines)

    def to_json(self) -> dict:
        data = {"size": self.size, "prefix": [to_json(call) for call in self.prefix],
                "threads": [[to_json(call) for call in calls] for calls in self.threads]}
        if self.semantics is not None:
            data["semantics"] = {field.name: _plain_field(getattr(self.semantics, field.name))
                                 for field in dataclasses.fields(self.semantics)}
        return data

    @classmethod
    def from_json(cls, data: dict, kind: SpecKind) -> "Scenario":
        """The scenario `to_json` wrote for `kind` (its semantics rebuilt from the kind's contract)."""
        semantics = None
        if "semantics" in data:
            contract = kind.new(1).semantics
            semantics = replace(contract, **{
                name: frozenset(value) if isinstance(getattr(contract, name), frozenset) else value
                for name, value in data["semantics"].items()})
        return cls(data["size"], tuple(from_json(call) for call in data["prefix"]),
                   tuple(tuple(from_json(call) for call in calls) for calls in data["threads"]), semantics)

    def to_python(self) -> str:
        """The scenario as a Python expression (needs Scenario and Call, ValueRecipe and the
        semantics' class imported)."""
        lines = ["Scenario(", f"    size={self.size},", "    prefix=("]
        lines += [f"        {_call_literal(call)}," for call in self.prefix]
        lines += ["    ),", "    threads=("]
        for calls in self.threads:
            lines.append("        (" + "".join(f"{_call_literal(call)}, " for call in calls).rstrip() + "),")
        lines += ["    ),"]
        if self.semantics is not None:
            lines.append(f"    semantics={self.semantics!r},")
        lines.append(")")
        return "\n".join(lines)


def _plain_field(value: Any) -> Any:
    return sorted(value) if isinstance(value, frozenset) else value


def _call_literal(call: Call) -> str:
    return f"Call({call.op!r}, {call.args!r}, {call.kwargs!r})"


def draw_scenario(kind: SpecKind, generator: CallGenerator, rng: random.Random, threads: int, *,
                  semantics: Any = None, operations: tuple[str, ...] | None = None, misuse: bool = True) -> Scenario:
    """A scenario of `threads` threads (MIN_THREADS..MAX_THREADS) drawn from `rng` by `generator`, of
    calls among `operations` (default: all the kind's), as the sequential check draws them, misuse
    calls only when `misuse`, against the model under `semantics` (module doc)."""
    if not MIN_THREADS <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be in {MIN_THREADS}..{MAX_THREADS}, got {threads}")
    operations = operations or kind.default_operations
    scenario = Scenario(generator.size(rng), (), (), semantics)
    model = scenario.new_model(kind)

    def drawn(count: int, alone: Any) -> tuple[Call, ...]:
        calls = []
        for _ in range(count):
            call = generator.draw_call(rng, alone, operations, misuse)
            outcome_of(alone, call, kind.error_names)
            calls.append(call)
        return tuple(calls)

    prefix = drawn(integer(rng, 0, MAX_PREFIX), model)
    per_thread = tuple(drawn(integer(rng, *CALLS_PER_THREAD), model.copy()) for _ in range(threads))
    return replace(scenario, prefix=prefix, threads=per_thread)


def smaller_scenarios(scenario: Scenario) -> list[Scenario]:
    """Candidates with fewer calls, most reduction first: a thread fewer, a call fewer, a prefix call
    fewer, and last the prefix alone as the one thread."""
    candidates: list[Scenario] = []
    threads = scenario.threads
    if len(threads) > 1:
        for index in range(len(threads)):
            candidates.append(replace(scenario, threads=threads[:index] + threads[index + 1:]))
    for index, calls in enumerate(threads):
        if len(calls) > 1:
            for position in range(len(calls)):
                shorter = calls[:position] + calls[position + 1:]
                candidates.append(replace(scenario, threads=threads[:index] + (shorter,) + threads[index + 1:]))
    for position in range(len(scenario.prefix)):
        prefix = scenario.prefix[:position] + scenario.prefix[position + 1:]
        candidates.append(replace(scenario, prefix=prefix))
    if scenario.prefix:  # a failure of the prefix alone (a call that never returns) needs no thread after it
        candidates.append(replace(scenario, prefix=(), threads=(scenario.prefix,)))
    return candidates


def shrink_greedily(scenario: Any, found: Any, still_fails: Callable[[Any], Any], seconds: float,
                    attempts: Callable[[Any], tuple] = lambda found: (None,)) -> tuple[Any, Any]:
    """The one scenario shrinker: take the first of `smaller_scenarios` (a scenario of any kind with
    `prefix` and `threads`) for which `still_fails(candidate, budget)` returns a failure, and repeat
    until none does or `seconds` pass. `attempts(found)` gives the run budgets to try in turn (the
    cache's checker first tries a small budget, then its largest). Returns the smallest scenario and
    its failure."""
    deadline = time.perf_counter() + seconds
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for budget in attempts(found):
            for candidate in smaller_scenarios(scenario):
                if time.perf_counter() >= deadline:
                    break
                failure = still_fails(candidate, budget)
                if failure is not None:
                    scenario, found, improved = candidate, failure, True
                    break
            if improved:
                break
    return scenario, found
