"""Partial prefix-cache entries: the pool-level operations of a pool that hashes in units smaller
than a block (`BlockSemantics.hash_units` > 1, vLLM's `hash_block_size`).

A request's chain of hashes is taken every hash unit, so a prefix can end inside a block. Such a
boundary can make a block in use reachable without copying it: a partial entry. Each block then
carries, besides its queue place and ref count:

- a primary hash (the snapshot's hash), with the hash units from the start of its sequence that it
  covers: `cache_blocks` gives blocks[i] place i + 1, so a cover of (i + 1) * hash_units units;
  `cache_partial` gives the boundary's own count;
- further hashes beside the primary (never without one), each found by lookup like the primary.

A block loses every entry together, each announced as removed: when `allocate` hands it out again,
when `evict` names it, when `cache_blocks` promotes a partial primary to the full block's hash, and
when `cache_partial` replaces a primary covering fewer units (`reset` drops all at once). Rules:

1. `cache_partial(request, block, hashes, *, replace=False)`: `hashes` is the request's chain up to the boundary, one
   hash per unit (at least one; a count that is a multiple of hash_units ends at a block's end,
   which is `cache_blocks`' hash: InvalidArgumentError); the block must be held by the request and
   not written at the request level (WrongStateError). The key is hashes[-1], covering len(hashes)
   units. With `replace` (the block's contents were rewritten, as vLLM's Mamba checkpoints do) all
   its entries are removed and the key becomes its primary. Else: if the block already carries the
   key, nothing changes and nothing is announced; if its primary covers fewer units, all its
   entries are removed and the key becomes the primary; if it has no primary, the key becomes the
   primary; else the key is added as a further hash. The key is announced stored after hashes[-2]
   (no parent for a chain of one). `replace` must be a bool (InvalidArgumentError). The null
   block, where the semantics skip it, is passed over: nothing changes.
2. `move_hashes(request, source, target)`: the copy-on-write of a block its request keeps writing
   (vLLM's Mamba groups): every entry of source moves to target, the primary with its cover, in the
   hash map each appended after the blocks already carrying it; source is left unhashed, keeping
   its queue place. Both blocks are held by the request, target carries no hash and is not source,
   and neither holds request-level contents (else WrongStateError; the null block is not a block to
   copy from or to: InvalidArgumentError). Nothing is announced: a router still finds the same
   hashes.
"""

from __future__ import annotations

from cacheproof.spec.blocks.events import announcing
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError

NULL_BLOCK = 0
"""The null block's id (spec/blocks/pool.py: never in the queue, never handed out, never hashed)."""


class PartialEntries:
    """The partial-entry operations of `BlockPoolSpec` (a mixin over its pool-level steps).

    Attributes (set by `BlockPoolSpec.__init__`):
        _cover: per block, the hash units its primary hash covers (0: no hash).
        _further: block -> its further hashes, first added first (only blocks with some).
    """

    @announcing
    def cache_partial(self, request: int, block: int, hashes: tuple[int, ...], *, replace: bool = False) -> None:
        """Rule 1 of the module docstring: `block` is also found by hashes[-1], a boundary
        len(hashes) units into the request's sequence; with `replace`, by that hash alone."""
        call = f"cache_partial(request={request!r}, block={block!r})"
        self._check_request("cache_partial", request)
        (block,) = self._check_blocks("cache_partial", (block,), keep_null=True)
        values = self._check_hashes("cache_partial", hashes)
        units = self.semantics.hash_units
        if not values or len(values) % units == 0:
            raise InvalidArgumentError(
                f"{call}: {len(values)} hashes end at a block's end ({units} hash units per block); a partial "
                "entry's boundary is inside a block, a block's end is cache_blocks' hash"
            )
        if not isinstance(replace, bool):
            raise InvalidArgumentError(f"{call}: replace must be a bool, got {replace!r}")
        if block == NULL_BLOCK:
            return
        self._check_unmanaged("cache_partial", request)
        self._check_own_unwritten(call, request, block)
        key = values[-1]
        if not replace and (key == self._hash[block] or key in self._further.get(block, ())):
            return
        if self._hash[block] is not None and (replace or self._cover[block] < len(values)):
            self._drop_hash(block)
        if self._hash[block] is None:
            self._hash[block], self._cover[block] = key, len(values)
        else:
            self._further.setdefault(block, []).append(key)
        self._map.setdefault(key, []).append(block)
        self._events.store(values[-2] if len(values) > 1 else None, (key,))

    @announcing
    def move_hashes(self, request: int, source: int, target: int) -> None:
        """Rule 2 of the module docstring: every entry of `source` moves to `target`, unannounced."""
        call = f"move_hashes(request={request!r}, source={source!r}, target={target!r})"
        self._check_request("move_hashes", request)
        self._check_blocks("move_hashes", (source, target), keep_null=True)
        if NULL_BLOCK in (source, target):
            raise InvalidArgumentError(f"{call}: block 0 is the null block, which holds nothing to copy")
        if source == target:
            raise InvalidArgumentError(f"{call}: a block's entries move to another block")
        self._check_unmanaged("move_hashes", request)
        self._check_own_unwritten(call, request, source)
        self._check_own_unwritten(call, request, target)
        if self._hash[target] is not None:
            raise WrongStateError(f"{call}: the target already has hash {self._hash[target]}; the copy is a fresh block")
        primary = self._hash[source]
        if primary is None:
            return
        further = self._further.pop(source, [])
        for value in (primary, *further):
            carriers = self._map[value]
            carriers.remove(source)
            carriers.append(target)
        self._hash[target], self._cover[target] = primary, self._cover[source]
        self._hash[source], self._cover[source] = None, 0
        if further:
            self._further[target] = further

    def entries(self) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
        """(block, the hash units its primary covers, its further hashes) of every hashed block,
        by block: what the snapshot's one hash per block does not show."""
        return tuple((block, self._cover[block], tuple(self._further.get(block, ())))
                     for block, value in enumerate(self._hash) if value is not None)

    def _check_own_unwritten(self, call: str, request: int, block: int) -> None:
        """`block` is held by `request` and holds no request-level contents."""
        if block not in self._held.get(request, ()):
            raise WrongStateError(f"{call}: the request does not hold block {block}")
        if block in self._contents:
            raise WrongStateError(
                f"{call}: block {block} holds tokens written at the request level, which alone hashes them"
            )
