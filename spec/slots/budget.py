"""`SlotBudgetSpec`: the reference model of an encoder slot budget (vLLM's EncoderDecoderCacheManager).

Each operation is written as a TLA+ action: argument checks, then the guard on the state, then the
updates; every check runs before the first update, so a call that raises changes nothing. Checks
run in a fixed order: InvalidArgumentError (the request, then the other arguments in order) before
WrongStateError.

State: the free slots; per request, its inputs in the order scheduled, each (item, slots, held);
the items scheduled in this step and those of the step before, one per scheduling. Nothing is
cached: two requests that schedule one item each take its slots, and an item is named by end_step
once per scheduling.
"""

from __future__ import annotations

from cacheproof.spec.errors import InvalidArgumentError, WrongStateError
from cacheproof.spec.slots import invariants as slot_invariants
from cacheproof.spec.slots.semantics import SLOT_CONTRACT, SlotSemantics


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SlotBudgetSpec:
    """The executable spec of an encoder slot budget of `num_slots` slots (encoder embeddings), under
    `semantics` (spec/slots/semantics.py)."""

    def __init__(self, num_slots: int, semantics: SlotSemantics = SLOT_CONTRACT) -> None:
        if not _is_int(num_slots) or num_slots < 1:
            raise InvalidArgumentError(f"num_slots must be an int >= 1, got {num_slots!r}")
        self.num_slots = num_slots
        self.semantics = semantics
        self._free = num_slots
        self._inputs: dict[int, list[list]] = {}  # request -> [[item, slots, held], ...]
        self._this_step: list[str] = []
        self._last_step: list[str] = []

    def schedule(self, request: int, item: str, n: int, *, budget: int, pending: int = 0) -> bool:
        """True when `n` <= `budget` (the encoder's compute budget left in this step) and `n` +
        `pending` (slots of inputs the caller admitted in this pass and has not scheduled yet) <= the
        free slots: the request gets a new input of `item` holding `n` slots, and `item` joins this
        step's items. False, changing nothing, otherwise."""
        self._check_request("schedule", request)
        if not isinstance(item, str):
            raise InvalidArgumentError(f"schedule(item={item!r}): an item is named by its hash, a str")
        for name, value, least in (("n", n, 1), ("budget", budget, 0), ("pending", pending, 0)):
            if not _is_int(value) or value < least:
                raise InvalidArgumentError(f"schedule({name}={value!r}): must be an int >= {least}")
        if n > budget or n + pending > self._free:
            return False
        self._free -= n
        self._inputs.setdefault(request, []).append([item, n, True])
        self._this_step.append(item)
        return True

    def free_input(self, request: int, input: int) -> None:
        """Give back the slots of the request's input number `input` (0 the first it scheduled);
        WrongStateError when it holds no such input (never scheduled, or freed already)."""
        self._check_request("free_input", request)
        if not _is_int(input):
            raise InvalidArgumentError(f"free_input(input={input!r}): an input is an int, its index")
        inputs = self._inputs.get(request, [])
        if not 0 <= input < len(inputs) or not inputs[input][2]:
            raise WrongStateError(f"free_input({request}, {input}): request {request} holds no input {input}")
        inputs[input][2] = False
        self._free += inputs[input][1]

    def free(self, request: int) -> None:
        """Give back the slots of every input the request holds and forget it; nothing changes for a
        request that holds none. Under misuse "trusted", WrongStateError for a request one of whose
        inputs is freed already (the caller's misuse: such a budget gives that input back again)."""
        self._check_request("free", request)
        inputs = self._inputs.get(request, [])
        if self.semantics.misuse == "trusted" and not all(held for _, _, held in inputs):
            raise WrongStateError(f"free({request}): request {request} freed an input already")
        self._free += sum(n for _, n, held in inputs if held)
        self._inputs.pop(request, None)

    def end_step(self) -> list[str]:
        """End the step: the items scheduled in the step before this one, once per scheduling, in
        order; this step's items are named at the next end_step."""
        answer, self._last_step, self._this_step = self._last_step, self._this_step, []
        return answer

    def reset(self) -> None:
        """Every slot free, every request forgotten, no item left to name."""
        self._free = self.num_slots
        self._inputs.clear()
        self._this_step, self._last_step = [], []

    # Views and the Model protocol ---------------------------------------------------------------

    def free_slots(self) -> int:
        """The slots no scheduled, unfreed input holds."""
        return self._free

    def pending_items(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the items scheduled in this step, those of the step before): the next end_step names the
        second, the one after it the first."""
        return tuple(self._this_step), tuple(self._last_step)

    def snapshot(self) -> tuple:
        """(free slots, ((request, ((item, slots, held), ...)), ...) by request, this step's items,
        the step before's items)."""
        requests = tuple((request, tuple(tuple(entry) for entry in inputs))
                         for request, inputs in sorted(self._inputs.items()))
        return self._free, requests, tuple(self._this_step), tuple(self._last_step)

    def state_key(self) -> tuple:
        """The snapshot: it decides every later answer and view."""
        return self.snapshot()

    def copy(self) -> "SlotBudgetSpec":
        """An independent spec in the same state."""
        twin = SlotBudgetSpec(self.num_slots, self.semantics)
        twin._free = self._free
        twin._inputs = {request: [list(entry) for entry in inputs] for request, inputs in self._inputs.items()}
        twin._this_step, twin._last_step = list(self._this_step), list(self._last_step)
        return twin

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if the state breaks S1 or S2 (spec/slots/invariants.py)."""
        slot_invariants.check_state(self.num_slots, self.snapshot())

    def inputs_of(self, request: int) -> tuple[tuple[str, int, bool], ...]:
        """The request's inputs (item, slots, held), in the order scheduled (for the call generator)."""
        return tuple(tuple(entry) for entry in self._inputs.get(request, ()))

    def live_requests(self) -> tuple[int, ...]:
        """The requests with an input, ascending (for the call generator)."""
        return tuple(sorted(self._inputs))

    def __repr__(self) -> str:
        return f"SlotBudgetSpec(num_slots={self.num_slots}, free={self._free}, requests={len(self._inputs)})"

    def _check_request(self, operation: str, request: object) -> None:
        if not _is_int(request):
            raise InvalidArgumentError(f"{operation}(request={request!r}): a request id is an int")
