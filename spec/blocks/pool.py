"""`BlockPoolSpec`: the reference model of a KV-cache block pool with prefix caching.

Each operation is written as a TLA+ action: argument checks, then the guard on the state, then the
updates; whatever an operation does not mention stays unchanged. Every check of a call runs before
its first update, so a call that raises changes nothing (B8). Checks run in a fixed order, so a call
with several faults raises one agreed type: InvalidArgumentError (the request, then the other
arguments in order) before WrongStateError before CapacityError.

Lifecycle of one non-null block (docs/block-pool-contract.md draws it):
1. FREE (ref 0, no hash, in the free queue) --allocate--> IN USE (ref 1, held by the request).
2. IN USE --cache_blocks--> CACHED IN USE (it carries a hash; lookup finds it).
3. IN USE / CACHED IN USE --touch--> ref + 1 (another holding); --free--> ref - 1.
4. At ref 0 a CACHED block joins the TAIL of the free queue (CACHED FREE: still found by lookup,
   evicted last), an unhashed one the HEAD (FREE: reused first).
5. CACHED FREE --touch--> CACHED IN USE (a prefix hit: it leaves the queue);
   --allocate--> IN USE, losing its hash (lazy eviction); --evict/reset--> FREE, same queue place.
6. IN USE / CACHED IN USE --unpin--> as free, but READABLE: its holder keeps reading it, so at ref
   0 it joins the TAIL, hashed or not (reused last), and it is WATCHED: the call that next hands it
   out (allocate) or drops every hash (reset) tells the reader, once (the `reused()` view).
Block 0 is the null block: never in the queue, never handed out, never hashed, ref 0 for ever.

State: the free queue (a list, head first), per block its ref count and hash (or None), the hash
map (hash -> the blocks carrying it, first inserted first: lookup answers with the first), per
block the hash units its hash covers and the further hashes it carries (spec/blocks/partial.py), per
request the blocks it holds (a multiset: a block touched twice by one request is held twice), and
the watched blocks (unpinned, their readers not yet told of a reuse).
The request level (spec/blocks/manager.py) adds per-request block tables and block contents; a
pool hashing in units smaller than a block (`hash_units` > 1) has partial prefix-cache entries
(spec/blocks/partial.py), whose promotion `cache_blocks` makes: a block whose primary hash is a
partial entry covering fewer units than the block's end at its place gets the full block's hash.
"""

from __future__ import annotations

from typing import Any

from cacheproof.spec.arguments import is_int
from cacheproof.spec.blocks import invariants as block_invariants
from cacheproof.spec.blocks.events import BoundaryStates, CallEvents, Events, PrefixCacheStats, announcing
from cacheproof.spec.blocks.manager import BLOCK_SIZE, RequestLevel
from cacheproof.spec.blocks.partial import NULL_BLOCK, PartialEntries
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BlockSemantics
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError


class BlockPoolSpec(RequestLevel, PartialEntries):
    """The executable spec of a block pool of `num_blocks` blocks (block 0 the null block).

    `semantics` picks the design choices on which real pools differ (spec/blocks/semantics.py);
    `block_size` is the request level's tokens per block.
    """

    def __init__(self, num_blocks: int, semantics: BlockSemantics = BLOCK_CONTRACT, *, block_size: int = BLOCK_SIZE) -> None:
        if not is_int(num_blocks) or num_blocks < 1:
            raise InvalidArgumentError(f"num_blocks must be an int >= 1 (block 0 is the null block), got {num_blocks!r}")
        if not is_int(block_size) or block_size < 1:
            raise InvalidArgumentError(f"block_size must be an int >= 1, got {block_size!r}")
        self._num_blocks = num_blocks
        self.semantics = semantics
        self.block_size = block_size
        self._queue: list[int] = list(range(1, num_blocks))  # the free queue, head first
        self._ref: list[int] = [0] * num_blocks  # per block: its reference count
        self._hash: list[int | None] = [None] * num_blocks  # per block: its (primary) hash, None if none
        self._cover: list[int] = [0] * num_blocks  # per block: the hash units its hash covers (0: none)
        self._further: dict[int, list[int]] = {}  # block -> its further hashes (partial entries), first added first
        self._map: dict[int, list[int]] = {}  # hash -> blocks carrying it, first inserted first
        self._held: dict[int, list[int]] = {}  # request -> blocks it holds, in acquisition order
        self._watched: dict[int, None] = {}  # blocks unpinned whose readers are not yet told of a reuse
        self._tables: dict[int, list[list[int]]] = {}  # request -> its table per group
        self._tokens: dict[int, tuple[int, ...]] = {}
        self._cached: dict[int, list[int]] = {}  # request -> its cached places per group
        self._loading: set[int] = set()
        self._contents: dict[int, tuple[int | None, tuple[int, ...]]] = {}
        self._events = CallEvents()  # the last call's; each call starts a fresh one (never mutated after it)

    # Operations ---------------------------------------------------------------------------

    @announcing
    def allocate(self, request: int, n: int) -> tuple[int, ...]:
        """Take n blocks from the head of the free queue, ref 1 each, held by `request`."""
        self._check_request("allocate", request)
        if not is_int(n) or n < 0:
            raise InvalidArgumentError(f"allocate(request={request}, n={n!r}): n must be an int >= 0")
        self._check_unmanaged("allocate", request)
        if n > len(self._queue):
            raise CapacityError(
                f"allocate(request={request}, n={n}): only {len(self._queue)} of "
                f"{self._num_blocks - 1} usable blocks are free"
            )
        return tuple(self._take(request, n))

    @announcing
    def touch(self, request: int, blocks: tuple[int, ...]) -> None:
        """A prefix hit: ref + 1 each, held by `request`; a block at ref 0 leaves the free queue.
        Only a block in use or carrying a hash may be touched."""
        self._check_request("touch", request)
        ids = self._check_blocks("touch", blocks)
        self._check_unmanaged("touch", request)
        for block in ids:
            if self._ref[block] == 0 and self._hash[block] is None:
                raise WrongStateError(
                    f"touch(request={request}, block={block}): the block is free and has no hash, "
                    "so no request can hit it (only a cached or in-use block is touched)"
                )
        self._pin(request, ids)
        self._announce_hit(ids)

    @announcing
    def cache_blocks(self, request: int, blocks: tuple[int, ...], hashes: tuple[int, ...]) -> None:
        """blocks[i] gets hashes[i], at place i + 1 of a sequence (covering (i + 1) * hash_units
        units); each block must be held by `request`, not written by the request level, and
        unhashed, or carry a partial entry covering fewer units, which it loses with every further
        hash (a promotion). Several blocks may carry one hash."""
        self._check_request("cache_blocks", request)
        ids = self._check_blocks("cache_blocks", blocks, keep_null=True)
        values = self._check_hashes("cache_blocks", hashes)
        if len(ids) != len(values):
            raise InvalidArgumentError(
                f"cache_blocks(request={request}): {len(ids)} blocks but {len(values)} hashes; "
                "blocks[i] gets hashes[i]"
            )
        placed = [(b, h, place) for place, (b, h) in enumerate(zip(ids, values), 1) if b != NULL_BLOCK]
        if len({b for b, _, _ in placed}) != len(placed):
            raise InvalidArgumentError(f"cache_blocks(request={request}, blocks={ids}): a block is given twice")
        self._check_unmanaged("cache_blocks", request)
        for block, _, place in placed:
            if block not in self._held.get(request, ()):
                raise WrongStateError(f"cache_blocks(request={request}, block={block}): the request does not hold the block")
            if self._hash[block] is not None and not self._promoted_at(block, place):
                raise WrongStateError(
                    f"cache_blocks(request={request}, block={block}): the block already has hash "
                    f"{self._hash[block]}; a block is hashed once, when it becomes full (only a partial entry "
                    f"covering fewer than the {place * self.semantics.hash_units} hash units of place {place} is promoted)"
                )
            if block in self._contents:
                raise WrongStateError(
                    f"cache_blocks(request={request}, block={block}): the block holds tokens written "
                    "at the request level, which alone hashes them"
                )
        for block, _, _ in placed:
            if self._hash[block] is not None:
                self._drop_hash(block)
        self._set_hashes([b for b, _, _ in placed], [h for _, h, _ in placed], [p for _, _, p in placed], None)

    @announcing
    def lookup(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        """The blocks of the longest prefix of `hashes` that is cached, one per hash: the first
        inserted block still carrying it. Read-only."""
        return self._longest_prefix(self._check_hashes("lookup", hashes))

    @announcing
    def free(self, request: int, blocks: tuple[int, ...]) -> None:
        """ref - 1 each, in the order given, taking one holding of `request` each. The blocks that
        reach 0 in this call join the queue together: the hashed ones at the tail in the order
        given (evicted last), the unhashed ones at the head in the order given (reused first)."""
        self._check_request("free", request)
        ids = self._check_blocks("free", blocks)
        self._check_unmanaged("free", request)
        self._check_holdings("free", request, ids)
        self._release(request, ids)

    @announcing
    def unpin(self, request: int, blocks: tuple[int, ...]) -> None:
        """Release one holding of `request` on each block, as `free`, for a holder that keeps
        reading them: the blocks that reach 0 in this call join the tail of the queue in the order
        given, hashed or not (reused last), and every block given is watched until a call reuses it.
        The null block is never held, so unpinning it is an InvalidArgumentError."""
        self._check_request("unpin", request)
        ids = self._check_blocks("unpin", blocks, keep_null=True)
        if NULL_BLOCK in ids:
            raise InvalidArgumentError(f"unpin(request={request}): block 0 is the null block, which no request holds")
        self._check_unmanaged("unpin", request)
        self._check_holdings("unpin", request, ids)
        self._release(request, ids, readable=True)

    @announcing
    def writable(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """The given blocks that their one holder may write in place: held once (ref 1) and
        carrying no hash (no other request can hit it), in the order given, once each. Read-only."""
        ids = self._check_blocks("writable", blocks)
        return tuple(block for block in dict.fromkeys(ids) if self._ref[block] == 1 and self._hash[block] is None)

    @announcing
    def evict(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """Drop the hashes of the given blocks; they keep their queue place, ref count and holdings
        (an in-use block stays in use, unhashed, as vLLM's evict_blocks). The answer: the given
        blocks that had a hash, in the order given, once each."""
        ids = self._check_blocks("evict", blocks)
        dropped = tuple(block for block in dict.fromkeys(ids) if self._hash[block] is not None)
        for block in dropped:
            self._drop_hash(block)
        return dropped

    @announcing
    def reset(self) -> bool:
        """Drop every hash and return True; False, changing nothing, while a block is in use. Every
        watched block's reader is told (its contents may now be recomputed under another hash)."""
        if any(self._ref):
            return False
        for block in self._hash_order():
            self._drop_hash(block, announce=False)
        self._events.clear()
        self._tell_readers(list(self._watched))
        return True

    @announcing
    def num_free(self) -> int:
        """The number of free blocks: the free queue's length."""
        return len(self._queue)

    # Views ------------------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    def snapshot(self) -> tuple:
        """(free queue head first, per block 0..num_blocks-1 (ref count, hash or None),
        per request with holdings (request, its blocks sorted, repeated as often as held))."""
        blocks = tuple(zip(self._ref, self._hash))
        holdings = tuple((request, tuple(sorted(held))) for request, held in sorted(self._held.items()))
        return tuple(self._queue), blocks, holdings

    def events(self) -> Events:
        """The KV cache events of the last call: (stored, removed, cleared), spec/blocks/events.py."""
        return self._events.view()

    def reused(self) -> tuple[int, ...]:
        """The watched blocks the last call reused (allocate, reset), sorted: each reader told once."""
        return self._events.reused_view()

    def prefix_cache_stats(self) -> PrefixCacheStats:
        """The prefix-cache statistics of the last call: (requests admitted after a lookup, their
        tokens, their hit tokens, whether every hash was dropped), spec/blocks/events.py."""
        return self._events.stats_view()

    def boundary_states(self) -> BoundaryStates:
        """The states the last call offered a KV connector: (request, block, boundary tokens) in
        order (spec/blocks/recurrent.py, rule 3; none for an attention layer)."""
        return self._events.offers_view()

    def hash_map(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(hash, the blocks carrying it, first inserted first), by hash."""
        return tuple((value, tuple(blocks)) for value, blocks in sorted(self._map.items()))

    def state_key(self) -> tuple:
        """Everything a later outcome can depend on: the snapshot, the hash map's insertion order,
        the partial entries, the watched blocks, the request tables, tokens, cached counts, loads
        under way and block contents."""
        return (
            self.snapshot(),
            self.hash_map(),
            self.entries(),
            tuple(sorted(self._watched)),
            self.tables(),
            tuple(sorted(self._tokens.items())),
            tuple(sorted((request, tuple(counts)) for request, counts in self._cached.items())),
            self.loading(),
            self.contents(),
        )

    def copy(self) -> "BlockPoolSpec":
        """An independent spec in the same state."""
        twin = BlockPoolSpec.__new__(BlockPoolSpec)
        twin.__dict__.update(self.__dict__)
        twin._queue, twin._ref, twin._hash, twin._cover = list(self._queue), list(self._ref), list(self._hash), list(self._cover)
        twin._further = {block: list(values) for block, values in self._further.items()}
        twin._map = {value: list(blocks) for value, blocks in self._map.items()}
        twin._held = {request: list(held) for request, held in self._held.items()}
        twin._watched = dict(self._watched)
        twin._tables = {request: [list(table) for table in tables] for request, tables in self._tables.items()}
        twin._tokens, twin._contents = dict(self._tokens), dict(self._contents)
        twin._cached = {request: list(counts) for request, counts in self._cached.items()}
        twin._loading = set(self._loading)
        return twin

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if a state invariant (B1-B5, B7) fails, or a request table
        disagrees with the request's holdings. When all is well, an expensive no-op."""
        for request, table in self.tables():
            if sorted(block for block in table if block != NULL_BLOCK) != sorted(self._held.get(request, [])):
                raise block_invariants.InvariantViolation(
                    f"request {request}: table {table} != holdings {self._held.get(request, [])}"
                )
        further = tuple((block, value) for block, _, values in self.entries() for value in values)
        block_invariants.check_state(self._num_blocks, self.snapshot(), self.hash_map(), self.contents(), self.block_size,
                                     further)

    def __repr__(self) -> str:
        hashed = sum(h is not None for h in self._hash)
        return (
            f"BlockPoolSpec(num_blocks={self._num_blocks}, free={len(self._queue)}, "
            f"hashed={hashed}, requests={len(self._held)})"
        )

    # Checks -------------------------------------------------------------------------------

    def _check_request(self, operation: str, request: object) -> None:
        if not is_int(request):
            raise InvalidArgumentError(f"{operation}: request must be an int, got {request!r}")

    def _check_unmanaged(self, operation: str, request: int) -> None:
        """A pool-level call's request is not managed at the request level."""
        if request in self._tables:
            raise WrongStateError(
                f"{operation}(request={request}): the request is managed at the request level "
                "(allocate_slots); its blocks change only through allocate_slots and free_request"
            )

    def _check_blocks(self, operation: str, blocks: object, *, keep_null: bool = False) -> tuple[int, ...]:
        """`blocks` as a tuple of block ids, every one an int in 0..num_blocks-1. The null block is
        an InvalidArgumentError, or (null_block="skip") left out unless `keep_null`."""
        if not isinstance(blocks, (tuple, list)):
            raise InvalidArgumentError(f"{operation}: blocks must be a tuple of block ids, got {blocks!r}")
        for block in blocks:
            if not is_int(block) or not 0 <= block < self._num_blocks:
                raise InvalidArgumentError(
                    f"{operation}: block {block!r} is not a block id (an int in 0..{self._num_blocks - 1})"
                )
            if block == NULL_BLOCK and self.semantics.null_block == "error":
                raise InvalidArgumentError(f"{operation}: block 0 is the null block, which no request holds")
        if keep_null:
            return tuple(blocks)
        return tuple(block for block in blocks if block != NULL_BLOCK)

    def _check_holdings(self, operation: str, request: int, ids: tuple[int, ...]) -> None:
        """Each block is given no more times than `request` holds it (else a double free)."""
        held = self._held.get(request, [])
        for block in dict.fromkeys(ids):
            if ids.count(block) > held.count(block):
                raise WrongStateError(
                    f"{operation}(request={request}, block={block}): given {ids.count(block)} times but the "
                    f"request holds it {held.count(block)} times (ref {self._ref[block]}); a release of "
                    "a block the request does not hold is a double free"
                )

    def _check_hashes(self, operation: str, hashes: object) -> tuple[int, ...]:
        if not isinstance(hashes, (tuple, list)):
            raise InvalidArgumentError(f"{operation}: hashes must be a tuple of ints, got {hashes!r}")
        for value in hashes:
            if not is_int(value):
                raise InvalidArgumentError(f"{operation}: hash {value!r} is not an int")
        return tuple(hashes)

    # Steps (updates only: every check is done) ---------------------------------------------

    def _take(self, request: int, n: int) -> list[int]:
        """The first n blocks of the queue leave it; a hashed one loses its hash (lazy eviction)
        and any recorded contents; a watched one's reader is told; each gets ref 1, held by `request`."""
        taken, self._queue = self._queue[:n], self._queue[n:]
        self._tell_readers([block for block in taken if block in self._watched])
        for block in taken:
            if self._hash[block] is not None:
                self._drop_hash(block)
            self._contents.pop(block, None)
            self._ref[block] = 1
        if taken:
            self._held.setdefault(request, []).extend(taken)
        return taken

    def _pin(self, request: int, blocks: Any) -> None:
        """ref + 1 each, held by `request`; a block at ref 0 leaves the queue first."""
        for block in blocks:
            if self._ref[block] == 0:
                self._queue.remove(block)
            self._ref[block] += 1
            self._held.setdefault(request, []).append(block)

    def _set_hashes(self, blocks: Any, hashes: Any, places: Any, parent: int | None, tokens: tuple[int, ...] = ()) -> None:
        """blocks[i] gets hashes[i] at place places[i] of its sequence (covering places[i] *
        hash_units units), announced as one stored event after `parent`, of the blocks' `tokens`
        (none at the pool level)."""
        for block, value, place in zip(blocks, hashes, places):
            self._hash[block], self._cover[block] = value, place * self.semantics.hash_units
            self._map.setdefault(value, []).append(block)
        self._events.store(parent, hashes, tokens)

    def _announce_hit(self, blocks: Any, tokens: tuple[int, ...] = ()) -> None:
        """A prefix hit on `blocks` (the null block left out), which hold `tokens` (none at the pool
        level), re-announces their hashes as stored, with no parent, when the semantics say so
        (hit_events "stored" or "lookup") and every one carries a hash."""
        hashes = [self._hash[block] for block in blocks]
        if self.semantics.hit_events != "none" and None not in hashes:
            self._events.store(None, hashes, tokens)

    def _release(self, request: int, blocks: Any, *, readable: bool = False) -> None:
        """ref - 1 each, one holding of `request` each; the blocks reaching 0 join the queue: the
        unhashed at the head unless `readable` (unpin: all at the tail, every block watched)."""
        head, tail = [], []
        held = self._held[request] if blocks else []
        for block in blocks:
            held.remove(block)
            self._ref[block] -= 1
            if readable:
                self._watched[block] = None
            if self._ref[block] == 0:
                (head if self._hash[block] is None and not readable else tail).append(block)
        if blocks and not held:
            del self._held[request]
        self._queue = head + self._queue + tail

    def _tell_readers(self, blocks: list[int]) -> None:
        """The watched `blocks` are reused: each reader is told, and the block is no longer watched."""
        for block in blocks:
            del self._watched[block]
            self._events.reuse(block)

    def _drop_hash(self, block: int, *, announce: bool = True) -> None:
        """The block loses its hash and every further hash, each announced as removed unless
        `announce` is False (reset's one cleared event replaces the removals)."""
        for value in (self._hash[block], *self._further.pop(block, ())):
            if announce:
                self._events.remove(value)
            carriers = self._map[value]
            carriers.remove(block)
            if not carriers:
                del self._map[value]
        self._hash[block], self._cover[block] = None, 0

    def _promoted_at(self, block: int, place: int) -> bool:
        """The block's hash is a partial entry covering fewer units than the end of place `place`."""
        units = self.semantics.hash_units
        return self._cover[block] % units != 0 and self._cover[block] < place * units

    def _hash_order(self) -> list[int]:
        return [block for block, value in enumerate(self._hash) if value is not None]

    def _longest_prefix(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        found = []
        for value in hashes:
            carriers = self._map.get(value)
            if not carriers:
                break
            found.append(carriers[0])
        return tuple(found)
