"""`BlockSemantics`: the design choices on which real KV block pools differ from the block contract.

Each field names one choice; its default is the contract's (docs/block-pool-contract.md). The
profiles reuse `spec.kind.Profile`: a name, the semantics, the operations a pool of that design
has, and a summary. What vLLM's code does, per field, is written next to the field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from cacheproof.spec.blocks.operations import (
    ALL_BLOCK_OPERATIONS, LOAD_OPERATIONS, PARTIAL_OPERATIONS, POOL_OPERATIONS, REQUEST_OPERATIONS,
)
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import Profile
from cacheproof.spec.overrides import OptionSemantics

BLOCK_OPTIONS: dict[str, tuple[Any, ...]] = {
    "misuse": ("checked", "trusted"),
    "null_block": ("error", "skip"),
    "free_unknown_request": ("error", "noop"),
    "hit_events": ("none", "stored", "lookup"),
    "hash_units": (1, 2),
    "prefix_caching": ("on", "off"),
    "no_new_tokens": ("answered", "refused"),
    "sliding_window": (0, 4),
    "recurrent_state": ("none", "align"),
    "window_group": (0, 4),
    "first_group_hit": ("cut", "retained"),
}
"""The valid values of every field."""


@dataclass(frozen=True)
class BlockSemantics(OptionSemantics):
    """One block pool's design choices; every default is the contract's.

    - misuse: a call that breaks the contract (a double free, a touch of a free unhashed block,
      caching a hashed block or one the request does not hold, n above the free count, a wrong
      type, an id out of range) raises a typed error and changes nothing ("checked"), or is the
      caller's fault ("trusted": the pool need not check, and a checker never makes such a call;
      the spec still refuses it, having no other answer). vLLM's `BlockPool` is "trusted": its
      `free_blocks` decrements with no check, `touch` pins whatever it is given, `evict_blocks`
      asserts, and its callers (the KV cache manager, the connectors) are responsible.
    - null_block: passing the null block (id 0) to touch, cache_blocks, free or evict is an
      InvalidArgumentError ("error"), or that block is skipped and the rest of the call proceeds
      ("skip"; in cache_blocks its hash is skipped with it). vLLM skips it: block tables pad with
      the null block, so `touch`, `free_blocks` and `cache_full_blocks` pass over `is_null`
      blocks, and the null block has no hash for `evict_blocks` to drop.
    - free_unknown_request: `free_request` of a request with no blocks at the request level (never
      allocated, or freed already) is a WrongStateError ("error"), or does nothing ("noop"). vLLM's
      `KVCacheManager.free` does nothing there: each single-type manager pops the request's blocks
      with an empty default, so a scheduler may free a request it aborted before any allocation.
    - hit_events: a prefix hit (`touch` of blocks that all carry a hash; `allocate_slots`' cached
      prefix) announces nothing ("none": it stores no new hash), or re-announces the reused
      blocks' hashes as one stored event with no parent, with the blocks' tokens ("stored"), the
      KV cache events of spec/blocks/events.py; or, at the request level, every lookup that finds
      a cached prefix re-announces it so ("lookup"): `find_cached_prefix` too, and the first
      `allocate_slots` of a request also when it answers None (at the pool level "lookup" is
      "stored"). vLLM's manager emits nothing by default; for a request whose
      `kv_cache_report_mode` is "full" it is "lookup": `KVCacheManager.get_computed_blocks` calls
      `BlockPool.emit_cached_block_events` on every hit it finds, before any allocation, and the
      scheduler's connector lookup (`get_computed_blocks_for_connector`) goes through it. vLLM's
      pool alone, which makes no lookups of its own, is "stored".
    - hash_units: how many hash units a block holds: the hashes of a request's chain are taken
      every 1/hash_units of a block, and a block's own hash is the chain's hash at the block's end.
      At 1 (the contract) a block is hashed whole, once, when full. Above 1 a prefix boundary can
      fall inside a block, and the pool level has the partial prefix-cache entries
      (`cache_partial`, `move_hashes`; spec/blocks/partial.py): a block carries a primary hash with
      the units it covers and further hashes beside it. vLLM's `BlockPool` is built with a
      `hash_block_size` that divides its groups' block sizes; the adapter's is half its block (2).
    - prefix_caching: the request level caches each full block of a request and finds cached
      prefixes ("on"), or neither ("off": `allocate_slots` hashes no block, so a freed block goes to
      the head of the queue, and `allocate_slots` and `find_cached_prefix` find no cached prefix).
      The pool level is unchanged (a profile under "off" lists no `cache_blocks`, as vLLM's pool
      built without caching never hashes). vLLM's manager built with `enable_caching=False` (the
      engine's `enable_prefix_caching=False`) is "off": it runs `KVCacheCoordinatorNoPrefixCache`,
      whose lookup finds nothing, and its `cache_blocks` does nothing.
    - no_new_tokens: an `allocate_slots` whose tokens add none (a running request's own tokens, a
      new request's empty ones) answers the table and changes nothing ("answered"), or is an InvalidArgumentError that
      changes nothing ("refused"). vLLM's `KVCacheManager.allocate_slots` refuses it: a call with
      no new tokens and no computed tokens to adopt raises ValueError before any change (a
      scheduler that schedules a request no token has a bug).
    - sliding_window: at the request level every token attends to all before it (0: full
      attention), or to the last W tokens (W: a sliding window of W tokens). Under a window of W
      (block size B), once n tokens are computed the blocks wholly before token n - W + 1 are
      read no more: a running request's call first frees them (last first) and its table names
      the null block there, whether or not the call then gets its blocks; a new request's table
      names the null block for the skipped blocks of what it adopts (its hit, or a load's
      tokens), and pins none of them. A prefix hit is the longest prefix whose last
      ceil((W - 1) / B) blocks are all cached (the window's reads; the blocks before are the null
      block), or failing any, the cached blocks from the start, fewer than that. vLLM's manager
      of one sliding-window group (`SlidingWindowSpec`, `SlidingWindowManager`) is W; 4 is the
      value a profile names (two blocks of the adapter's two tokens).
    - recurrent_state: at the request level a block holds the KV of its tokens ("none": an
      attention layer), or a recurrent layer's state after its last token ("align": a Mamba layer
      whose prefix caching keeps one state per block boundary). Under "align" a request holds
      the state block of its last token's place and, until its next call, the one before; the
      other places name the null block; a block is cached when a call ends on its place's
      boundary, and the call offers it to a KV connector (`boundary_states()`); a prefix hit is
      the one cached block of the longest cached prefix, the null block before it; a call whose
      request stops inside a block may add only the tokens up to that block's end (the
      scheduler's alignment). spec/blocks/recurrent.py states the rules. vLLM's manager of one
      Mamba group (`MambaSpec(mamba_cache_mode="align")`, `MambaManager`) is "align". A group is
      attention or recurrent: "align" with a sliding window is an InvalidArgumentError.
    - window_group: the request level keeps one KV-cache group (0), or a second group beside a
      full-attention first one, a sliding window of W tokens (W), on the same pool and block size.
      Each rule of the request level then holds per group, in group order: a call takes the first
      group's new blocks, then the second's (None, nothing changed, unless all fit); each group's
      stale blocks are freed as a window's; `free_request` frees the first group's table last block
      first, then the second's; each group's full blocks are hashed under a chain of its own (the
      second group's starts from `group_seed(1)`, not from no parent) and stored as one event per
      group. A prefix hit is a fold: the first group's longest cached prefix bounds the window's
      search, and the first group is cut to the window's hit. `tables()` shows a request's two
      tables one after the other, and `cached_tokens()` the fewer of the groups' cached tokens.
      vLLM's manager over a full-attention and a sliding-window group
      (`HybridKVCacheCoordinator`, its hash map keyed by hash and group, `estimate_cached_tokens`
      the groups' minimum) is W; 4 is the value a profile names. Only the first group may be the
      full-attention one: window_group with a sliding window or a recurrent state in the first
      group is an InvalidArgumentError.
    - first_group_hit (under window_group): the lookup cuts the first group's hit to the common hit
      ("cut"), or leaves it whole, and the allocation cuts it to the tokens the request does not
      compute: the common hit for `allocate_slots`, all its tokens for `load_slots` ("retained": a
      load adopts as much of the first group's own cached prefix as it has, the loaded tokens'
      blocks beyond the common hit included; the hit a request counts, `cached_tokens()` and the
      statistics stay the common one). vLLM's group whose manager `retains_longer_hit` (HiSparse's
      host tier, `HiSparseSourceManager`, which keeps prefixes the device groups have lost) is
      "retained": `find_longest_cache_hit` leaves its hit whole, and `allocate_slots` cuts it to
      `num_new_computed_tokens + num_external_computed_tokens`. With one group both answer alike.
    """

    OPTIONS: ClassVar[dict[str, tuple[Any, ...]]] = BLOCK_OPTIONS
    misuse: str = "checked"
    null_block: str = "error"
    free_unknown_request: str = "error"
    hit_events: str = "none"
    hash_units: int = 1
    prefix_caching: str = "on"
    no_new_tokens: str = "answered"
    sliding_window: int = 0
    recurrent_state: str = "none"
    window_group: int = 0
    first_group_hit: str = "cut"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sliding_window and self.recurrent_state != "none":
            raise InvalidArgumentError(
                f"BlockSemantics: sliding_window={self.sliding_window} with recurrent_state="
                f"{self.recurrent_state!r}: the request level's one group is an attention layer or a recurrent "
                "one, not both"
            )
        if self.window_group and (self.sliding_window or self.recurrent_state != "none"):
            raise InvalidArgumentError(
                f"BlockSemantics: window_group={self.window_group} with sliding_window={self.sliding_window} and "
                f"recurrent_state={self.recurrent_state!r}: a second group's window stands beside a full-attention "
                "first group (sliding_window=0, recurrent_state=\"none\")"
            )


BLOCK_CONTRACT = BlockSemantics()
"""The block contract's semantics."""

VLLM_POOL = BlockSemantics(misuse="trusted", null_block="skip", hit_events="stored", hash_units=2)
"""vLLM's BlockPool's choices (the vllm-block-pool profiles)."""

VLLM_MANAGER = BlockSemantics(misuse="trusted", null_block="skip", free_unknown_request="noop", no_new_tokens="refused")
"""vLLM's KVCacheManager's choices (vllm-kv-cache-manager); its other profiles change one field each."""

MANAGER_OPERATIONS = (*REQUEST_OPERATIONS, *LOAD_OPERATIONS, "evict", "reset", "num_free")
"""The operations of vLLM's KV cache manager profiles: the request level with its asynchronous loads,
and the pool-level calls the scheduler makes through the manager (`evict_blocks` of a failed KV load,
`reset_prefix_cache`, its pool's free count)."""

MANAGER_OPERATIONS_WITHOUT_LOADS = tuple(name for name in MANAGER_OPERATIONS if name not in LOAD_OPERATIONS)
"""The manager's operations for a recurrent group: a load of a recurrent state is not in the contract
(spec/blocks/recurrent.py)."""

BLOCK_PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile(
            "contract",
            BLOCK_CONTRACT,
            tuple(name for name in ALL_BLOCK_OPERATIONS if name not in PARTIAL_OPERATIONS + LOAD_OPERATIONS),
            "the block-pool contract of docs/block-pool-contract.md (default), pool and request level "
            "(a block hashed whole, so no partial entries; no KV connector, so no asynchronous loads: "
            "--ops adds load_slots,finish_load)",
        ),
        Profile(
            "pool",
            BLOCK_CONTRACT,
            POOL_OPERATIONS,
            "the block-pool contract at the pool level only, for a pool with no request level "
            "(e.g. vLLM's BlockPool held to the contract rather than to its own design)",
        ),
        Profile(
            "vllm-block-pool",
            VLLM_POOL,
            (*POOL_OPERATIONS, *PARTIAL_OPERATIONS),
            "vLLM 0.34.0 BlockPool (get_new_blocks, touch, cache_full_blocks, get_cached_block, "
            "free_blocks, unpin_blocks, is_block_writable, evict_blocks, reset_prefix_cache, "
            "get_num_free_blocks, cache_partial_block, move_block_hashes), KV cache events on, "
            "a prefix hit re-announced (kv_cache_report_mode full), two hash units per block",
        ),
        Profile(
            "vllm-block-pool-uncached",
            VLLM_POOL,
            tuple(name for name in POOL_OPERATIONS if name != "cache_blocks"),
            "vLLM 0.34.0 BlockPool built with enable_caching=False: vllm-block-pool without cache_blocks "
            "(no block is ever hashed, so every freed block goes to the head of the queue and lookup finds "
            "nothing)",
        ),
        Profile(
            "vllm-kv-cache-manager",
            VLLM_MANAGER,
            MANAGER_OPERATIONS,
            "vLLM 0.34.0 KVCacheManager at the request level (get_computed_blocks, allocate_slots, free, "
            "evict_blocks, reset_prefix_cache, and its pool's get_num_free_blocks); the other pool-level calls are BlockPool's, "
            "held by vllm-block-pool",
        ),
        Profile(
            "vllm-kv-cache-manager-full",
            replace(VLLM_MANAGER, hit_events="lookup"),
            MANAGER_OPERATIONS,
            "vllm-kv-cache-manager with its requests in kv_cache_report_mode full: every lookup that hits "
            "re-announces the hit (get_computed_blocks' emit_cached_block_events)",
        ),
        Profile(
            "vllm-kv-cache-manager-uncached",
            replace(VLLM_MANAGER, prefix_caching="off"),
            MANAGER_OPERATIONS,
            "vllm-kv-cache-manager built with enable_caching=False (the engine's prefix caching off): no block "
            "is hashed and no lookup finds a cached prefix",
        ),
        Profile(
            "vllm-kv-cache-manager-swa",
            replace(VLLM_MANAGER, sliding_window=4),
            MANAGER_OPERATIONS,
            "vllm-kv-cache-manager of one sliding-window group (SlidingWindowSpec, a window of 4 tokens): a hit "
            "is the last blocks the window reads, and the blocks it no longer reads are freed as the request runs",
        ),
        Profile(
            "vllm-kv-cache-manager-hybrid",
            replace(VLLM_MANAGER, window_group=4),
            MANAGER_OPERATIONS,
            "vllm-kv-cache-manager over two groups, full attention and a sliding window of 4 tokens, on one pool "
            "(HybridKVCacheCoordinator): each request has a table per group, and a hit is the window's within the "
            "full group's",
        ),
        Profile(
            "vllm-kv-cache-manager-retained",
            replace(VLLM_MANAGER, window_group=4, first_group_hit="retained"),
            MANAGER_OPERATIONS,
            "vllm-kv-cache-manager-hybrid whose full-attention group's manager retains_longer_hit (HiSparse's "
            "host tier's rule): a load adopts that group's own longer hit, and allocate_slots cuts it to the "
            "tokens the request does not compute (cacheproof.engines.vllm_manager:kv_cache_manager_retained)",
        ),
        Profile(
            "vllm-kv-cache-manager-mamba",
            replace(VLLM_MANAGER, recurrent_state="align"),
            MANAGER_OPERATIONS_WITHOUT_LOADS,
            "vllm-kv-cache-manager of one Mamba group in align mode (MambaSpec, MambaManager): a request holds "
            "its state blocks, a state at a block boundary is cached and offered to a KV connector "
            "(take_boundary_state_offloads); no asynchronous loads",
        ),
    )
}
"""Every named block-pool profile, by name."""
