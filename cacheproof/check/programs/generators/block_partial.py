"""The calls of partial prefix-cache entries (spec/blocks/partial.py), drawn and enumerated: the
block pool generators' part for a pool of more than one hash unit per block.

Drawn (`SUITED`, `MISUSE`): `cache_partial` of a block the request holds (a hashed block half the
time, so that entries are replaced and added beside a primary; the null block instead, one call
in NULL_PAD_IN, where the semantics skip it; one call in REPLACE_IN replacing the block's
entries), with a chain whose length is drawn among those that end inside a block (up to
`most_named` blocks long), its hashes from the scope's, so keys collide with the hashes blocks
carry; `move_hashes` from a block the request holds (mostly a hashed one) to an unhashed one it
holds. A request holding no block to name allocates one (or none, when none is free) instead,
which is always suited; so does a cache_partial where no chain ends inside a block (one hash unit
per block). `cache_blocks` names the blocks `cachable` gives, a block carrying a partial entry
only at a place past its cover (`promotable`), so a suited call promotes it.
Misuse: a chain ending at a block's end, a `replace` that is not a bool, a block the request does
not hold, the null block, a target that carries a hash or is the source.

Enumerated (`EVERY`, `EVERY_MISUSE`, for `check --exhaustive`): `cache_partial` of every held block
with every key, and every key after every parent, replacing its entries or not, at each chain
length that ends inside a block (the hashes before the parent are the scope's first: no rule
reads them); `move_hashes` of every
held source to every held unhashed target; the misuse above on the same values.
"""

from __future__ import annotations

from typing import Any

from cacheproof.check.programs.draws import Draws, choice, coin
from cacheproof.check.programs.generators import NOT_INTS
from cacheproof.contract.calls import Call
from cacheproof.spec.blocks.partial import NULL_BLOCK

NULL_PAD_IN = 4
"""Where the null block is skipped, one drawn cache_partial in this many names it."""
REPLACE_IN = 4
"""One drawn cache_partial in this many replaces the block's entries (`replace=True`)."""


def units(s: Any) -> int:
    """The hash units per block of the model's semantics."""
    return s.model.semantics.hash_units


def chain_lengths(s: Any, most_named: int) -> list[int]:
    """The chain lengths up to `most_named` blocks that end inside a block."""
    return [n for n in range(1, most_named * units(s)) if n % units(s)]


def cachable(s: Any, request: int) -> list[int]:
    """The blocks `request` holds, once each, that `cache_blocks` may name: the unhashed ones and
    those whose hash is a partial entry (a cover that is not a whole number of blocks)."""
    return [b for b in _held(s, request) if s.blocks[b][1] is None or s.covers[b] % units(s)]


def promotable(s: Any, blocks: tuple, hashes: tuple) -> tuple[tuple, tuple]:
    """`blocks` and their `hashes` without the hashed blocks `cache_blocks` may not name where
    they stand: a block with a hash stays only if it is a partial entry covering fewer units than
    its place's end (places counted after each removal)."""
    covers = s.covers
    kept = list(zip(blocks, hashes))
    while True:
        wrong = [i for i, (block, _) in enumerate(kept) if block in covers
                 and (covers[block] % units(s) == 0 or covers[block] >= (i + 1) * units(s))]
        if not wrong:
            return tuple(b for b, _ in kept), tuple(h for _, h in kept)
        del kept[wrong[0]]


def _held(s: Any, request: int) -> list[int]:
    return list(dict.fromkeys(s.held_by(request)))


def _allocate_instead(s: Any, request: int) -> Call:
    """The suited call when the request holds no block to name: allocate one, or none."""
    return Call("allocate", (request, min(1, len(s.queue))))


def _cache_partial(draws: Draws, s: Any) -> Call:
    request = s.holder(draws)
    held = _held(s, request)
    lengths = chain_lengths(s, s.scope.most_named)
    if not lengths:
        return _allocate_instead(s, request)
    hashed = [b for b in held if s.blocks[b][1] is not None]
    if s.skips_null and not draws.randrange(NULL_PAD_IN):
        block = NULL_BLOCK
    elif held:
        block = choice(draws, hashed if hashed and coin(draws) else held)
    else:
        return _allocate_instead(s, request)
    n = choice(draws, lengths)
    chain = tuple(choice(draws, s.hashes) for _ in range(n))
    return Call("cache_partial", (request, block, chain), {"replace": True} if not draws.randrange(REPLACE_IN) else {})


def _move_hashes(draws: Draws, s: Any) -> Call:
    request = s.holder(draws)
    held = _held(s, request)
    hashed = [b for b in held if s.blocks[b][1] is not None]
    source = choice(draws, hashed if hashed and coin(draws) else held) if held else None
    targets = [b for b in held if s.blocks[b][1] is None and b != source]
    if not targets:
        return _allocate_instead(s, request)
    return Call("move_hashes", (request, source, choice(draws, targets)))


def _misuse_cache_partial(draws: Draws, s: Any) -> Call:
    request = s.pool_request(draws)
    held = _held(s, request)
    if held and not draws.randrange(3):
        return Call("cache_partial", (request, choice(draws, held), (choice(draws, s.hashes),)), {"replace": choice(draws, NOT_INTS)})
    if held and coin(draws):
        n = choice(draws, [0, units(s), 2 * units(s)])
        return Call("cache_partial", (request, choice(draws, held), tuple(choice(draws, s.hashes) for _ in range(n))))
    not_held = [b for b in range(1, s.num_blocks) if b not in held]
    return Call("cache_partial", (request, choice(draws, not_held + [NULL_BLOCK, s.num_blocks]), (choice(draws, s.hashes),)))


def _misuse_move_hashes(draws: Draws, s: Any) -> Call:
    request = s.pool_request(draws)
    held = _held(s, request)
    blocks = held + [NULL_BLOCK] + [b for b in range(1, s.num_blocks) if b not in held]
    source = choice(draws, blocks)
    hashed = [b for b in held if s.blocks[b][1] is not None]
    return Call("move_hashes", (request, source, choice(draws, hashed + [source])))


SUITED = {"cache_partial": _cache_partial, "move_hashes": _move_hashes}
MISUSE = {"cache_partial": _misuse_cache_partial, "move_hashes": _misuse_move_hashes}


def _every_cache_partial(s: Any, scope: Any) -> list[Call]:
    first = scope.hashes[0]
    chains = [((first,) * (n - 2) + (parent,) if n > 1 else ()) + (key,)
              for n in chain_lengths(s, scope.most_named) for key in scope.hashes
              for parent in (scope.hashes if n > 1 else (None,))]
    calls = []
    for r in s.pool_requests:
        named = _held(s, r) + ([NULL_BLOCK] if s.skips_null else [])
        calls += [Call("cache_partial", (r, block, chain), kwargs) for block in named for chain in chains
                  for kwargs in ({}, {"replace": True})]
    return calls


def _every_move_hashes(s: Any, scope: Any) -> list[Call]:
    calls = []
    for r in s.pool_requests:
        held = _held(s, r)
        calls += [Call("move_hashes", (r, source, target)) for source in held for target in held
                  if target != source and s.blocks[target][1] is None]
    return calls


def _misuse_every_cache_partial(s: Any, scope: Any) -> list[Call]:
    calls = []
    for r in s.pool_requests:
        held = _held(s, r)
        calls += [Call("cache_partial", (r, block, (scope.hashes[0],) * units(s))) for block in held[:1]]
        calls += [Call("cache_partial", (r, block, (scope.hashes[0],)), {"replace": bad}) for block in held[:1] for bad in NOT_INTS]
        calls += [Call("cache_partial", (r, block, (scope.hashes[0],))) for block in range(s.num_blocks + 1)
                  if block not in held]
    return calls


def _misuse_every_move_hashes(s: Any, scope: Any) -> list[Call]:
    calls = []
    for r in s.pool_requests:
        held = _held(s, r)
        calls += [Call("move_hashes", (r, b, b)) for b in held[:1]]
        calls += [Call("move_hashes", (r, source, target)) for source in held for target in held
                  if target != source and s.blocks[target][1] is not None]
        calls += [Call("move_hashes", (r, NULL_BLOCK, target)) for target in held[:1]]
    return calls


EVERY = {"cache_partial": _every_cache_partial, "move_hashes": _every_move_hashes}
EVERY_MISUSE = {"cache_partial": _misuse_every_cache_partial, "move_hashes": _misuse_every_move_hashes}
