"""`RadixSemantics`: the design choices on which radix caches differ from the radix contract.

Five choices: the page size, the granularity at which the tree matches, inserts and splits (SGLang's
`page_size`; 1 is its token-level RadixCache); whether the pool holds a part page; whether misuse is
checked; how a call stamps access times; and whether keys have namespaces. The profiles reuse
`spec.kind.Profile`; what SGLang 0.5.23's RadixCache does, per field, is written next to the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cacheproof.spec.kind import Profile
from cacheproof.spec.overrides import OptionSemantics
from cacheproof.spec.radix.operations import ALL_RADIX_OPERATIONS, TREE_OPERATIONS

RADIX_OPTIONS: dict[str, tuple[Any, ...]] = {
    "page_size": (1, 2, 4),
    "pool": ("slots", "whole-pages"),
    "misuse": ("checked", "trusted"),
    "access_stamps": ("call", "node"),
    "namespaces": ("keyed", "one"),
}
"""The valid values of every field."""


@dataclass(frozen=True)
class RadixSemantics(OptionSemantics):
    """One radix cache's design choices; every default is the contract's.

    - page_size: node keys, matches and inserts are whole pages of this many tokens; a match ending
      inside a page stops at the page's start, and a node is split only at a page boundary.
    - pool: a cache of `num_slots` KV slots holds all of them ("slots"), or only its whole pages,
      `num_slots - num_slots % page_size` ("whole-pages": a cache of 5 slots in pages of 2 holds
      4, one of 1 holds none). SGLang is "whole-pages": `PagedTokenToKVPoolAllocator` keeps
      `size // page_size` pages, and its pool configurator sizes every pool so.
    - misuse: a call that breaks the contract (an unlock without a lock of its own, an evict above
      the evictable size, a token or request that is not an int, ...) raises a typed error and
      changes nothing ("checked"), or is the caller's fault ("trusted": the cache need not check,
      and a checker never makes such a call; the spec still refuses it, having no other answer).
      SGLang's RadixCache is "trusted": `dec_lock_ref` decrements without a check for zero and
      `evict` frees what it can when asked for more; its scheduler pairs every `inc_lock_ref` with
      one `dec_lock_ref` and asks the allocator before it evicts.
    - access_stamps: every node a call walks, a node it splits or makes included, gets the call's
      one tick, and the part of a split node below the match keeps its old time ("call"); or the
      node a walk enters is stamped whole with the call's time before it is split, and the nodes
      the call makes (a split's upper part, a new leaf) are stamped when made, after the walk's
      time and in the order made, and checkpoint and release then stamp the whole path they cached
      with one later time of the call ("node"). SGLang is "node": `_match_prefix_helper` and
      `_insert_helper` set `last_access_time` on a child before `_split_node`, a new `TreeNode`
      reads `time.monotonic()` when it is built, and `RadixCache.checkpoint` calls `match_prefix`
      on the key it has just inserted, to find the request's new last node.
    - namespaces: a key's namespace stands beside its tokens in every keyed call (match_prefix,
      insert, lock, unlock, prefill), and two namespaces never share a node ("keyed"); or the cache
      takes no namespace, and a checker never passes one ("one": every key is in the default
      namespace). SGLang is "keyed": `RadixKey` carries `extra_key` (a LoRA id, a request's extra
      key) and `cache_salt`, and `RadixKey.child_key_at` puts both in a child's dict key.
    """

    OPTIONS: ClassVar[dict[str, tuple[Any, ...]]] = RADIX_OPTIONS
    page_size: int = 1
    pool: str = "slots"
    misuse: str = "checked"
    access_stamps: str = "call"
    namespaces: str = "keyed"


RADIX_CONTRACT = RadixSemantics()
"""The radix contract's semantics (page size 1)."""

RADIX_PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("contract", RADIX_CONTRACT, ALL_RADIX_OPERATIONS,
                "the radix-cache contract of docs/radix-contract.md (default), tree and request level, page size 1"),
        Profile("tree", RADIX_CONTRACT, TREE_OPERATIONS,
                "the radix-cache contract at the tree level only, for a tree with no request level"),
        Profile("paged", RadixSemantics(page_size=2), ALL_RADIX_OPERATIONS,
                "the radix-cache contract with pages of 2 tokens (SGLang's paged RadixCache, page_size=2)"),
        Profile("sglang-radix", RadixSemantics(misuse="trusted", access_stamps="node"), ALL_RADIX_OPERATIONS,
                "SGLang 0.5.23 RadixCache (match_prefix, insert, inc_lock_ref, dec_lock_ref, evict, reset, "
                "evictable_size, protected_size, total_size; checkpoint and mem_cache.common's match_kv_cache, "
                "checkpoint_kv_cache and release_kv_cache for the request level) over its real "
                "TokenToKVPoolAllocator and ReqToTokenPool, page size 1 (cacheproof.engines.sglang:radix_cache)"),
        Profile("sglang-radix-paged",
                RadixSemantics(page_size=2, pool="whole-pages", misuse="trusted", access_stamps="node"),
                TREE_OPERATIONS,
                "SGLang 0.5.23 RadixCache with page_size=2 over its real PagedTokenToKVPoolAllocator, tree level "
                "(its pool holds whole pages, and its allocator hands a request whole pages; docs/engines.md) "
                "(cacheproof.engines.sglang_radix:paged_radix_cache)"),
    )
}
"""Every named radix profile, by name."""
