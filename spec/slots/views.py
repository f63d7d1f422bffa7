"""How the slot budget's view reads in a difference report, and the step its invariants judge.

The views are `free_slots()`, the slots no scheduled, unfreed input holds, and `pending_items()`,
the items the next two end_steps name (optional: a budget without it is compared on its free slots
and end_step's answers alone). `slot_step` builds, from an implementation's views before and after
a call, the `SlotStep` the invariants of spec/slots/invariants.py judge (S1 on its own count, S3 on
its own pending items).
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.spec.kind import Naming, ViewPart, ViewReader
from cacheproof.spec.slots.invariants import SlotStep

BUDGET_RULE = ("a scheduled input takes its slots, and freeing it (or its request) gives them back once "
               "(docs/slots-contract.md, Slots)")


def free_slot_parts(free: Any, names: Naming) -> Sequence[ViewPart] | None:
    """The free-slot count as one part; None for an answer that is not an int."""
    if not isinstance(free, int) or isinstance(free, bool):
        return None
    return (ViewPart("free slots", names.value(free), ("S1", "S2"), BUDGET_RULE),)


PENDING_RULE = "end_step names the items of the step before it, and those of its own step at the next one"


def pending_item_parts(pending: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(this step's items, the step before's) as two parts; None for another shape."""
    if not (isinstance(pending, tuple) and len(pending) == 2 and all(isinstance(part, tuple) for part in pending)):
        return None
    this_step, step_before = pending
    return (ViewPart("items of this step", names.value(this_step), ("S3",), PENDING_RULE),
            ViewPart("items of the step before", names.value(step_before), ("S3",), PENDING_RULE))


SLOT_READINGS = {"free_slots": free_slot_parts, "pending_items": pending_item_parts}
"""The slot budget's views, as `SpecKind.readings`."""

SLOT_SHAPES = {
    "free_slots": "an int: the slots no scheduled, unfreed input holds (spec/slots/budget.py)",
    "pending_items": "a pair of tuples of item hashes: (this step's items, the step before's), each in the order "
                     "scheduled, once per scheduling",
}
"""The shape of each view's answer, in words (`SpecKind.shapes`)."""

SLOT_VIEW_READERS = {
    "pending_items": ViewReader(lambda target, model: target.pending_items(), lambda model: "cache.pending_items()",
                                optional=True),
}
"""`pending_items` is optional (`SpecKind.view_readers`): a budget that cannot show it is compared
on the rest."""


def slot_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any,
              semantics: Any) -> SlotStep:
    """The `SlotStep` of a call from the views before and after it (an implementation shows no
    inputs, so S2 is not judged on it; nor S3 on one without `pending_items`)."""
    return SlotStep(call.op, size, after["free_slots"], before.get("pending_items"), raised=raised, result=result)
