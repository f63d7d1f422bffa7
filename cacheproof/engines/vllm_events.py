"""The KV cache events view of the vLLM adapters (`VllmEvents`, a mixin of
cacheproof.engines.vllm's `VllmBlockPool`): vLLM's BlockStored, BlockRemoved and
AllBlocksCleared events of the last call, read back as the contract's `events()`. The module
docstring of cacheproof.engines.vllm states what each event's token data and group read as.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["TokenData", "VllmEvents"]


class TokenData(NamedTuple):
    """What a BlockStored says of its blocks' tokens: the token ids, each block's lookahead token
    ids (None: the pool has no lookahead) and each block's extra keys (None: no entry at all)."""

    token_ids: tuple[int, ...]
    lookahead: tuple[tuple[int, ...], ...] | None
    extra_keys: tuple[Any, ...] | None

    @classmethod
    def of(cls, event: Any) -> "TokenData":
        lookahead = event.lookahead_token_ids
        extra_keys = event.extra_keys
        return cls(tuple(event.token_ids), None if lookahead is None else tuple(tuple(ids) for ids in lookahead),
                   None if extra_keys is None else tuple(extra_keys))


class VllmEvents:
    """The `events()` view over `_emitted` (the last call's vLLM events), with `_external` (each
    external hash -> the int handed vLLM), `_made_up` (what the call made up for the blocks it
    names), `_groups` (how an event names each of the adapter's KV-cache groups, by index) and
    `_in_group` (a hash of the first group's chain in another group's) set by the adapter."""

    _emitted: list[Any]
    _external: dict[Any, int]
    _made_up: TokenData | None
    _groups: tuple[tuple[int, Any, Any], ...]
    _in_group: Any

    def _event_hash(self, value: Any, group: Any = 0) -> Any:
        """An event's external hash as the int the adapter handed vLLM (unknown: as vLLM wrote it), in
        the chain of the event's KV-cache group (None: no parent)."""
        return self._in_group(None if value is None else self._external.get(value, value), group or 0)

    def events(self) -> tuple[tuple[tuple[int | None, tuple[int, ...], tuple[int, ...]], ...], tuple[int, ...], bool]:
        """vLLM's KV cache events of the last call as (stored, removed, cleared); an event of
        another type raises TypeError naming it (the view then differs)."""
        stored, removed, cleared = [], [], False
        for event in self._emitted:
            kind = type(event).__name__
            if kind == "BlockStored":
                if event.block_hashes:
                    group = event.group_idx
                    stored.append((self._event_hash(event.parent_block_hash, group),
                                   tuple(self._event_hash(value, group) for value in event.block_hashes),
                                   self._event_data(event)))
            elif kind == "BlockRemoved":
                removed.extend(self._event_hash(value, event.group_idx) for value in event.block_hashes)
            elif kind == "AllBlocksCleared":
                cleared = True
            else:
                raise TypeError(f"vLLM emitted a KV cache event of type {kind}, which the events view does not read")
        return tuple(stored), tuple(sorted(removed)), cleared

    def _event_data(self, event: Any) -> Any:
        """A BlockStored's token data (`_event_tokens`), and the KV-cache group it names, as a router
        reads it to filter groups (`group_idx`, `kv_cache_spec_kind`, `kv_cache_spec_sliding_window`):
        naming one of the adapter's groups as vLLM's code there names it (`_groups`, by the event's
        index) reads as the token data alone; any other naming is joined to it, so the view differs."""
        data = self._event_tokens(event)
        named = (event.group_idx, event.kv_cache_spec_kind, event.kv_cache_spec_sliding_window)
        index = event.group_idx or 0
        return data if 0 <= index < len(self._groups) and named == self._groups[index] else (data, named)

    def _event_tokens(self, event: Any) -> Any:
        """A BlockStored's token data as the events view says it. The contract's requests have no
        extra keys and no lookahead, and the pool level's blocks hold no tokens: a pool-level
        call's event whose token data is exactly what the call made up (`_pool_request`) reads as
        none; a request-level event with one None extra key per block and no lookahead reads as
        its token ids; any other data as the `TokenData` vLLM wrote, which then differs."""
        written = TokenData.of(event)
        if self._made_up is not None and written == self._made_up:
            return ()
        if written.lookahead is None and written.extra_keys == (None,) * len(event.block_hashes):
            return written.token_ids
        return written
