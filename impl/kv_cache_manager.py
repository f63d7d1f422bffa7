"""`KVCacheManager`: a request-level KV cache manager over `KVBlockPool`, with token ids in storage.

It speaks the whole block-pool contract (docs/block-pool-contract.md): the pool level by delegating
to its `KVBlockPool` (`self.pool`), the request level with its own bookkeeping. Only the chained
hash (`chain_hashes`, a shared definition like a wire format) and `BLOCK_SIZE` come from the spec;
everything else is written here, so the checker can catch a bug in either.

Rules:
- `find_cached_prefix(tokens)` (read-only): the pool's lookup of the chained hashes of the full
  blocks of tokens[:-1] (the last token is always computed); the answer is hit blocks * block_size.
- `allocate_slots(request, tokens)`, first call: the hit blocks are touched, then the rest of the
  blocks allocated from the pool. A hit block with count 0 leaves the free queue when touched, so
  it counts against the free blocks; too few free: None, nothing changed. Later calls: `tokens`
  must extend the request's (WrongStateError otherwise); the blocks for the new tokens are
  allocated (None, nothing changed, if too few are free). Then the tokens from the first block not
  yet written are WRITTEN into the `token_ids` tensor [num_blocks, block_size] through a slot
  mapping (slot = block * block_size + offset), each written block records its parent hash and
  fill, and every block now full and not yet cached by the request is cached under its chained
  hash. The answer is the request's block table.
- `free_request(request)`: the table goes back to the pool last block first; the request is
  forgotten. A request with no table is a WrongStateError.
- `unpin` and `writable` are the pool's, for a request not managed here. `reused()`: the blocks
  whose readers this manager's last operation told (the pool's allocates within `allocate_slots`
  and `allocate`, or `reset`), sorted; none after an operation that raises.
- A request is managed at one level only: a pool-level call naming a request that has a table,
  and `allocate_slots` for a request holding pool-level blocks, raise WrongStateError after the
  argument checks (InvalidArgumentError first). A block written here is hashed only here
  (pool-level `cache_blocks` refuses it) until it is next allocated, when its record is dropped.
- `contents()` READS the tokens back from the tensor: (block, parent hash, tokens) per written
  block. On the "meta" device the tensors hold no data, so the token ids are also kept in a CPU
  shadow tensor, and `contents()` reads the shadow there.
- Token ids are int64 in storage: a token outside the int64 range is an InvalidArgumentError
  (the spec, holding Python ints, would accept it; vocabulary indices never are that large).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.kv_block_pool import KVBlockPool
from cacheproof.spec.blocks.manager import BLOCK_SIZE, chain_hashes
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError

__all__ = ["KVCacheManager", "kv_cache_manager"]

_INT64 = range(-(2**63), 2**63)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def kv_cache_manager(num_blocks: int) -> "KVCacheManager":
    """The checker's factory: a manager of `num_blocks` blocks of BLOCK_SIZE tokens on the CPU."""
    return KVCacheManager(num_blocks)


def _locked(method: Callable) -> Callable:
    """The method under the manager's lock: every operation and view is atomic, so threads that
    share a manager see the operations of the block contract one at a time."""

    @functools.wraps(method)
    def locked(self: "KVCacheManager", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


def _operation(method: Callable) -> Callable:
    """An operation of the block contract under the manager's lock (`_locked`) that announces
    afresh: `reused()` then answers the blocks this call told of, none if it raises."""

    @functools.wraps(method)
    def announcing(self: "KVCacheManager", *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._reused = []
            try:
                return method(self, *args, **kwargs)
            except BaseException:
                self._reused = []
                raise

    return announcing


class KVCacheManager:
    """A KV cache manager of `num_blocks` blocks (block 0 the null block) of `block_size` tokens,
    storage on `device`; `kv_shape` and `dtype` shape the pool's KV tensor, a `pool_class` (a
    `KVBlockPool` by default). Thread-safe: one lock around each operation and view."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int = BLOCK_SIZE,
        *,
        kv_shape: tuple[int, ...] = (2, 1, 4),
        dtype: torch.dtype = torch.float16,
        device: str | torch.device = "cpu",
        pool_class: type[KVBlockPool] = KVBlockPool,
    ) -> None:
        self._lock = threading.RLock()
        self.pool = pool_class(num_blocks, block_size, kv_shape=kv_shape, dtype=dtype, device=device)
        self.block_size = block_size
        self.token_ids = torch.zeros((num_blocks, block_size), dtype=torch.int64, device=device)
        on_meta = self.token_ids.device.type == "meta"
        self._readable = torch.zeros((num_blocks, block_size), dtype=torch.int64) if on_meta else self.token_ids
        self._tables: dict[int, list[int]] = {}  # request -> its blocks in token order
        self._tokens: dict[int, tuple[int, ...]] = {}  # request -> its tokens so far
        self._cached: dict[int, int] = {}  # request -> leading blocks of its table cached
        self._written: dict[int, tuple[int | None, int]] = {}  # block -> (parent hash, tokens filled)
        self._reused: list[int] = []  # the blocks whose readers the last operation told

    @property
    def num_blocks(self) -> int:
        return self.pool.num_blocks

    # ----------------------------------------------------------------- argument checks

    def _request(self, request: object) -> int:
        if not _is_int(request):
            raise InvalidArgumentError(f"request must be an int, got {request!r}")
        return request  # type: ignore[return-value]

    def _ids(self, blocks: object) -> tuple[int, ...]:
        if not isinstance(blocks, (tuple, list)):
            raise InvalidArgumentError(f"blocks must be a tuple of block ids, got {blocks!r}")
        for block in blocks:
            if not _is_int(block) or not 0 < block < self.num_blocks:
                raise InvalidArgumentError(f"block {block!r} is not a usable block id (1..{self.num_blocks - 1})")
        return tuple(blocks)

    @staticmethod
    def _ints(values: object, what: str) -> tuple[int, ...]:
        if not isinstance(values, (tuple, list)) or not all(map(_is_int, values)):
            raise InvalidArgumentError(f"{what} must be a tuple of ints, got {values!r}")
        return tuple(values)

    def _token_ids(self, tokens: object) -> tuple[int, ...]:
        tokens = self._ints(tokens, "tokens")
        if any(token not in _INT64 for token in tokens):
            raise InvalidArgumentError(f"tokens {tokens!r}: a token id must fit in int64 storage")
        return tokens

    def _unmanaged(self, operation: str, request: int) -> None:
        if request in self._tables:
            raise WrongStateError(
                f"{operation}(request={request}): the request is managed at the request level; its "
                "blocks change only through allocate_slots and free_request"
            )

    # ----------------------------------------------------------------- pool level

    @_operation
    def allocate(self, request: int, n: int) -> tuple[int, ...]:
        """The pool's allocate; the records of the blocks taken are dropped (they are reused)."""
        self._request(request)
        if not _is_int(n) or n < 0:
            raise InvalidArgumentError(f"n must be an int >= 0, got {n!r}")
        self._unmanaged("allocate", request)
        return tuple(self._take(request, n))

    @_operation
    def touch(self, request: int, blocks: tuple[int, ...]) -> None:
        """The pool's touch, for a request not managed here."""
        self._request(request)
        self._ids(blocks)
        self._unmanaged("touch", request)
        self.pool.touch(request, blocks)

    @_operation
    def cache_blocks(self, request: int, blocks: tuple[int, ...], hashes: tuple[int, ...]) -> None:
        """The pool's cache_blocks, refusing blocks written here (only the manager hashes them)."""
        self._request(request)
        ids = self._ids(blocks)
        values = self._ints(hashes, "hashes")
        if len(ids) != len(values) or len(set(ids)) != len(ids):
            raise InvalidArgumentError(f"cache_blocks: blocks {ids} and hashes {values} must pair up, each block once")
        self._unmanaged("cache_blocks", request)
        written = [block for block in ids if block in self._written]
        if written:
            raise WrongStateError(
                f"cache_blocks(request={request}, block={written[0]}): the block holds tokens written "
                "by allocate_slots, which alone hashes them"
            )
        self.pool.cache_blocks(request, ids, values)

    @_operation
    def lookup(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        return self.pool.lookup(self._ints(hashes, "hashes"))

    @_operation
    def free(self, request: int, blocks: tuple[int, ...]) -> None:
        """The pool's free, for a request not managed here."""
        self._released_by_pool("free", request, blocks)

    @_operation
    def unpin(self, request: int, blocks: tuple[int, ...]) -> None:
        """The pool's unpin, for a request not managed here."""
        self._released_by_pool("unpin", request, blocks)

    def _released_by_pool(self, operation: str, request: int, blocks: tuple[int, ...]) -> None:
        """The pool's `operation` (free or unpin) of `blocks`, once the request and ids are checked
        and the request is known not to be managed here."""
        self._request(request)
        self._ids(blocks)
        self._unmanaged(operation, request)
        getattr(self.pool, operation)(request, blocks)

    @_operation
    def writable(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        return self.pool.writable(self._ids(blocks))

    @_operation
    def evict(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        return self.pool.evict(blocks)

    @_operation
    def reset(self) -> bool:
        done = self.pool.reset()
        self._reused.extend(self.pool.reused())
        return done

    @_operation
    def num_free(self) -> int:
        return self.pool.num_free()

    # ----------------------------------------------------------------- request level

    @_operation
    def find_cached_prefix(self, tokens: tuple[int, ...]) -> int:
        """How many leading tokens are cached: hit blocks * block_size, never the last token."""
        return len(self._hit(self._token_ids(tokens))) * self.block_size

    @_operation
    def allocate_slots(self, request: int, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        """Blocks for all of `tokens` (see the module rules): the block table, or None."""
        self._request(request)
        tokens = self._token_ids(tokens)
        table = self._tables.get(request)
        size = self.block_size
        blocks_needed = -(-len(tokens) // size)
        if table is None:
            if self.pool.holds(request):
                raise WrongStateError(
                    f"allocate_slots(request={request}): the request holds blocks at the pool level; "
                    "a request is managed at one level only"
                )
            hit = self._hit(tokens)
            missing = blocks_needed - len(hit)
            pinned_free = sum(1 for block in hit if self.pool.ref_count(block) == 0)
            if missing > self.pool.num_free() - pinned_free:
                return None
            self.pool.touch(request, hit)
            table = self._tables[request] = list(hit)
            self._cached[request] = len(hit)
            first_written = len(hit)
        else:
            old = self._tokens[request]
            if tokens[: len(old)] != old:
                raise WrongStateError(
                    f"allocate_slots(request={request}): {len(tokens)} tokens do not extend the "
                    f"request's {len(old)} tokens"
                )
            missing = blocks_needed - len(table)
            if missing > self.pool.num_free():
                return None
            first_written = len(old) // size
        table.extend(self._take(request, missing))
        self._tokens[request] = tokens
        self._write(request, first_written)
        return tuple(table)

    @_operation
    def free_request(self, request: int) -> None:
        """Free the request's table last block first and forget the request."""
        self._request(request)
        if request not in self._tables:
            raise WrongStateError(f"free_request(request={request}): the request has no table (never allocated, or freed)")
        table = self._tables.pop(request)
        del self._tokens[request], self._cached[request]
        self.pool.free(request, tuple(reversed(table)))

    # ----------------------------------------------------------------- internals

    def _hit(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        return self.pool.lookup(chain_hashes(tokens[:-1], self.block_size))

    def _take(self, request: int, n: int) -> list[int]:
        taken = list(self.pool.allocate(request, n))
        self._reused.extend(self.pool.reused())
        for block in taken:
            self._written.pop(block, None)
        return taken

    def _write(self, request: int, first: int) -> None:
        """Store tokens of table[first:] in `token_ids` by slot, record each block's parent hash and
        fill, then cache the full blocks the request has not cached yet."""
        table, tokens, size = self._tables[request], self._tokens[request], self.block_size
        start = first * size
        if start < len(tokens):
            positions = torch.arange(start, len(tokens))
            blocks = torch.tensor(table, dtype=torch.int64)[positions // size]
            values = torch.tensor(tokens[start:], dtype=torch.int64)
            targets = (self.token_ids,) if self._readable is self.token_ids else (self.token_ids, self._readable)
            for storage in targets:
                storage.view(-1)[(blocks * size + positions % size).to(storage.device)] = values.to(storage.device)
        hashes = chain_hashes(tokens, size)
        for i in range(first, len(table)):
            self._written[table[i]] = (hashes[i - 1] if i else None, min(size, len(tokens) - i * size))
        cached = self._cached[request]
        if len(hashes) > cached:
            self.pool.cache_blocks(request, tuple(table[cached : len(hashes)]), hashes[cached:])
            self._cached[request] = len(hashes)

    # ----------------------------------------------------------------- views

    @_locked
    def reused(self) -> tuple[int, ...]:
        """The blocks whose readers the last operation told of a reuse, sorted."""
        return tuple(sorted(self._reused))

    @_locked
    def snapshot(self) -> Any:
        """The pool's snapshot (free queue, per-block count and hash, holdings)."""
        return self.pool.snapshot()

    @_locked
    def tables(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(request, its blocks in token order), by request."""
        return tuple((request, tuple(table)) for request, table in sorted(self._tables.items()))

    @_locked
    def cached_tokens(self) -> tuple[tuple[int, int], ...]:
        """(request, the tokens its table covers up to its last hashed block), by request."""
        return tuple((request, self.block_size * max((i + 1 for i, block in enumerate(table)
                                                      if self.pool.hash_of(block) is not None), default=0))
                     for request, table in sorted(self._tables.items()))

    @_locked
    def contents(self) -> tuple[tuple[int, int | None, tuple[int, ...]], ...]:
        """(block, parent hash, tokens) per written block, by block, the tokens read from storage."""
        if not self._written:
            return ()
        rows = self._readable.tolist()
        return tuple(
            (block, parent, tuple(rows[block][:filled])) for block, (parent, filled) in sorted(self._written.items())
        )
