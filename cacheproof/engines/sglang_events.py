"""SGLang's KV cache events (`BlockStored`, `BlockRemoved`, `AllBlocksCleared`, sglang/srt/disaggregation/
kv_events.py) in the radix contract's terms (spec/radix/events.py): each page named by its path.

SGLang names a page by a 64-bit hash: `hash_str_to_int64` of the page's entry in the chain
`compute_node_event_hash_values` computes for its node (what `KVCacheEventRecorder.record_store`
publishes: for a key with no extra key or salt, the chained hash of the path's pages; an extra key
that names no LoRA adapter leaves that chain as it is; a salt seeds it), and with no LoRA names
registered SGLang adds no namespace seed. `PagePaths` learns, from every key a call could have put
in the tree, each page's hash with SGLang's own functions (mem_cache/utils.py, not the tree's
module) and reads a hash back as its path: the contract's events name a page by its tokens alone
(docs/radix-contract.md); a hash it cannot read back (one no sequence's page has) stays the int
SGLang published, which differs from every path of the spec.
A stored event's pages are flattened one by one, each after the page before it (SGLang joins a
chain's pages into one event; the contract does not care how they are batched).
"""

from __future__ import annotations

from array import array
from typing import Any, Iterable

from cacheproof.adapt import AdapterError


class _KeyNode:
    """A node with no parent holding `key`: the shape `compute_node_event_hash_values` reads."""

    def __init__(self, key: Any) -> None:
        self.key, self.parent, self.hash_value, self.event_hash_value = key, None, None, None


class PagePaths:
    """Page hashes read back as paths, for a tree of `page_size`-token pages."""

    def __init__(self, page_size: int) -> None:
        from sglang.srt.mem_cache.radix_cache import RadixKey
        from sglang.srt.mem_cache.utils import compute_node_event_hash_values, hash_str_to_int64

        self.page_size = page_size
        self._key, self._chain, self._to_int = RadixKey, compute_node_event_hash_values, hash_str_to_int64
        self._sequences: set[tuple] = set()
        self._learned: set[tuple] = set()
        self._paths: dict[int, tuple[int, ...]] = {}

    def may_store(self, tokens: Iterable[int], extra_key: str | None = None, cache_salt: str | None = None) -> None:
        """A call may put the whole pages of `tokens`, under `extra_key` and `cache_salt`, in the tree."""
        tokens = tuple(tokens)
        self._sequences.add((tokens[:len(tokens) - len(tokens) % self.page_size], extra_key, cache_salt))

    def _entries(self, tokens: tuple[int, ...], extra_key: str | None, cache_salt: str | None) -> list:
        """The hash chain of a node under the root holding `tokens` under `extra_key` and `cache_salt`."""
        key = self._key(array("q", tokens), extra_key=extra_key, cache_salt=cache_salt)
        return self._chain(_KeyNode(key), self.page_size)

    def path(self, value: int) -> Any:
        """The path of the page SGLang names `value`, or `value` itself when no sequence has it."""
        if value not in self._paths:
            for sequence in self._sequences - self._learned:
                tokens = sequence[0]
                if tokens:
                    for page, entry in enumerate(self._entries(*sequence)):
                        self._paths.setdefault(self._to_int(entry), tokens[:(page + 1) * self.page_size])
                self._learned.add(sequence)
        return self._paths.get(value, value)

    def events(self, published: Iterable[Any]) -> tuple:
        """SGLang's events of one call as the contract's (stored, removed, cleared)."""
        stored, removed, cleared = [], [], False
        for event in published:
            kind = type(event).__name__
            if kind == "BlockStored":
                parent = None if event.parent_block_hash is None else self.path(event.parent_block_hash)
                tokens = list(event.token_ids)
                for page, value in enumerate(event.block_hashes):
                    path = self.path(value)
                    stored.append((parent, path, tuple(tokens[page * self.page_size:(page + 1) * self.page_size])))
                    parent = path
            elif kind == "BlockRemoved":
                removed.extend(self.path(value) for value in event.block_hashes)
            elif kind == "AllBlocksCleared":
                cleared = True
            else:
                raise AdapterError(f"SGLang published a {kind}, an event the radix contract has no form for")
        paths = sorted(path for path in removed if isinstance(path, tuple))
        unread = sorted(value for value in removed if not isinstance(value, tuple))
        return tuple(stored), tuple(paths + unread), cleared
