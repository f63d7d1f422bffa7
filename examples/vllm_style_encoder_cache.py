"""A vLLM-style encoder-cache manager, and an adapter that holds it to the cacheproof contract.

`EncoderCacheManager` is written from the public description of vLLM's v1 scheduler-side
encoder cache manager (docs/adapters.md cites it): each entry is the set of request ids that
reference it; entries whose set is empty sit in `freeable` in the order they became idle;
`can_allocate` evicts from the front of `freeable` as a side effect; evicted keys collect in
`freed` until the worker drains them. Capacity is counted in slots (encoder embeddings); here one
slot is one byte. The values themselves live in a plain dict on the "worker" side.

`EncoderCacheAdapter` exposes the contract's operations on top of it, changing the design only
where the contract's interface forces it: each reference is a synthetic request id
(`cacheproof.adapt.References`), stats() is computed from snapshot() (`stats_from_snapshot`), argument
checks are the contract's, and operations the design has no name for (put, pop, evict) are
composed from its calls. Where the design trusts its caller (a free of an unknown request, a hit
with another retain flag) the adapter trusts too; a hit with another size is rejected, as vLLM's
scheduler rejects a request whose cached item holds another embedding count. `cacheproof check`
reports where this diverges.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Hashable

from cacheproof.adapt import References, stats_from_snapshot
from cacheproof.spec import (
    Acquired,
    CacheStats,
    CapacityError,
    ConflictError,
    EntryState,
    EntryView,
    UnknownKeyError,
    WrongStateError,
)
from cacheproof.spec.cache import arguments

RequestId = str


class EncoderCacheManager:
    """Bookkeeping of cached encoder outputs by reference sets, in slots.

    Attributes:
        cache_size: slots in all.
        num_free_slots: slots held by no cached entry (cache_size minus every cached entry's size).
        num_freeable_slots: slots held by no referenced entry (free slots plus idle entries).
        cached: key -> ids of the requests referencing it; an empty set means idle.
        freeable: idle key -> size, in the order the entries became idle; evicted from the front.
        freed: keys evicted since the last `get_freed_keys()`.
    """

    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.num_free_slots = cache_size
        self.num_freeable_slots = cache_size
        self.cached: dict[Hashable, set[RequestId]] = {}
        self.freeable: OrderedDict[Hashable, int] = OrderedDict()
        self.freed: list[Hashable] = []

    def check_and_update_cache(self, request_id: RequestId, key: Hashable) -> bool:
        """On a hit, add the request to the entry's set (an idle entry leaves `freeable`)."""
        if key not in self.cached:
            return False
        if not self.cached[key]:
            self.num_freeable_slots -= self.freeable.pop(key)
        self.cached[key].add(request_id)
        return True

    def can_allocate(self, size: int, compute_budget: int, num_embeds_to_schedule: int) -> bool:
        """Whether `size` more slots fit this step; evicts idle entries, oldest idle first, to make them fit."""
        if size > compute_budget:
            return False
        needed = size + num_embeds_to_schedule
        if needed <= self.num_free_slots:
            return True
        if needed > self.num_freeable_slots:
            return False
        while needed > self.num_free_slots:
            key, evicted_size = self.freeable.popitem(last=False)
            del self.cached[key]
            self.freed.append(key)
            self.num_free_slots += evicted_size
        return True

    def allocate(self, request_id: RequestId, key: Hashable, size: int) -> None:
        """Claim `size` slots for a new entry referenced by the request (after `can_allocate`)."""
        assert self.num_free_slots >= size and self.num_freeable_slots >= size
        self.cached.setdefault(key, set()).add(request_id)
        self.num_free_slots -= size
        self.num_freeable_slots -= size

    def free_encoder_input(self, request_id: RequestId, key: Hashable, size: int) -> None:
        """Drop the request's reference; an entry left with none becomes the newest freeable one."""
        if not self.cached.get(key):
            return
        self.cached[key].discard(request_id)
        if not self.cached[key]:
            self.freeable[key] = size
            self.num_freeable_slots += size

    def get_freed_keys(self) -> list[Hashable]:
        """The keys evicted since the last call, oldest first; the list is emptied."""
        freed, self.freed = self.freed, []
        return freed

    def discard_idle(self, key: Hashable) -> None:
        """Forget one idle entry (its slots already count as freeable). Not in the described design: pop needs it."""
        self.num_free_slots += self.freeable.pop(key)
        del self.cached[key]

    def reset(self) -> None:
        """Forget every entry (used when the encoder's weights change)."""
        self.cached.clear()
        self.freeable.clear()
        self.freed.clear()
        self.num_free_slots = self.num_freeable_slots = self.cache_size


class EncoderCacheAdapter:
    """The contract's cache operations on an `EncoderCacheManager` plus a worker-side value dict."""

    def __init__(self, capacity_bytes: int) -> None:
        self._capacity = arguments.check_capacity(capacity_bytes)
        self._manager = EncoderCacheManager(capacity_bytes)
        self._outputs: dict[Hashable, Any] = {}  # the worker's encoder outputs: no size accounting
        self._sizes: dict[Hashable, int] = {}  # each item's size, as its request's feature knows it
        self._retain: dict[Hashable, bool] = {}
        self._refs = References()  # the request ids holding each key

    def reserve(self, key: Hashable, nbytes: int, *, retain: bool = True) -> bool:
        arguments.check_key("reserve", key)
        arguments.check_nbytes("reserve", key, nbytes, self._capacity)
        arguments.check_retain("reserve", key, retain)
        if key in self._manager.cached:
            raise WrongStateError(f"reserve({key!r}): the key is already cached")
        return self._allocate(key, nbytes, retain)

    def acquire(self, key: Hashable, nbytes: int, *, retain: bool = True) -> Acquired:
        arguments.check_key("acquire", key)
        arguments.check_nbytes("acquire", key, nbytes, self._capacity)
        arguments.check_retain("acquire", key, retain)
        if key in self._manager.cached:
            if self._sizes[key] != nbytes:  # the scheduler rejects a request whose item has another size
                raise ConflictError(f"acquire({key!r}, nbytes={nbytes}): the cached item holds {self._sizes[key]} slots")
            self._manager.check_and_update_cache(self._refs.take(key), key)
            return Acquired.READY_HIT if key in self._outputs else Acquired.RESERVATION_HIT
        return Acquired.NEW_RESERVATION if self._allocate(key, nbytes, retain) else Acquired.BLOCKED

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        """The encoder ran for a scheduled item: the worker stores its output. Evictions happened at allocation."""
        arguments.check_key("commit", key)
        arguments.check_value("commit", key, value)
        if key not in self._manager.cached:
            raise UnknownKeyError(f"commit({key!r}): the item was never scheduled")
        if key in self._outputs:
            raise WrongStateError(f"commit({key!r}): the encoder output is already stored")
        self._outputs[key] = value
        return []

    def put(self, key: Hashable, value: Any) -> bool:
        """A request that computes the item and finishes at once: allocate, store, free."""
        arguments.check_key("put", key)
        size = arguments.check_value("put", key, value)
        arguments.check_put_size(key, size, self._capacity)
        if key in self._manager.cached:
            raise WrongStateError(f"put({key!r}): the key is already cached")
        if not self._allocate(key, size, True):
            return False
        self._outputs[key] = value
        self._manager.free_encoder_input(self._refs.give_back(key), key, size)
        return True

    def get(self, key: Hashable) -> Any:
        """The worker's stored output. Reads do not touch the scheduler's eviction order."""
        arguments.check_key("get", key)
        if key not in self._manager.cached:
            raise UnknownKeyError(f"get({key!r}): encoder cache miss")
        if key not in self._outputs:
            raise WrongStateError(f"get({key!r}): scheduled, but the encoder output is not stored yet")
        return self._outputs[key]

    def release(self, key: Hashable) -> bool:
        """Free one request's reference. The design never removes an entry here, so this is always False."""
        arguments.check_key("release", key)
        holder = self._refs.give_back(key) or "a request holding nothing"
        self._manager.free_encoder_input(holder, key, self._sizes.get(key, 0))
        return False

    def evict(self, nbytes: int) -> list[Hashable]:
        arguments.check_evict_nbytes(nbytes, self._capacity)
        if not self._manager.can_allocate(nbytes, self._capacity, 0):
            raise CapacityError(f"evict({nbytes}): not enough freeable slots")
        return self._drop_freed()

    def pop(self, key: Hashable) -> Any:
        arguments.check_key("pop", key)
        if key not in self._manager.cached:
            raise UnknownKeyError(f"pop({key!r}): the key is not cached")
        if self._manager.cached[key] or key not in self._outputs:
            raise WrongStateError(f"pop({key!r}): the entry is referenced or has no output")
        self._manager.discard_idle(key)
        value = self._outputs[key]
        self._forget(key)
        return value

    def clear(self) -> None:
        """reset(): the design forgets every entry, referenced or not."""
        self._manager.reset()
        for key in list(self._sizes):
            self._forget(key)

    def snapshot(self) -> tuple[EntryView, ...]:
        """Idle entries in eviction order, then referenced ones in allocation order (they have no recency)."""
        idle = list(self._manager.freeable)
        referenced = [key for key, requests in self._manager.cached.items() if requests]
        return tuple(self._view(key) for key in idle + referenced)

    def stats(self) -> CacheStats:
        return stats_from_snapshot(self._capacity, self.snapshot())

    def __len__(self) -> int:
        return len(self._manager.cached)

    def __contains__(self, key: object) -> bool:
        arguments.check_key("in", key)
        return key in self._manager.cached

    def _allocate(self, key: Hashable, size: int, retain: bool) -> bool:
        if not self._manager.can_allocate(size, self._capacity, 0):
            return False
        self._drop_freed()
        self._manager.allocate(self._refs.take(key), key, size)
        self._sizes[key], self._retain[key] = size, retain
        return True

    def _drop_freed(self) -> list[Hashable]:
        """The worker drops the outputs of the keys the scheduler evicted."""
        freed = self._manager.get_freed_keys()
        for key in freed:
            self._forget(key)
        return freed

    def _forget(self, key: Hashable) -> None:
        for table in (self._outputs, self._sizes, self._retain):
            table.pop(key, None)
        self._refs.forget(key)

    def _view(self, key: Hashable) -> EntryView:
        state = EntryState.READY if key in self._outputs else EntryState.RESERVED
        return EntryView(key, state, len(self._manager.cached[key]), self._sizes[key], self._retain[key])


def factory(capacity_bytes: int) -> EncoderCacheAdapter:
    """A fresh adapted encoder cache of `capacity_bytes` slots (one slot per byte)."""
    return EncoderCacheAdapter(capacity_bytes)


class ProfileEncoderCacheAdapter(EncoderCacheAdapter):
    """`EncoderCacheAdapter` held to the `vllm-encoder-cache` profile instead of the contract.

    The profile states vLLM's deliberate differences (spec/cache/profiles.py); two behaviours of the
    adapter above are not design choices but gaps of the adapter's own, closed here:
    - an item freed before its output was stored is forgotten (in vLLM the encoder runs in the step
      that scheduled it, so such an entry never stays);
    - the stored output must have the scheduled item's size (the worker's output is the item's).

        cacheproof check --impl examples.vllm_style_encoder_cache:profile_factory --profile vllm-encoder-cache
    """

    def commit(self, key: Hashable, value: Any) -> list[Hashable]:
        arguments.check_key("commit", key)
        size = arguments.check_value("commit", key, value)
        if key in self._sizes and key not in self._outputs and size != self._sizes[key]:
            raise ConflictError(f"commit({key!r}): {size} slots, {self._sizes[key]} were scheduled")
        return super().commit(key, value)

    def release(self, key: Hashable) -> bool:
        super().release(key)
        if key in self._manager.freeable and key not in self._outputs:
            self._manager.discard_idle(key)
            self._forget(key)
            return True
        return False


def profile_factory(capacity_bytes: int) -> ProfileEncoderCacheAdapter:
    """A fresh encoder cache adapted to the `vllm-encoder-cache` profile."""
    return ProfileEncoderCacheAdapter(capacity_bytes)
