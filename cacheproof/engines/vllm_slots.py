"""vLLM's EncoderDecoderCacheManager (`vllm/v1/core/encoder_cache_manager.py`) behind the slot-budget
contract (spec kind `slots`): the adapter class behind `cacheproof.engines.vllm:encoder_decoder_slots`,
whose comment states the translations. The adapter decides no outcome the manager decides: a
schedule's answer is `can_allocate`'s, the free slots are `num_free_slots`, the named items are
`get_freed_mm_hashes`'; what the manager gives back twice reaches the checker, and the profile decides.
"""

from __future__ import annotations

from typing import Any

from cacheproof.adapt import Atomic, engine_call, require_members
from cacheproof.engines.vllm_encoder import EncoderRequest, encoder_manager_class, encoder_module_profile

__all__ = ["MEMBERS", "VllmEncoderDecoderSlots", "encoder_decoder_slots"]

MEMBERS = ("can_allocate", "allocate", "free_encoder_input", "free", "get_freed_mm_hashes", "reset")
"""The manager's members the adapter calls."""


class VllmEncoderDecoderSlots:
    """vLLM's EncoderDecoderCacheManager speaking the slot-budget contract, the scheduler's requests
    kept beside it; `manager` is vLLM's object. The translations: the comment below the class."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._inputs: dict[Any, list] = {}  # request -> [(item, n), ...]: its scheduled inputs, in order
        self._atomic = Atomic(manager)

    def _request(self, request: Any) -> EncoderRequest:
        return EncoderRequest(str(request), self._inputs.setdefault(request, []))

    def schedule(self, request: Any, item: Any, n: int, *, budget: int, pending: int = 0) -> bool:
        with self._atomic:
            inputs = self._inputs.setdefault(request, [])
            inputs.append((item, n))
            engine_request = self._request(request)
            admitted = engine_call(self.manager, "can_allocate", engine_request, len(inputs) - 1, budget, pending)
            if not admitted:
                inputs.pop()  # the scheduler schedules no input can_allocate refused
                if not inputs:
                    del self._inputs[request]
                return admitted
            engine_call(self.manager, "allocate", engine_request, len(inputs) - 1)
            return admitted

    def free_input(self, request: Any, input: int) -> None:
        with self._atomic:
            return engine_call(self.manager, "free_encoder_input", self._request(request), input)

    def free(self, request: Any) -> None:
        with self._atomic:
            answer = engine_call(self.manager, "free", self._request(request))
            self._inputs.pop(request, None)
            return answer

    def end_step(self) -> Any:
        with self._atomic:
            return engine_call(self.manager, "get_freed_mm_hashes")

    def reset(self) -> None:
        with self._atomic:
            answer = engine_call(self.manager, "reset")
            self._inputs.clear()
            return answer

    def free_slots(self) -> Any:
        """`num_free_slots`, read as the engine's state, not as a member the adapter expects: a
        manager without it (its constructor never set it) answers the view with AttributeError,
        which the checker reports as a difference after the call that failed first."""
        with self._atomic:
            return self.manager.num_free_slots

    def pending_items(self) -> tuple:
        """(`allocated`, `to_free`): the hashes of this step and of the step before, read as the
        engine's state (as `free_slots`)."""
        with self._atomic:
            return tuple(self.manager.allocated), tuple(self.manager.to_free)


# `encoder_decoder_slots(num_slots)`: vLLM's EncoderDecoderCacheManager behind the slot-budget contract.
#
#     cacheproof check --spec slots --impl cacheproof.engines.vllm:encoder_decoder_slots
#
# Profile `vllm-encoder-decoder` (misuse "trusted": docs/engines.md). The manager is the scheduler's
# encoder budget of encoder-decoder models (Whisper), in encoder embeddings (one per slot); it
# caches nothing. The adapter plays the scheduler's requests around it: a request's `mm_features`
# are the inputs it scheduled, in order (`EncoderRequest`, shared with the encoder-cache adapter).
# - schedule(r, item, n, budget=b, pending=p) -> a new input (item, n) of request r, then
#   `can_allocate(req, i, b, p)`; its answer is the schedule's, and on True `allocate(req, i)`.
#   A refused input is not kept: the scheduler's request carries it, but it schedules it again
#   before any free, and the contract's refusal changes nothing;
# - free_input(r, i) -> `free_encoder_input(req, i)`;
# - free(r) -> `free(req)`, then the request is forgotten (the scheduler frees a request when it
#   finishes or is preempted; a preempted request is scheduled again from its first input);
# - end_step() -> `get_freed_mm_hashes()` (the scheduler calls it once per step, in
#   `SchedulerOutput.free_encoder_mm_hashes`);
# - reset() -> `reset()`, and the requests are forgotten (the scheduler resets the manager when the
#   model's weights change, `reset_encoder_cache`; the slot contract's reset ends every request);
# - free_slots() reads `num_free_slots`; pending_items() reads `allocated` and `to_free`.


def encoder_decoder_slots(num_slots: int, *, manager_class: Any = None) -> VllmEncoderDecoderSlots:
    """vLLM's EncoderDecoderCacheManager of `num_slots` encoder embeddings as a slot budget.
    `manager_class` replaces `vllm.v1.core.encoder_cache_manager.EncoderDecoderCacheManager`."""
    manager_class = manager_class or encoder_manager_class("EncoderDecoderCacheManager")
    require_members(manager_class, MEMBERS)
    return VllmEncoderDecoderSlots(manager_class(num_slots))


encoder_decoder_slots.profile = encoder_module_profile("vllm-encoder-decoder")
