"""The radix cache's one view, `snapshot()`, and how an implementation writes it.

The snapshot is (free slots, (evictable size, protected size), nodes, requests):
- free slots: how many KV slots the token allocator holds free;
- nodes: one (prefix, key, slots, stored, lock, access rank, namespace) per node but the roots,
  ordered by namespace (the default, None, first; then by name), then prefix + key: the tokens
  above the node, its own run of tokens, its KV slots, the tokens read back from the KV storage at
  those slots, its lock count, the rank of its last access among all nodes' (0 the oldest; equal
  times equal ranks), and the namespace of its key;
- requests: one (request, tokens, slots, prefix length, namespace) per live request, by request id.

Which free slot an allocator hands out, and what its clock reads, are the implementation's
freedom: the snapshot names slots canonically (`canonical`: each slot by the order in which it
first appears, nodes first, then requests) and times by rank, so two caches that own their slots
alike and order their accesses alike write the same snapshot. A slot owned twice keeps one name
and shows twice; a slot lost shows in the free count. An implementation builds its snapshot with
`write_snapshot` from its own raw slots and times, as a shared wire format.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

RawNode = tuple  # (prefix tokens, key tokens, raw slots, stored tokens, lock count, access time, namespace)
RawRequest = tuple  # (request, tokens, raw slots, prefix length, namespace)


def namespace_order(namespace: Any) -> tuple:
    """Where `namespace` sorts: the default namespace (None) first, then the others by name."""
    return namespace is not None, "" if namespace is None else str(namespace)


def canonical(slot_lists: Iterable[Sequence[Any]]) -> list[tuple[int, ...]]:
    """Each list of raw slots with every slot renamed by the order of its first appearance over all
    the lists (0, 1, 2, ...)."""
    names: dict[Any, int] = {}
    return [tuple(names.setdefault(slot, len(names)) for slot in slots) for slots in slot_lists]


def ranks(times: Sequence[Any]) -> list[int]:
    """Each time's dense rank among `times` (0 the oldest, equal times the same rank)."""
    order = {time: rank for rank, time in enumerate(sorted(set(times)))}
    return [order[time] for time in times]


def write_snapshot(free: int, evictable: int, protected: int, nodes: Iterable[RawNode],
                   requests: Iterable[RawRequest]) -> tuple:
    """The snapshot of a cache with `free` free slots, the sizes it reports, its nodes (any order)
    and its live requests (any order), slots named canonically and times ranked."""
    ordered = sorted(nodes, key=lambda node: (namespace_order(node[6]), tuple(node[0]) + tuple(node[1]), len(node[0])))
    live = sorted(requests, key=lambda request: request[0])
    slots = canonical([node[2] for node in ordered] + [request[2] for request in live])
    times = ranks([node[5] for node in ordered])
    written_nodes = tuple(
        (tuple(prefix), tuple(key), slots[i], tuple(stored), lock, times[i], namespace)
        for i, (prefix, key, _, stored, lock, _, namespace) in enumerate(ordered)
    )
    written_requests = tuple(
        (request, tuple(tokens), slots[len(ordered) + i], prefix_length, namespace)
        for i, (request, tokens, _, prefix_length, namespace) in enumerate(live)
    )
    return free, (evictable, protected), written_nodes, written_requests
