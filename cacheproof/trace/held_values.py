"""What the spec beside a monitored cache holds of each value: its size, and a digest of its bytes
as they were when the cache was given it.

A cache is obliged to return from get/pop the value as it was at commit/put, not as the caller's
object is now: engines reuse their buffers. So the spec is given, for a value the contract accepts,
a storage-free stand-in of the same size (`storage_free_value`: the lifecycle depends on sizes
only), and the monitor keeps per key the BLAKE2b-128 digest of the value's bytes at call time. A
get/pop result matches when its bytes have that digest, whatever form the cache keeps them in
(bytes stored as a uint8 tensor, say). A value the contract refuses goes to the spec as it is, so
the spec refuses it with the same error.

A meta tensor (a cache on the meta device) holds no bytes: it matches when its size is the stored
value's. A storage-free broadcast view above 64 MiB is digested by its description (dtype, shape,
repeated byte), so a 2**40-byte value costs nothing to note.

Cost: one digest of the value's bytes per successful commit/put and per get/pop (a tensor on a
device is copied to the host for it), and 16 bytes per key instead of the caller's object: the
spec no longer keeps the callers' values alive. Digests of keys that left the cache are dropped
once they outnumber the entries, so memory stays O(entries).
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any, Hashable

from cacheproof.contract.calls import Call, to_python
from cacheproof.contract.values import MAX_VALUE_BYTES, is_storage_free, storage_free_value
from cacheproof.spec import CacheError
from cacheproof.spec.cache import arguments
from cacheproof.spec.cache.values import value_size
from cacheproof.spec.kind import Model

STORING_OPERATIONS = ("commit", "put")
_STALE_SLACK = 64
_STAND_IN_SIZES = 4096
"""Stand-ins are shared per size (the spec only sizes and returns them); at most this many kept."""


class HeldValues:
    """The digests of the values stored under each key, as the spec beside a cache sees them."""

    def __init__(self) -> None:
        self._digests: dict[Hashable, bytes] = {}
        self._stand_ins: dict[int, Any] = {}  # size -> one read-only stand-in, shared

    def spec_arguments(self, op: str, args: tuple) -> tuple:
        """The arguments to give the spec: a commit/put value the contract accepts becomes a stand-in."""
        if op not in STORING_OPERATIONS or len(args) != 2:
            return args
        try:
            size = arguments.check_value(op, args[0], args[1])
        except CacheError:
            return args
        stand_in = self._stand_ins.get(size)
        if stand_in is None:
            if len(self._stand_ins) >= _STAND_IN_SIZES:
                self._stand_ins.clear()
            stand_in = self._stand_ins[size] = storage_free_value(size)
        return (args[0], stand_in)

    def note(self, op: str, args: tuple, stored: bool, spec: Model) -> None:
        """After the spec's call: remember the digest of a value it stored (`stored`)."""
        if op not in STORING_OPERATIONS or not stored:
            return
        self._digests[args[0]] = digest(args[1])
        if len(self._digests) > 2 * len(spec) + _STALE_SLACK:
            self._digests = {key: value for key, value in self._digests.items() if key in spec}

    def difference(self, call: Call, result: Any, stand_in: Any = None) -> str | None:
        """None if the value a get/pop returned has the bytes stored under its key, else why not.

        A meta tensor holds no bytes to compare: it matches when its size is that of the spec's
        `stand_in` for the stored value (a meta-device cache keeps sizes only).
        """
        if _is_meta_tensor(result) and stand_in is not None and value_size(result) == value_size(stand_in):
            return None
        expected = self._digests.get(call.args[0])
        actual = digest(result)
        if actual is not None and actual == expected:
            return None
        return (
            f"{to_python(call)}: spec returns the value as it was stored (digest "
            f"{_hex(expected)}); this cache returns {_describe(result)} (digest {_hex(actual)})"
        )


def digest(value: Any) -> bytes | None:
    """BLAKE2b-128 of the value's bytes in C order; for a meta tensor (a size without data, which
    a cache holds as a meta tensor), of its dtype and shape; None for a value with no bytes to read.

    A storage-free broadcast view above MAX_VALUE_BYTES is digested by its dtype, shape and one
    repeated element, never by reading its logical bytes.
    """
    description = _storage_free_description(value)
    if description is not None:
        return hashlib.blake2b(description.encode(), digest_size=16).digest()
    raw = _raw_bytes(value)
    if raw is None and _is_meta_tensor(value):
        raw = f"meta tensor {value.dtype} {tuple(value.shape)}".encode()
    return None if raw is None else hashlib.blake2b(raw, digest_size=16).digest()


def _is_meta_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor) and value.is_meta


def _storage_free_description(value: Any) -> str | None:
    """A huge broadcast view's description; None for anything else (small views are read as usual)."""
    if not hasattr(value, "strides") or not is_storage_free(value) or value.nbytes <= MAX_VALUE_BYTES:
        return None
    return f"repeated {value.dtype} {value.shape} {value.flat[0]!r}"


def _raw_bytes(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return memoryview(value).cast("B")
    if isinstance(value, memoryview):
        return value.tobytes()
    kind = type(value)
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return value.tobytes()
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if type(value) is torch.Tensor and value.is_contiguous():
            try:
                return value.numpy()  # a plain CPU tensor: its own bytes, not copied
            except (RuntimeError, TypeError):  # on a device, requiring grad, or no numpy dtype
                pass
        try:
            return value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        except (RuntimeError, TypeError, NotImplementedError):  # no data to read (meta, sparse, ...)
            return None
    return None


def _hex(value: bytes | None) -> str:
    return "none" if value is None else value.hex()


def _describe(value: Any) -> str:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a value of dtype {value.dtype}, shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
