"""How the slot budget's view reads in a difference report, and the step its invariants judge.

The one view is `free_slots()`: the slots no scheduled, unfreed input holds. `slot_step` builds,
from an implementation's views before and after a call, the `SlotStep` the invariants of
spec/slots/invariants.py judge (S1 on the implementation's own count).
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.spec.kind import Naming, ViewPart
from cacheproof.spec.slots.invariants import SlotStep

BUDGET_RULE = ("a scheduled input takes its slots, and freeing it (or its request) gives them back once "
               "(docs/slots-contract.md, Slots)")


def free_slot_parts(free: Any, names: Naming) -> Sequence[ViewPart] | None:
    """The free-slot count as one part; None for an answer that is not an int."""
    if not isinstance(free, int) or isinstance(free, bool):
        return None
    return (ViewPart("free slots", names.value(free), ("S1", "S2"), BUDGET_RULE),)


SLOT_READINGS = {"free_slots": free_slot_parts}
"""The slot budget's view, as `SpecKind.readings`."""

SLOT_SHAPES = {"free_slots": "an int: the slots no scheduled, unfreed input holds (spec/slots/budget.py)"}
"""The shape of the view's answer, in words (`SpecKind.shapes`)."""


def slot_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any,
              semantics: Any) -> SlotStep:
    """The `SlotStep` of a call from the free slots before and after it (an implementation shows no
    inputs, so S2 and S3 are not judged on it)."""
    return SlotStep(call.op, size, after["free_slots"], raised=raised, result=result)
