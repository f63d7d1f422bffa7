"""Replay and shrink a failing call sequence when the failure may be a hang or a crash.

Each attempt replays the sequence on a fresh cache (under --isolate, in a fresh child process)
beside a fresh spec, supervised like the run itself (`guarded_call.supervised`), so a call that
hangs or kills its process is a `Failure` of that kind at that call, like a divergence is.
Shrinking removes chunks of calls (halves, then quarters, ... then single calls) while the
sequence still fails the same way, then simplifies the arguments of the calls left (an element
of a tuple dropped, an int lowered towards 0, an int field of a recipe lowered), and stops when
its time budget is spent: a hang costs the whole call timeout per attempt.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, Sequence

from cacheproof.contract.calls import Call
from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox.guarded_call import Watch, hang_message, supervised
from cacheproof.contract.sequence import first_divergence
from cacheproof.spec.cache.semantics import CONTRACT, Semantics

DIVERGENCE = "divergence"
HANG = "hang"
CRASH = "crash"

MINIMUM_SHRINK_SECONDS = 30.0
SHRINK_TIMEOUTS = 12
"""Shrinking a sequence gets max(30 s, 12 call timeouts)."""


class Failure(NamedTuple):
    """How a replayed sequence fails: at call `step` (an index), `kind` (divergence, hang, crash)."""

    step: int
    message: str
    kind: str


def shrink_seconds(call_timeout: float | None) -> float:
    """The time budget for shrinking one failing sequence."""
    return max(MINIMUM_SHRINK_SECONDS, SHRINK_TIMEOUTS * (call_timeout or 0.0))


def first_failure(
    factory: Callable[[int], Any], capacity_bytes: int, calls: Sequence[Call], watch: Watch,
    semantics: Semantics = CONTRACT,
) -> Failure | None:
    """Replay `calls` on `factory(capacity_bytes)` beside the spec, supervised: the first failure, or None.

    `factory` is a `GuardedFactory` or an `IsolatedFactory`; its `for_attempt()` serves this replay
    alone (under isolation, a fresh child process).
    """
    progress = [0]

    def on_step(index: int) -> None:
        progress[0] = index

    def describe_hang(name: str, args: tuple) -> str:
        return hang_message(name, args, watch.timeout, calls[progress[0]] if calls else None)

    attempt = factory.for_attempt()
    watch.last_call = lambda: calls[progress[0]] if calls else None
    try:
        found = supervised(lambda: first_divergence(attempt, capacity_bytes, calls, on_step, semantics), watch, describe_hang)
    except CacheFault as fault:
        return Failure(progress[0], fault.message, fault.kind)
    finally:
        attempt.close()
    if found is None:
        return None
    return Failure(found.step, found.message, DIVERGENCE)


def shrink_failure(
    attempt: Callable[[list[Call]], Failure | None],
    calls: Sequence[Call],
    failure: Failure,
    seconds: float,
    on_attempt: Callable[[list[Call], Failure], None] | None = None,
) -> tuple[list[Call], Failure, bool]:
    """The shortest sequence found within `seconds` that still fails like `failure` (same kind).

    `attempt(calls)` replays a candidate. Returns (calls, their failure, whether shrinking was cut
    short by the budget); the calls end at the failing one. `on_attempt(calls, failure)` is told
    the smallest failing sequence so far before the first attempt and after each: what a Ctrl-C
    during shrinking reports (the KeyboardInterrupt propagates).
    """
    deadline = time.monotonic() + seconds
    current, best = list(calls[: failure.step + 1]), failure
    chunk = max(len(current) // 2, 1)
    while True:
        start = 0
        while start < len(current):
            if on_attempt is not None:
                on_attempt(current, best)
            if time.monotonic() > deadline:
                return current, best, True
            candidate = current[:start] + current[start + chunk:]
            found = attempt(candidate) if candidate else None
            if found is not None and found.kind == best.kind:
                current, best = candidate[: found.step + 1], found
            else:
                start += chunk
        if chunk == 1:
            break
        chunk = max(chunk // 2, 1)
    return _simplify_arguments(attempt, current, best, deadline, on_attempt)


def _simplify_arguments(
    attempt: Callable[[list[Call]], Failure | None], current: list[Call], best: Failure, deadline: float,
    on_attempt: Callable[[list[Call], Failure], None] | None,
) -> tuple[list[Call], Failure, bool]:
    """Replace arguments by simpler ones (`_simpler`) while the calls still fail like `best`,
    until no replacement is kept; the last call first, whose arguments the failure names."""
    changed = True
    while changed:
        changed = False
        for index in reversed(range(len(current))):
            call = current[index]
            for position, argument in enumerate(call.args):
                for simpler in _simpler(argument):
                    if on_attempt is not None:
                        on_attempt(current, best)
                    if time.monotonic() > deadline:
                        return current, best, True
                    args = call.args[:position] + (simpler,) + call.args[position + 1:]
                    candidate = current[:index] + [call._replace(args=args)] + current[index + 1:]
                    found = attempt(candidate)
                    if found is not None and found.kind == best.kind:
                        current, best, changed = candidate[: found.step + 1], found, True
                        break
                if changed:
                    break
            if changed:
                break
    return current, best, False


def _simpler(argument: Any) -> list[Any]:
    """Simpler arguments than `argument`, simplest first: a plain tuple with one element dropped
    (the first, ..., the last), a non-negative int (not a bool) lowered to 0, half, one less, a named
    tuple with one int field so lowered."""
    if type(argument) is tuple:
        return [argument[:i] + argument[i + 1:] for i in range(len(argument))]
    if isinstance(argument, int) and not isinstance(argument, bool):
        return sorted({0, argument // 2, argument - 1} - {argument}) if argument > 0 else []
    if isinstance(argument, tuple) and hasattr(argument, "_replace"):
        return [argument._replace(**{field: lower}) for field, value in zip(argument._fields, argument)
                for lower in _simpler(value) if isinstance(value, int)]
    return []


def not_deterministic(calls: Sequence[Call], first: str, second: Failure | None) -> str:
    """The message for a cache that answered the same calls differently on two runs."""
    then = "then agreed with the spec" if second is None else f"then {second.message}"
    return f"not deterministic: the same {len(calls)} calls gave {first}; {then} (a fresh cache each run)"
