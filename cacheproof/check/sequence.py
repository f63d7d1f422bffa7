"""Replay a call sequence on the spec and a cache, find the first divergence, and shrink it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cacheproof.check.calls import Call
from cacheproof.check.differential import normalize_snapshot, step_difference
from cacheproof.check.scope import SMALL_KEYS, WIDE_KEYS
from cacheproof.spec import CacheSpec
from cacheproof.spec.semantics import CONTRACT, Semantics


@dataclass(frozen=True)
class SequenceDivergence:
    """Where a replayed sequence first disagrees with the spec."""

    step: int  # index into the calls
    call: Call
    message: str
    spec_snapshot: tuple  # normalized, after the call
    cache_snapshot: tuple | None  # normalized, or None if the cache has no snapshot()


def first_divergence(
    factory: Callable[[int], Any],
    capacity_bytes: int,
    calls: Sequence[Call],
    on_step: Callable[[int], None] | None = None,
    semantics: Semantics = CONTRACT,
) -> SequenceDivergence | None:
    """Run `calls` on a fresh spec and a fresh `factory(capacity_bytes)`; the first difference, or None.

    `on_step(index)` is told the index of each call before it is made. After every call `in` is
    compared over the calls' own keys and every key of the small and wide scopes' pools, so a
    replay sees what the run saw whatever the example's key universe was.
    """
    spec = CacheSpec(capacity_bytes, semantics)
    cache = factory(capacity_bytes)
    keys = compared_keys(calls)
    for index, call in enumerate(calls):
        if on_step is not None:
            on_step(index)
        message = step_difference(spec, cache, call, keys)
        if message is not None:
            return SequenceDivergence(index, call, message, normalize_snapshot(spec.snapshot()), _snapshot_of(cache))
    return None


def _snapshot_of(cache: Any) -> tuple | None:
    """The cache's normalized snapshot; None when it has none or its snapshot() fails."""
    if not hasattr(cache, "snapshot"):
        return None
    try:
        return normalize_snapshot(cache.snapshot())
    except Exception:  # the divergence is reported all the same
        return None


def compared_keys(calls: Sequence[Call]) -> tuple:
    """The keys whose `in` a replay compares after every call: the checker's key universes and
    every hashable key the calls name, each once."""
    return tuple(dict.fromkeys(SMALL_KEYS + WIDE_KEYS + tuple(hashable_keys(calls))))


def hashable_keys(calls: Sequence[Call]):
    """The hashable keys the calls name, each once, in order of first use."""
    seen = set()
    for call in calls:
        if call.args and call.op not in ("evict",):
            key = call.args[0]
            try:
                if key not in seen:
                    seen.add(key)
                    yield key
            except TypeError:
                continue


def shrink(
    factory: Callable[[int], Any], capacity_bytes: int, calls: Sequence[Call], semantics: Semantics = CONTRACT
) -> list[Call]:
    """Drop calls one at a time while the sequence still diverges; the result diverges at its last call."""
    divergence = first_divergence(factory, capacity_bytes, calls, semantics=semantics)
    if divergence is None:
        return list(calls)
    current = list(calls[: divergence.step + 1])
    index = len(current) - 2
    while index >= 0:
        candidate = current[:index] + current[index + 1:]
        found = first_divergence(factory, capacity_bytes, candidate, semantics=semantics)
        if found is not None:
            current = candidate[: found.step + 1]
            index = min(index, len(current) - 1)
        index -= 1
    return current
