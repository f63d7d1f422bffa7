"""Where a program's picks come from: one interface, `randrange(n)`, over three sources.

- `ProgramDraws`: a byte string Hypothesis drew whole, read in order (the checker's programs);
- `DataDraws`: `st.data()` inside a running Hypothesis example, one draw per pick (the concurrent
  scenarios, whose threads interleave draws with runs);
- `random.Random`: the bare loop of the benches, and the long lives of `--thorough` (a seeded phase).

The helpers below (`choice`, `integer`, `coin`, `some`) turn picks into values the same way for
every source, so a generator written against them runs under all three.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


class Draws(Protocol):
    def randrange(self, n: int) -> int:
        """A pick in 0..n-1."""


class ProgramDraws:
    """The picks of a program, read in order from `blob`: `randrange(n)` takes as many bytes as
    n - 1 needs, little-endian, modulo n; past the end of `blob` it is 0, the simplest pick, so a
    shorter or smaller byte string is a simpler program."""

    __slots__ = ("_blob", "_at")

    def __init__(self, blob: bytes) -> None:
        self._blob = blob
        self._at = 0

    def randrange(self, n: int) -> int:
        if n <= 256:
            at = self._at
            self._at = at + 1
            return self._blob[at] % n if at < len(self._blob) and n > 1 else 0
        width = ((n - 1).bit_length() + 7) >> 3
        at = self._at
        self._at = at + width
        return int.from_bytes(self._blob[at : at + width], "little") % n

    def random(self) -> float:
        return self.randrange(256) / 256


class DataDraws:
    """The picks of a running Hypothesis example: each `randrange(n)` one draw of `data`."""

    __slots__ = ("_data",)

    def __init__(self, data: Any) -> None:
        self._data = data

    def randrange(self, n: int) -> int:
        return self._data.draw(st.integers(0, n - 1)) if n > 1 else 0


def choice(draws: Draws, items: Sequence[T]) -> T:
    return items[draws.randrange(len(items))]


def integer(draws: Draws, low: int, high: int) -> int:
    """An integer in low..high, low the simplest."""
    return low + draws.randrange(high - low + 1)


def coin(draws: Draws) -> bool:
    return draws.randrange(2) == 1


def some(draws: Draws, items: Sequence[T], most: int) -> tuple[T, ...]:
    """1..`most` picks of `items`, repeats allowed."""
    return tuple(choice(draws, items) for _ in range(integer(draws, 1, most)))


SWARM_MOST = 12
"""The most operation picks of a swarm program."""


def swarm(draws: Draws, operations: Sequence[T]) -> tuple[T, ...]:
    """The operations one program calls (swarm testing): half the programs, all of `operations`;
    the others 1..SWARM_MOST picks of them, an operation picked twice called twice as often. A
    program of a few operations reaches what the whole mix rarely does: reserve and commit alone
    pile up pending reservations, acquire and release alone pile up holders of one entry."""
    return tuple(operations) if draws.randrange(2) == 0 else some(draws, operations, SWARM_MOST)
