"""Concurrent scenarios: a sequential prefix of calls, then N threads each running a short list of
calls on the same cache.

Calls are drawn as the sequential state machine draws them (cacheproof.check.sequential.machine): keys that
suit the operation 80% of the time (a RESERVED key for commit, an in-use key for release, ...),
sizes on the boundaries (1, capacity, capacity - 1, fractions), capacities of 1..8 bytes half of
the time. The prefix is drawn against the spec's state as it grows; each thread's calls are drawn
against the state after the prefix followed by that thread's own earlier calls, as if it ran
alone, so a thread tends to acquire, commit and release the entries that the other threads are
contending for too.

Under other semantics (a profile, --semantics) the spec the calls are drawn against is built with
them, and only the chosen operations (--ops, a profile's subset) are drawn; the scenario carries
its semantics, so its check and its script use the same spec.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable

from cacheproof.contract import calls as call_format
from cacheproof.contract.calls import Call, ValueRecipe, drawn_recipe
from cacheproof.contract.outcomes import run_spec_call
from cacheproof.check.sequential.machine import KEYS
from cacheproof.spec import EntryState
from cacheproof.spec.cache.profiles import ALL_OPERATIONS
from cacheproof.spec.cache.semantics import CONTRACT, Semantics, field_names
from cacheproof.spec.kinds import new_spec
from cacheproof.spec.kind import Model

MIN_THREADS, MAX_THREADS = 1, 4
CALLS_PER_THREAD = (2, 5)
MAX_PREFIX = 6
_SUITED_PERCENT = 80

_OPERATION_WEIGHTS = {
    "reserve": 3, "acquire": 5, "commit": 4, "put": 2, "get": 2, "release": 4,
    "evict": 1, "pop": 1, "clear": 0.5, "contains": 0.5,
}
"""Lifecycle operations dominate: they are the ones that contend for bytes and references."""


@dataclass(frozen=True)
class Scenario:
    """A fresh cache of `capacity_bytes`, the `prefix` run alone, then one thread per entry of `threads`."""

    capacity_bytes: int
    prefix: tuple[Call, ...]
    threads: tuple[tuple[Call, ...], ...]
    semantics: Semantics = CONTRACT

    @property
    def size(self) -> tuple[int, int, int]:
        """(threads, concurrent calls, prefix calls): what shrinking makes smaller."""
        return (len(self.threads), sum(len(calls) for calls in self.threads), len(self.prefix))

    def recipes(self) -> tuple[ValueRecipe, ...]:
        """Every value recipe the scenario passes, once each, in order of appearance."""
        seen: dict[ValueRecipe, None] = {}
        for call in self.prefix + tuple(call for calls in self.threads for call in calls):
            for argument in call.args:
                if isinstance(argument, ValueRecipe):
                    seen.setdefault(argument, None)
        return tuple(seen)

    def to_json(self) -> dict:
        data = {
            "capacity_bytes": self.capacity_bytes,
            "prefix": [call_format.to_json(call) for call in self.prefix],
            "threads": [[call_format.to_json(call) for call in calls] for calls in self.threads],
        }
        if self.semantics != CONTRACT:
            data["semantics"] = {name: sorted(value) if isinstance(value, frozenset) else value
                                 for name, value in self.semantics.differences().items()}
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Scenario":
        changes = data.get("semantics", {})
        semantics = replace(CONTRACT, **{name: changes[name] for name in field_names() if name in changes})
        return cls(
            data["capacity_bytes"],
            tuple(call_format.from_json(call) for call in data["prefix"]),
            tuple(tuple(call_format.from_json(call) for call in calls) for calls in data["threads"]),
            semantics,
        )

    def to_python(self) -> str:
        """The scenario as a Python expression (needs Scenario, Call and ValueRecipe imported)."""
        lines = ["Scenario(", f"    capacity_bytes={self.capacity_bytes},", "    prefix=("]
        lines += [f"        {_call_literal(call)}," for call in self.prefix]
        lines += ["    ),", "    threads=("]
        for calls in self.threads:
            lines.append("        (" + "".join(f"{_call_literal(call)}, " for call in calls).rstrip() + "),")
        lines += ["    ),"]
        if self.semantics != CONTRACT:  # needs Semantics imported too
            lines.append(f"    semantics=Semantics(**{self.semantics.differences()!r}),")
        lines.append(")")
        return "\n".join(lines)


def _call_literal(call: Call) -> str:
    return f"Call({call.op!r}, {call.args!r}, {call.kwargs!r})"


def draw_scenario(rng: random.Random, threads: int, semantics: Semantics = CONTRACT,
                  operations: tuple[str, ...] = ALL_OPERATIONS, keys: tuple[Hashable, ...] = KEYS) -> Scenario:
    """A scenario of `threads` threads (MIN_THREADS..MAX_THREADS), drawn from `rng`, of calls among
    `operations` on `keys` (default: the small scope's) drawn against the spec under `semantics`."""
    if not MIN_THREADS <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be in {MIN_THREADS}..{MAX_THREADS}, got {threads}")
    capacity = rng.randint(1, 8) if rng.random() < 0.5 else rng.randint(1, 64)
    drawer = _Drawer(rng, capacity, semantics, operations, keys)
    prefix = drawer.draw_calls(rng.randint(0, MAX_PREFIX), ())
    thread_calls = tuple(drawer.draw_calls(rng.randint(*CALLS_PER_THREAD), prefix) for _ in range(threads))
    return Scenario(capacity, prefix, thread_calls, semantics)


class _Drawer:
    """Draws calls that suit the spec's state, as `CacheMachine`'s rules pick their arguments; only
    `operations`, by their weights."""

    def __init__(self, rng: random.Random, capacity: int, semantics: Semantics = CONTRACT,
                 operations: tuple[str, ...] = ALL_OPERATIONS, keys: tuple[Hashable, ...] = KEYS) -> None:
        self.rng = rng
        self.keys = keys
        self.capacity = capacity
        self.semantics = semantics
        chosen = [name for name in _OPERATION_WEIGHTS if name in operations]
        self.operations = tuple(chosen) or ("contains",)
        self.weights = tuple(_OPERATION_WEIGHTS[name] or 0.5 for name in self.operations)

    def draw_calls(self, count: int, before: tuple[Call, ...]) -> tuple[Call, ...]:
        spec = new_spec(self.capacity, self.semantics)
        for call in before:
            run_spec_call(spec, call)
        drawn: list[Call] = []
        for _ in range(count):
            call = self.draw_call(spec)
            run_spec_call(spec, call)
            drawn.append(call)
        return tuple(drawn)

    def draw_call(self, spec: Model) -> Call:
        rng = self.rng
        operation = rng.choices(self.operations, weights=self.weights)[0]
        snapshot = spec.snapshot()
        present = [e.key for e in snapshot]
        absent = [key for key in self.keys if key not in present]
        idle = [e.key for e in snapshot if e.state is EntryState.READY and e.refcount == 0]
        if operation == "reserve":
            return Call("reserve", (self._key(absent), self._size()), self._retain())
        if operation == "acquire":
            key = self._key(idle or present)
            entry = next((e for e in snapshot if e.key == key), None)
            if entry is not None and rng.random() < 0.8:
                return Call("acquire", (key, entry.nbytes), {} if entry.retain else {"retain": False})
            return Call("acquire", (key, self._size()), self._retain())
        if operation == "commit":
            key = self._key([e.key for e in snapshot if e.state is EntryState.RESERVED])
            entry = next((e for e in snapshot if e.key == key), None)
            nbytes = self._size()
            if entry is not None:
                nbytes = entry.nbytes if rng.random() < 0.8 else nbytes + (nbytes == entry.nbytes)
            return Call("commit", (key, drawn_recipe(nbytes, rng.randrange(256))))
        if operation == "put":
            return Call("put", (self._key(absent), drawn_recipe(self._size(), rng.randrange(256))))
        if operation == "get":
            return Call("get", (self._key([e.key for e in snapshot if e.state is EntryState.READY]),))
        if operation == "release":
            return Call("release", (self._key([e.key for e in snapshot if e.refcount > 0]),))
        if operation == "evict":
            return Call("evict", (0 if rng.random() < 0.2 else self._size(),))
        if operation == "pop":
            return Call("pop", (self._key(idle),))
        if operation == "clear":
            return Call("clear")
        return Call("contains", (self._key(present),))

    def _key(self, suited: list[Hashable]) -> Hashable:
        if suited and self.rng.randrange(100) < _SUITED_PERCENT:
            return self.rng.choice(suited)
        return self.rng.choice(self.keys)

    def _size(self) -> int:
        capacity = self.capacity
        kind = self.rng.randrange(7)
        size = (1, capacity, capacity - 1, capacity // 2, capacity // 3, capacity // 4,
                1 + self.rng.randrange(capacity))[kind]
        return max(size, 1)

    def _retain(self) -> dict[str, Any]:
        return {"retain": False} if self.rng.random() < 0.3 else {}


def smaller_scenarios(scenario: Scenario) -> list[Scenario]:
    """Candidates one step smaller, most reduction first: a thread fewer, a call fewer, a prefix call fewer."""
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
