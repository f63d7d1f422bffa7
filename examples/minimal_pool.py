"""A minimal KV block pool that conforms to docs/block-pool-contract.md: copy it and start from here.

Plain lists and dicts: the free queue is a list, head first; ref counts and hashes are lists indexed
by block id. Every operation checks all its arguments and the state first and updates after, so a
call that raises changes nothing. It speaks both levels (the pool level and the request level on
top) and has the three views the checker compares (`snapshot`, `tables`, `contents`); it announces
nothing, so it has neither optional view (`events`, `reused`: it need not say which unpinned blocks
a call reused). The chained
hashes of the request level are the spec's own (`cacheproof.spec.blocks.manager.chain_hashes`).

Check it against the spec (exit status 0: it conforms; the factory is called as
`MinimalPool(num_blocks)`, once per call sequence):

    cacheproof check --spec blocks --impl examples.minimal_pool:MinimalPool
"""

from __future__ import annotations

from dataclasses import dataclass

from cacheproof.spec.blocks.manager import BLOCK_SIZE, chain_hashes
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError

NULL_BLOCK = 0


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(operation: str, what: str, values: object) -> tuple[int, ...]:
    """`values` (a tuple or list of ints) as a tuple; InvalidArgumentError otherwise."""
    if not isinstance(values, (tuple, list)) or not all(_is_int(value) for value in values):
        raise InvalidArgumentError(f"{operation}: {what} must be a tuple of ints, got {values!r}")
    return tuple(values)


@dataclass
class _Request:
    """A request managed at the request level."""

    table: list[int]  # its blocks in token order
    tokens: tuple[int, ...]  # its tokens so far
    cached: int  # how many leading blocks of the table carry their hash


class MinimalPool:
    def __init__(self, num_blocks: int) -> None:
        if not _is_int(num_blocks) or num_blocks < 1:
            raise InvalidArgumentError(f"num_blocks must be an int >= 1 (block 0 is the null block), got {num_blocks!r}")
        self.num_blocks = num_blocks
        self.queue = list(range(1, num_blocks))  # the free blocks, head first
        self.ref = [0] * num_blocks
        self.hash: list[int | None] = [None] * num_blocks
        self.carriers: dict[int, list[int]] = {}  # hash -> the blocks carrying it, first inserted first
        self.held: dict[int, list[int]] = {}  # request -> the blocks it holds (held twice: listed twice)
        self.requests: dict[int, _Request] = {}
        self.written: dict[int, tuple[int | None, tuple[int, ...]]] = {}  # block -> (parent hash, tokens)

    # Pool level -------------------------------------------------------------------------------

    def allocate(self, request: int, n: int) -> tuple[int, ...]:
        self._check_request("allocate", request)
        if not _is_int(n) or n < 0:
            raise InvalidArgumentError(f"allocate(request={request}): n must be an int >= 0, got {n!r}")
        self._check_pool_level("allocate", request)
        if n > len(self.queue):
            raise CapacityError(f"allocate(request={request}, n={n}): only {len(self.queue)} blocks are free")
        return tuple(self._take(request, n))

    def touch(self, request: int, blocks: tuple[int, ...]) -> None:
        self._check_request("touch", request)
        blocks = self._check_blocks("touch", blocks)
        self._check_pool_level("touch", request)
        for block in blocks:
            if self.ref[block] == 0 and self.hash[block] is None:
                raise WrongStateError(f"touch(request={request}, block={block}): a free block without a hash")
        self._pin(request, blocks)

    def cache_blocks(self, request: int, blocks: tuple[int, ...], hashes: tuple[int, ...]) -> None:
        self._check_request("cache_blocks", request)
        blocks = self._check_blocks("cache_blocks", blocks)
        hashes = _ints("cache_blocks", "hashes", hashes)
        if len(blocks) != len(hashes) or len(set(blocks)) != len(blocks):
            raise InvalidArgumentError(f"cache_blocks(request={request}): {blocks} and {hashes} must pair "
                                       "distinct blocks with hashes one to one")
        self._check_pool_level("cache_blocks", request)
        for block in blocks:
            if block not in self.held.get(request, ()) or self.hash[block] is not None or block in self.written:
                raise WrongStateError(f"cache_blocks(request={request}, block={block}): the request must hold "
                                      "the block, unhashed and not written at the request level")
        self._set_hashes(blocks, hashes)

    def lookup(self, hashes: tuple[int, ...]) -> tuple[int, ...]:
        found = []
        for value in _ints("lookup", "hashes", hashes):
            if value not in self.carriers:
                break
            found.append(self.carriers[value][0])
        return tuple(found)

    def free(self, request: int, blocks: tuple[int, ...], *, operation: str = "free") -> None:
        self._check_request(operation, request)
        blocks = self._check_blocks(operation, blocks)
        self._check_pool_level(operation, request)
        held = self.held.get(request, [])
        for block in set(blocks):
            if blocks.count(block) > held.count(block):
                raise WrongStateError(f"{operation}(request={request}, block={block}): a double free")
        self._release(request, blocks, readable=operation == "unpin")

    def unpin(self, request: int, blocks: tuple[int, ...]) -> None:
        """As free, but the blocks reaching 0 all go to the tail: their holder still reads them."""
        self.free(request, blocks, operation="unpin")

    def writable(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        blocks = self._check_blocks("writable", blocks)
        return tuple(block for block in dict.fromkeys(blocks) if self.ref[block] == 1 and self.hash[block] is None)

    def evict(self, blocks: tuple[int, ...]) -> tuple[int, ...]:
        blocks = self._check_blocks("evict", blocks)
        dropped = tuple(block for block in dict.fromkeys(blocks) if self.hash[block] is not None)
        for block in dropped:
            self._drop_hash(block)
        return dropped

    def reset(self) -> bool:
        if any(self.ref):
            return False
        self.hash = [None] * self.num_blocks
        self.carriers.clear()
        return True

    def num_free(self) -> int:
        return len(self.queue)

    # Request level ----------------------------------------------------------------------------

    def find_cached_prefix(self, tokens: tuple[int, ...]) -> int:
        return len(self._prefix_hit(_ints("find_cached_prefix", "tokens", tokens))) * BLOCK_SIZE

    def allocate_slots(self, request: int, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        self._check_request("allocate_slots", request)
        tokens = _ints("allocate_slots", "tokens", tokens)
        blocks_needed = -(-len(tokens) // BLOCK_SIZE)
        record = self.requests.get(request)
        if record is None:
            if request in self.held:
                raise WrongStateError(f"allocate_slots(request={request}): the request holds pool-level blocks")
            hit = self._prefix_hit(tokens)
            free_hits = len({block for block in hit if self.ref[block] == 0})
            if blocks_needed - len(hit) > len(self.queue) - free_hits:
                return None
            self._pin(request, hit)
            record = self.requests[request] = _Request(list(hit), (), len(hit))
            record.table += self._take(request, blocks_needed - len(hit))
            first_written = len(hit)
        else:
            if tokens[:len(record.tokens)] != record.tokens:
                raise WrongStateError(f"allocate_slots(request={request}): the tokens do not extend the request's")
            if blocks_needed - len(record.table) > len(self.queue):
                return None
            record.table += self._take(request, blocks_needed - len(record.table))
            first_written = len(record.tokens) // BLOCK_SIZE
        record.tokens = tokens
        self._write(record, first_written)
        return tuple(record.table)

    def free_request(self, request: int) -> None:
        self._check_request("free_request", request)
        if request not in self.requests:
            raise WrongStateError(f"free_request(request={request}): the request has no block table")
        self._release(request, self.requests.pop(request).table[::-1])

    # Views ------------------------------------------------------------------------------------

    def snapshot(self) -> tuple:
        holdings = tuple((request, tuple(sorted(blocks))) for request, blocks in sorted(self.held.items()))
        return tuple(self.queue), tuple(zip(self.ref, self.hash)), holdings

    def tables(self) -> tuple:
        return tuple((request, tuple(record.table)) for request, record in sorted(self.requests.items()))

    def contents(self) -> tuple:
        return tuple((block, parent, tokens) for block, (parent, tokens) in sorted(self.written.items()))

    def cached_tokens(self) -> tuple:
        return tuple((request, BLOCK_SIZE * max((i + 1 for i, block in enumerate(record.table) if self.hash[block] is not None),
                                                default=0))
                     for request, record in sorted(self.requests.items()))

    # Checks -----------------------------------------------------------------------------------

    def _check_request(self, operation: str, request: object) -> None:
        if not _is_int(request):
            raise InvalidArgumentError(f"{operation}: request must be an int, got {request!r}")

    def _check_blocks(self, operation: str, blocks: object) -> tuple[int, ...]:
        """`blocks` as a tuple of usable block ids (the null block is not one)."""
        if not isinstance(blocks, (tuple, list)):
            raise InvalidArgumentError(f"{operation}: blocks must be a tuple of block ids, got {blocks!r}")
        for block in blocks:
            if not _is_int(block) or not NULL_BLOCK < block < self.num_blocks:
                raise InvalidArgumentError(f"{operation}: block {block!r} is not in 1..{self.num_blocks - 1}")
        return tuple(blocks)

    def _check_pool_level(self, operation: str, request: int) -> None:
        if request in self.requests:
            raise WrongStateError(f"{operation}(request={request}): the request is managed at the request level")

    # Updates (every check done) ---------------------------------------------------------------

    def _take(self, request: int, n: int) -> list[int]:
        """The first n free blocks, ref 1 each, held by `request`; each loses its hash and contents."""
        taken, self.queue = self.queue[:n], self.queue[n:]
        for block in taken:
            if self.hash[block] is not None:
                self._drop_hash(block)
            self.written.pop(block, None)
            self.ref[block] = 1
            self.held.setdefault(request, []).append(block)
        return taken

    def _pin(self, request: int, blocks: tuple[int, ...]) -> None:
        for block in blocks:
            if self.ref[block] == 0:
                self.queue.remove(block)
            self.ref[block] += 1
            self.held.setdefault(request, []).append(block)

    def _release(self, request: int, blocks: tuple[int, ...] | list[int], readable: bool = False) -> None:
        """ref - 1 each; those reaching 0 join the queue: unhashed at the head (unless `readable`),
        hashed at the tail."""
        to_head, to_tail = [], []
        for block in blocks:
            self.held[request].remove(block)
            self.ref[block] -= 1
            if self.ref[block] == 0:
                (to_head if self.hash[block] is None and not readable else to_tail).append(block)
        if not self.held.get(request, True):
            del self.held[request]
        self.queue = to_head + self.queue + to_tail

    def _set_hashes(self, blocks: list[int] | tuple[int, ...], hashes: tuple[int, ...]) -> None:
        for block, value in zip(blocks, hashes):
            self.hash[block] = value
            self.carriers.setdefault(value, []).append(block)

    def _drop_hash(self, block: int) -> None:
        carriers = self.carriers[self.hash[block]]
        carriers.remove(block)
        if not carriers:
            del self.carriers[self.hash[block]]
        self.hash[block] = None

    def _prefix_hit(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """The cached blocks of the full blocks of tokens[:-1] (the last token is never a hit)."""
        return self.lookup(chain_hashes(tokens[:-1], BLOCK_SIZE))

    def _write(self, record: _Request, first: int) -> None:
        """Record the tokens of table[first:], then hash the full blocks not hashed yet."""
        hashes = chain_hashes(record.tokens, BLOCK_SIZE)
        for i in range(first, len(record.table)):
            parent = hashes[i - 1] if i else None
            self.written[record.table[i]] = (parent, record.tokens[i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE])
        if len(hashes) > record.cached:
            self._set_hashes(record.table[record.cached:len(hashes)], hashes[record.cached:])
            record.cached = len(hashes)
