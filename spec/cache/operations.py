"""The tensor cache's operation table: every operation of docs/contract.md, once.

The checker's calls, the trace format, snippets, the prover's obligations, the docs and the
benches read this table; nothing else lists the cache's operations.
"""

from __future__ import annotations

from cacheproof.spec.kind import STORED_VALUE, Argument, Operation

_KEY = Argument("key", "key")
_NBYTES = Argument("nbytes", "nbytes")
_VALUE = Argument("value", "value")
_RETAIN = Argument("retain", "flag", keyword=True, default="True")
_BAD_ARGUMENT = ("InvalidArgumentError", "TooLargeError")

CACHE_OPERATIONS: tuple[Operation, ...] = (
    Operation("reserve", (_KEY, _NBYTES, _RETAIN), "bool", _BAD_ARGUMENT + ("WrongStateError",), True,
              summary="claim nbytes for a value to come; False if protected bytes would overflow"),
    Operation("acquire", (_KEY, _NBYTES, _RETAIN), "Acquired", _BAD_ARGUMENT + ("ConflictError",), True,
              summary="take a reference, reserving the key if absent"),
    Operation("commit", (_KEY, _VALUE), "list of evicted keys",
              ("InvalidArgumentError", "UnknownKeyError", "WrongStateError", "ConflictError"), True,
              summary="store the value of a RESERVED key, evicting idle entries oldest first"),
    Operation("put", (_KEY, _VALUE), "bool", _BAD_ARGUMENT + ("WrongStateError",), True,
              summary="store a READY idle entry in one call"),
    Operation("get", (_KEY,), STORED_VALUE, ("InvalidArgumentError", "UnknownKeyError", "WrongStateError"), True,
              summary="the value of a READY entry; refreshes recency"),
    Operation("release", (_KEY,), "bool", ("InvalidArgumentError", "UnknownKeyError", "WrongStateError"), True,
              summary="drop one reference"),
    Operation("evict", (_NBYTES,), "list of evicted keys", _BAD_ARGUMENT + ("CapacityError",), True,
              summary="evict idle entries, oldest first, until nbytes are free"),
    Operation("pop", (_KEY,), STORED_VALUE, ("InvalidArgumentError", "UnknownKeyError", "WrongStateError"), True,
              summary="remove an idle entry and return its value"),
    Operation("clear", (), "None", ("WrongStateError",), True, summary="remove every entry"),
    Operation("contains", (_KEY,), "bool", ("InvalidArgumentError",), False, form="contains",
              summary="`key in cache`"),
)
"""The cache's operations, in the order the checker lists them."""

CACHE_TYPES: dict[str, str] = {
    "key": "Hashable", "nbytes": "int", "value": "Any", "flag": "bool",
    "bool": "bool", "Acquired": "Acquired", "list of evicted keys": "list[Hashable]", STORED_VALUE: "Any",
    "None": "None",
}
"""The Python type of each argument domain and result above, as docs/contract.md's signatures write them."""

ALL_OPERATIONS: tuple[str, ...] = tuple(op.name for op in CACHE_OPERATIONS)
"""Every operation name of the contract, in table order."""

METHOD_OPERATIONS: tuple[str, ...] = tuple(op.name for op in CACHE_OPERATIONS if op.form == "method")
"""The operations a cache implements as methods (`contains` is `key in cache`)."""

KEYED_OPERATIONS: tuple[str, ...] = tuple(op.name for op in CACHE_OPERATIONS if op.keyed)
"""The operations whose first argument is a key."""

SIGNATURES: dict[str, tuple[int, frozenset[str]]] = {op.name: (len(op.positional), op.keywords) for op in CACHE_OPERATIONS}
"""Each operation's positional argument count and the keyword arguments it takes."""
