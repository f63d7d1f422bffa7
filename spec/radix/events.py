"""The KV cache events of the radix cache's last call: what a router that places requests by prefix
(SGLang's `enable_kv_cache_events`) learns of the tree.

A page of the tree is named by its path: the tokens from the root to the page's end (its hash,
for a router, stands for that path: the chained hash of its pages).

- stored: the pages a call put in the tree, in the order made, each as (parent, path, tokens):
  the path of the page before it on the way down (None for a page under the root), its own path,
  and the tokens it holds (the path's last page). A new node's pages come in token order, the
  first one's parent the last page above the node.
- removed: the paths of the pages a call took out of the tree (the pages of each node evicted),
  sorted: the order within one call tells a router nothing.
- cleared: whether the call dropped every page at once (`reset` answering True); that one event
  replaces the removals.

A split names no event: its pages stay where they were, only a node boundary moves between them.
Matching, locking and unlocking change no page. A call that raises announces nothing (as every
call of a spec kind, spec/announcing.py).
"""

from __future__ import annotations

from cacheproof.spec.announcing import announcing_calls

Page = tuple[int, ...]
RadixEvents = tuple[tuple[tuple[Page | None, Page, Page], ...], tuple[Page, ...], bool]
"""The `events()` view: (stored, removed, cleared) as the module docstring defines them."""

NO_EVENTS: RadixEvents = ((), (), False)
"""What a call that changes no page announces."""


class RadixCallEvents:
    """The events of one call, recorded as its steps put pages in the tree and take them out."""

    __slots__ = ("_stored", "_removed", "_cleared")

    def __init__(self) -> None:
        self._stored: list[tuple[Page | None, Page, Page]] = []
        self._removed: list[Page] = []
        self._cleared = False

    def store(self, path: Page, page_size: int) -> None:
        """The page ending `path` (page_size tokens) was put in the tree."""
        parent = path[:-page_size] or None
        self._stored.append((parent, path, path[-page_size:]))

    def remove(self, path: Page) -> None:
        """The page ending `path` was taken out of the tree."""
        self._removed.append(path)

    def clear(self) -> None:
        """Every page was dropped at once."""
        self._cleared = True

    def view(self) -> RadixEvents:
        return tuple(self._stored), tuple(sorted(self._removed)), self._cleared


announcing = announcing_calls(RadixCallEvents)
"""A radix spec operation whose call starts a fresh `RadixCallEvents` (`self._events`)."""
