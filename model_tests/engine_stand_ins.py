"""Stand-ins for the engines' own cache classes, with their public interfaces and behaviour as
docs/profiles.md and docs/adapters.md describe them (written here, not copied), so that the
adapters in examples/trtllm_adapter.py, vllm_adapter.py and sglang_adapter.py run in CI where
tensorrt_llm, vllm and sglang are not installed. Where an engine is installed, the adapters'
`factory` runs its real class instead (model_tests/test_engine_adapters.py).

SGLang's MultiModalStaticCache has one stand-in, model_tests/real_file_stand_ins.py's, whose API
is checked against the 0.5.23 file: the factories here run the example adapter over it
(`MultiModalStaticCache`, 0.5.23's size check) and over its `FlushingMultiModalStaticCache` (the
earlier `set`, which empties the cache for an embedding larger than the whole of it)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, Hashable, NamedTuple

from examples.sglang_adapter import SglangStaticCacheAdapter
from examples.trtllm_adapter import TrtllmTensorLRUAdapter
from examples.trtllm_reserving_adapter import TrtllmReservingAdapter
from examples.vllm_adapter import VllmEncoderCacheAdapter
from model_tests.real_file_stand_ins import EmbeddingResult, FlushingMultiModalStaticCache, MultiModalStaticCache


def _nbytes(tensor: Any) -> int:
    return tensor.numel() * tensor.element_size()


# TensorRT-LLM: tensorrt_llm/_torch/tensor_lru_cache.py, TensorLRUCache (upstream) --------------------


class _TrtllmEntry(NamedTuple):
    value: Any
    size_bytes: int


class _TrtllmStats(NamedTuple):
    max_bytes: int
    current_bytes: int
    item_count: int


class StandInTensorLRUCache:
    """Byte LRU: put refuses (False) a tensor over max_bytes, else replaces the key as newest and
    evicts oldest entries until within max_bytes; get/pop answer a miss with None; get promotes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.current_bytes = 0
        self._items: OrderedDict[Hashable, _TrtllmEntry] = OrderedDict()

    def put(self, key: Hashable, value: Any) -> bool:
        size = _nbytes(value)
        if size > self.max_bytes:
            return False
        old = self._items.pop(key, None)
        if old is not None:
            self.current_bytes -= old.size_bytes
        self._items[key] = _TrtllmEntry(value, size)
        self.current_bytes += size
        while self.current_bytes > self.max_bytes:
            self.current_bytes -= self._items.popitem(last=False)[1].size_bytes
        return True

    def get(self, key: Hashable) -> Any:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key].value

    def pop(self, key: Hashable) -> Any:
        entry = self._items.pop(key, None)
        if entry is None:
            return None
        self.current_bytes -= entry.size_bytes
        return entry.value

    def clear(self) -> None:
        self._items.clear()
        self.current_bytes = 0

    def stats(self) -> _TrtllmStats:
        return _TrtllmStats(self.max_bytes, self.current_bytes, len(self._items))

    def __len__(self) -> int:
        return len(self._items)


# TensorRT-LLM PR #17876: TensorLRUCache with reservations ------------------------------------------


class StandInEntryState(Enum):
    ABSENT = auto()
    RESERVED = auto()
    READY = auto()


class StandInAllocation(Enum):
    READY_HIT = auto()
    NEW_RESERVATION = auto()
    RESERVATION_HIT = auto()


@dataclass
class _ReservingEntry:
    state: StandInEntryState
    size_bytes: int
    reference_count: int
    retain_after_release: bool
    value: Any = None


class _ReservingStats(NamedTuple):
    max_bytes: int
    current_bytes: int
    reserved_bytes: int
    pinned_bytes: int
    item_count: int


class StandInReservingTensorLRUCache:
    """States ABSENT -> RESERVED -> READY with reference counts. allocate: a READY hit pins and
    promotes, a reservation hit only counts, a miss reserves; None when reserved + pinned bytes
    would exceed max_bytes; ValueError for another size or retention. A plain put inserts or
    replaces an idle entry, then evicts idle entries oldest first while over max_bytes, the new one
    included (so with the space pinned it evicts itself and still returns True). The strict put
    (expected_state=RESERVED) stores a reservation's tensor, never evicting: make_space_for does."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.current_bytes = self.reserved_bytes = self.pinned_bytes = 0
        self._items: OrderedDict[Hashable, _ReservingEntry] = OrderedDict()

    def allocate(self, key: Hashable, expected_bytes: int, *, retain_after_release: bool = True) -> Any:
        if expected_bytes <= 0 or expected_bytes > self.max_bytes:
            raise ValueError(f"expected_bytes {expected_bytes} must be positive and within {self.max_bytes}")
        entry = self._items.get(key)
        in_use = self.reserved_bytes + self.pinned_bytes
        if entry is None:
            if in_use + expected_bytes > self.max_bytes:
                return None
            self._items[key] = _ReservingEntry(StandInEntryState.RESERVED, expected_bytes, 1, retain_after_release)
            self.reserved_bytes += expected_bytes
            return StandInAllocation.NEW_RESERVATION
        if (entry.size_bytes, entry.retain_after_release) != (expected_bytes, retain_after_release):
            raise ValueError("the existing entry's size or retention does not match")
        if entry.state is StandInEntryState.RESERVED:
            entry.reference_count += 1
            return StandInAllocation.RESERVATION_HIT
        if entry.reference_count == 0:
            if in_use + entry.size_bytes > self.max_bytes:
                return None
            self.pinned_bytes += entry.size_bytes
        entry.reference_count += 1
        self._items.move_to_end(key)
        return StandInAllocation.READY_HIT

    def get(self, key: Hashable) -> Any:
        entry = self._items.get(key)
        if entry is None or entry.state is not StandInEntryState.READY:
            return None
        self._items.move_to_end(key)
        return entry.value

    def put(self, key: Hashable, value: Any, *, expected_state: Any = None) -> bool:
        size = _nbytes(value)
        if expected_state is StandInEntryState.RESERVED:
            return self._store_reserved(key, value, size)
        if size > self.max_bytes:
            return False
        old = self._items.get(key)
        if old is not None:
            if old.state is not StandInEntryState.READY or old.reference_count:
                raise RuntimeError("cannot replace a reserved or referenced cache entry")
            del self._items[key]
            self.current_bytes -= old.size_bytes
        self._items[key] = _ReservingEntry(StandInEntryState.READY, size, 0, True, value)
        self.current_bytes += size
        self._evict_idle_while_over()
        return True

    def make_space_for(self, key: Hashable, *, pending_output_bytes: int = 0) -> list[Hashable]:
        entry = self._items.get(key)
        if entry is None or entry.state is not StandInEntryState.RESERVED:
            raise RuntimeError("make_space_for requires an existing reserved entry")
        needed = self.current_bytes + pending_output_bytes + entry.size_bytes - self.max_bytes
        victims, freed = [], 0
        for victim, candidate in self._items.items():
            if freed >= needed:
                break
            if candidate.state is StandInEntryState.READY and candidate.reference_count == 0:
                victims.append(victim)
                freed += candidate.size_bytes
        if freed < needed:
            raise RuntimeError("reserved entry does not have enough removable cache space")
        for victim in victims:
            self.current_bytes -= self._items.pop(victim).size_bytes
        return victims

    def release(self, key: Hashable) -> Hashable | None:
        entry = self._items.get(key)
        if entry is None or entry.reference_count == 0:
            raise RuntimeError("cannot release an unreferenced cache entry")
        entry.reference_count -= 1
        if entry.reference_count:
            return None
        if entry.state is StandInEntryState.RESERVED:
            self.reserved_bytes -= entry.size_bytes
            del self._items[key]
            return None
        self.pinned_bytes -= entry.size_bytes
        if entry.retain_after_release:
            return None
        self.current_bytes -= entry.size_bytes
        del self._items[key]
        return key

    def pop(self, key: Hashable) -> Any:
        entry = self._items.get(key)
        if entry is None:
            return None
        if entry.reference_count:
            raise RuntimeError("cannot remove a referenced cache entry")
        del self._items[key]
        self.current_bytes -= entry.size_bytes
        return entry.value

    def clear(self) -> None:
        if self.reserved_bytes or self.pinned_bytes:
            raise RuntimeError("cannot clear cache with live references or reservations")
        self._items.clear()
        self.current_bytes = 0

    def stats(self) -> _ReservingStats:
        return _ReservingStats(self.max_bytes, self.current_bytes, self.reserved_bytes, self.pinned_bytes,
                               len(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def _store_reserved(self, key: Hashable, value: Any, size: int) -> bool:
        entry = self._items.get(key)
        found = StandInEntryState.ABSENT if entry is None else entry.state
        if found is not StandInEntryState.RESERVED:
            raise RuntimeError(f"cache insertion expected RESERVED, found {found.name}")
        if size != entry.size_bytes:
            raise ValueError(f"tensor size ({size}) does not match reserved bytes ({entry.size_bytes})")
        if self.current_bytes + size > self.max_bytes:
            raise RuntimeError("reserved entry does not have enough cache space")
        entry.state, entry.value = StandInEntryState.READY, value
        self.reserved_bytes -= size
        self.pinned_bytes += size
        self.current_bytes += size
        self._items.move_to_end(key)
        return True

    def _evict_idle_while_over(self) -> None:
        for key, entry in list(self._items.items()):
            if self.current_bytes <= self.max_bytes:
                break
            if entry.state is StandInEntryState.READY and entry.reference_count == 0:
                self.current_bytes -= self._items.pop(key).size_bytes


class RoomCheckedReservingTensorLRUCache(StandInReservingTensorLRUCache):
    """The fix: a plain put that cannot fit beside the pinned bytes is refused (False) up front."""

    def put(self, key: Hashable, value: Any, *, expected_state: Any = None) -> bool:
        if expected_state is None and _nbytes(value) + self.pinned_bytes > self.max_bytes:
            old = self._items.get(key)
            if old is None or (old.state is StandInEntryState.READY and not old.reference_count):
                return False
        return super().put(key, value, expected_state=expected_state)


# vLLM: vllm/v1/core/encoder_cache_manager.py, EncoderCacheManager ((request, input_id) methods) -----


class StandInEncoderCacheManager:
    """Slots bookkeeping by request-id sets; idle entries in `freeable`, oldest idle first;
    can_allocate evicts from its front until the item fits; freed hashes collect in `freed`."""

    def __init__(self, cache_size: int) -> None:
        self.cache_size = cache_size
        self.num_free_slots = self.num_freeable_slots = cache_size
        self.cached: dict[Hashable, set[str]] = {}
        self.freeable: OrderedDict[Hashable, int] = OrderedDict()
        self.freed: list[Hashable] = []
        self.num_embeds: dict[Hashable, int] = {}  # each cached item's size

    def get_cached_num_encoder_embeds(self, request: Any, input_id: int) -> int | None:
        return self.num_embeds.get(request.mm_features[input_id].identifier)

    def check_and_update_cache(self, request: Any, input_id: int) -> bool:
        key = request.mm_features[input_id].identifier
        if key not in self.cached:
            return False
        if not self.cached[key]:
            self.num_freeable_slots -= self.freeable.pop(key)
        self.cached[key].add(request.request_id)
        return True

    def can_allocate(self, request: Any, input_id: int, encoder_compute_budget: int, num_embeds_to_schedule: int,
                     ) -> bool:
        size = request.get_num_encoder_embeds(input_id)
        if size > encoder_compute_budget:
            return False
        size += num_embeds_to_schedule
        if size > self.num_freeable_slots:
            return False
        while size > self.num_free_slots:
            key, freed_size = self.freeable.popitem(last=False)
            del self.cached[key], self.num_embeds[key]
            self.freed.append(key)
            self.num_free_slots += freed_size
        return True

    def allocate(self, request: Any, input_id: int) -> None:
        size = request.get_num_encoder_embeds(input_id)
        assert self.num_free_slots >= size and self.num_freeable_slots >= size
        key = request.mm_features[input_id].identifier
        self.cached.setdefault(key, set()).add(request.request_id)
        self.num_embeds[key] = size
        self.num_free_slots -= size
        self.num_freeable_slots -= size

    def free_encoder_input(self, request: Any, input_id: int) -> None:
        key = request.mm_features[input_id].identifier
        if not self.cached.get(key):
            return
        self.cached[key].discard(request.request_id)
        if not self.cached[key]:
            self.freeable[key] = request.get_num_encoder_embeds(input_id)
            self.num_freeable_slots += self.freeable[key]

    def get_freed_mm_hashes(self) -> list[Hashable]:
        freed, self.freed = self.freed, []
        return freed

    def reset(self) -> None:
        self.cached.clear()
        self.num_embeds.clear()
        self.freeable.clear()
        self.freed.clear()
        self.num_free_slots = self.num_freeable_slots = self.cache_size


# Factories: the examples' adapters over the stand-ins --------------------------------------------------


def trtllm_stand_in(capacity_bytes: int) -> TrtllmTensorLRUAdapter:
    return TrtllmTensorLRUAdapter(capacity_bytes, StandInTensorLRUCache)


def vllm_stand_in(capacity_bytes: int) -> VllmEncoderCacheAdapter:
    return VllmEncoderCacheAdapter(capacity_bytes, StandInEncoderCacheManager)


def sglang_stand_in(capacity_bytes: int) -> SglangStaticCacheAdapter:
    return SglangStaticCacheAdapter(capacity_bytes, FlushingMultiModalStaticCache, EmbeddingResult)


def sglang_fixed_stand_in(capacity_bytes: int) -> SglangStaticCacheAdapter:
    return SglangStaticCacheAdapter(capacity_bytes, MultiModalStaticCache, EmbeddingResult)


def trtllm_reserving_stand_in(capacity_bytes: int) -> TrtllmReservingAdapter:
    return TrtllmReservingAdapter(capacity_bytes, StandInReservingTensorLRUCache, StandInEntryState)


def trtllm_reserving_fixed_stand_in(capacity_bytes: int) -> TrtllmReservingAdapter:
    return TrtllmReservingAdapter(capacity_bytes, RoomCheckedReservingTensorLRUCache, StandInEntryState)
