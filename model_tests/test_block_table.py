"""Block-table kernels: every fast path against the reference, hand-computed values, bad input,
and memoized multimodal run metadata."""

from __future__ import annotations

import array
import os

import torch

if not torch.cuda.is_available():  # run the Triton kernel in its interpreter on CPU-only machines
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproof.impl import block_table as bt
from cacheproof.spec.errors import InvalidArgumentError

INT32_MAX = 2**31 - 1

FAST_PATHS = [bt.block_ids_numpy, bt.block_ids_torch, bt.get_block_ids_per_seq]
if os.environ.get("TRITON_INTERPRET") == "1":
    FAST_PATHS.append(bt.block_ids_triton)
ALL_PATHS = [bt.block_ids_reference, *FAST_PATHS]

pages = st.one_of(
    st.just(bt.BAD_PAGE_INDEX),
    st.integers(0, 64),
    st.integers(0, INT32_MAX),
    st.integers(INT32_MAX - 64, INT32_MAX),
)
rows = st.lists(st.lists(pages, max_size=24), max_size=12)
factors = st.one_of(st.just(1), st.integers(1, 64), st.integers(1, 2**40), st.integers(1, 2**70))


def as_buffer(kind: str, row: list[int]):
    data = np.array(row, dtype=np.int32)
    return {
        "bytes": data.tobytes,
        "bytearray": lambda: bytearray(data.tobytes()),
        "memoryview": lambda: memoryview(data.tobytes()),
        "numpy": lambda: data,
        "array": lambda: array.array("i", row),
    }[kind]()


buffer_kinds = st.sampled_from(["bytes", "bytearray", "memoryview", "numpy", "array"])


@st.composite
def batches(draw) -> list:
    table = draw(rows)
    if draw(st.booleans()) and table:
        long_row = draw(st.integers(0, len(table) - 1))
        table[long_row] = draw(st.lists(pages, min_size=1500, max_size=2500))
    if draw(st.booleans()):
        table.append([bt.BAD_PAGE_INDEX] * draw(st.integers(1, 8)))
    return [as_buffer(draw(buffer_kinds), row) for row in table]


def outcome(path, buffers, scale, divisor):
    try:
        return path(buffers, scale=scale, divisor=divisor)
    except (OverflowError, ValueError, TypeError) as error:
        return type(error)


@settings(deadline=None)
@given(batches(), factors, factors)
def test_fast_paths_equal_the_reference(buffers, scale, divisor):
    expected = outcome(bt.block_ids_reference, buffers, scale, divisor)
    for path in FAST_PATHS:
        got = outcome(path, buffers, scale, divisor)
        if isinstance(expected, torch.Tensor):
            assert isinstance(got, torch.Tensor), (path.__name__, got)
            assert got.dtype == torch.int32 and got.shape == expected.shape
            assert torch.equal(got, expected), path.__name__
        else:
            assert got is expected, path.__name__


@pytest.mark.parametrize("path", ALL_PATHS)
def test_hand_computed_values(path):
    buffers = [
        np.array([3, bt.BAD_PAGE_INDEX, 5], dtype=np.int32),
        b"",
        np.array([0, 7], dtype=np.int32).tobytes(),
    ]
    got = path(buffers, scale=4, divisor=3)
    # (3*4)//3 = 4, BAD -> 0, (5*4)//3 = 6; (0*4)//3 = 0, (7*4)//3 = 9
    assert got.tolist() == [[4, 0, 6], [0, 0, 0], [0, 9, 0]]
    assert got.dtype == torch.int32
    assert path(buffers).tolist() == [[3, 0, 5], [0, 0, 0], [0, 7, 0]]
    assert path([np.array([10], dtype=np.int32)], scale=2**40, divisor=2**40 + 1).tolist() == [[9]]
    assert path([np.array([10, -1], dtype=np.int32)], scale=2**70, divisor=2**70).tolist() == [[10, 0]]
    assert path([np.array([0, -1], dtype=np.int32)], scale=2**70).tolist() == [[0, 0]]
    assert path([np.array([7], dtype=np.int32)], divisor=2**70).tolist() == [[0]]


@pytest.mark.parametrize("path", ALL_PATHS)
def test_empty_shapes(path):
    assert tuple(path([]).shape) == (0, 0)
    assert tuple(path([b"", bytearray()]).shape) == (2, 0)
    assert path([b""]).dtype == torch.int32


@pytest.mark.parametrize("path", ALL_PATHS)
def test_largest_block_id_fits_and_one_more_overflows(path):
    top = np.array([INT32_MAX], dtype=np.int32)
    assert path([top]).tolist() == [[INT32_MAX]]
    with pytest.raises(OverflowError, match="request 1.*does not fit int32"):
        path([b"", top], scale=2, divisor=1)
    half = np.array([2**30], dtype=np.int32)
    with pytest.raises(OverflowError):
        path([half], scale=2)
    assert path([half], scale=2, divisor=2).tolist() == [[2**30]]


@pytest.mark.parametrize("path", ALL_PATHS)
@pytest.mark.parametrize(
    ("buffer", "error", "message"),
    [
        (b"\x00" * 5, ValueError, "5 bytes, not a multiple of 4"),
        (np.zeros(2, dtype=np.int64), TypeError, "native int32"),
        (np.zeros(2, dtype=np.float32), TypeError, "native int32"),
        (np.zeros(2, dtype=np.uint32), TypeError, "native int32"),
        (np.zeros(2, dtype=">i4"), TypeError, "native int32"),
        (np.zeros((2, 2), dtype=np.int32), TypeError, "1-D"),
        (np.zeros(4, dtype=np.int32)[::2], TypeError, "contiguous"),
        ([1, 2], TypeError, "buffer protocol"),
        (np.array([0, -2], dtype=np.int32), ValueError, "page index -2 < -1"),
    ],
)
def test_bad_buffers_are_rejected(path, buffer, error, message):
    with pytest.raises(error, match=f"request 1: .*{message}"):
        path([b"", buffer])


@pytest.mark.parametrize("path", ALL_PATHS)
@pytest.mark.parametrize("bad", [0, -1, True, 1.0, "2", None])
def test_scale_and_divisor_must_be_ints_at_least_one(path, bad):
    with pytest.raises(ValueError, match="scale must be an int >= 1"):
        path([b""], scale=bad)
    with pytest.raises(ValueError, match="divisor must be an int >= 1"):
        path([b""], divisor=bad)


def engine_block_ids(pages: list[int], index_scale: int, kv_factor: int, num_local_layers: int) -> list[int]:
    """TensorRT-LLM KVCacheManagerV2's two steps, re-written from a reading of them: the int32
    page tensor times index_scale floor-divided by kv_factor (torch keeps int32, so it wraps),
    BAD pages kept as BAD; then BAD to 0 and the rest floor-divided by num_local_layers."""
    idx = torch.as_tensor(np.array(pages, dtype=np.int32))
    scaled = torch.where(idx != bt.BAD_PAGE_INDEX, idx * index_scale // kv_factor, bt.BAD_PAGE_INDEX).tolist()
    ids = [i // num_local_layers if i != bt.BAD_PAGE_INDEX else 0 for i in scaled]
    return torch.tensor(ids, dtype=torch.int).tolist()


@pytest.mark.parametrize(
    ("page", "scale", "divisor", "engine", "ours"),
    [
        (2**30, 2, 1, -(2**31), OverflowError),
        (2**30, 4, 2, 0, OverflowError),
        (1431655765, 3, 1, 0, OverflowError),  # the wrapped product is -1, read as BAD_PAGE_INDEX
        (2**30, 4, 4, 0, 2**30),  # the exact id fits: cacheproof returns it, the engine wrapped
        (2**29, 2, 3, (2**30) // 3, (2**30) // 3),  # no wrap: the two agree
    ],
)
def test_engine_int32_wraps_where_cacheproof_is_exact(page, scale, divisor, engine, ours):
    assert engine_block_ids([page, bt.BAD_PAGE_INDEX], scale, divisor, 1) == [engine, 0]
    layers = 2 if divisor % 2 == 0 else 1  # divisor = kv_factor * num_local_layers
    assert engine_block_ids([page], scale, divisor // layers, layers) == [engine]
    for path in ALL_PATHS:
        got = outcome(path, [np.array([page], dtype=np.int32)], scale, divisor)
        assert got is OverflowError if ours is OverflowError else got.tolist() == [[ours]]


def test_triton_without_cuda_or_interpreter_raises(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="CUDA device or TRITON_INTERPRET=1"):
        bt.block_ids_triton([b""], device="cpu")


# --------------------------------------------------------------------------- copy_block_offsets

id_values = st.one_of(st.integers(0, 100), st.integers(-(2**31), INT32_MAX))


@st.composite
def copies(draw):
    num_rows = draw(st.integers(1, 8))
    width = draw(st.integers(0, 12))
    num_blocks = draw(st.one_of(st.integers(0, 120), st.just(2**31), st.integers(2**31, 2**70)))
    rows = draw(st.lists(st.integers(0, num_rows - 1), unique=True, max_size=num_rows))
    in_pool = st.integers(0, max(min(num_blocks, 2**31) - 1, 0))
    values = draw(st.sampled_from([in_pool, id_values])) if num_blocks else id_values
    ids = [draw(st.lists(values, max_size=width)) for _ in rows]
    kind = draw(st.sampled_from(["list", "numpy", "torch"]))
    if kind == "numpy":
        ids = [np.array(i, dtype=np.int64) for i in ids]
    elif kind == "torch":
        ids = [torch.tensor(i, dtype=torch.int32) for i in ids]
    garbage = draw(st.integers(-5, 99))
    return torch.full((num_rows, width), garbage, dtype=torch.int32), rows, ids, num_blocks


def copy_outcome(copy, dst, rows, ids, num_blocks):
    try:
        copy(dst, rows, ids, num_blocks=num_blocks)
    except (TypeError, ValueError, OverflowError) as error:
        return type(error), str(error)
    return None


@given(copies())
def test_copy_block_offsets_equals_the_reference(case):
    dst, rows, ids, num_blocks = case
    expected = dst.clone()
    before = dst.clone()
    want = copy_outcome(bt.copy_block_offsets_reference, expected, rows, ids, num_blocks)
    got = copy_outcome(bt.copy_block_offsets, dst, rows, ids, num_blocks)
    assert got == want
    assert torch.equal(dst, expected)
    if want is not None:
        assert torch.equal(dst, before)


def test_copy_block_offsets_clears_the_stale_tail():
    dst = torch.full((3, 4), 9, dtype=torch.int32)
    bt.copy_block_offsets(dst, [2, 0], [[5, 6], []], num_blocks=7)
    assert dst.tolist() == [[0, 0, 0, 0], [9, 9, 9, 9], [5, 6, 0, 0]]


BAD_ID = r"block_ids\[1\] \(dst row 2\) holds block id {} at column 1, outside \[0, {}\)"


@pytest.mark.parametrize("copy", [bt.copy_block_offsets, bt.copy_block_offsets_reference])
@pytest.mark.parametrize(
    ("rows", "ids", "num_blocks", "error", "message"),
    [
        ([0, 3], [[1], [2]], 8, ValueError, r"rows\[1\] = 3 is out of range \[0, 3\)"),
        ([-1], [[1]], 8, ValueError, "out of range"),
        ([1, 1], [[1], [2]], 8, ValueError, "row 1 is repeated"),
        ([0, 1], [[1], [1, 2, 3, 4, 5]], 8, ValueError, r"block_ids\[1\] has 5 ids, longer than dst's 4"),
        ([0, 1], [[1], [2**31]], 8, OverflowError, "does not fit int32"),
        ([0], [[1], [2]], 8, ValueError, "rows has 1 entries but block_ids has 2"),
        ([0, 2], [[1], [3, 8]], 8, InvalidArgumentError, BAD_ID.format(8, 8)),
        ([0, 2], [[1], [3, -1]], 8, InvalidArgumentError, BAD_ID.format(-1, 8)),
        ([0, 2], [[1], [3, -(2**31)]], 8, InvalidArgumentError, BAD_ID.format(-(2**31), 8)),
        ([0, 2], [[], [0, 0]], 0, InvalidArgumentError, r"block_ids\[1\] \(dst row 2\) holds block id 0 at column 0"),
        ([0, 2], [[1], [3, INT32_MAX]], INT32_MAX, InvalidArgumentError, BAD_ID.format(INT32_MAX, INT32_MAX)),
        ([0], [[1]], -1, InvalidArgumentError, "num_blocks must be an int >= 0, got -1"),
        ([0], [[1]], True, InvalidArgumentError, "num_blocks must be an int >= 0, got bool"),
        ([0], [[1]], 8.0, InvalidArgumentError, "num_blocks must be an int >= 0, got float"),
        ([0, 3], [[1], [9]], 8, ValueError, "out of range"),  # rows are checked before ids
        ([0, 1], [[9], [2**31]], 8, OverflowError, "does not fit int32"),  # int32 before the pool
        ([0, 1], [[9], [1, 2, 3, 4, 5]], 8, ValueError, "longer than"),  # widths before the pool
    ],
)
def test_copy_block_offsets_rejects_and_leaves_dst_untouched(copy, rows, ids, num_blocks, error, message):
    dst = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    before = dst.clone()
    with pytest.raises(error, match=message) as raised:
        copy(dst, rows, ids, num_blocks=num_blocks)
    assert type(raised.value) is error
    assert torch.equal(dst, before)


@pytest.mark.parametrize("copy", [bt.copy_block_offsets, bt.copy_block_offsets_reference])
def test_copy_block_offsets_bounds_are_inclusive_exclusive(copy):
    dst = torch.full((2, 3), 5, dtype=torch.int32)
    copy(dst, [1, 0], [[0, 6], [6]], num_blocks=7)
    assert dst.tolist() == [[6, 0, 0], [0, 6, 0]]
    copy(dst, [0], [[INT32_MAX]], num_blocks=2**31)
    assert dst[0].tolist() == [INT32_MAX, 0, 0]
    copy(dst, [1], [np.array([], dtype=np.int64)], num_blocks=0)  # an empty pool takes empty lists
    assert dst[1].tolist() == [0, 0, 0]


@pytest.mark.parametrize("copy", [bt.copy_block_offsets, bt.copy_block_offsets_reference])
def test_copy_block_offsets_needs_num_blocks(copy):
    dst = torch.zeros((2, 2), dtype=torch.int32)
    with pytest.raises(TypeError, match="num_blocks"):
        copy(dst, [0], [[1]])
    with pytest.raises(TypeError, match="2-D int32"):
        copy(torch.zeros((2, 2), dtype=torch.int64), [0], [[1]], num_blocks=4)


# --------------------------------------------------------------------------- multimodal runs


@st.composite
def layouts(draw) -> bt.MmRunLayout:
    runs_per_item = draw(st.lists(st.integers(0, 4), max_size=5))
    num_runs = sum(runs_per_item)
    cu = np.concatenate([[0], np.cumsum(runs_per_item, dtype=np.int64)]).tolist()
    positions = draw(st.lists(st.integers(0, 10_000), min_size=num_runs, max_size=num_runs))
    lengths = draw(st.lists(st.integers(0, 10), min_size=num_runs, max_size=num_runs))
    return bt.MmRunLayout(cu, positions, lengths)


def assert_metadata_equal(got: bt.MmRunMetadata, expected: bt.MmRunMetadata) -> None:
    for name, a, b in zip(bt.MmRunMetadata._fields, got, expected):
        assert a.dtype == torch.int64, name
        assert torch.equal(a, b), name


def test_run_metadata_hand_computed():
    layout = bt.MmRunLayout([0, 2, 3], [5, 10, 0], [2, 0, 3])
    expected = {
        "token_positions": [5, 6, 0, 1, 2],
        "run_index": [0, 0, 2, 2, 2],
        "item_index": [0, 0, 1, 1, 1],
        "cu_lengths": [0, 2, 2, 5],
    }
    for resolve in (bt.resolve_mm_run_metadata, bt.resolve_mm_run_metadata_reference, lambda x: x.metadata):
        assert {k: v.tolist() for k, v in resolve(layout)._asdict().items()} == expected


@given(layouts())
def test_run_metadata_equals_the_reference(layout):
    expected = bt.resolve_mm_run_metadata_reference(layout)
    assert_metadata_equal(bt.resolve_mm_run_metadata(layout), expected)
    assert_metadata_equal(layout.metadata, expected)


mutations = st.lists(
    st.tuples(st.sampled_from(bt.MmRunMetadata._fields), st.sampled_from(["fill", "add", "resize"])),
    max_size=6,
)


@given(layouts(), mutations)
def test_memoized_metadata_survives_any_caller_mutation(layout, changes):
    fresh = bt.resolve_mm_run_metadata_reference(layout)
    for field, change in changes:
        got = layout.metadata
        assert_metadata_equal(got, fresh)
        tensor = getattr(got, field)
        if change == "fill":
            tensor.fill_(-7)
        elif change == "add":
            tensor.add_(1)
        else:
            tensor.resize_(0)
    assert_metadata_equal(layout.metadata, fresh)


def test_metadata_is_computed_once(monkeypatch):
    calls = []
    resolve = bt.resolve_mm_run_metadata
    monkeypatch.setattr(bt, "resolve_mm_run_metadata", lambda layout: calls.append(1) or resolve(layout))
    layout = bt.MmRunLayout([0, 1], [3], [2])
    for _ in range(3):
        assert layout.metadata.token_positions.tolist() == [3, 4]
    assert len(calls) == 1


def test_layout_is_immutable():
    cu, positions, lengths = [0, 1], [3], [2]
    layout = bt.MmRunLayout(cu, positions, lengths)
    lengths[0] = 9
    assert layout.run_lengths.tolist() == [2]
    with pytest.raises(ValueError, match="read-only"):
        layout.run_lengths[0] = 5
    with pytest.raises(AttributeError, match="immutable"):
        layout.cu_offsets = np.array([0, 0])
    assert layout.metadata.cu_lengths.tolist() == [0, 2]


@pytest.mark.parametrize(
    ("cu", "positions", "lengths", "error", "message"),
    [
        ([0, 1], [3], [-1], ValueError, r"run_lengths\[0\] = -1 is negative"),
        ([0, 1], [-3], [1], ValueError, r"run_positions\[0\] = -3 is negative"),
        ([1, 1], [3], [1], ValueError, "must start at 0"),
        ([], [], [], ValueError, "must start at 0"),
        ([0, 2, 1], [3], [1], ValueError, "nondecreasing"),
        ([0, 2], [3], [1], ValueError, "must end at the number of runs 1"),
        ([0, 1], [3, 4], [1], ValueError, "run_positions has 2 entries but run_lengths has 1"),
        ([0, 1], [3], [1.5], TypeError, "run_lengths must be a 1-D sequence of ints"),
    ],
)
def test_malformed_layouts_are_rejected(cu, positions, lengths, error, message):
    with pytest.raises(error, match=message):
        bt.MmRunLayout(cu, positions, lengths)

