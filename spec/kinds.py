"""The registry of spec kinds: name -> `SpecKind`, each built on first use.

A kind registers here by the module and attribute that hold its `SpecKind`. The tensor cache
("cache") is the default kind.
"""

from __future__ import annotations

import importlib

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind

DEFAULT_KIND = "cache"

_REGISTRY: dict[str, str] = {
    "cache": "cacheproof.spec.cache.kind:CACHE_KIND",
    "blocks": "cacheproof.spec.blocks.kind:BLOCK_KIND",
    "radix": "cacheproof.spec.radix.kind:RADIX_KIND",
    "slots": "cacheproof.spec.slots.kind:SLOTS_KIND",
}


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, the default first."""
    return tuple(_REGISTRY)


def get_kind(name: str = DEFAULT_KIND) -> SpecKind:
    """The `SpecKind` registered as `name`; InvalidArgumentError naming the known kinds otherwise."""
    try:
        module_name, _, attribute = _REGISTRY[name].partition(":")
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"--spec {name!r}: unknown spec kind; known kinds are {', '.join(_REGISTRY)}"
        ) from None
    return getattr(importlib.import_module(module_name), attribute)


def new_spec(size: int, semantics=None, *, kind: str = DEFAULT_KIND):
    """A fresh model of `kind` (default the tensor cache) of `size` (its kind's `size_name`), under
    `semantics` (default: the kind's contract)."""
    spec_kind = get_kind(kind)
    return spec_kind.new(size) if semantics is None else spec_kind.new(size, semantics)
