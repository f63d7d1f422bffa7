"""A fresh spec and a fresh cache taking the same long call sequence, compared at O(1) amortized per call.

After every call: `len()`, and `key in cache` for the key the call names. The whole state (stats,
snapshot, `in` for every key of the spec's snapshot and every key named since the last full check,
the spec's own I1-I4) every max(16, 2 x entries) calls, as the monitor does, and whenever the
caller asks: O(entries) per full check, so O(1) amortized per call. A failing full check says only
that the state diverged since the last passing one; `first_state_divergence` then finds the call
by bisection, re-running the sequence from empty to each midpoint (spec and cache are
deterministic from empty): O(calls x log(calls since the last passing check)), paid once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from cacheproof.contract.calls import Call
from cacheproof.contract.outcomes import Outcome, inspection_failure, normalize_snapshot, run_call, run_spec_call
from cacheproof.contract.outcomes import state_difference

from cacheproof.spec.cache.invariants import Step, broken_invariants
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.kinds import new_spec

FULL_CHECK_MINIMUM = 16
FULL_CHECK_CALLS_PER_ENTRY = 2
"""A full state check every max(16, 2 * entries) calls."""

_KEYLESS_OPERATIONS = ("evict", "clear")
_NO_KEY = object()


class Lockstep:
    """`factory(capacity_bytes)` and `new_spec(capacity_bytes, semantics)`, fresh, made to take the same calls."""

    def __init__(self, factory: Callable[[int], Any], capacity_bytes: int, semantics: Semantics = CONTRACT) -> None:
        self.factory = factory
        self.capacity_bytes = capacity_bytes
        self.semantics = semantics
        self.spec = new_spec(capacity_bytes, semantics)
        self.cache = factory(capacity_bytes)
        self.steps = 0  # calls made
        self.matched_at = 0  # calls made when the last full check passed
        self._named: list[Hashable] = []  # keys named since the last full check

    def step(self, call: Call) -> tuple[Outcome, Outcome]:
        """Make `call` on the spec (with values made as the cache makes them), then on the cache."""
        expected = run_spec_call(self.spec, call, values_from=self.cache)
        actual = run_call(self.cache, call, self.capacity_bytes)
        self.steps += 1
        return expected, actual

    def quick_difference(self, call: Call) -> str | None:
        """`len()` and `in` for the call's key now; the whole state when a full check is due."""
        try:
            if len(self.cache) != len(self.spec):
                return f"len(): spec {len(self.spec)}, this cache {len(self.cache)}"
            key = _named_key(call)
            if key is not _NO_KEY:
                self._named.append(key)
                if (key in self.cache) != (key in self.spec):
                    return f"{key!r} in cache: spec {key in self.spec}, this cache {key in self.cache}"
        except Exception as error:  # a broken cache's len/in may itself fail
            return inspection_failure(error)
        if self.steps - self.matched_at >= max(FULL_CHECK_MINIMUM, FULL_CHECK_CALLS_PER_ENTRY * len(self.spec)):
            return self.full_difference()
        return None

    def full_difference(self) -> str | None:
        """The spec's own I1-I4, then len, `in`, stats and snapshot compared; None records a match."""
        snapshot = self.spec.snapshot()
        broken = broken_invariants(Step(None, self.capacity_bytes, snapshot, snapshot, False))
        if broken:
            return f"the spec itself breaks {', '.join(f'{i.name} ({i.rule})' for i in broken)}"
        try:
            difference = state_difference(self.spec, self.cache, self._named + [entry.key for entry in snapshot])
        except Exception as error:  # a broken cache's len/in/stats/snapshot may itself fail
            return inspection_failure(error)
        if difference is None:
            self.matched_at, self._named = self.steps, []
        return difference

    def snapshots(self) -> tuple[tuple, tuple | None]:
        """The spec's and the cache's normalized snapshots (the cache's None if it has none or it fails)."""
        cache_snapshot = None
        if hasattr(self.cache, "snapshot"):
            try:
                cache_snapshot = normalize_snapshot(self.cache.snapshot())
            except Exception:  # a broken cache's snapshot may itself fail; the divergence is still reported
                cache_snapshot = None
        return normalize_snapshot(self.spec.snapshot()), cache_snapshot


@dataclass(frozen=True)
class StateDivergence:
    """The first call after which the state differs, found by re-running from empty."""

    step: int  # 1-based: the number of calls made, the bad one last
    message: str
    expected: Outcome  # the spec's outcome of that call
    actual: Outcome  # the cache's
    spec_snapshot: tuple
    cache_snapshot: tuple | None


def first_state_divergence(
    factory: Callable[[int], Any], capacity_bytes: int, calls: Sequence[Call], matched: int, diverged: int,
    semantics: Semantics = CONTRACT,
) -> StateDivergence | None:
    """The first step in (matched, diverged] after which the state differs, given that it matched
    after `matched` calls and differs after `diverged`; None if a re-run does not reproduce that."""
    low, high = matched, diverged
    while high - low > 1:
        middle = (low + high) // 2
        if _rerun(factory, capacity_bytes, calls, middle, semantics)[0].full_difference() is None:
            low = middle
        else:
            high = middle
    lockstep, expected, actual = _rerun(factory, capacity_bytes, calls, high, semantics)
    message = lockstep.full_difference()
    if message is None:
        return None
    return StateDivergence(high, message, expected, actual, *lockstep.snapshots())


def _rerun(
    factory: Callable[[int], Any], capacity_bytes: int, calls: Sequence[Call], count: int, semantics: Semantics
) -> tuple[Lockstep, Outcome, Outcome]:
    """A fresh lockstep after the first `count` calls (count >= 1), with the outcomes of the last."""
    lockstep = Lockstep(factory, capacity_bytes, semantics)
    for call in calls[:count]:
        expected, actual = lockstep.step(call)
    return lockstep, expected, actual


def _named_key(call: Call) -> Any:
    """The key the call names, or _NO_KEY if it names none or the key does not hash."""
    if call.op in _KEYLESS_OPERATIONS or not call.args:
        return _NO_KEY
    key = call.args[0]
    try:
        hash(key)
    except Exception:  # an unhashable key, or one whose __hash__ raises: both sides refuse the call
        return _NO_KEY
    return key
