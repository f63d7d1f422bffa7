"""The KV block pool's operation table: every operation of docs/block-pool-contract.md, once.

Two levels. The pool level is vLLM's `BlockPool` in contract form (blocks, hashes and requests as
ints). The request level is a KV cache manager on top of it (vLLM's `KVCacheManager`): a request
hands over its tokens and the pool finds its cached prefix, pins it, allocates the rest and caches
the full blocks under their chained hashes.

A third group belongs to the pool level of a pool that hashes in units smaller than a block
(`BlockSemantics.hash_units` > 1, vLLM's `hash_block_size`): partial prefix-cache entries, which make
a block reachable from a prefix boundary inside it, and the copy-on-write that moves a block's
entries to a private copy.

Domains: "request" (an int request id), "count" (an int >= 0), "block" (one block id), "flag" (a
bool), "blocks" (a tuple of block ids), "hashes" (a tuple of int block hashes), "tokens" (a tuple
of int token ids).
"""

from __future__ import annotations

from cacheproof.spec.kind import Argument, Operation

_REQUEST = Argument("request", "request")
_COUNT = Argument("n", "count")
_BLOCKS = Argument("blocks", "blocks")
_HASHES = Argument("hashes", "hashes")
_BLOCK = Argument("block", "block")
_SOURCE = Argument("source", "block")
_TARGET = Argument("target", "block")
_REPLACE = Argument("replace", "flag", keyword=True, default="False")
_RESERVE = Argument("reserve", "count", keyword=True, default="0")
_TOKENS = Argument("tokens", "tokens")
_BAD = "InvalidArgumentError"
_STATE = "WrongStateError"

BLOCK_OPERATIONS: tuple[Operation, ...] = (
    Operation("allocate", (_REQUEST, _COUNT), "blocks", (_BAD, _STATE, "CapacityError"), True,
              summary="take n blocks from the head of the free queue (a hashed one loses its hash)"),
    Operation("touch", (_REQUEST, _BLOCKS), "None", (_BAD, _STATE), True,
              summary="a prefix hit: ref + 1 each, held by the request; a free block leaves the queue"),
    Operation("cache_blocks", (_REQUEST, _BLOCKS, _HASHES), "None", (_BAD, _STATE), True,
              summary="blocks[i], held by the request and unhashed, gets hashes[i]"),
    Operation("lookup", (_HASHES,), "blocks", (_BAD,), False,
              summary="the first-inserted block of each hash of the longest cached prefix"),
    Operation("free", (_REQUEST, _BLOCKS), "None", (_BAD, _STATE), True,
              summary="ref - 1 each in order; at 0 a hashed block goes to the tail, an unhashed to the head"),
    Operation("unpin", (_REQUEST, _BLOCKS), "None", (_BAD, _STATE), True,
              summary="free, but the blocks stay readable until reused: at 0 each goes to the tail, watched"),
    Operation("writable", (_BLOCKS,), "blocks", (_BAD,), False,
              summary="the given blocks their one holder may write in place: ref 1 and no hash"),
    Operation("evict", (_BLOCKS,), "blocks", (_BAD,), True,
              summary="drop the hashes of the given blocks (queue places kept); the blocks that had one"),
    Operation("reset", (), "bool", (), True,
              summary="drop every hash; False, changing nothing, while a non-null block is in use"),
    Operation("num_free", (), "count", (), False, summary="the free queue's length"),
    Operation("cache_partial", (_REQUEST, _BLOCK, _HASHES, _REPLACE), "None", (_BAD, _STATE), True,
              summary="the block, held by the request, is also found by the last hash of the chain `hashes` "
                      "(a boundary inside it, len(hashes) hash units from the start); replace: its other hashes go"),
    Operation("move_hashes", (_REQUEST, _SOURCE, _TARGET), "None", (_BAD, _STATE), True,
              summary="every hash of source moves to target (held by the request, unhashed); no event"),
    Operation("find_cached_prefix", (_TOKENS,), "count", (_BAD,), False,
              summary="how many leading tokens a new request with these tokens would find cached"),
    Operation("allocate_slots", (_REQUEST, _TOKENS), "blocks or None", (_BAD, _STATE), True,
              summary="give the request blocks for all its tokens (prefix hit first); None if too few free"),
    Operation("free_request", (_REQUEST,), "None", (_BAD, _STATE), True,
              summary="free every block of the request, last block first"),
    Operation("load_slots", (_REQUEST, _TOKENS, _RESERVE), "blocks or None", (_BAD, _STATE), True,
              summary="a new request whose tokens' KV a connector loads: blocks as allocate_slots, none hashed; "
                      "None unless `reserve` blocks stay free"),
    Operation("finish_load", (_REQUEST,), "None", (_BAD, _STATE), True,
              summary="the request's load is done: its full blocks are hashed"),
)
"""The block pool's operations, pool level first, in the order the checker lists them."""

BLOCK_TYPES: dict[str, str] = {
    "request": "int", "count": "int", "block": "int", "flag": "bool", "blocks": "tuple[int, ...]", "hashes": "tuple[int, ...]",
    "tokens": "tuple[int, ...]", "None": "None", "bool": "bool", "blocks or None": "tuple[int, ...] | None",
}
"""The Python type of each argument domain and result above, as docs/block-pool-contract.md's
signatures write them (a list is accepted where a tuple is taken; results are tuples)."""

POOL_OPERATIONS: tuple[str, ...] = (
    "allocate", "touch", "cache_blocks", "lookup", "free", "unpin", "writable", "evict", "reset", "num_free",
)
"""The pool-level operations (vLLM's BlockPool has these)."""

PARTIAL_OPERATIONS: tuple[str, ...] = ("cache_partial", "move_hashes")
"""The pool-level operations of partial prefix-cache entries (vLLM's BlockPool has these: its
`cache_partial_block` and `move_block_hashes`); only a pool whose hash unit is smaller than its block
(`hash_units` > 1) has them."""

REQUEST_OPERATIONS: tuple[str, ...] = ("find_cached_prefix", "allocate_slots", "free_request")
"""The request-level operations (vLLM's KVCacheManager has these)."""

LOAD_OPERATIONS: tuple[str, ...] = ("load_slots", "finish_load")
"""The request-level operations of asynchronous KV loads (vLLM's KVCacheManager has these: its
`allocate_slots(..., num_external_computed_tokens, delay_cache_blocks=True)` and `cache_blocks`, which
the scheduler calls for a request whose KV a connector loads); only a request level behind a KV
connector has them, so the `contract` profile leaves them out."""

ALL_BLOCK_OPERATIONS: tuple[str, ...] = tuple(op.name for op in BLOCK_OPERATIONS)
"""Every operation name of the block contract, in table order."""
