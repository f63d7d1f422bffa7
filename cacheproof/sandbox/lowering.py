"""Lowering one number while a program still fails the same way: one argument of one call
(`fault_search`'s simplification), each number its calls share (`check.programs.renumbering`) and
a program's size (`check.programs.program.shrink_program`).

A few candidates below the number are tried, smallest first (the caller's list: 0 or 1, half and
one less; 1 to 4, half, three quarters and one less for a size), and the first that fails is the
lower number. When the only one that fails is one less, the failure needs at least some number
between the largest candidate that passed and it (a byte counter that wraps only past 2**31
bytes, a capacity that must hold them): stepping down one at a time would take as many tries as
the distance, so the numbers between are bisected instead, which finds one that fails while the
one below it passes in log2 of the distance tries (issue 32: a capacity above 2**32 took about
120 s to shrink, one byte a try). Failing need not be monotone in the number: the bisection finds
a least failing number of that stretch, not always the least of all.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

Found = TypeVar("Found")


def lowest_failing(
    number: int, candidates: Sequence[int], fails: Callable[[int], Found | None], most: int | None = None,
) -> tuple[tuple[int, Found] | None, int]:
    """The lower number found failing and what `fails(lower)` answered for it (None: no candidate
    fails), and the count of tries made, at most `most` (None: no limit). `candidates` are below
    `number`, smallest first; see the module docstring for the order of the tries."""
    tried, passed = 0, None
    for candidate in candidates:
        if most is not None and tried >= most:
            return None, tried
        tried += 1
        found = fails(candidate)
        if found is None:
            passed = candidate
            continue
        if candidate != number - 1 or passed is None:
            return (candidate, found), tried
        low, high = passed, (candidate, found)  # low passes, high fails: bisect between them
        while high[0] - low > 1 and (most is None or tried < most):
            middle = (low + high[0]) // 2
            tried += 1
            found = fails(middle)
            if found is None:
                low = middle
            else:
                high = (middle, found)
        return high, tried
    return None, tried
