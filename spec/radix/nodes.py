"""The radix spec's state records: a tree node and a live request (spec/radix/tree.py works on them)."""

from __future__ import annotations

from typing import Any


class Node:
    """One node: its key, slots, lock count, last access, parent, children (by first page) and
    namespace (its parent's; a root's is given)."""

    def __init__(self, key: tuple, slots: list, parent: "Node | None", tick: tuple[int, int],
                 namespace: Any = None) -> None:
        self.key, self.slots, self.parent, self.tick = key, slots, parent, tick
        self.namespace = namespace if parent is None else parent.namespace
        self.lock = 0
        self.children: dict[tuple, Node] = {}

    def prefix(self) -> tuple:
        """The tokens above this node, root first."""
        runs, node = [], self.parent
        while node is not None:
            runs.append(node.key)
            node = node.parent
        return tuple(token for run in reversed(runs) for token in run)


class LiveRequest:
    """A live request: its tokens, its KV slots (the first `prefix` owned by the tree), the length of
    the path it holds locked, and its namespace."""

    def __init__(self, tokens: tuple, slots: list, prefix: int, namespace: Any) -> None:
        self.tokens, self.slots, self.prefix, self.namespace = tokens, slots, prefix, namespace


def copy_node(node: Node, parent: Node | None) -> Node:
    """An independent copy of `node` and every node below it, hung below `parent`."""
    twin = Node(node.key, list(node.slots), parent, node.tick, node.namespace)
    twin.lock = node.lock
    twin.children = {page: copy_node(child, twin) for page, child in node.children.items()}
    return twin
