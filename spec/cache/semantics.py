"""`Semantics`: the design choices on which real caches differ from the contract, as plain data.

Each field names one choice; its default is the contract's (docs/contract.md), so
The cache spec built with no semantics is the contract and one built with `semantics=Semantics(...)` the
cache an engine ships. `OPTIONS` lists every field's valid values; `Semantics(...)` rejects any
other value with `InvalidArgumentError`. What each peer does, per field: docs/profiles.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.overrides import option_value, overridden, written

REFRESHING_CALLS = ("ready_hit", "reservation_hit", "get", "release", "put_hit")
"""Calls that may move an entry to newest: acquire of a READY entry, acquire of a RESERVED entry,
get, the release that leaves a READY entry idle (LRU by release time, as vLLM's freeable list), and
a put of a present key that keeps it (put_present="keep": SGLang's `set` of a cached hash)."""

OPTIONS: dict[str, tuple[Any, ...]] = {
    "put_present": ("error", "replace", "keep"),
    "put_too_large": ("error", "false"),
    "get_missing": ("error", "none"),
    "pop_missing": ("get", "error", "none", "absent"),
    "release_missing": ("error", "noop"),
    "eviction_time": ("commit", "reservation"),
    "acquire_conflict": ("error", "size", "hit"),
    "transient_entries": (True, False),
    "clear_busy": ("error", "drop"),
    "argument_checks": ("checked", "value_type", "trusted"),
    "snapshot_order": ("full", "idle", "membership"),
    "abandoned_reservation": ("removed", "kept"),
    "commit_size": ("checked", "reserved"),
}
"""The valid values of every field but `refresh_on`, whose value is a subset of `REFRESHING_CALLS`."""


@dataclass(frozen=True)
class Semantics:
    """One cache's design choices; every default is the contract's.

    - put_present: put of a present key raises WrongStateError ("error"); "replace": an idle READY
      entry is replaced by the new value (newest), a reserved or in-use one still raises; "keep":
      put returns True and the old entry stays as it was (moved to newest when refresh_on has
      put_hit); the key is looked at first, so a present key answers True whatever the value's size.
    - put_too_large: put of a value larger than the capacity raises TooLargeError ("error") or
      returns False, changing nothing ("false").
    - get_missing: get/pop of an absent or RESERVED key raise ("error") or return None ("none").
    - pop_missing: pop of an absent or RESERVED key: "get" as get_missing says; "error" or "none"
      as get_missing's values; "absent": an absent key answers None and a RESERVED one raises
      WrongStateError (it is referenced: TensorRT-LLM's pop at PR #17876).
    - release_missing: release of an absent or unreferenced key raises ("error") or does nothing
      and returns False ("noop").
    - eviction_time: idle entries are evicted when a value is stored, commit or put ("commit"), or
      when space is reserved ("reservation": reserved bytes count as used, reserve/acquire evict,
      commit never does).
    - refresh_on: the calls that move an entry to newest (subset of REFRESHING_CALLS).
    - acquire_conflict: an acquire whose nbytes/retain disagree with the entry raises
      ConflictError ("error"); "size": only one whose nbytes disagree raises it, a retain that
      disagrees being a hit (vLLM 0.34.0's scheduler rejects a request whose item is cached with
      another embedding count, and has no retain); or any such acquire is a hit on the entry as it
      is ("hit").
    - transient_entries: retain=False entries are removed at their last release (True) or kept
      like any other (False).
    - clear_busy: clear with reserved or in-use entries raises WrongStateError ("error") or drops
      every entry ("drop"; a later release of a dropped key follows release_missing).
    - argument_checks: wrong types and out-of-range sizes raise InvalidArgumentError ("checked")
      or are the caller's fault, outside the contract ("trusted": the checker never makes them);
      "value_type": only a stored value's type is checked, a commit or put of a value of no
      sizable type raising InvalidArgumentError, and every other argument (sizes, keys, retain, an
      empty value) is trusted (SGLang's `set` asserts its argument is an EmbeddingResult).
    - snapshot_order: which part of snapshot() the checker compares: every entry in order
      ("full"), the order of idle entries and the set of all ("idle"), the set only ("membership").
    - abandoned_reservation: the last release of a RESERVED entry (no value was committed) removes
      it and returns True ("removed"), or keeps it as an idle reservation ("kept"): refcount 0, no
      value, its bytes idle, evicted like an idle READY entry (oldest first) and moved to newest by
      that release when refresh_on has release; a later acquire is a RESERVATION_HIT that
      references it again, a commit stores its value (READY, still idle, its place kept), get and
      pop see a RESERVED entry. vLLM's `free_encoder_input` puts an item in `freeable` whether or
      not its encoder output was ever stored.
    - commit_size: a commit whose value's size differs from the reservation's raises
      ConflictError ("checked"), or is stored at the reserved size ("reserved": vLLM counts an
      item's embeddings when it schedules it and never looks at the output's size).
    """

    put_present: str = "error"
    put_too_large: str = "error"
    get_missing: str = "error"
    pop_missing: str = "get"
    release_missing: str = "error"
    eviction_time: str = "commit"
    refresh_on: frozenset = frozenset({"ready_hit", "reservation_hit", "get"})
    acquire_conflict: str = "error"
    transient_entries: bool = True
    clear_busy: str = "error"
    argument_checks: str = "checked"
    snapshot_order: str = "full"
    abandoned_reservation: str = "removed"
    commit_size: str = "checked"

    def __post_init__(self) -> None:
        object.__setattr__(self, "refresh_on", frozenset(self.refresh_on))
        unknown = sorted(self.refresh_on - set(REFRESHING_CALLS))
        if unknown:
            raise InvalidArgumentError(
                f"Semantics.refresh_on: {', '.join(unknown)} not among {', '.join(REFRESHING_CALLS)}"
            )
        for name, valid in OPTIONS.items():
            value = getattr(self, name)
            if not any(value is choice or (type(value) is type(choice) and value == choice) for choice in valid):
                raise InvalidArgumentError(
                    f"Semantics.{name}={value!r}: valid values are {', '.join(map(repr, valid))}"
                )

    def missing(self, operation: str) -> str:
        """What get or pop (`operation`) answers for an absent or RESERVED key: "error", "none" or
        "absent" (pop only: None for an absent key, WrongStateError for a RESERVED one)."""
        if operation == "pop" and self.pop_missing != "get":
            return self.pop_missing
        return self.get_missing

    def refreshes(self, call: str) -> bool:
        """Whether `call` (one of REFRESHING_CALLS) moves its entry to newest."""
        return call in self.refresh_on

    def differences(self) -> dict[str, Any]:
        """The fields that differ from the contract's choice, by name."""
        contract = Semantics()
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(contract, f.name)}

    def with_overrides(self, text: str) -> "Semantics":
        """These semantics with `FIELD=VALUE,...` applied (refresh_on takes `a+b`, or `none`).

        Unknown fields or values raise InvalidArgumentError listing the valid ones.
        """
        return overridden(self, text, parse_value)

    def as_written(self) -> dict[str, str]:
        """Every field's value as `--semantics` writes it, in field order."""
        return {name: describe_value(getattr(self, name)) for name in field_names()}


CONTRACT = Semantics()
"""The contract's semantics."""


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Semantics))


def parse_value(name: str, raw: str) -> Any:
    """The value of field `name` written as `raw` on a command line."""
    if name == "refresh_on":
        calls = frozenset() if raw in ("", "none") else frozenset(part.strip() for part in raw.split("+"))
        unknown = sorted(calls - set(REFRESHING_CALLS))
        if unknown:
            raise InvalidArgumentError(
                f"refresh_on={raw!r}: {', '.join(unknown)} not among {', '.join(REFRESHING_CALLS)} "
                "(join with +, or none)"
            )
        return calls
    return option_value(OPTIONS, name, raw, field_names())


def describe_value(value: Any) -> str:
    """A field's value as written on a command line."""
    if isinstance(value, frozenset):
        return "+".join(call for call in REFRESHING_CALLS if call in value) or "none"
    return written(value)
