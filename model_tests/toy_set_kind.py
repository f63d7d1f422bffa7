"""A spec kind that cacheproof does not ship: a bounded set of keys ("toyset"), written with nothing
but the spec-kind interface (spec/kind.py), to show that a new kind (the radix tree next) gets
traces, replay and the runtime monitor without a line of the trace layer written for it
(`model_tests/test_new_kind_traces.py` registers it for the length of a test).

Operations: `insert(key)` (True; False when the key is there already, or, under
`insert_present=error`, WrongStateError; CapacityError when the set is full), `remove(key)`
(UnknownKeyError when the key is not there), `count()`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Hashable

from cacheproof.spec.errors import CapacityError, InvalidArgumentError, UnknownKeyError, WrongStateError
from cacheproof.spec.kind import Argument, Operation, Profile, SpecKind
from cacheproof.spec.overrides import option_value, overridden, written

OPTIONS = {"insert_present": ("false", "error")}


@dataclass(frozen=True)
class ToySemantics:
    insert_present: str = "false"

    def with_overrides(self, text: str) -> "ToySemantics":
        return overridden(self, text, lambda name, raw: option_value(OPTIONS, name, raw))

    def differences(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def as_written(self) -> dict[str, str]:
        return {f.name: written(getattr(self, f.name)) for f in fields(self)}


class ToySetSpec:
    """The executable spec: a set of at most `slots` keys."""

    def __init__(self, slots: int, semantics: ToySemantics = ToySemantics()) -> None:
        if type(slots) is not int or slots < 1:
            raise InvalidArgumentError(f"slots must be an int >= 1, got {slots!r}")
        self.slots, self.semantics, self._keys = slots, semantics, set()

    def insert(self, key: Hashable) -> bool:
        if key in self._keys:
            if self.semantics.insert_present == "error":
                raise WrongStateError(f"insert({key!r}): already present")
            return False
        if len(self._keys) == self.slots:
            raise CapacityError(f"insert({key!r}): all {self.slots} slots are taken")
        self._keys.add(key)
        return True

    def remove(self, key: Hashable) -> None:
        if key not in self._keys:
            raise UnknownKeyError(key)
        self._keys.remove(key)

    def count(self) -> int:
        return len(self._keys)

    def snapshot(self) -> tuple:
        return tuple(sorted(self._keys, key=repr))

    def check_invariants(self) -> None:
        assert len(self._keys) <= self.slots

    def state_key(self) -> Hashable:
        return frozenset(self._keys)

    def copy(self) -> "ToySetSpec":
        twin = ToySetSpec(self.slots, self.semantics)
        twin._keys = set(self._keys)
        return twin


_KEY = Argument("key", "key")
TOY_KIND = SpecKind(
    name="toyset",
    summary="a bounded set of keys (a test's own kind)",
    operations=(
        Operation("insert", (_KEY,), "bool", ("CapacityError", "WrongStateError"), True),
        Operation("remove", (_KEY,), "None", ("UnknownKeyError",), True),
        Operation("count", (), "int", (), False),
    ),
    size_name="slots",
    new=ToySetSpec,
    invariants=(),
    profiles={"contract": Profile("contract", ToySemantics(), ("insert", "remove", "count"), "the toy contract")},
)


class ListToySet:
    """A correct implementation, written apart from the spec: the keys in a list, in insertion order."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._keys: list[Hashable] = []

    def insert(self, key: Hashable) -> bool:
        present = key in self._keys
        if not present and len(self._keys) >= self.slots:
            raise CapacityError("no free slot")
        if not present:
            self._keys.append(key)
        return not present

    def remove(self, key: Hashable) -> None:
        try:
            self._keys.remove(key)
        except ValueError:
            raise UnknownKeyError(key) from None

    def count(self) -> int:
        return len(self._keys)

    def snapshot(self) -> tuple:
        return tuple(sorted(self._keys, key=repr))


class ForgivingRemoveToySet(ListToySet):
    """Broken: removing a key that is not there does nothing (the spec raises UnknownKeyError)."""

    def remove(self, key: Hashable) -> None:
        if key in self._keys:
            super().remove(key)
