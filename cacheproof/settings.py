"""Hypothesis settings profiles: `ci` (derandomized, no example database, bounded) when CI=true,
`thorough` for long local runs, `dev` otherwise. HYPOTHESIS_PROFILE overrides the choice."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SLOW_GENERATION = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]


def register_profiles() -> str:
    """Register the profiles, load the one this environment asks for, and return its name."""
    settings.register_profile(
        "ci",
        derandomize=True,
        database=None,
        max_examples=50,
        deadline=None,
        print_blob=True,
        suppress_health_check=_SLOW_GENERATION,
    )
    settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=_SLOW_GENERATION)
    settings.register_profile(
        "thorough", max_examples=2000, deadline=None, suppress_health_check=_SLOW_GENERATION
    )
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
    settings.load_profile(name)
    return name
