"""The checker's draws from Hypothesis: `seeded_draws()` makes them depend on the seed alone and
draws a program's byte string in one pass.

**The seed alone.** Recent Hypothesis releases draw, now and then, a constant it read out of the
source of the "local" modules loaded in the process: the project's own and the user's files, not
those in site-packages. Which modules are loaded differs between `cacheproof check` on its own, the
same check inside a pytest session and a check after another one in the same process, so one seed
would give different call sequences, and a broken cache found in one of them could pass in another.
The checker's strategies already put sizes and keys on the boundaries that matter, so those
constants add nothing here. Inside `seeded_draws()` the pool of local constants is empty; the pool
of Hypothesis's global constants is kept.

**One pass.** Hypothesis draws a byte string of a fixed length one byte per loop turn of its
collection helper (`HypothesisProvider.draw_bytes`: `many()`, then `randbytes(1)`), about 0.2 ms for
a program's 480 bytes, a tenth of the checker's time per program. Inside `seeded_draws()` a
fixed-length string is drawn as the same bytes, from the same generator in the same order, in one
pass (`one_pass_bytes`): every seed's programs stay what they were, only cheaper to draw. A string
of a drawn length still goes through Hypothesis's own loop, which also draws when to stop.

Outside the block, a user's own Hypothesis tests behave as Hypothesis made them. Hypothesis has no
public switch for either, so this module is the one place cacheproof reaches into Hypothesis's
internals (`providers._get_local_constants`, `providers.CONSTANTS_CACHE`,
`HypothesisProvider.draw_bytes`, `_maybe_draw_constant`, `_random`); model_tests/test_seeded_draws.py
fails as soon as a Hypothesis release renames or drops them, or draws other bytes than `one_pass_bytes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from typing import Any

from hypothesis.internal.conjecture import providers

_HYPOTHESIS_DRAW_BYTES = providers.HypothesisProvider.draw_bytes
"""Hypothesis's own byte-string draw, which `one_pass_bytes` stands in for inside `seeded_draws()`."""


def one_pass_bytes(provider: Any, min_size: int = 0, max_size: int = providers.COLLECTION_DEFAULT_MAX_SIZE) -> bytes:
    """`HypothesisProvider.draw_bytes`, the same bytes drawn in one pass when the length is fixed:
    first the chance of one of Hypothesis's constants (`_maybe_draw_constant`, as Hypothesis's draw
    does), else `min_size` bytes, each the top byte of one 32-bit word of the provider's generator,
    what `randbytes(1)` returns. A length to draw is left to Hypothesis."""
    if min_size != max_size:
        return _HYPOTHESIS_DRAW_BYTES(provider, min_size, max_size)
    constant = provider._maybe_draw_constant("bytes", {"min_size": min_size, "max_size": max_size})
    if constant is not None:
        return constant
    return bytes(map(provider._random.getrandbits, repeat(8, min_size)))


@contextmanager
def seeded_draws() -> Iterator[None]:
    """Within the block, Hypothesis draws no constant harvested from loaded modules, and draws a
    fixed-length byte string in one pass (see the module); on leaving it, both are as they were."""
    provider = providers.HypothesisProvider
    draw_bytes = provider.draw_bytes
    local_constants = getattr(providers, "_get_local_constants", None)
    constants = local_constants is not None and hasattr(providers, "CONSTANTS_CACHE")  # else: seed alone already
    provider.draw_bytes = one_pass_bytes
    if constants:
        no_constants = providers.Constants()
        providers._get_local_constants = lambda: no_constants
        providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        provider.draw_bytes = draw_bytes
        if constants:
            providers._get_local_constants = local_constants
            providers.CONSTANTS_CACHE.cache.clear()
