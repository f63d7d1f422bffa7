"""Radix caches for the checker's own tests: correct ones it must never flag, broken ones (one bug
each, from SGLang's radix-cache history) that `cacheproof check --spec radix` must find, and
faulty ones (a hang) it must report.

Each broken tree is the correct `TorchRadixCache` with one fault; BROKEN lists them with the
invariant whose witness names the fault.
"""

from __future__ import annotations

import threading

import torch

from cacheproof.impl.radix_cache import TokenAllocator, TorchRadixCache


class LastInFirstOutCache(TorchRadixCache):
    """Correct, with another allocator: the most recently freed slot is handed out first. Which
    free slot an allocator returns is the implementation's freedom (docs/radix-contract.md)."""

    def __init__(self, num_slots: int) -> None:
        super().__init__(num_slots)
        self.allocator = _LastInFirstOut(num_slots)


class _LastInFirstOut(TokenAllocator):
    def alloc(self, n: int) -> torch.Tensor:
        keep = self.free_slots.numel() - n
        taken, self.free_slots = self.free_slots[keep:].flip(0), self.free_slots[:keep]
        return taken


class OneNamespace(TorchRadixCache):
    """Correct for a tree with no namespaces (`--semantics namespaces=one`): its keyed calls take
    no namespace argument, so a call that passes one is a TypeError."""

    def match_prefix(self, tokens):
        return super().match_prefix(tokens)

    def insert(self, tokens):
        return super().insert(tokens)

    def lock(self, tokens):
        return super().lock(tokens)

    def unlock(self, tokens):
        return super().unlock(tokens)

    def prefill(self, request, tokens):
        return super().prefill(request, tokens)


class UnlockBelowZero(TorchRadixCache):
    """dec_lock_ref with no check (SGLang #11970): an unlock of a path no one locked drives its lock
    counts below zero, and the node's tokens count as neither evictable nor protected."""

    def unlock(self, tokens, *, namespace=None):
        with self._mutex:
            tokens, namespace = self._tokens("unlock", tokens), self._namespace("unlock", namespace)
            _, node = self._match(self._page_floor(tokens), None, namespace)
            self.dec_lock_ref(node)
            return self._depth(node)


class EvictsLockedLeaves(TorchRadixCache):
    """Eviction takes leaves whatever their lock (SGLang #6888, #7130: a running request's KV
    evicted): the leaf heap is built from every leaf."""

    def _evictable_leaf(self, node):
        return node is not self.root and not node.children


class SizesDriftOnDelete(TorchRadixCache):
    """Deleting a leaf forgets to take its tokens off evictable_size_: the sizes drift from the tree."""

    def _delete_leaf(self, leaf):
        del leaf.parent.children[self._key_of(leaf)]
        self.allocator.free(leaf.value)
        return len(leaf.key)


class SplitLosesLock(TorchRadixCache):
    """A node split gives the new parent lock 0 (node splits that lose lock counts): a locked path
    split by a match becomes evictable above its locked child."""

    def _split(self, child, at):
        head = super()._split(child, at)
        if head.lock_ref:
            self.evictable_size_ += len(head.key)
            self.protected_size_ -= len(head.key)
        head.lock_ref = 0
        return head


class MatchPastTheSplit(TorchRadixCache):
    """match_prefix answers the whole node a match ends inside, without splitting it: a match that
    returns more than the tree holds."""

    def match_prefix(self, tokens, *, namespace=None):
        with self._mutex:
            tokens, namespace = self._tokens("match_prefix", tokens), self._namespace("match_prefix", namespace)
            node, _ = self._peek(self._page_floor(tokens), namespace)
            access = self._next_call()
            walk = node
            while walk is not self.root:
                walk.last_access = access
                walk = walk.parent
            return self._depth(node)


class KeepsDuplicates(TorchRadixCache):
    """checkpoint and release keep the request's slots of the part another request cached
    meanwhile instead of handing them back: each such slot is lost to the allocator."""

    def _free_duplicates(self, slots):
        """The bug: the duplicates are never handed back to the allocator."""


class StaleAccessTimes(TorchRadixCache):
    """A match does not refresh the access time of the nodes it walks, so eviction goes by insertion
    order, not least recent use (LRU order)."""

    def _match(self, tokens, access, namespace):
        return super()._match(tokens, None, namespace)


class NamespacesShareNodes(TorchRadixCache):
    """A child is found by its first page alone, its namespace dropped (SGLang's `RadixKey.child_key_at`
    under mutation-duel mutants #193 and #194): a key walks into another namespace's nodes, so a
    request matches KV cached for another LoRA adapter or salt."""

    @staticmethod
    def _child_key(namespace, page):
        return page


BROKEN = {
    "UnlockBelowZero": "R1", "EvictsLockedLeaves": "R6", "SizesDriftOnDelete": "R2", "SplitLosesLock": "R1",
    "MatchPastTheSplit": "R4", "KeepsDuplicates": "R3", "StaleAccessTimes": "R7", "NamespacesShareNodes": "R4",
}
"""Each broken tree, with the invariant its fault breaks."""


class FreeCountInSixBits(TorchRadixCache):
    """The free count is kept in a 6-bit field: past 63 free slots it wraps. Only the wide scope's
    caches (above 48 slots) reach it: `check --spec radix` does not find it, `--thorough` does."""

    def snapshot(self):
        free, *rest = super().snapshot()
        return (free % 64, *rest)


_NEVER = threading.Event()


class TreeSnapshotOneSlotShort(TorchRadixCache):
    """A correct radix cache whose snapshot reports one free slot fewer than it has: its answers are
    right, only a comparison of views finds it (model_tests/view_liars.py)."""

    def snapshot(self):
        free, *rest = super().snapshot()
        return (free - 1, *rest)


class MatchHangs(TorchRadixCache):
    """match_prefix of any token never returns (a deadlock on the tree's lock)."""

    def match_prefix(self, tokens, *, namespace=None):
        if tokens:
            _NEVER.wait(600)
        return super().match_prefix(tokens, namespace=namespace)


__all__ = [*BROKEN, "LastInFirstOutCache", "OneNamespace", "FreeCountInSixBits", "MatchHangs"]
