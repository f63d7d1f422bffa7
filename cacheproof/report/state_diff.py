"""The spec against the cache right after the diverging call, as table rows: field | spec | cache.

The spec's side is the replayed spec (`series.Series.state`, `outcomes`). The cache's side is what
the input says: the versioned report's structured `state_diff`, its difference texts (the forms
the tensor cache's checker and replay wrote before every kind's ran the program pipeline, and `check.report.program_differences` writes: "len(): spec 1, this cache 2",
"cache.get(1): spec returns None; this cache raises KeyError", and the unversioned block report's
"snapshot() is A, the spec's B"), or a monitor's
`observed` outcome (its text as every kind's: "cache.get(1): the spec returned None, the
implementation raised KeyError"). An observation the input does not mention is "= spec" when the input lists
every difference at the call (a check report does), else unknown. Another kind's view that differs
is listed part by part, as `cacheproof check` explains it (`contract.explaining.steps.part_differences`
over the kind's readings: the pool's free queue, each block's ref count and hash, each request's
holdings), hashes short and alike on the whole page; when nothing at all is known of
the cache, `cache_known` is False and the page says that only the spec's side is known. A difference
text in no known form becomes one row of its own, as written.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from cacheproof.contract.calls import to_python
from cacheproof.contract.explaining.names import Names
from cacheproof.contract.explaining.steps import part_differences
from cacheproof.spec.cache.kind import STATS_FIELDS, normalize_snapshot
from cacheproof.report.inputs import Case
from cacheproof.report.series import Series, tupled
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import get_kind

SAME, DIFFERS, UNKNOWN, AS_WRITTEN = "same", "differs", "unknown", "as written"

_CACHE_TEXT = re.compile(r"^(?P<subject>.+?): spec (?P<spec>.*?)(?P<sep>[,;]) this cache (?P<cache>.*)$", re.S)
"""The tensor cache's difference texts: "SUBJECT: spec A, this cache B" (a state observation) or
"CALL: spec A; this cache B" (the outcome)."""

_VIEW_TEXT = re.compile(r"(?:^|; )(?P<view>\w+)\(\) is (?P<cache>.*?), the spec's (?P<spec>.*?)(?=; \w+\(\) is |$)", re.S)
_PROGRAM_OUTCOME = re.compile(r"^the spec (?P<spec>.*?), the implementation (?P<cache>.*?)(?=; \w+\(\) is |$)", re.S)
"""Another kind's description after "CALL: " (`contract.steps.StepDifference.describe`: the
unversioned report's one difference)."""

_LISTED_OUTCOME = re.compile(r"^outcome: the spec (?P<spec>.*), the implementation (?P<cache>.*)$", re.S)
_LISTED_VIEW = re.compile(r"^(?P<view>\w+)\(\): the spec's (?P<spec>.*), the implementation's (?P<cache>.*)$", re.S)
"""Another kind's differences one a line (`check.report.program_differences`, the versioned report)."""

STATS_MEANINGS = {"pinned_bytes": "in use", "ready_bytes": "in use + idle"}


@dataclass(frozen=True)
class SnapshotDiff:
    """Normalized tensor cache entries (key, state, refcount, nbytes, retain) that differ between the
    spec's snapshot and the cache's, as a report's older replays and difference texts give them."""

    only_in_spec: tuple
    only_in_cache: tuple
    differing: tuple  # (spec entry, cache entry) pairs of the same key
    spec_order: tuple  # keys oldest first, set only when the recency orders differ
    cache_order: tuple

    @property
    def empty(self) -> bool:
        return not (self.only_in_spec or self.only_in_cache or self.differing or self.spec_order)


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


class Row(NamedTuple):
    """One compared observation: its name, the spec's value, the cache's, and SAME, DIFFERS,
    UNKNOWN, or AS_WRITTEN (a difference text in no known form, in `spec`)."""

    field: str
    spec: str
    cache: str
    status: str


@dataclass(frozen=True)
class StateDiff:
    rows: tuple[Row, ...]
    cache_known: bool


def state_diff(kind: str, case: Case, series: Series, names: Names | None = None) -> StateDiff:
    """The rows of `case`'s marked call (the spec's side alone when none is marked). Another kind's
    views that differ are listed part by part as `cacheproof check` explains them, their values
    written by `names` (one page's; default a fresh one)."""
    if case.marked is None:
        rows = _spec_rows(kind, series.state, "not known")
        return StateDiff(rows, False)
    rows = _cache_rows(case, series) if kind == "cache" else _program_rows(get_kind(kind), case, series, names or Names())
    known = case.complete or case.observed is not None or any(row.status == DIFFERS for row in rows)
    return StateDiff(rows, known)


def _agreed(case: Case) -> tuple[str, str]:
    """The cache's column for an observation the input does not mention."""
    return ("= spec", SAME) if case.complete else ("not known", UNKNOWN)


def _outcome_row(case: Case, series: Series, parsed: tuple[str, str] | None) -> Row:
    call = case.calls[case.marked - 1]
    field = f"outcome of {to_python(call)}"
    spec = series.outcomes.get(case.marked, "?")
    if case.observed is not None:
        return Row(field, spec, case.observed, DIFFERS if case.observed_differs else SAME)
    if parsed is not None:
        return Row(field, parsed[0], parsed[1], DIFFERS)
    return Row(field, spec, *_agreed(case))


# The tensor cache ----------------------------------------------------------------------------

def _cache_rows(case: Case, series: Series) -> tuple[Row, ...]:
    outcome_subject = to_python(case.calls[case.marked - 1])
    outcome, state, unparsed = None, {}, []
    for text in case.differences:
        match = _CACHE_TEXT.match(text)
        generic = _PROGRAM_OUTCOME.match(text.removeprefix(outcome_subject + ": ")) if match is None else None
        if generic is not None and text.startswith(outcome_subject + ": "):  # the monitor's text, as every kind's
            outcome = (generic["spec"], generic["cache"])
        elif match is None:
            unparsed.append(text)
        elif match["sep"] == ";" and match["subject"] == outcome_subject:
            outcome = (match["spec"], match["cache"])
        else:
            state[match["subject"]] = (match["spec"], match["cache"])
    rows = [_outcome_row(case, series, outcome)]
    stats = series.state.stats()
    for field in STATS_FIELDS:
        label = f"stats().{field}" + (f" ({STATS_MEANINGS[field]})" if field in STATS_MEANINGS else "")
        rows.append(_observed(label, f"stats().{field}", str(getattr(stats, field)), state, case))
    rows.append(_observed("len()", "len()", str(len(series.state)), state, case))
    rows += [Row(subject, spec, cache, DIFFERS) for subject, (spec, cache) in state.items() if subject.endswith(" in cache")]
    rows += _snapshot_rows(case, series, state)
    rows += [Row("difference", text, "", AS_WRITTEN) for text in unparsed]
    return tuple(rows)


def _observed(label: str, subject: str, spec: str, state: dict, case: Case) -> Row:
    if subject in state:
        return Row(label, *state[subject], DIFFERS)
    return Row(label, spec, *_agreed(case))


def _snapshot_rows(case: Case, series: Series, state: dict) -> list[Row]:
    """Entry by entry where the snapshots differ (the report's structured diff, else the difference
    text read back), else the spec's snapshot in one row."""
    structured = case.state_diff or {}
    if "only_in_spec" in structured:
        return _entry_rows(structured["only_in_spec"], structured["only_in_cache"],
                           [(pair["spec"], pair["cache"]) for pair in structured["differing"]],
                           structured["spec_order"], structured["cache_order"])
    subject = next((subject for subject in state if subject.startswith("snapshot()")), None)
    if subject is not None:
        spec_text, cache_text = state[subject]
        spec_entries, cache_entries = _literal(spec_text), _literal(cache_text)
        if isinstance(spec_entries, tuple) and isinstance(cache_entries, tuple):
            diff = snapshot_diff(spec_entries, cache_entries)
            return _entry_rows(diff.only_in_spec, diff.only_in_cache, diff.differing, diff.spec_order, diff.cache_order)
        return [Row(subject, spec_text, cache_text, DIFFERS)]
    entries = normalize_snapshot(series.state.snapshot())
    return [Row("snapshot()", _entries_text(entries), *_agreed(case))]


def _entry_rows(only_in_spec, only_in_cache, differing, spec_order, cache_order) -> list[Row]:
    rows = [Row(f"entry {entry[0]!r}", _entry_text(entry), "absent", DIFFERS) for entry in only_in_spec]
    rows += [Row(f"entry {entry[0]!r}", "absent", _entry_text(entry), DIFFERS) for entry in only_in_cache]
    rows += [Row(f"entry {spec[0]!r}", _entry_text(spec), _entry_text(cache), DIFFERS) for spec, cache in differing]
    if spec_order:
        rows.append(Row("recency order (oldest first)", repr(list(spec_order)), repr(list(cache_order)), DIFFERS))
    return rows


def _entry_text(entry: Any) -> str:
    """(key, state, refcount, nbytes, retain) in words; any other shape as written."""
    if isinstance(entry, (list, tuple)) and len(entry) == 5:
        _, state, refcount, nbytes, retain = entry
        return f"{state}, refcount {refcount}, {nbytes} B, {'retained' if retain else 'transient'}"
    return repr(entry)


def _entries_text(entries: tuple, shown: int = 8) -> str:
    listed = "; ".join(f"{entry[0]!r}: {_entry_text(entry)}" for entry in entries[:shown])
    more = f"; ... {len(entries) - shown} more" if len(entries) > shown else ""
    return f"{len(entries)} {'entry' if len(entries) == 1 else 'entries'}" + (f": {listed}{more}" if entries else "")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None


# The other kinds (the block pool) -------------------------------------------------------------

def _program_rows(kind: SpecKind, case: Case, series: Series, names: Names) -> tuple[Row, ...]:
    prefix = to_python(case.calls[case.marked - 1]) + ": "
    outcome, views, unparsed = None, {}, []
    for text in case.differences:
        listed_outcome, listed_view = _LISTED_OUTCOME.match(text), _LISTED_VIEW.match(text)
        if listed_outcome is not None:
            outcome = (listed_outcome["spec"], listed_outcome["cache"])
        elif listed_view is not None:
            views[listed_view["view"]] = (_literal(listed_view["spec"]), _literal(listed_view["cache"]))
        elif text.startswith(prefix):
            rest = text[len(prefix):]
            match = _PROGRAM_OUTCOME.match(rest)
            if match is not None:
                outcome = (match["spec"], match["cache"])
            views.update({found["view"]: (_literal(found["spec"]), _literal(found["cache"]))
                          for found in _VIEW_TEXT.finditer(rest)})
        else:
            unparsed.append(text)
    for view in (case.state_diff or {}).get("views", ()):
        views[view["view"]] = (tupled(view["spec"]), tupled(view["implementation"]))
    rows = [_outcome_row(case, series, outcome)]
    spec_snapshot = series.state.snapshot()
    cache_snapshot = views.get("snapshot", (None, None))[1]
    rows += _block_figure_rows(case, spec_snapshot, cache_snapshot if "snapshot" in views else spec_snapshot,
                               "snapshot" in views)
    for view, (spec, cache) in views.items():
        rows += [Row(f"{view}()" + (f", {found.subject}" if found.subject else ""), found.spec, found.implementation,
                     DIFFERS) for found in part_differences(kind, view, spec, cache, names)]
    if "snapshot" not in views:
        rows.append(Row("snapshot()", repr(spec_snapshot), *_agreed(case)))
    rows += [Row("difference", text, "", AS_WRITTEN) for text in unparsed]
    return tuple(rows)




def _is_pool_snapshot(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 3 and all(isinstance(part, tuple) for part in value)


def _pool_counts(snapshot: Any) -> tuple[int, int, int] | None:
    """(free, in use, cached) of a pool snapshot (free queue, per block (ref, hash), holdings)."""
    if not _is_pool_snapshot(snapshot):
        return None
    queue, blocks, _ = snapshot
    usable = [block for block in blocks[1:] if isinstance(block, tuple) and len(block) == 2]
    return len(queue), sum(isinstance(ref, int) and ref > 0 for ref, _ in usable), sum(h is not None for _, h in usable)


def _block_figure_rows(case: Case, spec_snapshot: Any, cache_snapshot: Any, cache_differs: bool) -> list[Row]:
    spec_counts, cache_counts = _pool_counts(spec_snapshot), _pool_counts(cache_snapshot)
    rows = []
    for index, name in enumerate(("free blocks", "blocks in use", "cached blocks")):
        spec = str(spec_counts[index]) if spec_counts else "?"
        if cache_differs and cache_counts is not None:
            cache = str(cache_counts[index])
            rows.append(Row(name, spec, cache, DIFFERS if cache != spec else SAME))
        else:
            rows.append(Row(name, spec, *_agreed(case)))
    return rows


def _spec_rows(kind: str, model: Any, unknown: str) -> tuple[Row, ...]:
    """The spec's state alone (nothing is known of the cache)."""
    if kind == "cache":
        stats = model.stats()
        rows = [Row(f"stats().{field}", str(getattr(stats, field)), unknown, UNKNOWN) for field in STATS_FIELDS]
        rows.append(Row("snapshot()", _entries_text(normalize_snapshot(model.snapshot())), unknown, UNKNOWN))
        return tuple(rows)
    snapshot = model.snapshot()
    counts = _pool_counts(snapshot) or ("?", "?", "?")
    rows = [Row(name, str(count), unknown, UNKNOWN) for name, count in zip(("free blocks", "blocks in use", "cached blocks"), counts)]
    rows.append(Row("snapshot()", repr(snapshot), unknown, UNKNOWN))
    return tuple(rows)
