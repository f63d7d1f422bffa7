"""Replay a call sequence of any spec kind on a fresh model and a fresh implementation and find the
first divergence (shrinking is `cacheproof.sandbox.fault_search.shrink_failure`, the one shrinker).

After every call the outcomes and every view the kind compares (`SpecKind.compared_views`) are
compared by the one differential step (`contract.steps.differential_step`), as `check` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call
from cacheproof.contract.steps import StepDifference, differential_step
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind


@dataclass(frozen=True)
class SequenceDivergence:
    """Where a replayed sequence first disagrees with the spec: the call at index `step`, and
    everything that differs there."""

    step: int  # index into the calls
    call: Call
    difference: StepDifference

    @property
    def message(self) -> str:
        """The difference in one line (`StepDifference.describe`)."""
        return self.difference.describe()


def first_divergence(
    factory: Callable[[int], Any],
    size: int,
    calls: Sequence[Call],
    on_step: Callable[[int], None] | None = None,
    semantics: Any = None,
    kind: SpecKind | str = DEFAULT_KIND,
    *,
    model: Any = None,
    after_call: Callable[[Any, int, Call], None] | None = None,
) -> SequenceDivergence | None:
    """Run `calls` on a fresh model of `kind` (`kind.new(size, semantics)`, default semantics when
    None; or `model`, fresh, when given) and a fresh `factory(size)`; the first difference, or None.

    `on_step(index)` is told the index of each call before it is made; `after_call(model, index,
    call)` after it, before its difference is returned (a check of the model's own invariants)."""
    kind = get_kind(kind) if isinstance(kind, str) else kind
    if model is None:
        model = kind.new(size) if semantics is None else kind.new(size, semantics)
    implementation = factory(size)
    views, error_names, readers = kind.compared_views, kind.error_names, kind.view_readers
    for index, call in enumerate(calls):
        if on_step is not None:
            on_step(index)
        difference = differential_step(model, implementation, call, views, error_names=error_names, readers=readers)
        if after_call is not None:
            after_call(model, index, call)
        if difference is not None:
            return SequenceDivergence(index, call, difference)
    return None
