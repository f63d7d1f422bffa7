"""The slot budget's invariants S1-S3 as named predicates in one table, each with the bug it excludes.

Every predicate judges one `SlotStep`: the free slots after a call, the items pending before it
((this step's, the step before's), as `pending_items()` answers), and, where the judge knows it
(the spec judging itself), the snapshot after it (spec/slots/budget.py's shape: free slots, the
requests' inputs, the items of this step and of the step before). S1 and S3 are judged on an
implementation's own answers too (its `free_slots()` and `pending_items()`); S2 needs the inputs a
budget holds, which only the spec shows. Each rule is written once as a finder: None when the step
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


def held_slots(snapshot: tuple) -> int:
    """The slots of every scheduled, unfreed input of a snapshot."""
    return sum(n for _, inputs in snapshot[1] for _, n, held in inputs if held)


def _bounded(step: SlotStep) -> str | None:
    free = step.free_after
    if not isinstance(free, int) or isinstance(free, bool) or not 0 <= free <= step.num_slots:
        return f"the budget has {free!r} free slots of {step.num_slots}"
    return None


def _accounted(step: SlotStep) -> str | None:
    if step.after is None:
        return None
    held = held_slots(step.after)
    if step.free_after != step.num_slots - held:
        return f"{step.free_after} slots are free while scheduled inputs hold {held} of {step.num_slots}"
    return None


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
)

SLOT_INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in SLOT_INVARIANTS}
_STATE_INVARIANTS = ("S1", "S2")


def check_state(num_slots: int, snapshot: tuple) -> None:
    """Raise `InvariantViolation` if the state breaks S1 or S2."""
    step = SlotStep(None, num_slots, snapshot[0], (snapshot[2], snapshot[3]), snapshot)
    for name in _STATE_INVARIANTS:
        witness = SLOT_INVARIANTS_BY_NAME[name].find(step)
        if witness is not None:
            raise InvariantViolation(f"{name} broken: {SLOT_INVARIANTS_BY_NAME[name].rule}: {witness}")
