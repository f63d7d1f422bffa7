"""vLLM's EncoderCacheManager (`vllm/v1/core/encoder_cache_manager.py`) behind the tensor-cache
contract: the adapter class behind `cacheproof.engines.vllm:encoder_cache`, whose comment states
the translations. The adapter decides no outcome the manager decides: results, references, sizes
and order are read back from vLLM's tables; what vLLM keeps (an abandoned reservation, an output
of another size) reaches the checker, and the profile decides.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from cacheproof.adapt import Atomic, Requests, engine_call, engine_member, require_members, stats_from_snapshot
from cacheproof.spec import Acquired, CacheStats, CapacityError, ConflictError, EntryState, EntryView, UnknownKeyError, WrongStateError

__all__ = ["EncoderRequest", "MEMBERS", "VllmEncoderCache", "encoder_manager_class", "encoder_module_profile"]

MEMBERS = ("get_cached_num_encoder_embeds", "check_and_update_cache", "can_allocate", "allocate", "free_encoder_input",
           "free", "get_freed_mm_hashes", "reset")
"""The manager's members the adapter calls."""


class _Feature:
    """What the manager reads of one multimodal item: its `identifier` (the mm_hash)."""

    __slots__ = ("identifier",)

    def __init__(self, identifier: Any) -> None:
        self.identifier = identifier


class EncoderRequest:
    """What the manager reads of a request: `request_id`, `mm_features[i]` and
    `get_num_encoder_embeds(i)`, over the inputs the Requests kit recorded for it."""

    def __init__(self, request_id: str, inputs: list) -> None:
        self.request_id = request_id
        self._inputs = inputs

    @property
    def mm_features(self) -> list:
        return [_Feature(key) for key, _ in self._inputs]

    def get_num_encoder_embeds(self, input_id: int) -> int:
        return self._inputs[input_id][1]


class VllmEncoderCache:
    """vLLM's EncoderCacheManager plus the worker's output dict, speaking the contract; `manager`
    is vLLM's object. The translations: the encoder-cache section of cacheproof/engines/vllm.py."""

    def __init__(self, manager: Any, capacity_bytes: int, requests: int | None = 2) -> None:
        self.manager = manager
        self.capacity_bytes = capacity_bytes
        self._requests = Requests(requests)
        self._outputs: dict[Any, Any] = {}  # the worker's encoder outputs
        self._atomic = Atomic(manager)

    def _call(self, name: str, *args: Any) -> Any:
        return engine_call(self.manager, name, *args)

    def _table(self, name: str) -> Any:
        return engine_member(self.manager, name)

    def _request(self, request_id: str) -> EncoderRequest:
        return EncoderRequest(request_id, self._requests.inputs.setdefault(request_id, []))

    def _drop_freed(self) -> list:
        freed = list(self._call("get_freed_mm_hashes"))
        for key in freed:
            self._outputs.pop(key, None)
            self._requests.forget(key)
        return freed

    def acquire(self, key: Any, nbytes: int, *, retain: bool = True) -> Any:
        with self._atomic:
            request_id, input_id = self._requests.take(key, nbytes)
            request = self._request(request_id)
            cached = self._call("get_cached_num_encoder_embeds", request, input_id)
            if cached is not None and cached != nbytes:  # the scheduler rejects the request; nothing changes
                self._requests.undo(key)
                raise ConflictError(f"acquire({key!r}, nbytes={nbytes}): the cached item holds {cached} embeddings")
            if self._call("check_and_update_cache", request, input_id):
                return Acquired.READY_HIT if key in self._outputs else Acquired.RESERVATION_HIT
            if not self._call("can_allocate", request, input_id, self.capacity_bytes, 0):
                self._requests.undo(key)
                return Acquired.BLOCKED
            self._drop_freed()
            self._call("allocate", request, input_id)
            return Acquired.NEW_RESERVATION

    def commit(self, key: Any, value: Any) -> list:
        with self._atomic:
            if key not in self._table("cached"):
                raise UnknownKeyError(f"commit({key!r}): the item was never scheduled")
            if key in self._outputs:
                raise WrongStateError(f"commit({key!r}): the encoder output is stored already")
            self._outputs[key] = value
            return []

    def get(self, key: Any) -> Any:
        with self._atomic:
            if key not in self._table("cached"):
                raise UnknownKeyError(f"get({key!r}): encoder cache miss")
            if key not in self._outputs:
                raise WrongStateError(f"get({key!r}): scheduled, but the encoder output is not stored yet")
            return self._outputs[key]

    def release(self, key: Any) -> bool:
        with self._atomic:
            holder = self._requests.give_back(key)
            finishes = holder is not None and not self._requests.holding(holder[0])
            if holder is None:
                request_id = f"unheld-{key!r}"
                holder = (request_id, len(self._requests.inputs.setdefault(request_id, [(key, 0)])) - 1)
            present = key in self._table("cached")
            request = self._request(holder[0])
            if finishes:
                self._call("free", request)  # the request's last input: it finishes, as the scheduler frees it
            else:
                self._call("free_encoder_input", request, holder[1])
            return present and key not in self._table("cached")

    def evict(self, nbytes: int) -> list:
        with self._atomic:
            probe = EncoderRequest("probe", [(None, nbytes)])
            if not self._call("can_allocate", probe, 0, self.capacity_bytes, 0):
                raise CapacityError(f"evict({nbytes}): can_allocate refuses {nbytes} embeddings")
            return self._drop_freed()

    def clear(self) -> None:
        with self._atomic:
            self._call("reset")
            self._outputs.clear()

    def _references(self, key: Any) -> int:
        holders = self._table("cached")[key]
        refs = getattr(self.manager, "request_hash_refs", None)
        if refs is None:
            return len(holders)
        return sum(refs.get(request_id, {}).get(key, 0) or 1 for request_id in holders)

    def snapshot(self) -> tuple:
        with self._atomic:
            cached, freeable = self._table("cached"), self._table("freeable")
            sizes = getattr(self.manager, "num_embeds_by_hash", freeable)
            order = [key for key in freeable if key in cached] + [key for key, held in cached.items() if held]
            return tuple(
                EntryView(key, EntryState.READY if key in self._outputs else EntryState.RESERVED,
                          self._references(key) if cached[key] else 0, sizes.get(key, 0), True)
                for key in order
            )

    def stats(self) -> CacheStats:
        return stats_from_snapshot(self.capacity_bytes, self.snapshot())

    def __len__(self) -> int:
        with self._atomic:
            return len(self._table("cached"))

    def __contains__(self, key: object) -> bool:
        with self._atomic:
            return key in self._table("cached")


# `encoder_cache(capacity_bytes)`: vLLM's EncoderCacheManager behind the tensor-cache contract.
#
#     cacheproof check --impl cacheproof.engines.vllm:encoder_cache
#
# Profile `vllm-encoder-cache` (every design choice is there). The manager
# (`vllm/v1/core/encoder_cache_manager.py`) is the scheduler's bookkeeping, in encoder
# embeddings (one per byte here); the adapter plays the scheduler and the worker around it:
# - acquire(k, n) -> a request's input of k, n embeddings (`cacheproof.adapt.Requests`: request
#   ids shared by several acquires, so one request may hold k twice, vLLM #54284), then the
#   0.34.0 scheduler's guard: `get_cached_num_encoder_embeds(req, i)` names another count than n
#   (ConflictError: the scheduler rejects the request, `_reject_on_encoder_cache_embed_mismatch`,
#   and nothing changes); then `check_and_update_cache(req, i)` (a hit: READY_HIT when the worker holds k's output, else
#   RESERVATION_HIT), else `can_allocate(req, i, capacity, 0)` (False: BLOCKED) and
#   `allocate(req, i)`; the hashes `get_freed_mm_hashes()` names are dropped from the worker;
# - commit(k, v) -> the worker stores the encoder's output for a scheduled item: UnknownKeyError
#   when k is not in `cached` (never scheduled), WrongStateError when the output is stored
#   already; the output's size is not looked at (vLLM does not), nothing is evicted;
# - get(k) -> the worker's output; UnknownKeyError when k is not cached, WrongStateError when
#   it has no output yet;
# - release(k) -> `free_encoder_input` of the input that holds k last (a request holding none:
#   a fresh one, whatever vLLM does with it), or `free(request)` when the adapter's records say it
#   is that request's last held input (the request finishes: the scheduler knows that itself and
#   frees it, whatever vLLM's `get_cached_input_ids` still names); True when k left `cached` (it
#   never does);
# - evict(n) -> `can_allocate` of a probe input of n embeddings (False: CapacityError), then the
#   freed hashes; clear() -> `reset()`, as the scheduler's `reset_encoder_cache` does on a weight
#   update while requests run: the requests outlive it, so a release after the clear still frees
#   the input of the request that held k (the adapter keeps its request records; vLLM must have
#   forgotten the request's cached inputs, else `free(request)` reaches inputs it no longer has).
# The snapshot reads vLLM's tables: idle entries in `freeable` order, then the referenced ones;
# a key's size from `num_embeds_by_hash`, its references from `request_hash_refs` (one per input
# of a request: the #54284 fix) or, without it, the size of its `cached` set. An abandoned
# reservation stays (idle, no output) and a commit of another size is stored: the adapter
# reports what vLLM keeps, and the profile decides.


def encoder_cache(capacity_bytes: int, *, manager_class: Any = None, requests: int | None = 2) -> Any:
    """vLLM's EncoderCacheManager of `capacity_bytes` embeddings as a contract cache; `requests`
    request ids shared round-robin by the acquires (None: one request per acquire).
    `manager_class` replaces `vllm.v1.core.encoder_cache_manager.EncoderCacheManager`."""
    manager_class = manager_class or encoder_manager_class("EncoderCacheManager")
    require_members(manager_class, MEMBERS)
    return VllmEncoderCache(manager_class(capacity_bytes), capacity_bytes, requests)


def encoder_manager_class(name: str) -> Any:
    """The class `name` of the installed `vllm.v1.core.encoder_cache_manager` (its import takes 5-15 s:
    vllm.config pulls transformers); ImportError saying how to install vLLM when it is missing,
    AdapterError when the module has no such class."""
    from cacheproof.engines.vllm import MISSING_VLLM

    try:
        module = importlib.import_module("vllm.v1.core.encoder_cache_manager")
    except ImportError as error:
        raise ImportError(f"{MISSING_VLLM} ({error})") from error
    return engine_member(module, name)



def encoder_module_profile(name: str) -> Callable[[], str]:
    """A factory's `profile` answering `name` after importing vLLM's encoder_cache_manager module
    (5-15 s: vllm.config pulls transformers), before any timed call, so the factory's first call
    is not a hang."""

    def profile() -> str:
        encoder_manager_class("EncoderCacheManager")
        return name

    return profile


encoder_cache.profile = encoder_module_profile("vllm-encoder-cache")
