"""The announcements of one call: the KV cache events, what a block pool tells a router about its
prefix cache, and the blocks it reused under a reader.

A router that places requests by prefix (vLLM's `enable_kv_cache_events`) keeps a copy of the
pool's hash map from the pool's events, so the events must say exactly how the call changed it:

- stored: one (parent hash or None, hashes, tokens) per group of blocks that gained a hash together,
  the hashes in the order the blocks were given (a chain: each the parent of the next); the parent
  is the hash of the block before the first in the request's token order, None for the first block
  of a sequence and for the pool level's `cache_blocks`, whose hashes carry no chain. The tokens
  are those the group's blocks hold, in token order (what a router hashes itself to index the
  prefix): at the request level the request's tokens of those blocks, at the pool level none (its
  blocks hold no tokens). They are all a group says of what its blocks hold: the contract's
  requests have no extra keys and no lookahead tokens, so a pool that names some differs. A group
  that names no hash (every block given was the null block) announces nothing and is no event.
  `cache_partial` stores its key alone, after the hash before it in the chain.
- removed: every hash a block lost, once per block that carried it, as a multiset (sorted: the
  order of removals within one call tells a router nothing).
- cleared: whether every hash was dropped at once (`reset`); that one event replaces the removals.

Besides the KV cache events, a call announces which blocks it reused under a reader (`reused()`):
a block released with `unpin` stays readable by whoever unpinned it until the pool hands it out
again (`allocate`) or drops every hash (`reset`); that call tells the reader to stop, once. The
view is the blocks told, sorted (the order within one call tells a reader nothing).

A call also announces the prefix-cache statistics a scheduler reads once per step
(`prefix_cache_stats()`, vLLM's `PrefixCacheStats`): (requests, queries, hits, reset), the requests
the call admitted at the request level after a prefix-cache lookup (a first `allocate_slots` or a
`load_slots` that answers a table; none under prefix_caching="off", where no lookup runs), their tokens, their
prefix-hit tokens, and whether the call dropped every hash (a `reset` that answered True). A
probe (`find_cached_prefix`) admits nothing, so it counts nothing: a lookup is counted once its
request is admitted.

Under a recurrent state (spec/blocks/recurrent.py) a call also offers a KV connector each state it
cached at a block boundary (`boundary_states()`, vLLM's `take_boundary_state_offloads`): (request,
block, boundary tokens), in the order cached.

`BlockSemantics.hit_events` says whether a prefix hit also re-announces the reused blocks as
stored (vLLM's `kv_cache_report_mode="full"`). The view `events()` is the events of the last call,
read after every call; a call that raises announces nothing (B8).
"""

from __future__ import annotations

from typing import Iterable

from cacheproof.spec.announcing import announcing_calls

Events = tuple[tuple[tuple[int | None, tuple[int, ...], tuple[int, ...]], ...], tuple[int, ...], bool]
"""The `events()` view: (stored, removed, cleared) as the module docstring defines them."""

PrefixCacheStats = tuple[int, int, int, bool]
"""The `prefix_cache_stats()` view: (requests, queries, hits, reset) as the module docstring defines them."""

BoundaryStates = tuple[tuple[int, int, int], ...]
"""The `boundary_states()` view: (request, block, boundary tokens) per offer, as the module docstring defines them."""

class CallEvents:
    """The events of one call, recorded as its steps change hashes."""

    __slots__ = ("_stored", "_removed", "_cleared", "_reused", "_admitted", "_offered")

    def __init__(self) -> None:
        self._stored: list[tuple[int | None, tuple[int, ...], tuple[int, ...]]] = []
        self._removed: list[int] = []
        self._cleared = False
        self._reused: list[int] = []
        self._admitted: list[tuple[int, int]] = []
        self._offered: list[tuple[int, int, int]] = []

    def store(self, parent: int | None, hashes: Iterable[int], tokens: Iterable[int] = ()) -> None:
        """Blocks holding `tokens` gained `hashes` together, the first after `parent`; none: no event."""
        hashes = tuple(hashes)
        if hashes:
            self._stored.append((parent, hashes, tuple(tokens)))

    def remove(self, value: int) -> None:
        """One block lost `value`."""
        self._removed.append(value)

    def clear(self) -> None:
        """Every hash was dropped at once."""
        self._cleared = True

    def reuse(self, block: int) -> None:
        """The reader of unpinned `block` is told that the pool reused it."""
        self._reused.append(block)

    def admit(self, queries: int, hits: int) -> None:
        """A request of `queries` tokens, `hits` of them a prefix hit, was admitted after a lookup."""
        self._admitted.append((queries, hits))

    def offer(self, request: int, block: int, boundary: int) -> None:
        """`block` holds `request`'s state at `boundary` tokens, offered to a KV connector."""
        self._offered.append((request, block, boundary))

    def view(self) -> Events:
        return tuple(self._stored), tuple(sorted(self._removed)), self._cleared

    def reused_view(self) -> tuple[int, ...]:
        """The blocks reused under a reader in this call, sorted."""
        return tuple(sorted(self._reused))

    def stats_view(self) -> PrefixCacheStats:
        """(requests admitted after a lookup, their tokens, their hit tokens, whether every hash was dropped)."""
        return (len(self._admitted), sum(q for q, _ in self._admitted), sum(h for _, h in self._admitted),
                self._cleared)

    def offers_view(self) -> BoundaryStates:
        """The states offered in this call, in order."""
        return tuple(self._offered)


announcing = announcing_calls(CallEvents)
"""A block spec operation whose call starts a fresh `CallEvents` (`self._events`); when it raises,
the events are dropped with it (spec/announcing.py)."""
