"""vLLM's real KV cache manager (`vllm.v1.core.kv_cache_manager.KVCacheManager`) behind the block
contract's request level; the pool level is cacheproof.engines.vllm's, whose translations and
peer pool it shares.

`kv_cache_manager(num_blocks)` builds vLLM's own
`vllm.v1.core.kv_cache_manager.KVCacheManager` (it runs on the CPU: it is bookkeeping over
`BlockPool`, no tensors) for a `KVCacheConfig` of one full-attention group of block size
BLOCK_SIZE, prefix-cache statistics on (`log_stats`, as an engine server logs them), KV cache
events on (its requests in the default `kv_cache_report_mode`, "incremental":
a prefix hit announces nothing, profile vllm-kv-cache-manager's `hit_events="none"`; in
`kv_cache_manager_full`, "full": every hit `get_computed_blocks` finds is re-announced with its
tokens, profile vllm-kv-cache-manager-full's `hit_events="lookup"`), and wraps it
in `VllmKVCacheManager`, whose pool-level operations are cacheproof.engines.vllm's over the manager's own
`block_pool`. Translations:
- a request id r <-> a real `vllm.v1.request.Request` with id `str(r)` whose `block_hasher`
  gives each full block the contract's chained hash (`block_hash`) as a BlockHash;
- `find_cached_prefix(tokens)` -> `get_num_cached_tokens(Request(tokens))` (the probe the
  scheduler orders its waiting requests by, deepest cached prefix first) and
  `get_computed_blocks_for_connector(Request(tokens))`'s hit tokens (vLLM caps the hit at
  num_tokens - 1 itself): the local lookup a scheduler with a KV connector makes before it asks
  the connector, which for a model without Mamba layers is `get_computed_blocks`. The answer is
  the hit both give, or the pair (probe, lookup) when they differ, which the spec's int never is.
  `allocate_slots` below uses `get_computed_blocks` itself, so all three of vLLM's lookups run
  under the check;
- `allocate_slots(r, tokens)`, first call -> `get_computed_blocks` then `allocate_slots(req,
  num_new_tokens, num_hit_tokens, hit_blocks, full_sequence_must_fit=True)` (the 0.34.0 scheduler
  admits a waiting request so by default, `scheduler_reserve_full_isl`); later calls -> a Request of the old tokens
  (computed) extended by `append_output_token_ids(new tokens)`, as a running request after a
  step, then `allocate_slots(req, num_new_tokens)`. The answer is the block table the scheduler
  hands the worker, or vLLM's None (on None the request keeps its old Request: vLLM's state is
  vLLM's): a new request's whole table, `get_blocks(str(r)).get_block_ids()` (the 0.34.0
  scheduler's `NewRequestData`), a running request's table extended by the new blocks
  allocate_slots answered, `get_block_ids(allow_none=True)` (its `CachedRequestData.new_block_ids`;
  None adds none).
  vLLM's ValueError for a call that hands over no new token is the contract's
  InvalidArgumentError (`no_new_tokens="refused"`), and so is a new request with no tokens (a
  vLLM Request has a prompt token at least; its lookup fails first).
  Tokens that do not extend the request's have no vLLM form (a Request's tokens only grow):
  WrongStateError here; a token that is not an int has no Request form: InvalidArgumentError.
- `free_request(r)` -> `remove_skipped_blocks(r, req.num_computed_tokens, req.num_prompt_tokens)`
  then `free(req)`: a scheduler with a KV connector (the manager profiles have loads) frees the
  blocks a sliding window reads no more before it hands the table to the connector
  (`Scheduler._connector_finished`), then the request's blocks (`_free_request`); for full
  attention the first frees nothing. A request vLLM never saw is freed as a fresh Request of that
  id, so what vLLM does with it is vLLM's answer.
- `reset()` -> the manager's `reset_prefix_cache()` (not its pool's), and the KV cache events are
  taken with the manager's `take_events()`, as vLLM's scheduler does both.
- `prefix_cache_stats()`: the scheduler records a request's hit with `record_prefix_cache_stats(req,
  hit)` once it admits it (a first `allocate_slots` that answers blocks), and takes the step's
  statistics with `make_prefix_cache_stats()`; the adapter does both, taking them after every call
  (a call is a step), and answers their (requests, queries, hits, reset). The contract's requests
  are never preempted (a freed request that comes back is a new one), so vLLM's preempted counts
  are not read;
- `cached_tokens()` reads `estimate_cached_tokens(req)` of each request, as the scheduler reports
  a request's cached tokens when its prefill ends;
- `tables()` reads the manager's own record, `get_block_ids`; the snapshot's holdings add each
  request's blocks there. A manager that answers the scheduler one table and records another
  diverges from the spec in one of the two.
- two groups (`kv_cache_manager_hybrid`, `window_group=4`): each table above is the groups' tables
  one after the other, the worker's and the manager's alike, and the model runner writes each
  group's blocks; vLLM hashes a block once and keys it by (hash, group), which reads as the
  contract's hash of that group's chain (`group_seed`), recorded as the block hasher hashes the
  block.
- two groups whose first keeps a longer hit (`kv_cache_manager_retained`, `first_group_hit="retained"`):
  the full-attention group's spec is a `FullAttentionSpec` subclass registered through vLLM's plugin
  hook (`register_kv_cache_spec`) with a `FullAttentionManager` subclass whose only change is
  `retains_longer_hit = True`, the class attribute by which HiSparse's `HiSparseSourceManager` keeps
  prefixes the device groups have lost. vLLM's `find_longest_cache_hit` then leaves that group's hit
  whole, and `allocate_slots` cuts it (`retained_hit_group_ids`) to the tokens the request does not
  compute. The host tier itself (a second pool, spills, residency) is not built (docs/decisions.md).
- `load_slots(r, tokens, reserve=n)` -> the scheduler's admission of a request with `load_kv_async`:
  `get_computed_blocks`, then `allocate_slots(req, 0, hit tokens, hit blocks,
  num_external_computed_tokens=the rest, delay_cache_blocks=True, full_sequence_must_fit=True,
  reserved_blocks=n)` (the scheduler's reservation for other prefills in flight); the connector writes the
  loaded tokens into the blocks `get_blocks(r).get_unhashed_block_ids_all_groups()` names, in
  order from the place of the first of them (what nixl's and mooncake's connector schedulers hand
  to the transfer, which fills them in order; a sliding window skips the places it reads no more,
  and a retained group's own longer hit is there already). `finish_load(r)` -> `cache_blocks(req, req.num_computed_tokens)`, as
  `Scheduler._update_waiting_for_remote_kv` caches a request whose load is done;
- `contents()`: vLLM's manager keeps no KV data (the workers write it through the slot mapping
  block_table[pos // block_size] * block_size + pos % block_size), so the adapter plays the
  model runner: after each allocation it writes the new tokens into the blocks the worker's
  table (the answer above) names, with vLLM's parent hash, and forgets a block's record when vLLM hands it out again. The
  view checks vLLM's table and hashes against the tokens (B5), not a KV tensor.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from cacheproof.engines.vllm import (
    MISSING_VLLM, VllmBlockPool, _events_taken, _peer_pool, _VllmNames, _without_warnings,
)
from cacheproof.spec.blocks.manager import BLOCK_SIZE, block_hash
from cacheproof.spec.blocks.partial import NULL_BLOCK as _NULL
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError

__all__ = ["VllmKVCacheManager", "kv_cache_manager", "kv_cache_manager_retained"]

_MAX_MODEL_LEN = 1 << 16
"""vLLM's max_model_len for the manager: far above any token sequence the checker draws."""


def kv_cache_manager(num_blocks: int, *, manager_class: Any = None, report_mode: str = "incremental",
                     caching: bool = True, sliding_window: int = 0, mamba: bool = False,
                     window_group: int = 0, retained: bool = False) -> "VllmKVCacheManager":
    """vLLM's real KVCacheManager over `num_blocks` blocks of BLOCK_SIZE tokens (one group: full
    attention, a sliding window of `sliding_window` tokens when it is not 0, or under `mamba` a Mamba
    layer's state with prefix caching in align mode; when `window_group` is not 0, a second group
    beside a full-attention first, a sliding window of that many tokens), as a contract pool
    with a request level; `manager_class` replaces `vllm.v1.core.kv_cache_manager.KVCacheManager`
    and is built with the same arguments (the scheduler's `max_in_flight_tokens` and
    `pcp_world_size` left at their defaults); `report_mode` is every request's
    `kv_cache_report_mode` ("full": each hit found is re-announced); `caching` is the manager's
    `enable_caching` (False: prefix caching off); under `retained` the full-attention first group's
    manager keeps a longer hit (`kv_cache_manager_retained`).
    Raises ImportError naming the extra and the tools script when vLLM is not installed."""
    try:
        import torch
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.block_pool import BlockPool
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.core.kv_cache_utils import BlockHash, get_block_hash, get_group_id, maybe_convert_block_hash
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MambaSpec, SlidingWindowSpec, get_kv_cache_spec_kind,
            get_kv_cache_spec_sliding_window,
        )
        from vllm.v1.request import Request
    except ImportError as error:
        raise ImportError(f"{MISSING_VLLM} ({error})") from error
    if mamba:
        attention = MambaSpec(block_size=BLOCK_SIZE, shapes=((1,),), dtypes=(torch.float16,), mamba_cache_mode="align")
    elif sliding_window:
        attention = SlidingWindowSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float16,
                                      sliding_window=sliding_window)
    else:
        full = _retaining_spec() if retained else FullAttentionSpec
        attention = full(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float16)
    specs = [attention]
    if window_group:
        specs.append(SlidingWindowSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float16,
                                       sliding_window=window_group))
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec([f"layer.{group}"], spec) for group, spec in enumerate(specs)])
    cls = KVCacheManager if manager_class is None else manager_class
    manager = cls(config, max_model_len=_MAX_MODEL_LEN, scheduler_block_size=BLOCK_SIZE, hash_block_size=BLOCK_SIZE,
                  enable_kv_cache_events=True, enable_caching=caching, log_stats=True)
    sampling = SamplingParams(max_tokens=1, extra_args={"kv_cache_report_mode": report_mode})
    vllm = _VllmNames(BlockHash, get_block_hash, get_group_id, maybe_convert_block_hash, Request, sampling)
    groups = tuple((group, get_kv_cache_spec_kind(spec).value, get_kv_cache_spec_sliding_window(spec))
                   for group, spec in enumerate(specs))
    return VllmKVCacheManager(manager, vllm, _peer_pool(BlockPool), groups)


def kv_cache_manager_retained(num_blocks: int, *, manager_class: Any = None) -> "VllmKVCacheManager":
    """`kv_cache_manager` over a full-attention and a sliding-window group (window 4) whose first
    group's manager `retains_longer_hit`, as HiSparse's host tier does (see the module); checked
    under the profile vllm-kv-cache-manager-retained."""
    return kv_cache_manager(num_blocks, manager_class=manager_class, window_group=4, retained=True)


@functools.cache
def _retaining_spec() -> type:
    """A `FullAttentionSpec` subclass whose manager retains a longer hit, registered once with vLLM's
    `register_kv_cache_spec` after the built-in specs (`register_all_kvcache_specs`, as the engine core
    registers them at start; vLLM registers its own only into an empty registry)."""
    from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager, register_all_kvcache_specs
    from vllm.v1.kv_cache_interface import FullAttentionSpec
    from vllm.v1.kv_cache_spec_registry import register_kv_cache_spec

    register_all_kvcache_specs(None)

    class RetainingFullAttentionManager(FullAttentionManager):
        retains_longer_hit = True

    @register_kv_cache_spec(manager_class=RetainingFullAttentionManager, uniform_type_base_spec=FullAttentionSpec)
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class RetainedFullAttentionSpec(FullAttentionSpec):
        pass

    return RetainedFullAttentionSpec


class VllmKVCacheManager(VllmBlockPool):
    """A vLLM `KVCacheManager` speaking the whole block contract; `manager` is the vLLM object,
    `pool` its block pool. See the module docstring for the translations."""

    def __init__(self, manager: Any, vllm: _VllmNames, peer: Any, groups: tuple[tuple[int, Any, Any], ...]) -> None:
        super().__init__(manager.block_pool, vllm, peer, groups=groups)  # groups: how take_events annotates its events
        self.manager = manager
        self._requests: dict[int, Any] = {}  # request -> its vLLM Request
        self._worker: dict[int, tuple[tuple[int, ...], ...]] = {}  # request -> the tables the scheduler handed the worker
        self._written: dict[int, tuple[int | None, tuple[int, ...]]] = {}  # block -> (parent, tokens)
        self._stats = (0, 0, 0, False)  # (requests, queries, hits, reset) of the last call's step
        self._offers: tuple[tuple[int, int, int], ...] = ()  # the boundary states the last call's step offered

    # ----------------------------------------------------------------- translations

    def _block_hashes(self, req: Any) -> list[Any]:
        """The Request's block_hasher: the contract's chained hash of each new full block."""
        tokens, hashes = req.all_token_ids, req.block_hashes
        parent = self._int_of(hashes[-1]) if hashes else None
        new = []
        for start in range(len(hashes) * BLOCK_SIZE, len(tokens) - BLOCK_SIZE + 1, BLOCK_SIZE):
            block = tuple(tokens[start : start + BLOCK_SIZE])
            value = block_hash(parent, block)
            for group in range(1, len(self._groups)):  # the block's hash in each other group's chain
                self._group_hashes[(value, group)] = block_hash(self._in_group(parent, group), block)
            parent = value
            new.append(self._hash(parent))
        return new

    def _new_request(self, request: object, tokens: tuple[int, ...]) -> Any:
        vllm = self._vllm
        return vllm.request(str(request), list(tokens), vllm.sampling, None, block_hasher=self._block_hashes)

    @staticmethod
    def _tokens(tokens: object) -> tuple[int, ...]:
        if not isinstance(tokens, (tuple, list)) or any(isinstance(t, bool) or not isinstance(t, int) for t in tokens):
            raise InvalidArgumentError(f"tokens {tokens!r} are not token ids (ints), so they make no vLLM Request")
        return tuple(tokens)

    def _tables_of(self, request: int) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(ids) for ids in self.manager.get_block_ids(str(request)))

    def _table(self, request: int) -> tuple[int, ...]:
        """The request's groups' tables in vLLM's manager, one after the other."""
        return tuple(block for ids in self._tables_of(request) for block in ids)

    def _answer(self, request: int) -> tuple[int, ...]:
        """The worker's tables one after the other, the null block (id 0) where the manager's table now
        names it: a sliding window's freed blocks, which the scheduler never tells the worker of
        (its attention reads them no more)."""
        return tuple(_NULL if place < len(now) and now[place] == _NULL else block
                     for now, worker in zip(self._tables_of(request), self._worker[request])
                     for place, block in enumerate(worker))

    def _handed_out(self, blocks: list[Any]) -> None:
        for block in blocks:
            self._written.pop(block.block_id, None)

    def _write(self, request: int, group: int, first: int, blocks: Any = None) -> None:
        """Play the model runner: the tokens of group `group`'s table[first:] land in the blocks the
        worker's table names (the null block takes none), or in `blocks` (the connector's, for a
        load), in order from place `first`, as a transfer fills them; each block's parent is its
        group's chain's."""
        req = self._requests[request]
        table = self._worker[request][group]
        blocks = table[first:] if blocks is None else blocks
        tokens, hashes = tuple(req.all_token_ids), req.block_hashes
        for i, block in enumerate(blocks, start=first):
            if block == _NULL:
                continue
            parent = self._in_group(self._int_of(hashes[i - 1]) if 0 < i <= len(hashes) else None, group)
            self._written[block] = (parent, tokens[i * BLOCK_SIZE : (i + 1) * BLOCK_SIZE])

    def _take_events(self) -> list[Any]:
        """The manager's take_events (the pool's queue, each BlockStored annotated with its group's
        KV-cache spec), its step's prefix-cache statistics (`make_prefix_cache_stats`) and boundary
        states (`take_boundary_state_offloads`), as vLLM's scheduler takes them at the end of a step,
        then `new_step_starts`, as the next step begins."""
        stats = self.manager.make_prefix_cache_stats()
        self._stats = (stats.requests, stats.queries, stats.hits, stats.reset)
        self._offers = tuple((int(request), block, boundary)
                             for request, offers in self.manager.take_boundary_state_offloads().items()
                             for _, block, boundary in offers)
        self.manager.new_step_starts()
        return self.manager.take_events()

    def _evict_blocks(self, ids: set[int]) -> None:
        """The manager's evict_blocks, as the scheduler evicts the blocks of a failed KV load."""
        self.manager.evict_blocks(ids)

    @_events_taken
    def reset(self) -> bool:
        """The manager's reset_prefix_cache(), as vLLM's scheduler resets (its warning on a busy pool
        kept out of the checker's output)."""
        return _without_warnings(self.manager.reset_prefix_cache)

    # ----------------------------------------------------------------- request level

    @_events_taken
    def find_cached_prefix(self, tokens: tuple[int, ...]) -> Any:
        """get_num_cached_tokens, then get_computed_blocks_for_connector, of a Request of `tokens`:
        the hit tokens both answer, or (probe's, lookup's) when they differ."""
        request = self._new_request("find_cached_prefix", self._tokens(tokens))
        probed = self.manager.get_num_cached_tokens(request)
        _, hit, _, _ = self.manager.get_computed_blocks_for_connector(request)
        return hit if probed == hit else (probed, hit)

    @_events_taken
    def allocate_slots(self, request: int, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        """get_computed_blocks + allocate_slots (first call), allocate_slots for the new tokens of
        the running request (later calls); the table read back from vLLM, or None."""
        tokens = self._tokens(tokens)
        old = self._requests.get(request)
        if old is None:
            return self._admit(request, tokens)
        done = tuple(old.all_token_ids)
        if tokens[: len(done)] != done:
            raise WrongStateError(
                f"allocate_slots(request={request}): the tokens do not extend the request's "
                f"{len(done)} tokens, and a vLLM Request's tokens only grow"
            )
        req = self._new_request(request, done)
        req.num_computed_tokens = len(done)
        req.status = type(req.status).RUNNING
        req.append_output_token_ids(list(tokens[len(done) :]))
        new = self._allocate(req, len(tokens) - len(done))
        if new is None:
            return None
        req.num_computed_tokens = len(tokens)
        self._requests[request] = req
        self._handed_out([block for group in new.blocks for block in group])
        added = new.get_block_ids(allow_none=True)
        if added is not None:
            self._worker[request] = tuple(worker + tuple(ids) for worker, ids in zip(self._worker[request], added))
        for group in range(len(self._groups)):
            self._write(request, group, len(done) // BLOCK_SIZE)
        return self._answer(request)

    @_events_taken
    def load_slots(self, request: int, tokens: tuple[int, ...], *, reserve: int = 0) -> tuple[int, ...] | None:
        """get_computed_blocks + allocate_slots of no new token, the tokens past the hit external
        and their caching delayed, `reserve` as its reserved_blocks, as the scheduler admits a
        request whose KV a connector loads."""
        if request in self._requests:
            raise WrongStateError(f"load_slots(request={request}): the request has a vLLM Request already; "
                                  "the scheduler loads a waiting request's KV")
        return self._admit(request, self._tokens(tokens), load=True, reserve=reserve)

    @_events_taken
    def finish_load(self, request: int) -> None:
        """cache_blocks(req, its computed tokens), as the scheduler caches a request's blocks once its
        load is done (`_update_waiting_for_remote_kv`)."""
        req = self._requests.get(request)
        if req is None:
            raise WrongStateError(f"finish_load(request={request}): the request has no vLLM Request")
        self.manager.cache_blocks(req, req.num_computed_tokens)

    def _admit(self, request: int, tokens: tuple[int, ...], load: bool = False,
               reserve: int = 0) -> tuple[int, ...] | None:
        """A waiting request's admission: its lookup, then allocate_slots of its tokens past the hit (as
        new tokens, or as external ones whose caching is delayed under `load`, with `reserve` blocks
        kept free), full_sequence_must_fit as the scheduler's default; the recorded hit, and the
        worker's table, or None."""
        if not tokens:
            raise InvalidArgumentError(f"request {request} has no tokens, and a vLLM Request has a prompt token at least")
        req = self._new_request(request, tokens)
        hit_blocks, hit, _ = self.manager.get_computed_blocks(req)
        if load:
            new = self._allocate(req, 0, hit, hit_blocks, num_external_computed_tokens=len(tokens) - hit,
                                 delay_cache_blocks=True, full_sequence_must_fit=True, reserved_blocks=reserve)
        else:
            new = self._allocate(req, len(tokens) - hit, hit, hit_blocks, full_sequence_must_fit=True)
        if new is None:
            return None
        self.manager.record_prefix_cache_stats(req, hit)  # admitted: the scheduler records the lookup's hit
        req.num_computed_tokens = len(tokens)
        self._requests[request] = req
        self._handed_out([block for group in new.blocks for block in group])
        blocks = self.manager.get_blocks(str(request))
        self._worker[request] = tuple(tuple(ids) for ids in blocks.get_block_ids())
        # a load's blocks are the connector's to write: those it is handed (nixl's and mooncake's schedulers),
        # in order from the place of the first of them, group by group (past the hit, the places a sliding
        # window still reads; past a retained group's own longer hit, which the connector does not load)
        unhashed = blocks.get_unhashed_block_ids_all_groups() if load else None
        for group, table in enumerate(self._worker[request]):
            first = hit // BLOCK_SIZE
            if load:
                first = table.index(unhashed[group][0], first) if unhashed[group] else len(table)
            self._write(request, group, first, unhashed[group] if load else None)
        return self._answer(request)

    def _allocate(self, req: Any, *args: Any, **kwargs: Any) -> Any:
        """The manager's allocate_slots; its ValueError for a call with no new tokens (and none
        computed to adopt) as the contract's InvalidArgumentError."""
        try:
            return self.manager.allocate_slots(req, *args, **kwargs)
        except ValueError as error:
            raise InvalidArgumentError(str(error)) from error

    @_events_taken
    def free_request(self, request: int) -> None:
        """remove_skipped_blocks(req, its computed tokens), then free(req), as a scheduler with a KV
        connector finishes a request; a request vLLM never saw is freed as a fresh Request of that id."""
        req = self._requests.pop(request, None)
        self._worker.pop(request, None)
        if req is not None:  # the scheduler's KV connector is told first (`_connector_finished`)
            self.manager.remove_skipped_blocks(str(request), req.num_computed_tokens, req.num_prompt_tokens)
        self.manager.free(req if req is not None else self._new_request(request, ()))

    # ----------------------------------------------------------------- views

    def tables(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(request, its block ids) read from vLLM's manager, by request."""
        return tuple((request, self._table(request)) for request in sorted(self._requests))

    def cached_tokens(self) -> tuple[tuple[int, int], ...]:
        """(request, the manager's estimate_cached_tokens of its Request), by request: the cached tokens
        the 0.34.0 scheduler reports in a request's prefill stats."""
        return tuple((request, self.manager.estimate_cached_tokens(req)) for request, req in sorted(self._requests.items()))

    def prefix_cache_stats(self) -> tuple[int, int, int, bool]:
        """(requests, queries, hits, reset) of the statistics the last call's step made."""
        return self._stats

    def boundary_states(self) -> tuple[tuple[int, int, int], ...]:
        """(request, block, boundary tokens) the last call's step offered a KV connector."""
        return self._offers

    def contents(self) -> tuple[tuple[int, int | None, tuple[int, ...]], ...]:
        """(block, parent hash, tokens) the adapter's model runner wrote, by block."""
        return tuple((block, parent, tokens) for block, (parent, tokens) in sorted(self._written.items()))

    def snapshot(self) -> Any:
        """The pool's snapshot, its holdings joined by each request's blocks in vLLM's table."""
        queue, blocks, pool_holdings = super().snapshot()
        held = {request: list(blocks_held) for request, blocks_held in pool_holdings}
        for request, table in self.tables():
            held.setdefault(request, []).extend(block for block in table if block != _NULL)
        return queue, blocks, tuple((request, tuple(sorted(b))) for request, b in sorted(held.items()) if b)
