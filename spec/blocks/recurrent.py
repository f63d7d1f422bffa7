"""A recurrent layer's blocks at the request level: `recurrent_state="align"` (spec/blocks/semantics.py).

A recurrent (Mamba) layer keeps no KV per token but one state per request, which each step
rewrites; with prefix caching in "align" mode the state at a block boundary is kept in a block of
its own, so a later request with that prefix starts from it. Rules (block size B; a request's
table has a place per block of its tokens, place i ending at token (i + 1) * B):

1. Layout. A call that takes the request's tokens into a new place takes exactly one block, at
   the last place (the running state); the places it passes over name the null block. The block
   at the last place before the call stays: it holds the state the step starts from.
   A call whose tokens stay within the last place takes no block.
2. Retirement, at the start of a running call and of `free_request`, with c the tokens computed
   (the request's tokens before the call; all of them at `free_request`): only the state after
   token c is read, so the blocks at the places wholly before token c - 1 are freed, last first,
   null places passed over, as a sliding window's (spec/blocks/manager.py, `_drop_stale`): every
   block of the table but its last place's. Each leaves the table for the null block, freed even
   when the call then answers None. A request so holds at most two blocks: the state its step
   starts from and its running state.
3. Caching. A full place gets its hash when the request's tokens reach its end, as at the request
   level, but a null place is skipped (its hash names no block). Each block hashed so is offered
   to a KV connector with its boundary, (request, block, (i + 1) * B), in place order: the
   `boundary_states()` view, the last call's offers.
4. A prefix hit is the block of the longest cached full-block prefix of tokens[:-1], alone: the
   null block at the places before it. A new request adopts it (pins it; it is the state its first
   step starts from) and takes one block for its running state.
5. Alignment: a request whose tokens stop inside a block may add only the tokens up to that block's
   end, so that a cached state always sits at its boundary (the scheduler cuts such a chunk);
   otherwise WrongStateError, nothing changed. A load (`load_slots`) is not in the contract for a
   recurrent state: InvalidArgumentError.

vLLM 0.34.0 `MambaManager` (vllm/v1/core/single_type_kv_cache_manager.py) in "align" mode with no
speculative or prefill-checkpoint blocks: `allocate_new_blocks` (rule 1), `remove_skipped_blocks`
with `get_num_skipped_tokens` = c - 1 (rule 2; its second step, the block at
`last_state_block_idx`, is then always freed already, as that place is before the last),
`cache_blocks` and `take_pending_boundary_state_offloads` (rule 3), `find_longest_cache_hit`
(rule 4).
"""

from __future__ import annotations

from cacheproof.spec.blocks.partial import NULL_BLOCK
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError


class RecurrentState:
    """The recurrent-state rules as steps of `RequestLevel` (a mixin of `BlockPoolSpec`); rule 2 is
    `RequestLevel._drop_stale`'s."""

    def _recurrent(self) -> bool:
        return self.semantics.recurrent_state == "align"

    def most_new_tokens(self, request: int) -> int | None:
        """Rule 5: the most tokens the next call may add to `request` (None: no bound)."""
        inside = len(self._tokens.get(request, ())) % self.block_size
        return self.block_size - inside if self._recurrent() and inside else None

    def _check_aligned(self, operation: str, request: int, num_tokens: int) -> None:
        """Rule 5: WrongStateError for a call that carries a request stopped inside a block past its end."""
        most, computed = self.most_new_tokens(request), len(self._tokens[request])
        if most is not None and num_tokens - computed > most:
            raise WrongStateError(
                f"{operation}(request={request}): the request's {computed} tokens stop inside a block of "
                f"{self.block_size}, so a call may add at most {most}, not {num_tokens - computed}: a "
                "recurrent state is cached only at a block boundary (recurrent_state=\"align\")"
            )

    def _refuse_recurrent_load(self, request: int) -> None:
        """Rule 5: a recurrent state's load is not in the contract."""
        if self._recurrent():
            raise InvalidArgumentError(
                f"load_slots(request={request}): a recurrent state's load is not in the contract "
                "(recurrent_state=\"align\"); only an attention layer's KV is loaded"
            )

    def _state_blocks(self, places: int, num_tokens: int) -> int:
        """Rule 1: the blocks a table of `places` places takes for `num_tokens` tokens (one, or none)."""
        return min(self._blocks_for(num_tokens) - places, 1)

    def _grow_state(self, request: int, num_tokens: int) -> None:
        """Rule 1: the running state's block at the last place of `num_tokens` tokens, nulls before."""
        (table,), places = self._tables[request], self._blocks_for(num_tokens)
        if places > len(table):
            table.extend([NULL_BLOCK] * (places - 1 - len(table)))
            table.extend(self._take(request, 1))

    def _offer(self, request: int, table: list[int], places: list[int]) -> None:
        """Rule 3: the blocks at `places`, just hashed, offered with their boundaries."""
        if self._recurrent():
            for place in places:
                self._events.offer(request, table[place], (place + 1) * self.block_size)
