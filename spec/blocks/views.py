"""How the block pool's views read in a difference report, and the step its invariants judge.

A report shows a view that differs part by part: the free queue, each block's ref count and hash,
each request's holdings (the `snapshot()` view), each request's block table (`tables()`), each
written block's contents (`contents()`), each request's cached tokens (`cached_tokens()`), the KV
cache events of the last call (`events()`), the blocks the last call reused under a reader
(`reused()`), the last call's prefix-cache statistics (`prefix_cache_stats()`), the recurrent states
it offered a KV connector (`boundary_states()`). Each part names the
invariants of spec/blocks/invariants.py that a difference in it concerns, or the rule of
docs/block-pool-contract.md that none states. `block_step` builds, from an implementation's views
before and after a call, the `BlockStep` those invariants judge. `cacheproof.contract.explaining.steps`
reads both through the kind (`SpecKind.readings`, `SpecKind.judge`).
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.spec.blocks.invariants import BlockStep
from cacheproof.spec.kind import Naming, ViewPart, optional_method_views

QUEUE_CONCERNS = ("B1", "B2")
REF_CONCERNS = ("B1", "B3", "B7")
HASH_CONCERNS = ("B4", "B5")
HOLDING_CONCERNS = ("B7",)
CONTENT_CONCERNS = ("B5",)

QUEUE_RULE = ("allocate takes blocks from the head of the free queue; a block reaching ref 0 joins the tail if it "
              "has a hash, the head if not (docs/block-pool-contract.md, Pool level)")
EVENTS_RULE = ("a call announces exactly how it changed the hash map: each group of blocks that gained hashes "
               "(with the parent hash), each hash a block lost, or one clear on reset "
               "(docs/block-pool-contract.md, KV cache events)")
REUSED_RULE = ("a block released with unpin stays readable until a call reuses it: the allocate that hands it out, "
               "or a reset, tells its reader once (docs/block-pool-contract.md, Readable released blocks)")
CACHED_RULE = ("a request's cached tokens are those its block table covers up to its last block that carries a "
               "hash (docs/block-pool-contract.md, Views)")
STATS_RULE = ("a call counts each request it admits after a prefix-cache lookup, with its tokens and hit tokens, "
              "and a reset that drops every hash (docs/block-pool-contract.md, Prefix-cache statistics)")
OFFERS_RULE = ("a call offers a KV connector each recurrent state it cached at a block boundary, with the boundary, "
               "in the order cached (docs/block-pool-contract.md, A recurrent state)")
TABLE_RULE = ("a request's block table is its blocks in token order, the prefix hit first, and equals its "
              "holdings, the null block where a sliding window reads no more (docs/block-pool-contract.md, "
              "Request level)")


def _is_tuple(value: Any, length: int | None = None) -> bool:
    return isinstance(value, tuple) and (length is None or len(value) == length)


def _hash_text(value: Any, names: Naming) -> str:
    return "no hash" if value is None else f"hash {names.hash(value)}"


def snapshot_parts(snapshot: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(free queue, per block (ref count, hash), holdings) as parts: the queue, each block (its ref
    count and its hash, which concern other invariants), each request's holdings."""
    if not _is_tuple(snapshot, 3) or not all(_is_tuple(part) for part in snapshot):
        return None
    queue, blocks, holdings = snapshot
    if not all(_is_tuple(block, 2) for block in blocks) or not all(_is_tuple(held, 2) for held in holdings):
        return None
    parts = [ViewPart("free queue (head first)", names.things("block", queue), QUEUE_CONCERNS, QUEUE_RULE)]
    for block, (ref, value) in enumerate(blocks):
        parts.append(ViewPart.joined(names.thing("block", block), (
            ViewPart("ref count", f"ref {names.value(ref)}", REF_CONCERNS),
            ViewPart("hash", _hash_text(value, names), HASH_CONCERNS),
        )))
    for request, held in holdings:
        parts.append(ViewPart(f"{names.thing('request', request)} holdings", names.things("block", held),
                              HOLDING_CONCERNS))
    return parts


def tables_parts(tables: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(request, its block table) as one part per request."""
    if not _is_tuple(tables) or not all(_is_tuple(row, 2) for row in tables):
        return None
    return [ViewPart(f"{names.thing('request', request)} block table", names.things("block", table),
                     HOLDING_CONCERNS, TABLE_RULE) for request, table in tables]


def cached_tokens_parts(cached: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(request, its cached tokens) as one part per request."""
    if not _is_tuple(cached) or not all(_is_tuple(row, 2) for row in cached):
        return None
    return [ViewPart(f"{names.thing('request', request)} cached tokens", names.value(tokens), HASH_CONCERNS, CACHED_RULE)
            for request, tokens in cached]


def contents_parts(contents: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(block, parent hash, tokens) as one part per written block."""
    if not _is_tuple(contents) or not all(_is_tuple(row, 3) for row in contents):
        return None
    parts = []
    for block, parent, tokens in contents:
        parent_text = "no parent" if parent is None else f"parent {names.hash(parent)}"
        parts.append(ViewPart(f"{names.thing('block', block)} contents",
                              f"{parent_text}, tokens {names.value(tokens)}", CONTENT_CONCERNS))
    return parts


def events_parts(events: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(stored, removed, cleared) as three parts: the stored groups, the removed hashes, the clear."""
    if not _is_tuple(events, 3) or not _is_tuple(events[0]) or not _is_tuple(events[1]):
        return None
    stored = events[0]
    if not all(_is_tuple(group, 3) and _is_tuple(group[1]) and _is_tuple(group[2]) for group in stored):
        return None
    groups = [f"{'no parent' if parent is None else 'parent ' + names.hash(parent)}: "
              f"{', '.join(names.hash(value) for value in hashes)}"
              + (f" (tokens {names.value(tokens)})" if tokens else "") for parent, hashes, tokens in stored]
    removed = ", ".join(names.hash(value) for value in events[1])
    return [ViewPart("stored (KV cache events)", "; ".join(groups) or "none", rule=EVENTS_RULE),
            ViewPart("removed (KV cache events)", removed or "none", rule=EVENTS_RULE),
            ViewPart("cleared (KV cache events)", "yes" if events[2] else "no", rule=EVENTS_RULE)]


def reused_parts(reused: Any, names: Naming) -> Sequence[ViewPart] | None:
    """The blocks reused under a reader, as one part."""
    if not _is_tuple(reused):
        return None
    return [ViewPart("reused under a reader", names.things("block", reused), rule=REUSED_RULE)]


def prefix_cache_stats_parts(stats: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(requests, queries, hits, reset) as one part."""
    if not _is_tuple(stats, 4):
        return None
    requests, queries, hits, reset = stats
    return [ViewPart("prefix-cache statistics",
                     f"requests {names.value(requests)}, queries {names.value(queries)}, hits {names.value(hits)}, "
                     f"reset {'yes' if reset else 'no'}", rule=STATS_RULE)]


def boundary_states_parts(offers: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(request, block, boundary tokens) per offer, as one part."""
    if not _is_tuple(offers) or not all(_is_tuple(offer, 3) for offer in offers):
        return None
    text = "; ".join(f"{names.thing('request', request)}: {names.thing('block', block)} at {names.value(boundary)} tokens"
                     for request, block, boundary in offers)
    return [ViewPart("boundary states offered", text or "none", rule=OFFERS_RULE)]


BLOCK_READINGS = {"snapshot": snapshot_parts, "tables": tables_parts, "contents": contents_parts,
                  "cached_tokens": cached_tokens_parts, "events": events_parts, "reused": reused_parts,
                  "prefix_cache_stats": prefix_cache_stats_parts, "boundary_states": boundary_states_parts}
"""The block pool's views, as `SpecKind.readings`."""

BLOCK_SHAPES = {
    "snapshot": "a tuple (free queue, blocks, holdings): the free queue a tuple of block ids, head first; "
                "blocks a tuple of one (ref count, hash or None) pair per block, block 0 first; holdings a "
                "tuple of (request id, tuple of the block ids it holds) pairs, one per request holding blocks",
    "tables": "a tuple of (request id, tuple of block ids in token order) pairs, one per request at the request level",
    "contents": "a tuple of (block id, parent hash or None, tuple of tokens) triples, one per written block",
    "cached_tokens": "a tuple of (request id, int) pairs, one per request at the request level",
    "events": "a tuple (stored, removed, cleared): stored a tuple of (parent hash or None, tuple of hashes, tuple "
              "of the tokens the blocks hold) triples in the order announced, removed a sorted tuple of hashes, "
              "cleared a bool",
    "reused": "a sorted tuple of block ids: the unpinned blocks the last call reused",
    "prefix_cache_stats": "a tuple (requests, queries, hits, reset) of three ints and a bool: the last call's "
                          "prefix-cache statistics",
    "boundary_states": "a tuple of (request id, block id, boundary tokens) triples of ints, in the order offered: the "
                       "recurrent states the last call offered a KV connector",
}
"""The shape of each view's answer, in words (`SpecKind.shapes`), as `snapshot_parts`,
`tables_parts`, `contents_parts`, `cached_tokens_parts`, `events_parts`, `reused_parts`,
`prefix_cache_stats_parts` and `boundary_states_parts` read it."""

BLOCK_VIEW_READERS = optional_method_views("cached_tokens", "events", "reused", "prefix_cache_stats", "boundary_states")
"""The optional views (`SpecKind.view_readers`): a request level that reports no cached tokens (no
`cached_tokens()`), a pool that announces no KV cache events (no `events()`), has no `unpin` (no
`reused()`), keeps no prefix-cache statistics (no `prefix_cache_stats()`) or offers no recurrent states (no
`boundary_states()`), is compared on the other views."""


def block_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any,
               semantics: Any) -> BlockStep:
    """The `BlockStep` of a call (`op`, `args`) from the views before and after it; the same
    invariants are judged under every semantics. Where a block holds several hash units
    (`hash_units` > 1) it may carry further hashes that no view shows, so a lookup is judged
    as far as the snapshot's hashes tell (`BlockStep.further` None)."""
    further = () if getattr(semantics, "hash_units", 1) == 1 else None
    return BlockStep(call.op, size, before["snapshot"], after["snapshot"], raised, tuple(call.args), result,
                     None, after.get("contents"), further=further)
