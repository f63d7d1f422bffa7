"""The key universes calls draw from, and over which every comparison of `key in cache` ranges."""

from __future__ import annotations

from collections.abc import Hashable

SMALL_KEYS: tuple[Hashable, ...] = (0, 1, 2, 3, 4, 5)
"""The small scope's key universe: small, so that operations keep meeting the same entries."""

WIDE_KEYS: tuple[Hashable, ...] = (
    1, "1", ("img", 1), ("img", "1"), b"1",
    2, "2", ("img", 2), ("img", "2"), b"2",
    0, "0", b"0", ("img", 0),
    3, "3", ("img", 3), b"3",
    "a3f9c1", b"a3f9c1", ("a3f9c1", 0), ("a3f9c1", 1),
    17, "17", 65, "65", -1, "-1",
)
"""The wide scope's key pool: families of distinct keys that print, str() or encode alike."""
