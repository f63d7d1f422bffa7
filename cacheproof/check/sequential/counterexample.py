"""A counterexample of the tensor cache's check: a failing call sequence as the report shows it.

`counterexample_from` builds one from a failing sequence, with every difference at its last call,
the why and the kind when the diverging step was replayed. `interrupted_counterexample` builds one
from the smallest failing sequence found so far when the user's Ctrl-C stops its shrinking: a real
failing sequence (its snippet fails when run), just not minimal, marked "shrinking interrupted".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from cacheproof.contract import snippet
from cacheproof.contract.calls import Call
from cacheproof.contract.differences import Difference, DivergingStep, diverging_step
from cacheproof.contract.explain import SnapshotDiff, explanation, snapshot_diff
from cacheproof.contract.faults import CacheFault
from cacheproof.contract.outcomes import run_spec_call
from cacheproof.contract.sequence import compared_keys
from cacheproof.sandbox.fault_search import DIVERGENCE, Failure, ending_of
from cacheproof.sandbox.guarded_call import Watch, supervised
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.kinds import new_spec

SHRINKING_INTERRUPTED = "shrinking interrupted"
"""Added to the message of a counterexample whose shrinking the user's Ctrl-C stopped."""


@dataclass(frozen=True)
class Counterexample:
    """The shrunk sequence of calls on a fresh cache of `capacity_bytes` that diverges at its last call.

    `differences` lists every difference at that call (`cacheproof.contract.differences`), `why` the
    snapshot diff and the rules involved (`cacheproof.contract.explain`), `kind` what makes it a
    different divergence from the others of the run (`cacheproof.check.sequential.distinct`); all are empty
    for a hang, a crash or a cache that is not deterministic, and so is `state_diff` (also when the
    cache has no snapshot).
    """

    capacity_bytes: int
    calls: tuple[Call, ...]
    message: str
    spec_errors: tuple[str | None, ...] = ()  # per call, the contract error the spec raised
    ending: str = "diverges here"  # what the last call does: diverges here, does not return, ...
    differences: tuple[Difference, ...] = ()
    why: tuple[str, ...] = ()
    state_diff: SnapshotDiff | None = None  # spec against cache after the last call; None when unknown
    result_check: str | None = None  # a condition on `result` that holds when the cache's result is the spec's
    kind: str | None = None

    def trace_calls(self) -> tuple[Call, ...]:
        """The calls a trace of this counterexample records: the calls, and when the divergence is
        `key in cache` for a key no call names (1 beside "1", say), a last `contains` call of it, so
        that a replay, which checks `in` only for keys the trace names, sees it too."""
        membership = snippet.MEMBERSHIP.match(self.message)
        if membership is None:
            return self.calls
        for key in compared_keys(self.calls):
            if repr(key) == membership.group(1):
                return (*self.calls, Call("contains", (key,)))
        return self.calls

    def to_python(self, impl: str, title: str = "cacheproof counterexample") -> str:
        """A runnable snippet that fails where the checker saw the difference (`cacheproof.contract.snippet`):
        build the cache from `impl` ("module:factory"), make the calls, assert the spec's observations."""
        return snippet.render(
            impl, self.capacity_bytes, self.calls, self.message, self.spec_errors, self.ending,
            self.differences, self.result_check, title,
        )


def counterexample_from(
    capacity_bytes: int, calls: Sequence[Call], message: str, ending: str = "diverges here",
    semantics: Semantics = CONTRACT, step: DivergingStep | None = None,
) -> Counterexample:
    """The counterexample of `calls`; with the replayed diverging `step`, every difference, the why
    and the kind too."""
    spec = new_spec(capacity_bytes, semantics)
    spec_errors = tuple(run_spec_call(spec, call).error for call in calls)
    names = tuple(None if error is None else type(error).__name__ for error in spec_errors)
    if step is None:
        return Counterexample(capacity_bytes, tuple(calls), message, names, ending)
    check = None
    if step.expected.error is None:
        check = snippet.result_check(step.call, step.expected.result, step.stored_recipe)
    state = None if step.cache_after is None else snapshot_diff(step.spec_after, step.cache_after)
    return Counterexample(
        capacity_bytes, tuple(calls), message, names, ending, step.differences,
        explanation(step, capacity_bytes, semantics), state, check, step.kind,
    )


def replayed(factory: Any, capacity_bytes: int, calls: Sequence[Call], semantics: Semantics) -> DivergingStep | None:
    """Every difference at the last of `calls`, replayed on a fresh cache of the factory's own."""
    attempt = factory.for_attempt()
    try:
        return diverging_step(attempt, capacity_bytes, calls, semantics)
    finally:
        attempt.close()


def interrupted_counterexample(
    factory: Any, watch: Watch, capacity_bytes: int, calls: Sequence[Call], failure: Failure,
    semantics: Semantics = CONTRACT,
) -> Counterexample | None:
    """The counterexample of `calls`, the smallest sequence found failing like `failure` (at its last
    call) when the user's Ctrl-C stopped shrinking it; its message says "shrinking interrupted".

    A divergence is replayed once more, supervised, on a fresh cache of `factory`'s, for every
    difference at its last call, so that its snippet asserts them and fails when run. None when that
    replay agrees with the spec (a cache that is not deterministic) or hangs: no snippet could fail.
    A hang or a crash is reported as it was seen (replaying it would cost the call timeout again).
    """
    message = f"{failure.message} ({SHRINKING_INTERRUPTED})"
    if failure.kind != DIVERGENCE:
        return counterexample_from(capacity_bytes, calls, message, ending_of(failure), semantics)
    try:
        step = supervised(lambda: replayed(factory, capacity_bytes, calls, semantics), watch)
    except CacheFault:
        return None
    if step is None:
        return None
    return counterexample_from(capacity_bytes, calls, message, semantics=semantics, step=step)
