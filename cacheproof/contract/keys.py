"""The key universes calls draw from, and over which every comparison of `key in cache` ranges.

`KEY_DOMAINS` names the domains a user picks keys from (`--keys`, `cache_test(keys=...)`): each
domain's first six keys are the small scope's universe, all sixteen the wide scope's pool.
"""

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


KEY_DOMAINS: dict[str, tuple[Hashable, ...]] = {
    "int": (0, 1, 2, 3, 4, 5, 6, 7, -1, 17, 65, 255, 256, 2**31, 2**32, 2**63),
    "str": (
        "a3f9c1d2", "a3f9c1d3", "A3F9C1D2", "0", "", "a3f9c1d2" * 8,
        "1", "a3f9", "a3f9c1d2 ", "a3f9c1d2:0", "a3f9c1d2:1", "None", "\u00e9", "e\u0301", "\x00", "1.0",
    ),
    "bytes": (
        b"\xa3\xf9\xc1\xd2", b"\xa3\xf9\xc1\xd3", b"a3f9c1d2", b"", b"\x00", b"\xa3\xf9\xc1\xd2" * 8,
        b"0", b"1", b"\x00\x00", b"\xff", b"\xa3\xf9", b"a3f9c1d2 ", b"\xc3\xa9", b"None", b"\x01", b"\x00" * 32,
    ),
    "tuple": (
        (1, "x"), (1, "y"), ("x", 1), (1,), (), ("a3f9c1d2", 0),
        ("a3f9c1d2", 1), ((1, "x"),), (1, "x", 0), ("img", 1), ("img", "1"), (0, 0), (b"x", 1), (1, 2), (2, 1), (None,),
    ),
    "mixed": (
        1, "1", b"1", (1,), "a3f9c1d2", b"a3f9c1d2",
        0, "0", b"0", (0,), ("img", 1), ("img", "1"), 2, "2", -1, "-1",
    ),
}
"""Key domains by name: int (the default), str (engine hash strings, one differing in its last
character, upper case, empty, 64 characters), bytes (the same hashes as bytes), tuple ((request,
position) pairs and the like), mixed (keys of different types that print or encode alike: 1, "1",
b"1", (1,)). Every key is hashable, the keys of a domain are distinct (none equal another), and the
first six are those the small scope uses, so they are the ones a bug meets first."""
