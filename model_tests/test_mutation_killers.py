"""Tests written to kill mutants that the model tests let survive (see docs/mutation.md).

Each expectation comes from the contract's sizing rule (/work/shared/CONTRACT.md, "Size of a value"):
`len()` for bytes/bytearray, `.nbytes` for memoryview and numpy arrays, `numel() * element_size()`
for torch tensors, and any other type is not sizable.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cacheproof.spec import CacheSpec, ConflictError
from cacheproof.spec.values import value_size


class ndarray:  # noqa: N801 - named like numpy's array on purpose
    """Not numpy's array: only its name matches."""

    nbytes = 7


class Tensor:
    """Not torch's tensor: only its name matches."""

    def numel(self) -> int:
        return 3

    def element_size(self) -> int:
        return 5


def test_a_numpy_array_is_sized_by_its_nbytes() -> None:
    # Kills the numpy-branch mutants of value_size in spec/values.py (`!= "numpy"`, the altered
    # "numpy"/"ndarray" strings, `!= "ndarray"`, `int(None)`): 3 float32 elements are 3 * 4 = 12 bytes.
    assert value_size(np.zeros(3, dtype=np.float32)) == 12


def test_a_class_named_ndarray_outside_numpy_is_not_sizable() -> None:
    # Kills value_size's `kind.__module__ == "numpy" or kind.__name__ == "ndarray"` mutant.
    assert value_size(ndarray()) is None


def test_a_class_named_tensor_outside_torch_is_not_sizable() -> None:
    # Kills _is_torch_tensor's `base.__module__ == "torch" or base.__name__ == "Tensor"` mutant.
    assert value_size(Tensor()) is None


def test_a_torch_tensor_is_sized_by_numel_times_element_size() -> None:
    # Kills mutants of the torch branch of value_size: 2 * 3 float64 elements are 6 * 8 = 48 bytes.
    assert value_size(torch.zeros(2, 3, dtype=torch.float64)) == 48


def test_memoryview_and_bytearray_are_sized() -> None:
    # Kills mutants of the bytes/bytearray and memoryview branches of value_size.
    assert value_size(memoryview(b"abcd")) == 4
    assert value_size(bytearray(5)) == 5
    assert value_size("abcd") is None


def test_the_spec_commits_a_numpy_array_of_the_reserved_size() -> None:
    # Kills the same numpy-branch mutants through CacheSpec.commit: 12 reserved bytes take 3 float32s
    # (no eviction, so an empty list), and 4 float32s (16 bytes) are a ConflictError.
    spec = CacheSpec(capacity_bytes=100)
    assert spec.reserve("a", 12)
    assert spec.reserve("b", 12)
    with pytest.raises(ConflictError):
        spec.commit("b", np.zeros(4, dtype=np.float32))
    assert spec.commit("a", np.zeros(3, dtype=np.float32)) == []
