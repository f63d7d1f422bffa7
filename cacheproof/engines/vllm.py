"""vLLM's real KV block pool (`vllm.v1.core.block_pool.BlockPool`) behind the block-pool contract.

`block_pool(num_blocks)` builds vLLM's own `BlockPool(num_blocks, enable_caching=True,
hash_block_size=2, enable_kv_cache_events=True, num_hash_lookahead_tokens=1)` from the installed package and wraps it in `VllmBlockPool`, which speaks the
contract of docs/block-pool-contract.md (`factory(num_blocks)`, block 0 the null block, requests,
blocks and hashes as ints). The adapter decides no outcome: every result, error and state change is
vLLM's, and the snapshot is read back from vLLM's objects, so a difference between vLLM and the
contract reaches the checker as a difference, never smoothed over here.

Translations, call by call (vLLM's names are those of vllm 0.34.0):
- block ids <-> vLLM's `KVCacheBlock` objects: id `b` is `pool.blocks[b]`. An id that names no
  block object (not an int, or outside 0..num_blocks-1) has no vLLM form, so it raises
  `InvalidArgumentError` here: the one answer the adapter gives itself, for lack of an argument
  to pass. `evict` passes its ids to vLLM unchanged (vLLM takes ids there).
- hashes <-> vLLM's `BlockHash` (bytes): an int is written as its minimal two's-complement
  big-endian bytes (one-to-one; a non-int hash has no vLLM form: `InvalidArgumentError`); the hash
  map keys are vLLM's own `make_block_hash_with_group_id(hash, 0)` (one KV-cache group, id 0).
- `allocate(request, n)` -> `get_new_blocks(n)`; the `ValueError` vLLM raises when `n` exceeds the
  free count becomes `CapacityError`. The blocks returned are recorded as held by `request`.
- `touch(request, blocks)` -> `touch([blocks])`; each block is recorded as held once more.
- Blocks of the pool level hold 4 tokens, two hash units of 2 (`hash_block_size=2`; the profile
  vllm-block-pool's `hash_units=2`), so a prefix boundary can fall inside a block. A pool-level
  call that needs a `vllm.v1.request.Request` builds a real one (id `str(request)`) whose
  `block_hashes` are one per hash unit: a block's hash stands for both its units (vLLM's view at
  the block size, `BlockHashListWithBlockSize`, takes a block's last unit), and its tokens are
  made up, 0, 1, 2, ..., two per unit and one more past the last (the pool's hashes cover one
  lookahead token after each block, `num_hash_lookahead_tokens=1`, which its events name).
- `cache_blocks(request, blocks, hashes)` -> `cache_full_blocks(req, [blocks], 0, len(blocks),
  4, 0, block_mask)`: every given block is a new full block of 4 tokens at its place in the
  request (so its hash covers as many units), in KV-cache group 0. vLLM has two ways to skip a block there, the null block and
  a False in `block_mask` (its sliding-window and Mamba groups mask the blocks no hit can reach);
  the contract's one skip (`null_block="skip"`) takes both forms, by the blocks given: blocks that
  start with the null block are a sliding window's table (its leading blocks left the window, are
  null and masked), so `block_mask` is False exactly at the null blocks; other blocks pass
  `block_mask=None`, the null block alone marking a skip.
- `cache_partial(request, block, hashes, replace=r)` -> `cache_partial_block(req, block,
  2 * len(hashes), 0, 4, replace_existing_hashes=r)` where `req` carries `hashes` as its unit hashes: the block is found by the boundary
  len(hashes) units in. `move_hashes(request, source, target)` -> `move_block_hashes(source,
  target)`.
- `lookup(hashes)` -> `get_cached_block(hash, [0])` for each hash in turn, stopping at the first
  miss (the prefix walk of vLLM's full-attention manager, without its token limit).
- `free(request, blocks)` -> `free_blocks([blocks])` called on a second vLLM pool (`peer`, vLLM's
  stock `BlockPool` of one block, events off), which hands each block on to the pool it came from
  (`block.pool`), as a deferred free does when a request's blocks come from several pools (vLLM's
  hybrid and host-tier configurations keep a pool per tier; `KVCacheBlock.pool` exists for this).
  So every free runs both halves of `free_blocks`: the routing of another pool's blocks and the
  release into the block's own pool, and a block freed into the wrong pool shows in this pool's
  queue and counts. One holding of each block by `request` is forgotten when there is one.
- `unpin(request, blocks)` -> `unpin_blocks([blocks], on_reuse)` on the pool itself (vLLM's
  unpin routes no block to another pool), `on_reuse` the adapter's: it records each block vLLM
  reports reused, which the `reused()` view reads back after the call (sorted). One holding of each
  block by `request` is forgotten, as for free.
- `writable(blocks)` -> `is_block_writable(block)` for each given block, once each, in the order
  given; the answer is the blocks vLLM says yes to.
- `evict(blocks)` -> `evict_blocks(set(blocks))`; the result is read back: the given blocks (in
  the order given, once each) that had a hash before the call and have none after.
- `reset()` -> `reset_prefix_cache()`; `num_free()` -> `get_num_free_blocks()`.
- `snapshot()` reads vLLM's state: the free queue walked from `free_block_queue`'s fake head
  along `next_free_block` (at most num_blocks + 1 steps, so a corrupt cycle shows as an
  impossible length instead of hanging), each block's `ref_cnt` and the int of its `block_hash`,
  and the holdings the adapter recorded (vLLM's pool has no request identity). The null block's
  count is read as 0: block tables pad with the null block, so vLLM's `touch` adds to its
  `ref_cnt` and `free_blocks` takes from it like any block's, and nothing in vLLM reads that
  number back (every queue operation tests `is_null` first), so it counts no holding; the
  contract's null block has ref 0 for ever. Its queue place and hash are read as they are.

KV cache events are on, as in a deployment whose router reads them: every call runs vLLM's event
code too (a crash there is the call's), and the events are taken from the queue after each call
and read back by the `events()` view (spec/blocks/events.py): each `BlockStored` naming a hash as
(parent, hashes, tokens), each `BlockRemoved`'s hashes, `AllBlocksCleared` as cleared; hashes as ints the
way the hash map's are. vLLM writes an event's hash in its external form
(`maybe_convert_block_hash`: by default the BlockHash's bytes read as an unsigned 64-bit int, which
several BlockHashes may share); the adapter reads it back through a table of the external form of
every hash it handed vLLM (an external hash it never handed stays as vLLM wrote it, so it differs). A `BlockStored` naming no hash (vLLM emits one when every block
`cache_full_blocks` was given is the null block) announces nothing and is left out: the one
translation that drops anything. `touch` plays vLLM's KVCacheManager in `kv_cache_report_mode`
"full" (profile vllm-block-pool: `hit_events="stored"`): after `touch(blocks)`, when the non-null
blocks all carry a hash, `emit_cached_block_events(req, len(hit), 4, 0)` over a Request whose
block hashes are theirs, as `get_computed_blocks` does for a prefix hit. The pool level's blocks
hold no tokens, so its Requests carry made-up tokens. What an event says of its blocks' tokens, its
token ids, each block's lookahead token ids and each block's extra keys (multimodal features,
LoRA, cache salt: the contract's requests have none), reads back as none when it is exactly what
the call made up for the blocks the event names (their tokens, the token after each block's end,
no extra key for any block; for `cache_partial` the boundary's last unit and the token after it),
and otherwise as the `TokenData` vLLM wrote, which differs; the request level's events read as
the request's own token ids when they name no lookahead and no extra key. A stored event also names
its KV-cache group (`group_idx`, and at the manager `kv_cache_spec_kind` and
`kv_cache_spec_sliding_window`, which a router filters groups by): naming the one group as vLLM's
code there does (the pool: index 0 unannotated; the manager: its group's kind, no window) reads as
nothing more, any other naming is joined to the token data, so the view differs.

Holdings are the adapter's record of what it was asked to do, not a check: a request may "free"
a block it never held (vLLM then decrements the count anyway, to -1 on a double free) and the
snapshot shows both vLLM's count and the record, so the checker sees the disagreement.

The request level (`kv_cache_manager`, vLLM's KVCacheManager) is adapted in
cacheproof.engines.vllm_manager, whose docstring lists its translations.
"""

from __future__ import annotations

import functools
import logging

from typing import Any

from cacheproof.engines.vllm_events import TokenData, VllmEvents
from cacheproof.spec.blocks.manager import group_seed
from cacheproof.spec.errors import CapacityError, InvalidArgumentError

__all__ = ["VllmBlockPool", "block_pool", "block_pool_uncached", "kv_cache_manager", "kv_cache_manager_full", "kv_cache_manager_uncached",
           "kv_cache_manager_swa", "kv_cache_manager_mamba", "kv_cache_manager_hybrid", "encoder_cache", "encoder_cache_slots", "encoder_decoder_slots", "MISSING_VLLM"]

MISSING_VLLM = (
    "cacheproof.engines.vllm needs the real vLLM package (vllm==0.34.0): install the extra "
    "`pip install -e '.[engines]'` in a checkout, or build a venv that has it with "
    "`bash tools/engines_venv.sh VENV` (pins in constraints/engines.txt)"
)
_GROUP = 0
"""The one KV-cache group the adapter uses."""
HASH_UNIT_TOKENS = 2
"""Tokens per hash unit of the pool `block_pool` builds (vLLM's `hash_block_size`)."""
HASH_UNITS = 2
"""Hash units per block of that pool (the profile vllm-block-pool's `hash_units`)."""
LOOKAHEAD_TOKENS = 1
"""Tokens after each block that its hash covers in the pool `block_pool` builds (vLLM's
`num_hash_lookahead_tokens`): its KV cache events then name them too."""


def block_pool(num_blocks: int, *, pool_class: Any = None, peer_class: Any = None,
               caching: bool = True) -> "VllmBlockPool":
    """vLLM's real BlockPool with `num_blocks` blocks (block 0 the null block), as a contract pool.

    `pool_class` replaces `vllm.v1.core.block_pool.BlockPool` (a subclass, a patched class) and is
    built with the same arguments; `peer_class` replaces it for the peer pool every `free` is
    called on (module docstring); `caching` is vLLM's `enable_caching`. Raises ImportError naming
    the extra and the tools script when vLLM is not installed.
    """
    try:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core import block_pool as vllm_block_pool
        from vllm.v1.core.kv_cache_utils import BlockHash, get_block_hash, get_group_id, maybe_convert_block_hash
        from vllm.v1.request import Request
    except ImportError as error:
        raise ImportError(f"{MISSING_VLLM} ({error})") from error
    cls = vllm_block_pool.BlockPool if pool_class is None else pool_class
    pool = cls(num_blocks, enable_caching=caching, hash_block_size=HASH_UNIT_TOKENS, enable_kv_cache_events=True,
               num_hash_lookahead_tokens=LOOKAHEAD_TOKENS)
    vllm = _VllmNames(BlockHash, get_block_hash, get_group_id, maybe_convert_block_hash, Request, SamplingParams(max_tokens=1))
    return VllmBlockPool(pool, vllm, _peer_pool(vllm_block_pool.BlockPool if peer_class is None else peer_class),
                         units=HASH_UNITS)


def block_pool_uncached(num_blocks: int) -> "VllmBlockPool":
    """vLLM's real BlockPool built with prefix caching off (`enable_caching=False`), as vLLM builds
    it when prefix caching is disabled; checked under the profile vllm-block-pool-uncached."""
    return block_pool(num_blocks, caching=False)


def _peer_pool(cls: Any) -> Any:
    """The pool every `free` is called on: vLLM's `cls` of one block (the null block), caching on,
    events off; it owns none of the contract's blocks, so its `free_blocks` hands them on."""
    return cls(1, enable_caching=True, hash_block_size=1)


class _VllmNames:
    """The vLLM types and helpers the adapter builds arguments with (imported lazily)."""

    __slots__ = ("block_hash", "get_block_hash", "get_group_id", "external_hash", "request", "sampling")

    def __init__(self, block_hash: Any, get_block_hash: Any, get_group_id: Any, external_hash: Any, request: Any,
                 sampling: Any) -> None:
        self.block_hash = block_hash
        self.get_block_hash = get_block_hash
        self.get_group_id = get_group_id
        self.external_hash = external_hash
        self.request = request
        self.sampling = sampling


def _events_taken(operation: Any) -> Any:
    """The adapter's `operation`, then vLLM's KV cache event queue taken (also when it raises): the
    call's events, which `events()` reads back; the blocks vLLM reports reused are recorded afresh
    for each call (`reused()`)."""
    @functools.wraps(operation)
    def taking(self: "VllmBlockPool", *args: Any, **kwargs: Any) -> Any:
        self._told, self._made_up = [], None
        try:
            return operation(self, *args, **kwargs)
        finally:
            self._emitted = self._take_events()
    return taking


def _without_warnings(call: Any) -> Any:
    """`call()` with vLLM's logger raised to ERROR (a busy pool's reset warns; False is the answer)."""
    logger = logging.getLogger("vllm")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return call()
    finally:
        logger.setLevel(level)


class VllmBlockPool(VllmEvents):
    """A vLLM `BlockPool` speaking the block-pool contract; `pool` is the vLLM object itself,
    `peer` the vLLM pool of no contract block that every `free` is called on; a pool-level block
    holds `units` of the pool's hash units."""

    def __init__(self, pool: Any, vllm: _VllmNames, peer: Any, *, units: int = 1,
                 groups: tuple[tuple[int, Any, Any], ...] = ((_GROUP, None, None),)) -> None:
        self.pool = pool
        self.units = units
        self.block_size = units * pool.hash_block_size  # tokens per block of the pool-level calls
        self._vllm = vllm
        self.peer = peer  # the other pool free_blocks is called on (module docstring)
        self._held: dict[int, list[int]] = {}
        self._emitted: list[Any] = []  # vLLM's KV cache events of the last call
        self._external: dict[Any, int] = {}  # the external form (in events) of every hash handed vLLM -> its int
        self._told: list[int] = []  # the blocks vLLM reported reused to the unpinner during the last call
        self._made_up: TokenData | None = None  # what the last call's made-up Request gives the blocks it names
        self._groups = groups  # how an event names each group (the pool leaves its one unannotated; a manager annotates)
        self._group_hashes: dict[tuple[int, int], int] = {}  # (group 0's int, group) -> that group's int

    @property
    def num_blocks(self) -> int:
        return len(self.pool.blocks)

    def _take_events(self) -> list[Any]:
        """vLLM's KV cache events since the last take: the pool's queue."""
        return self.pool.take_events()

    # ----------------------------------------------------------------- translations

    def _blocks(self, ids: tuple[int, ...]) -> list[Any]:
        """vLLM's block objects for `ids`; an id naming none has no vLLM form."""
        objects = self.pool.blocks
        for block in ids:
            if isinstance(block, bool) or not isinstance(block, int) or not 0 <= block < len(objects):
                raise InvalidArgumentError(f"block {block!r} names no block of vLLM's pool (0..{len(objects) - 1})")
        return [objects[block] for block in ids]

    def _hash(self, value: int) -> bytes:
        """An int hash as vLLM's BlockHash: minimal two's-complement big-endian bytes."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"hash {value!r} is not an int, so it has no BlockHash form")
        key = self._vllm.block_hash(value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))
        self._external[self._vllm.external_hash(key)] = value
        return key

    def _hash_of(self, key: bytes | None) -> Any:
        """The int of a block's hash key (BlockHash plus group id) in its group's chain, None for no hash."""
        if key is None:
            return None
        return self._in_group(self._int_of(self._vllm.get_block_hash(key)), self._vllm.get_group_id(key))

    def _in_group(self, value: Any, group: int) -> Any:
        """The hash in group `group`'s chain (`group_seed`) of the block whose first-group hash is `value`
        (None: a chain's start): group 0's is `value`, another's was recorded as the block was hashed
        (vLLM keys it by hash and group); one never recorded reads as (value, group), which differs."""
        if group == _GROUP:
            return value
        if value is None:
            return group_seed(group)
        return self._group_hashes.get((value, group), (value, group))

    @staticmethod
    def _int_of(value: bytes) -> int:
        """The int of a BlockHash: its bytes as a signed big-endian int."""
        return int.from_bytes(value, "big", signed=True)

    def _hold(self, request: int, blocks: list[Any]) -> None:
        """Record the holdings vLLM's call made: the null block it passes over (`is_null`) is not held."""
        self._held.setdefault(request, []).extend(block.block_id for block in blocks if not block.is_null)

    # ----------------------------------------------------------------- operations

    @_events_taken
    def allocate(self, request: int, n: int) -> tuple[int, ...]:
        """get_new_blocks(n); its ValueError (n above the free count) as CapacityError."""
        try:
            blocks = self.pool.get_new_blocks(n)
        except ValueError as error:
            raise CapacityError(str(error)) from error
        self._hold(request, blocks)
        self._handed_out(blocks)
        return tuple(block.block_id for block in blocks)

    def _handed_out(self, blocks: list[Any]) -> None:
        """A hook for blocks vLLM handed out again (the request level forgets their tokens)."""

    @_events_taken
    def touch(self, request: int, blocks: tuple[int, ...]) -> None:
        """touch(blocks): a prefix hit by `request`, re-announced as the manager does in
        kv_cache_report_mode "full" when every non-null block carries a hash."""
        objects = self._blocks(tuple(blocks))
        hit = [block for block in objects if not block.is_null]
        keys = [block.block_hash for block in hit]
        self.pool.touch(objects)
        self._hold(request, objects)
        if hit and None not in keys:
            req = self._pool_request(request, self._per_unit([self._vllm.get_block_hash(key) for key in keys]),
                                     0, len(hit) * self.block_size, [(i + 1) * self.block_size for i in range(len(hit))])
            self.pool.emit_cached_block_events(req, len(hit), self.block_size, _GROUP)

    @_events_taken
    def cache_blocks(self, request: int, blocks: tuple[int, ...], hashes: tuple[int, ...]) -> None:
        """cache_full_blocks over a real vLLM Request carrying `hashes` as its block hashes; blocks
        that start with the null block are a window's, their null blocks masked out too."""
        objects = self._blocks(tuple(blocks))
        ends = [(place + 1) * self.block_size for place, block in enumerate(objects) if not block.is_null]
        req = self._pool_request(request, self._per_unit([self._hash(value) for value in hashes]),
                                 0, len(objects) * self.block_size, ends)
        windowed = bool(objects) and objects[0].is_null
        mask = [not block.is_null for block in objects] if windowed else None
        self.pool.cache_full_blocks(req, objects, 0, len(objects), self.block_size, _GROUP, block_mask=mask)

    @_events_taken
    def cache_partial(self, request: int, block: int, hashes: tuple[int, ...], *, replace: bool = False) -> None:
        """cache_partial_block at the boundary len(hashes) units in, over a Request carrying
        `hashes` as its unit hashes; its event names the boundary's last unit."""
        (target,) = self._blocks((block,))
        unit = self.pool.hash_block_size
        boundary = len(hashes) * unit
        req = self._pool_request(request, [self._hash(value) for value in hashes], boundary - unit, boundary, [boundary])
        self.pool.cache_partial_block(req, target, boundary, _GROUP, self.block_size, replace_existing_hashes=replace)

    @_events_taken
    def move_hashes(self, request: int, source: int, target: int) -> None:
        """move_block_hashes(source, target)."""
        self.pool.move_block_hashes(*self._blocks((source, target)))

    @_events_taken
    def lookup(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        """get_cached_block for each hash until the first miss."""
        found = []
        for value in hashes:
            cached = self.pool.get_cached_block(self._hash(value), [_GROUP])
            if cached is None:
                break
            found.append(cached[0].block_id)
        return tuple(found)

    @_events_taken
    def free(self, request: int, blocks: tuple[int, ...]) -> None:
        """free_blocks(blocks) in the order given, called on the peer pool, which returns each block
        to its own pool; one recorded holding of each is forgotten."""
        objects = self._blocks(tuple(blocks))
        self.peer.free_blocks(objects)
        self._forget(request, objects)

    @_events_taken
    def unpin(self, request: int, blocks: tuple[int, ...]) -> None:
        """unpin_blocks(blocks, on_reuse) in the order given; one recorded holding of each is forgotten."""
        objects = self._blocks(tuple(blocks))
        self.pool.unpin_blocks(objects, self._on_reuse)
        self._forget(request, objects)

    def _pool_request(self, request: int, unit_hashes: list[Any], start: int, end: int, ends: list[int]) -> Any:
        """A vLLM Request of the pool level for `request`, carrying `unit_hashes` (one per hash
        unit) and made-up tokens 0, 1, 2, ... filling those units and the lookahead after them
        (blocks hold no tokens at this level). Remembered for the events view: the token data of
        the call's event (`TokenData`), tokens[start:end] and the lookahead after each of `ends`,
        the ends of the blocks (or boundary) it names."""
        vllm, lookahead = self._vllm, self.pool.num_hash_lookahead_tokens
        tokens = tuple(range(len(unit_hashes) * self.pool.hash_block_size + lookahead))
        self._made_up = TokenData(tokens[start:end],
                                  tuple(tokens[e : e + lookahead] for e in ends) if lookahead else None,
                                  (None,) * len(ends))
        return vllm.request(str(request), list(tokens), vllm.sampling, None, block_hashes=unit_hashes)

    def _per_unit(self, keys: list[Any]) -> list[Any]:
        """Block hashes as unit hashes: each block's for each of its units (vLLM's view at the block
        size takes a block's last unit, so the view gives the block hashes back)."""
        return [key for key in keys for _ in range(self.units)]

    def _on_reuse(self, block: Any) -> None:
        """vLLM's call to the unpinner: `block` is reused, stop reading it."""
        self._told.append(block.block_id)

    def _forget(self, request: int, objects: list[Any]) -> None:
        """One recorded holding of each block by `request` is forgotten, where there is one."""
        held = self._held.get(request, [])
        for block in objects:
            if block.block_id in held:
                held.remove(block.block_id)

    @_events_taken
    def writable(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """is_block_writable of each given block, once each; the blocks it says yes to."""
        objects = self._blocks(tuple(dict.fromkeys(blocks)))
        return tuple(block.block_id for block in objects if self.pool.is_block_writable(block))

    @_events_taken
    def evict(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """evict_blocks(set(blocks)); returns the given blocks whose hash it dropped."""
        ids = tuple(dict.fromkeys(blocks))
        objects = self.pool.blocks
        try:
            hashed = [block for block in ids if objects[block].block_hash is not None]
        except (IndexError, TypeError):
            hashed = []  # vLLM's own check answers below
        self._evict_blocks(set(ids))
        return tuple(block for block in hashed if objects[block].block_hash is None)

    def _evict_blocks(self, ids: set[int]) -> None:
        """The evict_blocks call: the pool's (a manager's adapter calls its manager's)."""
        self.pool.evict_blocks(ids)

    @_events_taken
    def reset(self) -> bool:
        """reset_prefix_cache(); its warning on a busy pool (an answer, False, not news) is kept
        out of the checker's output."""
        return _without_warnings(self.pool.reset_prefix_cache)

    @_events_taken
    def num_free(self) -> int:
        """get_num_free_blocks()."""
        return self.pool.get_num_free_blocks()

    # ----------------------------------------------------------------- state read back

    def free_queue(self) -> tuple[int, ...]:
        """vLLM's free queue, head first, walked along next_free_block (bounded)."""
        queue = self.pool.free_block_queue
        tail = queue.fake_free_list_tail
        order = []
        block = queue.fake_free_list_head.next_free_block
        while block is not None and block is not tail and len(order) <= len(self.pool.blocks):
            order.append(block.block_id)
            block = block.next_free_block
        return tuple(order)

    def snapshot(self) -> tuple[tuple[int, ...], tuple[tuple[int, int | None], ...], tuple[tuple[int, tuple[int, ...]], ...]]:
        """(free queue, per-block (ref_cnt, hash or None), sorted holdings) read from vLLM; the null
        block's ref_cnt, which counts no holding, as 0 (see the module docstring)."""
        blocks = tuple(
            (0 if block.is_null else block.ref_cnt, self._hash_of(block.block_hash)) for block in self.pool.blocks
        )
        holdings = tuple(sorted((request, tuple(sorted(held))) for request, held in self._held.items() if held))
        return self.free_queue(), blocks, holdings

    def reused(self) -> tuple[int, ...]:
        """The blocks vLLM reported reused to the unpinner during the last call, sorted."""
        return tuple(sorted(self._told))


def kv_cache_manager(num_blocks: int, *, manager_class: Any = None) -> Any:
    """vLLM's real KVCacheManager as a contract pool with a request level: the factory of
    cacheproof.engines.vllm_manager (imported on the first call; that module builds on this one)."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class)


def kv_cache_manager_full(num_blocks: int, *, manager_class: Any = None) -> Any:
    """`kv_cache_manager` whose requests ask for `kv_cache_report_mode="full"` (a router that wants
    every prefix hit re-announced); checked under the profile vllm-kv-cache-manager-full."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class, report_mode="full")


def kv_cache_manager_uncached(num_blocks: int, *, manager_class: Any = None) -> Any:
    """`kv_cache_manager` built with prefix caching off (`enable_caching=False`, as vLLM builds it
    when the engine's `enable_prefix_caching` is off); checked under the profile
    vllm-kv-cache-manager-uncached."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class, caching=False)


def kv_cache_manager_swa(num_blocks: int, *, manager_class: Any = None) -> Any:
    """`kv_cache_manager` of one sliding-window group (`SlidingWindowSpec`, a window of 4 tokens:
    every layer of the model slides); checked under the profile vllm-kv-cache-manager-swa."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class, sliding_window=4)


def kv_cache_manager_mamba(num_blocks: int, *, manager_class: Any = None) -> Any:
    """`kv_cache_manager` of one Mamba group with prefix caching in align mode (`MambaSpec`,
    `mamba_cache_mode="align"`: every layer of the model is recurrent); checked under the profile
    vllm-kv-cache-manager-mamba."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class, mamba=True)



def kv_cache_manager_hybrid(num_blocks: int, *, manager_class: Any = None) -> Any:
    """`kv_cache_manager` over two groups on one pool, full attention and a sliding window of 4 tokens
    (`HybridKVCacheCoordinator`); checked under the profile vllm-kv-cache-manager-hybrid."""
    from cacheproof.engines import vllm_manager

    return vllm_manager.kv_cache_manager(num_blocks, manager_class=manager_class, window_group=4)

from cacheproof.engines.vllm_encoder import encoder_cache  # noqa: E402 - documented as cacheproof.engines.vllm:encoder_cache
from cacheproof.engines.vllm_slots import encoder_cache_slots, encoder_decoder_slots  # noqa: E402 - documented as cacheproof.engines.vllm:encoder_decoder_slots, :encoder_cache_slots
