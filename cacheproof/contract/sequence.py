"""Replay a call sequence on the spec and a cache and find the first divergence (shrinking is
`cacheproof.sandbox.fault_search.shrink_failure`, the one shrinker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call
from cacheproof.contract.outcomes import normalize_snapshot, step_difference
from cacheproof.contract.keys import KEY_DOMAINS, SMALL_KEYS, WIDE_KEYS
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.kinds import new_spec


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
    compared over `compared_keys(calls)` (the calls' own keys, the scopes' pools and every key
    domain's), so a replay sees what the run saw whatever the example's key universe was.
    """
    spec = new_spec(capacity_bytes, semantics)
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
    """The keys whose `in` a replay compares after every call: the checker's key universes (the
    scopes' pools, and the keys of `KEY_DOMAINS` of the types the calls name) and every hashable key
    the calls name, each once."""
    named = tuple(hashable_keys(calls))
    types = {type(key) for key in named}
    domains = tuple(key for pool in KEY_DOMAINS.values() for key in pool if type(key) in types)
    return tuple(dict.fromkeys(SMALL_KEYS + WIDE_KEYS + domains + named))


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

