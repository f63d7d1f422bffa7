"""The request level of the block pool spec: a KV cache manager on top of the pool, and the hash.

A request hands over its whole token sequence so far; the manager keeps, per request, its block
table (block i holds tokens[i*block_size:(i+1)*block_size]), its tokens and how many of its blocks
it has cached. Rules (each operation is an action over the pool-level steps of `BlockPoolSpec`):

1. `find_cached_prefix(tokens)` (read-only): the chained hashes of the full blocks of
   tokens[:-1] (the last token is always computed, so a hit never covers it, as vLLM's
   get_computed_blocks), looked up as one prefix; the answer is hit blocks * block_size tokens.
2. `allocate_slots(request, tokens)`, first call for `request`: the cached prefix is touched
   (pinned), then the missing blocks are allocated from the head of the free queue. Free blocks
   in the hit leave the queue, so they count against the free blocks; if too few are free the
   answer is None and nothing changes. Later calls: `tokens` must extend the request's tokens;
   blocks for the new tokens are allocated (None, nothing changed, if too few are free). Tokens
   that add none (a later call's equal to the request's, a first call's empty) answer the table,
   or under no_new_tokens="refused" raise InvalidArgumentError.
   Either way the blocks the request wrote record their tokens (`contents`), every block that is
   now full and not yet cached by the request gets its chained hash, and the answer is the
   request's whole block table. A first call that answers a table admits the request: under
   prefix_caching="on" it is counted, with its tokens and hit tokens, in the call's prefix-cache
   statistics (`prefix_cache_stats()`).
3. `free_request(request)`: the request's table is freed last block first (vLLM's manager frees
   in reverse), so its tail blocks are the first evicted; the request is forgotten (a load under
   way too). Under a sliding window the blocks the window reads no more are freed first (rule 4).
4. Under sliding_window=W (semantics), a request's table names the null block for the blocks the
   window no longer reads: a running request's call frees them first (last first), before it asks
   for new blocks, so they are freed even when it answers None; `free_request` frees those of all
   its tokens first, then the rest; a new request's hit pins only the blocks the window reads, and
   its lookup finds the longest prefix whose last blocks are cached (the window's), not the
   longest cached one.
   Under recurrent_state="align" a request holds state blocks, not KV blocks: spec/blocks/recurrent.py
   states how its table grows, what it frees, what it caches and offers, and what a hit is.
   Under window_group=W a request has a table per group, full attention then a window of W: every
   rule here holds per group, in group order (one free queue, each group's chain of hashes its own),
   and a hit is the window's search within the full group's hit, the full group cut to it (under
   first_group_hit="retained" a load keeps the full group's own longer hit over its loaded tokens).
5. `load_slots(request, tokens, reserve=0)`: a new request whose tokens' KV a connector loads
   asynchronously (disaggregated prefill): admitted as by a first `allocate_slots` (and only if
   `reserve` blocks stay free after it: the scheduler keeps them for other prefills in flight),
   its blocks written, but no block hashed, so no lookup finds a block whose KV has not arrived. `finish_load(request)`: the
   load is done; the request's full blocks are hashed (one stored group), and the request runs on
   with `allocate_slots`, which a loading request may not call (WrongStateError).

A request managed here is not used at the pool level and the reverse (WrongStateError): the
table and the holdings then stay one and the same. A block written here is cached only here.

Hashes: `block_hash(parent, tokens)` is Python's hash of a tuple of ints, which is the same in
every process (unlike the hash of a str); the first block has no parent.
"""

from __future__ import annotations

from typing import Iterable

from cacheproof.spec.arguments import is_int
from cacheproof.spec.blocks.events import announcing
from cacheproof.spec.blocks.partial import NULL_BLOCK
from cacheproof.spec.blocks.recurrent import RecurrentState
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError

BLOCK_SIZE = 2
"""Tokens per block of the request level: small, so short token sequences fill blocks. An
implementation speaking the request level uses the same size."""


def block_hash(parent: int | None, tokens: tuple[int, ...]) -> int:
    """The chained hash of one full block: of its tokens alone for the first block of a sequence,
    of its parent's hash and its tokens otherwise."""
    return hash((tokens,)) if parent is None else hash((parent, tokens))


def group_seed(group: int) -> int | None:
    """The parent of the first block of KV-cache group `group`'s chain: none for the first group, so
    that a request level of one group hashes as before; a group's own int after it (the hash of a
    tuple of ints, the same in every process), so that each group's hashes are its own (vLLM keys
    its hash map by hash and group)."""
    return None if group == 0 else hash((group,))


def chain_hashes(tokens: Iterable[int], block_size: int = BLOCK_SIZE, parent: int | None = None) -> tuple[int, ...]:
    """The chained hashes of the full blocks of `tokens` (a trailing partial block has none);
    `parent` is the hash of the block before the first, None at the start of a sequence."""
    tokens = tuple(tokens)
    hashes = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = block_hash(parent, tokens[start : start + block_size])
        hashes.append(parent)
    return tuple(hashes)


def check_tokens(operation: str, tokens: object) -> tuple[int, ...]:
    """`tokens` as a tuple of ints; InvalidArgumentError naming the culprit otherwise."""
    if not isinstance(tokens, (tuple, list)):
        raise InvalidArgumentError(f"{operation}: tokens must be a tuple of ints, got {tokens!r}")
    for token in tokens:
        if not is_int(token):
            raise InvalidArgumentError(f"{operation}: token {token!r} is not an int")
    return tuple(tokens)


class RequestLevel(RecurrentState):
    """The request-level operations of `BlockPoolSpec` (a mixin over its pool-level steps).

    Attributes (set by `BlockPoolSpec.__init__`):
        block_size: tokens per block.
        _tables: request -> its blocks in token order, one table per group (only requests managed here).
        _tokens: request -> its tokens so far.
        _cached: request -> per group, how many leading places of its table are cached (hit, skipped by
            a window, or hashed here).
        _contents: block -> (parent hash, tokens) written here since the block was last allocated.
        _loading: the requests whose load is under way.
        semantics: the pool's BlockSemantics (free_unknown_request, hit_events, prefix_caching and
            no_new_tokens are read here).
    """

    @announcing
    def find_cached_prefix(self, tokens: tuple[int, ...]) -> int:
        """How many leading tokens of `tokens` are cached (a multiple of block_size, < len(tokens));
        under hit_events="lookup" a hit is re-announced."""
        tokens = check_tokens("find_cached_prefix", tokens)
        hits = self._prefix_hits(tokens)
        self._announce_request_hit(hits, tokens, "lookup")
        return len(hits[0]) * self.block_size

    @announcing
    def allocate_slots(self, request: int, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        """Blocks for all of `tokens`: the request's block table, or None (nothing changes)."""
        self._check_request("allocate_slots", request)
        tokens = check_tokens("allocate_slots", tokens)
        tables = self._tables.get(request)
        if tables is None:
            return self._admit("allocate_slots", request, tokens, cache=True)
        if request in self._loading:
            raise WrongStateError(
                f"allocate_slots(request={request}): the request's KV is still loading; a scheduler "
                "runs it once finish_load says the load is done"
            )
        old = self._tokens[request]
        if tokens[: len(old)] != old:
            raise WrongStateError(
                f"allocate_slots(request={request}): the {len(tokens)} tokens do not extend the "
                f"request's {len(old)} tokens; a request's tokens only grow"
            )
        if len(tokens) == len(old):
            self._refuse_no_new_tokens("allocate_slots", request, tokens)
        self._check_aligned("allocate_slots", request, len(tokens))
        self._drop_stale(request, len(old))
        if sum(self._new_blocks(len(table), len(tokens)) for table in tables) > len(self._queue):
            return None
        self._extend(request, len(tokens))
        self._tokens[request] = tokens
        self._write(request, len(old) // self.block_size)
        return self._table_view(request)

    @announcing
    def load_slots(self, request: int, tokens: tuple[int, ...], *, reserve: int = 0) -> tuple[int, ...] | None:
        """Blocks for all of `tokens`, whose KV a connector loads: a new request's first call, as
        allocate_slots' but hashing no block until finish_load, and admitted only if `reserve` blocks
        stay free after it; the table, or None (nothing changes)."""
        self._check_request("load_slots", request)
        tokens = check_tokens("load_slots", tokens)
        if not is_int(reserve) or reserve < 0:
            raise InvalidArgumentError(f"load_slots(request={request}): reserve must be an int >= 0, got {reserve!r}")
        self._refuse_recurrent_load(request)
        if request in self._tables:
            raise WrongStateError(
                f"load_slots(request={request}): the request has blocks at the request level already; "
                "a load is a new request's first call"
            )
        table = self._admit("load_slots", request, tokens, cache=False, reserve=reserve)
        if table is not None:
            self._loading.add(request)
        return table

    @announcing
    def finish_load(self, request: int) -> None:
        """The connector's load of the request's tokens is done: its full blocks are hashed, as
        allocate_slots would have hashed them (WrongStateError for a request with no load under way)."""
        self._check_request("finish_load", request)
        if request not in self._loading:
            raise WrongStateError(
                f"finish_load(request={request}): the request has no load under way (no load_slots, "
                "or finished or freed already)"
            )
        self._loading.remove(request)
        self._cache_full(request, self._chains(request))

    @announcing
    def free_request(self, request: int) -> None:
        """Free the request's blocks, last block first, and forget the request (a request without
        blocks here: WrongStateError, or nothing under free_unknown_request="noop"). Under a
        sliding window, the blocks it reads no more once all the request's tokens are computed are
        freed first (as a scheduler with a KV connector frees them before it hands the table over),
        then the rest, last first."""
        self._check_request("free_request", request)
        if request not in self._tables and self.semantics.free_unknown_request == "noop":
            return
        if request not in self._tables:
            raise WrongStateError(
                f"free_request(request={request}): the request has no blocks at the request level "
                "(never allocated, or already freed)"
            )
        self._drop_stale(request, len(self._tokens[request]))
        tables = self._tables.pop(request)
        del self._tokens[request], self._cached[request]
        self._loading.discard(request)
        for table in tables:
            self._release(request, [block for block in table if block != NULL_BLOCK][::-1])

    # Views ------------------------------------------------------------------------------

    def tables(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """(request, its blocks in token order; under two groups, its groups' tables one after the
        other), by request: the requests managed here."""
        return tuple((request, self._table_view(request)) for request in sorted(self._tables))

    def cached_tokens(self) -> tuple[tuple[int, int], ...]:
        """(request, the tokens its block table covers up to its last block that carries a hash, 0 if
        none; the fewest of its groups'), by request: the requests managed here, and the cached
        tokens a scheduler reports."""
        size = self.block_size
        return tuple((request, min(size * max((i + 1 for i, block in enumerate(table) if self._hash[block] is not None),
                                              default=0) for table in tables))
                     for request, tables in sorted(self._tables.items()))

    def loading(self) -> tuple[int, ...]:
        """The requests whose load is under way (load_slots, no finish_load yet), sorted."""
        return tuple(sorted(self._loading))

    def tokens_of(self, request: int) -> tuple[int, ...]:
        """The tokens `request` has handed over so far; () for a request not managed here."""
        return self._tokens.get(request, ())

    def contents(self) -> tuple[tuple[int, int | None, tuple[int, ...]], ...]:
        """(block, parent hash, tokens) written here since the block was last allocated, by block:
        what an implementation's storage must read back (B5 compares full hashed ones)."""
        return tuple((block, parent, tokens) for block, (parent, tokens) in sorted(self._contents.items()))

    # Internals ----------------------------------------------------------------------------

    def _admit(self, operation: str, request: int, tokens: tuple[int, ...], cache: bool,
               reserve: int = 0) -> tuple[int, ...] | None:
        """A new request's first call: its cached prefix pinned, the missing blocks allocated, the
        tokens recorded and (when `cache`) its full blocks hashed, the request counted in the call's
        statistics; None, nothing changed, if fewer than `reserve` blocks would stay free."""
        if request in self._held:
            raise WrongStateError(
                f"{operation}(request={request}): the request holds blocks at the pool level "
                f"{tuple(self._held[request])}; a request is managed at one level only"
            )
        if not tokens:
            self._refuse_no_new_tokens(operation, request, tokens)
        hits = self._prefix_hits(tokens)
        self._announce_request_hit(hits, tokens, "lookup")
        computed = len(hits[0]) * self.block_size if cache else len(tokens)
        adopted = []
        for window, hit in zip(self._windows(), self._adopted_hits(hits, tokens, cache)):
            skipped = self._skipped_blocks(computed, window)
            adopted.append([NULL_BLOCK] * skipped + list(hit[skipped:]))
        kept = [block for table in adopted for block in table if block != NULL_BLOCK]
        need = sum(self._new_blocks(len(table), len(tokens)) for table in adopted)
        if need + reserve > len(self._queue) - len({b for b in kept if self._ref[b] == 0}):
            return None
        self._pin(request, kept)
        self._announce_request_hit(hits, tokens, "stored")
        self._tables[request] = adopted
        self._cached[request] = [len(table) for table in adopted]
        self._extend(request, len(tokens))
        self._tokens[request] = tokens
        self._write(request, len(hits[0]), cache)
        if self.semantics.prefix_caching == "on":
            self._events.admit(len(tokens), len(hits[0]) * self.block_size)
        return self._table_view(request)

    def _refuse_no_new_tokens(self, operation: str, request: int, tokens: tuple[int, ...]) -> None:
        """Under no_new_tokens="refused", InvalidArgumentError for a call whose `tokens` add none."""
        if self.semantics.no_new_tokens == "refused":
            raise InvalidArgumentError(
                f"{operation}(request={request}): the {len(tokens)} tokens are the request's so far; "
                "a call must hand over at least one new token (no_new_tokens=\"refused\")"
            )

    def _blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _new_blocks(self, places: int, num_tokens: int) -> int:
        """The blocks a table of `places` places takes to cover `num_tokens` tokens: one per new
        place, or under a recurrent state at most one (spec/blocks/recurrent.py, rule 1)."""
        if self._recurrent():
            return self._state_blocks(places, num_tokens)
        return self._blocks_for(num_tokens) - places

    def _extend(self, request: int, num_tokens: int) -> None:
        """The request's tables grown to cover `num_tokens` tokens, group by group, their new blocks
        from the queue's head."""
        if self._recurrent():
            self._grow_state(request, num_tokens)
            return
        for table in self._tables[request]:
            table.extend(self._take(request, self._blocks_for(num_tokens) - len(table)))

    def _windows(self) -> tuple[int, ...]:
        """Each group's sliding window in tokens, group order (0: full attention, or the recurrent layer)."""
        first = self.semantics.sliding_window
        return (first, self.semantics.window_group) if self.semantics.window_group else (first,)

    def _table_view(self, request: int) -> tuple[int, ...]:
        """The request's groups' tables one after the other: its table for one group."""
        return tuple(block for table in self._tables[request] for block in table)

    def _skipped_blocks(self, computed: int, window: int) -> int:
        """The leading blocks a group's layer reads no more once `computed` tokens are computed:
        those wholly before token computed - W + 1 under a sliding window of W, before token
        computed - 1 under a recurrent state (only the last token's state is read), none under
        full attention."""
        if self._recurrent():
            return max(0, computed - 1) // self.block_size
        return max(0, computed - window + 1) // self.block_size if window else 0

    def _drop_stale(self, request: int, computed: int) -> None:
        """Free the request's blocks its groups' layers read no more once `computed` tokens are
        computed, group by group, last first, null places passed over; the null block takes their
        places."""
        for window, table in zip(self._windows(), self._tables[request]):
            stale = range(min(self._skipped_blocks(computed, window), len(table)) - 1, -1, -1)
            freed = [table[place] for place in stale if table[place] != NULL_BLOCK]
            for place in stale:
                table[place] = NULL_BLOCK
            self._release(request, freed)

    def _prefix_hits(self, tokens: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """Each group's blocks of the cached prefix of the full blocks of tokens[:-1], all of one
        length (none under prefix_caching="off"): the first group's `_prefix_hit` of its chain, and
        a second group's within its length, the first cut to the second's."""
        if self.semantics.prefix_caching == "off":
            return ((),) * len(self._windows())
        windows = self._windows()
        hits = [self._first_group_hit(tokens)]
        for group, window in enumerate(windows[1:], start=1):
            hit = self._prefix_hit(chain_hashes(tokens[:-1], self.block_size, group_seed(group))[: len(hits[0])], window)
            hits = [first[: len(hit)] for first in hits] + [hit]
        return tuple(hits)

    def _adopted_hits(self, hits: tuple[tuple[int, ...], ...], tokens: tuple[int, ...],
                      cache: bool) -> tuple[tuple[int, ...], ...]:
        """The hits a new request's allocation adopts: `hits`, or under first_group_hit="retained" for
        a load (not `cache`) the first group's own cached prefix of `tokens` in its place, which
        reaches at least as far (the loaded tokens are not computed, so nothing cuts it)."""
        if cache or self.semantics.first_group_hit == "cut" or len(hits) == 1:
            return hits
        return (self._first_group_hit(tokens), *hits[1:])

    def _first_group_hit(self, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """The first group's own blocks of the cached prefix of the full blocks of tokens[:-1], before
        any other group cuts it."""
        return self._prefix_hit(chain_hashes(tokens[:-1], self.block_size, group_seed(0)), self._windows()[0])

    def _prefix_hit(self, hashes: tuple[int, ...], window: int) -> tuple[int, ...]:
        """The blocks of a group's cached prefix of the chain `hashes`: the longest cached one, or
        under a sliding window of W the longest whose last ceil((W - 1) / B) blocks are cached, the
        null block before them, and failing any, the cached blocks from the start; under a
        recurrent state the longest whose last block is cached, that block alone after the null
        block."""
        if not window and not self._recurrent():
            return self._longest_prefix(hashes)
        reads = 1 if self._recurrent() else -(-(window - 1) // self.block_size)
        run = 0
        for place in range(len(hashes) - 1, -1, -1):
            run = run + 1 if self._map.get(hashes[place]) else 0
            if run >= reads:
                return (NULL_BLOCK,) * place + tuple(self._map[value][0] for value in hashes[place : place + reads])
        return tuple(self._map[value][0] for value in hashes[:run])

    def _announce_request_hit(self, hits: tuple[tuple[int, ...], ...], tokens: tuple[int, ...], moment: str) -> None:
        """The `hits` a request's `tokens` found (one per group), each with the tokens its blocks
        hold, re-announced group by group at `moment` when hit_events names it: "lookup" as the
        lookup finds it, "stored" once an allocation pins it (an empty hit announces nothing)."""
        if self.semantics.hit_events == moment:
            for hit in hits:
                self._announce_hit(hit, tokens[: len(hit) * self.block_size])

    def _write(self, request: int, first: int, cache: bool = True) -> None:
        """Record the tokens of each group's table[first:] (a partial last block too), each after its
        parent hash in the group's chain, then (when `cache`) hash the full blocks not cached yet."""
        tokens, size, chains = self._tokens[request], self.block_size, self._chains(request)
        for group, table in enumerate(self._tables[request]):
            parents = (group_seed(group), *chains[group])
            for i in range(first, len(table)):
                if table[i] != NULL_BLOCK:
                    self._contents[table[i]] = (parents[i], tokens[i * size : (i + 1) * size])
        if cache:
            self._cache_full(request, chains)

    def _chains(self, request: int) -> tuple[tuple[int, ...], ...]:
        """The chained hashes of the request's full blocks, one chain per group."""
        tokens = self._tokens[request]
        return tuple(chain_hashes(tokens, self.block_size, group_seed(group)) for group in range(len(self._windows())))

    def _cache_full(self, request: int, chains: tuple[tuple[int, ...], ...]) -> None:
        """Hash the request's full blocks not cached yet (null places skipped), group by group, each
        with its chain in `chains` (none under prefix_caching="off"): one stored group per group, of
        the tokens of all the places past the group's cached ones, after the hash of the last of
        those; under a recurrent state each block hashed is offered."""
        tokens, size, counts = self._tokens[request], self.block_size, self._cached[request]
        full = len(tokens) // size
        if self.semantics.prefix_caching != "on":
            return
        for group, (table, cached, hashes) in enumerate(zip(self._tables[request], counts, chains)):
            if full <= cached:
                continue
            places = [place for place in range(cached, full) if table[place] != NULL_BLOCK]
            self._set_hashes([table[place] for place in places], [hashes[place] for place in places],
                             [place + 1 for place in places], hashes[cached - 1] if cached else group_seed(group),
                             tokens[cached * size : full * size])
            self._offer(request, table, places)
            counts[group] = full
