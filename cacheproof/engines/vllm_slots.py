"""vLLM's EncoderDecoderCacheManager and EncoderCacheManager (`vllm/v1/core/encoder_cache_manager.py`)
behind the slot-budget contract (spec kind `slots`): the adapter classes behind
`cacheproof.engines.vllm:encoder_decoder_slots` and `:encoder_cache_slots`, whose comments state the
translations. The adapters decide no outcome the manager decides: a schedule's answer is
`check_and_update_cache`'s or `can_allocate`'s, the free slots are `num_free_slots`, the named
items are `get_freed_mm_hashes`'; what the manager gives back twice or keeps reaches the checker,
and the profile decides.
"""

from __future__ import annotations

from typing import Any

from cacheproof.adapt import Atomic, engine_call, require_members
from cacheproof.engines.vllm_encoder import EncoderRequest, encoder_manager_class, encoder_module_profile
from cacheproof.spec import InvalidArgumentError

__all__ = ["CACHING_MEMBERS", "MEMBERS", "VllmEncoderCacheSlots", "VllmEncoderDecoderSlots", "encoder_cache_slots",
           "encoder_decoder_slots"]

MEMBERS = ("can_allocate", "allocate", "free_encoder_input", "free", "get_freed_mm_hashes", "reset")
"""The manager's members the adapter calls."""

CACHING_MEMBERS = (*MEMBERS, "get_cached_num_encoder_embeds", "check_and_update_cache")
"""The members the caching adapter calls besides."""


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
            try:
                hit = self._cached_hit(engine_request, len(inputs) - 1)
            except InvalidArgumentError:
                self._unschedule(request)
                raise
            if hit:
                return True
            admitted = engine_call(self.manager, "can_allocate", engine_request, len(inputs) - 1, budget, pending)
            if not admitted:
                self._unschedule(request)  # the scheduler schedules no input can_allocate refused
                return admitted
            engine_call(self.manager, "allocate", engine_request, len(inputs) - 1)
            return admitted

    def _cached_hit(self, engine_request: EncoderRequest, input_id: int) -> bool:
        """Whether the input is served from the encoder cache: never, for a manager that caches
        nothing (the scheduler skips the cache for encoder-decoder models)."""
        return False

    def _unschedule(self, request: Any) -> None:
        inputs = self._inputs[request]
        inputs.pop()
        if not inputs:
            del self._inputs[request]

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


class VllmEncoderCacheSlots(VllmEncoderDecoderSlots):
    """vLLM's EncoderCacheManager speaking the slot-budget contract under caching "lru", the
    scheduler's requests kept beside it. The translations: the comment below the class."""

    def _cached_hit(self, engine_request: EncoderRequest, input_id: int) -> bool:
        cached = engine_call(self.manager, "get_cached_num_encoder_embeds", engine_request, input_id)
        wanted = engine_request.get_num_encoder_embeds(input_id)
        if cached is not None and cached != wanted:
            raise InvalidArgumentError(
                f"schedule({engine_request.request_id}, {engine_request.mm_features[input_id].identifier!r}, "
                f"n={wanted}): the cached item holds {cached} embeddings (the scheduler rejects the request)")
        return bool(engine_call(self.manager, "check_and_update_cache", engine_request, input_id))

    def pending_items(self) -> tuple:
        """((), the hashes in `freed` that are not in `cached`): what `get_freed_mm_hashes` answers
        next, read as the engine's state."""
        with self._atomic:
            return (), tuple(item for item in self.manager.freed if item not in self.manager.cached)

    def cached_items(self) -> tuple:
        """The hashes in `cached`, each (hash, `num_embeds_by_hash`, requests in its set): those in
        `freeable`, in its order, then the referenced ones by hash."""
        with self._atomic:
            cached, sizes = self.manager.cached, self.manager.num_embeds_by_hash
            held = sorted(item for item, requests in cached.items() if requests)
            return tuple((item, sizes.get(item), len(cached[item]))
                         for item in (*(item for item in self.manager.freeable if item in cached), *held))

    def holding_requests(self) -> tuple:
        """The request ids keyed in `request_cached_ids` or `request_hash_refs`, as ints, ascending."""
        with self._atomic:
            keyed = set(self.manager.request_cached_ids) | set(self.manager.request_hash_refs)
            return tuple(sorted(int(request_id) for request_id in keyed))


# `encoder_cache_slots(num_slots)`: vLLM's EncoderCacheManager behind the slot-budget contract,
# request by request, as the scheduler drives it (the tensor-cache adapter `encoder_cache` holds
# the same manager to the cache contract, key by key).
#
#     cacheproof check --spec slots --impl cacheproof.engines.vllm:encoder_cache_slots
#
# Profile `vllm-encoder-cache-requests` (misuse "trusted", caching "lru": docs/engines.md). As
# `encoder_decoder_slots` above, but a schedule first plays the scheduler's cache path
# (`Scheduler._try_schedule_encoder_inputs` for a model that is not encoder-decoder):
# `get_cached_num_encoder_embeds(req, i)` naming another count than n is InvalidArgumentError and
# the input is not kept (the scheduler rejects the request, `_reject_on_encoder_cache_embed_mismatch`);
# then `check_and_update_cache(req, i)` True is a hit, answered True with no budget asked; else
# `can_allocate(req, i, b, p)` and `allocate(req, i)`. pending_items(), cached_items() and
# holding_requests() read `freed`, `cached`, `num_embeds_by_hash`, `freeable`, `request_cached_ids`
# and `request_hash_refs`. `free(req)` frees the inputs `get_cached_input_ids` names, a set of ints
# iterated in ascending order here (the contract frees them in the order scheduled; the
# generator's inputs per request stay below the set's table size, where the two orders agree).


def _built(adapter: type, class_name: str, members: tuple, num_slots: int, manager_class: Any) -> Any:
    """`adapter` over a manager of `num_slots`, of `manager_class` or else vLLM's `class_name`, after
    checking it has `members`."""
    manager_class = manager_class or encoder_manager_class(class_name)
    require_members(manager_class, members)
    return adapter(manager_class(num_slots))


def encoder_cache_slots(num_slots: int, *, manager_class: Any = None) -> VllmEncoderCacheSlots:
    """vLLM's EncoderCacheManager of `num_slots` encoder embeddings as a caching slot budget.
    `manager_class` replaces `vllm.v1.core.encoder_cache_manager.EncoderCacheManager`."""
    return _built(VllmEncoderCacheSlots, "EncoderCacheManager", CACHING_MEMBERS, num_slots, manager_class)


encoder_cache_slots.profile = encoder_module_profile("vllm-encoder-cache-requests")


def encoder_decoder_slots(num_slots: int, *, manager_class: Any = None) -> VllmEncoderDecoderSlots:
    """vLLM's EncoderDecoderCacheManager of `num_slots` encoder embeddings as a slot budget.
    `manager_class` replaces `vllm.v1.core.encoder_cache_manager.EncoderDecoderCacheManager`."""
    return _built(VllmEncoderDecoderSlots, "EncoderDecoderCacheManager", MEMBERS, num_slots, manager_class)


encoder_decoder_slots.profile = encoder_module_profile("vllm-encoder-decoder")
