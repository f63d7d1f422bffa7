"""`run_exhaustive`: every call of a kind's exhaustive scope tried from every state, breadth first.

The search starts from a fresh model and implementation of each size of the scope (the kind's
generator names them: `CallGenerator.exhaustive_sizes`) and expands the states level by level: from
each state of depth d, every call the generator enables in the model's state
(`CallGenerator.enabled_calls`) is run on a copy of the model and on the implementation in that
state, and compared as a program's call is (`contract.steps.differential_step`, then the model's
invariants). A call that diverges ends the search: no state of a smaller depth diverged, so its path
is a shortest counterexample (the first in the scope's order among the shortest). Every other call
leads to a state of depth d + 1, kept unless a state with the same merge key was seen before.

The merge key of a state is its size, the model's state key (`Model.state_key`: equal keys, equal
futures; read from a twin of the model stepped alike, whose stored values are plain bytes made from
the calls' value recipes, as the implementation's values need not be hashable) and the
implementation's snapshot: the kind's views read from it as the checker compares
them (`SpecKind.read_view`). Merging is sound for an implementation whose behaviour is a function of
that snapshot: two paths to one key then have one future, and expanding it once tries them both.
An implementation with state its views do not show (a recency clock, a counter that wraps, an
allocator's order) may behave differently after two paths to one key, and a divergence reachable by
the path merged away is missed. An implementation lacking one of the kind's views (an optional view
it does not offer) has less of a snapshot still: the report says so (`ExhaustiveReport.snapshot_trusted`
False), and the command prints the caveat.

The implementation in a state is rebuilt by replaying the state's path on a fresh instance; one
that offers a copy of itself (a `copy()` answering an object of its own class) is copied instead,
and under a trusted snapshot a call that leaves the merge key unchanged leaves the implementation
in place for the next call (the same assumption as merging). With `workers` > 1 each level's
frontier is split into contiguous shares (`CHUNKS_PER_WORKER` per worker process), which the
workers rebuild by replay; the parent merges their children in frontier order, so the search, its counts and its
counterexample are the same as in one process.

A time budget ends the search between states: the report is then cut by the budget, with the depth
of the last level expanded whole (`frontier_depth`).
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

from cacheproof.check.programs.generators import CallGenerator, generator_for
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.contract.calls import Call
from cacheproof.contract.steps import differential_step, outcome_of
from cacheproof.sandbox.factories import load_factory
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind

CHUNKS_PER_WORKER = 4
"""Each level's frontier is cut into this many shares per worker, so that an uneven share does not
leave the other workers idle for long."""


@dataclass(frozen=True)
class ExhaustiveSetup:
    """What one search needs: the kind, the model under `semantics` (None: the kind's contract), the
    implementation's `factory`, the kind's `generator` and its exhaustive `scope`, the `operations`
    calls are made of, whether misuse calls are made, and at most `depth` calls per path."""

    kind: SpecKind
    factory: Callable[[int], Any]
    generator: CallGenerator
    scope: Any
    operations: tuple[str, ...]
    misuse: bool
    depth: int
    semantics: Any = None

    def new_model(self, size: int) -> Any:
        return self.kind.new(size) if self.semantics is None else self.kind.new(size, self.semantics)


@dataclass
class ExhaustiveReport:
    """What a search did: the distinct `states` reached (the fresh ones included), the `calls` tried,
    the `depth` asked, whether it is `complete` (every state within the depth expanded, or a
    counterexample found) or was cut by the budget, the depth of the last level expanded whole
    (`frontier_depth`), the `counterexample` (None: no divergence), and whether the implementation
    lacked some of the kind's views, which the merge key then does not read (`unread_views`; none:
    `snapshot_trusted`); the `sizes` it started from and the states first reached at each depth
    (`levels`)."""

    kind: str
    scope: str
    depth: int
    states: int = 0
    calls: int = 0
    complete: bool = False
    frontier_depth: int = 0
    seconds: float = 0.0
    counterexample: ProgramCounterexample | None = None
    unread_views: tuple[str, ...] = ()
    workers: int = 1
    sizes: tuple[int, ...] = ()
    levels: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.counterexample is None

    @property
    def snapshot_trusted(self) -> bool:
        """Whether the merge key read every view of the kind from the implementation."""
        return not self.unread_views

    @property
    def verdict(self) -> str:
        """The result line: no divergence within the states searched (and whether the search was
        whole), or the counterexample's length."""
        if self.counterexample is not None:
            length = len(self.counterexample.calls)
            return (f"exhaustive: shortest counterexample, {length} call{'s' * (length != 1)} (after {self.states} "
                    f"states, {self.calls} calls)")
        if self.complete:
            return f"exhaustive: no divergence in {self.states} states, {self.calls} calls, depth {self.depth}"
        return (f"exhaustive: no divergence in {self.states} states, {self.calls} calls; cut by the budget at depth "
                f"{self.frontier_depth} of {self.depth}")

    def to_json(self) -> dict[str, Any]:
        """The report's `exhaustive` field (report-v1.json)."""
        return {
            "scope": self.scope, "depth": self.depth, "states": self.states, "calls": self.calls,
            "complete": self.complete, "frontier_depth": self.frontier_depth, "states_per_depth": list(self.levels),
            "merge": "spec state and implementation snapshot" if self.snapshot_trusted else "spec state and partial implementation snapshot",
            "snapshot_trusted": self.snapshot_trusted,
        }


SNAPSHOT_CAVEAT = ("the implementation's snapshot cannot be trusted, it offers no {missing}: states were merged on "
                   "the spec's state and what the implementation shows, so a divergence that depends on state it "
                   "does not show may be missed (docs/exhaustive.md, Soundness)")
"""The line a search whose implementation lacks one of the kind's views prints (with the views it lacks)."""


@dataclass(frozen=True)
class _State:
    """One state of the search: the size, the path to it, its merge key, the model in it (None in a
    worker's share: rebuilt there) and, for an implementation that offers a copy, the implementation."""

    size: int
    path: tuple[Call, ...]
    key: Hashable
    model: Any = None
    twin: Any = None
    implementation: Any = None


@dataclass(frozen=True)
class _Expansion:
    """What expanding one state gave: its children (size, path, key), the calls tried, and the
    divergence of its first diverging call (None: none did)."""

    children: list[_State]
    calls: int
    counterexample: ProgramCounterexample | None


def missing_views(kind: SpecKind, implementation: Any) -> tuple[str, ...]:
    """The kind's views `implementation` does not offer (an optional view's method it lacks): the
    merge key then reads less than the kind's snapshot."""
    return tuple(view for view in kind.views
                 if not callable(getattr(implementation, (kind.view_readers.get(view) and kind.view_readers[view].method)
                                         or view, None)))


def implementation_snapshot(kind: SpecKind, implementation: Any, model: Any, views: tuple[str, ...]) -> str:
    """The implementation's `views`, read as the checker compares them, written as one string (an
    implementation's answers need not be hashable; equal answers write alike)."""
    return repr(tuple(kind.read_view(implementation, view, model) for view in views))


def run_exhaustive(setup: ExhaustiveSetup, budget_seconds: float | None = None, workers: int = 1,
                   impl: str | None = None, on_level: Callable[[int, int], None] | None = None) -> ExhaustiveReport:
    """The breadth-first search of the module docstring; `workers` > 1 needs `impl` ("module:factory"),
    which each worker loads. `on_level(states, calls)` is told the counts after each state expanded."""
    started = time.monotonic()
    deadline = None if budget_seconds is None else started + budget_seconds
    sizes = setup.generator.exhaustive_sizes(setup.scope)
    report = ExhaustiveReport(setup.kind.name, setup.scope.name, setup.depth, workers=workers, sizes=sizes)
    probe = setup.factory(sizes[0])
    report.unread_views = missing_views(setup.kind, probe)
    views = tuple(view for view in setup.kind.views if view not in report.unread_views)
    copies = _offers_copy(probe)
    frontier = []
    seen: set = set()
    for size in sizes:
        model, twin, implementation = setup.new_model(size), setup.new_model(size), setup.factory(size)
        key = _merge_key(setup, size, model, twin, implementation, views)
        if key not in seen:
            seen.add(key)
            frontier.append(_State(size, (), key, model, twin, implementation if copies else None))
    report.states = len(seen)
    report.levels.append(len(frontier))
    pool = _Pool(setup, impl, views, workers) if workers > 1 else None
    try:
        for depth in range(setup.depth):
            if not frontier:
                break
            expansions = pool.expand(frontier, deadline) if pool is not None else \
                _expand_all(setup, frontier, views, copies, deadline)
            following: list[_State] = []
            for expansion in expansions:
                report.calls += expansion.calls
                if expansion.counterexample is not None:
                    report.counterexample = expansion.counterexample
                    break
                for child in expansion.children:
                    if child.key not in seen:
                        seen.add(child.key)
                        following.append(child)
                report.states = len(seen)
                if on_level is not None:
                    on_level(report.states, report.calls)
            if report.counterexample is not None:
                report.complete = True
                break
            if len(expansions) < len(frontier):  # the budget ran out inside this level
                break
            report.frontier_depth = depth + 1
            report.levels.append(len(following))
            frontier = following
        else:
            report.complete = True
        if not frontier and report.counterexample is None:
            report.complete = True
    finally:
        if pool is not None:
            pool.close()
    report.seconds = time.monotonic() - started
    return report


def _offers_copy(implementation: Any) -> bool:
    """Whether `implementation` offers a copy of itself: a `copy()` answering an object of its own
    class (a subclass of a spec whose copy answers the spec's class does not)."""
    copy = getattr(implementation, "copy", None)
    if not callable(copy):
        return False
    try:
        return type(copy()) is type(implementation)
    except Exception:  # noqa: BLE001 - a copy() that takes arguments, or fails, is not one
        return False


def _merge_key(setup: ExhaustiveSetup, size: int, model: Any, twin: Any, implementation: Any,
               views: tuple[str, ...]) -> Hashable:
    """The state's size, the twin's state key and the implementation's snapshot (see the module)."""
    return size, twin.state_key(), implementation_snapshot(setup.kind, implementation, model, views)


class _KeyValues:
    """The value maker of the twin model: a recipe's value as plain bytes of its size (hashable, and
    equal for equal recipes, since a drawn recipe's element size follows from its size and tag)."""

    def make_value(self, nbytes: int, tag: int, element_size: int | None = None) -> bytes:
        return bytes([tag % 256]) * nbytes


_KEY_VALUES = _KeyValues()


def _expand_all(setup: ExhaustiveSetup, frontier: list[_State], views: tuple[str, ...], copies: bool,
                deadline: float | None) -> list[_Expansion]:
    """Each state of `frontier` expanded in order, until the first divergence or the deadline."""
    done = []
    for state in frontier:
        if deadline is not None and time.monotonic() >= deadline:
            break
        done.append(_expand(setup, state, views, copies, keep=True))
        if done[-1].counterexample is not None:
            break
    return done


def _expand(setup: ExhaustiveSetup, state: _State, views: tuple[str, ...], copies: bool, keep: bool) -> _Expansion:
    """Every call enabled in `state` tried from it (see the module); `keep`: the children carry their
    models (and implementation, when it copies) for the next level."""
    kind, names = setup.kind, setup.kind.error_names
    implementation = None
    if state.model is None:  # a worker's state: its path replayed on all three
        model, twin, implementation = _replayed(setup, state)
    else:
        model, twin = state.model, state.twin
    trusted = len(views) == len(kind.views)
    children = []
    calls = 0
    for call in setup.generator.enabled_calls(setup.scope, model, setup.operations, setup.misuse):
        if implementation is None:
            implementation = _implementation_in(setup, state, copies)
        after, twin_after = model.copy(), twin.copy()
        calls += 1
        difference = differential_step(after, implementation, call, views + kind.lookups + kind.announcements,
                                       error_names=names, readers=kind.view_readers)
        if difference is not None:
            return _Expansion(children, calls, ProgramCounterexample(state.size, state.path + (call,), difference))
        after.check_invariants()
        outcome_of(twin_after, call, names, values_from=_KEY_VALUES)
        key = _merge_key(setup, state.size, after, twin_after, implementation, views)
        unchanged = trusted and key == state.key
        children.append(_State(state.size, state.path + (call,), key, after if keep else None,
                               twin_after if keep else None,
                               implementation if copies and keep and not unchanged else None))
        if not unchanged:
            implementation = None
    return _Expansion(children, calls, None)


def _replayed(setup: ExhaustiveSetup, state: _State) -> tuple[Any, Any, Any]:
    """The model, its twin and the implementation in `state`: its path replayed on fresh ones, the
    model given the implementation's values (as the differential step gives them)."""
    model, twin, implementation = setup.new_model(state.size), setup.new_model(state.size), setup.factory(state.size)
    names = setup.kind.error_names
    for call in state.path:
        outcome_of(model, call, names, values_from=implementation)
        outcome_of(twin, call, names, values_from=_KEY_VALUES)
        outcome_of(implementation, call, names)
    return model, twin, implementation


def _implementation_in(setup: ExhaustiveSetup, state: _State, copies: bool) -> Any:
    """The implementation in `state`: a copy of the state's own where it offers one, else a fresh
    instance with the state's path replayed on it (its answers were compared when the path was first
    run, and are not again)."""
    if copies and state.implementation is not None:
        return state.implementation.copy()
    implementation, names = setup.factory(state.size), setup.kind.error_names
    for call in state.path:
        outcome_of(implementation, call, names)
    return implementation


class _Pool:
    """The worker processes of a search over `workers` (see the module): each loads the kind, the
    generator and the implementation once, then expands the shares it is sent."""

    def __init__(self, setup: ExhaustiveSetup, impl: str | None, views: tuple[str, ...], workers: int) -> None:
        if impl is None:
            raise ValueError("an exhaustive search over several workers needs the implementation as MODULE:FACTORY")
        self._workers = workers
        arguments = (setup.kind.name, setup.scope, setup.semantics, setup.operations, setup.misuse, setup.depth, impl,
                     views)
        self._executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_start_worker, initargs=arguments)

    def expand(self, frontier: list[_State], deadline: float | None) -> list[_Expansion]:
        """`frontier` expanded in shares, the expansions in frontier order, up to the first divergence;
        a share cut by the deadline ends the list there (it is then shorter than the frontier)."""
        plain = [_State(state.size, state.path, state.key) for state in frontier]
        size = max(1, -(-len(plain) // (self._workers * CHUNKS_PER_WORKER)))
        shares = [plain[at:at + size] for at in range(0, len(plain), size)]
        futures = [self._executor.submit(_expand_share, share, deadline) for share in shares]
        done: list[_Expansion] = []
        for share, future in zip(shares, futures):
            expansions = future.result()
            done.extend(expansions)
            if expansions and expansions[-1].counterexample is not None or len(expansions) < len(share):
                break
        for future in futures:
            future.cancel()
        return done

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


_WORKER: dict[str, Any] = {}
"""A worker process's setup, built once by `_start_worker`."""


def _start_worker(kind: str, scope: Any, semantics: Any, operations: tuple[str, ...], misuse: bool, depth: int,
                  impl: str, views: tuple[str, ...]) -> None:
    spec_kind = get_kind(kind)
    _WORKER["setup"] = ExhaustiveSetup(spec_kind, load_factory(impl), generator_for(kind), scope, operations, misuse,
                                       depth, semantics)
    _WORKER["views"] = views


def _expand_share(share: list[_State], deadline: float | None) -> list[_Expansion]:
    """A worker's share of a level, expanded in order until the first divergence or the deadline."""
    setup, views = _WORKER["setup"], _WORKER["views"]
    done = []
    for state in share:
        if deadline is not None and time.monotonic() >= deadline:
            break
        done.append(_expand(setup, state, views, copies=False, keep=False))
        if done[-1].counterexample is not None:
            break
    return done
