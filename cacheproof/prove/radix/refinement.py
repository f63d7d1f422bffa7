"""The radix cache's bounded refinement check: the executable spec (`RadixCacheSpec`, as written)
does what the z3 model (model.py) says, on every small reachable state and tree-level call.

From an empty spec of 1..`max_slots` KV slots, every call of the bound (match_prefix, insert and
lock of every token sequence over the vocabulary up to `max_tokens` long in each of the bound's
namespaces (semantics namespaces "keyed"; else the default one), unlock of every node the spec's
`unlockable()` names, evict of 0..evictable tokens, reset) is run on a copy of each reached state,
breadth first, until `max_states` states per number of slots (states that differ only in access
times count once: the model has no clock). Each call that does not raise is read back as a model
step (the model has no namespaces: the first node of every namespace hangs below its one root, which
changes no rule it checks): the node places before and after (`RadixCacheSpec.structure()`: a node
keeps its place while it lives; a new node takes a place left dead), the free slots and the spec's
sizes. The call agrees when z3 finds a run of the call's micro-steps (`CALL_STEPS`: at most two, an
evict's one per node it removes) from the state before to the state after; a call that raises a
CacheError must change nothing (R8), and one that crashes disagrees. A disagreement prints as the
calls that reach it.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Any, NamedTuple

import z3

from cacheproof.prove.radix import model
from cacheproof.prove.refinement_verdict import RefinementReport
from cacheproof.spec.errors import CacheError
from cacheproof.spec.radix.semantics import RADIX_CONTRACT, RadixSemantics
from cacheproof.spec.radix.tree import RadixCacheSpec


class Bound(NamedTuple):
    """States of specs of 1..max_slots KV slots, token sequences over `vocabulary` of up to
    `max_tokens` tokens in each of `namespaces`, at most `max_states` states per number of slots."""

    max_slots: int = 3
    vocabulary: tuple[int, ...] = (0, 1)
    max_tokens: int = 2
    max_states: int = 25
    namespaces: tuple[str | None, ...] = (None, "a")

    def describe(self) -> str:
        return (f"num_slots 1..{self.max_slots}, tokens over {list(self.vocabulary)} up to {self.max_tokens} long "
                f"in namespaces {list(self.namespaces)}, {self.max_states} states per size at most")


DEFAULT_BOUND = Bound()


class Disagreement(NamedTuple):
    """A call of the spec that no run of the model's micro-steps explains."""

    num_slots: int
    calls: tuple[tuple[str, tuple, dict], ...]

    def describe(self) -> str:
        op, args, kwargs = self.calls[-1]
        return f"{op}{args}{kwargs or ''} on a spec of {self.num_slots} slots after {len(self.calls) - 1} calls"

    def python(self) -> str:
        lines = ["from cacheproof.spec.radix.tree import RadixCacheSpec", f"spec = RadixCacheSpec({self.num_slots})"]
        lines += [f"spec.{op}(*{args!r}, **{kwargs!r})" for op, args, kwargs in self.calls]
        return "\n".join(lines) + "  # <- no run of the model's steps does this\n"

    def to_json(self) -> dict[str, Any]:
        return {"num_slots": self.num_slots, "calls": [[op, list(args), kwargs] for op, args, kwargs in self.calls],
                "python": self.python()}


def _sequences(bound: Bound) -> list[tuple[int, ...]]:
    return [tuple(seq) for n in range(1, bound.max_tokens + 1) for seq in itertools.product(bound.vocabulary, repeat=n)]


def _in(namespace: str | None) -> dict:
    return {} if namespace is None else {"namespace": namespace}


def _calls(spec: RadixCacheSpec, bound: Bound) -> list[tuple[str, tuple, dict]]:
    sequences = _sequences(bound)
    spaces = bound.namespaces if spec.semantics.namespaces == "keyed" else (None,)
    found = [(op, (seq,), _in(space)) for op in ("match_prefix", "insert", "lock") for space in spaces
             for seq in sequences]
    found += [("unlock", (path,), _in(space)) for path, space in spec.unlockable()]
    found += [("evict", (n,), {}) for n in range(spec.evictable_size() + 1)]
    return found + [("reset", (), {})]


class _Places:
    """Node identities -> model places, kept across a call."""

    def __init__(self, structure: tuple) -> None:
        self.of = {identity: place for place, (identity, _, _, _) in enumerate(structure)}

    def concrete(self, state: model.State, structure: tuple, free: int, sizes: tuple[int, int]) -> list:
        """The facts that pin `state` to the spec's: every place, alive or not, and the counts."""
        for identity, _, _, _ in structure:
            if identity not in self.of:
                self.of[identity] = min(set(range(state.n)) - set(self.of.values()))
        facts = [state.free == free, state.evictable == sizes[0], state.protected == sizes[1]]
        live = {}
        for identity, parent, length, lock in structure:
            place = self.of[identity]
            live[place] = True
            facts += [state.alive[place], state.parent[place] == (model.ROOT if parent is None else self.of[parent]),
                      state.length[place] == length, state.lock[place] == lock]
        facts += [z3.Not(state.alive[place]) for place in range(state.n) if place not in live]
        return facts


CALL_STEPS = {
    "match_prefix": ("split",), "insert": ("split", "leaf"), "lock": ("split", "lock"), "unlock": ("unlock",),
    "evict": ("evict",), "reset": ("reset",),
}
"""The micro-steps each call is made of (model.py's docstring): a run of at most two of them, an
evict's one per node it removes."""


def _explained(op: str, before: tuple, after: tuple, places: int) -> bool:
    """Whether a run of the call's micro-steps leads from `before` to `after`."""
    (s_structure, s_free, s_sizes), (t_structure, t_free, t_sizes) = before, after
    mapping = _Places(s_structure)
    length = max(1, len(s_structure) - len(t_structure)) if op in ("evict", "reset") else 2
    chain = [model.fresh(f"r{i}", places) for i in range(length + 1)]
    solver = z3.Solver()
    solver.add(*mapping.concrete(chain[0], s_structure, s_free, s_sizes))
    solver.add(*mapping.concrete(chain[-1], t_structure, t_free, t_sizes))
    for i in range(length):
        s, t = chain[i], chain[i + 1]
        stay = z3.And(*[z3.And(t.alive[j] == s.alive[j], t.parent[j] == s.parent[j], t.length[j] == s.length[j],
                               t.lock[j] == s.lock[j]) for j in range(places)],
                      t.free == s.free, t.evictable == s.evictable, t.protected == s.protected)
        steps = [model.STEPS[name](s, t, model.params(f"r{i}_{name}")) for name in CALL_STEPS[op]]
        solver.add(z3.Or(stay, *steps))
    return solver.check() == z3.sat


def _signature(before: tuple, after: tuple) -> tuple:
    """The call's views with node identities replaced by their order of appearance."""
    names: dict[int, int] = {}
    name = lambda identity: None if identity is None else names.setdefault(identity, len(names))  # noqa: E731
    return tuple((tuple((name(i), name(p), n, lock) for i, p, n, lock in structure), free, sizes)
                 for structure, free, sizes in (before, after))


def _view(spec: RadixCacheSpec) -> tuple:
    return spec.structure(), spec.snapshot()[0], (spec.evictable_size(), spec.protected_size())


def _shape(spec: RadixCacheSpec) -> tuple:
    """The spec's state as the model sees it: the snapshot without access ranks (the model has no
    clock: it lets any unlocked leaf go), so that states differing only in time are searched once."""
    free, sizes, nodes, requests = spec.snapshot()
    return free, sizes, tuple(node[:5] + node[6:] for node in nodes), requests


def check_refinement(bound: Bound = DEFAULT_BOUND, semantics: RadixSemantics = RADIX_CONTRACT) -> RefinementReport:
    """Run the spec on every reachable state and call of `bound` and explain each call by the model."""
    started = time.perf_counter()
    states = calls = disagreeing = 0
    disagreements: list[Disagreement] = []
    explained: dict[tuple, bool] = {}
    for num_slots in range(1, bound.max_slots + 1):
        fresh = RadixCacheSpec(num_slots, semantics)
        seen, queue = {_shape(fresh)}, deque([(fresh, ())])
        reached = 0
        while queue and reached < bound.max_states:
            reached += 1
            spec, history = queue.popleft()
            states += 1
            for op, args, kwargs in _calls(spec, bound):
                twin = spec.copy()
                before = _view(twin)
                calls += 1
                try:
                    getattr(twin, op)(*args, **kwargs)
                except CacheError:
                    raised_cleanly = twin.state_key() == spec.state_key()
                except Exception:  # noqa: BLE001 - a spec that crashes does nothing the model says
                    raised_cleanly = False
                else:
                    raised_cleanly = None
                if raised_cleanly is not None:
                    if not raised_cleanly:
                        disagreeing += 1
                        if len(disagreements) < 3:
                            disagreements.append(Disagreement(num_slots, history + ((op, args, kwargs),)))
                    continue
                after = _view(twin)
                signature = (op, _signature(before, after))
                if signature not in explained:
                    known = {node[0] for node in before[0]}
                    made = sum(1 for node in after[0] if node[0] not in known)
                    explained[signature] = _explained(op, before, after, max(2, len(before[0]) + made))
                if not explained[signature]:
                    disagreeing += 1
                    if len(disagreements) < 3:
                        disagreements.append(Disagreement(num_slots, history + ((op, args, kwargs),)))
                key = _shape(twin)
                if key not in seen:
                    seen.add(key)
                    queue.append((twin, history + ((op, args, kwargs),)))
    return RefinementReport(bound, states, calls, time.perf_counter() - started, tuple(disagreements), disagreeing)
