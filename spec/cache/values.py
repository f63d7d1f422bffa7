"""The size in bytes of a cached value, by the contract's rule. Only these values are sizable.

A value is sizable when its type is one of the rule's and it holds plain bytes that a cache can
copy: not the pointers of Python objects (numpy object arrays), not a compressed or re-encoded
form (sparse, quantized and nested tensors), not a buffer that is gone (a released memoryview).
A tensor on PyTorch's "meta" device is sizable: it has a size and no data (the storage-free
checking mode). Each value is sized from one trustworthy source, read once: a bytes subclass is
sized by its buffer, never by a `__len__` it may redefine.

A value's bytes are a run of elements of 1, 2, 4 or 8 bytes (`ELEMENT_DTYPES`), as the float16,
bfloat16 and float32 tensors engines cache are: its size counts bytes, never elements, so the
checker's values have every element size (`element_size_for`; `cacheproof.contract.values`) and
the built-in cache makes a dtype of the size it is told (`cacheproof.impl.tensor_values`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

ELEMENT_DTYPES: dict[int, tuple[str, ...]] = {
    1: ("uint8", "int8"),
    2: ("float16", "bfloat16", "int16"),
    4: ("float32", "int32"),
    8: ("float64", "int64"),
}
"""The element sizes (bytes per element) values are made with, and the dtypes of each size by
name, the engines' first: KV blocks, encoder outputs and embeddings are float16, bfloat16 and
float32 tensors. A cache that sizes a value by its element count instead of its bytes is right
only at element size 1."""

ELEMENT_FILL_MODULUS = 127
"""Values made with several-byte elements hold integers below this: exact in every dtype of
ELEMENT_DTYPES, int8 and bfloat16 included."""


def element_sizes_dividing(nbytes: int) -> tuple[int, ...]:
    """The element sizes a value of nbytes bytes can have: those dividing nbytes (1 alone for an
    odd nbytes, or for 0, the empty value)."""
    return tuple(size for size in ELEMENT_DTYPES if nbytes >= 1 and nbytes % size == 0) or (1,)


def element_size_for(nbytes: int, tag: int) -> int:
    """The element size of the value recipe (nbytes, tag): one of `element_sizes_dividing(nbytes)`,
    picked by `tag` (tag 0: 1 byte, the simplest)."""
    sizes = element_sizes_dividing(nbytes)
    return sizes[tag % len(sizes)]


def dtype_name_for(element_size: int, tag: int, available: Any = None) -> str:
    """The dtype, by name, of a value of `element_size`-byte elements made from `tag`: one of
    ELEMENT_DTYPES[element_size] (those `available(name)` accepts, when given), picked by
    tag // len(ELEMENT_DTYPES), so that the element size and the dtype vary apart."""
    names = [name for name in ELEMENT_DTYPES[element_size] if available is None or available(name)]
    return names[(tag // len(ELEMENT_DTYPES)) % len(names)]


def value_size(value: Any) -> int | None:
    """Bytes of `value`, or None if it is not sizable (`unsizable_reason` says why).

    bytes/bytearray: the nbytes of their buffer; memoryview and numpy arrays: .nbytes; torch
    tensors: nbytes (numel() * element_size()). numpy and torch are recognised by their type, not
    imported.
    """
    rule, tensor = _sizing_rule(type(value))
    if rule == "buffer":
        return memoryview(value).nbytes
    if rule == "memoryview":
        try:
            return value.nbytes
        except ValueError:  # released
            return None
    if rule == "ndarray":
        return None if value.dtype.hasobject else int(value.nbytes)
    if rule == "tensor":
        if type(value) is tensor:  # the common case: no subclass can redefine what is read
            plain = not (value.is_quantized or value.is_nested) and _is_strided(value.layout)
            return int(value.nbytes) if plain else None
        return int(tensor.nbytes.__get__(value)) if _is_plain_tensor(tensor, value) else None
    return None


def unsizable_reason(value: Any) -> str:
    """Why `value_size(value)` is None, in words for an error message."""
    rule, tensor = _sizing_rule(type(value))
    if rule == "memoryview":
        return "the memoryview is released; its buffer is gone"
    if rule == "ndarray":
        return (
            f"a numpy array of dtype {value.dtype} holds pointers to Python objects, not bytes a cache can copy"
        )
    if rule == "tensor":
        kind = "quantized" if tensor.is_quantized.__get__(value) else "nested" if tensor.is_nested.__get__(value) \
            else str(tensor.layout.__get__(value))
        return (
            f"a {kind} tensor is not stored: its bytes are not numel * element_size plain elements; "
            "convert it to a dense, strided tensor first"
        )
    return (
        f"a value of type {type(value).__name__} has no size; use bytes, bytearray, memoryview, "
        "a numpy array or a torch tensor"
    )


def _is_plain_tensor(tensor: type, value: Any) -> bool:
    """Dense and strided, neither quantized nor nested: numel * element_size bytes of elements.
    Read through `torch.Tensor`'s own descriptors, which a subclass cannot redefine."""
    return not (tensor.is_quantized.__get__(value) or tensor.is_nested.__get__(value)) and _is_strided(
        tensor.layout.__get__(value)
    )


@lru_cache(maxsize=16)
def _is_strided(layout: Any) -> bool:
    """The layout is `torch.strided` (dense), told by its name (decided once per layout)."""
    return str(layout) == "torch.strided"


@lru_cache(maxsize=256)
def _sizing_rule(kind: type) -> tuple[str | None, type | None]:
    """How values of type `kind` are sized, and for a tensor type the `torch.Tensor` class in its
    MRO, whose methods size it (decided once per type)."""
    if issubclass(kind, (bytes, bytearray)):
        return "buffer", None
    if issubclass(kind, memoryview):
        return "memoryview", None
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray":
        return "ndarray", None
    for base in kind.__mro__:
        if base.__module__ == "torch" and base.__name__ == "Tensor":
            return "tensor", base
    return None, None
