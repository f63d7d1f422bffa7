"""Bounded refinement: on every small state and call, `CacheSpec` does what the per-entry model says.

The induction proofs (entry_model.py) are about the model, which calls the spec's `rules` and
`steps` but states on its own which outcome a call has (the order of the error checks, the choice
between outcomes), which slots change, the recency order and the eviction walk. This check ties
that statement to the spec as written. Within a `Bound` it takes every state that satisfies
I1-I4 (capacities 1..C; at most E entries, each RESERVED or READY with every nbytes up to the
capacity, refcounts up to R (up to 1 in states of more than `deep_entries` entries) and both
retain flags where I3/I4 allow; entries in every recency order; keys "a", "b", ... oldest first,
since keys are interchangeable) and every call of the bounded domain (each operation on every
present key and on one absent key; nbytes 0..C+1 for reserve and acquire, -1..C+1 for evict,
value sizes 0..C+1, retain True and False). For each it runs the spec (error class, result,
snapshot and byte counters after the call) and evaluates the model's outcomes on the same values,
over N = E + 1 slots: exactly one outcome must apply, with the spec's error or result, and its
post-state must be the spec's (same entries, fields, recency order and byte counts). An outcome
with an eviction frontier must give that post-state for every frontier its guard allows.

The model's terms are evaluated with numpy over all calls of one operation at once
(`array_eval`); a disagreement is then evaluated again by z3 itself (`z3.substitute` and
`simplify`) before it is reported, and becomes a runnable snippet that fails on the spec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator, NamedTuple

import numpy as np
import z3

from cacheproof.check import calls
from cacheproof.check.calls import Call, ValueRecipe
from cacheproof.check.values import value_for
from cacheproof.prove import entry_model
from cacheproof.prove.array_eval import CompiledTerms, z3_value
from cacheproof.prove.counterexample import json_value, semantics_python
from cacheproof.prove.induction import Outcome
from cacheproof.spec import CacheSpec
from cacheproof.spec.semantics import CONTRACT, Semantics
from cacheproof.spec.types import Acquired, EntryState, EntryView

RESERVED, READY = EntryState.RESERVED, EntryState.READY
ABSENT_KEY = "new"
"""The key of every call on a key the state does not hold."""

class Bound(NamedTuple):
    """Which states the refinement check covers: capacities 1..max_capacity, at most max_entries
    entries; refcounts up to max_refcount in states of at most `deep_entries` entries, up to 1 in
    larger ones (a second reference matters to the entry a call names, and three-entry states with
    every refcount would triple the run for bystanders whose references only count as > 0)."""

    max_capacity: int = 3
    max_entries: int = 3
    max_refcount: int = 2
    deep_entries: int = 2

    def describe(self) -> str:
        deep = min(self.deep_entries, self.max_entries)
        refcounts = f"refcount <= {self.max_refcount}"
        if deep < self.max_entries:
            refcounts += f" (<= 1 beyond {deep} entries)"
        return f"capacities 1..{self.max_capacity}, <= {self.max_entries} entries, {refcounts}"


DEFAULT_BOUND = Bound()


# The bounded domain -------------------------------------------------------------------------------


def state_keys(bound: Bound) -> tuple[str, ...]:
    """The keys of a state's entries, oldest first."""
    return tuple(chr(ord("a") + i) for i in range(bound.max_entries))


def entry_kinds(capacity: int, max_refcount: int) -> list[tuple[EntryState, int, int, bool]]:
    """(state, refcount, nbytes, retain) of every entry allowed by I3 and I4 at this capacity."""
    kinds = []
    for nbytes in range(1, capacity + 1):
        for refcount in range(1, max_refcount + 1):
            for retain in (True, False):
                kinds.append((RESERVED, refcount, nbytes, retain))
                kinds.append((READY, refcount, nbytes, retain))
        kinds.append((READY, 0, nbytes, True))
    return kinds


def bounded_states(bound: Bound = DEFAULT_BOUND) -> Iterator[tuple[int, tuple[EntryView, ...]]]:
    """(capacity, entries oldest first) of every state within the bound that satisfies I1-I4."""
    keys = state_keys(bound)
    for capacity in range(1, bound.max_capacity + 1):
        for count in range(bound.max_entries + 1):
            max_refcount = bound.max_refcount if count <= bound.deep_entries else 1
            yield from ((capacity, entries) for entries in _sequences(capacity, count, entry_kinds(capacity, max_refcount), keys))


def _sequences(capacity: int, count: int, kinds: list, keys: tuple[str, ...]) -> Iterator[tuple[EntryView, ...]]:
    """Every sequence of `count` entries of these kinds that keeps I1 and I2."""

    def extend(prefix: tuple[EntryView, ...], protected: int, ready: int) -> Iterator[tuple[EntryView, ...]]:
        if len(prefix) == count:
            yield prefix
            return
        for state, refcount, nbytes, retain in kinds:
            more_protected = protected + (nbytes if state is RESERVED or refcount > 0 else 0)
            more_ready = ready + (nbytes if state is READY else 0)
            if more_protected <= capacity and more_ready <= capacity:
                entry = EntryView(keys[len(prefix)], state, refcount, nbytes, retain)
                yield from extend(prefix + (entry,), more_protected, more_ready)

    return extend((), 0, 0)


def bounded_calls(capacity: int, entries: tuple[EntryView, ...], semantics: Semantics = CONTRACT) -> Iterator[Call]:
    """Every call of the bounded domain on a state: each operation on each present key and on
    ABSENT_KEY; nbytes -1..capacity+1 (evict; reserve and acquire from 0, as -1 is refused like
    0), value sizes 0..capacity+1, retain True and False. With trusted arguments, only the calls
    a caller may make: sizes from 1 (evict from 0)."""
    checked = semantics.argument_checks == "checked"
    sizes = range(0 if checked else 1, capacity + 2)
    for key in [e.key for e in entries] + [ABSENT_KEY]:
        for nbytes in sizes:
            for retain in (True, False):
                yield Call("reserve", (key, nbytes), {"retain": retain})
                yield Call("acquire", (key, nbytes), {"retain": retain})
        for size in sizes:
            yield Call("commit", (key, ValueRecipe(size, _tag(key))), {})
            yield Call("put", (key, ValueRecipe(size, _tag(key))), {})
        for operation in ("get", "release", "pop"):
            yield Call(operation, (key,), {})
    for nbytes in range(-1 if checked else 0, capacity + 2):
        yield Call("evict", (nbytes,), {})
    yield Call("clear", (), {})


def _tag(key: Hashable) -> int:
    return sum(str(key).encode()) % 256


def entry_value(entry: EntryView) -> Any:
    """The value a READY entry of the bounded states holds (None for RESERVED)."""
    return value_for(None, entry.nbytes, _tag(entry.key)) if entry.state is READY else None


# What the spec does -------------------------------------------------------------------------------

NO_ERROR = "-"
_RESULT_OF_ERROR = -3
_RESULT_OTHER = -2
_RESULT_NONE = 20
_RESULT_VALUE = 30
_RESULT_ACQUIRED = 10  # + the member's index
_RESULT_EVICTED = 1000  # + the bit mask of the evicted slots
_ACQUIRED = list(Acquired)


_PRE_SLOTS = 2
"""Where the slots start in a layout's columns (after capacity and clock)."""


class Layout(NamedTuple):
    """How one state sits in the model's slots for calls on one key: the key in slot 0, the other
    entries after it in recency order, then absent slots; ranks are recency positions."""

    slot_keys: tuple[Hashable | None, ...]
    pre: tuple[int, ...]  # capacity, clock, then per slot: present, ready, nbytes, refcount, retain, rank
    unchanged: tuple[int, ...]  # the encoded snapshot of the state itself (see _encode_snapshot)
    values: dict[Hashable, Any]


def layout(capacity: int, entries: tuple[EntryView, ...], key: Hashable | None, num_slots: int) -> Layout:
    keyed = [e for e in entries if e.key == key]
    others = [e for e in entries if e.key != key]
    slot_entries: list[EntryView | None] = [keyed[0] if keyed else None, *others]
    slot_entries += [None] * (num_slots - len(slot_entries))
    position = {e.key: i for i, e in enumerate(entries)}
    absent_rank = iter(range(len(entries), num_slots))
    pre: list[int] = [capacity, num_slots]
    for entry in slot_entries:
        if entry is None:
            pre += [0, 0, 0, 0, 1, next(absent_rank)]
        else:
            pre += [1, int(entry.state is READY), entry.nbytes, entry.refcount, int(entry.retain), position[entry.key]]
    slot_keys = (key, *[e.key for e in others], *[None] * (num_slots - 1 - len(others)))
    values = {e.key: entry_value(e) for e in entries}
    lay = Layout(slot_keys, tuple(pre), (), values)
    return lay._replace(unchanged=_encode_snapshot(entries, lay))


def _fresh_copy(cache: Any, dict_fields: tuple[str, ...]) -> Any:
    """An independent copy of a spec cache: entries are immutable, so copying its dicts suffices."""
    clone = object.__new__(type(cache))
    clone.__dict__ = dict(cache.__dict__)
    for name in dict_fields:
        clone.__dict__[name] = dict(cache.__dict__[name])
    return clone


def _encode_result(result: Any, lay: Layout, key_value: Any) -> int:
    """bool: 0 or 1; None; an `Acquired`; a list of evicted keys (distinct keys of the layout,
    oldest first) as a bit mask of their slots; the named entry's value; anything else."""
def _encode_result(result: Any, lay: Layout, key_value: Any) -> int:
    if type(result) is bool:
        return int(result)
    if result is None:
        return _RESULT_NONE
    if isinstance(result, Acquired):
        return _RESULT_ACQUIRED + _ACQUIRED.index(result)
    if isinstance(result, list):
        return _encode_evicted(result, lay)
    if key_value is not None and type(result) is type(key_value) and result == key_value:
        return _RESULT_VALUE
    return _RESULT_OTHER


def _encode_evicted(keys: list, lay: Layout) -> int:
    """The bit mask of the evicted keys' slots, if the list names distinct keys of the layout
    oldest first; _RESULT_OTHER otherwise."""
    slots = [lay.slot_keys.index(k) if k in lay.slot_keys and k is not None else -1 for k in keys]
    ranks = [lay.pre[_PRE_SLOTS + 6 * s + 5] for s in slots]
    if -1 in slots or len(set(slots)) != len(slots) or ranks != sorted(ranks):
        return _RESULT_OTHER
    return _RESULT_EVICTED + sum(1 << s for s in slots)


def _encode_snapshot(snapshot: tuple, lay: Layout) -> tuple[int, ...]:
    """Per slot of the layout: present, ready, nbytes, refcount, retain, recency position (-1 if
    absent); then 1 if the snapshot holds a key outside the layout, else 0."""
    by_key = {e.key: (i, e) for i, e in enumerate(snapshot)}
    after: list[int] = []
    for key in lay.slot_keys:
        found = by_key.pop(key, None) if key is not None else None
        if found is None:
            after += [0, 0, 0, 0, 0, -1]
        else:
            position, e = found
            after += [1, int(e.state is READY), e.nbytes, e.refcount, int(e.retain), position]
    after.append(int(bool(by_key)))
    return tuple(after)


# What the model says ------------------------------------------------------------------------------


class _Model:
    """The per-entry model's outcomes over `num_slots` slots, built once; for each operation the
    guards and post-states of its outcomes compiled into numpy programs, one for the outcomes
    without an eviction frontier and one for those with."""

    def __init__(self, num_slots: int, semantics: Semantics = CONTRACT) -> None:
        self.num_slots = num_slots
        self.cache = entry_model.symbolic_cache("", num_slots)
        self.parameters = entry_model.symbolic_parameters()
        self.frontier = z3.Int("eviction_frontier")
        self.outcomes = {
            op: entry_model.outcomes(op, self.cache, self.parameters, semantics) for op in entry_model.OPERATIONS
        }
        self.frontiers = range(0, num_slots + 1)  # ranks are 0..num_slots-1: every cut of them
        self._programs: dict[str, list[tuple[list[Outcome], CompiledTerms]]] = {}

    def guard(self, outcome: Outcome) -> Any:
        return z3.And(outcome.guard, outcome.exact()) if outcome.exact else outcome.guard

    def programs(self, operation: str) -> list[tuple[list[Outcome], CompiledTerms]]:
        """[(outcomes, program)]: the program returns, per outcome, its guard then `_after_terms`."""
        if operation not in self._programs:
            groups = []
            for with_frontier in (False, True):
                chosen = [o for o in self.outcomes[operation] if (o.exact is not None) == with_frontier]
                if chosen:
                    terms = [term for o in chosen for term in [self.guard(o), *_after_terms(self, o)]]
                    groups.append((chosen, CompiledTerms(terms)))
            self._programs[operation] = groups
        return self._programs[operation]

    def columns(self) -> list[str]:
        """The constant names, in the order of a row's pre-state columns then the call's."""
        names = [self.cache.capacity.decl().name(), self.cache.clock.decl().name()]
        for slot in self.cache.slots:
            names += [term.decl().name() for term in slot]
        return names + [self.parameters.nbytes.decl().name(), self.parameters.retain.decl().name()]


def _expected_result(outcome: Outcome, removed_mask: Any) -> Any:
    """The result code the spec must return when `outcome` applies."""
    if outcome.error is not None:
        return _RESULT_OF_ERROR
    head = outcome.name.split("/")[0]
    if outcome.operation == "acquire":
        return _RESULT_ACQUIRED + _ACQUIRED.index(Acquired[head])
    if head in ("True", "False"):
        return int(head == "True")
    if head == "evicted":
        return _RESULT_EVICTED + removed_mask
    if head == "value":
        return _RESULT_VALUE
    if head == "None":
        return _RESULT_NONE
    raise ValueError(f"no result for outcome {outcome.operation} -> {outcome.name}")


def _after_terms(model: _Model, outcome: Outcome) -> list[Any]:
    terms = []
    for slot in outcome.after.slots:
        terms += [slot.present, slot.ready, slot.nbytes, slot.refcount, slot.retain, slot.rank]
    counts = entry_model.cache_bytes(outcome.after)
    return terms + [counts.reserved, counts.pinned, counts.idle]


# The check ----------------------------------------------------------------------------------------


@dataclass
class _Rows:
    """Every call of one operation: the model's inputs (layout columns and call parameters) and
    what the spec did (error, encoded result, encoded snapshot, byte counters)."""

    pre: list[tuple[int, ...]] = field(default_factory=list)
    parameters: list[tuple[int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    results: list[int] = field(default_factory=list)
    after: list[tuple[int, ...]] = field(default_factory=list)
    counts: list[tuple[int, int, int]] = field(default_factory=list)
    origin: list[tuple[int, tuple[EntryView, ...], Call, Layout]] = field(default_factory=list)

    def run(self, base: Any, dict_fields: tuple[str, ...], call: Call, arguments: tuple, lay: Layout, origin: tuple) -> None:
        """Make `call` on a copy of `base` and record it."""
        cache = _fresh_copy(base, dict_fields)
        try:
            result, error = getattr(cache, call.op)(*arguments, **call.kwargs), NO_ERROR
        except Exception as raised:  # a wrong spec may raise anything; the model names classes
            result, error = None, type(raised).__name__
        snapshot = cache.snapshot()
        stats = cache.stats()
        self.pre.append(lay.pre)
        self.parameters.append(_parameters(call))
        self.errors.append(error)
        key_value = lay.values.get(lay.slot_keys[entry_model.KEY_SLOT])
        self.results.append(_RESULT_OF_ERROR if error != NO_ERROR else _encode_result(result, lay, key_value))
        self.after.append(lay.unchanged if snapshot == origin[1] else _encode_snapshot(snapshot, lay))
        self.counts.append((stats.reserved_bytes, stats.pinned_bytes, stats.idle_bytes))
        self.origin.append(origin)


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
        call = calls.to_python(self.call) if self.call is not None else "CacheSpec.from_entries(...)"
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
            "from cacheproof.spec import Acquired, CacheSpec, EntryState, EntryView",
            "from cacheproof.check.values import value_for",
        ]
        if self.semantics != CONTRACT:
            lines.append("from cacheproof.spec.semantics import Semantics")
        lines += ["", f"cache = CacheSpec.from_entries({self.capacity_bytes}, ["]
        for e in self.entries:
            view = f"EntryView({e.key!r}, EntryState.{e.state.name}, {e.refcount}, {e.nbytes}, {e.retain})"
            lines.append(f"    ({view}, {_value_python(e)}),")
        lines.append("])" if self.semantics == CONTRACT else f"], semantics={semantics_python(self.semantics)})")
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
    return f"value_for(None, {entry.nbytes}, {_tag(entry.key)})" if entry.state is READY else "None"


def _result_python(result: Any) -> str:
    if isinstance(result, Acquired):
        return f"Acquired.{result.name}"
    if isinstance(result, EntryView):  # the value of this entry
        return _value_python(result)
    return repr(result)


@dataclass(frozen=True)
class RefinementReport:
    """The verdict: states and calls checked, seconds, and the first disagreements (at most one
    per operation, and one for a state the spec cannot hold)."""

    bound: Bound
    states: int
    calls: int
    seconds: float
    disagreements: tuple[Disagreement, ...]
    disagreeing_calls: int

    @property
    def agrees(self) -> bool:
        return self.disagreeing_calls == 0

    def line(self) -> str:
        verdict = "agree" if self.agrees else f"DISAGREE on {self.disagreeing_calls} calls"
        return (
            f"spec refines model: {self.states} states, {self.calls} calls, {verdict} "
            f"({self.bound.describe()}; {self.seconds:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "agrees": self.agrees,
            "bound": self.bound._asdict(),
            "states": self.states,
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "disagreeing_calls": self.disagreeing_calls,
            "disagreements": [d.to_json() for d in self.disagreements],
        }


def check_refinement(
    bound: Bound = DEFAULT_BOUND, spec_class: type | None = None, semantics: Semantics = CONTRACT
) -> RefinementReport:
    """Run every call of the bounded domain on `spec_class` (default `CacheSpec`) built with
    `semantics` and compare with the per-entry model under the same semantics."""
    started = time.perf_counter()
    spec_class = CacheSpec if spec_class is None else spec_class
    model = _Model(bound.max_entries + 1, semantics)
    rows = {operation: _Rows() for operation in entry_model.OPERATIONS}
    arguments: dict[tuple, tuple] = {}
    states = 0
    unbuildable: list[Disagreement] = []
    for capacity, entries in bounded_states(bound):
        states += 1
        try:
            base = spec_class.from_entries(capacity, [(e, entry_value(e)) for e in entries], semantics)
        except Exception:
            unbuildable.append(Disagreement(capacity, entries, None, None, None, (), semantics))
            continue
        dict_fields = tuple(name for name, value in vars(base).items() if isinstance(value, dict))
        snapshot = base.snapshot()
        layouts: dict[Hashable | None, Layout] = {}
        for call in bounded_calls(capacity, entries, semantics):
            key = call.args[0] if call.op not in ("evict", "clear") else None
            lay = layouts.get(key) or layouts.setdefault(key, layout(capacity, entries, key, model.num_slots))
            concrete = arguments.get(call.args) or arguments.setdefault(call.args, _concrete(call.args))
            rows[call.op].run(base, dict_fields, call, concrete, lay, (capacity, snapshot, call, lay))
    disagreements: list[Disagreement] = unbuildable[:1]
    disagreeing = len(unbuildable)
    total_calls = 0
    for operation, group in rows.items():
        total_calls += len(group.errors)
        if not group.errors:
            continue
        bad = _disagreeing_rows(model, operation, group)
        disagreeing += len(bad)
        if len(bad):
            disagreements.append(_confirmed(model, operation, group, int(bad[0]), spec_class, semantics))
    return RefinementReport(bound, states, total_calls, time.perf_counter() - started, tuple(disagreements), disagreeing)


def _concrete(arguments: tuple) -> tuple:
    return tuple(value_for(None, a.nbytes, a.tag) if isinstance(a, ValueRecipe) else a for a in arguments)


def _parameters(call: Call) -> tuple[int, int]:
    if call.op in ("reserve", "acquire"):
        return call.args[1], int(call.kwargs["retain"])
    if call.op in ("commit", "put"):
        return call.args[1].nbytes, 1
    if call.op == "evict":
        return call.args[0], 1
    return 0, 1


def _disagreeing_rows(model: _Model, operation: str, group: _Rows) -> np.ndarray:
    """Indices of the rows where the model does not have exactly one outcome that gives the
    spec's error, result and post-state."""
    rows = len(group.errors)
    pre = np.array(group.pre, dtype=np.int64)
    parameters = np.array(group.parameters, dtype=np.int64)
    names = model.columns()
    values: dict[str, Any] = {name: pre[:, i] for i, name in enumerate(names[:-2])}
    for i, name in enumerate(names[2:-2]):
        if i % 6 in (0, 1, 4):  # present, ready, retain
            values[name] = values[name].astype(bool)
    values[names[-2]] = parameters[:, 0]
    values[names[-1]] = parameters[:, 1].astype(bool)
    spec_after = np.array(group.after, dtype=np.int64)
    spec_counts = np.array(group.counts, dtype=np.int64)
    spec_result = np.array(group.results, dtype=np.int64)
    spec_error = np.array(group.errors)
    applying = np.zeros(rows, dtype=np.int64)
    wrong = spec_after[:, -1] != 0  # a key outside the layout appeared
    pre_present = [values[f"present_{s}"] for s in range(model.num_slots)]
    width = 1 + 6 * model.num_slots + 3
    for outcomes, program in model.programs(operation):
        applies_somewhere = [np.zeros(rows, dtype=bool) for _ in outcomes]
        for frontier in model.frontiers if outcomes[0].exact else [None]:
            outputs = program({**values, model.frontier.decl().name(): frontier})
            for k, outcome in enumerate(outcomes):
                applies = np.broadcast_to(outputs[k * width], (rows,))
                if not applies.any():
                    continue
                applies_somewhere[k] |= applies
                after = [np.broadcast_to(term, (rows,)).astype(np.int64) for term in outputs[k * width + 1 : (k + 1) * width]]
                removed_mask = sum(
                    (pre_present[s] & (after[6 * s] == 0)).astype(np.int64) << s for s in range(model.num_slots)
                )
                agree = (spec_error == (outcome.error or NO_ERROR)) & (spec_result == _expected_result(outcome, removed_mask))
                agree &= _same_state(model.num_slots, after, spec_after, spec_counts)
                wrong |= applies & ~agree
        for mask in applies_somewhere:
            applying += mask
    return np.flatnonzero(wrong | (applying != 1))


def _same_state(num_slots: int, after: list[np.ndarray], spec_after: np.ndarray, spec_counts: np.ndarray) -> np.ndarray:
    same = np.ones(len(spec_after), dtype=bool)
    for s in range(num_slots):
        present = after[6 * s]
        same &= present == spec_after[:, 6 * s]
        for f in range(1, 5):
            same &= (present == 0) | (after[6 * s + f] == spec_after[:, 6 * s + f])
    for i in range(num_slots):
        for j in range(i + 1, num_slots):
            both = (after[6 * i] != 0) & (after[6 * j] != 0)
            model_older = after[6 * i + 5] < after[6 * j + 5]
            spec_older = spec_after[:, 6 * i + 5] < spec_after[:, 6 * j + 5]
            same &= ~both | (model_older == spec_older)
    for c in range(3):
        same &= after[6 * num_slots + c] == spec_counts[:, c]
    return same


def _confirmed(
    model: _Model, operation: str, group: _Rows, row: int, spec_class: type, semantics: Semantics
) -> Disagreement:
    """The disagreement on `row`: the spec's call made again, and the model's outcome evaluated by
    z3 itself; raises if z3's evaluation agrees with the spec (the array evaluation was wrong)."""
    capacity, entries, call, lay = group.origin[row]
    assignment = dict(zip(model.columns(), [*group.pre[row], *group.parameters[row]]))
    found = []
    for outcome in model.outcomes[operation]:
        for frontier in model.frontiers if outcome.exact else [None]:
            values = {**assignment, model.frontier.decl().name(): frontier} if frontier is not None else assignment
            if z3_value(model.guard(outcome), values):
                after = [z3_value(term, values) for term in _after_terms(model, outcome)]
                found.append(_expected(outcome, after, lay, model.num_slots))
    observed = spec_outcome(spec_class, capacity, entries, call, semantics)
    names = tuple(dict.fromkeys(expected[0] for expected in found))
    if len(names) == 1 and all(expected[1:] == observed for expected in found):
        raise RuntimeError(f"the array evaluation and z3 disagree on {call} from {entries}")
    return Disagreement(capacity, entries, call, observed, found[0] if len(names) == 1 else None, names, semantics)


def spec_outcome(
    spec_class: type, capacity: int, entries: tuple[EntryView, ...], call: Call, semantics: Semantics = CONTRACT
) -> tuple:
    """(error class or None, result, snapshot, byte counters) of `call` on a fresh spec state."""
    cache = spec_class.from_entries(capacity, [(e, entry_value(e)) for e in entries], semantics)
    try:
        result, error = calls.invoke(cache, call), None
    except Exception as raised:
        result, error = None, type(raised).__name__
    stats = cache.stats()
    return error, result, cache.snapshot(), (stats.reserved_bytes, stats.pinned_bytes, stats.idle_bytes)


def _expected(outcome: Outcome, after: list[int], lay: Layout, num_slots: int) -> tuple:
    """(outcome name, error, result, snapshot, byte counters) the model gives, as Python values."""
    ranked = []
    for s, key in enumerate(lay.slot_keys):
        present, ready, nbytes, refcount, retain, rank = after[6 * s : 6 * s + 6]
        if present:
            state = READY if ready else RESERVED
            ranked.append((rank, EntryView(key, state, refcount, nbytes, bool(retain))))
    snapshot = tuple(view for _, view in sorted(ranked, key=lambda pair: pair[0]))
    counts = tuple(after[6 * num_slots :])
    if outcome.error is not None:
        return outcome.name, outcome.error.split("/")[0], None, snapshot, counts
    head = outcome.name.split("/")[0]
    kept = {view.key for view in snapshot}
    pre_ranks = {key: lay.pre[_PRE_SLOTS + 6 * s + 5] for s, key in enumerate(lay.slot_keys) if lay.pre[_PRE_SLOTS + 6 * s]}
    if outcome.operation == "acquire":
        result: Any = Acquired[head]
    elif head in ("True", "False"):
        result = head == "True"
    elif head == "evicted":
        result = sorted((key for key in pre_ranks if key not in kept), key=pre_ranks.__getitem__)
    elif head == "value":
        result = lay.values[lay.slot_keys[entry_model.KEY_SLOT]]
    else:
        result = None
    return outcome.name, None, result, snapshot, counts
