"""The refinement check's verdict and the rendering of its disagreements.

Rule: a `Disagreement` is a state and call on which the spec and the per-entry model part; it is
described in one line, as JSON, and as runnable Python that builds the state, makes the call and
asserts the model's outcome, so it fails on the spec that disagrees. A `RefinementReport` holds
the counts, the seconds and the first disagreements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacheproof.contract import calls
from cacheproof.contract.calls import Call
from cacheproof.prove.cache.counterexample import from_entries_python, json_value, semantics_python
from cacheproof.prove.cache.refinement_domain import READY, value_tag
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import Acquired, EntryView
from cacheproof.spec.kinds import get_kind

SPEC_CLASS = get_kind("cache").new
"""The cache spec's class, named once in spec/cache/kind.py."""


@dataclass(frozen=True)
class Disagreement:
    """A state and call on which the spec and the per-entry model part.

    `expected` is the model's outcome on it as z3 evaluates it: (outcome name, error class or
    None, result, snapshot after, byte counters after), or None when no outcome (or more than one)
    applies; `candidates` names the outcomes that apply. `observed` is the spec's (error class or
    None, result, snapshot after, byte counters after), or None when the spec cannot even hold
    the state.
    """

    capacity_bytes: int
    entries: tuple[EntryView, ...]
    call: Call | None
    observed: tuple | None
    expected: tuple | None
    candidates: tuple[str, ...]
    semantics: Semantics = CONTRACT

    def describe(self) -> str:
        call = calls.to_python(self.call) if self.call is not None else f"{SPEC_CLASS.__name__}.from_entries(...)"
        if self.observed is None:
            return f"capacity {self.capacity_bytes}, {list(self.entries)}: the spec cannot hold this state"
        if self.expected is None:
            model = f"no single outcome (applying: {', '.join(self.candidates) or 'none'})"
        else:
            model = f"{self.expected[0]} {self.expected[1:3]}"
        return f"capacity {self.capacity_bytes}, {list(self.entries)}, {call}: spec {self.observed[:2]}, model {model}"

    def python(self) -> str:
        """Runnable Python that builds the state, makes the call and asserts the model's outcome
        (it fails on the spec that disagrees)."""
        lines = [
            "# The spec and the per-entry model part on this call (bounded refinement check)",
            f"from cacheproof.spec import Acquired, {SPEC_CLASS.__name__}, EntryState, EntryView",
            "from cacheproof.contract.values import value_for",
        ]
        if self.semantics != CONTRACT:
            lines.append("from cacheproof.spec.cache.semantics import Semantics")
        semantics = "" if self.semantics == CONTRACT else f"semantics={semantics_python(self.semantics)}"
        lines += ["", *from_entries_python(self.capacity_bytes, self.entries, _value_python, semantics)]
        if self.call is None:
            lines.append("assert False, 'the model holds this state (I1-I4 hold), the spec refused it above'")
            return "\n".join(lines) + "\n"
        lines += [
            "try:",
            f"    result, error = {calls.to_python(self.call)}, None",
            "except Exception as raised:",
            "    result, error = None, type(raised).__name__",
            "stats = cache.stats()",
            "observed = (error, result, cache.snapshot(), (stats.reserved_bytes, stats.pinned_bytes, stats.idle_bytes))",
        ]
        if self.expected is None:
            applying = ", ".join(self.candidates) or "none"
            lines.append(f"raise AssertionError(f'the per-entry model has no single outcome here (applying: {applying}); spec: {{observed}}')")
            return "\n".join(lines) + "\n"
        name, error, result, snapshot, counts = self.expected
        views = ", ".join(
            f"EntryView({e.key!r}, EntryState.{e.state.name}, {e.refcount}, {e.nbytes}, {e.retain})" for e in snapshot
        )
        lines += [
            f"expected = ({error!r}, {_result_python(result)}, ({views}{',' if len(snapshot) == 1 else ''}), {counts!r})"
            f"  # the model's outcome: {name}",
            "assert observed == expected, f'spec {observed} != model {expected}'",
        ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "capacity_bytes": self.capacity_bytes,
            "entries": [
                {"key": e.key, "state": e.state.name, "refcount": e.refcount, "nbytes": e.nbytes, "retain": e.retain}
                for e in self.entries
            ],
            "call": None if self.call is None else calls.to_json(self.call),
            "semantics": {name: json_value(value) for name, value in self.semantics.differences().items()},
            "spec": None if self.observed is None else repr(self.observed),
            "model": None if self.expected is None else repr(self.expected),
            "candidates": list(self.candidates),
            "python": self.python(),
        }


def _value_python(entry: EntryView) -> str:
    return f"value_for(None, {entry.nbytes}, {value_tag(entry.key)})" if entry.state is READY else "None"


def _result_python(result: Any) -> str:
    if isinstance(result, Acquired):
        return f"Acquired.{result.name}"
    if isinstance(result, EntryView):  # the value of this entry
        return _value_python(result)
    return repr(result)
