"""The calls of asynchronous KV loads (`load_slots`, `finish_load`; spec/blocks/manager.py), drawn:
the block pool generator's part for a request level behind a KV connector (block_exhaustive.py
enumerates them).

Drawn (`SUITED`, `MISUSE`): `load_slots` of a request of the scope that has no blocks at either
level, with 1..`most_new_tokens` tokens (a new request's, as a first `allocate_slots` draws them)
and 0..2 blocks to keep free (`reserve`);
where every such request is taken, a `find_cached_prefix` of the same tokens instead (read-only,
so always suited). `finish_load` of a request whose load is under way; where none is, a
`load_slots` instead. The request-level drawers leave a loading request out of `allocate_slots`
(`running`), as a scheduler runs none before its load finishes. Misuse: a request that is not an
int, tokens that are not ints, a `reserve` that is negative or not an int, `load_slots` of a
request managed already, `finish_load` of one with no load under way.
"""

from __future__ import annotations

from typing import Any

from cacheproof.check.programs.draws import Draws, choice, coin, integer, some
from cacheproof.check.programs.generators import NOT_INTS
from cacheproof.contract.calls import Call


def running(s: Any, requests: Any) -> list[int]:
    """`requests` without those whose load is under way."""
    loading = set(s.model.loading())
    return [r for r in requests if r not in loading]


def fresh(s: Any) -> list[int]:
    """The scope's requests with no blocks at either level."""
    return [r for r in s.requests if r not in s.holdings and r not in s.tables]


def _load_slots(draws: Draws, s: Any) -> Call:
    tokens = some(draws, s.scope.tokens, s.scope.most_new_tokens)
    requests = fresh(s)
    if not requests:
        return Call("find_cached_prefix", (tokens,))
    reserve = integer(draws, 0, 2)
    return Call("load_slots", (choice(draws, requests), tokens), {"reserve": reserve} if reserve else {})


def _finish_load(draws: Draws, s: Any) -> Call:
    loading = s.model.loading()
    if not loading:
        return _load_slots(draws, s)
    return Call("finish_load", (choice(draws, loading),))


def _misuse_load_slots(draws: Draws, s: Any) -> Call:
    tokens = some(draws, s.scope.tokens, s.scope.most_new_tokens)
    if coin(draws) or not s.tables:
        if coin(draws):
            return Call("load_slots", (choice(draws, s.requests), tokens), {"reserve": choice(draws, (-1, *NOT_INTS))})
        return Call("load_slots", (choice(draws, NOT_INTS), tokens) if coin(draws)
                    else (choice(draws, s.requests), tokens + (choice(draws, NOT_INTS),)))
    return Call("load_slots", (choice(draws, sorted(s.tables)), tokens))


def _misuse_finish_load(draws: Draws, s: Any) -> Call:
    if coin(draws):
        return Call("finish_load", (choice(draws, NOT_INTS),))
    return Call("finish_load", (choice(draws, running(s, s.requests) or [s.requests[-1] + 1]),))


SUITED = {"load_slots": _load_slots, "finish_load": _finish_load}
MISUSE = {"load_slots": _misuse_load_slots, "finish_load": _misuse_finish_load}
