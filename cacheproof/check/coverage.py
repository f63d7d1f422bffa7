"""Outcome coverage: which outcome of which operation a run reached, against the outcomes the
spec kind's operation table says each operation can have (`spec.kind.Operation.outcomes`).

A run that never saw `commit` raise ConflictError has not checked how a cache handles it, however
many examples it ran; the report names every outcome not reached, so a user knows what a green run
covered (docs/search-power.md). Beside the outcomes a run may count argument *cases* its generator
names (`cases`: e.g. "touch returns with the null block", where a profile makes the null block a
valid argument): rows of the same table, reached or not like any outcome.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from cacheproof.spec.kind import Operation


class OutcomeCoverage:
    """Counts of (operation, outcome) over a run; `operations` are the table rows the run calls,
    `cases` the (operation, case) rows counted beside their outcomes (those of other operations
    are left out)."""

    def __init__(self, operations: Iterable[Operation], cases: Iterable[tuple[str, str]] = ()) -> None:
        self.operations = tuple(operations)
        names = {op.name for op in self.operations}
        self.cases = tuple(case for case in cases if case[0] in names)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.programs = 0

    def record(self, operation: str, outcome: str) -> None:
        self.counts[(operation, outcome)] += 1

    def rows(self, operation: Operation) -> tuple[str, ...]:
        """The outcomes of `operation`, then its cases."""
        return (*operation.outcomes, *(case for name, case in self.cases if name == operation.name))

    @classmethod
    def merged(cls, coverages: Iterable["OutcomeCoverage | None"]) -> "OutcomeCoverage | None":
        """The outcomes several runs (phases, workers) of the same operations reached, counted
        together; None when none of them counted any."""
        present = [coverage for coverage in coverages if coverage is not None]
        if not present:
            return None
        together = cls(present[0].operations, present[0].cases)
        for coverage in present:
            together.counts.update(coverage.counts)
            together.programs += coverage.programs
        return together

    def possible(self) -> tuple[tuple[str, str], ...]:
        return tuple((op.name, row) for op in self.operations for row in self.rows(op))

    def missing(self) -> tuple[tuple[str, str], ...]:
        """The outcomes of the run's operations it never reached, in table order."""
        return tuple(pair for pair in self.possible() if not self.counts[pair])

    def unlisted(self) -> tuple[tuple[str, str], ...]:
        """Outcomes the spec had that its operation table does not list: a bug of the table."""
        possible = set(self.possible())
        return tuple(pair for pair, count in self.counts.items() if count and pair not in possible)

    def summary(self) -> str:
        """"31 of 38 outcomes (not reached: commit ConflictError, ...)", and any outcome the table lacks."""
        possible, missing, unlisted = self.possible(), self.missing(), self.unlisted()
        text = f"{len(possible) - len(missing)} of {len(possible)} outcomes"
        if missing:
            text += " (not reached: " + ", ".join(f"{op} {outcome}" for op, outcome in missing) + ")"
        if unlisted:
            text += "; not in the operation table: " + ", ".join(f"{op} {outcome}" for op, outcome in unlisted)
        return text

    def to_json(self) -> dict:
        """{"programs", "reached", "possible", "operations": {op: {outcome: count}}} (0: not reached)."""
        possible, missing = self.possible(), self.missing()
        return {
            "programs": self.programs,
            "reached": len(possible) - len(missing),
            "possible": len(possible),
            "unlisted": [f"{op} {outcome}" for op, outcome in self.unlisted()],
            "operations": {
                op.name: {row: self.counts[(op.name, row)] for row in self.rows(op)}
                for op in self.operations
            },
        }
