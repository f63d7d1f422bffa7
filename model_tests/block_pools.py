"""Block pools speaking the block contract (docs/block-pool-contract.md), in plain Python.

`ListBlockPool` is a correct pool written apart from the spec, on other data structures: the free
queue is an OrderedDict with a separate free counter, ref counts and holdings are Counters, the hash
map is a dict of insertion-ordered dicts. The other classes each carry one bug modelled on a real
one (the class docstring names it); `differential_walk` (model_tests/block_walk.py) must catch each.
"""

from __future__ import annotations

import functools
import os
from collections import Counter, OrderedDict

from cacheproof.spec.blocks.manager import BLOCK_SIZE, chain_hashes
from cacheproof.spec.blocks.semantics import BLOCK_PROFILES
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError

CONTRACT_OPERATIONS = BLOCK_PROFILES["contract"].operations
"""The operations of the contract profile, which every pool here implements."""


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ListBlockPool:
    """A correct block pool (pool and request level)."""

    def __init__(self, num_blocks: int, block_size: int = BLOCK_SIZE) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(1, num_blocks))
        self._num_free = num_blocks - 1
        self._refs: Counter[int] = Counter()
        self._block_hash: dict[int, int] = {}
        self._by_hash: dict[int, dict[int, None]] = {}
        self._holdings: dict[int, Counter[int]] = {}
        self._requests: dict[int, list] = {}  # request -> [table, tokens, number of cached blocks]
        self._written: dict[int, tuple] = {}  # block -> (parent hash, tokens)
        self._watched: dict[int, None] = {}  # unpinned blocks whose readers are not yet told of a reuse

    # argument checks, all before any state check
    def _req(self, request):
        if not _int(request):
            raise InvalidArgumentError(f"request {request!r} is not an int")

    def _ids(self, blocks):
        if not isinstance(blocks, (tuple, list)):
            raise InvalidArgumentError(f"blocks {blocks!r} is not a tuple")
        for b in blocks:
            if not _int(b) or b <= 0 or b >= self.num_blocks:
                raise InvalidArgumentError(f"block {b!r} is not a usable block id")
        return tuple(blocks)

    def _hashes(self, hashes):
        if not isinstance(hashes, (tuple, list)) or not all(_int(h) for h in hashes):
            raise InvalidArgumentError(f"hashes {hashes!r} are not a tuple of ints")
        return tuple(hashes)

    def _tokens(self, tokens):
        if not isinstance(tokens, (tuple, list)) or not all(_int(t) for t in tokens):
            raise InvalidArgumentError(f"tokens {tokens!r} are not a tuple of ints")
        return tuple(tokens)

    def _pool_level(self, request):
        if request in self._requests:
            raise WrongStateError(f"request {request} is managed at the request level")

    # pool level
    def allocate(self, request, n):
        self._req(request)
        if not _int(n) or n < 0:
            raise InvalidArgumentError(f"n={n!r}")
        self._pool_level(request)
        if n > self._num_free:
            raise CapacityError(f"{n} > {self._num_free} free")
        return self._get(request, n)

    def _get(self, request, n):
        got = []
        for _ in range(n):
            block, _ = self._free.popitem(last=False)
            if block in self._watched:
                self._reuse(block)
            self._forget_hash(block)
            self._written.pop(block, None)
            self._refs[block] = 1
            got.append(block)
        self._num_free -= n
        if got:
            self._holdings.setdefault(request, Counter()).update(got)
        return tuple(got)

    def _forget_hash(self, block):
        if block in self._block_hash:
            value = self._block_hash.pop(block)
            del self._by_hash[value][block]
            if not self._by_hash[value]:
                del self._by_hash[value]

    def touch(self, request, blocks):
        self._req(request)
        ids = self._ids(blocks)
        self._pool_level(request)
        for b in ids:
            if not self._refs[b] and b not in self._block_hash:
                raise WrongStateError(f"block {b} is free and unhashed")
        self._hit(request, ids)

    def _hit(self, request, ids):
        for b in ids:
            if not self._refs[b]:
                del self._free[b]
                self._num_free -= 1
            self._refs[b] += 1
            self._holdings.setdefault(request, Counter())[b] += 1

    def cache_blocks(self, request, blocks, hashes):
        self._req(request)
        ids = self._ids(blocks)
        values = self._hashes(hashes)
        if len(ids) != len(values) or len(set(ids)) != len(ids):
            raise InvalidArgumentError("length mismatch or repeated block")
        self._pool_level(request)
        held = self._holdings.get(request, Counter())
        for b in ids:
            if not held[b] or b in self._block_hash or b in self._written:
                raise WrongStateError(f"block {b} cannot be cached by request {request}")
        self._add_hashes(ids, values)

    def _add_hashes(self, ids, values):
        for b, h in zip(ids, values):
            self._block_hash[b] = h
            self._by_hash.setdefault(h, {})[b] = None

    def lookup(self, hashes):
        out = []
        for h in self._hashes(hashes):
            if h not in self._by_hash:
                break
            out.append(next(iter(self._by_hash[h])))
        return tuple(out)

    def free(self, request, blocks):
        self._put_back(request, self._held_ids(request, blocks))

    def _held_ids(self, request, blocks):
        """The ids of `blocks`, each held by the pool-level `request` as often as given."""
        self._req(request)
        ids = self._ids(blocks)
        self._pool_level(request)
        if Counter(ids) - self._holdings.get(request, Counter()):
            raise WrongStateError(f"request {request} does not hold {ids}")
        return ids

    def _put_back(self, request, ids):
        held = self._holdings.get(request, Counter())
        to_head = []
        for b in ids:
            held[b] -= 1
            self._refs[b] -= 1
            if not self._refs[b]:
                del self._refs[b]
                self._num_free += 1
                if b in self._block_hash:
                    self._free[b] = None
                else:
                    to_head.append(b)
        for b in reversed(to_head):
            self._free[b] = None
            self._free.move_to_end(b, last=False)
        if not +held:
            self._holdings.pop(request, None)

    def unpin(self, request, blocks):
        ids = self._held_ids(request, blocks)
        held = self._holdings.get(request, Counter())
        for b in ids:  # every block reaching 0 goes to the tail, hashed or not
            held[b] -= 1
            self._refs[b] -= 1
            self._watched[b] = None
            if not self._refs[b]:
                del self._refs[b]
                self._num_free += 1
                self._free[b] = None
        if not +held:
            self._holdings.pop(request, None)

    def _reuse(self, block):
        """A watched block is reused: its reader is told (EventfulListPool announces it)."""
        del self._watched[block]

    def writable(self, blocks):
        ids = self._ids(blocks)
        return tuple(b for b in dict.fromkeys(ids) if self._refs[b] == 1 and b not in self._block_hash)

    def evict(self, blocks):
        ids = self._ids(blocks)
        out = tuple(b for b in dict.fromkeys(ids) if b in self._block_hash)
        for b in out:
            self._forget_hash(b)
        return out

    def reset(self):
        if +self._refs:
            return False
        self._block_hash.clear()
        self._by_hash.clear()
        for b in list(self._watched):
            self._reuse(b)
        return True

    def num_free(self):
        return self._num_free

    # request level
    def _hit_prefix(self, tokens):
        return self.lookup(chain_hashes(tokens[:-1], self.block_size))

    def find_cached_prefix(self, tokens):
        return len(self._hit_prefix(self._tokens(tokens))) * self.block_size

    def allocate_slots(self, request, tokens):
        self._req(request)
        tokens = self._tokens(tokens)
        size = self.block_size
        total = (len(tokens) + size - 1) // size
        record = self._requests.get(request)
        if record is None:
            if request in self._holdings:
                raise WrongStateError(f"request {request} holds blocks at the pool level")
            hit = self._hit_prefix(tokens)
            if total - len(hit) > self._num_free - sum(1 for b in set(hit) if not self._refs[b]):
                return None
            self._hit(request, hit)
            record = self._requests[request] = [list(hit), (), len(hit)]
            start = len(hit)
        else:
            if tokens[: len(record[1])] != record[1]:
                raise WrongStateError("tokens do not extend the request's")
            if total - len(record[0]) > self._num_free:
                return None
            start = len(record[1]) // size
        record[0].extend(self._get(request, total - len(record[0])))
        record[1] = tokens
        hashes = chain_hashes(tokens, size)
        for i in range(start, len(record[0])):
            self._written[record[0][i]] = (hashes[i - 1] if i else None, tokens[i * size : (i + 1) * size])
        self._add_hashes(record[0][record[2] : len(hashes)], hashes[record[2] :])
        record[2] = max(record[2], len(hashes))
        return tuple(record[0])

    def free_request(self, request):
        self._req(request)
        if request not in self._requests:
            raise WrongStateError(f"request {request} is not managed at the request level")
        table = self._requests.pop(request)[0]
        self._put_back(request, self._free_order(table))

    def _free_order(self, table):
        return tuple(reversed(table))

    # views
    def snapshot(self):
        blocks = tuple((self._refs[b], self._block_hash.get(b)) for b in range(self.num_blocks))
        holdings = tuple(
            (r, tuple(sorted(held.elements()))) for r, held in sorted(self._holdings.items()) if +held
        )
        return tuple(self._free), blocks, holdings

    def hash_map(self):
        return tuple((h, tuple(bs)) for h, bs in sorted(self._by_hash.items()))

    def tables(self):
        return tuple((r, tuple(rec[0])) for r, rec in sorted(self._requests.items()))

    def contents(self):
        return tuple((b, p, t) for b, (p, t) in sorted(self._written.items()))

    def cached_tokens(self):
        return tuple((r, self.block_size * max((i + 1 for i, b in enumerate(rec[0]) if b in self._block_hash), default=0))
                     for r, rec in sorted(self._requests.items()))


class DoubleFreePool(ListBlockPool):
    """vLLM #42571 / vLLM's unchecked free_blocks: a free of a block the request does not hold is
    accepted; the count goes to 0 and then -1, and each free at <= 0 counts the block free again,
    so the free count rises above the unique free blocks."""

    def free(self, request, blocks):
        self._req(request)
        ids = self._ids(blocks)
        held = self._holdings.setdefault(request, Counter())
        for b in ids:
            held[b] -= 1
            self._refs[b] -= 1
            if self._refs[b] <= 0:
                self._num_free += 1
                self._free[b] = None


class HeadFreePool(ListBlockPool):
    """A hashed block reaching ref 0 goes to the head of the free queue instead of the tail, so
    the prefix cache is evicted first (the order vLLM's free_blocks keeps for unhashed blocks)."""

    def _put_back(self, request, ids):
        super()._put_back(request, ids)
        for b in reversed(ids):
            if b in self._free and b in self._block_hash:
                self._free.move_to_end(b, last=False)


class StaleHashMapPool(ListBlockPool):
    """Lazy eviction that forgets the hash map (as vLLM #4761's evicted block left in the cached
    tracking): allocate clears a reused block's hash but leaves its map entry, so lookup still
    answers the block, now holding another request's KV."""

    def _forget_hash(self, block):
        self._block_hash.pop(block, None)


class GapLookupPool(ListBlockPool):
    """lookup skips a missing hash and goes on, answering a non-contiguous prefix (a hit past a
    miss attaches KV computed after another prefix)."""

    def lookup(self, hashes):
        return tuple(next(iter(self._by_hash[h])) for h in self._hashes(hashes) if h in self._by_hash)


class TouchLeavesQueuedPool(ListBlockPool):
    """vLLM #37076: a prefix hit on a cached ref-0 block pins it but leaves it in the free queue,
    so a later allocation hands the pinned block to another request."""

    def _hit(self, request, ids):
        for b in ids:
            self._refs[b] += 1
            self._holdings.setdefault(request, Counter())[b] += 1


class ResetInUsePool(ListBlockPool):
    """reset drops every hash even while blocks are in use (vLLM's reset_prefix_cache refuses),
    so running requests' cached blocks vanish from the prefix cache under them."""

    def reset(self):
        self._block_hash.clear()
        self._by_hash.clear()
        return True


class CounterDriftPool(ListBlockPool):
    """The free counter drifts from the queue: a prefix hit takes a free block out of the queue
    without counting it, so num_free over-reports and allocate trusts a count the queue lacks."""

    def _hit(self, request, ids):
        before = self._num_free
        super()._hit(request, ids)
        self._num_free = before


class ForwardFreeRequestPool(ListBlockPool):
    """free_request frees the request's blocks first block first, not last block first, so a
    prefix's parent blocks are evicted before their children (the order #48489 lost)."""

    def _free_order(self, table):
        return tuple(table)


class LastInsertedLookupPool(ListBlockPool):
    """lookup answers the last inserted of several blocks carrying a hash, not the first still
    present (vLLM's get_cached_block answers the first)."""

    def lookup(self, hashes):
        out = []
        for h in self._hashes(hashes):
            if h not in self._by_hash:
                break
            out.append(list(self._by_hash[h])[-1])
        return tuple(out)


class ForeignFreePool(ListBlockPool):
    """free checks the block's ref count, not the request's holdings: a request frees a block that
    another request holds, and that request's holding is the one taken (a pool that counts
    references per block but keeps no owner per holding). Two calls show it: `allocate(1, 1)`,
    then `free(2, (1,))`, which the contract rejects (WrongStateError) and this pool accepts."""

    def free(self, request, blocks):
        self._req(request)
        ids = self._ids(blocks)
        self._pool_level(request)
        if Counter(ids) - +Counter({block: self._refs[block] for block in ids}):
            raise WrongStateError(f"blocks {ids} are freed more times than they are in use")
        self._move_holdings(request, ids)
        self._put_back(request, ids)

    def _move_holdings(self, request, ids):
        """Give `request` the holdings of `ids` that `_put_back` takes off it: each from its holder."""
        for block in ids:
            holder = request if self._holdings.get(request, Counter())[block] else next(
                owner for owner, held in self._holdings.items() if held[block] > 0)
            self._holdings[holder][block] -= 1
            self._holdings.setdefault(request, Counter())[block] += 1  # _put_back takes it off again



class OwnerBlindFreePool(ForeignFreePool):
    """free checks the block's ref count, not the request's holdings, and takes the holding off the
    freeing request only: after `allocate(2, 1)` (block 1 to request 2), `free(1, (1,))` drops block
    1 to ref 0 and queues it while request 2 still holds it. The contract rejects that free
    (WrongStateError); the pool's own snapshot breaks B7 (block 1 has ref 0 while request 2 holds it)."""

    def _move_holdings(self, request, ids):
        held = self._holdings.setdefault(request, Counter())
        held.update(Counter(ids) - held)  # what _put_back takes off the freeing request, held or not; the holder keeps its own


class HeadFreeOwnerBlindPool(OwnerBlindFreePool, HeadFreePool):
    """Two bugs: HeadFreePool's queue order, which leaves the pool in a state breaking no invariant,
    and OwnerBlindFreePool's free, which leaves it breaking B7; `check --max-divergences` reports
    both, the one breaking B7 first."""


class ListSnapshotPool(ListBlockPool):
    """A correct pool whose snapshot() answers lists and a dict of holdings where the contract's
    shape is tuples: a usage mistake in how it reports its state, which `check` reports once, as a
    usage problem naming the expected shape, not as divergences."""

    def snapshot(self):
        queue, blocks, holdings = super().snapshot()
        return [list(queue), [list(block) for block in blocks], dict(holdings)]


BROKEN_POOLS = (
    DoubleFreePool,
    HeadFreePool,
    StaleHashMapPool,
    GapLookupPool,
    TouchLeavesQueuedPool,
    ResetInUsePool,
    CounterDriftPool,
    ForwardFreeRequestPool,
    LastInsertedLookupPool,
)
"""Every broken pool, one bug each."""


class EventfulListPool(ListBlockPool):
    """A correct pool that also announces KV cache events (`events()`, spec/blocks/events.py),
    recorded where its own steps change a hash: a stored group's parent is the written parent of
    its first block and its tokens the blocks' written tokens (none at the pool level), a lost hash
    is removed, reset clears; and the
    unpinned blocks a call reused (`reused()`), recorded where a watched block's reader is told."""

    def __init__(self, num_blocks: int, block_size: int = BLOCK_SIZE) -> None:
        super().__init__(num_blocks, block_size)
        self._depth = 0  # public calls in progress: a call inside a call (allocate_slots' lookup) keeps the events
        self._fresh_events()

    def _fresh_events(self):
        self._stored, self._removed, self._cleared, self._told = [], [], False, []

    def _reuse(self, block):
        super()._reuse(block)
        self._told.append(block)

    def _add_hashes(self, ids, values):
        super()._add_hashes(ids, values)
        if ids:
            tokens = tuple(token for block in ids for token in self._written.get(block, (None, ()))[1])
            self._stored.append((self._written.get(ids[0], (None,))[0], tuple(values), tokens))

    def _forget_hash(self, block):
        if block in self._block_hash:
            self._removed.append(self._block_hash[block])
        super()._forget_hash(block)

    def reset(self):
        done = super().reset()
        self._cleared = done
        return done

    def events(self):
        return tuple(self._stored), tuple(sorted(self._removed)), self._cleared

    def reused(self):
        return tuple(sorted(self._told))


def _one_call(operation):
    """`operation` of an EventfulListPool: its events are those of this call alone (none if it raises)."""
    @functools.wraps(operation)
    def call(self, *args, **kwargs):
        if not self._depth:
            self._fresh_events()
        self._depth += 1
        try:
            return operation(self, *args, **kwargs)
        except Exception:
            if self._depth == 1:
                self._fresh_events()
            raise
        finally:
            self._depth -= 1
    return call


for _name in CONTRACT_OPERATIONS:
    setattr(EventfulListPool, _name, _one_call(getattr(EventfulListPool, _name)))


class SilentLazyEvictionPool(EventfulListPool):
    """Lazy eviction announces nothing: allocate reuses a cached free block, dropping its hash, but
    emits no removal, so a router's copy of the hash map keeps routing that prefix here after its
    KV is overwritten. The state is right; only the events are wrong."""

    def _get(self, request, n):
        removed = list(self._removed)
        got = super()._get(request, n)
        self._removed = removed
        return got


class WrongParentPool(EventfulListPool):
    """A stored group names its own last hash as its parent (vLLM's `num_cached_blocks == 0` test
    inverted, mutant #93 of block_pool.py): a router chains the new blocks after the wrong prefix."""

    def _add_hashes(self, ids, values):
        super()._add_hashes(ids, values)
        if ids:
            self._stored[-1] = (values[-1], *self._stored[-1][1:])


class ShortTokensPool(EventfulListPool):
    """A stored group's tokens start one token late (vLLM's `start_token_idx = 1` in
    `emit_cached_block_events`, mutant #154 of block_pool.py): a router that hashes the tokens
    itself indexes the blocks under another prefix."""

    def _add_hashes(self, ids, values):
        super()._add_hashes(ids, values)
        if ids:
            parent, hashes, tokens = self._stored[-1]
            self._stored[-1] = (parent, hashes, tokens[1:])


EVENT_BROKEN_POOLS = (SilentLazyEvictionPool, WrongParentPool, ShortTokensPool)
"""Pools whose state is right and whose KV cache events are wrong, one bug each (only the events
view can find them)."""


class ExitsOnDoubleFreePool(ListBlockPool):
    """A pool whose native free path aborts the process on a block it does not hold (a C++
    engine's assert): only `--isolate` can report it, as a crash at that call."""

    def free(self, request, blocks):
        held = self._holdings.get(request, Counter())
        if any(held[block] == 0 for block in blocks if isinstance(block, int)):
            os._exit(134)
        return super().free(request, blocks)


class FloatCountPool(ListBlockPool):
    """num_free answers a float (3.0 where the contract's int is 3): equal under ==, but not the
    int the contract's result is, so a caller indexing with it fails."""

    def num_free(self):
        return float(self._num_free)
