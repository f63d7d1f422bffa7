"""What the model beside a monitored implementation holds of each value it is given: a storage-free
stand-in of the value's size that carries the digest of the value's bytes as they were at the call.

An argument whose operation-table domain is "value" (`spec.kind.Argument.domain`; the tensor
cache's commit/put) is what an implementation is obliged to give back, as it was at the call, from
an operation whose result is the stored value (`spec.kind.STORED_VALUE`; get/pop); the caller's
object is not: engines reuse their buffers. So the model is given, for a value the sizing rule
accepts (`spec.cache.values.value_size`, >= 1 byte), a stand-in of the same size (the lifecycle
reads sizes only): a read-only, storage-free view of its own (`storage_free_value`), whose BLAKE2b-128
digest of the value's bytes is held here while the model holds the stand-in. When the model returns
a stand-in, the implementation's result matches when its bytes have that digest, whatever form it
keeps them in (bytes stored as a uint8 tensor, say). A value the sizing rule refuses goes to the
model as it is, so the model refuses it with the implementation's error. No rule names an operation
or a kind: which stand-in the model gives back decides which digest is compared (a put the model
answers without storing, as under `put_present=keep`, leaves the earlier stand-in in place).

A meta tensor (an implementation on the meta device) holds no bytes: it matches when its size is
the stand-in's. A storage-free broadcast view above 64 MiB is digested by its description (dtype,
shape, repeated element), so a 2**40-byte value costs nothing to note.

Cost: one digest of the value's bytes per value handed over and per stored value returned (a tensor
on a device is copied to the host for it), and per held stand-in one view, one weak reference and
16 bytes, dropped when the model drops the stand-in: memory is O(the values the model holds), and
no caller's value is kept alive.
"""

from __future__ import annotations

import hashlib
import sys
import weakref
from typing import Any

from cacheproof.contract.calls import ValueRecipe
from cacheproof.contract.values import MAX_VALUE_BYTES, is_storage_free, storage_free_value
from cacheproof.spec.cache.values import element_sizes_dividing, value_size

_STAND_IN_SIZES = 4096
"""Stand-ins are views of one read-only base per size; at most this many bases kept."""


class HeldValues:
    """The stand-ins the model holds, each with the digest of the value it stands for."""

    def __init__(self) -> None:
        self._digests: dict[int, tuple[weakref.ref, bytes | None]] = {}  # id(stand-in) -> (ref, digest)
        self._bases: dict[int, Any] = {}  # size -> a read-only storage-free base, shared by its views

    def __len__(self) -> int:
        """How many stand-ins (and digests) are held: those the model still holds."""
        return len(self._digests)

    def hand_over(self, value: Any) -> tuple[Any, Any]:
        """(what the model is given for `value`, what the trace records of it): a stand-in holding
        the value's digest, and `ValueRecipe(size, 0, element size)`, for a value of >= 1 byte; the
        value itself for the model when the sizing rule refuses it (recorded as its size, or as it
        is when it has none)."""
        size = value_size(value)
        if size is None:
            return value, value
        recorded = ValueRecipe(size, 0, _element_size(value, size))
        if size < 1:
            return value, recorded
        base = self._bases.get(size)
        if base is None:
            if len(self._bases) >= _STAND_IN_SIZES:
                self._bases.clear()
            base = self._bases[size] = storage_free_value(size)
        stand_in = base.view()
        key = id(stand_in)
        digests = self._digests
        digests[key] = (weakref.ref(stand_in, lambda _, key=key: digests.pop(key, None)), digest(value))
        return stand_in, recorded

    def holds(self, stand_in: Any) -> bool:
        """Whether `stand_in` (what the model returned) is one of the stand-ins handed over."""
        held = self._digests.get(id(stand_in))
        return held is not None and held[0]() is stand_in

    def difference(self, result: Any, stand_in: Any) -> str | None:
        """None if `result` has the bytes of the value `stand_in` (a held stand-in) stands for, else
        why not. A meta tensor holds no bytes to compare: it matches when its size is the
        stand-in's (a meta-device implementation keeps sizes only)."""
        if _is_meta_tensor(result) and value_size(result) == value_size(stand_in):
            return None
        expected = self._digests[id(stand_in)][1]
        actual = digest(result)
        if actual is not None and actual == expected:
            return None
        return (f"spec returns the value as it was stored (digest {_hex(expected)}); this implementation "
                f"returns {_describe(result)} (digest {_hex(actual)})")


class StoredValue:
    """The model's result where it returned a stand-in, as a message shows it: the value stored
    (its size), never the stand-in's repeated element."""

    def __init__(self, stand_in: Any) -> None:
        self.nbytes = value_size(stand_in)

    def __repr__(self) -> str:
        return f"<the value stored, {self.nbytes} bytes>"


def _element_size(value: Any, size: int) -> int:
    """Bytes per element of a sized value (`itemsize` of an array or tensor; 1 for bytes, and for
    an element size no recipe has)."""
    itemsize = getattr(value, "itemsize", 1)
    return itemsize if type(itemsize) is int and itemsize in element_sizes_dividing(size) else 1


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
