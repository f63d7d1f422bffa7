"""How the radix cache's views read in a difference report, and the step its invariants judge.

A report shows a differing `snapshot()` part by part: the free slots, the sizes, each node (its KV
slots, lock count, access rank and stored tokens, each concerning its own invariants) and each live
request; a differing `events()` (optional: a tree that announces no KV cache events is compared on
the snapshot) as its stored pages, removed pages and whether it cleared the tree.
`radix_step` builds, from an implementation's views before and after a call, the `RadixStep` the
invariants of spec/radix/invariants.py judge.
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.spec.kind import Naming, ViewPart, optional_method_views
from cacheproof.spec.radix.invariants import RadixStep

ALLOCATOR_RULE = ("a call takes KV slots from the token allocator for the tokens it caches or admits and hands back "
                  "duplicates, evicted nodes' slots and a released request's tail (docs/radix-contract.md, Slots)")
EVENTS_RULE = ("a call announces the pages it put in the tree, each after the page before it, the pages it took out, "
               "and a reset that dropped them all (docs/radix-contract.md, KV cache events)")
REQUEST_RULE = ("a live request holds its cached prefix locked and its other tokens' slots (docs/radix-contract.md, "
                "Request level)")


def _is_tuple(value: Any, length: int | None = None) -> bool:
    return isinstance(value, tuple) and (length is None or len(value) == length)


def _in(namespace: Any, names: Naming) -> str:
    """ " in namespace N", or nothing for the default namespace."""
    return "" if namespace is None else f" in namespace {names.value(namespace)}"


def snapshot_parts(snapshot: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(free slots, sizes, nodes, requests) as parts: the free count, the sizes, each node by its
    tokens, each request."""
    if not _is_tuple(snapshot, 4) or not all(_is_tuple(part) for part in snapshot[1:]):
        return None
    free, sizes, nodes, requests = snapshot
    if not _is_tuple(sizes, 2) or not all(_is_tuple(node, 7) for node in nodes) \
            or not all(_is_tuple(request, 5) for request in requests):
        return None
    parts = [
        ViewPart("free KV slots", names.value(free), ("R3",), ALLOCATOR_RULE),
        ViewPart("sizes", f"evictable {names.value(sizes[0])}, protected {names.value(sizes[1])}", ("R2",)),
    ]
    for prefix, key, slots, stored, lock, rank, namespace in nodes:
        parts.append(ViewPart.joined(f"node {names.value(tuple(prefix) + tuple(key))}{_in(namespace, names)}", (
            ViewPart("key", f"key {names.value(key)}", ("R4", "R5")),
            ViewPart("slots", f"slots {names.value(slots)}", ("R3",)),
            ViewPart("stored", f"stored {names.value(stored)}", ("R9",)),
            ViewPart("lock", f"lock {names.value(lock)}", ("R1", "R6")),
            ViewPart("access", f"access rank {names.value(rank)}", ("R7",)),
        )))
    for request, tokens, slots, prefix, namespace in requests:
        parts.append(ViewPart(names.thing("request", request) + _in(namespace, names),
                              f"tokens {names.value(tokens)}, slots {names.value(slots)}, prefix {names.value(prefix)}",
                              ("R1", "R3"), REQUEST_RULE))
    return parts


def events_parts(events: Any, names: Naming) -> Sequence[ViewPart] | None:
    """(stored, removed, cleared) as three parts: the stored pages as parent -> path, the removed
    paths, whether the tree was cleared."""
    if not _is_tuple(events, 3) or not _is_tuple(events[0]) or not _is_tuple(events[1]):
        return None
    stored = "; ".join(f"{names.value(entry[0]) if entry[0] is not None else 'the root'} -> {names.value(entry[1])}"
                       f" holding {names.value(entry[2])}" if _is_tuple(entry, 3) else names.value(entry)
                       for entry in events[0])
    removed = ", ".join(names.value(path) for path in events[1])
    return [ViewPart("stored pages (KV cache events)", stored or "none", rule=EVENTS_RULE),
            ViewPart("removed pages (KV cache events)", removed or "none", rule=EVENTS_RULE),
            ViewPart("cleared (KV cache events)", "yes" if events[2] else "no", rule=EVENTS_RULE)]


RADIX_READINGS = {"snapshot": snapshot_parts, "events": events_parts}
"""The radix cache's views, as `SpecKind.readings`."""

RADIX_VIEW_READERS = optional_method_views("events")
"""The optional view (`SpecKind.view_readers`): a tree that announces no KV cache events (no
`events()`) is compared on its snapshot."""

RADIX_SHAPES = {
    "snapshot": "a tuple (free slots, (evictable, protected), nodes, requests): nodes a tuple of (prefix tokens, "
                "key tokens, slot names, stored tokens, lock count, access rank, namespace) by namespace, then prefix + "
                "key; requests a tuple of (request id, tokens, slot names, prefix length, namespace) by request id "
                "(spec/radix/snapshot.py writes it)",
    "events": "a tuple (stored, removed, cleared): stored a tuple of (parent page's path or None, page's path, page's "
              "tokens), removed a sorted tuple of page paths, cleared a bool (spec/radix/events.py)",
}
"""The shape of the view's answer, in words (`SpecKind.shapes`)."""


def radix_step(call: Any, size: int, before: dict, after: dict, raised: bool, result: Any,
               semantics: Any) -> RadixStep:
    """The `RadixStep` of a call (`op`, `args`) from the views before and after it. The judge does
    not read `semantics`, its page size included, so R4 judges a match there without pages and
    maximality."""
    return RadixStep(call.op, size, None, before["snapshot"], after["snapshot"], raised, tuple(call.args), result,
                     call.kwargs.get("namespace"))
