"""Counterexamples to induction, made concrete: a the cache spec pre-state and one call on it.

The pre-state is rebuilt by public operations where possible (oldest entry first: `put` for an
idle entry, `acquire` then `commit` then more `acquire`s for an in-use one, `acquire`s for a
reservation), checked against the wanted snapshot, and otherwise built with the test-only
the spec class's `from_entries`. A counterexample replays on the concrete spec, prints as runnable
Python and writes as JSON in the checker's call format (`cacheproof.contract.calls`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, NamedTuple, Sequence

from cacheproof.contract import calls
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.spec.kinds import get_kind
from cacheproof.spec.errors import CacheError
from cacheproof.spec.cache.invariants import INVARIANTS_BY_NAME, Step
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import EntryState, EntryView, Snapshot
from cacheproof.contract.values import value_for

SPEC_CLASS = get_kind("cache").new
"""The cache spec's class, named once in spec/cache/kind.py."""

FROM_OPERATIONS = "operations"
FROM_ENTRIES = "from_entries"


def value_recipe(nbytes: int, tag: int = 7) -> ValueRecipe:
    """The checker's recipe for a value of `nbytes` bytes."""
    return ValueRecipe(nbytes, tag)


@dataclass(frozen=True)
class InductionCounterexample:
    """A pre-state satisfying the inductive invariant and a call after which `invariant` fails.

    `entries` is the pre-state, oldest first; `setup` the public calls that build it from
    a fresh spec when `built_by` is "operations" (empty for "from_entries").
    `outcome` is the outcome the model predicts for `call`; `semantics` those of the cache
    (built with `semantics=...`).
    """

    invariant: str
    model: str
    capacity_bytes: int
    entries: tuple[EntryView, ...]
    setup: tuple[Call, ...]
    built_by: str
    call: Call
    outcome: str
    semantics: Semantics = CONTRACT

    def build(self) -> Any:
        """The concrete pre-state."""
        if self.built_by == FROM_ENTRIES:
            return SPEC_CLASS.from_entries(
                self.capacity_bytes, [(e, _value_for(e)) for e in self.entries], self.semantics
            )
        cache = SPEC_CLASS(self.capacity_bytes, self.semantics)
        for call in self.setup:
            calls.invoke(cache, call)
        return cache

    def python(self) -> str:
        """Runnable Python that rebuilds the pre-state, makes the call and asserts the invariant."""
        lines = [
            f"# {self.invariant} fails after {self.call.op} ({self.model} model)",
            f"from cacheproof.spec import {SPEC_CLASS.__name__}, EntryState, EntryView",
            "from cacheproof.spec.errors import CacheError",
            "from cacheproof.spec.cache.invariants import INVARIANTS_BY_NAME, Step",
            "from cacheproof.contract.values import value_for",
        ]
        semantics = ""
        if self.semantics != CONTRACT:
            lines.append("from cacheproof.spec.cache.semantics import Semantics")
            semantics = f"semantics={semantics_python(self.semantics)}"
        lines.append("")
        if self.built_by == FROM_ENTRIES:
            lines += from_entries_python(self.capacity_bytes, self.entries, _value_python, semantics)
        else:
            lines.append(f"cache = {SPEC_CLASS.__name__}({self.capacity_bytes}{', ' + semantics if semantics else ''})")
            lines.extend(calls.to_python(call) for call in self.setup)
        lines += [
            "before = cache.snapshot()",
            "try:",
            f"    result = {calls.to_python(self.call)}  # the model predicts: {self.outcome}",
            "    raised = False",
            "except CacheError as error:",
            "    result, raised = error, True",
            "after = cache.snapshot()",
            f"step = Step({self.call.op!r}, {self.capacity_bytes}, before, after, raised)",
        ]
        if self.invariant in INVARIANTS_BY_NAME:
            lines.append(
                f"assert INVARIANTS_BY_NAME[{self.invariant!r}].holds(step), "
                f"f'{self.invariant} broken: {{before}} -> {{after}} ({{result!r}})'"
            )
        else:
            lines.append(f"print({self.invariant!r}, 'fails:', before, '->', after, result)")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """The checker's counterexample format plus what the prover knows."""
        return {
            "invariant": self.invariant,
            "model": self.model,
            "operation": self.call.op,
            "outcome": self.outcome,
            "capacity_bytes": self.capacity_bytes,
            "built_by": self.built_by,
            "semantics": {name: json_value(value) for name, value in self.semantics.differences().items()},
            "entries": [
                {"key": e.key, "state": e.state.name, "refcount": e.refcount, "nbytes": e.nbytes, "retain": e.retain}
                for e in self.entries
            ],
            "calls": [calls.to_json(call) for call in self.setup + (self.call,)],
            "python": self.python(),
        }


def from_entries_python(
    capacity_bytes: int, entries: Sequence[EntryView], value_python: Callable[[EntryView], str], semantics: str = ""
) -> list[str]:
    """The lines that build the cache spec in a given state: `cache = <spec class>.from_entries(...)`,
    each entry's value written by `value_python`; `semantics` the keyword argument's text, if any."""
    lines = [f"cache = {SPEC_CLASS.__name__}.from_entries({capacity_bytes}, ["]
    for e in entries:
        view = f"EntryView({e.key!r}, EntryState.{e.state.name}, {e.refcount}, {e.nbytes}, {e.retain})"
        lines.append(f"    ({view}, {value_python(e)}),")
    lines.append(f"]{', ' + semantics if semantics else ''})")
    return lines


def semantics_python(semantics: Semantics) -> str:
    """`Semantics(...)` naming the fields that differ from the contract."""
    def written(value: Any) -> str:
        if isinstance(value, frozenset):
            return "frozenset({" + ", ".join(map(repr, sorted(value))) + "})" if value else "frozenset()"
        return repr(value)

    return "Semantics(" + ", ".join(f"{name}={written(value)}" for name, value in semantics.differences().items()) + ")"


def json_value(value: Any) -> Any:
    """A `Semantics` field's value as JSON (refresh_on: a sorted list)."""
    return sorted(value) if isinstance(value, frozenset) else value


class Replayed(NamedTuple):
    """What the call did on the concrete spec."""

    step: Step
    result: Any  # the return value, or the CacheError raised


def replay(counterexample: InductionCounterexample) -> Replayed:
    """Run the counterexample's call on its concrete pre-state."""
    cache = counterexample.build()
    before = cache.snapshot()
    try:
        result, raised = calls.invoke(cache, counterexample.call), False
    except CacheError as error:
        result, raised = error, True
    step = Step(counterexample.call.op, counterexample.capacity_bytes, before, cache.snapshot(), raised)
    return Replayed(step, result)


def breaks_invariant(counterexample: InductionCounterexample) -> bool:
    """Whether replaying the counterexample on the spec breaks the named invariant (I1-I6 only)."""
    return not INVARIANTS_BY_NAME[counterexample.invariant].holds(replay(counterexample).step)


def concrete_counterexample(
    invariant: str,
    model: str,
    capacity_bytes: int,
    entries: list[EntryView],
    call: Call,
    outcome: str,
    semantics: Semantics = CONTRACT,
) -> InductionCounterexample:
    """A counterexample whose pre-state is built by public operations if they reproduce it."""
    setup = tuple(_building_calls(entries))
    built = InductionCounterexample(
        invariant, model, capacity_bytes, tuple(entries), setup, FROM_OPERATIONS, call, outcome, semantics
    )
    if _builds(built):
        return built
    return InductionCounterexample(invariant, model, capacity_bytes, tuple(entries), (), FROM_ENTRIES, call, outcome, semantics)


def _building_calls(entries: list[EntryView]) -> list[Call]:
    calls = []
    for e in entries:
        if e.state is EntryState.READY and e.refcount == 0:
            calls.append(Call("put", (e.key, _recipe_for(e)), {}))
            continue
        calls.append(Call("acquire", (e.key, e.nbytes), {"retain": e.retain}))
        if e.state is EntryState.READY:
            calls.append(Call("commit", (e.key, _recipe_for(e)), {}))
        calls.extend(Call("acquire", (e.key, e.nbytes), {"retain": e.retain}) for _ in range(e.refcount - 1))
    return calls


def _builds(counterexample: InductionCounterexample) -> bool:
    try:
        snapshot: Snapshot = counterexample.build().snapshot()
    except CacheError:
        return False
    return snapshot == counterexample.entries


def _recipe_for(entry: EntryView) -> ValueRecipe:
    return value_recipe(entry.nbytes, _tag(entry.key))


def _value_for(entry: EntryView) -> bytes | None:
    recipe = _recipe_for(entry)
    return value_for(None, recipe.nbytes, recipe.tag) if entry.state is EntryState.READY else None


def _value_python(entry: EntryView) -> str:
    recipe = _recipe_for(entry)
    return f"value_for(None, {recipe.nbytes}, {recipe.tag})" if entry.state is EntryState.READY else "None"


def _tag(key: Hashable) -> int:
    return sum(str(key).encode()) % 256
