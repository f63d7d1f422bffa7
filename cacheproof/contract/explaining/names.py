"""How one report names the values it shows: hashes short, things by their nouns.

A 64-bit hash is written as "#" and the first hex digits of its two's-complement form, then "…":
six digits, or as many more as it takes for no two hashes of the report to share a short form.
The same hash thus reads the same everywhere in one report, and two hashes never read alike. A
hash short enough to read whole (six decimal digits at most) is written whole: "#7". Block ids and
request ids are written with their nouns ("block 3", "requests 1, 2", "none"), a run of three or
more consecutive ids as its ends ("blocks 2-27, 1"). The report itself (JSON,
snippets) keeps every value whole; only its words use these forms.

A report names its values in two passes: a first `Names()` writes the report's text once, noting
every hash it writes (that text is thrown away); its `settled()` names then write the text shown,
each hash as short as the others allow.
"""

from __future__ import annotations

from typing import Any, Iterable

SHORTEST = 6
"""The fewest hex digits of a short hash."""

_WHOLE_BELOW = 10**6
_MASK = 2**64 - 1


def _digits(value: Any) -> str | None:
    """The hex digits a hash is shortened from (its 64-bit two's complement), or None for a value
    written whole (a small int, an int outside 64 bits, anything not an int)."""
    if not isinstance(value, int) or isinstance(value, bool) or -_WHOLE_BELOW < value < _WHOLE_BELOW:
        return None
    if not -(2**63) <= value <= _MASK:
        return None
    return format(value & _MASK, "016x")


def shortest_length(hashes: Iterable[Any]) -> int:
    """The fewest hex digits (at least SHORTEST) that tell every two of `hashes` apart."""
    digits = {found for found in map(_digits, hashes) if found is not None}
    length = SHORTEST
    while length < 16 and len({found[:length] for found in digits}) < len(digits):
        length += 1
    return length


class Names:
    """The `spec.kind.Naming` of one report (see the module docstring)."""

    def __init__(self, length: int = SHORTEST) -> None:
        self.length = length
        self.seen: list[Any] = []

    def settled(self) -> "Names":
        """Names that write every hash noted so far as short as the others allow."""
        return Names(shortest_length(self.seen))

    def hash(self, value: Any) -> str:
        self.seen.append(value)
        digits = _digits(value)
        if digits is None:
            return f"#{value!r}"
        return f"#{digits[:self.length]}…" if self.length < len(digits) else f"#{digits}"

    def thing(self, noun: str, value: Any) -> str:
        return f"{noun} {value!r}"

    def things(self, noun: str, values: Any) -> str:
        try:
            listed = list(values)
        except TypeError:
            return repr(values)
        if not listed:
            return "none"
        return f"{noun}{'s' if len(listed) > 1 else ''} {', '.join(_runs(listed))}"

    def value(self, value: Any) -> str:
        return repr(value)


def _runs(values: list[Any]) -> list[str]:
    """`values` as written, each run of three or more consecutive non-negative ints as "first-last"."""
    written: list[str] = []
    start = 0
    while start < len(values):
        end = start
        while (end + 1 < len(values) and _is_id(values[end]) and _is_id(values[end + 1])
               and values[end + 1] == values[end] + 1):
            end += 1
        if end - start >= 2:
            written.append(f"{values[start]}-{values[end]}")
        else:
            written += [repr(value) for value in values[start:end + 1]]
        start = end + 1
    return written


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
