"""The radix cache's invariants R1-R9 as named predicates in one table, each with the bug it excludes.

Every predicate judges one `RadixStep`: the snapshots before and after an operation (the shape of
spec/radix/snapshot.py: free slots, (evictable, protected), nodes, requests), whether it raised, the
call's arguments, its namespace and its answer. A node is known by its place: its namespace and its
tokens (two namespaces may hold the same tokens, in nodes of their own). The state invariants
(R1-R3, R5, R9) look at the state after; R4 judges a match's answer against the tree before; R6 and
R7 compare the trees before and after; R8 compares the snapshots. Each rule is written once as a
finder: it answers None when the step keeps the rule, else the witness (the concrete values that
break it, in words).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from cacheproof.spec.radix.snapshot import namespace_order


class RadixStep(NamedTuple):
    """One radix-cache operation as the invariants see it."""

    operation: str | None  # None when judging a state on its own
    num_slots: int
    page_size: int | None  # None: not known to the judge (R4 then leaves out pages and maximality)
    before: tuple
    after: tuple
    raised: bool
    arguments: tuple = ()
    result: Any = None
    namespace: Any = None  # the namespace the call's key names (None: the default namespace)


class RadixInvariant(NamedTuple):
    """A named rule over a `RadixStep`: the rule in words, the real bug it excludes, the operations
    that could break it, and `find`: None when the step keeps it, else the witness in words."""

    name: str
    rule: str
    excludes: str
    touched_by: tuple[str, ...]
    find: Callable[[RadixStep], "str | None"]

    def holds(self, step: RadixStep) -> bool:
        return self.find(step) is None

    def witness(self, step: RadixStep) -> str:
        return self.find(step) or self.rule


class InvariantViolation(AssertionError):
    """A radix cache (or the spec itself) broke a named invariant. A bug, not a usage error."""


def _path(node: tuple) -> tuple:
    return tuple(node[0]) + tuple(node[1])


def _place(node: tuple) -> tuple:
    """The node's namespace and tokens: what names it in the tree."""
    return node[6], _path(node)


def _in_namespace(namespace: Any) -> str:
    """ " in namespace N", or nothing for the default namespace."""
    return "" if namespace is None else f" in namespace {namespace!r}"


def _name(node: tuple) -> str:
    """The node in words, its namespace named unless it is the default one."""
    return f"the node of tokens {_path(node)}{_in_namespace(node[6])}"


def _nodes(snapshot: tuple) -> tuple:
    return snapshot[2]


def _children(nodes: tuple, node: tuple) -> list[tuple]:
    return [other for other in nodes if (other[6], tuple(other[0])) == _place(node)]


def _on_path(node: tuple, namespace: Any, tokens: tuple, length: int) -> bool:
    """Whether `node` lies on the first `length` tokens of `tokens` in `namespace`."""
    path = _path(node)
    return node[6] == namespace and len(path) <= length and tuple(tokens[:len(path)]) == path


def _locks(step: RadixStep) -> str | None:
    nodes = _nodes(step.after)
    for node in nodes:
        if node[4] < 0:
            return f"{_name(node)} has lock {node[4]}"
        below = sum(child[4] for child in _children(nodes, node))
        if node[4] < below:
            return f"{_name(node)} has lock {node[4]} while its children hold {below} locks"
    for request, tokens, _, prefix, namespace in step.after[3]:
        for node in nodes:
            if node[4] <= 0 and _on_path(node, namespace, tokens, prefix):
                return f"request {request} holds tokens {tuple(tokens[:prefix])} locked, but {_name(node)} has lock {node[4]}"
    return None


def _sizes(step: RadixStep) -> str | None:
    nodes = _nodes(step.after)
    evictable = sum(len(node[1]) for node in nodes if node[4] == 0)
    protected = sum(len(node[1]) for node in nodes if node[4] != 0)
    said = tuple(step.after[1])
    if said != (evictable, protected):
        return (f"the cache says evictable {said[0]}, protected {said[1]} while its unlocked nodes hold "
                f"{evictable} tokens and its locked ones {protected}")
    return None


def _ownership(step: RadixStep) -> str | None:
    free, _, nodes, requests = step.after
    owner: dict[int, str] = {}
    for node in nodes:
        if len(node[2]) != len(node[1]):
            return f"{_name(node)} has {len(node[1])} tokens and {len(node[2])} KV slots"
        for slot in node[2]:
            if slot in owner:
                return f"KV slot {slot} is owned by {owner[slot]} and by {_name(node)}"
            owner[slot] = _name(node)
    places = {_place(node) for node in nodes}
    for request, tokens, slots, prefix, namespace in requests:
        if len(slots) != len(tokens):
            return f"request {request} has {len(tokens)} tokens and {len(slots)} KV slots"
        tree_slots: list = []
        for node in sorted((n for n in nodes if _on_path(n, namespace, tokens, prefix)), key=lambda n: len(n[0])):
            tree_slots.extend(node[2])
        if tuple(slots[:prefix]) != tuple(tree_slots) or (prefix and (namespace, tuple(tokens[:prefix])) not in places):
            return f"request {request}'s first {prefix} KV slots are not those of the tree's nodes of its tokens"
        for slot in slots[prefix:]:
            if slot in owner:
                return f"KV slot {slot} is owned by {owner[slot]} and by request {request}"
            owner[slot] = f"request {request}"
    if free + len(owner) != step.num_slots:
        return f"{free} KV slots are free and {len(owner)} owned, of {step.num_slots}: " + \
            ("a slot was lost" if free + len(owner) < step.num_slots else "a slot is free and owned")
    return None


def _is_cached(nodes: tuple, tokens: tuple, namespace: Any) -> bool:
    return not tokens or any(node[6] == namespace and _path(node)[:len(tokens)] == tokens for node in nodes)


def _query(step: RadixStep) -> tuple | None:
    if step.raised or step.operation not in ("match_prefix", "lock", "unlock", "insert", "prefill"):
        return None
    tokens = tuple(step.arguments[-1])
    return tokens[:-1] if step.operation == "prefill" else tokens


def _match(step: RadixStep) -> str | None:
    query = _query(step)
    if query is None:
        return None
    page, answer, nodes = step.page_size, step.result, _nodes(step.before)
    if not isinstance(answer, int) or answer < 0 or answer % (page or 1) or answer > len(query):
        return f"{step.operation} answered {answer!r} for {len(query)} tokens in pages of {page or 1}"
    space = _in_namespace(step.namespace)
    if not _is_cached(nodes, query[:answer], step.namespace):
        return f"{step.operation} answered {answer} tokens while the tree holds no path {query[:answer]}{space}"
    longer = answer + (page or len(query) + 1)
    if longer <= len(query) and _is_cached(nodes, query[:longer], step.namespace):
        return f"{step.operation} answered {answer} tokens while the tree holds {query[:longer]}{space}"
    return None


def _distinct_children(step: RadixStep) -> str | None:
    nodes, page = _nodes(step.after), step.page_size or 1
    seen: dict[tuple, tuple] = {}
    for node in nodes:
        if not node[1] or len(node[1]) % page:
            return f"{_name(node)} has a key of {len(node[1])} tokens, not whole pages of {page}"
        first = (node[6], tuple(node[0]), tuple(node[1][:page]))
        if first in seen:
            return f"{_name(seen[first])} and {_name(node)} are children of one node with the same first page"
        seen[first] = node
    places = {_place(node) for node in nodes}
    for node in nodes:
        if node[0] and (node[6], tuple(node[0])) not in places:
            return f"{_name(node)} hangs below {tuple(node[0])}, which no node of its namespace ends at"
    return None


def _locked_kept(step: RadixStep) -> str | None:
    after = _nodes(step.after)
    for node in _nodes(step.before):
        if node[4] > 0 and not _is_cached(after, _path(node), node[6]):
            return f"{_name(node)} was locked (lock {node[4]}) and is gone after {step.operation}"
    return None


def _eviction_order(node: tuple) -> tuple:
    """Where `node` stands in the eviction order: by access rank, then by tokens, then by namespace."""
    return node[5], _path(node), namespace_order(node[6])


def _lru(step: RadixStep) -> str | None:
    if step.raised or step.operation != "evict":
        return None
    before, after = _nodes(step.before), _nodes(step.after)
    gone = [node for node in before if not _is_cached(after, _path(node), node[6])]
    kept = [node for node in before
            if node[4] == 0 and not _children(before, node) and _is_cached(after, _path(node), node[6])]
    for evicted in gone:
        for survivor in kept:
            if _eviction_order(survivor) < _eviction_order(evicted):
                return (f"evict took {_name(evicted)} (access rank {evicted[5]}) and kept the unlocked leaf, "
                        f"{_name(survivor)}, used less recently (rank {survivor[5]})")
    return None


def _raise_changes_nothing(step: RadixStep) -> str | None:
    if step.raised and step.before != step.after:
        return f"{step.operation or 'the call'} raised and changed the state"
    return None


def _stored(step: RadixStep) -> str | None:
    for node in _nodes(step.after):
        if tuple(node[3]) != tuple(node[1]):
            return f"the KV storage at the slots of {_name(node)} holds tokens {tuple(node[3])}"
    return None


_MUTATING = ("match_prefix", "insert", "lock", "unlock", "evict", "reset", "prefill", "checkpoint", "release")

RADIX_INVARIANTS: tuple[RadixInvariant, ...] = (
    RadixInvariant(
        "R1", "every lock count is >= 0 and at least its children's together (a locked node's ancestors "
        "are locked), and every node of a live request's prefix is locked",
        "SGLang #11970, #6888, #7130: lock_ref driven below zero made a running request's KV evictable",
        ("lock", "unlock", "prefill", "checkpoint", "release", "match_prefix", "insert"), _locks),
    RadixInvariant(
        "R2", "evictable + protected = the tokens in the tree: evictable the tokens of unlocked nodes, "
        "protected those of locked ones",
        "SGLang's evictable_size_/protected_size_ counters drifting from the tree (a split or a delete "
        "that forgot to move them), so the scheduler admitted requests the pool could not hold",
        _MUTATING, _sizes),
    RadixInvariant(
        "R3", "every KV slot is owned by exactly one node or one request's uncached tail, or free: never "
        "two owners, never owned and free, never lost",
        "a duplicate slot handed back by insert but kept by the tree (a leak, or KV freed under a node), "
        "SGLang's cache_unfinished_req freeing the wrong range",
        _MUTATING, _ownership),
    RadixInvariant(
        "R4", "a match is a prefix of the query and of the tree, in whole pages, and the longest one",
        "a match that returns more than the tree holds (a match ending inside a node answering the whole "
        "node), so a request read KV computed for other tokens",
        ("match_prefix", "lock", "unlock", "insert", "prefill"), _match),
    RadixInvariant(
        "R5", "a node's key is whole pages, never empty, the children of a node differ in their first "
        "token (page), and a node's children are of its namespace",
        "a split or insert that left two children with one first page, so a match followed one and missed "
        "the other's KV for ever",
        ("match_prefix", "insert", "lock", "prefill", "checkpoint", "release"), _distinct_children),
    RadixInvariant(
        "R6", "eviction never touches a locked node: a node locked before a call is in the tree after it",
        "SGLang #6888, #7130: eviction of a running request's KV",
        _MUTATING, _locked_kept),
    RadixInvariant(
        "R7", "LRU order: evict takes unlocked leaves least recently used first (equal times: the smaller "
        "tokens first)",
        "an eviction by insertion order, or one that did not refresh a matched path's access time, "
        "dropping the hot prefix and keeping cold ones",
        ("evict",), _lru),
    RadixInvariant(
        "R8", "an operation that raises changes nothing",
        "an admission that failed part way left its path locked or its slots taken",
        _MUTATING, _raise_changes_nothing),
    RadixInvariant(
        "R9", "a node's KV storage holds its tokens: what its slots index is what was written for its key",
        "stale KV in a recycled slot: a slot freed and reused while a node still named it",
        _MUTATING, _stored),
)

RADIX_INVARIANTS_BY_NAME = {invariant.name: invariant for invariant in RADIX_INVARIANTS}
_STATE_INVARIANTS = ("R1", "R2", "R3", "R5", "R9")


def check_state(num_slots: int, page_size: int, snapshot: tuple) -> None:
    """Raise `InvariantViolation` if the state breaks R1-R3, R5 or R9."""
    step = RadixStep(None, num_slots, page_size, snapshot, snapshot, False)
    for name in _STATE_INVARIANTS:
        witness = RADIX_INVARIANTS_BY_NAME[name].find(step)
        if witness is not None:
            raise InvariantViolation(f"{name} broken: {RADIX_INVARIANTS_BY_NAME[name].rule}: {witness}")
