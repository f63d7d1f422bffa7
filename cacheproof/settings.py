"""cacheproof's Hypothesis settings, registered under its own names so that none replaces a user's:
`cacheproof-ci` (derandomized, no example database, bounded) when CI=true, `cacheproof-thorough`
for long local runs (2,000 examples; `cacheproof.testing` then draws from the wide scope too, as
`cacheproof check --thorough` does: docs/scope.md), `cacheproof-dev` otherwise. HYPOTHESIS_PROFILE
overrides the choice. ("Profile" in cacheproof means a semantic profile, spec/cache/profiles.py; these are
Hypothesis settings.)

`scratch_storage()` keeps the command line's Hypothesis runs from writing `.hypothesis/` into the
current folder (Hypothesis caches the constants of local modules there even without a database).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir, storage_directory

CI_SETTINGS, DEV_SETTINGS, THOROUGH_SETTINGS = "cacheproof-ci", "cacheproof-dev", "cacheproof-thorough"
"""The names cacheproof registers its Hypothesis settings under."""

_SLOW_GENERATION = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]


def register_settings(load: bool = True) -> str:
    """Register cacheproof's settings and return the name of the ones this environment asks for;
    load those too unless `load` is False (the pytest plugin registers them without loading any)."""
    settings.register_profile(
        CI_SETTINGS,
        derandomize=True,
        database=None,
        max_examples=50,
        deadline=None,
        print_blob=True,
        suppress_health_check=_SLOW_GENERATION,
    )
    settings.register_profile(DEV_SETTINGS, max_examples=100, deadline=None, suppress_health_check=_SLOW_GENERATION)
    settings.register_profile(
        THOROUGH_SETTINGS, max_examples=2000, deadline=None, suppress_health_check=_SLOW_GENERATION
    )
    name = settings_for_environment()
    if load:
        settings.load_profile(name)
    return name


@contextmanager
def scratch_storage() -> Iterator[None]:
    """Point Hypothesis's storage folder at a temporary folder, removed on exit, and restore it.

    A HYPOTHESIS_STORAGE_DIRECTORY the user set is left in use. Only the `cacheproof` commands use
    this; `cache_test_case` in a user's suite keeps the user's storage (and example database).
    """
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    home = storage_directory()
    previous = getattr(home, "home_directory", home)  # a plain Path in older Hypothesis versions
    # ignore_cleanup_errors: a worker thread the checker abandoned (a hung call, Ctrl-C) may still be
    # writing there; a folder left in the temporary directory beats an error at the end of a finished run
    with tempfile.TemporaryDirectory(prefix="cacheproof-hypothesis-", ignore_cleanup_errors=True) as folder:
        set_hypothesis_home_dir(folder)
        try:
            yield
        finally:
            set_hypothesis_home_dir(previous)


def settings_for_environment() -> str:
    """The settings this environment asks for: HYPOTHESIS_PROFILE, else `cacheproof-ci` when CI=true,
    else `cacheproof-dev`."""
    return os.environ.get("HYPOTHESIS_PROFILE") or (CI_SETTINGS if os.environ.get("CI") == "true" else DEV_SETTINGS)
