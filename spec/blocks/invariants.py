"""The block pool's invariants B1-B8 as named predicates in one table, each with the bug it excludes.

Every predicate judges one `BlockStep`: the snapshots before and after an operation (the
`BlockPoolSpec.snapshot` shape: free queue, per-block (ref count, hash or None), holdings), whether
it raised, and, where the judge can see them, the call's arguments and result, the hash map and the
block contents after it. The state invariants (B1-B5, B7) look at the state after; B6 judges the
answer of a lookup against the state before; B8 compares before and after. A predicate whose input
the judge could not see (hash map or contents None) holds.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from cacheproof.spec.blocks.manager import BLOCK_SIZE, block_hash, chain_hashes


class BlockStep(NamedTuple):
    """One block-pool operation as the invariants see it."""

    operation: str | None  # None when judging a state on its own
    num_blocks: int
    before: tuple
    after: tuple
    raised: bool
    arguments: tuple = ()
    result: Any = None
    hash_map: tuple | None = None  # after: (hash, blocks carrying it), as BlockPoolSpec.hash_map
    contents: tuple | None = None  # after: (block, parent, tokens), as BlockPoolSpec.contents
    block_size: int = BLOCK_SIZE
    further: tuple | None = ()  # after: (block, hash) of each further hash (spec/blocks/partial.py); None: unseen


class BlockInvariant(NamedTuple):
    """A named predicate over a `BlockStep`: the rule in words, the real bug it excludes, the
    operations that could break it, and `witness`: for a step that breaks it, the concrete values
    that do, in words ("block 1 has ref 0 while request 2 holds it")."""

    name: str
    rule: str
    excludes: str
    holds: Callable[[BlockStep], bool]
    touched_by: tuple[str, ...]
    witness: Callable[[BlockStep], str]


class InvariantViolation(AssertionError):
    """A block pool (or the spec itself) broke a named invariant. A bug, not a usage error."""


def _queue(snapshot: tuple) -> tuple[int, ...]:
    return snapshot[0]


def _blocks(snapshot: tuple) -> tuple[tuple[int, int | None], ...]:
    return snapshot[1]


def _free_count_exact(step: BlockStep) -> bool:
    free = sum(1 for block, (ref, _) in enumerate(_blocks(step.after)) if block and ref == 0)
    return len(_queue(step.after)) == free


def _queue_clean(step: BlockStep) -> bool:
    queue, blocks = _queue(step.after), _blocks(step.after)
    return (
        len(set(queue)) == len(queue)
        and all(0 < block < len(blocks) and blocks[block][0] == 0 for block in queue)
    )


def _refs_valid(step: BlockStep) -> bool:
    blocks = _blocks(step.after)
    null_held = any(0 in held for _, held in step.after[2])
    return all(ref >= 0 for ref, _ in blocks) and blocks[0] == (0, None) and not null_held


def _carries(step: BlockStep, block: int, value: int) -> bool:
    """Before the step, `block` carries `value`: as its hash or a further hash; where further
    hashes are unseen (`further` None), any block with a hash may carry it beside its own."""
    own = _blocks(step.before)[block][1]
    if step.further is None:
        return own is not None
    return own == value or (block, value) in step.further


def _entries(step: BlockStep) -> list[tuple[int, int]]:
    """(block, hash) of every hash a block carries after the step, further ones where seen."""
    hashed = [(block, value) for block, (_, value) in enumerate(_blocks(step.after)) if value is not None]
    return hashed + list(step.further or ())


def _hash_map_exact(step: BlockStep) -> bool:
    if step.operation == "lookup" and not step.raised:
        asked = step.arguments[0]
        if not all(_carries(step, block, asked[i]) for i, block in enumerate(step.result)):
            return False
    if step.hash_map is None:
        return True
    listed = [(block, value) for value, carriers in step.hash_map for block in carriers]
    return sorted(listed) == sorted(_entries(step)) and all(carriers for _, carriers in step.hash_map)


def _contents_match(step: BlockStep) -> bool:
    if step.contents is None:
        return True
    blocks = _blocks(step.after)
    return all(
        len(tokens) == step.block_size and blocks[block][1] == block_hash(parent, tokens)
        for block, parent, tokens in step.contents
        if blocks[block][1] is not None
    )


def _cached_prefix_length(step: BlockStep, hashes: tuple[int, ...]) -> int:
    """How many leading `hashes` some block carried before the step (as far as the step shows)."""
    carried = {value for _, value in _blocks(step.before) if value is not None} | {v for _, v in step.further or ()}
    length = 0
    while length < len(hashes) and hashes[length] in carried:
        length += 1
    return length


def _prefix_contiguous(step: BlockStep) -> bool:
    if step.raised:
        return True
    if step.operation == "lookup":
        length = _cached_prefix_length(step, tuple(step.arguments[0]))
        return len(step.result) == length if step.further is not None else len(step.result) >= length
    if step.operation == "find_cached_prefix":
        tokens = tuple(step.arguments[0])
        hashes = chain_hashes(tokens[:-1], step.block_size)
        return step.result == _cached_prefix_length(step, hashes) * step.block_size
    return True


def _no_orphan(step: BlockStep) -> bool:
    held: dict[int, int] = {}
    for _, blocks in step.after[2]:
        for block in blocks:
            held[block] = held.get(block, 0) + 1
    return all(ref == held.get(block, 0) for block, (ref, _) in enumerate(_blocks(step.after)))


def _raise_changes_nothing(step: BlockStep) -> bool:
    return not step.raised or step.before == step.after


def _held_by(requests: list[int], what: str = "it") -> str:
    """Who holds a block, a request once per holding: "request 2 holds it", "request 2 holds it
    twice", "requests 2, 3 hold it"."""
    distinct = list(dict.fromkeys(requests))
    if len(distinct) > 1:
        return f"requests {', '.join(repr(request) for request in requests)} hold {what}"
    times = len(requests)
    return f"request {distinct[0]!r} holds {what}" + ("" if times == 1 else " twice" if times == 2 else f" {times} times")


def _holders(step: BlockStep) -> dict[int, list[int]]:
    """Each held block of the state after, with the requests holding it (a request once per holding)."""
    found: dict[int, list[int]] = {}
    for request, blocks in step.after[2]:
        for block in blocks:
            found.setdefault(block, []).append(request)
    return found


def _why_free_count(step: BlockStep) -> str:
    free = [block for block, (ref, _) in enumerate(_blocks(step.after)) if block and ref == 0]
    queued = len(_queue(step.after))
    return (f"the free queue holds {queued} block{'' if queued == 1 else 's'} while {len(free)} non-null "
            f"block{' has' if len(free) == 1 else 's have'} ref count 0")


def _why_queue(step: BlockStep) -> str:
    queue, blocks = _queue(step.after), _blocks(step.after)
    seen: set[int] = set()
    for block in queue:
        if block in seen:
            return f"block {block!r} is in the free queue twice"
        seen.add(block)
        if block == 0:
            return "the null block (block 0) is in the free queue"
        if not 0 < block < len(blocks):
            return f"block {block!r} is in the free queue, and the pool has blocks 0-{len(blocks) - 1}"
        if blocks[block][0] != 0:
            return f"block {block!r} is in the free queue with ref {blocks[block][0]!r}"
    return "the free queue is not clean"


def _why_refs(step: BlockStep) -> str:
    blocks = _blocks(step.after)
    for block, (ref, _) in enumerate(blocks):
        if ref < 0:
            return f"block {block!r} has ref {ref!r}"
    if blocks[0] != (0, None):
        ref, value = blocks[0]
        return f"the null block (block 0) has ref {ref!r} and {'no hash' if value is None else 'a hash'}"
    return _held_by(_holders(step).get(0, []), "the null block (block 0)")


def _why_hash_map(step: BlockStep) -> str:
    if step.operation == "lookup" and not step.raised:
        asked = step.arguments[0]
        for index, block in enumerate(step.result):
            if not _carries(step, block, asked[index]):
                return f"lookup answered block {block!r} for hash {index + 1} asked, which that block does not carry"
    listed = sorted((block, value) for value, carriers in (step.hash_map or ()) for block in carriers)
    hashed = sorted(_entries(step))
    for block, value in sorted(set(listed) ^ set(hashed)):
        where = "listed in the hash map under a hash it does not carry" if (block, value) in listed \
            else "carrying a hash the hash map does not list it under"
        return f"block {block!r} is {where}"
    return "the hash map lists a hash with no block"


def _why_contents(step: BlockStep) -> str:
    blocks = _blocks(step.after)
    for block, parent, tokens in step.contents or ():
        if blocks[block][1] is None:
            continue
        if len(tokens) != step.block_size:
            return f"block {block!r} carries a hash while it holds {len(tokens)} tokens, not {step.block_size}"
        if blocks[block][1] != block_hash(parent, tokens):
            return f"block {block!r} carries a hash that its parent hash and tokens do not hash to"
    return "a hashed block's content does not match its hash"


def _why_prefix(step: BlockStep) -> str:
    if step.operation == "lookup":
        cached = _cached_prefix_length(step, tuple(step.arguments[0]))
        return f"lookup answered {len(step.result)} blocks while the cached prefix of the hashes asked is {cached}"
    tokens = tuple(step.arguments[0])
    cached = _cached_prefix_length(step, chain_hashes(tokens[:-1], step.block_size)) * step.block_size
    return f"find_cached_prefix answered {step.result!r} tokens while the cached prefix is {cached}"


def _why_orphan(step: BlockStep) -> str:
    holders = _holders(step)
    for block, (ref, _) in enumerate(_blocks(step.after)):
        held = holders.get(block, [])
        if ref != len(held):
            who = _held_by(held) if held else "no request holds it"
            return f"block {block!r} has ref {ref!r} while {who}"
    return "a block's ref count differs from its holdings"


def _why_raise(step: BlockStep) -> str:
    changed = [name for name, index in (("the free queue", 0), ("the ref counts or hashes", 1), ("the holdings", 2))
               if step.before[index] != step.after[index]]
    return f"{step.operation or 'the call'} raised and changed {' and '.join(changed) or 'the state'}"


_MUTATING = ("allocate", "touch", "cache_blocks", "free", "evict", "reset", "allocate_slots", "free_request")

BLOCK_INVARIANTS: tuple[BlockInvariant, ...] = (
    BlockInvariant(
        "B1",
        "the free count is exact: the free queue's length equals the number of non-null blocks "
        "with ref count 0",
        "vLLM #42571: one block freed twice in one free_blocks call pushed num_free_blocks above "
        "the unique free blocks, until the queue's assertions failed (fix attempt PR #42612; "
        "vllm-ascend #14301 and UCM PR #1053 dedup the call)",
        _free_count_exact,
        ("allocate", "touch", "free", "allocate_slots", "free_request"),
        _why_free_count,
    ),
    BlockInvariant(
        "B2",
        "the free queue holds each block at most once, never the null block, never a block in use",
        "vLLM #37076: a cached ref-0 block found by one request was handed out by another's "
        "allocation before it was pinned (a block in use still in the queue); #42571's block "
        "queued twice",
        _queue_clean,
        ("allocate", "touch", "free", "allocate_slots", "free_request"),
        _why_queue,
    ),
    BlockInvariant(
        "B3",
        "every ref count is >= 0; the null block has ref 0, no hash, and no request holds it",
        "SGLang #11970, #6888, #7130: a lock_ref driven below zero made a running request's KV "
        "evictable; vLLM's free_blocks decrements to -1 on a double free (V0 raised "
        "'Double free!', #1556)",
        _refs_valid,
        ("free", "touch", "cache_blocks", "free_request"),
        _why_refs,
    ),
    BlockInvariant(
        "B4",
        "the hash map is exact: every hashed block is listed under its hash once, every listed "
        "block still carries that hash, so a lookup only ever answers a block carrying the hash asked",
        "vLLM #4761 (V0 block manager): an evicted block stayed in the cached-block tracking, so a "
        "later prefix hit pinned a block that now held another request's KV",
        _hash_map_exact,
        ("allocate", "cache_blocks", "evict", "reset", "allocate_slots", "lookup"),
        _why_hash_map,
    ),
    BlockInvariant(
        "B5",
        "a cached block's content matches its hash: a hashed block written at the request level "
        "is full and carries block_hash(parent hash, its tokens)",
        "vLLM #20261: images that differ hashed to the same prefix-cache key, so requests read "
        "another image's KV (fixed by adding mm hashes to the key, #11187/#36708); stale KV in "
        "recycled blocks, #43741/#43990",
        _contents_match,
        ("allocate_slots", "cache_blocks", "allocate"),
        _why_contents,
    ),
    BlockInvariant(
        "B6",
        "prefix closure: lookup answers the longest contiguous cached prefix of the hashes asked, "
        "stopping at the first hash no block carries and at no other; find_cached_prefix answers "
        "that prefix of the full blocks of tokens[:-1], in tokens",
        "a hit past a miss would attach KV computed after another prefix; the request level frees "
        "last block first so a child is evicted before its parent (vLLM #48489 lost that order "
        "on the deferred-free path)",
        _prefix_contiguous,
        ("lookup", "find_cached_prefix"),
        _why_prefix,
    ),
    BlockInvariant(
        "B7",
        "no orphan: each block's ref count equals the number of holdings of it over all requests",
        "SGLang #24153: dec_lock_ref on a node whose swa_lock_ref was already 0 (a reference "
        "dropped that no request held); a leaked reference pins a block for ever",
        _no_orphan,
        ("allocate", "touch", "free", "allocate_slots", "free_request"),
        _why_orphan,
    ),
    BlockInvariant(
        "B8",
        "an operation that raises changes nothing (queue, ref counts, hashes, holdings)",
        "vLLM PR #20569: an allocation that failed part way left the blocks it had taken occupied",
        _raise_changes_nothing,
        _MUTATING,
        _why_raise,
    ),
)

BLOCK_INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in BLOCK_INVARIANTS}

def broken_invariants(step: BlockStep) -> list[BlockInvariant]:
    """The invariants `step` breaks, in table order."""
    return [invariant for invariant in BLOCK_INVARIANTS if not invariant.holds(step)]


def check_step(step: BlockStep) -> None:
    """Raise `InvariantViolation` naming the first invariant that `step` breaks."""
    for invariant in broken_invariants(step):
        raise InvariantViolation(
            f"{invariant.name} broken by {step.operation or 'the state'}{step.arguments}: {invariant.rule}\n"
            f"  before: {step.before}\n  after:  {step.after}\n  result: {step.result!r}"
        )


def check_state(num_blocks: int, snapshot: tuple, hash_map: tuple | None = None,
                contents: tuple | None = None, block_size: int = BLOCK_SIZE, further: tuple = ()) -> None:
    """Raise `InvariantViolation` if the state breaks B1-B5 or B7; `further` as `BlockStep.further`."""
    check_step(BlockStep(None, num_blocks, snapshot, snapshot, False, (), None, hash_map, contents, block_size, further))
