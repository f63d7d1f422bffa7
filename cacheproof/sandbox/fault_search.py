"""Replay and shrink a failing call sequence when the failure may be a hang or a crash.

Each attempt replays the sequence on a fresh cache (under --isolate, in a fresh child process)
beside a fresh spec, supervised like the run itself (`guarded_call.supervised`), so a call that
hangs or kills its process is a `Failure` of that kind at that call, like a divergence is.
Shrinking removes chunks of calls (halves, then quarters, ... then single calls) while the
sequence still fails the same way, then simplifies the arguments of the calls left (an element
of a tuple dropped, an int lowered towards 1, an int field of a recipe lowered; a number bisected
where only one less fails alike: `lowering.lowest_failing`) while the failure stays the same
failure, not merely a failure (`same_failure`: a 0-byte value the cache refuses is another bug
than the eviction found), and removes calls again after any argument was simplified (an emptied
tuple leaves calls that change nothing, `free(1, ())`), until neither step changes anything;
then, for a divergence, it removes one call and swaps one small int for another, which removal
alone cannot do (another request frees the block: `_swap_for_shorter`), and, given the model's
states, removes a round trip (calls that leave the model as they found it) or trades it for one
call repeated, which an implementation that counts calls needs (`_shorten_round_trips`), and
starts over. It stops when its time budget is spent: a hang costs the whole call timeout per
attempt.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, Sequence

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox.guarded_call import Watch, hang_message, supervised
from cacheproof.sandbox.lowering import lowest_failing
from cacheproof.contract.sequence import first_divergence
from cacheproof.contract.snippet import DIVERGES
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND

DIVERGENCE = "divergence"
HANG = "hang"
CRASH = "crash"
NOT_DETERMINISTIC = "not deterministic"
"""A failure the same calls do not repeat on a fresh implementation (`not_deterministic`)."""
SPEC_BROKEN = "spec broke an invariant"
"""The spec's own state broke one of its kind's named invariants after the call: a bug of the spec
or of its profile, not of the implementation (`check.programs.program.SpecBroken`)."""

SIMPLIFY_ATTEMPTS = 300
"""Simplifying the arguments of a shrunk sequence replays at most this many candidates."""
SWAP_ATTEMPTS = 300
"""Removing a call and swapping a small int for another (`_swap_for_shorter`) tries at most this many candidates."""
ROUND_TRIP_ATTEMPTS = 600
"""Shortening the round trips of a sequence, calls that leave the model as they found it
(`_shorten_round_trips`), tries at most this many candidates."""
PAIRED_CALLS = 100
"""Round trips of two calls apart are looked for in sequences of at most this many calls (it takes a
run of the model per call); stretches in any."""
REPEATED_CALLS = 4
"""Before a repeat in place of a round trip was kept, the calls a sequence makes most often tried
as the repeat: this many."""
SWAP_VALUES = (1, 2, 3, 4)
"""The small ints a swap tries in place of one of them: request ids, keys, counts."""
MINIMUM_SHRINK_SECONDS = 30.0
SHRINK_TIMEOUTS = 12
"""Shrinking a sequence gets max(30 s, 12 call timeouts)."""


class Failure(NamedTuple):
    """How a replayed sequence fails: at call `step` (an index), `kind` (divergence, hang, crash)."""

    step: int
    message: str
    kind: str


def ending_of(failure: Failure) -> str:
    """What the last call of a sequence failing like `failure` does, as the snippet marks it."""
    if failure.kind in (DIVERGENCE, NOT_DETERMINISTIC):
        return DIVERGES
    if failure.kind == SPEC_BROKEN:
        return "the spec breaks its own invariant here"
    return "does not return" if failure.kind == HANG else "kills the process"


def shrink_seconds(call_timeout: float | None) -> float:
    """The time budget for shrinking one failing sequence."""
    return max(MINIMUM_SHRINK_SECONDS, SHRINK_TIMEOUTS * (call_timeout or 0.0))


def first_failure(
    factory: Callable[[int], Any], size: int, calls: Sequence[Call], watch: Watch, semantics: Any = None,
    kind: SpecKind | str = DEFAULT_KIND,
) -> Failure | None:
    """Replay `calls` on `factory(size)` beside a fresh model of `kind` (`contract.sequence.first_divergence`),
    supervised: the first failure (a divergence, or a call that hangs or kills its process), or None.

    `factory` is a `WatchedFactory` or an isolated one; its `for_attempt()` serves this replay
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
        found = supervised(lambda: first_divergence(attempt, size, calls, on_step, semantics, kind), watch, describe_hang)
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
    same_failure: Callable[[list[Call], list[Call], Failure], bool] | None = None,
    states: Callable[[list[Call]], Sequence[Any]] | None = None,
) -> tuple[list[Call], Failure, bool]:
    """The shortest sequence found within `seconds` that still fails like `failure` (same kind).

    `attempt(calls)` replays a candidate. Returns (calls, their failure, whether shrinking was cut
    short by the budget); the calls end at the failing one. `on_attempt(calls, failure)` is told
    the smallest failing sequence so far before the first attempt and after each: what a Ctrl-C
    during shrinking reports (the KeyboardInterrupt propagates). A simpler argument is kept only
    when the failing call's operation is unchanged and `same_failure(smallest, candidate, its
    failure)`, if given, says the candidate fails as the smallest failing sequence so far does
    (a divergence of the same kind). `states(calls)`, if given, is the model's state before each call and after
    the last (len(calls) + 1 states, compared with ==), which finds the round trips
    `_shorten_round_trips` shortens.
    """
    deadline = time.monotonic() + seconds
    current, best = list(calls[: failure.step + 1]), failure
    attempts, swaps, trips = [0], [0], [0]  # argument simplifications, swaps and round trips tried, over every pass
    repeated: list[Call] = []  # the calls a repeat in place of a round trip kept, the last first
    while True:
        current, best, cut_short = _drop_calls(attempt, current, best, deadline, on_attempt)
        if cut_short:
            return current, best, True
        simplified, best, cut_short = _simplify_arguments(attempt, current, best, deadline, on_attempt, same_failure,
                                                          attempts)
        if cut_short:
            return simplified, best, True
        if simplified != current:
            current = simplified  # a simpler argument may leave a call that does nothing (free(1, ())): drop calls again
            continue
        if best.kind in (HANG, CRASH):  # each costs a call timeout per attempt: no swaps
            return current, best, False
        shorter, best, cut_short = _swap_for_shorter(attempt, current, best, deadline, on_attempt, same_failure, swaps)
        if cut_short:
            return shorter, best, True
        if shorter == current and states is not None:
            shorter, best, cut_short = _shorten_round_trips(attempt, current, best, deadline, on_attempt, same_failure,
                                                            states, trips, repeated)
        if cut_short or shorter == current:
            return shorter, best, cut_short
        current = shorter


def _drop_calls(
    attempt: Callable[[list[Call]], Failure | None], current: list[Call], best: Failure, deadline: float,
    on_attempt: Callable[[list[Call], Failure], None] | None,
) -> tuple[list[Call], Failure, bool]:
    """Remove chunks of calls (halves, quarters, ..., single calls) while the rest still fails like `best`."""
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
            return current, best, False
        chunk = max(chunk // 2, 1)


def _alike(
    found: Failure | None, candidate: list[Call], current: list[Call], best: Failure,
    same_failure: Callable[[list[Call], list[Call], Failure], bool] | None,
) -> bool:
    """Whether `candidate` fails (`found`) as `current` does (`best`): the same kind of failure, at a
    call of the same operation, and `same_failure` if given."""
    return (found is not None and found.kind == best.kind and candidate[found.step].op == current[best.step].op
            and (same_failure is None or same_failure(current, candidate[: found.step + 1], found)))


def _swap_for_shorter(
    attempt: Callable[[list[Call]], Failure | None], current: list[Call], best: Failure, deadline: float,
    on_attempt: Callable[[list[Call], Failure], None] | None,
    same_failure: Callable[[list[Call], list[Call], Failure], bool] | None, swaps: list[int],
) -> tuple[list[Call], Failure, bool]:
    """A sequence one call shorter than `current` that fails alike once one small int (one of
    SWAP_VALUES, an argument or an element of a tuple argument) is swapped for another: without
    `free_request(1)`, `allocate_slots(1, (1, 1)); touch(2, (1,)); free(1, (1,))` passes, and with
    `allocate_slots(2, (1, 1))` it fails again. Removal alone cannot reach it (it needs another
    request); a swap is tried only with a call removed, so swaps never go round in circles. At most
    SWAP_ATTEMPTS over the whole shrinking (`swaps[0]` counts them)."""
    for dropped in range(len(current) - 1):
        without = current[:dropped] + current[dropped + 1:]
        for index, swap in [(i, swap) for i, call in enumerate(without) for swap in _swaps(call)]:
            stop = _before_try(current, best, deadline, on_attempt, swaps, SWAP_ATTEMPTS)
            if stop is not None:
                return current, best, stop
            candidate = without[:index] + [swap] + without[index + 1:]
            found = attempt(candidate)
            if _alike(found, candidate, current, best, same_failure):
                return candidate[: found.step + 1], found, False
    return current, best, False


class RoundTrip(NamedTuple):
    """Calls of a sequence (`indices`) that together leave the model as they found it, or that only
    do something together (`keeps_state` False: the second does nothing without the first)."""

    indices: tuple[int, ...]
    keeps_state: bool


def _shorten_round_trips(
    attempt: Callable[[list[Call]], Failure | None], current: list[Call], best: Failure, deadline: float,
    on_attempt: Callable[[list[Call], Failure], None] | None,
    same_failure: Callable[[list[Call], list[Call], Failure], bool] | None,
    states: Callable[[list[Call]], Sequence[Any]], trips: list[int], repeated: list[Call],
) -> tuple[list[Call], Failure, bool]:
    """A shorter sequence that fails alike, made from a round trip of `current` (`_round_trips`): its
    calls removed (where they keep the model's state), then removed with one call of the rest
    repeated in their stead (placed after itself). The repeated call is the one a repeat kept last
    (`repeated`, most recent first), once, twice, ... up to one fewer than the calls removed; before
    any repeat was kept, each of the REPEATED_CALLS calls the sequence makes most often, once.
    Removal of calls one chunk at a time cannot do either when the implementation counts calls the
    model does not (a clock of moves to newest: `reserve(1, 1); release(1)` moves once and leaves
    the model as it was, and `get(0); get(0)` in place of `get(0)` moves once too), nor remove two
    calls apart. At most ROUND_TRIP_ATTEMPTS over the whole shrinking (`trips[0]` counts them)."""
    for trip in _round_trips(current, best.step, states):
        rest = [call for index, call in enumerate(current) if index not in trip.indices]
        distinct = sorted((index for index, call in enumerate(rest[:-1]) if call not in rest[:index]),
                          key=lambda index: -rest.count(rest[index]))
        kept_before = sorted((index for index in distinct if rest[index] in repeated),
                             key=lambda index: repeated.index(rest[index]))[:1]
        repeats = [(index, times) for index in kept_before for times in range(1, len(trip.indices))] if kept_before \
            else [(index, 1) for index in distinct[:REPEATED_CALLS]]
        for index, times in [(None, 0)] * trip.keeps_state + repeats:
            stop = _before_try(current, best, deadline, on_attempt, trips, ROUND_TRIP_ATTEMPTS)
            if stop is not None:
                return current, best, stop
            candidate = rest if index is None else rest[: index + 1] + [rest[index]] * times + rest[index + 1:]
            found = attempt(candidate)
            if _alike(found, candidate, current, best, same_failure):
                if index is not None:
                    repeated[:] = [rest[index]] + [call for call in repeated if call != rest[index]]
                return candidate[: found.step + 1], found, False
    return current, best, False


def _round_trips(calls: list[Call], last: int, states: Callable[[list[Call]], Sequence[Any]]) -> list[RoundTrip]:
    """The round trips of `calls` before the one at `last`, by the model's states (`states(calls)`:
    before each call and after the last): each stretch of two or more calls after which the model
    is as it was before it (but a run of one call repeated), shortest first; then each two calls
    apart whose removal leaves the model as it was after the second (`reserve(4, 1)`, calls that
    do the same without it, `release(4)`), or the second of which does nothing without the first
    (a release without its acquire), nearest first, where `calls` are at most PAIRED_CALLS."""
    before = states(calls)
    stretches = sorted(((start, end) for start in range(last + 1) for end in range(start + 2, last + 1)
                        if before[start] == before[end] and any(call != calls[start] for call in calls[start + 1:end])),
                       key=lambda stretch: (stretch[1] - stretch[0], stretch))
    pairs = []
    for first in range(last - 1 if last < PAIRED_CALLS else 0):
        without = states(calls[:first] + calls[first + 1: last])  # before each call from first + 1 on, one index less
        for second in range(first + 1, last):
            keeps_state = second > first + 1 and without[second - 1] == before[second + 1]
            if keeps_state or without[second - 1] == without[second] and before[second] != before[second + 1]:
                pairs.append(RoundTrip((first, second), keeps_state))
    pairs.sort(key=lambda pair: (pair.indices[1] - pair.indices[0], pair.indices))
    return [RoundTrip(tuple(range(start, end)), True) for start, end in stretches] + pairs


def _swaps(call: Call) -> list[Call]:
    """`call` with one small int (of SWAP_VALUES) swapped for another: an argument, or an element of a
    plain tuple argument."""
    swapped = []
    for position, argument in enumerate(call.args):
        if type(argument) is tuple:
            options = [argument[:k] + (value,) + argument[k + 1:] for k, element in enumerate(argument)
                       if type(element) is int and element in SWAP_VALUES for value in SWAP_VALUES if value != element]
        elif type(argument) is int and argument in SWAP_VALUES:
            options = [value for value in SWAP_VALUES if value != argument]
        else:
            options = []
        swapped += [_with_argument(call, position, option) for option in options]
    return swapped


def _with_argument(call: Call, position: int, argument: Any) -> Call:
    """`call` with its argument at `position` replaced by `argument`."""
    return call._replace(args=call.args[:position] + (argument,) + call.args[position + 1:])


def _before_try(
    current: list[Call], best: Failure, deadline: float, on_attempt: Callable[[list[Call], Failure], None] | None,
    tried: list[int], most: int,
) -> bool | None:
    """Before one more candidate of a pass that tries at most `most` (`tried[0]` counts them): tell
    `on_attempt` the smallest so far; True when the deadline has passed (cut short), False when
    `most` are tried, else None (and the candidate is counted)."""
    if on_attempt is not None:
        on_attempt(current, best)
    if time.monotonic() > deadline:
        return True
    if tried[0] >= most:
        return False
    tried[0] += 1
    return None


def _simplify_arguments(
    attempt: Callable[[list[Call]], Failure | None], current: list[Call], best: Failure, deadline: float,
    on_attempt: Callable[[list[Call], Failure], None] | None,
    same_failure: Callable[[list[Call], list[Call], Failure], bool] | None, attempts: list[int],
) -> tuple[list[Call], Failure, bool]:
    """Replace arguments by simpler ones (`_simpler`) while the calls still fail like `best`, at a
    call of the same operation (and `same_failure`): each argument as far as it goes, the last
    call first (its arguments are the ones the failure names), in sweeps until one keeps nothing or
    SIMPLIFY_ATTEMPTS are spent over the whole shrinking (`attempts[0]` counts them: a count, so
    that a seed gives one counterexample on any machine). A number is lowered by
    `lowering.lowest_failing` (bisected where only one less fails alike: a byte count that must
    stay above 2**31 is not lowered one byte a try)."""
    changed = True
    while changed:
        changed = False
        for index, position in [(i, p) for i in reversed(range(len(current))) for p in range(len(current[i].args))]:
            while index < len(current):  # this argument, as far as it goes (a kept candidate may end sooner)
                call = current[index]

                def fails(simpler: Any, call: Call = call, index: int = index, position: int = position,
                          ) -> tuple[list[Call], Failure] | None:
                    stop = _before_try(current, best, deadline, on_attempt, attempts, SIMPLIFY_ATTEMPTS)
                    if stop is not None:
                        raise _Stopped(stop)
                    candidate = current[:index] + [_with_argument(call, position, simpler)] + current[index + 1:]
                    found = attempt(candidate)
                    return (candidate, found) if _alike(found, candidate, current, best, same_failure) else None

                try:
                    kept = _simpler_failing(call.args[position], fails)
                except _Stopped as stopped:
                    return current, best, stopped.cut_short
                if kept is None:
                    break  # no simpler one fails alike
                (candidate, found), changed = kept, True
                current, best = candidate[: found.step + 1], found
    return current, best, False


class _Stopped(Exception):
    """A pass's candidates stop: its deadline passed (`cut_short`) or its count of tries is spent."""

    def __init__(self, cut_short: bool) -> None:
        super().__init__(cut_short)
        self.cut_short = cut_short


def _simpler_failing(argument: Any, fails: Callable[[Any], Any]) -> Any:
    """What `fails` answers (not None) for the first simpler argument than `argument` it is given that
    fails: a plain tuple with one element dropped, in order, else each number of `argument`
    (`_lowerings`) lowered by `lowering.lowest_failing`; None when none fails."""
    if type(argument) is tuple:
        return next((found for found in map(fails, _simpler(argument)) if found is not None), None)
    for number, rebuilt in _lowerings(argument):
        def lowered_fails(lower: int, rebuilt: Callable[[int], Any] = rebuilt) -> Any:
            simpler = rebuilt(lower)
            return None if simpler is None else fails(simpler)
        found, _ = lowest_failing(number, _lower(number), lowered_fails)
        if found is not None:
            return found[1]
    return None


def _simpler(argument: Any) -> list[Any]:
    """Simpler arguments than `argument`, simplest first: a plain tuple with one element dropped
    (the first, ..., the last); each number of it (`_lowerings`) lowered to 1, half or one less
    (`_lower`)."""
    if type(argument) is tuple:
        return [argument[:i] + argument[i + 1:] for i in range(len(argument))]
    return [simpler for number, rebuilt in _lowerings(argument) for lower in _lower(number)
            if (simpler := rebuilt(lower)) is not None]


def _lower(number: int) -> list[int]:
    """The lower numbers simplifying tries, smallest first: 1, half and one less, never below 1 (0 is
    where the bad arguments start: an empty value, the null block, no bytes)."""
    return sorted({1, number // 2, number - 1} - {number}) if number > 1 else []


def _lowerings(argument: Any) -> list[tuple[int, Callable[[int], Any]]]:
    """Each number of `argument` simplifying lowers, with a function that rebuilds `argument` around a
    lower one (None where the result is no argument): a positive int (not a bool) itself; each int
    field of a named tuple (a value recipe, whose element size must still divide its nbytes:
    `ValueRecipe.problem`)."""
    if isinstance(argument, int) and not isinstance(argument, bool):
        return [(argument, lambda lower: lower)]
    if isinstance(argument, tuple) and hasattr(argument, "_replace"):
        return [(value, lambda lower, field=field: _valid(argument._replace(**{field: lower})))
                for field, value in zip(argument._fields, argument) if isinstance(value, int)]
    return []


def _valid(argument: Any) -> Any:
    """`argument`, or None when it is a value recipe with a problem (`ValueRecipe.problem`)."""
    return None if isinstance(argument, ValueRecipe) and argument.problem() is not None else argument


def not_deterministic(calls: Sequence[Call], first: str, second: Failure | None) -> str:
    """The message for a cache that answered the same calls differently on two runs."""
    then = "then agreed with the spec" if second is None else f"then {second.message}"
    return f"not deterministic: the same {len(calls)} calls gave {first}; {then} (a fresh cache each run)"
