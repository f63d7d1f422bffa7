"""The figures over the calls: a case's calls replayed on a fresh spec, one row of figures per step.

Row 0 is the fresh spec, row i the spec right after call i; every call runs as the checker runs it
on the spec (`contract.steps.outcome_of`: a contract error is an outcome, the state unchanged).
What a row holds is the kind's `FIGURES` table: the tensor cache's byte counts from `stats()`
(capacity, in use, idle, reserved, ready), the block pool's block counts from `snapshot()` (usable,
in use, free, cached), the radix cache's slot counts from `snapshot()` (slots, protected,
evictable, requests' own, free), the slot budget's from `free_slots()` (slots, in use, free). A long sequence keeps one row per `stride` calls (and the marked call's), so
that the chart stays at most MAX_POINTS points; the replay itself is one pass, O(1) per call for the
tensor cache, O(blocks) per kept row for the block pool.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call
from cacheproof.spec.cache.kind import normalize_snapshot
from cacheproof.contract.steps import StepOutcome, outcome_of
from cacheproof.spec.kinds import get_kind

LIMIT, BAND, LINE = "limit", "band", "line"
"""How a figure is drawn: the ceiling (a dashed line), a stacked area, or a line over the areas."""

MAX_POINTS = 2000
"""The most rows a series keeps; above it, one row per `stride` calls."""

LISTED_CALLS = 60
"""The calls whose spec outcome a series keeps for the page's call list: those up to the marked
call (the last call when none is marked)."""


@dataclass(frozen=True)
class Figure:
    """One figure over the calls: its name in the legend, how it is drawn, and what it counts."""

    name: str
    style: str
    meaning: str


@dataclass(frozen=True)
class KindFigures:
    """A kind's figures, their unit, and `read(model)`: their values in the model's state, in order.
    `from_snapshot`: the same values read from a `snapshot()` answer (a kind whose views a check
    compares call by call; the implementation's row of a check report), None where there is none."""

    unit: str
    figures: tuple[Figure, ...]
    read: Callable[[Any], tuple[int, ...]]
    from_snapshot: Callable[[Any], tuple[int, ...]] | None = None


def _cache_figures(spec: Any) -> tuple[int, ...]:
    stats = spec.stats()
    return stats.capacity_bytes, stats.pinned_bytes, stats.idle_bytes, stats.reserved_bytes, stats.ready_bytes


def _entry_figures(capacity: int, entries: Sequence[Sequence[Any]]) -> tuple[int, ...]:
    """The tensor cache's figures from normalized entries (key, state, refcount, nbytes, retain)."""
    ready = [entry for entry in entries if entry[1] == "READY"]
    pinned = sum(entry[3] for entry in ready if entry[2] > 0)
    idle = sum(entry[3] for entry in ready if entry[2] == 0)
    reserved = sum(entry[3] for entry in entries if entry[1] == "RESERVED")
    return capacity, pinned, idle, reserved, pinned + idle


def _block_figures(pool: Any) -> tuple[int, ...]:
    return _snapshot_figures(pool.snapshot())


def _snapshot_figures(snapshot: Any) -> tuple[int, ...]:
    """The block pool's figures from a snapshot (free queue, per block (ref, hash), holdings)."""
    queue, blocks, _ = snapshot
    usable = blocks[1:]  # block 0 is the null block
    return (len(usable), sum(ref > 0 for ref, _ in usable), len(queue),
            sum(value is not None for _, value in usable))


def _radix_snapshot_figures(snapshot: Any) -> tuple[int, ...]:
    """The radix cache's figures from a snapshot (free, (evictable, protected), nodes, requests):
    every slot named or free, then the sizes, the requests' own slots and the free count."""
    free, (evictable, protected), nodes, requests = snapshot
    named = {slot for node in nodes for slot in node[2]} | {slot for request in requests for slot in request[2]}
    own = sum(len(request[2]) - request[3] for request in requests)
    return len(named) + free, protected, evictable, own, free


def _radix_figures(tree: Any) -> tuple[int, ...]:
    return (tree.num_slots, *_radix_snapshot_figures(tree.snapshot())[1:])


def _slot_figures(budget: Any) -> tuple[int, ...]:
    free = budget.free_slots()
    return budget.num_slots, budget.num_slots - free, free


FIGURES: dict[str, KindFigures] = {
    "cache": KindFigures("bytes", (
        Figure("capacity", LIMIT, "capacity_bytes"),
        Figure("in use", BAND, "pinned_bytes: READY entries with refcount > 0"),
        Figure("idle", BAND, "idle_bytes: READY entries with refcount 0 (evictable)"),
        Figure("reserved", BAND, "reserved_bytes: RESERVED entries, value not yet committed"),
        Figure("ready", LINE, "ready_bytes = in use + idle"),
    ), _cache_figures),
    "blocks": KindFigures("blocks", (
        Figure("usable", LIMIT, "num_blocks - 1 (block 0 is the null block)"),
        Figure("in use", LINE, "blocks with ref count > 0"),
        Figure("free", LINE, "the free queue's length (num_free())"),
        Figure("cached", LINE, "blocks carrying a hash, in use or free"),
    ), _block_figures, _snapshot_figures),
    "radix": KindFigures("KV slots", (
        Figure("slots", LIMIT, "num_slots"),
        Figure("protected", BAND, "protected_size(): tokens of locked nodes"),
        Figure("evictable", BAND, "evictable_size(): tokens of unlocked nodes"),
        Figure("requests' own", BAND, "slots of live requests past their cached prefix"),
        Figure("free", LINE, "the allocator's free slots"),
    ), _radix_figures, _radix_snapshot_figures),
    "slots": KindFigures("slots", (
        Figure("slots", LIMIT, "num_slots"),
        Figure("in use", BAND, "slots of scheduled inputs not freed"),
        Figure("free", LINE, "free_slots()"),
    ), _slot_figures),
}
"""Per spec kind, what the chart draws."""


@dataclass(frozen=True)
class Series:
    """A case's figures over its calls: `steps[j]` is the step of `rows[j]` (0: the fresh spec).

    `outcomes` maps the listed steps (LISTED_CALLS up to the marked one) to the spec's outcome in
    words; `errors` holds, per call, the contract error the spec raised (None: it returned); `state`
    is the spec right after the marked call (after the last call when none is marked)."""

    unit: str
    figures: tuple[Figure, ...]
    steps: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]
    stride: int
    outcomes: dict[int, str]
    errors: tuple[str | None, ...]
    state: Any

    @property
    def calls(self) -> int:
        return self.steps[-1]


def outcome_words(outcome: StepOutcome) -> str:
    """An outcome as the page words it: "raises NAME", "returns NAME" for an enum member, "returns
    REPR" otherwise (the wording of trace outcomes, docs/traces.md)."""
    if outcome.crash is not None:
        return f"crashes with {outcome.crash}"
    if outcome.error is not None:
        return f"raises {outcome.error}"
    result = outcome.result
    return f"returns {result.name}" if isinstance(result, enum.Enum) else f"returns {result!r}"


def stride_for(calls: int) -> int:
    """Every how many calls a row is kept: 1 up to MAX_POINTS calls, so that at most MAX_POINTS are."""
    return max(1, -(-calls // MAX_POINTS))


def listed_steps(calls: int, marked: int | None) -> range:
    """The steps whose calls the page lists: LISTED_CALLS ending at the marked call (or the last)."""
    end = calls if marked is None else marked
    return range(max(1, end - LISTED_CALLS + 1), end + 1)


def replay_series(kind_name: str, size: int, semantics: Any, calls: Sequence[Call], marked: int | None) -> Series:
    """Replay `calls` on `kind.new(size, semantics)` and keep the figures (see the module docstring)."""
    kind, table = get_kind(kind_name), FIGURES[kind_name]
    model = kind.new(size, semantics)
    stride, listed = stride_for(len(calls)), listed_steps(len(calls), marked)
    steps, rows = [0], [table.read(model)]
    outcomes: dict[int, str] = {}
    errors: list[str | None] = []
    state = None
    for step, call in enumerate(calls, start=1):
        outcome = outcome_of(model, call, kind.error_names)
        errors.append(outcome.error)
        if step in listed:
            outcomes[step] = outcome_words(outcome)
        if step % stride == 0 or step == marked or step == len(calls):
            steps.append(step)
            rows.append(table.read(model))
        if step == marked:
            state = model.copy()
    return Series(table.unit, table.figures, tuple(steps), tuple(rows), stride, outcomes, tuple(errors),
                  model if state is None else state)


def implementation_row(kind_name: str, series: Series, state_diff: dict | None, complete: bool) -> tuple[int, ...] | None:
    """The implementation's figures right after the marked call, read from a check report's state
    diff: the block pool's from the implementation's snapshot when it differs (the spec's when the
    report lists every difference and the snapshot is not among them); the tensor cache's from the
    spec's entries with the diff's entries put in. None when the report does not say (a trace, an
    answer the figures cannot read). Before the marked call the implementation agreed with the spec.
    A kind with `from_snapshot` (the block pool, the radix cache) reads it the block pool's way."""
    if series.state is None:
        return None
    try:
        table = FIGURES[kind_name]
        if table.from_snapshot is not None:
            views = {view["view"]: view["implementation"] for view in (state_diff or {}).get("views", ())}
            if "snapshot" in views:
                return table.from_snapshot(tupled(views["snapshot"]))
            return table.read(series.state) if complete else None
        if kind_name == "cache":
            if not state_diff or "only_in_spec" not in state_diff:
                return FIGURES[kind_name].read(series.state) if complete else None
            return _entry_figures(_cache_figures(series.state)[0], _cache_entries(series.state, state_diff))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return None
    return None


def _cache_entries(spec: Any, diff: dict) -> list[tuple]:
    """The cache's entries: the spec's, less those only in the spec's or differing, plus the cache's."""
    def key(entry: Any) -> Any:
        return repr(tupled(entry[0]))

    gone = {key(entry) for entry in diff["only_in_spec"]} | {key(pair["spec"]) for pair in diff["differing"]}
    kept = [tuple(entry) for entry in normalize_snapshot(spec.snapshot()) if repr(entry[0]) not in gone]
    return kept + [tuple(entry) for entry in diff["only_in_cache"]] + [tuple(pair["cache"]) for pair in diff["differing"]]


def tupled(value: Any) -> Any:
    """A JSON value with its lists as tuples, as the views answer."""
    return tuple(tupled(item) for item in value) if isinstance(value, list) else value
