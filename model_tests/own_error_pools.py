"""Block pools that raise their own error classes, named as the contract's but unrelated to
`cacheproof.spec.errors` (an engine's pool defines its own). The contract matches errors by class
name anywhere in the MRO (docs/block-pool-contract.md, Errors), so `OwnErrorsPool` conforms; the
two broken ones carry one bug each that the checker must report once, with a snippet that fails.
"""

from __future__ import annotations

import functools

from cacheproof.spec.errors import CacheError
from model_tests.block_pools import DoubleFreePool, ListBlockPool


class PoolError(Exception):
    """The base of this pool's own errors (no class of cacheproof's in its MRO)."""


class InvalidArgumentError(PoolError, ValueError):
    """An argument of the wrong type or out of range."""


class WrongStateError(PoolError):
    """The pool's state does not allow the call."""


class DoubleFreeError(WrongStateError):
    """A block freed more often than the request holds it: a WrongStateError by its MRO."""


class CapacityError(PoolError):
    """Too few free blocks."""


_OWN = {"InvalidArgumentError": InvalidArgumentError, "WrongStateError": WrongStateError,
        "CapacityError": CapacityError}

OPERATIONS = ("allocate", "touch", "cache_blocks", "lookup", "free", "unpin", "writable", "evict", "reset",
              "num_free", "find_cached_prefix", "allocate_slots", "free_request")


def _translated(method, name: str):
    """`method` raising this module's class of the same name where the list pool raises cacheproof's."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except CacheError as error:
            double = name in ("free", "unpin") and "does not hold" in str(error)
            own = DoubleFreeError if double else _OWN[type(error).__name__]
            raise own(str(error)) from None

    return call


def own_errors(pool_class: type) -> type:
    """A subclass of `pool_class` whose every operation raises this module's error classes."""
    methods = {name: _translated(getattr(pool_class, name), name) for name in OPERATIONS}
    return type(f"OwnErrors{pool_class.__name__}", (pool_class,), methods)


OwnErrorsPool = own_errors(ListBlockPool)
"""A correct pool: every contract error is one of its own classes (a double free a DoubleFreeError)."""


class WrongClassFreePool(OwnErrorsPool):
    """A double free raises the pool's own InvalidArgumentError where the contract says
    WrongStateError (the argument is well formed; the request's holdings forbid the call)."""

    def free(self, request, blocks):
        try:
            return super().free(request, blocks)
        except DoubleFreeError as error:
            raise InvalidArgumentError(str(error)) from None


OwnErrorsDoubleFreePool = own_errors(DoubleFreePool)
"""DoubleFreePool's bug (a free of a block not held is accepted), its other errors its own classes."""
