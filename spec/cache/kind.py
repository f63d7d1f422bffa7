"""The tensor cache as a spec kind: `CacheSpec`, its operation table, invariants and profiles."""

from __future__ import annotations

from cacheproof.spec.cache.operations import CACHE_OPERATIONS, CACHE_TYPES
from cacheproof.spec.cache.model import CacheSpec
from cacheproof.spec.cache.invariants import INVARIANTS
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.cache.profiles import PROFILES
from cacheproof.spec.cache.views import CACHE_VIEWS

CACHE_KIND = SpecKind(
    name="cache",
    summary="a byte-bounded, ref-counted LRU tensor cache with reservations (docs/contract.md)",
    operations=CACHE_OPERATIONS,
    size_name="capacity_bytes",
    new=CacheSpec,
    invariants=INVARIANTS,
    profiles=PROFILES,
    key_domains=("int", "str", "bytes", "tuple", "mixed"),
    keys_are="entry keys",
    state_every=None,
    types=CACHE_TYPES,
    views=tuple(CACHE_VIEWS),
    view_readers=CACHE_VIEWS,
)
