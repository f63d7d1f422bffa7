"""How the slot budget's view reads in a difference report, and the step its invariants judge.

The views are `free_slots()`, the slots no scheduled, unfreed input holds (under caching, no cached
item); `pending_items()`, the items the next two end_steps name; `cached_items()`, the cached
items with their slots and holders; and `holding_requests()`, the requests a budget keeps state
for. All but the first are optional: a budget without one is compared on the rest and on its
answers. `slot_step` builds, from an implementation's views before and after
a call, the `SlotStep` the invariants of spec/slots/invariants.py judge (S1 on its own count, S3 on
its own pending items).
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.spec.kind import Naming, ViewPart, optional_method_views
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


CACHED_RULE = ("an item is cached from its first schedule until evicted, held by the requests whose held inputs "
               "name it; idle ones are evicted the first idle first (docs/slots-contract.md, Caching)")


def cached_item_parts(cached: Any, names: Naming) -> Sequence[ViewPart] | None:
    """The cached items as one part; None for an answer that is not a tuple."""
    if not isinstance(cached, tuple):
        return None
    return (ViewPart("cached items (item, slots, requests holding it)", names.value(cached), ("S2", "S4"),
                     CACHED_RULE),)


HOLDING_RULE = "a budget keeps per-request state only for a request holding an input (no leak per finished request)"


def holding_request_parts(requests: Any, names: Naming) -> Sequence[ViewPart] | None:
    """The holding requests as one part; None for an answer that is not a tuple."""
    if not isinstance(requests, tuple):
        return None
    return (ViewPart("requests holding an input", names.value(requests), (), HOLDING_RULE),)


SLOT_READINGS = {"free_slots": free_slot_parts, "pending_items": pending_item_parts,
                 "cached_items": cached_item_parts, "holding_requests": holding_request_parts}
"""The slot budget's views, as `SpecKind.readings`."""

SLOT_SHAPES = {
    "free_slots": "an int: the slots no scheduled, unfreed input holds (spec/slots/budget.py)",
    "pending_items": "a pair of tuples of item hashes: (this step's items, the step before's), each in the order "
                     "scheduled, once per scheduling; under caching ((), the items the next end_step names)",
    "cached_items": "a tuple of (item, slots, requests holding it): the idle items in eviction order, then the held "
                    "ones by item; () without caching",
    "holding_requests": "a tuple of request ids, ascending: the requests that hold an input",
}
"""The shape of each view's answer, in words (`SpecKind.shapes`)."""

SLOT_VIEW_READERS = optional_method_views("pending_items", "cached_items", "holding_requests")
"""Every view but `free_slots` is optional (`SpecKind.view_readers`): a budget that cannot show one is
compared on the rest."""


def slot_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any,
              semantics: Any) -> SlotStep:
    """The `SlotStep` of a call from the views before and after it (an implementation shows no
    inputs, so S2 and S4 are not judged on it; nor S3 on one without `pending_items`)."""
    return SlotStep(call.op, size, after["free_slots"], before.get("pending_items"), raised=raised, result=result,
                    caches=semantics.caching == "lru")
