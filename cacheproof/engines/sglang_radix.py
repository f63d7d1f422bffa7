"""SGLang's `RadixCache` (`python/sglang/srt/mem_cache/radix_cache.py`) behind the radix contract,
tree level and request level, as SGLang 0.5.23's scheduler drives it.

    cacheproof check --spec radix --impl cacheproof.engines.sglang:radix_cache
    cacheproof check --spec radix --impl cacheproof.engines.sglang_radix:paged_radix_cache

`radix_cache(capacity_tokens, *, cache_class=None, page_size=1, namespace_as="extra_key")` publishes
a CPU `ServerArgs` to SGLang's runtime context when none is (as its scheduler process does at
start), builds SGLang's own token allocator (`TokenToKVPoolAllocator(capacity_tokens, int64, "cpu",
None, need_sort=False)`, slots 1..capacity_tokens, slot 0 its padding slot; at page_size 2 or 4
`PagedTokenToKVPoolAllocator(capacity_tokens, page_size, ...)`, `capacity_tokens // page_size` whole
pages), its `ReqToTokenPool` (`ROWS` request rows of `capacity_tokens + 1` positions) and the
installed `RadixCache` (or `cache_class`) over both with `CacheInitParams(disable=False, ...)`, the
LRU policy and `page_size`, and wraps them in `SglangRadixCache`. `paged_radix_cache` is
`radix_cache(..., page_size=2, namespace_as="cache_salt")`: the two factories pass a namespace as
each of SGLang's two namespace fields, one each, so the two checks together hold both. Profiles
`sglang-radix` (page size 1, both levels) and `sglang-radix-paged` (page size 2, tree level): every
design choice is there, never here (misuse trusted, access stamps per node;
spec/radix/semantics.py); each factory carries its profile and so does every adapted object
(`profile`, by its page size), so a wrapper or a subclass factory keeps it. The adapter decides no
outcome but one, named below (an admission's budget): every answer and state change is SGLang's, and
the snapshot is read back from SGLang's objects.

Translations, call by call (SGLang 0.5.23's names; a token sequence in a namespace is
`RadixKey(array("q", tokens), extra_key=namespace)`, or `cache_salt=namespace` where the factory
was given `namespace_as="cache_salt"`; a namespace that is neither None nor a str is
InvalidArgumentError, RadixKey's fields being `Optional[str]`):
- `match_prefix(tokens)` -> `match_prefix(MatchPrefixParams(key))`'s `device_prefix_len`.
- `insert(tokens)` -> `alloc(len(tokens))` from the allocator (its None is CapacityError, nothing
  taken; part pages are InvalidArgumentError, the paged allocator having no form for them), each
  slot written with its token in the KV storage, then `insert(InsertParams(key, value=slots))`;
  SGLang leaves the duplicate slots (`slots[:prefix_len]`) to its caller, who frees them
  (`free`), as SGLang's own `_insert_cache` does. The answer is `prefix_len`.
- `lock(tokens)` -> `match_prefix`, then `inc_lock_ref(last_device_node)`.
- `unlock(tokens)` -> `dec_lock_ref(node)` on the node whose tokens are exactly `tokens` (the root
  for none), found by walking `root_node.children` (a read: SGLang's `match_prefix` would stamp
  access times, which an unlock does not); tokens that end at no node have no SGLang form:
  WrongStateError here (the profile's "trusted" misuse: a checker never makes such a call).
- `evict(n)` -> `evict(EvictParams(num_tokens=n))`'s `num_tokens_evicted`.
- `reset()` -> the scheduler's `flush_cache`: False while a request runs or `protected_size()` is
  above 0, else `RadixCache.reset()`, the request pool's and the allocator's `clear()`, True.
- `evictable_size()`, `protected_size()`, `total_size()` -> SGLang's own.
- `prefill(request, tokens)` -> SGLang's own `Req` (managers/schedule_batch.py; rid `str(request)`,
  greedy `SamplingParams` of one new token, the namespace as its `extra_key` or `cache_salt`) admitted as the scheduler admits it, in the order of
  its `DynamicChunkSizer`'s profiling request: `Req.init_next_round_input(tree)` (which calls
  `mem_cache.common.match_kv_cache`, its key capped at len(tokens) - 1 by `Req`'s own rule, and
  sets `kv.cache_protected_len`), `req.lock = RadixCache.lock(req.last_node)`, `req.extend_end`
  the fill length, then `alloc_for_extend`'s steps for a batch of one:
  `allocation.alloc_req_slots` (a ReqToTokenPool row, set on `req.kv.req_pool_idx` by the pool),
  `allocation.alloc_token_slots` (paged: `alloc_paged_token_slots_extend`), both evicting from the
  tree when short, the row written with the prefix's tree slots and the new ones
  (`write_cache_indices`' work) and `kv.kv_allocated_len = kv.kv_committed_len` the request's
  length. The one decision of the adapter's: the budget check of the
  scheduler's `PrefillAdder` (the new tokens against free plus evictable slots, the matched path
  pinned) is made from SGLang's counters before `match_kv_cache`, where the scheduler makes it
  after; a refusal is CapacityError with nothing called (docs/engines.md, findings). The answer is
  `req.prefix_len`.
- `checkpoint(request, up_to=k)` -> `req.extend_end = max(k, cache_protected_len)` and
  `mem_cache.common.checkpoint_kv_cache(req, tree)`, which calls `RadixCache.checkpoint(req,
  up_to=extend_end)` (the scheduler's extend_end never goes back; SGLang's checkpoint below
  `cache_protected_len` frees tree slots later, docs/engines.md).
- `release(request)` -> the request finished (`finished_reason = FINISH_LENGTH(length=max_new_tokens)`,
  as `Req.check_finished` marks a request at its token budget), `mem_cache.common.release_kv_cache(req, tree,
  checkpoint=True)`.
  The answer of both is the `prefix_len` of the InsertResult SGLang's tree returned inside the
  call (RadixCache.checkpoint keeps it to itself; the adapter records what `insert` answered).
- `events()`: the KV cache events SGLang's tree published during the last call (built with
  `enable_kv_cache_events=True`; `take_events()` after every call, whether it answered or raised),
  each page hash read back as its path by SGLang's own hash functions
  (cacheproof.engines.sglang_events).
- `snapshot()`: the allocator's `available_size()`, SGLang's size counters, per node under
  `root_node` its key's tokens and namespace (the key's `extra_key` or `cache_salt`), `value`
  (slots), the KV storage at those slots, `lock_ref` and `last_access_time`, and per running
  request its tokens, its ReqToTokenPool row, `kv.cache_protected_len` and its namespace.
The KV storage is `kv`, a CPU int64 tensor of `capacity_tokens + page_size` token ids, written at
the slots a call takes (SGLang's model writes KV at `out_cache_loc` there). The class keeps no
lock (its scheduler drives it from one thread): the adapter's lock serialises its calls as that
thread does. A member it lacks is `cacheproof.adapt.AdapterError`: a usage error (exit 2) naming it.
"""

from __future__ import annotations

import functools
from array import array
from typing import Any, Callable

from cacheproof.adapt import AdapterError, Atomic, engine_call, engine_member, require_members
from cacheproof.engines.sglang_events import PagePaths
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.radix.events import NO_EVENTS
from cacheproof.spec.radix.semantics import RADIX_OPTIONS
from cacheproof.spec.radix.snapshot import write_snapshot

__all__ = ["SglangRadixCache", "radix_cache", "paged_radix_cache", "PROFILE", "PAGED_PROFILE"]

PROFILE = "sglang-radix"
PAGED_PROFILE, PAGED_PROFILE_PAGE = "sglang-radix-paged", 2
_MISSING = (
    "cacheproof.engines.sglang needs SGLang (`pip install sglang`; docs/engines.md says how its RadixCache "
    "imports on a CPU-only machine), or pass cache_class= a class with its API"
)
MEMBERS = ("match_prefix", "insert", "inc_lock_ref", "dec_lock_ref", "evict", "reset", "evictable_size",
           "protected_size", "total_size", "checkpoint", "lock", "unlock", "path_device_indices", "take_events")
PAGE_SIZES = RADIX_OPTIONS["page_size"]
NAMESPACE_FIELDS = ("extra_key", "cache_salt")
"""The RadixKey (and Req) field a contract namespace is passed as: both namespace SGLang's tree."""
ROWS = 64
"""The request rows of SGLang's ReqToTokenPool (its `max_running_requests`): more than the checker's
scopes name requests (at most 7); a request past them is SGLang's RuntimeError from alloc_req_slots.
Not bounded by the KV slots: a running request whose tokens another cached first owns no slot."""


def _sglang() -> dict[str, Any]:
    """SGLang's classes the adapter builds (ImportError naming the package when it is absent)."""
    try:
        from sglang.srt.mem_cache.allocation import alloc_paged_token_slots_extend, alloc_req_slots, alloc_token_slots
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.common import checkpoint_kv_cache, match_kv_cache, release_kv_cache
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
        from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey
        from sglang.srt.managers.schedule_batch import FINISH_LENGTH, Req
        from sglang.srt.sampling.sampling_params import SamplingParams
    except ImportError as error:
        raise ImportError(f"{_MISSING} ({error})") from error
    return {"RadixCache": RadixCache, "RadixKey": RadixKey, "TokenToKVPoolAllocator": TokenToKVPoolAllocator,
            "PagedTokenToKVPoolAllocator": PagedTokenToKVPoolAllocator,
            "CacheInitParams": CacheInitParams, "MatchPrefixParams": MatchPrefixParams,
            "InsertParams": InsertParams, "EvictParams": EvictParams, "ReqToTokenPool": ReqToTokenPool,
            "match_kv_cache": match_kv_cache, "checkpoint_kv_cache": checkpoint_kv_cache,
            "release_kv_cache": release_kv_cache, "alloc_req_slots": alloc_req_slots,
            "alloc_token_slots": alloc_token_slots, "alloc_paged_token_slots_extend": alloc_paged_token_slots_extend,
            "Req": Req, "SamplingParams": SamplingParams, "FINISH_LENGTH": FINISH_LENGTH}


def _publish_server_args() -> None:
    """Publish a CPU `ServerArgs` to SGLang's runtime context, as its scheduler process does at start
    (`set_global_server_args_for_scheduler`; model path "dummy", its resolution pipeline's short circuit
    for a process with no model), unless one is published already: `release_kv_cache`
    reads `get_spec().speculative_algorithm` and `get_serving().strip_thinking_cache` from it."""
    from sglang.srt import runtime_context
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    try:
        runtime_context.get_serving()
    except ValueError:
        set_global_server_args_for_scheduler(ServerArgs(model_path="dummy", device="cpu"))


def radix_cache(capacity_tokens: int, *, cache_class: Any = None, page_size: int = 1,
                namespace_as: str = "extra_key") -> "SglangRadixCache":
    """SGLang's RadixCache over its real token allocator of `capacity_tokens` KV slots, adapted, a
    contract namespace passed as the keys' `namespace_as`. ImportError naming the package when
    SGLang is not installed."""
    import torch

    if page_size not in PAGE_SIZES:
        raise InvalidArgumentError(f"page_size={page_size!r}: the radix semantics have pages of {PAGE_SIZES} tokens")
    if namespace_as not in NAMESPACE_FIELDS:
        raise InvalidArgumentError(f"namespace_as={namespace_as!r}: a namespace is one of RadixKey's {NAMESPACE_FIELDS}")
    names = _sglang()
    cache_class = names["RadixCache"] if cache_class is None else cache_class
    require_members(cache_class, MEMBERS)
    _publish_server_args()
    if page_size == 1:
        allocator = names["TokenToKVPoolAllocator"](capacity_tokens, torch.int64, "cpu", None, False)
    else:
        allocator = names["PagedTokenToKVPoolAllocator"](capacity_tokens, page_size, torch.int64, "cpu", None, False)
    rows = names["ReqToTokenPool"](size=ROWS, max_context_len=capacity_tokens + 1, device="cpu",
                                   enable_memory_saver=False)
    params = names["CacheInitParams"](disable=False, req_to_token_pool=rows, token_to_kv_pool_allocator=allocator,
                                      page_size=page_size, enable_kv_cache_events=True)
    return SglangRadixCache(cache_class(params), allocator, names, capacity_tokens, namespace_as)


def paged_radix_cache(capacity_tokens: int, *, cache_class: Any = None) -> "SglangRadixCache":
    """`radix_cache(capacity_tokens, cache_class=cache_class, page_size=2, namespace_as="cache_salt")`,
    under `sglang-radix-paged`: its namespaces are salts."""
    return radix_cache(capacity_tokens, cache_class=cache_class, page_size=PAGED_PROFILE_PAGE,
                       namespace_as="cache_salt")


def _profile_named(name: str) -> Any:
    """A factory's `profile`: a function answering `name` that imports SGLang's modules first
    (seconds), before any timed call."""

    def profile() -> str:
        _sglang()
        return name

    return profile


radix_cache.profile = _profile_named(PROFILE)
paged_radix_cache.profile = _profile_named(PAGED_PROFILE)


def _announced(operation: Callable[..., Any]) -> Callable[..., Any]:
    """An operation after which SGLang's KV cache events are taken (`take_events`), whether it
    answered or raised, and kept in the contract's terms as the last call's `events()`."""
    @functools.wraps(operation)
    def call(self: "SglangRadixCache", *args: Any, **kwargs: Any) -> Any:
        try:
            return operation(self, *args, **kwargs)
        finally:
            self._events = self._pages.events(engine_call(self.cache, "take_events"))
    return call


class SglangRadixCache:
    """A RadixCache speaking the radix contract; `cache` is SGLang's tree, `allocator` its pool."""

    profile = PROFILE

    def __init__(self, cache: Any, allocator: Any, names: dict[str, Any], capacity_tokens: int,
                 namespace_as: str = "extra_key") -> None:
        import torch

        self.cache, self.allocator, self._names = cache, allocator, names
        self.namespace_as = namespace_as
        self.num_slots = capacity_tokens
        self.page_size = int(cache.page_size)
        self.profile = PROFILE if self.page_size == 1 else PAGED_PROFILE
        self.kv = torch.full((capacity_tokens + self.page_size,), -1, dtype=torch.int64)
        self.requests: dict[int, Any] = {}
        self._atomic = Atomic(cache)
        self._pages = PagePaths(self.page_size)
        engine_call(cache, "take_events")  # the tree's construction clears it: no call of the contract's
        self._events: tuple = NO_EVENTS

    def _key(self, tokens: Any, namespace: Any = None) -> Any:
        for token in tokens:
            if not isinstance(token, int) or isinstance(token, bool) or not -(2**63) <= token < 2**63:
                raise InvalidArgumentError(f"token {token!r} has no RadixKey form (an int64 array)")
        if namespace is not None and not isinstance(namespace, str):
            raise InvalidArgumentError(f"namespace {namespace!r} has no RadixKey form ({self.namespace_as} is a str)")
        return self._names["RadixKey"](token_ids=array("q", tokens), **self._in(namespace))

    def _in(self, namespace: Any) -> dict[str, Any]:
        """The RadixKey or Req keyword that carries `namespace`."""
        return {self.namespace_as: namespace}

    def _namespace_of(self, holder: Any) -> Any:
        """The namespace a RadixKey or Req carries."""
        return getattr(holder, self.namespace_as)

    def _match(self, tokens: Any, namespace: Any) -> Any:
        key = self._key(tokens, namespace)
        return engine_call(self.cache, "match_prefix", self._names["MatchPrefixParams"](key=key))

    @_announced
    def match_prefix(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        with self._atomic:
            return int(engine_member(self._match(tokens, namespace), "device_prefix_len"))

    @_announced
    def insert(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        import torch

        with self._atomic:
            key = self._key(tokens, namespace)
            self._pages.may_store(tokens, **self._in(namespace))
            if len(tokens) % self.page_size:
                raise InvalidArgumentError(f"insert: {len(tokens)} tokens are not whole pages of {self.page_size}; "
                                           "SGLang's paged allocator hands out whole pages")
            slots = engine_call(self.allocator, "alloc", len(tokens))
            if slots is None:
                raise CapacityError(f"insert: {len(tokens)} tokens need {len(tokens)} KV slots; "
                                    f"SGLang's allocator has {self.allocator.available_size()} free")
            self.kv[slots] = torch.tensor(tokens, dtype=torch.int64)
            result = engine_call(self.cache, "insert", self._names["InsertParams"](key=key, value=slots))
            cached = int(engine_member(result, "prefix_len"))
            self.allocator.free(slots[:cached])
            return cached

    @_announced
    def lock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        with self._atomic:
            result = self._match(tokens, namespace)
            engine_call(self.cache, "inc_lock_ref", engine_member(result, "last_device_node"))
            return int(engine_member(result, "device_prefix_len"))

    @_announced
    def unlock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        with self._atomic:
            self._key(tokens, namespace)
            node = self._node_of(tuple(tokens), namespace)
            engine_call(self.cache, "dec_lock_ref", node)
            return len(tokens)

    @_announced
    def evict(self, n: int) -> int:
        with self._atomic:
            result = engine_call(self.cache, "evict", self._names["EvictParams"](num_tokens=n))
            return int(engine_member(result, "num_tokens_evicted"))

    @_announced
    def reset(self) -> bool:
        with self._atomic:
            if self.requests or engine_call(self.cache, "protected_size") > 0:
                return False
            engine_call(self.cache, "reset")
            engine_call(self.cache.req_to_token_pool, "clear")
            engine_call(self.allocator, "clear")
            return True

    # Request level: SGLang's scheduler functions on SGLang's own Req ---------------------

    @_announced
    def prefill(self, request: int, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        import torch

        with self._atomic:
            self._request_id("prefill", request)
            self._key(tokens, namespace)
            if not tokens:
                raise InvalidArgumentError(f"prefill(request={request}): a Req holds at least one token")
            if request in self.requests:
                raise WrongStateError(f"prefill(request={request}): the request is running; SGLang's scheduler "
                                      "admits a Req once")
            self._admission_budget(request, tuple(tokens), namespace)
            self._pages.may_store(tokens, **self._in(namespace))
            req = self._new_req(request, tuple(tokens), namespace)
            req.init_next_round_input(self.cache)
            req.lock = engine_call(self.cache, "lock", req.last_node)
            req.extend_end = len(req.full_untruncated_fill_ids)
            self._names["alloc_req_slots"](self.cache.req_to_token_pool, [req], self.cache)
            prefix = engine_call(self.cache, "path_device_indices", req.last_node)[:req.prefix_len]
            own = self._allocate(req, prefix)
            self.cache.req_to_token_pool.write((req.kv.req_pool_idx, slice(0, len(tokens))), torch.cat([prefix, own]))
            self.kv[own] = torch.tensor(tokens[req.prefix_len:], dtype=torch.int64)
            req.kv.kv_committed_len = req.kv.kv_allocated_len = len(tokens)  # alloc_for_extend's last step
            self.requests[request] = req
            return int(req.prefix_len)

    @_announced
    def checkpoint(self, request: int, *, up_to: int) -> int:
        with self._atomic:
            req = self._running("checkpoint", request)
            if not isinstance(up_to, int) or isinstance(up_to, bool) or not 0 <= up_to <= len(req.origin_input_ids):
                raise InvalidArgumentError(f"checkpoint(request={request}, up_to={up_to!r}): up_to must be an int in "
                                           f"0..{len(req.origin_input_ids)}, the request's tokens")
            req.extend_end = max(up_to, req.kv.cache_protected_len)
            return self._inserted(lambda: self._names["checkpoint_kv_cache"](req, self.cache))

    @_announced
    def release(self, request: int) -> int:
        with self._atomic:
            req = self._running("release", request)
            req.finished_reason = self._names["FINISH_LENGTH"](length=req.sampling_params.max_new_tokens)
            cached = self._inserted(lambda: self._names["release_kv_cache"](req, self.cache, checkpoint=True))
            del self.requests[request]
            return cached

    def _new_req(self, request: int, tokens: tuple[int, ...], namespace: Any) -> Any:
        """SGLang's own `Req` for a prompt of `tokens`, built as its scheduler's profiling request is
        (`DynamicChunkSizer`, managers/scheduler_components/dynamic_chunk_sizer.py): rid the request's
        number as a string, no text, the tokens as an int64 array, greedy `SamplingParams` of one new
        token, the namespace as its extra key or salt; no logprobs, LoRA or priority, so its match
        cap is `len(tokens) - 1`."""
        return self._names["Req"](rid=str(request), origin_input_text="", origin_input_ids=array("q", tokens),
                                  sampling_params=self._names["SamplingParams"](temperature=0, max_new_tokens=1),
                                  **self._in(namespace))

    def _allocate(self, req: Any, prefix: Any) -> Any:
        """The KV slots of the request's tokens past its prefix, as `alloc_for_extend` takes them:
        `alloc_token_slots` at page size 1, else `alloc_paged_token_slots_extend` continuing the
        prefix's last page (both evict from the tree first when short)."""
        import torch

        extend = len(req.origin_input_ids) - req.prefix_len
        if self.page_size == 1:
            return self._names["alloc_token_slots"](self.cache, extend)
        lengths = {name: torch.tensor([value], dtype=torch.int64) for name, value in
                   (("prefix", req.prefix_len), ("seq", len(req.origin_input_ids)))}
        last = prefix[-1:] if len(prefix) else torch.full((1,), -1, dtype=torch.int64)
        return self._names["alloc_paged_token_slots_extend"](
            self.cache, lengths["prefix"], lengths["prefix"], lengths["seq"], lengths["seq"], last, extend)

    def _request_id(self, operation: str, request: Any) -> None:
        if not isinstance(request, int) or isinstance(request, bool):
            raise InvalidArgumentError(f"{operation}: request {request!r} is not an int (the Req's rid here)")

    def _running(self, operation: str, request: Any) -> Any:
        self._request_id(operation, request)
        if request not in self.requests:
            raise WrongStateError(f"{operation}(request={request}): no running Req has this rid (prefill admits it)")
        return self.requests[request]

    def _admission_budget(self, request: int, tokens: tuple[int, ...], namespace: Any) -> None:
        """The scheduler's PrefillAdder check, read from SGLang's counters before any call: the tokens
        past the cached prefix of tokens[:-1] fit in the allocator's free slots plus the evictable
        ones, the matched path pinned (`_lock_node`); else CapacityError, nothing called. SGLang's
        scheduler matches first and checks after (docs/engines.md, finding)."""
        walked = self._peek(tokens[:-1], namespace)
        need = len(tokens) - sum(used for _, used in walked)
        pinned = sum(used for node, used in walked if node.lock_ref == 0)
        free, evictable = int(self.allocator.available_size()), int(engine_call(self.cache, "evictable_size"))
        if need > free + evictable - pinned:
            raise CapacityError(f"prefill(request={request}): {need} tokens need KV slots; SGLang's allocator has {free} "
                                f"free and {evictable - pinned} more evictable with the matched prefix pinned")

    def _peek(self, tokens: tuple, namespace: Any) -> list[tuple[Any, int]]:
        """The nodes a match of `tokens` in `namespace` walks in SGLang's tree, each with the tokens
        it takes, read from `children` and `key` (no split, no access time)."""
        node, at, walked = engine_member(self.cache, "root_node"), 0, []
        while at < len(tokens):
            child = next((c for c in node.children.values()
                          if c.key.token_ids[0] == tokens[at] and self._namespace_of(c.key) == namespace), None)
            if child is None:
                break
            key = tuple(child.key.token_ids)
            used = next((i for i, token in enumerate(key) if at + i >= len(tokens) or tokens[at + i] != token), len(key))
            walked.append((child, used))
            at += used
            if used < len(key):
                break
            node = child
        return walked

    def _inserted(self, action: Any) -> int:
        """Run `action` and answer the `prefix_len` of the first InsertResult SGLang's tree returned
        during it: what was already cached of the request's tokens (checkpoint keeps it to itself)."""
        answers: list[int] = []
        insert = self.cache.insert

        def recording(params: Any) -> Any:
            result = insert(params)
            answers.append(int(engine_member(result, "prefix_len")))
            return result

        self.cache.insert = recording
        try:
            action()
        finally:
            del self.cache.insert
        if not answers:
            raise AdapterError(f"{type(self.cache).__name__}.checkpoint made no insert: the answer (what was "
                               "already cached) has no source")
        return answers[0]

    @_announced
    def evictable_size(self) -> int:
        with self._atomic:
            return int(engine_call(self.cache, "evictable_size"))

    @_announced
    def protected_size(self) -> int:
        with self._atomic:
            return int(engine_call(self.cache, "protected_size"))

    @_announced
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

    def _node_of(self, tokens: tuple, namespace: Any) -> Any:
        if not tokens:
            return engine_member(self.cache, "root_node")  # dec_lock_ref stops at the root at once
        for prefix, node in self._nodes():
            if prefix + tuple(node.key.token_ids) == tokens and self._namespace_of(node.key) == namespace:
                return node
        raise WrongStateError(f"unlock(tokens={tokens}, namespace={namespace!r}): no node of SGLang's tree ends at "
                              "these tokens in this namespace, so there is no node to pass to dec_lock_ref")

    def events(self) -> tuple:
        """The last call's KV cache events, read back as paths (cacheproof.engines.sglang_events)."""
        return self._events

    def snapshot(self) -> tuple:
        with self._atomic:
            nodes = []
            for prefix, node in self._nodes():
                slots = [int(slot) for slot in node.value]
                nodes.append((prefix, tuple(node.key.token_ids), slots, tuple(int(self.kv[slot]) for slot in slots),
                              int(node.lock_ref), node.last_access_time, self._namespace_of(node.key)))
            rows = self.cache.req_to_token_pool.req_to_token
            requests = [(rid, tuple(req.origin_input_ids), [int(slot) for slot in rows[req.kv.req_pool_idx,
                         :len(req.origin_input_ids)]], req.kv.cache_protected_len, self._namespace_of(req))
                        for rid, req in self.requests.items()]
            return write_snapshot(int(self.allocator.available_size()), int(self.cache.evictable_size()),
                                  int(self.cache.protected_size()), nodes, requests)
