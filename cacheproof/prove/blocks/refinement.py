"""Bounded refinement: on every small reachable state and call, `BlockPoolSpec` does what the
bounded model says.

The induction proofs (proofs.py) are about the model; this check ties the model to the spec as
written. Within a `Bound` it reaches states of `BlockPoolSpec(num_blocks)` by breadth-first search
from a fresh pool over concrete calls (allocate 1 or 2, touch, free of one block or two, unpin of
one block, cache_blocks of one block under hash 1 or 2, evict of one block, reset; requests 0 and
1; states whose ref counts sum to at most `max_refs`), and on each runs every call of the bounded
domain: allocate n in -1..N; touch, free, unpin, writable and evict of no block, one id in -1..N
or two ids in 0..N-1; cache_blocks of those under hashes 1-2 (and lists of unequal lengths);
lookup of up to three hashes in 1-3; reset; num_free. For each it compares the spec (error class,
result, snapshot and hash map after) with the model's outcomes on the same values: exactly one
outcome must apply, with the spec's error or result, and its post-state must be the spec's. The
model's terms are evaluated with numpy over all calls of one shape at once
(`cacheproof.prove.cache.array_eval`).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from itertools import product
from typing import Any, NamedTuple

import numpy as np

from cacheproof.prove.blocks import transitions
from cacheproof.prove.blocks.counterexample import (
    Call,
    after_terms,
    call_python,
    decode_state,
    encode_state,
    run_call,
    spec_view,
)
from cacheproof.prove.blocks.state import REQUESTS, state_names, symbolic_state
from cacheproof.prove.cache.array_eval import CompiledTerms
from cacheproof.prove.refinement_verdict import RefinementReport
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics

HASHES = (1, 2)
"""Hashes the reached states carry; lookups also ask for 3, which none carries."""


class Bound(NamedTuple):
    num_blocks: int = 3
    max_refs: int = 3
    max_states: int = 20000

    def describe(self) -> str:
        return f"{self.num_blocks} blocks, requests 0-1, ref counts summing to <= {self.max_refs}"


DEFAULT_BOUND = Bound()


@dataclass(frozen=True)
class Disagreement:
    path: tuple[Call, ...]
    call: Call
    observed: tuple  # the spec: (error, result, snapshot, hash_map)
    expected: tuple | None  # the model's, None when not exactly one outcome applies
    outcomes: tuple[str, ...]
    num_blocks: int
    semantics: BlockSemantics

    def to_json(self) -> dict[str, Any]:
        return {"call": call_python(self.call), "path": [call_python(c) for c in self.path], "python": self.python()}

    def describe(self) -> str:
        applying = ", ".join(self.outcomes) or "none"
        return f"{call_python(self.call)} after {len(self.path)} calls; model outcomes: {applying}"

    def python(self) -> str:
        semantics = "" if self.semantics == BLOCK_CONTRACT else (
            ", BlockSemantics(" + ", ".join(f"{k}={v!r}" for k, v in self.semantics.differences().items()) + ")"
        )
        lines = [
            "from cacheproof.spec.blocks.pool import BlockPoolSpec",
            "from cacheproof.spec.blocks.semantics import BlockSemantics",
            "",
            f"pool = BlockPoolSpec({self.num_blocks}{semantics})",
            *[call_python(call) for call in self.path],
            "try:",
            f"    result, raised = {call_python(self.call)}, None",
            "except Exception as error:",
            "    result, raised = None, type(error).__name__",
            "observed = (raised, result, pool.snapshot(), pool.hash_map())",
        ]
        if self.expected is None:
            lines.append(f"raise AssertionError('the model has {len(self.outcomes)} outcomes here: {self.outcomes}; the spec: %r' % (observed,))")
        else:
            lines.append(f"expected = {self.expected!r}  # the model")
            lines.append("assert observed == expected, f'the spec does {observed}, the model says {expected}'")
        return "\n".join(lines) + "\n"


# The bounded domain ---------------------------------------------------------------------------------


def reachable_states(bound: Bound, semantics: BlockSemantics, spec_class: type = BlockPoolSpec) -> list[tuple[Any, tuple[Call, ...]]]:
    """(pool, calls from a fresh pool) of every state within the bound, fewest calls first."""
    n = bound.num_blocks
    usable = range(1, n)
    alphabet: list[Call] = [("reset", ())]
    for r in range(REQUESTS):
        alphabet += [("allocate", (r, 1)), ("allocate", (r, 2))]
        alphabet += [(op, (r, (b,))) for b in usable for op in ("touch", "free", "unpin")]
        alphabet += [("free", (r, (a, b))) for a in usable for b in usable if a != b]
        alphabet += [("cache_blocks", (r, (b,), (h,))) for b in usable for h in HASHES]
    alphabet += [("evict", ((b,),)) for b in usable]
    start = spec_class(n, semantics)
    seen = {spec_view(start)}
    found, frontier = [], deque([(start, ())])
    while frontier and len(found) < bound.max_states:
        pool, path = frontier.popleft()
        found.append((pool, path))
        for call in alphabet:
            twin = pool.copy()
            if run_call(twin, call)[0] is not None:
                continue
            view = spec_view(twin)
            if view in seen or sum(ref for ref, _ in view[0][1]) > bound.max_refs:
                continue
            seen.add(view)
            frontier.append((twin, path + (call,)))
    return found


def bounded_calls(num_blocks: int) -> list[tuple[Call, tuple[int, int], tuple]]:
    """(call, shape, (request, n, blocks, hashes)) of every call of the bounded domain."""
    ids = range(-1, num_blocks + 1)
    lists = [()] + [(b,) for b in ids] + list(product(range(num_blocks), repeat=2))
    hash_lists = {0: [()], 1: [(h,) for h in HASHES], 2: [(1, 1), (1, 2)]}
    unequal = [((1,), ()), ((1,), (1, 1)), ((1, 2), (1,)), ((), (1,))]
    asked = [hs for k in range(3) for hs in product((1, 2, 3), repeat=k)] + [(1, 2, 3), (3, 1, 2), (1, 1, 2), (2, 1, 1)]
    found = [(("reset", ()), (0, 0), (0, 0, (), ())), (("num_free", ()), (0, 0), (0, 0, (), ()))]
    found += [(("lookup", (hs,)), (0, len(hs)), (0, 0, (), hs)) for hs in asked]
    found += [((op, (xs,)), (len(xs), 0), (0, 0, xs, ())) for op in ("writable", "evict") for xs in lists]
    for r in range(REQUESTS):
        found += [(("allocate", (r, n)), (0, 0), (r, n, (), ())) for n in range(-1, num_blocks + 1)]
        for op in ("touch", "free", "unpin"):
            found += [((op, (r, xs)), (len(xs), 0), (r, 0, xs, ())) for xs in lists]
        pairs = [(xs, hs) for xs in lists for hs in hash_lists[len(xs)]] + unequal
        found += [(("cache_blocks", (r, xs, hs)), (len(xs), len(hs)), (r, 0, xs, hs)) for xs, hs in pairs]
    return found


# The check --------------------------------------------------------------------------------------------


@dataclass
class _Rows:
    pre: list[dict[str, int]] = field(default_factory=list)
    parameters: list[tuple] = field(default_factory=list)
    observed: list[tuple] = field(default_factory=list)
    unchanged: list[bool] = field(default_factory=list)
    origin: list[tuple] = field(default_factory=list)


def check_refinement(
    bound: Bound = DEFAULT_BOUND, spec_class: type = BlockPoolSpec, semantics: BlockSemantics = BLOCK_CONTRACT
) -> RefinementReport:
    """Run every call of the bounded domain on every reachable state of `spec_class` and compare
    with the bounded model's outcomes under the same semantics."""
    started = time.perf_counter()
    n = bound.num_blocks
    states = reachable_states(bound, semantics, spec_class)
    domain = bounded_calls(n)
    groups: dict[tuple[str, tuple[int, int]], _Rows] = {}
    for pool, path in states:
        view = spec_view(pool)
        pre = encode_state(*view, n)
        for call, shape, parameters in domain:
            twin = pool.copy()
            error, result = run_call(twin, call)
            after = spec_view(twin)
            rows = groups.setdefault((call[0], shape), _Rows())
            rows.pre.append(pre)
            rows.parameters.append(parameters)
            rows.observed.append((error, result, *after))
            rows.unchanged.append(after == view)
            rows.origin.append((path, call))
    disagreements, disagreeing, total = [], 0, 0
    for (operation, shape), rows in groups.items():
        total += len(rows.pre)
        bad = _disagreements(n, operation, shape, rows, semantics)
        disagreeing += len(bad)
        disagreements += bad[:1]
    return RefinementReport(bound, len(states), total, time.perf_counter() - started, tuple(disagreements), disagreeing)


def _disagreements(n: int, operation: str, shape: tuple[int, int], rows: _Rows, semantics: BlockSemantics) -> list[Disagreement]:
    state = symbolic_state(n)
    p = transitions.symbolic_parameters(*shape)
    outcomes = transitions.outcomes(operation, shape, state, p, semantics)
    spans, terms = [], []
    for o in outcomes:
        after = [] if o.error is not None else after_terms(o.after)
        spans.append((len(terms), len(after), len(o.result_terms)))
        terms += [o.guard, *after, *o.result_terms]
    values: dict[str, Any] = {name: np.array([row[name] for row in rows.pre], dtype=np.int64) for name in state_names(n)}
    for name in state_names(n):
        if name.startswith(("hashed_", "queued_")):
            values[name] = values[name].astype(bool)
    values["request"] = np.array([q[0] for q in rows.parameters], dtype=np.int64)
    values["n"] = np.array([q[1] for q in rows.parameters], dtype=np.int64)
    for j in range(shape[0]):
        values[f"x_{j}"] = np.array([q[2][j] for q in rows.parameters], dtype=np.int64)
    for j in range(shape[1]):
        values[f"h_{j}"] = np.array([q[3][j] for q in rows.parameters], dtype=np.int64)
    count = len(rows.pre)
    outputs = [np.broadcast_to(np.asarray(v), (count,)) for v in CompiledTerms(terms)(values)]
    guards = np.array([outputs[start] for start, _, _ in spans], dtype=bool).reshape(len(outcomes), count)
    applying = guards.sum(axis=0)
    chosen = guards.argmax(axis=0)
    found = []
    columns = {k: np.stack(outputs[s + 1 : s + 1 + a + r]).T.tolist() if a + r else None for k, (s, a, r) in enumerate(spans)}
    for row in range(count):
        expected, names = None, tuple(o.name for o, g in zip(outcomes, guards[:, row]) if g)
        if applying[row] == 1:
            k = int(chosen[row])
            outcome, (_, a, _) = outcomes[k], spans[k]
            if outcome.error is not None:
                if rows.observed[row][0] == outcome.error and rows.unchanged[row]:
                    continue
                pre_view = rows.observed[row][2:] if rows.unchanged[row] else None
                expected = (outcome.error, None, *(pre_view or ("the state before",) * 2))
            else:
                flat = columns[k][row]
                expected = (None, outcome.decode(flat[a:]), *decode_state(flat[:a], n))
                if expected == rows.observed[row]:
                    continue
        path, call = rows.origin[row]
        found.append(Disagreement(path, call, rows.observed[row], expected, names, n, semantics))
    return found
