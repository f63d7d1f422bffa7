"""The cache's typed errors. Every error leaves the cache exactly as it was (invariant I6)."""


class CacheError(Exception):
    """Base class of every error a cache operation raises."""


class InvalidArgumentError(CacheError, ValueError):
    """An argument has the wrong type or is out of range (unhashable key, nbytes < 1, ...)."""


class TooLargeError(CacheError, ValueError):
    """An item can never fit: its size exceeds the cache's capacity."""


class UnknownKeyError(CacheError, KeyError):
    """The key is absent."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class WrongStateError(CacheError):
    """The entry's state does not allow the operation (e.g. get on a RESERVED entry)."""


class ConflictError(CacheError, ValueError):
    """The call disagrees with the entry: another nbytes, another retain flag, a value of another size."""


class CapacityError(CacheError):
    """Evicting every idle entry would still not free enough bytes."""
