"""`monitor(target)`: run the spec beside a live implementation of any spec kind and raise
`DivergenceError` at the first mismatch (docs/traces.md, The runtime monitor; docs/block-traces.md).

One entry and one monitor for every kind (`trace.monitored.MonitoredImplementation`): it reads the
kind's `SpecKind` (its size name, profiles, operations, views, `state_every`) and nothing else.
`MonitoredCache`, the name the tensor cache's monitor had, is the same class.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import KindSemantics, SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind
from cacheproof.trace.format import checked_operations
from cacheproof.contract.steps import view_failed, view_of
from cacheproof.trace.monitored import DivergenceError, Monitored, MonitoredImplementation

MonitoredCache = MonitoredImplementation
"""The tensor cache's monitor by its former name (`cacheproof.MonitoredCache`): the one monitor."""

__all__ = ["DivergenceError", "Monitored", "MonitoredCache", "MonitoredImplementation", "monitor"]


def monitor(
    target: Any,
    *,
    trace_path: str | Path | None = None,
    capacity_bytes: int | None = None,
    state_every: int | None = None,
    profile: str | None = None,
    semantics: str | KindSemantics | None = "",
    ops: Sequence[str] | None = None,
    kind: str = DEFAULT_KIND,
    size: int | None = None,
) -> Any:
    """Wrap a fresh `target`, an implementation of spec kind `kind` (default the tensor cache), so that
    every call of one of its operations is checked against the spec.

    The size is `size` (or, for the tensor cache, `capacity_bytes`), else the target's attribute named
    by the kind's `size_name` (`capacity_bytes`, `num_blocks`), else that field of `target.stats()`.
    `trace_path` logs every call as a trace that `cacheproof replay` reads. `state_every=n` compares
    the whole state after every n-th call; None: the kind's default (`SpecKind.state_every`; the
    tensor cache's every max(16, 2 * entries) calls, the block pool's every call). `profile` names the
    semantics the spec runs with (default: the kind's; InvalidArgumentError if unknown); `semantics`
    overrides fields of it, as `--semantics` does ("FIELD=VALUE,..."), or replaces it whole (a
    semantics object); `ops` names the operations the target has (default: the profile's): calling
    another on the monitor raises AttributeError. The trace header records all three, so the trace
    file replays under them with no flags. The target must be fresh (ValueError otherwise).
    """
    spec_kind = get_kind(kind)
    profile = spec_kind.default_profile if profile is None else profile
    if profile not in spec_kind.profiles:
        raise InvalidArgumentError(f"monitor: unknown profile {profile!r}; profiles: {', '.join(spec_kind.profiles)}")
    chosen = spec_kind.profiles[profile]
    if semantics is None or isinstance(semantics, str):
        spec_semantics = chosen.semantics.with_overrides(semantics or "")
    else:
        spec_semantics = semantics
    operations = chosen.operations if ops is None else checked_operations(spec_kind, list(ops))
    if state_every is not None and (type(state_every) is not int or state_every < 1):
        raise ValueError(f"monitor: state_every must be an int >= 1 or None, got {state_every!r}")
    size = _size(target, spec_kind, size, capacity_bytes)
    fresh = spec_kind.new(size, spec_semantics)
    for view in spec_kind.views:
        answer = view_of(target, view, spec_kind.view_readers, fresh)
        wanted = spec_kind.read_view(fresh, view, fresh)
        if not view_failed(view, answer) and answer != wanted:
            raise ValueError(f"monitor: the target's {view}() is {answer!r}, a fresh {kind} spec's {wanted!r}; "
                             "monitor it from fresh")
    return MonitoredImplementation(target, spec_kind, size, profile=profile, semantics=spec_semantics,
                                   operations=operations, trace_path=trace_path,
                                   state_every=spec_kind.state_every if state_every is None else state_every)


def _size(target: Any, kind: SpecKind, size: int | None, capacity_bytes: int | None) -> int:
    """The size of the model beside `target` (see `monitor`); ValueError naming what to pass."""
    if capacity_bytes is not None:
        if kind.size_name != "capacity_bytes":
            raise ValueError(f"monitor: capacity_bytes= sizes a tensor cache; for kind={kind.name!r} pass size= "
                             f"(the {kind.size_name})")
        size = capacity_bytes if size is None else size
    if size is None:
        size = getattr(target, kind.size_name, None)
    if size is None and hasattr(target, "stats"):
        size = getattr(target.stats(), kind.size_name, None)
    if type(size) is not int:
        raise ValueError(f"monitor: pass size= (the {kind.size_name}); the target has neither an int "
                         f"{kind.size_name} nor stats()")
    return size
