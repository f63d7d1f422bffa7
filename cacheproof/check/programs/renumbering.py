"""Lowering the numbers of a shrunk program: every occurrence of one number at one argument position
replaced at once by a smaller one (issue 35: "shrinking lowers every number in a counterexample").

Dropping calls and simplifying one argument at a time (`sandbox.fault_search.shrink_failure`) cannot
lower a number that several calls must share: the key of `put(4, ...)` and `get(4)`, the byte count
of `reserve(4, 4)` and of the value its `commit` stores. Renumbering changes them together: the
number at one position (a key is the first argument of every call that takes one, a byte count the
second) in every call, a value recipe's byte count counting as its number. The candidates are 0,
1, half and one less, smallest first (the numbers between bisected when one less is the only one
that fails: `sandbox.lowering.lowest_failing`); a candidate is kept only when the program fails
the same way (the caller's `attempt` says so), so a 0 where the spec refuses 0 (no bytes, the null
block) is never kept: it fails otherwise, or not at all. A value recipe's byte count is never lowered to 0:
an empty value is a misuse under every profile, and under one that trusts its callers the spec
does not refuse it, so a program holding one would lie outside what such callers do.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.sandbox.fault_search import Failure
from cacheproof.sandbox.lowering import lowest_failing

RENUMBER_ATTEMPTS = 200
"""Renumbering replays at most this many candidates per program (a count: a seed gives one
counterexample on any machine)."""


def renumbered(attempt: Callable[[list[Call]], Failure | None], calls: Sequence[Call]) -> list[Call]:
    """`calls` with their numbers lowered (see the module docstring) while `attempt(candidate)` finds
    it failing the same way (not None: the failure, whose step ends the program kept), each number
    as far as it goes, the largest first; at most RENUMBER_ATTEMPTS candidates replayed."""
    current, tried = list(calls), 0
    changed = True
    while changed and tried < RENUMBER_ATTEMPTS:
        changed = False
        for position, number, recipe in _numbers(current):
            def fails(lower: int, position: int = position, number: int = number) -> tuple[list[Call], Failure] | None:
                candidate = [_renumbered(call, position, number, lower) for call in current]
                failure = attempt(candidate)
                return None if failure is None else (candidate, failure)
            found, spent = lowest_failing(number, _lower(number, recipe), fails, RENUMBER_ATTEMPTS - tried)
            tried += spent
            if found is not None:
                candidate, failure = found[1]
                current, changed = candidate[: failure.step + 1], True
                break  # the numbers of the new program, afresh
            if tried >= RENUMBER_ATTEMPTS:
                return current
    return current


def _numbers(calls: Sequence[Call]) -> list[tuple[int, int, bool]]:
    """(position, number, whether it is a value recipe's byte count) of every number of `calls`
    above 0, the largest first."""
    found = {(position, number, isinstance(argument, ValueRecipe)) for call in calls
             for position, argument in enumerate(call.args)
             if (number := _number_of(argument)) is not None and number > 0}
    return sorted(found, key=lambda found: (-found[1], found[0], found[2]))


def _number_of(argument: Any) -> int | None:
    if type(argument) is int:
        return argument
    if isinstance(argument, ValueRecipe) and type(argument.nbytes) is int:
        return argument.nbytes
    return None


def _lower(number: int, recipe: bool) -> list[int]:
    return sorted({0, 1, number // 2, number - 1} - {number} - ({0} if recipe else set()))


def _renumbered(call: Call, position: int, number: int, lower: int) -> Call:
    """`call` with its argument at `position` made `lower` where its number is `number` (a value
    recipe's element size then 1 where it no longer divides its byte count)."""
    if position >= len(call.args) or _number_of(call.args[position]) != number:
        return call
    argument = call.args[position]
    if isinstance(argument, ValueRecipe) and lower == 0:  # no empty value (the module docstring)
        return call
    if isinstance(argument, ValueRecipe):
        argument = argument.resized(lower)
    else:
        argument = lower
    return call._replace(args=call.args[:position] + (argument,) + call.args[position + 1:])
