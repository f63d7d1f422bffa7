"""The invariants an implementation's own state breaks, as every report of every kind says them.

At a divergence the kind's invariants are judged on the implementation's own views (its snapshot
after the call; `contract.explaining.steps`, for the kinds with a `SpecKind.judge`), and each one broken is said first, before how the
implementation differs from the spec, with its witness: "your implementation breaks B7: block 1
has ref 0 while request 2 holds it". A report carries these lines in its `why`; `named` reads them
back for the JSON report and the HTML page, and `breaking_first` puts the divergences that leave
the implementation in a state breaking an invariant before those that do not.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence, TypeVar

from cacheproof.spec.kind import BrokenInvariant

BREAKS = "your implementation breaks"
"""How a line naming an invariant the implementation breaks begins."""

_LINE = re.compile(rf"^{BREAKS} (?P<name>[A-Za-z][A-Za-z0-9_]*): (?P<witness>.*)$")

Item = TypeVar("Item")


def line(broken: BrokenInvariant) -> str:
    """The line saying that the implementation breaks `broken`, with its witness."""
    return f"{BREAKS} {broken.name}: {broken.witness}"


def is_broken_line(text: str) -> bool:
    return _LINE.match(text) is not None


def named(lines: Sequence[str]) -> list[dict[str, str]]:
    """Each invariant `lines` say the implementation breaks: {"name", "witness"}, in order."""
    found = []
    for text in lines:
        match = _LINE.match(text)
        if match is not None:
            found.append({"name": match["name"], "witness": match["witness"]})
    return found


def split(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the lines naming a broken invariant, the others), each in order."""
    broken = [text for text in lines if is_broken_line(text)]
    return broken, [text for text in lines if not is_broken_line(text)]


def breaking_first(items: Sequence[Item], lines_of: Callable[[Item], Sequence[str]]) -> list[Item]:
    """`items` (divergences) with those whose lines name a broken invariant first; the order is
    otherwise kept."""
    breaking = [item for item in items if named(lines_of(item))]
    return breaking + [item for item in items if not named(lines_of(item))]


def ordered(examples: Sequence[Any], explanations: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Counterexamples and their explanations (an `Explanation` or None, in the same order), those
    leaving the implementation in a state breaking an invariant first (`breaking_first`)."""
    pairs = breaking_first(list(zip(examples, explanations)),
                           lambda pair: () if pair[1] is None else pair[1].lines())
    return [example for example, _ in pairs], [explanation for _, explanation in pairs]


def report_breaking_first(report: Any, lines_of: Callable[[Any], Sequence[str]]) -> Any:
    """`report` (a dataclass whose `counterexamples` is a sequence) with its counterexamples ordered
    by `breaking_first`."""
    examples = report.counterexamples
    return dataclasses.replace(report, counterexamples=type(examples)(breaking_first(examples, lines_of)))
