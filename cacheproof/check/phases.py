"""A run in phases, for every spec kind: each phase draws its examples from one scope of the kind.

A kind's scopes are its own data (the tensor cache's keys and capacities in
`cacheproof.check.programs.generators.cache_calls`, the block pool's pool sizes, requests and token runs in
`cacheproof.check.programs.generators.block_calls`); a `Phase` only says how many examples of how many calls
to draw from one of them, so that `--thorough` and `--workers` (which divides each phase's
examples among the workers) treat every kind alike.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Phase:
    """One part of a run: `examples` examples of `steps` steps drawn from `scope` (anything with a
    `name`: the kind's scope). `shrink`: let Hypothesis shrink a failure (off for long lives, whose
    sequences the checker's own shrinking, which drops chunks of calls within a time budget,
    handles better)."""

    scope: Any
    examples: int
    steps: int
    shrink: bool = True


def shares(phases: tuple[Phase, ...], workers: int) -> list[tuple[Phase, ...]]:
    """Each worker's phases: every phase's examples divided as evenly as they go (the first workers
    get one more); ValueError when a worker would get no example of some phase."""
    smallest = min(phase.examples for phase in phases)
    if smallest < workers:
        raise ValueError(f"--workers {workers} needs at least {workers} examples per phase, got {smallest}")
    return [
        tuple(replace(phase, examples=phase.examples // workers + (index < phase.examples % workers)) for phase in phases)
        for index in range(workers)
    ]
