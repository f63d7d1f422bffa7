"""A program check of an engine adapter under one of its kind's profiles, for the engine tests
(model_tests/engines): the profile's semantics and operations, misuse left out, as an engine's
profile trusts its callers."""

from __future__ import annotations

from typing import Any, Callable

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import ProgramReport, run_program_check
from cacheproof.spec.kinds import get_kind


def check_under_profile(kind_name: str, profile_name: str, factory: Callable[[int], Any], examples: int,
                        seed: int = 0) -> ProgramReport:
    kind = get_kind(kind_name)
    profile = kind.profiles[profile_name]
    return run_program_check(kind, factory, generator_for(kind_name), examples=examples, seed=seed,
                             semantics=profile.semantics, operations=profile.operations, misuse=False)
