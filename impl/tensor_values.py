"""The values of `TensorLRUCache`: how a value is copied onto the cache's device, handed to the
current CUDA stream, checked, and how a test value is made.

Rule: the cache holds its own copy of a value: a torch tensor as a detached, contiguous copy on
the cache's device holding exactly its own bytes, a buffer (bytes, bytearray, memoryview, numpy
array) as a 1-D uint8 tensor of its bytes; on the meta device, and for a value without data, a
meta tensor of the value's dtype and shape. A copy that does not hold the size the value was
checked at is refused (InvalidArgumentError) before the cache changes. With stream awareness
the copy is marked by a CUDA event that a consumer stream waits on.
"""

from __future__ import annotations

from typing import Any, Hashable

from cacheproof.extras import missing_extra

try:
    import torch
except ModuleNotFoundError as missing:
    raise missing_extra(missing, __name__) from None

from cacheproof.impl.lru_entries import Entry
from cacheproof.spec.cache import invariants
from cacheproof.spec.cache.values import (
    ELEMENT_FILL_MODULUS, dtype_name_for, element_size_for, element_sizes_dividing, unsizable_reason, value_size,
)
from cacheproof.spec.errors import InvalidArgumentError


_META = torch.device("meta")
_TENSOR, _STRIDED, _CONTIGUOUS = torch.Tensor, torch.strided, torch.contiguous_format


def sized(operation: str, key: Hashable, value: Any) -> int:
    """The value's size by the contract's sizing rule (`cacheproof.spec.cache.values`);
    InvalidArgumentError if it is unsizable or empty. A plain dense tensor, the common case, is
    sized here by the same rule (numel * element_size); the copy is checked against the size."""
    if type(value) is _TENSOR and value.layout is _STRIDED and not (value.is_quantized or value.is_nested):
        size = value.nbytes
    else:
        size = value_size(value)
        if size is None:
            raise InvalidArgumentError(f"{operation}({key!r}): {unsizable_reason(value)}")
    if size < 1:
        raise InvalidArgumentError(f"{operation}({key!r}): the value is empty (0 bytes); size must be >= 1")
    return size


def make_value(device: torch.device, nbytes: int, tag: int, element_size: int | None = None) -> torch.Tensor:
    """A tensor of exactly nbytes bytes of `element_size`-byte elements on the cache's device,
    filled deterministically from tag.

    The element size is the recipe's (None: `element_size_for(nbytes, tag)`, the one the checker
    draws for (nbytes, tag)); the dtype is picked by `tag` among that size's
    (`cacheproof.spec.cache.values.ELEMENT_DTYPES`: uint8/int8, float16/bfloat16/int16,
    float32/int32, float64/int64), so callers that vary the tag exercise every one.
    """
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
        raise InvalidArgumentError(f"make_value: nbytes must be an int >= 1, got {nbytes!r}")
    if not isinstance(tag, int) or isinstance(tag, bool):
        raise InvalidArgumentError(f"make_value: tag must be an int, got {tag!r}")
    if element_size is None:
        element_size = element_size_for(nbytes, tag)
    elif type(element_size) is not int or element_size not in element_sizes_dividing(nbytes):
        raise InvalidArgumentError(
            f"make_value: element_size must be one of {element_sizes_dividing(nbytes)} for nbytes={nbytes}, "
            f"got {element_size!r}"
        )
    dtype = getattr(torch, dtype_name_for(element_size, tag))
    numel = nbytes // element_size
    if device.type == "meta":  # no data, so any size: the checker's values at 2**40 bytes
        return torch.empty(numel, dtype=dtype, device=device)
    fill = (torch.arange(numel, dtype=torch.int64) * 31 + tag % ELEMENT_FILL_MODULUS) % ELEMENT_FILL_MODULUS
    return fill.to(device=device, dtype=dtype)


def device_index(device: torch.device) -> int | None:
    """What `copy_value` compares a tensor's `get_device()` with: -1 for the CPU, the index of a
    CUDA device, None for any other device (meta included)."""
    if device.type == "cpu":
        return -1
    return device.index if device.type == "cuda" else None


def copy_value(
    device: torch.device, index: int | None, stream_aware: bool, operation: str, key: Hashable, value: Any, size: int
) -> tuple[torch.Tensor, Any]:
    """The cache's own copy of a value of `size` bytes (as sized by the contract's rule), and the
    event marking the copy done.

    On the meta device, and for a value with no data (a meta tensor) on any device, the copy is
    a meta tensor of the value's dtype and shape (a 1-D uint8 tensor of `size` for a buffer):
    sizes without data, nothing allocated. InvalidArgumentError, before anything changes, if
    the copy does not hold `size` bytes (the value changed while the lock was released).
    `index`: `device_index(device)`, computed once (`device.type` costs as much as a dict
    operation). A plain tensor takes one torch call: `clone` when it is already a contiguous tensor
    without grad on the device (the common case), else `to(device, copy=True)`.
    """
    if type(value) is _TENSOR and index is not None:
        if not value.requires_grad and value.is_contiguous() and (
            value.is_cpu if index < 0 else value.is_cuda and value.get_device() == index
        ):
            stored = value.clone()
        elif not value.is_meta:
            stored = value.to(device, copy=True, memory_format=_CONTIGUOUS)
            if stored.requires_grad:
                stored = stored.detach()
        else:
            stored = torch.empty(torch.Tensor.size(value), dtype=value.dtype, device="meta")
        if stored.nbytes == size and not stream_aware:
            return stored, None
        return _checked(stored, stream_aware, operation, key, size, device)
    is_tensor = isinstance(value, torch.Tensor)
    if index is None and device.type == "meta" or (is_tensor and torch.Tensor.is_meta.__get__(value)):
        if is_tensor:
            stored = torch.empty(torch.Tensor.size(value), dtype=value.dtype, device="meta")
        else:
            stored = torch.empty(size, dtype=torch.uint8, device="meta")
    else:
        source = torch.Tensor.detach(value) if is_tensor else _host_bytes(value)
        stored = torch.empty(source.shape, dtype=source.dtype, device=device)
        stored.copy_(source)
    return _checked(stored, stream_aware, operation, key, size, device)


def _checked(
    stored: torch.Tensor, stream_aware: bool, operation: str, key: Hashable, size: int, device: torch.device
) -> tuple[torch.Tensor, Any]:
    """The copy if it holds `size` bytes, with its event where stream-aware."""
    copied = stored.nbytes
    if copied != size:
        raise InvalidArgumentError(
            f"{operation}({key!r}): the value had {size} bytes when it was sized and {copied} when it "
            "was copied; a value must not change while the cache stores it"
        )
    if not stream_aware:
        return stored, None
    ready_event = torch.cuda.Event()
    ready_event.record(torch.cuda.current_stream(device))
    return stored, ready_event


def hand_to_current_stream(device: torch.device, entry: Entry) -> None:
    """Order the current stream after the value's copy and keep its memory alive for that stream."""
    if entry.ready_event is None:
        return
    stream = torch.cuda.current_stream(device)
    stream.wait_event(entry.ready_event)
    if entry.value.device.type == "cuda":  # a meta value holds no memory to keep alive
        entry.value.record_stream(stream)


def check_stored_value(device: torch.device, key: Hashable, entry: Entry) -> None:
    """A stored value is a contiguous tensor of the entry's size, on the cache's device or on
    meta (a value without data)."""
    value = entry.value
    if (
        not isinstance(value, torch.Tensor)
        or value.device not in (device, _META)
        or not value.is_contiguous()
    ):
        raise invariants.InvariantViolation(f"READY entry {key!r} holds no contiguous tensor on {device}")
    if value.numel() * value.element_size() != entry.nbytes:
        raise invariants.InvariantViolation(f"READY entry {key!r} holds a value of another size")


def _host_bytes(value: Any) -> torch.Tensor:
    """A 1-D uint8 CPU tensor of a sizable non-tensor value's bytes, in C order: bytes, bytearray
    and memoryview through the buffer protocol (never a subclass's `__len__`), a numpy array of
    any dtype without objects (datetime64 included, which exports no buffer) by `tobytes()`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytearray(memoryview(value))
    else:
        raw = bytearray(value.tobytes())
    return torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
