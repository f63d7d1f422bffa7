"""What a failing cache test shows: the divergence, its calls shrunk to a runnable snippet, and the
exception the cache itself raised at the diverging call, with the user's frames only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from cacheproof.check.sequential.counterexample import counterexample_of
from cacheproof.check.sequential.run import LONG_SEQUENCE, LONG_SHRINK_SECONDS
from cacheproof.contract.calls import Call
from cacheproof.contract.differences import OUTCOME, diverging_step
from cacheproof.contract.faults import with_users_frames_only
from cacheproof.contract.sequence import first_divergence
from cacheproof.sandbox.fault_search import DIVERGENCE, MINIMUM_SHRINK_SECONDS, Failure, same_divergence, shrink_failure
from cacheproof.spec.cache.semantics import Semantics


class Explained(NamedTuple):
    """A divergence as a report shows it: `text` (the divergence, the shrunk calls as a snippet) and
    `cause`, the cache's own exception at the diverging call when raising it is the difference
    (its traceback cut to the user's frames), else None."""

    text: str
    cause: BaseException | None = None


def explained(
    factory: Callable[[int], Any], impl: str, capacity_bytes: int, calls: Sequence[Call], divergence: str,
    semantics: Semantics,
) -> Explained:
    """`divergence`, seen on `calls` on `factory(capacity_bytes)`, with the calls shrunk (the checker's
    shrinker, which drops calls) and written as Python that reproduces it (`impl`: "module:factory").
    The text names the divergence of the shrunk calls."""

    def attempt(candidate: list[Call]) -> Failure | None:
        found = first_divergence(factory, capacity_bytes, candidate, semantics=semantics)
        return None if found is None else Failure(found.step, found.message, DIVERGENCE)

    first = attempt(list(calls))
    if first is None:  # the replay agrees: the cache answered differently this time
        return Explained(diverges(impl, divergence))
    seconds = LONG_SHRINK_SECONDS if first.step >= LONG_SEQUENCE else MINIMUM_SHRINK_SECONDS
    shrunk, found, _ = shrink_failure(attempt, calls, first, seconds, same_failure=same_divergence(factory, capacity_bytes, semantics=semantics))
    counterexample = counterexample_of(factory, capacity_bytes, shrunk, found.message, semantics)
    text = f"{diverges(impl, found.message)}\n\nshrunk to {len(shrunk)} calls:\n{counterexample.to_python(impl)}"
    step = diverging_step(factory, capacity_bytes, shrunk, semantics)
    raised = None if step is None or step.actual is None else step.actual.error
    if raised is None or not any(difference.observation == OUTCOME for difference in step.differences):
        return Explained(text)
    return Explained(text, with_users_frames_only(raised))


def diverges(impl: str, divergence: str) -> str:
    """The first line of a failure: which cache diverges, and how."""
    return f"{impl} diverges from the spec: {divergence}"
