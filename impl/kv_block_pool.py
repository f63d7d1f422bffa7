"""`KVBlockPool`: a paged KV-cache block pool over one torch storage tensor, with prefix caching.

It speaks the block-pool contract (docs/block-pool-contract.md) with its own data structures and
arithmetic, independent of the spec's, so the checker can catch a bug in either.

Rules:
- Blocks are ints 0..num_blocks-1 and index the first dimension of the storage tensor
  `kv` [num_blocks, block_size, *kv_shape]. Block 0 is the null block: never handed out, never
  in the free queue, its reference count stays 0; a block table pads with it.
- The free queue holds exactly the non-null blocks with reference count 0, head first.
  `allocate(request, n)` takes the first n; a taken block that still has a hash loses it (lazy
  eviction) and gets count 1, held by `request`.
- `touch(request, blocks)` (a prefix hit): count + 1 each, held by `request`; a block at count 0
  leaves the free queue. Only a block in use or carrying a hash may be touched.
- `cache_blocks(request, blocks, hashes)`: blocks[i], unhashed and held by `request`, gets
  hashes[i]. Several blocks may carry one hash; `lookup` answers with the first-inserted block
  still carrying it.
- `lookup(hashes)` (read-only): the blocks of the longest prefix of `hashes` all cached.
- `free(request, blocks)`: count - 1 in the order given, each taken from `request`'s holdings.
  The blocks reaching 0 in one call join the queue together: hashed ones at the tail in the order
  given (least recently used first out), unhashed ones at the head in the order given (reused
  first).
- `unpin(request, blocks)`: as `free`, for a holder that keeps reading the blocks: the blocks
  reaching 0 join the tail in the order given, hashed or not (reused last), and every block given
  is WATCHED. The allocate that next hands a watched block out, or a reset, tells its reader once
  (`reused()`: the blocks the last call told of, sorted; none after a call that raises).
- `writable(blocks)` (read-only): the given blocks at count 1 with no hash (their one holder may
  write them in place), in the order given, once each.
- `evict(blocks)` drops the hashes of the given blocks (they keep their queue place) and returns,
  in the order given and once each, those that had one. `reset()` drops every hash and returns
  True, or returns False and changes nothing while any non-null block is in use.
- Misuse raises a typed error of `cacheproof.spec.errors` before anything changes: a wrong type,
  the null block, an id out of range, n < 0 or a length mismatch is `InvalidArgumentError`; a
  block in the wrong state (touching a free unhashed block, caching a hashed block or one the
  request does not hold, freeing or unpinning a holding the request does not have) is `WrongStateError`;
  n above the free count is `CapacityError`.

Cost: the free queue is a list read from a head index, with lazy removal from the middle
(`_FreeQueue`), so taking, appending and prepending a call's blocks are C-level slices. Counts
(blocks in use only) and hashes (hashed blocks only) are dicts keyed by block, so whole-call updates and checks run as C-level
dict and set operations; the hash map is one dict hash -> first block plus, only for hashes
several blocks carry, a dict hash -> the later blocks in insertion order. Holdings are a dict per
request of block -> times held (insertion-ordered). The watched blocks are a dict, read by
allocate only while it is not empty. Every operation is O(blocks in the call); `snapshot` is
O(num_blocks).
"""

from __future__ import annotations

from itertools import repeat
from typing import Iterable

import numpy as np

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.block_table import get_block_ids_per_seq
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError

__all__ = ["KVBlockPool"]

Snapshot = tuple[tuple[int, ...], tuple[tuple[int, "int | None"], ...], tuple[tuple[int, tuple[int, ...]], ...]]


_INT_ONLY = {int}


def _is_int(value: object) -> bool:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


class _FreeQueue:
    """The free queue as a Python list read from index `head`, so whole-call moves are C-level
    slices: taking n blocks is one slice, appending at the tail one extend, putting blocks back
    at the head one slice assignment into the consumed room (or one memmove insert).

    Removing a block from the middle (a prefix hit on a free block) is lazy: the entry stays and
    `stale[b]` counts b's dead entries. Because a block's live entry is always its last one
    (blocks with dead entries are compacted away before going back to the head), the first
    entries of b met from the head are its dead ones. Dead entries are skipped when taken and
    compacted away once they outnumber the live ones.
    """

    __slots__ = ("entries", "head", "stale", "dead")

    def __init__(self, blocks: range) -> None:
        self.entries = list(blocks)
        self.head = 0
        self.stale: dict[int, int] = {}
        self.dead = 0

    def __len__(self) -> int:
        return len(self.entries) - self.head - self.dead

    def order(self) -> list[int]:
        """The live blocks, head first."""
        skip = dict(self.stale)
        live = []
        for block in self.entries[self.head :]:
            if skip.get(block):
                skip[block] -= 1
            else:
                live.append(block)
        return live

    def _compact(self) -> None:
        self.entries = self.order()
        self.head = 0
        self.stale = {}
        self.dead = 0

    def take(self, n: int) -> list[int]:
        """The first n live blocks (n <= len(self)), removed."""
        start = self.head
        ids = self.entries[start : start + n]
        if self.stale and not self.stale.keys().isdisjoint(ids):
            ids = []
            stale, entries = self.stale, self.entries
            while len(ids) < n:
                block = entries[start]
                start += 1
                if block in stale:
                    self.dead -= 1
                    stale[block] -= 1
                    if not stale[block]:
                        del stale[block]
                else:
                    ids.append(block)
            self.head = start
        else:
            self.head = start + n
        if self.head > 4096 and self.head * 2 > len(self.entries):
            del self.entries[: self.head]
            self.head = 0
        return ids

    def append(self, blocks: list[int]) -> None:
        self.entries.extend(blocks)

    def prepend(self, blocks: list[int]) -> None:
        """Put `blocks` at the head, blocks[0] first."""
        if self.stale and not self.stale.keys().isdisjoint(blocks):
            self._compact()
        k = len(blocks)
        if k <= self.head:
            self.head -= k
            self.entries[self.head : self.head + k] = blocks
        else:
            self.entries[self.head : self.head] = blocks

    def remove(self, block: int) -> None:
        """Take a free block out of the queue (its entry goes dead)."""
        self.stale[block] = self.stale.get(block, 0) + 1
        self.dead += 1
        if self.dead > 64 and self.dead * 2 > len(self.entries) - self.head:
            self._compact()


class KVBlockPool:
    """A pool of `num_blocks` KV blocks of `block_size` tokens, storage on `device`.

    `kv_shape` is the per-token shape (e.g. (2, heads, head_dim) for K and V); on the "meta"
    device the storage holds no memory, so any size runs.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        *,
        kv_shape: tuple[int, ...] = (2, 8, 64),
        dtype: torch.dtype = torch.float16,
        device: str | torch.device = "cpu",
    ) -> None:
        if not _is_int(num_blocks) or num_blocks < 1:
            raise InvalidArgumentError(f"num_blocks must be an int >= 1, got {num_blocks!r}")
        if not _is_int(block_size) or block_size < 1:
            raise InvalidArgumentError(f"block_size must be an int >= 1, got {block_size!r}")
        self.block_size = block_size
        self.kv = torch.empty((num_blocks, block_size, *kv_shape), dtype=dtype, device=device)
        self._n = num_blocks
        self._free = _FreeQueue(range(1, num_blocks))
        self._ref: dict[int, int] = {}  # block in use -> count >= 1 (absent: count 0)
        self._hash: dict[int, int] = {}  # hashed block -> its hash
        self._first: dict[int, int] = {}  # hash -> first-inserted block carrying it
        self._later: dict[int, list[int]] = {}  # hash -> later blocks carrying it, oldest first
        self._held: dict[int, dict[int, int]] = {}  # request -> {block: times held}
        self._watched: dict[int, None] = {}  # unpinned blocks whose readers are not yet told of a reuse
        self._told: tuple[int, ...] = ()  # the watched blocks the last call reused, sorted

    @property
    def num_blocks(self) -> int:
        return self._n

    def num_free(self) -> int:
        self._told = ()
        return len(self._free)

    def ref_count(self, block: int) -> int:
        """How many holdings of `block` exist (0: free, or the null block)."""
        return self._ref.get(block, 0)

    def hash_of(self, block: int) -> int | None:
        """The hash `block` carries (None: none)."""
        return self._hash.get(block)

    def holds(self, request: int) -> bool:
        """Whether `request` holds any block."""
        return bool(self._held.get(request))

    # ----------------------------------------------------------------- checks

    def _request(self, request: object) -> int:
        if type(request) is not int and not _is_int(request):
            raise InvalidArgumentError(f"request must be an int, got {request!r}")
        return request  # type: ignore[return-value]

    def _ids(self, blocks: Iterable[object]) -> tuple[int, ...]:
        """`blocks` as a tuple of non-null block ids (InvalidArgumentError otherwise). The usual
        case (plain ints in range) is checked by C-level set, min and max; the loop names the
        culprit."""
        ids = tuple(blocks)
        if not ids or (set(map(type, ids)) == _INT_ONLY and min(ids) > 0 and max(ids) < self._n):
            return ids  # type: ignore[return-value]
        for block in ids:
            if not _is_int(block):
                raise InvalidArgumentError(f"block {block!r} is not an int")
            if not 0 < block < self._n:  # type: ignore[operator]
                what = "the null block" if block == 0 else f"out of range 1..{self._n - 1}"
                raise InvalidArgumentError(f"block {block} is {what}")
        return ids  # type: ignore[return-value]

    @staticmethod
    def _hashes(values: Iterable[object]) -> tuple[int, ...]:
        values = tuple(values)
        if values and set(map(type, values)) != _INT_ONLY:
            for value in values:
                if not _is_int(value):
                    raise InvalidArgumentError(f"hash {value!r} is not an int")
        return values  # type: ignore[return-value]

    # ----------------------------------------------------------------- hash map

    def _map(self, block: int, value: int) -> None:
        self._hash[block] = value
        first = self._first.setdefault(value, block)
        if first != block:
            self._later.setdefault(value, []).append(block)

    def _drop(self, blocks: Iterable[int]) -> None:
        """Remove the hashes of `blocks` (all hashed, distinct) from the blocks and the map."""
        values = list(map(self._hash.pop, blocks))
        first, later = self._first, self._later
        if later and not later.keys().isdisjoint(values):
            for block, value in zip(blocks, values):
                self._unmap(block, value)
        else:
            for value in values:
                del first[value]

    def _unmap(self, block: int, value: int) -> None:
        """Remove `block` from the blocks carrying `value` (its hash already dropped)."""
        later = self._later.get(value)
        if later is None:
            del self._first[value]
            return
        if self._first[value] == block:
            self._first[value] = later.pop(0)
        else:
            later.remove(block)
        if not later:
            del self._later[value]

    # ----------------------------------------------------------------- operations

    def allocate(self, request: int, n: int) -> tuple[int, ...]:
        """n blocks from the head of the free queue, held by `request` at count 1; the watched ones'
        readers are told."""
        self._told = ()
        self._request(request)
        if type(n) is not int and not _is_int(n) or n < 0:
            raise InvalidArgumentError(f"n must be an int >= 0, got {n!r}")
        if n > len(self._free):
            raise CapacityError(f"{n} blocks asked, {len(self._free)} free")
        ids = tuple(self._free.take(n))
        if self._hash:
            self._drop(self._hash.keys() & ids)
        if self._watched:
            self._tell(self._watched.keys() & ids)
        self._ref.update(zip(ids, repeat(1)))
        held = self._held.get(request)
        if held is None:
            self._held[request] = dict.fromkeys(ids, 1)
        else:
            held.update(zip(ids, repeat(1)))
        return ids

    def touch(self, request: int, blocks: tuple[int, ...]) -> None:
        """A prefix hit: count + 1 each, held by `request`; a count-0 block leaves the queue."""
        self._told = ()
        self._request(request)
        ids = self._ids(blocks)
        ref, hashes = self._ref, self._hash
        for block in ids:
            if block not in ref and block not in hashes:
                raise WrongStateError(f"block {block} is free and has no hash: nothing to hit")
        free = self._free
        held = self._held.setdefault(request, {})
        for block in ids:
            count = ref.get(block, 0)
            if not count:
                free.remove(block)
            ref[block] = count + 1
            held[block] = held.get(block, 0) + 1

    def cache_blocks(self, request: int, blocks: tuple[int, ...], hashes: tuple[int, ...]) -> None:
        """blocks[i] gets hashes[i]; each must be unhashed and held by `request`."""
        self._told = ()
        self._request(request)
        ids = self._ids(blocks)
        values = self._hashes(hashes)
        if len(values) != len(ids):
            raise InvalidArgumentError(f"{len(ids)} blocks but {len(values)} hashes")
        distinct = set(ids)
        if len(distinct) != len(ids):
            raise InvalidArgumentError(f"a block is repeated in {ids}")
        held = self._held.get(request, {})
        if not (distinct <= held.keys() and self._hash.keys().isdisjoint(distinct)):
            for block in ids:
                if block in self._hash:
                    raise WrongStateError(f"block {block} already has hash {self._hash[block]}")
                if block not in held:
                    raise WrongStateError(f"request {request} does not hold block {block}")
        first = self._first
        if first.keys().isdisjoint(values) and len(set(values)) == len(values):
            self._hash.update(zip(ids, values))
            first.update(zip(values, ids))
        else:
            for block, value in zip(ids, values):
                self._map(block, value)

    def lookup(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        """The first-inserted blocks of the longest cached prefix of `hashes` (read-only)."""
        self._told = ()
        found = list(map(self._first.get, self._hashes(hashes)))
        if None in found:
            del found[found.index(None) :]
        return tuple(found)

    def free(self, request: int, blocks: tuple[int, ...]) -> None:
        """Count - 1 in the order given; blocks reaching 0 join the queue (see the module rules)."""
        self._told = ()
        self._request(request)
        ids = self._ids(blocks)
        if not ids:
            return
        released = self._release(request, ids, "free")
        hashes, free = self._hash, self._free
        if hashes.keys() >= set(released):
            free.append(released)
        else:
            free.append([block for block in released if block in hashes])
            free.prepend([block for block in released if block not in hashes])

    def unpin(self, request: int, blocks: tuple[int, ...]) -> None:
        """As free, but the blocks reaching 0 join the tail, hashed or not, and every block given
        is watched until a call reuses it (see the module rules)."""
        self._told = ()
        self._request(request)
        ids = self._ids(blocks)
        if not ids:
            return
        self._free.append(self._release(request, ids, "unpin"))
        self._watched.update(dict.fromkeys(ids))

    def writable(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """The given blocks at count 1 with no hash, in the order given, once each (read-only)."""
        self._told = ()
        ref, hashes = self._ref, self._hash
        return tuple(block for block in dict.fromkeys(self._ids(blocks)) if ref.get(block) == 1 and block not in hashes)

    def _release(self, request: int, ids: tuple[int, ...], operation: str) -> list[int]:
        """One holding of `request` and one count off each of `ids` (non-empty) in the order given,
        every holding checked first (WrongStateError: a double free); the blocks reaching 0, in
        the order they reach it."""
        held = self._held.get(request, {})
        distinct = set(ids)
        if len(distinct) == len(ids):
            if not distinct <= held.keys():
                missing = next(block for block in ids if block not in held)
                raise WrongStateError(f"{operation}: request {request} does not hold block {missing} (a double free)")
            released = self._release_distinct(held, ids)
        else:
            for block in distinct:
                if held.get(block, 0) < ids.count(block):
                    raise WrongStateError(
                        f"{operation}: request {request} holds block {block} {held.get(block, 0)} times, "
                        f"given {ids.count(block)} times (a double free)"
                    )
            released = self._release_one_by_one(held, ids)
        if not held:
            del self._held[request]
        return released

    def _release_distinct(self, held: dict[int, int], ids: tuple[int, ...]) -> list[int]:
        """One holding and one count off each of `ids` (distinct); the blocks reaching 0."""
        times = list(map(held.pop, ids))
        if max(times) > 1:
            held.update((block, t - 1) for block, t in zip(ids, times) if t > 1)
        ref = self._ref
        counts = list(map(ref.pop, ids))
        if max(counts) == 1:
            return list(ids)
        ref.update((block, c - 1) for block, c in zip(ids, counts) if c > 1)
        return [block for block, c in zip(ids, counts) if c == 1]

    def _release_one_by_one(self, held: dict[int, int], ids: tuple[int, ...]) -> list[int]:
        """As `_release_distinct`, for ids with repeats: block by block in the order given."""
        ref, released = self._ref, []
        for block in ids:
            held[block] -= 1
            if not held[block]:
                del held[block]
            ref[block] -= 1
            if not ref[block]:
                del ref[block]
                released.append(block)
        return released

    def evict(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        """Drop the hashes of `blocks` (queue places kept); the blocks that had one."""
        self._told = ()
        dropped = tuple(block for block in dict.fromkeys(self._ids(blocks)) if block in self._hash)
        self._drop(dropped)
        return dropped

    def reset(self) -> bool:
        """Drop every hash and tell every watched block's reader; False, changing nothing, while a
        non-null block is in use."""
        self._told = ()
        if self._ref:
            return False
        self._hash.clear()
        self._first.clear()
        self._later.clear()
        self._tell(self._watched)
        return True

    def _tell(self, blocks: Iterable[int]) -> None:
        """The watched `blocks` are reused: their readers are told (`reused()`), once."""
        told = sorted(blocks)
        for block in told:
            del self._watched[block]
        self._told = tuple(told)

    # ----------------------------------------------------------------- state

    def reused(self) -> tuple[int, ...]:
        """The watched blocks the last call reused (allocate, reset), sorted: each reader told once."""
        return self._told

    def holdings(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(request, blocks held in first-acquired order, repeated as often as held), by request."""
        return tuple(
            (request, tuple(block for block, times in held.items() for _ in range(times)))
            for request, held in sorted(self._held.items())
            if held
        )

    def snapshot(self) -> Snapshot:
        """(free queue head first, per-block (count, hash or None), per request its blocks sorted,
        repeated as often as held): the block contract's snapshot."""
        ref, hashes = self._ref, self._hash
        blocks = tuple((ref.get(block, 0), hashes.get(block)) for block in range(self._n))
        return tuple(self._free.order()), blocks, tuple((request, tuple(sorted(held))) for request, held in self.holdings())

    def page_buffers(self, requests: Iterable[int]) -> list[np.ndarray]:
        """One native int32 array per request (its holdings, as `holdings` orders them): the
        page buffers `cacheproof.impl.block_table.get_block_ids_per_seq` takes."""
        rows = dict(self.holdings())
        return [np.array(rows.get(request, ()), dtype=np.int32) for request in requests]

    def block_table(self, requests: Iterable[int], *, device: str | torch.device | None = None) -> torch.Tensor:
        """The int32 block table of `requests` (row r: request r's blocks, padded with the null
        block 0), built by the block-table kernel from `page_buffers`."""
        return get_block_ids_per_seq(self.page_buffers(requests), device=device)
