"""Draws that depend on the seed alone: `seeded_draws()` keeps Hypothesis from mixing in local constants.

Recent Hypothesis releases draw, now and then, a constant it read out of the source of the
"local" modules loaded in the process: the project's own and the user's files, not those in
site-packages. Which modules are loaded differs between `cacheproof check` on its own, the same
check inside a pytest session and a check after another one in the same process, so one seed would
give different call sequences, and a broken cache found in one of them could pass in another. The
checker's strategies already put sizes and keys on the boundaries that matter, so those constants add
nothing here. Inside `seeded_draws()` the pool of local constants is empty; the pool of Hypothesis's
global constants is kept. Outside it, a user's own Hypothesis tests behave as Hypothesis made them.

Hypothesis has no public switch for this, so this module is the one place cacheproof reaches into
Hypothesis's internals (`providers._get_local_constants`, `providers.CONSTANTS_CACHE`);
model_tests/test_seeded_draws.py fails as soon as a Hypothesis release renames or drops them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis.internal.conjecture import providers


@contextmanager
def seeded_draws() -> Iterator[None]:
    """Within the block, Hypothesis draws no constant harvested from loaded modules (see the module)."""
    original = getattr(providers, "_get_local_constants", None)
    if original is None or not hasattr(providers, "CONSTANTS_CACHE"):
        yield  # a Hypothesis without local constants: its draws depend on the seed already
        return
    no_constants = providers.Constants()
    providers._get_local_constants = lambda: no_constants
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        providers.CONSTANTS_CACHE.cache.clear()
