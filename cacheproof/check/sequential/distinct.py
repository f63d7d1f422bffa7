"""Every distinct divergence of a run: the kinds already reported, and the budget left to search.

A run does not stop at its first counterexample. The first one is found and shrunk as before
(Hypothesis, then `fault_search.shrink_failure`). Then Hypothesis runs again, on a new seed and
the examples not yet spent, with the kinds found so far *known*: an example that diverges in a
known kind ends there, rejected (`hypothesis.reject`: neither a failure nor a pass), so it goes on
generating until a divergence of a new kind, which `shrink_failure` shrinks keeping it new (these
runs skip Hypothesis's own shrinking, the slow part of a run). The kind is `differences.kind_of`:
the operation, the spec's outcome and the cache's outcome.

Hypothesis meets other kinds on the way, above all while it shrinks the first one (the sequence
it finds first often diverges otherwise than the one it shrinks to): each kind seen is kept as a
*sighting*, and after a run every sighted kind not yet reported is shrunk from its shortest
sighting, keeping its kind, before the next run starts.

The search stops when a run finds nothing new; when the --examples budget is spent (the examples
generated before each run's first new divergence count, rejected ones included; shrinking is free
as it is for one counterexample; `SearchDone` ends a run whose share is spent); after
--max-divergences kinds (MAX_DIVERGENCES by default); or SEARCH_SECONDS after the first
counterexample was found. A hang, a crash or a cache that is not deterministic ends the search:
each further attempt could cost a whole call timeout.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call
from cacheproof.sandbox.fault_search import divergence_kind_at
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.cmdline.budget import MAX_DIVERGENCES  # noqa: F401  (the default of a fixed-count run)
from cacheproof.cmdline.databases import RunStop

MAX_SIGHTINGS = 400
"""Divergences of the first run noted for their kinds at most (it meets each again and again while shrinking)."""

SEARCH_SECONDS = 20.0
"""Searching for further kinds stops this many seconds after the first counterexample was found."""


class SearchDone(RunStop):
    """Raised from the machine to end a run: its share of the budget, or the search's time, is spent.
    A RunStop (a BaseException), so that Hypothesis does not take it for a failure (see `faults`), nor the
    example database keep the test case it ends."""


class KnownKinds:
    """The kinds reported so far; the machine asks `is_known(capacity, calls)` about each divergence.

    `factory` is a `GuardedFactory` or `IsolatedFactory`: a kind is found by replaying the calls on
    a fresh cache of its own (`for_attempt()`). `examples_at_new` is the machine's example count
    at the first divergence of a new kind in the current run (None while there is none). With
    `note_sightings` the divergences of the first run are noted (`seen`, up to MAX_SIGHTINGS) and
    replayed for their kinds after it (`classify_seen`), and the kinds seen are kept
    (`unreported`); without it (under --isolate, where a replay starts a process) only the
    divergences of later runs are, which are replayed anyway to be judged.
    """

    def __init__(
        self, factory: Any, semantics: Semantics = CONTRACT, examples: Callable[[], int] = lambda: 0,
        note_sightings: bool = True,
    ) -> None:
        self.factory = factory
        self.semantics = semantics
        self.kinds: set[str] = set()
        self.examples = examples
        self.examples_at_new: int | None = None
        self.deadline: float | None = None
        self.run_started = 0
        self.run_budget = 0
        self.note_sightings = note_sightings
        self.sightings: dict[str, tuple[int, tuple[Call, ...]]] = {}  # kind: the shortest (capacity, calls) seen
        self.seen: dict[str, tuple[int, tuple[Call, ...]]] = {}  # divergences not yet classified, by repr

    def classify_seen(self) -> None:
        """Replay the divergences noted before any kind was known, shortest first, for their kinds.
        (Done after the run, not during it, so that the run makes the very calls it made before.)"""
        for capacity_bytes, calls in sorted(self.seen.values(), key=lambda seen: len(seen[1])):
            self._sighted(self.kind(capacity_bytes, calls), capacity_bytes, calls)
        self.seen.clear()

    def _sighted(self, kind: str | None, capacity_bytes: int, calls: Sequence[Call]) -> None:
        if kind is not None and kind not in self.kinds:
            seen = self.sightings.get(kind)
            if seen is None or len(calls) < len(seen[1]):
                self.sightings[kind] = (capacity_bytes, tuple(calls))

    def unreported(self) -> list[tuple[str, int, tuple[Call, ...]]]:
        """(kind, capacity, calls) of each kind seen in a run (its shrinking included) but not reported."""
        return [(kind, *seen) for kind, seen in self.sightings.items() if kind not in self.kinds]

    def kind(self, capacity_bytes: int, calls: Sequence[Call]) -> str | None:
        """The kind of the divergence at the last of `calls`, replayed; None if it does not diverge again."""
        return divergence_kind_at(self.factory, capacity_bytes, calls, self.semantics)

    def is_known(self, capacity_bytes: int, calls: Sequence[Call]) -> bool:
        """Whether the divergence at the last of `calls` is of a known kind; a new kind is noted as a
        sighting. Raises `SearchDone` when the time is up, or when the divergence is known and the
        run has spent its share of the examples."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise SearchDone()
        if not self.kinds:
            if self.note_sightings and len(self.seen) < MAX_SIGHTINGS:
                self.seen.setdefault(repr((capacity_bytes, calls)), (capacity_bytes, tuple(calls)))
            kind = None
        else:
            kind = self.kind(capacity_bytes, calls)
            self._sighted(kind, capacity_bytes, calls)
        if kind in self.kinds:
            if self.examples_at_new is None and self.examples() - self.run_started >= self.run_budget:
                raise SearchDone()  # still generating, and the share is spent (shrinking is free)
            return True
        if self.examples_at_new is None:
            self.examples_at_new = self.examples()
        return False

    def share_spent(self) -> bool:
        """Whether a search for further kinds (some kind is known) has spent its share of the examples
        without a new kind."""
        return bool(self.kinds) and self.examples_at_new is None and self.examples() - self.run_started >= self.run_budget

    def new_run(self, budget: int) -> None:
        """A run of at most `budget` examples starts now."""
        self.examples_at_new = None
        self.run_started = self.examples()
        self.run_budget = budget
