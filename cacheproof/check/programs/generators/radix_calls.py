"""The radix cache's call generator: calls drawn from the model's state.

Caches are small (1 to 16 KV slots, one in four up to 48) so that the allocator runs dry and
admissions evict; tokens come from a vocabulary of three and sequences are short (up to 6 tokens),
so that sequences share prefixes, matches end inside nodes (splits) and inserts diverge inside
them. Most token sequences start from a path the tree holds (a node's tokens, cut or extended),
the others are fresh. Under semantics namespaces "keyed" a key's namespace is drawn beside its
tokens from three (the default, None, and two named ones: two named ones are what a child key that
drops its namespace makes collide): a node's own where the tokens start from its path, else any,
and one key in eight is drawn again in any namespace. Each call usually suits the state: unlock names a locked
node's tokens, evict asks for at most the evictable size, checkpoint and release name live requests, prefill a
request that is not live. Misuse (an unlock of an unlocked path, an evict above the evictable
size, an insert of a part page, a live request admitted again, an unknown request, up_to past the
request's tokens, a token or request that is not an int, a namespace that is not a str) comes one
call in eight; every error outcome of the operation table is among them (docs/search-power.md,
outcome coverage). Without
misuse (semantics misuse "trusted", or --no-bad-arguments) an unlock names only a node holding a
lock of its own that no live request holds, the one unlock the contract does not refuse.

Those numbers are the small scope (`SMALL`), the one every check draws from. `--thorough` adds the
wide scope (caches of up to 64 slots, one in four up to 256; requests 1..6; a vocabulary of four;
sequences of up to 16 tokens; programs of 100 calls) and the long scope (the same in lives of 1,000
calls); the small scope's thorough programs are 50 calls, a thousand of them, drawn from a seeded `random.Random` and shrunk by the checker alone (docs/scope.md).

`check --exhaustive` enumerates instead (`RadixCalls.enabled_calls`, the scopes `EXHAUSTIVE`, an
`ExhaustiveRadixScope` each): from every state, every call of the scope that suits it, and where
misuse is checked the misuse the drawn calls make (docs/exhaustive.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from typing import Any

from cacheproof.check.phases import Phase
from cacheproof.check.programs.draws import Draws, choice, coin, integer, some
from cacheproof.check.programs.generators import NOT_INTS, drawn_call, drawn_size
from cacheproof.contract.calls import Call


@dataclass(frozen=True)
class RadixScope:
    """What one program of the radix cache may reach: caches of 1..`slots` KV slots, one in four
    of 1..`more_slots`; the requests calls name; the token vocabulary; at most `most_tokens` tokens
    in one sequence; the namespaces keys are drawn in (semantics namespaces "keyed")."""

    name: str
    slots: int
    more_slots: int
    requests: tuple[int, ...]
    tokens: tuple[int, ...]
    most_tokens: int
    namespaces: tuple[str | None, ...] = (None, "a", "b")


SMALL = RadixScope("small", 16, 48, (1, 2, 3), (0, 1, 2), 6)
WIDE = RadixScope("wide", 64, 256, tuple(range(1, 7)), (0, 1, 2, 3), 16)
LONG = replace(WIDE, name="long")
SCOPES = {scope.name: scope for scope in (SMALL, WIDE, LONG)}

THOROUGH = (Phase(SMALL, 1000, 50), Phase(WIDE, 300, 100, shrink=False), Phase(LONG, 30, 1000, shrink=False))
"""`cacheproof check --spec radix --thorough`: 110,000 calls, about half a minute of CPU (docs/scope.md)."""


@dataclass(frozen=True)
class ExhaustiveRadixScope:
    """What `check --exhaustive` tries from every state of the radix cache: caches of each of `slots`
    KV slots; every token sequence of 1..`most_tokens` of `tokens` matched, inserted (whole pages),
    locked and prefilled (by each of `requests` not live); unlock of each locked path; evict of
    0..the evictable size; checkpoint at every length and release of each live request; the size
    reads and reset; where misuse is checked, the misuse the drawn calls make, on the same values.
    `depth`: the calls per path a search goes to when no --depth is given. `namespaces`: the
    namespaces every keyed call is tried in (semantics namespaces "keyed"; "one": the default only)."""

    name: str
    slots: tuple[int, ...]
    requests: tuple[int, ...]
    tokens: tuple[int, ...]
    most_tokens: int
    depth: int
    namespaces: tuple[str | None, ...] = (None,)


EXHAUSTIVE = {scope.name: scope for scope in (
    ExhaustiveRadixScope("tiny", (2, 3), (1,), (0, 1), 2, 3),
    ExhaustiveRadixScope("two-requests", (2, 3, 4), (1, 2), (0, 1), 3, 3),
    ExhaustiveRadixScope("namespaces", (2, 3), (1,), (0,), 1, 4, (None, "a", "b")),
)}
"""The exhaustive scopes, the default first (docs/exhaustive.md gives their states and times)."""



class RadixCalls:
    """`CallGenerator` of the radix kind, drawing from `scope` (see the module docstring)."""

    def __init__(self, scope: RadixScope = SMALL) -> None:
        self.scope = scope

    def size(self, draws: Draws) -> int:
        """1..`slots` KV slots (16 in the small scope), one cache in four up to `more_slots` (48)."""
        return drawn_size(draws, self.scope.slots, self.scope.more_slots)

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        return drawn_call(draws, _State(model, self.scope), operations, misuse, _SUITED if misuse else _TRUSTED, _MISUSE)

    def exhaustive_sizes(self, scope: ExhaustiveRadixScope) -> tuple[int, ...]:
        """The cache sizes (KV slots) of `scope`."""
        return scope.slots

    def enabled_calls(self, scope: ExhaustiveRadixScope, model: Any, operations: tuple[str, ...],
                      misuse: bool) -> tuple[Call, ...]:
        """Every call of `scope` among `operations` that suits the model's state, then (when
        `misuse`) its misuse calls (see `ExhaustiveRadixScope`), each operation in table order."""
        page, paths, live = model.semantics.page_size, model.paths(), model.live_requests()
        words = [word for length in range(1, scope.most_tokens + 1) for word in product(scope.tokens, repeat=length)]
        pages = [word for word in words if len(word) % page == 0]
        idle = [r for r in scope.requests if r not in live]
        evictable = model.evictable_size()
        spaces = namespaces_of(scope, model)
        every = {
            "match_prefix": [keyed("match_prefix", (word,), space) for space in spaces for word in words],
            "insert": [keyed("insert", (word,), space) for space in spaces for word in pages],
            "lock": [keyed("lock", (word,), space) for space in spaces for word in words],
            "unlock": [keyed("unlock", (path,), space) for path, lock, space in paths if lock > 0],
            "evict": [Call("evict", (n,)) for n in range(evictable + 1)],
            "prefill": [keyed("prefill", (r, word), space) for space in spaces for r in idle for word in words],
            "checkpoint": [Call("checkpoint", (r,), {"up_to": n}) for r in live
                           for n in range(len(model.tokens_of(r)) + 1)],
            "release": [Call("release", (r,)) for r in live],
            **{name: [Call(name, ())] for name in ("reset", "evictable_size", "protected_size", "total_size")},
        }
        calls = [call for name in operations for call in every.get(name, ())]
        if misuse:
            bad_tokens = (scope.tokens[0], NOT_INTS[0])
            wrong = {
                "match_prefix": [Call("match_prefix", (bad_tokens,))],
                "insert": [Call("insert", (bad_tokens,))] + [Call("insert", (word,)) for word in words if word not in pages],
                "lock": [Call("lock", (bad_tokens,))],
                "unlock": [keyed("unlock", (path,), space) for path, lock, space in paths if lock == 0]
                + [Call("unlock", (bad_tokens,))],
                "evict": [Call("evict", (evictable + 1,)), Call("evict", (-1,))],
                "prefill": [Call("prefill", (r, (scope.tokens[0],))) for r in live] + [Call("prefill", (NOT_INTS[0], (0,)))]
                + [Call("prefill", (r, ())) for r in idle[:1]],
                "checkpoint": [Call("checkpoint", (r,), {"up_to": len(model.tokens_of(r)) + 1}) for r in live]
                + [Call("checkpoint", (r,), {"up_to": 0}) for r in idle[:1]],
                "release": [Call("release", (r,)) for r in idle[:1]] + [Call("release", (NOT_INTS[0],))],
            }
            if len(spaces) > 1:
                wrong["match_prefix"].append(Call("match_prefix", (scope.tokens[:1],), {"namespace": NOT_STRS[0]}))
            calls += [call for name in operations for call in wrong.get(name, ())]
        return tuple({repr(call): call for call in calls}.values())

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """No argument cases beside the outcomes."""
        return ()

    def case_of(self, call: Call) -> str | None:
        return None


def namespaces_of(scope: Any, model: Any) -> tuple[str | None, ...]:
    """The namespaces a scope's keys are in for the model's semantics: the scope's under
    namespaces "keyed", the default one alone under "one"."""
    return scope.namespaces if model.semantics.namespaces == "keyed" else (None,)


def keyed(op: str, args: tuple, namespace: str | None) -> Call:
    """A call of a keyed operation in `namespace`: the default one (None) is not passed."""
    return Call(op, args, {} if namespace is None else {"namespace": namespace})


NOT_STRS = (1, b"a")
"""Namespaces that are not a str (nor None), for the misuse calls."""


class _State:
    """What the drawers read from the model."""

    def __init__(self, model: Any, scope: RadixScope) -> None:
        self.model, self.scope = model, scope
        self.page = model.semantics.page_size
        self.paths = model.paths()
        self.live = model.live_requests()
        self.unlockable = model.unlockable()
        self.namespaces = namespaces_of(scope, model)

    def key(self, draws: Draws, *, whole_pages: bool = False) -> tuple[tuple, str | None]:
        """Tokens and a namespace: mostly a node's tokens cut or extended in the node's namespace,
        else fresh ones in any; whole pages when asked."""
        fresh = some(draws, self.scope.tokens, self.scope.most_tokens)
        if self.paths and integer(draws, 0, 3) > 0:
            path, _, namespace = choice(draws, self.paths)
            cut = path[:integer(draws, 1, len(path))]
            tokens = (cut + fresh)[:self.scope.most_tokens + len(cut)] if coin(draws) else cut
        else:
            tokens = fresh
            namespace = choice(draws, self.namespaces) if len(self.namespaces) > 1 else None
        if len(self.namespaces) > 1 and integer(draws, 0, 7) == 0:
            namespace = choice(draws, self.namespaces)  # the same tokens in another namespace
        if whole_pages:
            tokens = tokens[:len(tokens) - len(tokens) % self.page]
        return tokens, namespace

    def tokens(self, draws: Draws) -> tuple:
        """The tokens of a drawn key, its namespace dropped (a misuse call's start)."""
        return self.key(draws)[0]

    def not_live(self, draws: Draws) -> int:
        idle = [r for r in self.scope.requests if r not in self.live]
        return choice(draws, idle or [self.scope.requests[-1] + 1])


def _drawn_keyed(op: str, draws: Draws, s: _State, *, whole_pages: bool = False) -> Call:
    """A call of `op` on a drawn key (`_State.key`)."""
    tokens, namespace = s.key(draws, whole_pages=whole_pages)
    return keyed(op, (tokens,), namespace)


def _match_prefix(draws: Draws, s: _State) -> Call:
    return _drawn_keyed("match_prefix", draws, s)


def _insert(draws: Draws, s: _State) -> Call:
    return _drawn_keyed("insert", draws, s, whole_pages=True)


def _lock(draws: Draws, s: _State) -> Call:
    return _drawn_keyed("lock", draws, s)


def _unlock(draws: Draws, s: _State) -> Call:
    locked = [(path, namespace) for path, lock, namespace in s.paths if lock > 0]
    if locked:
        path, namespace = choice(draws, locked)
        return keyed("unlock", (path,), namespace)
    return _drawn_keyed("unlock", draws, s)


def _trusted_unlock(draws: Draws, s: _State) -> Call:
    """An unlock that is never misuse: a node's tokens holding a lock of its own no live request
    holds, in its namespace, else a lock (a call that suits every state)."""
    if s.unlockable:
        path, namespace = choice(draws, s.unlockable)
        return keyed("unlock", (path,), namespace)
    return _lock(draws, s)


def _evict(draws: Draws, s: _State) -> Call:
    return Call("evict", (integer(draws, 0, s.model.evictable_size()),))


def _reset(draws: Draws, s: _State) -> Call:
    return Call("reset", ())


def _evictable_size(draws: Draws, s: _State) -> Call:
    return Call("evictable_size", ())


def _protected_size(draws: Draws, s: _State) -> Call:
    return Call("protected_size", ())


def _total_size(draws: Draws, s: _State) -> Call:
    return Call("total_size", ())


def _prefill(draws: Draws, s: _State) -> Call:
    request = s.not_live(draws)
    tokens, namespace = s.key(draws)
    return keyed("prefill", (request, tokens or (choice(draws, s.scope.tokens),)), namespace)


def _checkpoint(draws: Draws, s: _State) -> Call:
    if not s.live:
        return _prefill(draws, s)
    request = choice(draws, s.live)
    return Call("checkpoint", (request,), {"up_to": integer(draws, 0, len(s.model.tokens_of(request)))})


def _release(draws: Draws, s: _State) -> Call:
    if not s.live:
        return _prefill(draws, s)
    return Call("release", (choice(draws, s.live),))


_SUITED = {
    "match_prefix": _match_prefix, "insert": _insert, "lock": _lock, "unlock": _unlock, "evict": _evict,
    "reset": _reset, "evictable_size": _evictable_size, "protected_size": _protected_size,
    "total_size": _total_size, "prefill": _prefill, "checkpoint": _checkpoint, "release": _release,
}
_TRUSTED = {**_SUITED, "unlock": _trusted_unlock}
"""The drawers where the checker makes no misuse call: an unlock that is never misuse."""


def _bad_tokens(draws: Draws, s: _State) -> tuple:
    return s.tokens(draws) + (choice(draws, NOT_INTS),)


def _misuse_match_prefix(draws: Draws, s: _State) -> Call:
    if len(s.namespaces) > 1 and coin(draws):
        return Call("match_prefix", (s.tokens(draws),), {"namespace": choice(draws, NOT_STRS)})
    return Call("match_prefix", (_bad_tokens(draws, s),))


def _misuse_insert(draws: Draws, s: _State) -> Call:
    if s.page > 1 and coin(draws):
        return Call("insert", (s.key(draws, whole_pages=True)[0] + (choice(draws, s.scope.tokens),),))
    if coin(draws):
        return Call("insert", (_bad_tokens(draws, s),))
    return Call("insert", (tuple(choice(draws, s.scope.tokens) for _ in range(s.model.num_slots + s.page)),))


def _misuse_lock(draws: Draws, s: _State) -> Call:
    return Call("lock", (_bad_tokens(draws, s),))


def _misuse_unlock(draws: Draws, s: _State) -> Call:
    unlocked = [(path, namespace) for path, lock, namespace in s.paths if lock == 0]
    if unlocked and coin(draws):
        path, namespace = choice(draws, unlocked)
        return keyed("unlock", (path,), namespace)
    return Call("unlock", (_bad_tokens(draws, s),))


def _misuse_evict(draws: Draws, s: _State) -> Call:
    if coin(draws):
        return Call("evict", (choice(draws, (-1, *NOT_INTS)),))
    return Call("evict", (s.model.evictable_size() + integer(draws, 1, 3),))


def _misuse_prefill(draws: Draws, s: _State) -> Call:
    pick = integer(draws, 0, 3)
    if pick == 0 and s.live:
        return Call("prefill", (choice(draws, s.live), s.tokens(draws) or (0,)))
    if pick == 1:
        return Call("prefill", (choice(draws, NOT_INTS), (0,)))
    if pick == 2:
        return Call("prefill", (s.not_live(draws), ()))
    return Call("prefill", (s.not_live(draws), tuple(choice(draws, s.scope.tokens) for _ in range(s.model.num_slots + 1))))


def _misuse_checkpoint(draws: Draws, s: _State) -> Call:
    if s.live and coin(draws):
        request = choice(draws, s.live)
        return Call("checkpoint", (request,), {"up_to": choice(draws, (-1, len(s.model.tokens_of(request)) + 1))})
    return Call("checkpoint", (s.not_live(draws),), {"up_to": 0})


def _misuse_release(draws: Draws, s: _State) -> Call:
    return Call("release", (choice(draws, (s.not_live(draws), *NOT_INTS)),))


_MISUSE = {
    **_SUITED,
    "match_prefix": _misuse_match_prefix, "insert": _misuse_insert, "lock": _misuse_lock, "unlock": _misuse_unlock,
    "evict": _misuse_evict, "prefill": _misuse_prefill, "checkpoint": _misuse_checkpoint, "release": _misuse_release,
}
