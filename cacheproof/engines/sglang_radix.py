"""SGLang's `RadixCache` (`python/sglang/srt/mem_cache/radix_cache.py`) behind the radix contract.

    cacheproof check --spec radix --impl cacheproof.engines.sglang:radix_cache

`radix_cache(capacity_tokens, *, cache_class=None, page_size=1)` builds SGLang's own
`TokenToKVPoolAllocator(capacity_tokens, int64, "cpu", None, need_sort=False)` (its slots are
1..capacity_tokens: slot 0 is SGLang's padding slot) and the installed `RadixCache` (or
`cache_class`) over it with `CacheInitParams(disable=False, req_to_token_pool=None, ...)`, the
LRU policy and `page_size`, and wraps them in `SglangRadixCache`. Profile `sglang-radix` (every
design choice is there, never here: misuse trusted, access stamps per node; see
spec/radix/semantics.py); the factory carries it and so does every adapted object (`profile`),
so a wrapper or a subclass factory keeps it. The adapter decides no outcome: every answer and
state change is SGLang's, and the snapshot is read back from SGLang's objects.

Translations, call by call (SGLang 0.5.23's names; a token sequence is `RadixKey(array("q",
tokens))`):
- `match_prefix(tokens)` -> `match_prefix(MatchPrefixParams(key))`'s `device_prefix_len`.
- `insert(tokens)` -> `alloc(len(tokens))` from the allocator (its None is CapacityError, nothing
  taken), each slot written with its token in the KV storage, then `insert(InsertParams(key,
  value=slots))`; SGLang leaves the duplicate slots (`slots[:prefix_len]`) to its caller, who
  frees them (`free`), as SGLang's own `_insert_cache` does. The answer is `prefix_len`.
- `lock(tokens)` -> `match_prefix`, then `inc_lock_ref(last_device_node)`.
- `unlock(tokens)` -> `dec_lock_ref(node)` on the node whose tokens are exactly `tokens` (the root
  for none), found by walking `root_node.children` (a read: SGLang's `match_prefix` would stamp access times, which
  an unlock does not); tokens that end at no node have no SGLang form: WrongStateError here (the
  profile's "trusted" misuse: a checker never makes such a call).
- `evict(n)` -> `evict(EvictParams(num_tokens=n))`'s `num_tokens_evicted`.
- `reset()` -> the scheduler's `flush_cache`: False while `protected_size()` is above 0 (a lock is
  held), else `RadixCache.reset()` and the allocator's `clear()` (SGLang's reset forgets the tree's
  slots; the scheduler clears the allocator beside it), True.
- `evictable_size()`, `protected_size()`, `total_size()` -> SGLang's own.
- `snapshot()`: the allocator's `available_size()`, SGLang's size counters, and per node under
  `root_node` its key's tokens, `value` (slots), the KV storage at those slots, `lock_ref` and
  `last_access_time`.
The KV storage is `kv`, a CPU int64 tensor of `capacity_tokens + 1` token ids, written at the slots
a call takes (SGLang's model writes KV at `out_cache_loc` there). The class keeps no lock (its
scheduler drives it from one thread): the adapter's lock serialises its calls as that thread
does. A member it lacks is `cacheproof.adapt.AdapterError`: a usage error (exit 2) naming it.
"""

from __future__ import annotations

from array import array
from typing import Any

from cacheproof.adapt import Atomic, engine_call, engine_member, require_members
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.radix.snapshot import write_snapshot

__all__ = ["SglangRadixCache", "radix_cache", "PROFILE"]

PROFILE = "sglang-radix"
_MISSING = (
    "cacheproof.engines.sglang needs SGLang (`pip install sglang`; docs/engines.md says how its RadixCache "
    "imports on a CPU-only machine), or pass cache_class= a class with its API"
)
MEMBERS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "reset", "evictable_size",
           "protected_size", "total_size")


def _sglang() -> dict[str, Any]:
    """SGLang's classes the adapter builds (ImportError naming the package when it is absent)."""
    try:
        from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
    except ImportError as error:
        raise ImportError(f"{_MISSING} ({error})") from error
    return {"RadixCache": RadixCache, "RadixKey": RadixKey, "TokenToKVPoolAllocator": TokenToKVPoolAllocator,
            "CacheInitParams": CacheInitParams, "MatchPrefixParams": MatchPrefixParams,
            "InsertParams": InsertParams, "EvictParams": EvictParams}


def radix_cache(capacity_tokens: int, *, cache_class: Any = None, page_size: int = 1) -> "SglangRadixCache":
    """SGLang's RadixCache over its real token allocator of `capacity_tokens` KV slots, adapted.
    ImportError naming the package when SGLang is not installed."""
    import torch

    if page_size != 1:
        raise InvalidArgumentError(
            f"page_size={page_size!r}: the adapter builds SGLang's token allocator (TokenToKVPoolAllocator), "
            "whose pages are single tokens; page_size must be 1"
        )
    names = _sglang()
    cache_class = names["RadixCache"] if cache_class is None else cache_class
    require_members(cache_class, MEMBERS)
    allocator = names["TokenToKVPoolAllocator"](capacity_tokens, torch.int64, "cpu", None, False)
    params = names["CacheInitParams"](disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=allocator,
                                      page_size=page_size)
    return SglangRadixCache(cache_class(params), allocator, names, capacity_tokens)


def _profile() -> str:
    """The profile; imports SGLang's module first (seconds), before any timed call."""
    _sglang()
    return PROFILE


radix_cache.profile = _profile


class SglangRadixCache:
    """A RadixCache speaking the radix contract; `cache` is SGLang's tree, `allocator` its pool."""

    profile = PROFILE

    def __init__(self, cache: Any, allocator: Any, names: dict[str, Any], capacity_tokens: int) -> None:
        import torch

        self.cache, self.allocator, self._names = cache, allocator, names
        self.num_slots = capacity_tokens
        self.kv = torch.full((capacity_tokens + 1,), -1, dtype=torch.int64)
        self._atomic = Atomic(cache)

    def _key(self, tokens: Any) -> Any:
        for token in tokens:
            if not isinstance(token, int) or isinstance(token, bool) or not -(2**63) <= token < 2**63:
                raise InvalidArgumentError(f"token {token!r} has no RadixKey form (an int64 array)")
        return self._names["RadixKey"](token_ids=array("q", tokens))

    def _match(self, tokens: Any) -> Any:
        return engine_call(self.cache, "match_prefix", self._names["MatchPrefixParams"](key=self._key(tokens)))

    def match_prefix(self, tokens: tuple[int, ...]) -> int:
        with self._atomic:
            return int(engine_member(self._match(tokens), "device_prefix_len"))

    def insert(self, tokens: tuple[int, ...]) -> int:
        import torch

        with self._atomic:
            key = self._key(tokens)
            slots = engine_call(self.allocator, "alloc", len(tokens))
            if slots is None:
                raise CapacityError(f"insert: {len(tokens)} tokens need {len(tokens)} KV slots; "
                                    f"SGLang's allocator has {self.allocator.available_size()} free")
            self.kv[slots] = torch.tensor(tokens, dtype=torch.int64)
            result = engine_call(self.cache, "insert", self._names["InsertParams"](key=key, value=slots))
            cached = int(engine_member(result, "prefix_len"))
            self.allocator.free(slots[:cached])
            return cached

    def lock(self, tokens: tuple[int, ...]) -> int:
        with self._atomic:
            result = self._match(tokens)
            engine_call(self.cache, "inc_lock_ref", engine_member(result, "last_device_node"))
            return int(engine_member(result, "device_prefix_len"))

    def unlock(self, tokens: tuple[int, ...]) -> int:
        with self._atomic:
            self._key(tokens)
            node = self._node_of(tuple(tokens))
            engine_call(self.cache, "dec_lock_ref", node)
            return len(tokens)

    def evict(self, n: int) -> int:
        with self._atomic:
            result = engine_call(self.cache, "evict", self._names["EvictParams"](num_tokens=n))
            return int(engine_member(result, "num_tokens_evicted"))

    def reset(self) -> bool:
        with self._atomic:
            if engine_call(self.cache, "protected_size") > 0:
                return False
            engine_call(self.cache, "reset")
            engine_call(self.allocator, "clear")
            return True

    def evictable_size(self) -> int:
        with self._atomic:
            return int(engine_call(self.cache, "evictable_size"))

    def protected_size(self) -> int:
        with self._atomic:
            return int(engine_call(self.cache, "protected_size"))

    def total_size(self) -> int:
        with self._atomic:
            return int(engine_call(self.cache, "total_size"))

    def _nodes(self) -> list[tuple[tuple, Any]]:
        """(tokens above, node) for every node under SGLang's root, read from `children`."""
        found, stack = [], [((), child) for child in engine_member(self.cache, "root_node").children.values()]
        while stack:
            prefix, node = stack.pop()
            found.append((prefix, node))
            below = prefix + tuple(node.key.token_ids)
            stack.extend((below, child) for child in node.children.values())
        return found

    def _node_of(self, tokens: tuple) -> Any:
        if not tokens:
            return engine_member(self.cache, "root_node")  # dec_lock_ref stops at the root at once
        for prefix, node in self._nodes():
            if prefix + tuple(node.key.token_ids) == tokens:
                return node
        raise WrongStateError(f"unlock(tokens={tokens}): no node of SGLang's tree ends at these tokens, so there "
                              "is no node to pass to dec_lock_ref")

    def snapshot(self) -> tuple:
        with self._atomic:
            nodes = []
            for prefix, node in self._nodes():
                slots = [int(slot) for slot in node.value]
                nodes.append((prefix, tuple(node.key.token_ids), slots, tuple(int(self.kv[slot]) for slot in slots),
                              int(node.lock_ref), node.last_access_time))
            return write_snapshot(int(self.allocator.available_size()), int(self.cache.evictable_size()),
                                  int(self.cache.protected_size()), nodes, ())
