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

The bounded domain is stated in refinement_domain.py, the integer encoding of states, results and
snapshots in refinement_encoding.py, the verdict and the rendering of a disagreement in
refinement_report.py; this module runs the spec and evaluates the model on every call.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import threading
import time
from typing import Any, Hashable, NamedTuple

import numpy as np
import z3

from cacheproof.cmdline.interrupts import WATCH_THREAD_NAME
from cacheproof.sandbox.worker_threads import is_idle_worker
from cacheproof.contract import calls
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.values import value_for
from cacheproof.prove.cache import entry_model
from cacheproof.prove.cache.array_eval import CompiledTerms, z3_value
from cacheproof.prove.cache.refinement_domain import (
    DEFAULT_BOUND,
    READY,
    RESERVED,
    Bound,
    bounded_calls,
    bounded_states,
    entry_value,
)
from cacheproof.prove.cache.refinement_encoding import (
    NO_ERROR,
    PRE_SLOTS,
    RESULT_OF_ERROR,
    Layout,
    encode_result,
    encode_snapshot,
    expected_result,
    fresh_copy,
    layout,
)
from cacheproof.prove.cache.refinement_report import Disagreement
from cacheproof.prove.refinement_verdict import RefinementReport
from cacheproof.prove.induction import BranchOutcome
from cacheproof.spec import CacheSpec
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import Acquired, EntryView


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
        self._programs: dict[str, list[tuple[list[BranchOutcome], CompiledTerms]]] = {}

    def guard(self, outcome: BranchOutcome) -> Any:
        return z3.And(outcome.guard, outcome.exact()) if outcome.exact else outcome.guard

    def programs(self, operation: str) -> list[tuple[list[BranchOutcome], CompiledTerms]]:
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



def _after_terms(model: _Model, outcome: BranchOutcome) -> list[Any]:
    terms = []
    for slot in outcome.after.slots:
        terms += [slot.present, slot.ready, slot.nbytes, slot.refcount, slot.retain, slot.rank]
    counts = entry_model.cache_bytes(outcome.after)
    return terms + [counts.reserved, counts.pinned, counts.idle]


# The check ----------------------------------------------------------------------------------------


class _Rows:
    """Every call of one operation: the model's inputs (the layout's columns and the call's
    parameters) and what the spec did (error, encoded result, encoded snapshot, byte counters).

    A row holds its layout's index (`layouts`) and its snapshot's code (`snapshots`): tens of
    thousands of rows share a few thousand layouts and snapshots, which become arrays once."""

    def __init__(self) -> None:
        self.layouts: list[Layout] = []
        self._layout_index: dict[int, int] = {}  # id(layout) -> its index; the layouts stay alive in `layouts`
        self.snapshots: dict[tuple[int, ...], int] = {}
        self.errors: dict[str, int] = {}  # error class name (or NO_ERROR) -> its code in the records
        self.records: list[tuple[int, ...]] = []
        self.origin: list[tuple[int, tuple[EntryView, ...], Call, Layout]] = []

    def layout_index(self, lay: Layout) -> int:
        index = self._layout_index.get(id(lay))
        if index is None:
            index = self._layout_index[id(lay)] = len(self.layouts)
            self.layouts.append(lay)
        return index

    def run(self, base: Any, dict_fields: tuple[str, ...], call: _PreparedCall, lay: Layout, origin: tuple) -> None:
        """Make `call` on a copy of `base` and record it."""
        cache = fresh_copy(base, dict_fields)
        try:
            result, error = getattr(cache, call.operation)(*call.arguments, **call.call.kwargs), NO_ERROR
        except Exception as raised:  # a wrong spec may raise anything; the model names classes
            result, error = None, type(raised).__name__
        snapshot = cache.snapshot()
        stats = cache.stats()
        index = self.layout_index(lay)
        if error != NO_ERROR:
            code = RESULT_OF_ERROR
        else:
            code = encode_result(result, lay, lay.values.get(lay.slot_keys[entry_model.KEY_SLOT]))
        after = lay.unchanged if snapshot == origin[1] else encode_snapshot(snapshot, lay)
        after_code = self.snapshots.setdefault(after, len(self.snapshots))
        nbytes, retain = call.parameters
        error_code = self.errors.setdefault(error, len(self.errors))
        self.records.append(
            (index, nbytes, retain, error_code, code, after_code, stats.reserved_bytes, stats.pinned_bytes, stats.idle_bytes)
        )
        self.origin.append(origin)

    def __len__(self) -> int:
        return len(self.records)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pre-states, parameters, error codes, result codes, encoded snapshots, byte counters),
        one row per call."""
        table = np.array(self.records, dtype=np.int64)
        pre = np.array([lay.pre for lay in self.layouts], dtype=np.int64)[table[:, 0]]
        snapshots = np.array(list(self.snapshots), dtype=np.int64)[table[:, 5]]
        return pre, table[:, 1:3], table[:, 3], table[:, 4], snapshots, table[:, 6:9]

    def error_code(self, error: str | None) -> int:
        """The code of an error class name (None: no error) in the records; -1 if no call raised it."""
        return self.errors.get(error or NO_ERROR, -1)

    def row(self, i: int) -> tuple[tuple[int, ...], tuple[int, int]]:
        """Row i's pre-state columns and call parameters."""
        record = self.records[i]
        return self.layouts[record[0]].pre, (record[1], record[2])


class _PreparedCall(NamedTuple):
    """A call of the bounded domain with what each run of it needs, made once per capacity and
    keys (states of the same capacity and keys make the same calls)."""

    call: Call
    operation: str
    arguments: tuple  # the concrete arguments: values made from their recipes
    parameters: tuple[int, int]  # the model's nbytes and retain
    key: Hashable | None  # the key the call names (None: evict, clear)


def _prepared_calls(capacity: int, entries: tuple[EntryView, ...], semantics: Semantics) -> list[_PreparedCall]:
    return [
        _PreparedCall(
            call, call.op, _concrete(call.args), _parameters(call), call.args[0] if call.op not in ("evict", "clear") else None
        )
        for call in bounded_calls(capacity, entries, semantics)
    ]


def check_refinement(
    bound: Bound = DEFAULT_BOUND, spec_class: type | None = None, semantics: Semantics = CONTRACT
) -> RefinementReport:
    """Run every call of the bounded domain on `spec_class` (default `CacheSpec`) built with
    `semantics` and compare with the per-entry model under the same semantics."""
    started = time.perf_counter()
    spec_class = CacheSpec if spec_class is None else spec_class
    model = _Model(bound.max_entries + 1, semantics)
    rows = {operation: _Rows() for operation in entry_model.OPERATIONS}
    prepared: dict[tuple, list[_PreparedCall]] = {}
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
        shape = (capacity, tuple(e.key for e in entries))
        calls = prepared.get(shape) or prepared.setdefault(shape, _prepared_calls(capacity, entries, semantics))
        for call in calls:
            lay = layouts.get(call.key) or layouts.setdefault(call.key, layout(capacity, entries, call.key, model.num_slots))
            rows[call.operation].run(base, dict_fields, call, lay, (capacity, snapshot, call.call, lay))
    disagreements: list[Disagreement] = unbuildable[:1]
    disagreeing = len(unbuildable)
    total_calls = 0
    for operation, group in rows.items():
        total_calls += len(group)
        if not len(group):
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
    rows = len(group)
    pre, parameters, spec_error, spec_result, spec_after, spec_counts = group.arrays()
    names = model.columns()
    values: dict[str, Any] = {name: pre[:, i] for i, name in enumerate(names[:-2])}
    for i, name in enumerate(names[2:-2]):
        if i % 6 in (0, 1, 4):  # present, ready, retain
            values[name] = values[name].astype(bool)
    values[names[-2]] = parameters[:, 0]
    values[names[-1]] = parameters[:, 1].astype(bool)
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
                agree = (spec_error == group.error_code(outcome.error)) & (spec_result == expected_result(outcome, removed_mask))
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
    pre, parameters = group.row(row)
    assignment = dict(zip(model.columns(), [*pre, *parameters]))
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


def _expected(outcome: BranchOutcome, after: list[int], lay: Layout, num_slots: int) -> tuple:
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
    pre_ranks = {key: lay.pre[PRE_SLOTS + 6 * s + 5] for s, key in enumerate(lay.slot_keys) if lay.pre[PRE_SLOTS + 6 * s]}
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


# Beside the proofs ----------------------------------------------------------------------------


class PendingRefinement:
    """`check_refinement` started while the caller proves: the check is plain Python and numpy,
    the proofs mostly z3, so on two CPUs it runs in a forked child process beside them (`prove`
    takes the time of the longer of the two, not of both). Where that cannot be (one CPU, no
    fork, threads running in this process) it runs in this process when its report is asked for.
    A report the child cannot send back (a result of a wrong spec that does not pickle) is
    computed again here. `report()` waits for it; `cancel()` ends the child."""

    def __init__(self, bound: Bound, semantics: Semantics) -> None:
        self._bound, self._semantics = bound, semantics
        self._child: Any = None
        if not _may_fork():
            return
        context = multiprocessing.get_context("fork")
        self._receiver, sender = context.Pipe(duplex=False)
        self._child = context.Process(target=_refine_into, args=(sender, bound, semantics), daemon=True)
        self._child.start()
        sender.close()

    def report(self) -> RefinementReport:
        if self._child is None:
            return check_refinement(self._bound, semantics=self._semantics)
        try:
            sent = self._receiver.recv_bytes()
        except EOFError:  # the child died without a word: the check is made here
            sent = None
        finally:
            self.cancel()
        report = pickle.loads(sent) if sent else None
        return report if isinstance(report, RefinementReport) else check_refinement(self._bound, semantics=self._semantics)

    def cancel(self) -> None:
        if self._child is not None:
            if self._child.is_alive():
                self._child.terminate()
            self._child.join()
            self._receiver.close()
            self._child = None


def _may_fork() -> bool:
    """Fork only with more than one CPU and no thread beside the main one but the Ctrl-C watch and the
    checker's idle workers, which hold no lock while they wait (`cacheproof.cmdline.interrupts`,
    `cacheproof.sandbox.worker_threads`)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    alone = all(thread is threading.main_thread() or thread.name == WATCH_THREAD_NAME or is_idle_worker(thread)
                for thread in threading.enumerate())
    return cpus > 1 and "fork" in multiprocessing.get_all_start_methods() and alone


def _refine_into(sender: Any, bound: Bound, semantics: Semantics) -> None:
    """In the child: the report, pickled, or nothing (an empty message) if it cannot be sent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this child
    try:
        sent = pickle.dumps(check_refinement(bound, semantics=semantics))
    except Exception:  # an error or an unpicklable report: the parent checks again, in its own process
        sent = b""
    sender.send_bytes(sent)
    sender.close()
