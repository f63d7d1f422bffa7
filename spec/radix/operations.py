"""The radix cache's operation table: every operation of docs/radix-contract.md, once.

Two levels. The tree level is SGLang's `RadixCache` in contract form: token sequences name the
nodes (the node where a match of the tokens ends), so that no call carries a node handle. The
request level is the scheduler's use of the tree: a request is admitted with its tokens (its
cached prefix matched and locked, KV slots allocated for the rest), checkpointed (a chunk of it
cached, the lock moved down) and released (cached whole, unlocked, forgotten).

Domains: "tokens" (a tuple of int token ids), "count" (an int >= 0), "request" (an int request id),
"namespace" (None, the default namespace, or a str: a key is its tokens in its namespace, and two
namespaces never share a node; SGLang's `RadixKey.extra_key` and `cache_salt`).
"""

from __future__ import annotations

from cacheproof.spec.kind import Argument, Operation

_TOKENS = Argument("tokens", "tokens")
_COUNT = Argument("n", "count")
_REQUEST = Argument("request", "request")
_UP_TO = Argument("up_to", "count", keyword=True)
_NAMESPACE = Argument("namespace", "namespace", keyword=True, default="None")
_BAD = "InvalidArgumentError"
_STATE = "WrongStateError"
_FULL = "CapacityError"

RADIX_OPERATIONS: tuple[Operation, ...] = (
    Operation("match_prefix", (_TOKENS, _NAMESPACE), "count", (_BAD,), True,
              summary="the longest cached prefix of tokens in the namespace (whole pages), splitting the node it ends inside; "
                      "its path is touched"),
    Operation("insert", (_TOKENS, _NAMESPACE), "count", (_BAD, _FULL), True,
              summary="cache tokens in the namespace (whole pages) with KV slots taken from the allocator; the slots of the part "
                      "already cached are handed back; the answer is that part's length"),
    Operation("lock", (_TOKENS, _NAMESPACE), "count", (_BAD,), True,
              summary="match_prefix, then lock + 1 on every node from the one it ends at up to the root"),
    Operation("unlock", (_TOKENS, _NAMESPACE), "count", (_BAD, _STATE), True,
              summary="lock - 1 on every node from the one a match of tokens ends at up to the root; "
                      "WrongStateError unless that node holds a lock of its own no live request holds"),
    Operation("evict", (_COUNT,), "count", (_BAD, _FULL), True,
              summary="free at least n tokens: unlocked leaves, least recently used first; CapacityError "
                      "above the evictable size"),
    Operation("reset", (), "bool", (), True,
              summary="empty the tree, its slots freed; False, changing nothing, while a node is locked or a "
                      "request is live"),
    Operation("evictable_size", (), "count", (), False, summary="tokens in unlocked nodes"),
    Operation("protected_size", (), "count", (), False, summary="tokens in locked nodes"),
    Operation("total_size", (), "count", (), False, summary="tokens in the tree"),
    Operation("prefill", (_REQUEST, _TOKENS, _NAMESPACE), "count", (_BAD, _STATE, _FULL), True,
              summary="admit a request in the namespace: its cached prefix of tokens[:-1] matched and locked, slots for the rest "
                      "allocated (evicting if short); the answer is the prefix length"),
    Operation("checkpoint", (_REQUEST, _UP_TO), "count", (_BAD, _STATE), True,
              summary="cache the request's first up_to tokens (whole pages), free its duplicate slots, move its "
                      "lock down; the answer is how much was already cached"),
    Operation("release", (_REQUEST,), "count", (_BAD, _STATE), True,
              summary="cache the request's tokens (whole pages), free its duplicate and tail slots, unlock, "
                      "forget it; the answer is how much was already cached"),
)
"""The radix cache's operations, tree level first, in the order the checker lists them."""

RADIX_TYPES: dict[str, str] = {
    "tokens": "tuple[int, ...]", "count": "int", "request": "int", "bool": "bool", "namespace": "str | None",
}
"""The Python type of each argument domain and result above, as docs/radix-contract.md's
signatures write them (a list is accepted where a tuple is taken)."""

TREE_OPERATIONS: tuple[str, ...] = (
    "match_prefix", "insert", "lock", "unlock", "evict", "reset", "evictable_size", "protected_size", "total_size",
)
"""The tree-level operations (SGLang's RadixCache has these)."""

ALL_RADIX_OPERATIONS: tuple[str, ...] = tuple(op.name for op in RADIX_OPERATIONS)
"""Every operation name of the radix contract, in table order."""
