"""The encoder slot budget's operation table: every operation of docs/slots-contract.md, once.

The budget is what a scheduler asks before it runs an encoder over a request's multimodal input.
Where the encoder's outputs are not cached (vLLM's EncoderDecoderCacheManager, for encoder-decoder
models), an input takes its slots (encoder embeddings) while it is scheduled, gives them back when
freed, and the items scheduled in one step are named again, for the runner to drop their outputs,
at the second step's end after it. Where they are (semantics caching "lru": vLLM's
EncoderCacheManager), an item's slots are taken by its one cached entry until it is evicted.

Domains: "request" (an int request id), "item" (a str: the item's hash, vLLM's mm_hash), "count"
(an int >= 0), "input" (an int: the index of one of a request's scheduled inputs, from 0 in the
order scheduled).
"""

from __future__ import annotations

from cacheproof.spec.kind import Argument, Operation

_REQUEST = Argument("request", "request")
_BAD = "InvalidArgumentError"
_STATE = "WrongStateError"

SLOT_OPERATIONS: tuple[Operation, ...] = (
    Operation("schedule", (_REQUEST, Argument("item", "item"), Argument("n", "count"),
                           Argument("budget", "count", keyword=True),
                           Argument("pending", "count", keyword=True, default="0")),
              "bool", (_BAD,), True,
              summary="True, taking n slots for a new input of the request (item scheduled in this step), when n is at "
                      "most the compute budget and n + pending at most the free slots; False, changing nothing, "
                      "otherwise. Caching: a cached item is a hit (True, no slots, no budget; InvalidArgumentError "
                      "when cached with other than n slots), and a miss evicts idle items, the first idle first, to fit"),
    Operation("free_input", (_REQUEST, Argument("input", "input")), "None", (_BAD, _STATE), True,
              summary="give back the slots of one input the request holds; WrongStateError for an input it does not "
                      "hold (never scheduled, or freed already)"),
    Operation("free", (_REQUEST,), "None", (_BAD,), True,
              summary="give back the slots of every input the request holds and forget the request (a request that "
                      "holds none: nothing changes)"),
    Operation("end_step", (), "items", (), True,
              summary="end the scheduler's step: the items scheduled in the step before this one, once per "
                      "scheduling, in order (the runner drops their encoder outputs). Caching: the items evicted "
                      "since the last end_step and not cached again, once per eviction"),
    Operation("reset", (), "None", (), True,
              summary="every slot free, every request forgotten, no item left to name"),
)
"""The slot budget's operations, in the order the checker lists them."""

SLOT_TYPES: dict[str, str] = {
    "request": "int", "item": "str", "count": "int", "input": "int", "bool": "bool", "items": "list[str]",
    "None": "None",
}
"""The Python type of each argument domain and result above, as docs/slots-contract.md's signatures
write them."""

ALL_SLOT_OPERATIONS: tuple[str, ...] = tuple(op.name for op in SLOT_OPERATIONS)
"""Every operation name of the slot-budget contract, in table order."""
