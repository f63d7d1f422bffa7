"""The verdict of a bounded refinement check, for every spec kind: how many states and calls were
checked, in how long, within which bound, and the disagreements between the concrete spec and its
z3 model (each kind's `Disagreement` renders itself: `describe()`, `python()`, `to_json()`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RefinementReport:
    """The spec refines the model within `bound` iff no call disagreed (`agrees`)."""

    bound: Any
    states: int
    calls: int
    seconds: float
    disagreements: tuple[Any, ...]
    disagreeing_calls: int

    @property
    def agrees(self) -> bool:
        return self.disagreeing_calls == 0

    def line(self) -> str:
        verdict = "agree" if self.agrees else f"DISAGREE on {self.disagreeing_calls} calls"
        return (
            f"spec refines model: {self.states} states, {self.calls} calls, {verdict} "
            f"({self.bound.describe()}; {self.seconds:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "agrees": self.agrees,
            "bound": self.bound._asdict(),
            "states": self.states,
            "calls": self.calls,
            "seconds": round(self.seconds, 3),
            "disagreeing_calls": self.disagreeing_calls,
            "disagreements": [d.to_json() for d in self.disagreements],
        }
