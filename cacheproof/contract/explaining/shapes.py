"""An implementation whose view answers in another shape than the contract's: a usage problem.

A view the kind reads part by part (`SpecKind.readings`) and an answer the reading cannot follow
(a list where a tuple is due, a dict of holdings, a block without its hash) is not a bug of the
pool's state but a mistake in how the implementation reports it: every program diverges at its
first call, and the shrunk divergences differ only by which call came first. It is reported once,
as a usage problem naming the view, the answer and the expected shape (`SpecKind.shapes`), and the
check exits as for any other usage error (docs/decisions.md).

The tensor cache's inspections (`snapshot()`, `stats()`) are not compared part by part: one that
returns another shape is found when its entries or fields cannot be read (`MalformedResult`, whose
message names the shape), and is the same usage problem (`inspection_problem`).
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.contract.explaining.names import Names
from cacheproof.contract.snippet import failed_inspection
from cacheproof.contract.steps import view_failed
from cacheproof.spec.kind import SpecKind

SHOWN = 200
"""The most characters of the answer a problem shows."""


def shape_problem(kind: SpecKind, impl: str, differences: Sequence[Any]) -> str | None:
    """The usage problem of the first view among `differences` (each a `StepDifference` or None)
    whose implementation answer the kind's reading cannot follow while the spec's answer it can;
    None when every answer is of its view's shape. A view that raised or that the implementation
    lacks is not a shape (it stays a divergence, as the checker reports it)."""
    for difference in differences:
        if difference is None:
            continue
        for view, wanted, seen in difference.views:
            reading = kind.readings.get(view)
            if reading is None or view_failed(view, seen) or not _reads(reading, wanted) or _reads(reading, seen):
                continue
            shape = kind.shapes.get(view, "what the spec answers")
            return (f"{impl}: {view}() answered {_short(seen)}, which is not of the shape the {kind.name} "
                    f"contract reads: {view}() returns {shape} (the spec answered {_short(wanted)} there). "
                    f"A usage problem, not a divergence: fix {view}() and check again")
    return None


NOT_ALLOWED = "returns what the contract does not allow"
"""How `contract.snippet.failed_inspection` ends a snippet whose inspection returned another shape."""


def inspection_problem(impl: str, messages: Sequence[str]) -> str | None:
    """The usage problem of the first of `messages` (counterexamples' messages) saying an
    inspection returned what the contract does not allow ("snapshot() returned {0: 1}, which is
    not a list of entries with key, state, refcount, nbytes, retain (...), after CALL"); None when
    none says so."""
    for message in messages:
        found = failed_inspection(message)
        if found is not None and found[1] == NOT_ALLOWED:
            said, _, call = message.rpartition(", after ")
            return (f"{impl}: {said} (after {call}). A usage problem, not a divergence: fix it and check "
                    "again (docs/contract.md says what it returns)")
    return None


def _reads(reading: Any, answer: Any) -> bool:
    try:
        return reading(answer, Names()) is not None
    except Exception:  # noqa: BLE001 - an answer the reading cannot follow
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "\u2026"
