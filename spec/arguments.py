"""The argument rule every spec kind shares: an int argument is an int, and a bool is not one.

Python's bool is a subclass of int, so `isinstance(True, int)` holds; every kind's contract refuses
a bool where it takes a number (a count, a size, an id, a token) with InvalidArgumentError.
"""

from __future__ import annotations


def is_int(value: object) -> bool:
    """Whether `value` is an int; a bool is not one here."""
    return isinstance(value, int) and not isinstance(value, bool)
