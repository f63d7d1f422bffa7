"""Why a step diverges, not only what differs: the snapshot diff and the rules involved.

The snapshot diff lists the entries only in the spec's snapshot, only in the cache's, those of a
key that differ, and both recency orders when they differ. The rules are never written here; they
are read off the spec's own tables:

- the invariants of `spec.invariants.INVARIANTS` that the *cache's* step breaks (judged on the
  cache's snapshots before and after the call, and whether it raised): I1-I6 under the contract,
  the state invariants I1-I4 under any other semantics (the step invariants I5 and I6 are the
  contract's), each with its witness, said first (`contract.explaining.broken`);
- under the contract, the edge of `spec.transitions.transition_table()` the spec took for the key
  the call names: its state before, the guard and the outcome (the table docs/lifecycle.md shows).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from cacheproof.contract.calls import Call
from cacheproof.contract.differences import DivergingStep
from cacheproof.contract.explaining.broken import line as broken_line
from cacheproof.spec.cache.invariants import INVARIANTS, Step
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.transitions import Transition, abstract_state, transition_table
from cacheproof.spec.cache.types import EntryState, EntryView
from cacheproof.spec.kind import BrokenInvariant, broken_by

STATE_INVARIANTS = ("I1", "I2", "I3", "I4")
"""The invariants that hold under every semantics option (docs/invariants.md)."""

_KEYED_OPERATIONS = ("reserve", "acquire", "commit", "put", "get", "release", "pop")


@dataclass(frozen=True)
class SnapshotDiff:
    """Normalized entries (key, state, refcount, nbytes, retain) that differ between spec and cache."""

    only_in_spec: tuple
    only_in_cache: tuple
    differing: tuple  # (spec entry, cache entry) pairs of the same key
    spec_order: tuple  # keys oldest first, set only when the recency orders differ
    cache_order: tuple

    @property
    def empty(self) -> bool:
        return not (self.only_in_spec or self.only_in_cache or self.differing or self.spec_order)

    def to_json(self) -> dict:
        return {
            "only_in_spec": [list(e) for e in self.only_in_spec],
            "only_in_cache": [list(e) for e in self.only_in_cache],
            "differing": [{"spec": list(s), "cache": list(c)} for s, c in self.differing],
            "spec_order": list(self.spec_order),
            "cache_order": list(self.cache_order),
        }

    def lines(self) -> list[str]:
        """The diff as lines for a report: a heading, then one line per difference."""
        found = ["snapshot diff (key, state, refcount, nbytes, retain):"]
        found += [f"  only in spec:  {entry}" for entry in self.only_in_spec]
        found += [f"  only in cache: {entry}" for entry in self.only_in_cache]
        found += [f"  differing:     spec {s}, cache {c}" for s, c in self.differing]
        if self.spec_order:
            spec_order, cache_order = list(self.spec_order), list(self.cache_order)
            found.append(f"  recency order (oldest first): spec {spec_order}, cache {cache_order}")
        return found


def snapshot_diff(spec_entries: tuple, cache_entries: tuple) -> SnapshotDiff:
    """Entries only in one snapshot, entries of a key that differ, and both recency orders if they differ."""
    spec_by_key = {e[0]: e for e in spec_entries}
    cache_by_key = {e[0]: e for e in cache_entries}
    common = [key for key in spec_by_key if key in cache_by_key]
    spec_order = tuple(key for key in spec_by_key if key in cache_by_key)
    cache_order = tuple(key for key in cache_by_key if key in spec_by_key)
    orders_differ = spec_order != cache_order
    return SnapshotDiff(
        tuple(e for key, e in spec_by_key.items() if key not in cache_by_key),
        tuple(e for key, e in cache_by_key.items() if key not in spec_by_key),
        tuple((spec_by_key[k], cache_by_key[k]) for k in common if spec_by_key[k] != cache_by_key[k]),
        tuple(e[0] for e in spec_entries) if orders_differ else (),
        tuple(e[0] for e in cache_entries) if orders_differ else (),
    )


def explanation(step: DivergingStep, capacity_bytes: int, semantics: Semantics = CONTRACT) -> tuple[str, ...]:
    """The lines that say why `step` diverges: the invariants the cache's step breaks (with their
    witnesses), the snapshot diff (when both snapshots are known and differ), the rules of the
    invariants broken, and the spec's rule for the call."""
    broken = broken_by_cache(step, capacity_bytes, semantics)
    lines = [broken_line(invariant) for invariant in broken]
    if step.cache_after is not None:
        diff = snapshot_diff(step.spec_after, step.cache_after)
        if not diff.empty:
            lines += diff.lines()
    lines += [f"{invariant.name}: {invariant.rule}" for invariant in broken]
    if semantics == CONTRACT:
        edge = spec_edge(step)
        if edge is not None:
            article = "an" if edge.source.name[0] in "AEIOU" else "a"
            lines.append(f"the spec's rule for {edge.operation} of {article} {edge.source.name} key: "
                         f"{edge.guard.words}: {edge.result} (docs/lifecycle.md)")
    return tuple(lines)


def broken_by_cache(step: DivergingStep, capacity_bytes: int, semantics: Semantics = CONTRACT) -> list[BrokenInvariant]:
    """Each invariant the cache's own step breaks, with its witness; [] when its snapshots are unknown."""
    if step.cache_before is None or step.cache_after is None or step.actual is None:
        return []
    try:
        judged = Step(step.call.op, capacity_bytes, _views(step.cache_before), _views(step.cache_after),
                      step.actual.error is not None)
    except (TypeError, ValueError):  # a snapshot not of the normalized entries' shape is not judged
        return []
    names = None if semantics == CONTRACT else STATE_INVARIANTS
    return broken_by([invariant for invariant in INVARIANTS if names is None or invariant.name in names], judged)


def spec_edge(step: DivergingStep) -> Transition | None:
    """The transition-table edge the spec took for the key `step.call` names, or None (no named key,
    an argument error, which the table leaves out, or no single matching edge)."""
    call = step.call
    if call.op not in _KEYED_OPERATIONS or not call.args:
        return None
    source = abstract_state(_entry_of(step.spec_before, call.args[0]))
    wanted = _edge_result(call, step.expected.error, step.expected.result)
    edges = [edge for edge in _table() if edge.operation == call.op and edge.source is source
             and not edge.bystander and edge.result.split(",")[0] == wanted]
    return edges[0] if len(edges) == 1 else None


def _edge_result(call: Call, error: BaseException | None, result: Any) -> str:
    """A spec outcome in the table's words: "raises X", "True", "READY_HIT", "the value", "evicted keys"."""
    if error is not None:
        return f"raises {type(error).__name__}"
    if call.op in ("get", "pop"):
        return "the value"
    if call.op == "commit":
        return "evicted keys"
    return result.name if isinstance(result, enum.Enum) else repr(result)


@lru_cache(maxsize=1)
def _table() -> tuple[Transition, ...]:
    return tuple(transition_table())


def _entry_of(entries: Sequence[tuple], key: Any) -> EntryView | None:
    try:
        return next((view for view in _views(entries) if view.key == key), None)
    except TypeError:
        return None


def _views(entries: Sequence[tuple]) -> tuple[EntryView, ...]:
    """Normalized entries as `EntryView`s, states as `EntryState` (unknown state names stay as given)."""
    return tuple(
        EntryView(key, EntryState[state] if state in EntryState.__members__ else state, refcount, nbytes, retain)
        for key, state, refcount, nbytes, retain in entries
    )
