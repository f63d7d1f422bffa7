"""The slot budget's invariants S1-S4 as named predicates in one table, each with the bug it excludes.

Every predicate judges one `SlotStep`: the free slots after a call, the items pending before it
((this step's, the step before's), as `pending_items()` answers), and, where the judge knows it
(the spec judging itself), the snapshot after it (spec/slots/budget.py's shape: free slots, the
requests' inputs, the items of this step and of the step before, the cached items, the items
evicted since the last end_step). S1 and S3 are judged on an implementation's own answers too (its
`free_slots()` and `pending_items()`); S2 and S4 need the inputs a budget holds, which only the
spec shows. Each rule is written once as a finder: None when the step
keeps the rule, else the witness (the concrete values that break it, in words).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class SlotStep(NamedTuple):
    """One slot-budget call as the invariants see it; `pending_before`/`after` None where not known."""

    operation: str | None  # None when judging a state on its own
    num_slots: int
    free_after: Any
    pending_before: Any = None  # (this step's items, the step before's) before the call
    after: tuple | None = None
    raised: bool = False
    result: Any = None
    caches: bool = False  # caching "lru": a cached item, not an input, takes the slots


class SlotInvariant(NamedTuple):
    """A named rule over a `SlotStep`: the rule in words, the real bug it excludes, the operations
    that could break it, and `find`: None when the step keeps it, else the witness in words."""

    name: str
    rule: str
    excludes: str
    touched_by: tuple[str, ...]
    find: Callable[[SlotStep], "str | None"]

    def holds(self, step: SlotStep) -> bool:
        return self.find(step) is None

    def witness(self, step: SlotStep) -> str:
        return self.find(step) or self.rule


class InvariantViolation(AssertionError):
    """A slot budget (or the spec itself) broke a named invariant. A bug, not a usage error."""


def held_slots(snapshot: tuple, caches: bool = False) -> int:
    """The slots taken in a snapshot: of every scheduled, unfreed input, or (`caches`) of every
    cached item."""
    if caches:
        return sum(slots for _, slots, _ in snapshot[4])
    return sum(n for _, inputs in snapshot[1] for _, n, held in inputs if held)


def _bounded(step: SlotStep) -> str | None:
    free = step.free_after
    if not isinstance(free, int) or isinstance(free, bool) or not 0 <= free <= step.num_slots:
        return f"the budget has {free!r} free slots of {step.num_slots}"
    return None


def _accounted(step: SlotStep) -> str | None:
    if step.after is None:
        return None
    held = held_slots(step.after, step.caches)
    if step.free_after != step.num_slots - held:
        holder = "cached items" if step.caches else "scheduled inputs"
        return f"{step.free_after} slots are free while {holder} hold {held} of {step.num_slots}"
    return None


def _held_item_evicted(step: SlotStep) -> str | None:
    if step.after is None or not step.caches:
        return None
    inputs: dict[str, dict[int, int]] = {}  # item -> {request: its held inputs of the item}
    for request, entries in step.after[1]:
        for item, _, held in entries:
            if held:
                holders = inputs.setdefault(item, {})
                holders[request] = holders.get(request, 0) + 1
    cached = {item: dict(holders) for item, _, holders in step.after[4]}
    for item, holders in inputs.items():
        if cached.get(item) != holders:
            return (f"item {item!r} is held by inputs of requests {holders} but the cache "
                    f"{'has it held by ' + repr(cached[item]) if item in cached else 'evicted it'}")
    stray = sorted(item for item, holders in cached.items() if holders and item not in inputs)
    return f"cached items {stray} are held by no input" if stray else None


def _freed_a_step_late(step: SlotStep) -> str | None:
    if step.operation != "end_step" or step.raised or step.pending_before is None:
        return None
    expected = list(step.pending_before[1])
    if step.result != expected:
        return f"end_step answered {step.result!r}; the step before the last scheduled {expected!r}"
    return None


SLOT_INVARIANTS: tuple[SlotInvariant, ...] = (
    SlotInvariant(
        "S1", "0 <= free slots <= the budget's slots: no slot is given back twice, none taken that is not free",
        "vLLM 0.34.0's EncoderDecoderCacheManager: `free_encoder_input` adds an input's embeddings whether "
        "it is held or not, so a request freed after one of its inputs, or an input never allocated, "
        "raises num_free_slots past cache_size and the encoder budget admits more than it holds",
        ("schedule", "free_input", "free", "reset"), _bounded),
    SlotInvariant(
        "S2", "free slots = the budget's slots - the slots of every scheduled input not freed",
        "a budget that forgets to take an input's slots (vLLM mutant #129's `num_encoder_embeds` "
        "never read) or to give them back, so it admits inputs that do not fit or starves the encoder",
        ("schedule", "free_input", "free", "reset"), _accounted),
    SlotInvariant(
        "S3", "end_step answers the items scheduled in the step before the last, once per scheduling, in "
        "order: an item's encoder output is dropped after the step that used it, never before, never "
        "forgotten",
        "vLLM mutants #139 and #144: a hash never put in `allocated`, or `to_free` never refilled, so the "
        "runner keeps an encoder output for ever (a leak of GPU memory per request)",
        ("end_step",), _freed_a_step_late),
    SlotInvariant(
        "S4", "under caching: an item is cached while an input holds it, and held by exactly the requests "
        "whose inputs name it; an idle item is held by none",
        "evicted while in use: an encoder output dropped while a scheduled request still reads it, or an "
        "item kept held after its last input was freed, so it is never evicted (vLLM #54284: one request "
        "repeating an item dropped its reference at the first free)",
        ("schedule", "free_input", "free", "reset"), _held_item_evicted),
)

SLOT_INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in SLOT_INVARIANTS}
_STATE_INVARIANTS = ("S1", "S2", "S4")


def check_state(num_slots: int, snapshot: tuple, caches: bool = False) -> None:
    """Raise `InvariantViolation` if the state breaks S1, S2 or S4."""
    step = SlotStep(None, num_slots, snapshot[0], (snapshot[2], snapshot[3]), snapshot, caches=caches)
    for name in _STATE_INVARIANTS:
        witness = SLOT_INVARIANTS_BY_NAME[name].find(step)
        if witness is not None:
            raise InvariantViolation(f"{name} broken: {SLOT_INVARIANTS_BY_NAME[name].rule}: {witness}")
