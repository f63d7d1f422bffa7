"""`TorchRadixCache`: a radix prefix cache in the manner of SGLang's RadixCache, KV in a torch tensor.

It speaks the whole radix contract (docs/radix-contract.md). Only the snapshot's wire format
(`write_snapshot`: slots named canonically, times ranked) comes from the spec; the tree, the
allocator, the lock counts and the size counters are written here, so the checker can catch a bug
in any of them.

- The KV storage is `kv`, a tensor of `num_slots` token ids on `device` (cpu, cuda or meta): a
  slot is written with the token it holds when a caller takes it; the snapshot reads each node's
  tokens back from it (on "meta", which holds no data, from a CPU shadow written alike).
- `TokenAllocator` keeps the free slots in an int64 tensor: `alloc(n)` takes the first n,
  `free(slots)` appends them at the end (first in, first out; the contract leaves the order free).
- Each node keeps its key (a tuple of token ids, whole pages), its slots (an int64 tensor), its
  lock count, the call number of its last access and its key's namespace; one root holds every
  namespace, and children are found by (namespace, first page), as SGLang's `child_key_at` does.
- `evictable_size_` and `protected_size_` are counters moved by every lock change, insert, split
  and delete, as SGLang keeps them, not recomputed from the tree.
- Eviction pops unlocked leaves from a heap ordered by (last access, tokens), a parent left
  childless and unlocked pushed in turn.
- Token ids are int64 in storage: a token outside the int64 range is an InvalidArgumentError.
- One lock around each operation and view: threads that share a cache see them one at a time.
"""

from __future__ import annotations

import functools
import heapq
import threading
from typing import Any, Callable

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.spec.errors import CapacityError, InvalidArgumentError, WrongStateError
from cacheproof.spec.radix.snapshot import namespace_order, write_snapshot

__all__ = ["TorchRadixCache", "TokenAllocator", "radix_cache", "paged_radix_cache"]

_INT64 = range(-(2**63), 2**63)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def radix_cache(num_slots: int) -> "TorchRadixCache":
    """The checker's factory: a cache of `num_slots` KV slots, page size 1, on the CPU."""
    return TorchRadixCache(num_slots)


def paged_radix_cache(num_slots: int) -> "TorchRadixCache":
    """The checker's factory for `--profile paged`: pages of 2 tokens, on the CPU."""
    return TorchRadixCache(num_slots, page_size=2)


def _locked(method: Callable) -> Callable:
    @functools.wraps(method)
    def locked(self: "TorchRadixCache", *args: Any, **kwargs: Any) -> Any:
        with self._mutex:
            return method(self, *args, **kwargs)

    return locked


class TokenAllocator:
    """The free KV slots of a pool of `size`, in an int64 tensor, first in first out."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free_slots = torch.arange(size, dtype=torch.int64)

    def available(self) -> int:
        return int(self.free_slots.numel())

    def alloc(self, n: int) -> torch.Tensor:
        """The first `n` free slots, taken (the caller checked that n are free)."""
        taken, self.free_slots = self.free_slots[:n], self.free_slots[n:]
        return taken

    def free(self, slots: torch.Tensor) -> None:
        if slots.numel():
            self.free_slots = torch.cat((self.free_slots, slots))


class TreeNode:
    """A node: its key (tokens), slots, lock count, last access, parent, namespace and children by
    (namespace, first page)."""

    def __init__(self, key: tuple, value: torch.Tensor, parent: "TreeNode | None", access: int,
                 namespace: str | None = None) -> None:
        self.key, self.value, self.parent, self.last_access = key, value, parent, access
        self.namespace = namespace
        self.lock_ref = 0
        self.children: dict[tuple, TreeNode] = {}

    def tokens(self) -> tuple:
        """The tokens from the root down to the end of this node."""
        runs, node = [], self
        while node is not None:
            runs.append(node.key)
            node = node.parent
        return tuple(token for run in reversed(runs) for token in run)


class _Request:
    def __init__(self, tokens: tuple, slots: torch.Tensor, last_node: TreeNode, prefix: int,
                 namespace: str | None) -> None:
        self.tokens, self.slots, self.last_node, self.prefix = tokens, slots, last_node, prefix
        self.namespace = namespace


class TorchRadixCache:
    """A radix cache over `num_slots` KV slots in pages of `page_size` tokens, storage on `device`."""

    def __init__(self, num_slots: int, page_size: int = 1, *, device: str | torch.device = "cpu") -> None:
        if not _is_int(num_slots) or num_slots < 1:
            raise InvalidArgumentError(f"num_slots must be an int >= 1, got {num_slots!r}")
        if not _is_int(page_size) or page_size < 1:
            raise InvalidArgumentError(f"page_size must be an int >= 1, got {page_size!r}")
        self._mutex = threading.RLock()
        self.num_slots, self.page_size = num_slots, page_size
        self.allocator = TokenAllocator(num_slots)
        self.kv = torch.zeros(num_slots, dtype=torch.int64, device=device)
        self._readable = torch.zeros(num_slots, dtype=torch.int64) if self.kv.device.type == "meta" else self.kv
        self.root = TreeNode((), torch.empty(0, dtype=torch.int64), None, 0)
        self.root.lock_ref = 1
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self._calls = 0
        self._requests: dict[int, _Request] = {}

    # ----------------------------------------------------------------- argument checks

    @staticmethod
    def _request_id(operation: str, request: object) -> int:
        if not _is_int(request):
            raise InvalidArgumentError(f"{operation}: request must be an int, got {request!r}")
        return request  # type: ignore[return-value]

    def _tokens(self, operation: str, tokens: object, whole_pages: bool = False) -> tuple:
        if not isinstance(tokens, (tuple, list)) or not all(map(_is_int, tokens)):
            raise InvalidArgumentError(f"{operation}: tokens must be a tuple of ints, got {tokens!r}")
        if any(token not in _INT64 for token in tokens):
            raise InvalidArgumentError(f"{operation}: a token id must fit in int64 storage, got {tokens!r}")
        if whole_pages and len(tokens) % self.page_size:
            raise InvalidArgumentError(f"{operation}: {len(tokens)} tokens are not whole pages of {self.page_size}")
        return tuple(tokens)

    @staticmethod
    def _namespace(operation: str, namespace: object) -> str | None:
        if namespace is not None and not isinstance(namespace, str):
            raise InvalidArgumentError(f"{operation}: a namespace is None or a str, got {namespace!r}")
        return namespace

    def _live(self, operation: str, request: int) -> _Request:
        live = self._requests.get(request)
        if live is None:
            raise WrongStateError(f"{operation}(request={request}): no such live request")
        return live

    # ----------------------------------------------------------------- tree level

    @_locked
    def match_prefix(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        tokens = self._tokens("match_prefix", tokens)
        namespace = self._namespace("match_prefix", namespace)
        _, node = self._match(self._page_floor(tokens), self._next_call(), namespace)
        return self._depth(node)

    @_locked
    def insert(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        tokens = self._tokens("insert", tokens, whole_pages=True)
        namespace = self._namespace("insert", namespace)
        if len(tokens) > self.allocator.available():
            raise CapacityError(f"insert: {len(tokens)} KV slots needed, {self.allocator.available()} free")
        slots = self._take(tokens)
        cached = self._insert(tokens, slots, self._next_call(), namespace)
        self.allocator.free(slots[:cached])
        return cached

    @_locked
    def lock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        tokens = self._tokens("lock", tokens)
        namespace = self._namespace("lock", namespace)
        _, node = self._match(self._page_floor(tokens), self._next_call(), namespace)
        self.inc_lock_ref(node)
        return self._depth(node)

    @_locked
    def unlock(self, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        tokens = self._tokens("unlock", tokens)
        namespace = self._namespace("unlock", namespace)
        node, length = self._peek(self._page_floor(tokens), namespace)
        if node is not self.root:
            whole = length == self._depth(node)
            own = node.lock_ref - sum(child.lock_ref for child in node.children.values()) if whole else 0
            key = self._page_floor(tokens)[:length]
            held = sum(1 for live in self._requests.values()
                       if live.namespace == namespace and live.prefix == length and live.tokens[:length] == key)
            if own <= held:
                raise WrongStateError(f"unlock(tokens={tokens}): no lock of its own was taken at {key}")
        _, node = self._match(self._page_floor(tokens), None, namespace)
        self.dec_lock_ref(node)
        return length

    @_locked
    def evict(self, n: int) -> int:
        if not _is_int(n) or n < 0:
            raise InvalidArgumentError(f"evict: n must be an int >= 0, got {n!r}")
        if n > self.evictable_size_:
            raise CapacityError(f"evict(n={n}): {self.evictable_size_} tokens are evictable")
        return self._evict(n)

    @_locked
    def reset(self) -> bool:
        if self._requests or self.protected_size_:
            return False
        for node in self._all_nodes():
            self.allocator.free(node.value)
        self.root.children.clear()
        self.evictable_size_ = 0
        return True

    @_locked
    def evictable_size(self) -> int:
        return self.evictable_size_

    @_locked
    def protected_size(self) -> int:
        return self.protected_size_

    @_locked
    def total_size(self) -> int:
        return sum(len(node.key) for node in self._all_nodes())

    # ----------------------------------------------------------------- request level

    @_locked
    def prefill(self, request: int, tokens: tuple[int, ...], *, namespace: str | None = None) -> int:
        request = self._request_id("prefill", request)
        tokens = self._tokens("prefill", tokens)
        namespace = self._namespace("prefill", namespace)
        if not tokens:
            raise InvalidArgumentError(f"prefill(request={request}): no tokens")
        if request in self._requests:
            raise WrongStateError(f"prefill(request={request}): the request is live")
        key = self._page_floor(tokens[:-1])
        node, length = self._peek(key, namespace)
        unlocked_on_path, walk = 0, node
        while walk is not self.root:
            unlocked_on_path += len(walk.key) if walk.lock_ref == 0 else 0
            walk = walk.parent
        # the node the match ends inside counts only the matched part
        unlocked_on_path -= self._depth(node) - length if node.lock_ref == 0 else 0
        need = len(tokens) - length
        if need > self.allocator.available() + self.evictable_size_ - unlocked_on_path:
            raise CapacityError(f"prefill(request={request}): {need} KV slots needed")
        prefix_slots, last = self._match(key, self._next_call(), namespace)
        self.inc_lock_ref(last)
        if need > self.allocator.available():
            self._evict(need - self.allocator.available())
        own = self._take(tokens[length:])
        self._requests[request] = _Request(tokens, torch.cat((prefix_slots, own)), last, length, namespace)
        return length

    @_locked
    def checkpoint(self, request: int, *, up_to: int) -> int:
        request = self._request_id("checkpoint", request)
        if not _is_int(up_to) or up_to < 0:
            raise InvalidArgumentError(f"checkpoint(request={request}): up_to must be an int >= 0, got {up_to!r}")
        live = self._live("checkpoint", request)
        if up_to > len(live.tokens):
            raise InvalidArgumentError(f"checkpoint(request={request}, up_to={up_to}): beyond its {len(live.tokens)} tokens")
        return self._cache_request(live, max(up_to - up_to % self.page_size, live.prefix))

    @_locked
    def release(self, request: int) -> int:
        request = self._request_id("release", request)
        live = self._live("release", request)
        whole = len(live.tokens) - len(live.tokens) % self.page_size
        cached = self._cache_request(live, max(whole, live.prefix))
        self.allocator.free(live.slots[live.prefix:])
        self.dec_lock_ref(live.last_node)
        del self._requests[request]
        return cached

    # ----------------------------------------------------------------- lock counts

    def inc_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root:
            if node.lock_ref == 1:
                self.evictable_size_ += len(node.key)
                self.protected_size_ -= len(node.key)
            node.lock_ref -= 1
            node = node.parent

    # ----------------------------------------------------------------- tree walks

    def _next_call(self) -> int:
        self._calls += 1
        return self._calls

    def _page_floor(self, tokens: tuple) -> tuple:
        return tokens[: len(tokens) - len(tokens) % self.page_size]

    def _depth(self, node: TreeNode) -> int:
        return len(node.tokens())

    def _common_pages(self, key: tuple, tokens: tuple) -> int:
        n = 0
        for a, b in zip(key, tokens):
            if a != b:
                break
            n += 1
        return n - n % self.page_size

    @staticmethod
    def _child_key(namespace: str | None, page: tuple) -> tuple:
        """The key a child is found by in its parent's `children`: its namespace and first page."""
        return namespace, page

    def _key_of(self, node: TreeNode) -> tuple:
        """The key `node` is found by in its parent's `children`."""
        return self._child_key(node.namespace, node.key[:self.page_size])

    def _peek(self, tokens: tuple, namespace: str | None) -> tuple[TreeNode, int]:
        """The node a match of `tokens` in `namespace` reaches (possibly ending inside it) and the
        match length, nothing split."""
        node, length = self.root, 0
        while length < len(tokens):
            child = node.children.get(self._child_key(namespace, tokens[length:length + self.page_size]))
            if child is None:
                break
            common = self._common_pages(child.key, tokens[length:])
            length += common
            node = child
            if common < len(child.key):
                break
        return node, length

    def _match(self, tokens: tuple, access: int | None, namespace: str | None) -> tuple[torch.Tensor, TreeNode]:
        """The slots of the longest cached prefix of `tokens` in `namespace` and the node it ends
        at, splitting the node it ends inside; each node walked gets `access` (None: none)."""
        node, length, values = self.root, 0, []
        while length < len(tokens):
            child = node.children.get(self._child_key(namespace, tokens[length:length + self.page_size]))
            if child is None:
                break
            common = self._common_pages(child.key, tokens[length:])
            if common < len(child.key):
                child = self._split(child, common)
            if access is not None:
                child.last_access = access
            values.append(child.value)
            length += common
            node = child
        return (torch.cat(values) if values else torch.empty(0, dtype=torch.int64)), node

    def _split(self, child: TreeNode, at: int) -> TreeNode:
        head = TreeNode(child.key[:at], child.value[:at].clone(), child.parent, child.last_access, child.namespace)
        head.lock_ref = child.lock_ref
        child.parent.children[self._key_of(head)] = head
        child.key, child.value, child.parent = child.key[at:], child.value[at:].clone(), head
        head.children = {self._key_of(child): child}
        return head

    def _insert(self, tokens: tuple, slots: torch.Tensor, access: int, namespace: str | None) -> int:
        _, node = self._match(tokens, access, namespace)
        length = self._depth(node)
        if length < len(tokens):
            leaf = TreeNode(tokens[length:], slots[length:].clone(), node, access, namespace)
            node.children[self._key_of(leaf)] = leaf
            self.evictable_size_ += len(leaf.key)
        return length

    def _take(self, tokens: tuple) -> torch.Tensor:
        """Slots for `tokens` from the allocator, each written with its token."""
        slots = self.allocator.alloc(len(tokens))
        if len(tokens):
            values = torch.tensor(tokens, dtype=torch.int64)
            self.kv[slots.to(self.kv.device)] = values.to(self.kv.device)
            if self._readable is not self.kv:
                self._readable[slots] = values
        return slots

    def _all_nodes(self) -> list[TreeNode]:
        found, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.children.values())
        return found

    def _evictable_leaf(self, node: TreeNode) -> bool:
        """Whether eviction may take `node` now: a leaf, unlocked, not the root."""
        return node is not self.root and not node.children and node.lock_ref == 0

    def _evict(self, n: int) -> int:
        heap = [self._heap_entry(leaf) for leaf in self._all_nodes() if self._evictable_leaf(leaf)]
        heapq.heapify(heap)
        freed = 0
        while freed < n and heap:
            leaf = heapq.heappop(heap)[-1]
            freed += self._delete_leaf(leaf)
            parent = leaf.parent
            if self._evictable_leaf(parent):
                heapq.heappush(heap, self._heap_entry(parent))
        return freed

    @staticmethod
    def _heap_entry(leaf: TreeNode) -> tuple:
        """A leaf's place in the eviction heap: last access, then tokens, then namespace."""
        return leaf.last_access, leaf.tokens(), namespace_order(leaf.namespace), id(leaf), leaf

    def _delete_leaf(self, leaf: TreeNode) -> int:
        del leaf.parent.children[self._key_of(leaf)]
        self.allocator.free(leaf.value)
        self.evictable_size_ -= len(leaf.key)
        return len(leaf.key)

    def _free_duplicates(self, slots: torch.Tensor) -> None:
        """Hand back a request's slots of tokens another request cached meanwhile."""
        self.allocator.free(slots)

    def _cache_request(self, live: _Request, upto: int) -> int:
        """Insert the request's first `upto` tokens with its slots, free its duplicates, take the
        tree's slots in their place and move its lock to the new last node."""
        tokens = live.tokens[:upto]
        cached = self._insert(tokens, live.slots[:upto], self._next_call(), live.namespace)
        self._free_duplicates(live.slots[live.prefix:cached])
        tree_slots, last = self._match(tokens, None, live.namespace)
        self.inc_lock_ref(last)
        self.dec_lock_ref(live.last_node)
        live.slots = torch.cat((tree_slots, live.slots[upto:]))
        live.last_node, live.prefix = last, upto
        return cached

    # ----------------------------------------------------------------- view

    @_locked
    def snapshot(self) -> tuple:
        """The contract's view (spec/radix/snapshot.py), each node's tokens read from the KV storage."""
        stored = self._readable.tolist()
        nodes = []
        for node in self._all_nodes():
            slots = node.value.tolist()
            nodes.append((node.parent.tokens(), node.key, slots, tuple(stored[s] for s in slots),
                          node.lock_ref, node.last_access, node.namespace))
        requests = [(rid, live.tokens, live.slots.tolist(), live.prefix, live.namespace)
                    for rid, live in self._requests.items()]
        return write_snapshot(self.allocator.available(), self.evictable_size_, self.protected_size_, nodes, requests)
