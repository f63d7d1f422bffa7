"""The tensor cache's check as the tests call it: the program pipeline of every kind
(`cacheproof.check.programs`) on the cache's kind, its generator drawing from a scope (default: the
small one), and its counterexamples written and explained as `cacheproof check` writes them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from cacheproof.check.programs.command import explained_lines, explanations_of, misuse_checked, snippet_of
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, replay_program
from cacheproof.check.phases import Phase
from cacheproof.check.programs.run import ProgramOptions, ProgramReport, run_program_check, run_program_phases
from cacheproof.contract.calls import Call
from cacheproof.contract.steps import StepDifference
from cacheproof.contract.values import REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import capacity_cap_of
from cacheproof.spec.kinds import get_kind

KIND = get_kind("cache")
CONTRACT = KIND.profiles[KIND.default_profile].semantics


def check_cache(factory: Callable[[int], Any] | None, scope: Any = None, **options: Any) -> ProgramReport:
    """`run_program_check` of `factory` against the tensor cache's spec, the programs drawn from
    `scope` (None: the small scope); `options` are `ProgramOptions`' fields. Under `semantics` that
    trust the arguments no misuse is made, as `cacheproof check` makes none."""
    if options.get("semantics") is not None and "misuse" not in options:
        options["misuse"] = misuse_checked(options["semantics"])
    return run_program_check(KIND, factory, generator_for(KIND.name, scope), **options)


def snippet(example: ProgramCounterexample, impl: str, semantics: Any = None) -> str:
    """`example` as the runnable Python `cacheproof check` prints for the implementation `impl`."""
    return snippet_of(KIND, impl, example, semantics or CONTRACT)


def explained(example: ProgramCounterexample, semantics: Any = None) -> str:
    """The lines `cacheproof check` prints under `example`'s line: its kind, every difference, why."""
    (explanation,) = explanations_of(KIND, semantics or CONTRACT, [example])
    return "\n".join(explained_lines(example.difference, explanation))


def replayed(factory: Callable[[int], Any], size: int, calls: Sequence[Call],
             semantics: Any = None) -> tuple[int, StepDifference] | None:
    """Where `calls` on a fresh model and `factory(size)` first differ (the call's index) and how,
    by the checker's own step; None if nowhere."""
    setup = ProgramSetup(KIND, lambda size: KIND.new(size, semantics or CONTRACT), factory, generator_for(KIND.name),
                         KIND.names, True, len(calls))
    return replay_program(setup, size, calls)


def check_cache_phases(factory: Callable[[int], Any], phases: Sequence[Phase], max_capacity: int | None = None,
                       **options: Any) -> ProgramReport:
    """`run_program_phases` of `factory` on `phases` of the tensor cache's scopes, their capacities
    capped at `max_capacity` (default REAL_VALUE_CAPACITY) when the values the checker makes for the
    cache hold memory, as `cacheproof check` caps them; `options` are `ProgramOptions`' fields."""
    cap = capacity_cap_of(factory, max_capacity or REAL_VALUE_CAPACITY)
    capped = tuple(replace(phase, scope=phase.scope.capped(cap)) for phase in phases)
    return run_program_phases(KIND, factory, capped, ProgramOptions(**options))
