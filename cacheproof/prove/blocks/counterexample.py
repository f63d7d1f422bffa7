"""Between the model and the spec: concrete states and calls, and counterexamples as Python.

A model state becomes the spec's view of a pool, `(snapshot, hash_map)` as `BlockPoolSpec` gives
them (queue by position, hashes, holdings, carriers of each hash by stamp); a spec state becomes
the model's values (positions 1..len(queue), stamps in hash-map order). A counterexample to
induction is a pre-state and one call: the pre-state is reached from a fresh `BlockPoolSpec` by
public calls, found by a small breadth-first search, or else built directly (allocate every
block, cache the hashed ones in insertion order, touch the holdings, free the initial holdings
with the free blocks in queue order, evict the temporary hashes that sent unhashed free blocks to
the tail); either way the sequence is replayed and checked. The snippet rebuilds the state,
makes the call, asserts the named invariant on the spec, then asserts that the spec did what the
model predicts: it fails either way (a bug in the spec, or a model that says what the spec does
not do).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cacheproof.prove.induction import value_of
from cacheproof.prove.blocks.state import FIELDS, REQUESTS, PoolState, block_names
from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS_BY_NAME
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics

Call = tuple[str, tuple]
"""A call: (operation, arguments)."""

BUILT_BY_SEARCH = "search"
BUILT_DIRECTLY = "construction"


# Model values <-> spec views ------------------------------------------------------------------------


def after_terms(state: PoolState) -> list[Any]:
    """Every term of a state, per block in `Block` order (holdings flattened)."""
    return [t for b in state.blocks for t in (*b[: len(FIELDS)], *b.held)]


def decode_state(values: list[Any], num_blocks: int, requests: int = REQUESTS) -> tuple:
    """`(snapshot, hash_map)` of a model state from the values of `after_terms`."""
    width = len(FIELDS) + requests
    queue, blocks, holdings, carriers = [], [], {}, {}
    for i in range(num_blocks):
        ref, hashed, value, stamp, queued, pos, *held = values[i * width : (i + 1) * width]
        ref, value, stamp, pos = int(ref), int(value), int(stamp), int(pos)
        if queued:
            queue.append((pos, i))
        blocks.append((ref, value if hashed else None))
        if hashed:
            carriers.setdefault(value, []).append((stamp, i))
        for r, h in enumerate(held):
            if int(h) > 0:
                holdings.setdefault(r, []).extend([i] * int(h))
            elif int(h) < 0:  # no spec state holds a block a negative number of times: shown as is
                holdings.setdefault(r, []).append(f"{int(h)}x{i}")
    snapshot = (
        tuple(i for _, i in sorted(queue)),
        tuple(blocks),
        tuple((r, tuple(sorted(held, key=str))) for r, held in sorted(holdings.items()) if held),
    )
    hash_map = tuple((v, tuple(i for _, i in sorted(c))) for v, c in sorted(carriers.items()))
    return snapshot, hash_map


def encode_state(snapshot: tuple, hash_map: tuple, num_blocks: int, requests: int = REQUESTS) -> dict[str, int]:
    """The model's constants (names of `state.symbolic_state`) for a spec state."""
    queue, blocks, holdings = snapshot
    values: dict[str, int] = {}
    stamps = {}
    for value, carriers in hash_map:
        for block in carriers:
            stamps[block] = len(stamps)
    held = {r: list(blocks_held) for r, blocks_held in holdings}
    for i in range(num_blocks):
        ref, value = blocks[i]
        names = block_names("", i, requests)
        row = [ref, value is not None, 0 if value is None else value, stamps.get(i, 0),
               i in queue, queue.index(i) + 1 if i in queue else 0]
        row += [held.get(r, []).count(i) for r in range(requests)]
        values.update({n: int(v) for n, v in zip(names, row)})
    values.update(head=0, tail=len(queue) + 1, clock=len(stamps))
    return values


def call_arguments(operation: str, request: int, n: int, blocks: tuple, hashes: tuple) -> tuple:
    """The spec call's arguments from the model's parameters, one per argument of the operation's
    row in the spec's table, by its domain."""
    value = {"request": request, "count": n, "blocks": blocks, "hashes": hashes}
    return tuple(value[argument.domain] for argument in BLOCK_KIND.operation(operation).arguments)


def call_python(call: Call, name: str = "pool") -> str:
    operation, arguments = call
    return f"{name}.{operation}({', '.join(map(repr, arguments))})"


def spec_view(pool: BlockPoolSpec) -> tuple:
    return pool.snapshot(), pool.hash_map()


def run_call(pool: BlockPoolSpec, call: Call) -> tuple[str | None, Any]:
    """(error class or None, result) of `call` on `pool` (which it changes)."""
    try:
        return None, getattr(pool, call[0])(*call[1])
    except Exception as error:  # a wrong spec may raise anything; the model names classes
        return type(error).__name__, None


# Reaching a state ---------------------------------------------------------------------------------


def search(target: tuple, num_blocks: int, semantics: BlockSemantics, hashes: Iterable[int], max_states: int = 400) -> list[Call] | None:
    """The shortest call sequence from a fresh pool to `target` (snapshot, hash_map) over single-block
    calls of requests 0..R-1 and the target's hashes, within `max_states` states; None if none."""
    start = BlockPoolSpec(num_blocks, semantics)
    goal_refs = sum(ref for ref, _ in target[0][1])
    alphabet: list[Call] = [("reset", ())]
    for r in range(REQUESTS):
        alphabet += [("allocate", (r, 1))]
        for b in range(1, num_blocks):
            alphabet += [("touch", (r, (b,))), ("free", (r, (b,)))]
            alphabet += [("cache_blocks", (r, (b,), (h,))) for h in sorted(set(hashes))]
    alphabet += [("evict", ((b,),)) for b in range(1, num_blocks)]
    seen = {spec_view(start): None}
    frontier = deque([(start, [])])
    while frontier and len(seen) < max_states:
        pool, path = frontier.popleft()
        if spec_view(pool) == target:
            return path
        for call in alphabet:
            twin = pool.copy()
            if run_call(twin, call)[0] is not None:
                continue
            view = spec_view(twin)
            if view in seen or sum(ref for ref, _ in view[0][1]) > goal_refs + 1:
                continue
            seen[view] = None
            frontier.append((twin, path + [call]))
    return None


def construction(target: tuple, num_blocks: int) -> list[Call]:
    """Calls that build `target` from a fresh pool, for any state satisfying the invariants."""
    (queue, blocks, holdings), hash_map = target
    usable = tuple(range(1, num_blocks))
    calls: list[Call] = [("allocate", (0, len(usable)))] if usable else []
    hashed = {b for _, carriers in hash_map for b in carriers}
    order = sorted(((i, v) for v, carriers in hash_map for i in carriers), key=lambda p: _stamp(hash_map, p[0]))
    calls += [("cache_blocks", (0, (b,), (v,))) for b, v in order]
    spare = max([v for v, _ in hash_map], default=0) + 1
    temporary = tuple(b for b in queue if b not in hashed)
    calls += [("cache_blocks", (0, (b,), (spare + k,))) for k, b in enumerate(temporary)]
    for r, held in holdings:
        calls += [("touch", (r, (b,))) for b in held]
    in_use = tuple(b for b in usable if b not in queue)
    if in_use:
        calls.append(("free", (0, in_use)))
    if queue:
        calls.append(("free", (0, tuple(queue))))
    if temporary:
        calls.append(("evict", (temporary,)))
    return calls


def _stamp(hash_map: tuple, block: int) -> int:
    flat = [b for _, carriers in hash_map for b in carriers]
    return flat.index(block)


def reach(target: tuple, num_blocks: int, semantics: BlockSemantics, max_states: int = 400) -> tuple[list[Call], str] | None:
    """(calls, how found) that reach `target` from a fresh pool, checked by replaying; None if
    neither the search nor the construction reaches it (the target breaks an invariant)."""
    hashes = [v for v, _ in target[1]]
    found = search(target, num_blocks, semantics, hashes, max_states)
    candidates = ([(found, BUILT_BY_SEARCH)] if found is not None else []) + [(construction(target, num_blocks), BUILT_DIRECTLY)]
    for calls, how in candidates:
        pool = BlockPoolSpec(num_blocks, semantics)
        if all(run_call(pool, call)[0] is None for call in calls) and spec_view(pool) == target:
            return calls, how
    return None


# Counterexamples ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockCounterexample:
    """A pre-state satisfying the inductive invariant and a call after which `invariant` fails in
    the model; `predicted` is what the model says the call does: (error, result, snapshot, hash_map)."""

    invariant: str
    operation: str
    outcome: str
    num_blocks: int
    semantics: BlockSemantics
    pre: tuple  # (snapshot, hash_map)
    setup: tuple[Call, ...] | None  # None: no call sequence reaches the pre-state
    built_by: str
    call: Call
    predicted: tuple

    def python(self) -> str:
        """Runnable Python: rebuild the pre-state, make the call, assert the invariant, then
        assert the model's prediction."""
        semantics = "" if self.semantics == BLOCK_CONTRACT else f", {_semantics_python(self.semantics)}"
        lines = [
            f"# {self.invariant} fails after {self.operation} -> {self.outcome} (blocks model, N={self.num_blocks})",
            "from cacheproof.spec.blocks.pool import BlockPoolSpec",
            "from cacheproof.spec.blocks.semantics import BlockSemantics",
            "from cacheproof.spec.blocks.invariants import BLOCK_INVARIANTS_BY_NAME, BlockStep",
            "",
            f"pool = BlockPoolSpec({self.num_blocks}{semantics})",
        ]
        if self.setup is None:
            lines.append(f"raise AssertionError('no call sequence reaches the pre-state {self.pre!r}')")
        else:
            lines += [call_python(call) for call in self.setup]
            lines.append(f"assert (pool.snapshot(), pool.hash_map()) == {self.pre!r}  # built by {self.built_by}")
        error, result, snapshot, hash_map = self.predicted
        arguments = self.call[1]
        lines += [
            "before = pool.snapshot()",
            "try:",
            f"    result, raised = {call_python(self.call)}, None",
            "except Exception as error:",
            "    result, raised = None, type(error).__name__",
            "after = pool.snapshot()",
            f"step = BlockStep({self.operation!r}, {self.num_blocks}, before, after, raised is not None, "
            f"{arguments!r}, result, pool.hash_map())",
        ]
        if self.invariant in BLOCK_INVARIANTS_BY_NAME:
            lines.append(
                f"assert BLOCK_INVARIANTS_BY_NAME[{self.invariant!r}].holds(step), "
                f"f'{self.invariant} broken: {{before}} -> {{after}} ({{raised or result!r}})'"
            )
        else:
            lines.append("pool.check_invariants()")
        lines += [
            f"predicted = ({error!r}, {result!r}, {snapshot!r}, {hash_map!r})",
            "observed = (raised, result, after, pool.hash_map())",
            "assert observed == predicted, f'the model predicts {predicted}, the spec does {observed}'",
        ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "operation": self.operation,
            "outcome": self.outcome,
            "num_blocks": self.num_blocks,
            "semantics": self.semantics.differences(),
            "built_by": self.built_by,
            "calls": [{"op": op, "args": list(args)} for op, args in (self.setup or ()) + (self.call,)],
            "python": self.python(),
        }


def _semantics_python(semantics: BlockSemantics) -> str:
    return "BlockSemantics(" + ", ".join(f"{k}={v!r}" for k, v in semantics.differences().items()) + ")"


def concrete_counterexample(
    invariant: str, operation: str, outcome: str, num_blocks: int, semantics: BlockSemantics,
    pre: tuple, call: Call, predicted: tuple,
) -> BlockCounterexample:
    reached = reach(pre, num_blocks, semantics)
    setup, how = (tuple(reached[0]), reached[1]) if reached else (None, "nothing")
    return BlockCounterexample(invariant, operation, outcome, num_blocks, semantics, pre, setup, how, call, predicted)


def value_reader(model: Any) -> Callable[[Any], Any]:
    """Read a term's value (int or bool) from a z3 model, completing unconstrained terms."""
    return lambda term: value_of(model, term)
