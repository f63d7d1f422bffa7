"""`RadixCacheSpec`: the reference model of a radix prefix cache (SGLang's RadixAttention).

Each operation is written as a TLA+ action: argument checks, then the guard on the state, then the
updates; every check runs before the first update, so a call that raises changes nothing. Checks
run in a fixed order: InvalidArgumentError (the request, then the other arguments in order) before
WrongStateError before CapacityError.

State: a tree of token runs per namespace (each namespace's root holds none, and a key's namespace
picks the root its walk starts from, so two namespaces never share a node); each node has its key (a
run of whole pages), its KV slots (one per token, owned by the node), a lock count and the logical
time of its last access; a node's children differ in their first page. The token allocator holds the
free slots and hands out the lowest first. The clock ticks once per call that touches the tree
(match_prefix, insert, lock, prefill, checkpoint, release); every node on the path such a call walks
gets that tick (semantics access_stamps "node": the nodes a call makes get later times of that call,
and a node it splits is stamped whole first). A time is (call number, order made within the call).
Per live request: its tokens, its namespace, its slots (the first `prefix` of them owned by the
tree, the rest its own) and `prefix`, the length of the path it holds locked (the scheduler's
req.last_node).
"""

from __future__ import annotations

from typing import Any

from cacheproof.spec.arguments import is_int
from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.radix import invariants as radix_invariants
from cacheproof.spec.radix.events import RadixCallEvents, RadixEvents, announcing
from cacheproof.spec.radix.nodes import LiveRequest, Node, copy_node
from cacheproof.spec.radix.semantics import RADIX_CONTRACT, RadixSemantics
from cacheproof.spec.radix.snapshot import namespace_order, write_snapshot


class RadixCacheSpec:
    """The executable spec of a radix cache over `num_slots` KV slots, under `semantics`
    (spec/radix/semantics.py: the page size; under pool "whole-pages" only the whole pages of
    `num_slots` are held, and `num_slots` answers those)."""

    def __init__(self, num_slots: int, semantics: RadixSemantics = RADIX_CONTRACT) -> None:
        if not is_int(num_slots) or num_slots < 1:
            raise InvalidArgumentError(f"num_slots must be an int >= 1, got {num_slots!r}")
        self.semantics = semantics
        self.page = semantics.page_size
        self._asked_slots = num_slots
        self._num_slots = num_slots - num_slots % self.page if semantics.pool == "whole-pages" else num_slots
        self._free: set[int] = set(range(self._num_slots))
        self._roots: dict[Any, Node] = {}  # namespace -> its root, made when first named
        self._clock, self._made = 0, 0
        self._requests: dict[int, LiveRequest] = {}
        self._events = RadixCallEvents()  # the last call's; each call starts a fresh one (never mutated after it)

    # Tree level ---------------------------------------------------------------------------

    @announcing
    def match_prefix(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        """The length of the longest cached prefix of `tokens` in `namespace` in whole pages; the
        node it ends inside is split there, and every node of the path gets this call's tick."""
        tokens, root = self._check_key("match_prefix", tokens, namespace)
        return len(self._walk(self._tick(), root, tokens)[1])

    @announcing
    def insert(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        """Cache `tokens` in `namespace` (whole pages): slots for all of them come from the allocator
        (lowest first), the tree keeps those of the part not yet cached and hands the others back. The
        answer: the length of the part already cached. CapacityError if fewer slots are free."""
        tokens, root = self._check_key("insert", tokens, namespace, whole_pages=True)
        if len(tokens) > len(self._free):
            raise CapacityError(f"insert: {len(tokens)} tokens need {len(tokens)} KV slots, {len(self._free)} are free")
        slots = self._alloc(len(tokens))
        cached = self._insert(self._tick(), root, tokens, slots)
        self._free.update(slots[:cached])
        return cached

    @announcing
    def lock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        """`match_prefix(tokens, namespace=namespace)`, then lock + 1 on the node it ends at and every node
        above it (SGLang's inc_lock_ref(last_node)); the answer is the match's length."""
        tokens, root = self._check_key("lock", tokens, namespace)
        node, matched = self._walk(self._tick(), root, tokens)
        self._inc(node)
        return len(matched)

    @announcing
    def unlock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        """lock - 1 on the node a match of `tokens` in `namespace` ends at and every node above it
        (SGLang's dec_lock_ref), touching no access time. WrongStateError, changing nothing, unless that
        node holds a lock of its own (its lock count above its children's together) that no live request
        of the namespace whose prefix ends there holds: a lock is dropped where it was taken, a
        request's only by its release, and no count goes below zero. The answer is the match's length."""
        tokens, root = self._check_key("unlock", tokens, namespace)
        walked = self._peek(root, tokens)
        length = sum(used for _, used in walked)
        if walked:
            node, used = walked[-1]
            path = node.prefix() + node.key[:used]
            below = node.lock if used < len(node.key) else sum(child.lock for child in node.children.values())
            held = self._held(namespace, path)
            if node.lock - below <= held:
                raise WrongStateError(
                    f"unlock(tokens={tokens}): the node of tokens {path} holds {node.lock - below} locks of its own, "
                    f"{held} of them live requests'; a lock is dropped where it was taken, a request's only by its "
                    "release, and a lock count never goes below zero (SGLang #11970)"
                )
        node, _ = self._walk(None, root, tokens)
        self._dec(node)
        return length

    @announcing
    def evict(self, n: int) -> int:
        """Free at least `n` tokens' slots: unlocked leaves, the least recently used first (equal times:
        the smaller prefix + key first, then the default namespace, then by name), a parent left
        childless and unlocked becoming a leaf in turn. The answer: the tokens freed. CapacityError,
        changing nothing, when n is above the evictable size (that would take a locked node)."""
        if not is_int(n) or n < 0:
            raise InvalidArgumentError(f"evict: n must be an int >= 0, got {n!r}")
        evictable = self._size(unlocked=True)
        if n > evictable:
            raise CapacityError(
                f"evict(n={n}): only {evictable} tokens are evictable; the other "
                f"{self._size(unlocked=False)} are locked, and eviction never takes a locked node"
            )
        return self._evict(n)

    @announcing
    def reset(self) -> bool:
        """Empty the tree, every slot it owns freed, and return True; False, changing nothing,
        while a node is locked or a request is live."""
        if self._requests or any(node.lock for node in self._nodes()):
            return False
        for node in self._nodes():
            self._free.update(node.slots)
        self._roots.clear()
        self._events.clear()
        return True

    @announcing
    def evictable_size(self) -> int:
        """Tokens in unlocked nodes."""
        return self._size(unlocked=True)

    @announcing
    def protected_size(self) -> int:
        """Tokens in locked nodes."""
        return self._size(unlocked=False)

    @announcing
    def total_size(self) -> int:
        """Tokens in the tree."""
        return self._size()

    # Request level ------------------------------------------------------------------------

    @announcing
    def prefill(self, request: int, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        """Admit `request` with `tokens` (at least one) in `namespace`: the cached prefix of tokens[:-1] in
        whole pages is matched and locked (the last token is always computed), slots for the other
        tokens allocated, unlocked leaves evicted first if too few are free. The answer: the prefix
        length. WrongStateError for a live request; CapacityError, changing nothing, if free plus
        evictable slots (those of the matched path aside) are too few."""
        self._check_request("prefill", request)
        tokens, root = self._check_key("prefill", tokens, namespace)
        if not tokens:
            raise InvalidArgumentError(f"prefill(request={request}): tokens must hold at least one token")
        if request in self._requests:
            raise WrongStateError(f"prefill(request={request}): the request is live; release it first")
        walked = self._peek(root, tokens[:-1])
        need = len(tokens) - sum(used for _, used in walked)
        path_unlocked = sum(used for node, used in walked if node.lock == 0)
        available = len(self._free) + self._size(unlocked=True) - path_unlocked
        if need > available:
            raise CapacityError(
                f"prefill(request={request}): {need} tokens need KV slots, {len(self._free)} are free and "
                f"{available - len(self._free)} more evictable"
            )
        node, matched = self._walk(self._tick(), root, tokens[:-1])
        self._inc(node)
        if need > len(self._free):
            self._evict(need - len(self._free))
        slots = [slot for path_node in reversed(self._path_nodes(root, matched)) for slot in path_node.slots]
        self._requests[request] = LiveRequest(tokens, slots + self._alloc(need), len(matched), namespace)
        return len(matched)

    @announcing
    def checkpoint(self, request: int, *, up_to: int) -> int:
        """Cache the first `up_to` tokens of `request` (whole pages, never fewer than its locked
        prefix): the tree keeps the request's slots of the part not yet cached, the request's
        slots of the part another request cached meanwhile are freed and replaced by the tree's,
        and its lock moves from its old prefix to the new one. The answer: the part already cached."""
        self._check_request("checkpoint", request)
        if not is_int(up_to) or up_to < 0:
            raise InvalidArgumentError(f"checkpoint(request={request}): up_to must be an int >= 0, got {up_to!r}")
        live = self._live("checkpoint", request)
        if up_to > len(live.tokens):
            raise InvalidArgumentError(
                f"checkpoint(request={request}, up_to={up_to}): the request has {len(live.tokens)} tokens"
            )
        return self._cache(live, max(self._pages(up_to), live.prefix))

    @announcing
    def release(self, request: int) -> int:
        """Cache the tokens of `request` in whole pages as checkpoint does, free its slots past
        them, unlock its prefix and forget it. The answer: the part already cached."""
        self._check_request("release", request)
        live = self._live("release", request)
        cached = self._cache(live, max(self._pages(len(live.tokens)), live.prefix))
        self._free.update(live.slots[live.prefix:])
        if live.prefix:
            self._dec(self._path_nodes(self._root(live.namespace), live.tokens[:live.prefix])[0])
        del self._requests[request]
        return cached

    # The Model protocol ---------------------------------------------------------------------

    @property
    def num_slots(self) -> int:
        return self._num_slots

    def snapshot(self) -> tuple:
        """The view of spec/radix/snapshot.py: free slots, sizes, nodes and requests."""
        nodes = [(node.prefix(), node.key, node.slots, node.key, node.lock, node.tick, node.namespace)
                 for node in self._nodes()]
        requests = [(rid, live.tokens, live.slots, live.prefix, live.namespace) for rid, live in self._requests.items()]
        return write_snapshot(len(self._free), self._size(unlocked=True), self._size(unlocked=False), nodes, requests)

    def events(self) -> RadixEvents:
        """The KV cache events of the last call (spec/radix/events.py)."""
        return self._events.view()

    def state_key(self) -> tuple:
        """The snapshot: it decides every later answer and view (slots by name, times by rank)."""
        return self.snapshot()

    def copy(self) -> "RadixCacheSpec":
        """An independent spec in the same state."""
        twin = RadixCacheSpec(self._asked_slots, self.semantics)
        twin._free, twin._clock, twin._made = set(self._free), self._clock, self._made
        twin._roots = {namespace: copy_node(root, None) for namespace, root in self._roots.items()}
        twin._requests = {rid: LiveRequest(r.tokens, list(r.slots), r.prefix, r.namespace)
                          for rid, r in self._requests.items()}
        twin._events = self._events
        return twin

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if the state breaks a state invariant of
        spec/radix/invariants.py."""
        radix_invariants.check_state(self._num_slots, self.page, self.snapshot())

    def live_requests(self) -> tuple[int, ...]:
        """The live requests' ids, ascending (for the call generator)."""
        return tuple(sorted(self._requests))

    def tokens_of(self, request: int) -> tuple[int, ...]:
        """A live request's tokens (for the call generator)."""
        return self._requests[request].tokens

    def unlockable(self) -> tuple[tuple[tuple[int, ...], Any], ...]:
        """(tokens, namespace) of every node an unlock may name: one holding a lock of its own (its count
        above its children's together) beyond those of live requests whose prefix ends there (for the
        call generator: under misuse "trusted" it names no other)."""
        found = []
        for node in self._nodes():
            path = node.prefix() + node.key
            below = sum(child.lock for child in node.children.values())
            if node.lock - below > self._held(node.namespace, path):
                found.append((path, node.namespace))
        return tuple(sorted(found, key=lambda found: (namespace_order(found[1]), found[0])))

    def structure(self) -> tuple[tuple[int, int | None, int, int], ...]:
        """(identity, parent's identity or None for the root, key length, lock count) of every
        node, identities lasting as long as the node (for the prover's refinement check: a split's
        lower part keeps the node's identity, its upper part is a new node)."""
        return tuple((id(node), None if node.parent.parent is None else id(node.parent), len(node.key), node.lock)
                     for node in self._nodes())

    def paths(self) -> tuple[tuple[tuple[int, ...], int, Any], ...]:
        """(prefix + key, lock count, namespace) of every node (for the call generator)."""
        return tuple((node.prefix() + node.key, node.lock, node.namespace) for node in self._nodes())

    def __repr__(self) -> str:
        return (f"RadixCacheSpec(num_slots={self._num_slots}, page_size={self.page}, free={len(self._free)}, "
                f"tokens={self._size()}, requests={len(self._requests)})")

    # Checks -------------------------------------------------------------------------------

    def _check_request(self, operation: str, request: object) -> None:
        if not is_int(request):
            raise InvalidArgumentError(f"{operation}: request must be an int, got {request!r}")

    def _check_key(self, operation: str, tokens: object, namespace: object, *,
                   whole_pages: bool = False) -> tuple[tuple, "Node"]:
        """The tokens as a tuple and the namespace's root, after the argument checks."""
        if not isinstance(tokens, (tuple, list)):
            raise InvalidArgumentError(f"{operation}: tokens must be a tuple of ints, got {tokens!r}")
        for token in tokens:
            if not is_int(token):
                raise InvalidArgumentError(f"{operation}: token {token!r} is not an int")
        if whole_pages and len(tokens) % self.page:
            raise InvalidArgumentError(
                f"{operation}: {len(tokens)} tokens are not whole pages of {self.page}; the tree caches whole pages"
            )
        if namespace is not None and not isinstance(namespace, str):
            raise InvalidArgumentError(f"{operation}: namespace must be None or a str, got {namespace!r}")
        return tuple(tokens), self._root(namespace)

    def _live(self, operation: str, request: int) -> LiveRequest:
        if request not in self._requests:
            raise WrongStateError(f"{operation}(request={request}): the request is not live (prefill admits it)")
        return self._requests[request]

    # Steps --------------------------------------------------------------------------------

    def _root(self, namespace: Any) -> Node:
        """The root of `namespace`'s tree (made, empty, when first named)."""
        return self._roots.setdefault(namespace, Node((), [], None, (0, 0), namespace))

    def _held(self, namespace: Any, path: tuple) -> int:
        """How many live requests of `namespace` hold exactly `path` as their locked prefix."""
        return sum(1 for live in self._requests.values()
                   if live.namespace == namespace and live.prefix == len(path) and live.tokens[:len(path)] == path)

    def _pages(self, length: int) -> int:
        return length - length % self.page

    def _tick(self) -> tuple[int, int]:
        """The next call's time: (call number, 0)."""
        self._clock, self._made = self._clock + 1, 0
        return self._clock, 0

    def _made_stamp(self, tick: tuple[int, int]) -> tuple[int, int]:
        """The time of a node a call with `tick` makes: the call's tick itself ("call"), or, for
        access_stamps "node", a time after the walk's, later for each node the call makes."""
        if self.semantics.access_stamps == "call":
            return tick
        self._made += 1
        return tick[0], self._made

    def _alloc(self, n: int) -> list[int]:
        taken = sorted(self._free)[:n]
        self._free.difference_update(taken)
        return taken

    def _nodes(self) -> list[Node]:
        found, stack = [], [child for root in self._roots.values() for child in root.children.values()]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.children.values())
        return found

    def _common(self, key: tuple, tokens: tuple) -> int:
        """The length, in whole pages, of the common prefix of `key` and `tokens`."""
        length = 0
        while length < min(len(key), len(tokens)) and key[length] == tokens[length]:
            length += 1
        return self._pages(length)

    def _peek(self, root: Node, tokens: tuple) -> list[tuple[Node, int]]:
        """The nodes a match of `tokens` from `root` walks, root side first, each with how many of
        its tokens the match takes (fewer than its key for the node the match ends inside), changing
        nothing."""
        node, length, tokens, walked = root, 0, tokens[:self._pages(len(tokens))], []
        while length < len(tokens):
            child = node.children.get(tokens[length:length + self.page])
            if child is None:
                break
            common = self._common(child.key, tokens[length:])
            walked.append((child, common))
            length += common
            if common < len(child.key):
                break
            node = child
        return walked

    def _split(self, child: Node, at: int) -> Node:
        """Split `child` after `at` tokens: a new parent keeps the first `at` tokens, their slots,
        the child's lock count and access time."""
        parent = child.parent
        head = Node(child.key[:at], child.slots[:at], parent, child.tick)
        head.lock = child.lock
        parent.children[child.key[:self.page]] = head
        child.key, child.slots, child.parent = child.key[at:], child.slots[at:], head
        head.children[child.key[:self.page]] = child
        return head

    def _walk(self, tick: tuple[int, int] | None, root: Node, tokens: tuple) -> tuple[Node, tuple]:
        """The node a match of `tokens` from `root` ends at (the node it ends inside split there)
        and the matched tokens; every node of the path gets `tick` (None: no access)."""
        node, length, tokens = root, 0, tokens[:self._pages(len(tokens))]
        while length < len(tokens):
            child = node.children.get(tokens[length:length + self.page])
            if child is None:
                break
            common = self._common(child.key, tokens[length:])
            if tick is not None and self.semantics.access_stamps == "node":
                child.tick = tick  # the node entered is stamped whole, before a split
            if common < len(child.key):
                child = self._split(child, common)
                if tick is not None:
                    child.tick = self._made_stamp(tick)
            elif tick is not None:
                child.tick = tick
            length += common
            node = child
        return node, tokens[:length]

    def _path_nodes(self, root: Node, matched: tuple) -> list[Node]:
        """The nodes below `root` whose keys make up `matched` exactly, deepest first (none for the
        root)."""
        node, _ = self._walk(None, root, matched)
        path = []
        while node.parent is not None:
            path.append(node)
            node = node.parent
        return path

    def _insert(self, tick: tuple[int, int], root: Node, tokens: tuple, slots: list) -> int:
        """Put `tokens` with `slots` in the tree below `root` (whole pages); the answer is the length
        already cached, whose slots the caller still holds."""
        node, matched = self._walk(tick, root, tokens)
        length = len(matched)
        if length < len(tokens):
            leaf = Node(tokens[length:], list(slots[length:]), node, self._made_stamp(tick))
            node.children[leaf.key[:self.page]] = leaf
            for end in range(length + self.page, len(tokens) + 1, self.page):
                self._events.store(tokens[:end], self.page)
        return length

    def _inc(self, node: Node) -> None:
        while node.parent is not None:
            node.lock += 1
            node = node.parent

    def _dec(self, node: Node) -> None:
        while node.parent is not None:
            node.lock -= 1
            node = node.parent

    def _unlocked_leaves(self) -> list[Node]:
        return [node for node in self._nodes() if not node.children and node.lock == 0]

    def _size(self, *, unlocked: bool | None = None) -> int:
        """Tokens in the unlocked nodes (True), the locked ones (False), or all (None)."""
        return sum(len(node.key) for node in self._nodes() if unlocked is None or (node.lock == 0) == unlocked)

    def _evict(self, n: int) -> int:
        """Delete unlocked leaves, the least recently used first, until `n` tokens are freed (n is
        at most the evictable size); the answer is the tokens freed."""
        freed = 0
        while freed < n:
            leaf = min(self._unlocked_leaves(),
                       key=lambda node: (node.tick, node.prefix() + node.key, namespace_order(node.namespace)))
            freed += self._delete(leaf)
        return freed

    def _delete(self, leaf: Node) -> int:
        path = leaf.prefix()
        del leaf.parent.children[leaf.key[:self.page]]
        self._free.update(leaf.slots)
        for end in range(self.page, len(leaf.key) + 1, self.page):
            self._events.remove(path + leaf.key[:end])
        return len(leaf.key)

    def _cache(self, live: LiveRequest, upto: int) -> int:
        """Insert the request's first `upto` tokens with its slots, free its duplicates, take the
        tree's slots in their place and move its lock from its old prefix to the new one. Under
        access_stamps "node" the inserted path is then matched again, every node of it stamped with
        one later time of the call (SGLang's checkpoint re-matches to find the request's new node)."""
        tokens, old, root = live.tokens[:upto], live.tokens[:live.prefix], self._root(live.namespace)
        tick = self._tick()
        cached = self._insert(tick, root, tokens, live.slots[:upto])
        self._free.update(live.slots[live.prefix:cached])
        node, _ = self._walk(None if self.semantics.access_stamps == "call" else self._made_stamp(tick), root, tokens)
        self._inc(node)
        self._dec(self._path_nodes(root, old)[0] if old else root)
        tree_slots = [slot for path_node in reversed(self._path_nodes(root, tokens)) for slot in path_node.slots]
        live.slots[:upto] = tree_slots
        live.prefix = upto
        return cached
