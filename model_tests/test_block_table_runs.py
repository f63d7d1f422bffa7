"""Per-run multimodal metadata (`MmRunLayout.per_run`): against a re-implementation of
TensorRT-LLM's `_resolve_multimodal_run_metadata`, on hand-worked, Hypothesis and seeded random
layouts with zero-length runs and items without runs; memoized and safe from caller mutation."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cacheproof.impl import block_table as bt


@st.composite
def layouts(draw, lengths=st.integers(0, 10), positions=st.integers(0, 10_000)) -> bt.MmRunLayout:
    runs_per_item = draw(st.lists(st.integers(0, 5), max_size=6))
    num_runs = sum(runs_per_item)
    cu = [0, *np.cumsum(runs_per_item, dtype=np.int64).tolist()]
    starts = draw(st.lists(positions, min_size=num_runs, max_size=num_runs))
    sizes = draw(st.lists(lengths, min_size=num_runs, max_size=num_runs))
    return bt.MmRunLayout(cu, starts, sizes)


zero_heavy_layouts = layouts(st.sampled_from([0, 0, 1, 3, 17]), st.integers(0, 2**40))
mutations = st.lists(st.sampled_from(["fill", "add", "resize"]), max_size=6)




def engine_per_run_metadata(cu_offsets, run_positions, run_lengths):
    """TensorRT-LLM's `_resolve_multimodal_run_metadata` (kv_cache_manager_v2.py), re-written here
    from a reading of it: the three arrays as CPU int64 tensors; runs per item are the
    differences of cu_offsets; the tokens before each run are an exclusive running sum of the
    lengths (0 first, the total last); each run's item comes from repeating each item index by
    its run count; a run's item offset is the tokens before it minus the tokens before its
    item's first run; a run's end is its position plus its length. Returns the engine's four
    fields in its order: positions, ends, item indices, item offsets."""
    cu = torch.as_tensor(cu_offsets, dtype=torch.int64)
    positions = torch.as_tensor(run_positions, dtype=torch.int64)
    lengths = torch.as_tensor(run_lengths, dtype=torch.int64)
    counts = cu[1:] - cu[:-1]
    before = torch.cat((torch.zeros(1, dtype=torch.int64), torch.cumsum(lengths, dim=0)))
    items = torch.repeat_interleave(torch.arange(counts.numel(), dtype=torch.int64), counts)
    offsets = before[:-1] - before[cu[:-1]][items]
    return positions, positions + lengths, items, offsets


def assert_per_run_equal(got: bt.MmPerRunMetadata, expected) -> None:
    assert isinstance(got, bt.MmPerRunMetadata)
    for name, a, b in zip(bt.MmPerRunMetadata._fields, got, expected):
        assert a.dtype == torch.int64 and a.device.type == "cpu", name
        assert a.tolist() == b.tolist(), name


def test_per_run_metadata_hand_computed():
    # The engine's worked example: item 0 split by a text token into runs at 1..2 and 4..5.
    layout = bt.MmRunLayout([0, 2], [1, 4], [2, 2])
    expected = {"run_positions": [1, 4], "run_ends": [3, 6], "run_item_indices": [0, 0], "run_item_offsets": [0, 2]}
    # Zero-length runs (run 1, run 3) and an item with no runs (item 1) keep their entries.
    zeros = bt.MmRunLayout([0, 3, 3, 5], [5, 8, 8, 20, 30], [2, 0, 4, 0, 3])
    expected_zeros = {
        "run_positions": [5, 8, 8, 20, 30],
        "run_ends": [7, 8, 12, 20, 33],
        "run_item_indices": [0, 0, 0, 2, 2],
        "run_item_offsets": [0, 2, 2, 0, 0],
    }
    for resolve in (bt.resolve_mm_per_run_metadata, bt.resolve_mm_per_run_metadata_reference, lambda x: x.per_run):
        assert {k: v.tolist() for k, v in resolve(layout)._asdict().items()} == expected
        assert {k: v.tolist() for k, v in resolve(zeros)._asdict().items()} == expected_zeros
    # The per-token view has no entry for a zero-length run: only a repeated cu_lengths value.
    assert zeros.metadata.run_index.tolist() == [0, 0, 2, 2, 2, 2, 4, 4, 4]


@settings(deadline=None)
@given(st.one_of(layouts(), zero_heavy_layouts))
def test_per_run_metadata_equals_the_engine(layout):
    cu, positions, lengths = layout.cu_offsets.tolist(), layout.run_positions.tolist(), layout.run_lengths.tolist()
    expected = engine_per_run_metadata(cu, positions, lengths)
    assert_per_run_equal(bt.resolve_mm_per_run_metadata(layout), expected)
    assert_per_run_equal(bt.resolve_mm_per_run_metadata_reference(layout), expected)
    assert_per_run_equal(layout.per_run, expected)


def test_per_run_metadata_equals_the_engine_on_seeded_random_layouts():
    rng = np.random.default_rng(20240607)
    zero_length_runs = 0
    for _ in range(300):
        runs_per_item = rng.integers(0, 8, size=int(rng.integers(0, 12)))
        num_runs = int(runs_per_item.sum())
        cu = [0, *np.cumsum(runs_per_item).tolist()]
        positions = rng.integers(0, 1_000_000, size=num_runs).tolist()
        lengths = np.where(rng.random(num_runs) < 0.3, 0, rng.integers(1, 600, size=num_runs)).tolist()
        zero_length_runs += lengths.count(0)
        layout = bt.MmRunLayout(cu, positions, lengths)
        expected = engine_per_run_metadata(cu, positions, lengths)
        assert_per_run_equal(layout.per_run, expected)
        assert_per_run_equal(bt.resolve_mm_per_run_metadata(layout), expected)
    assert zero_length_runs > 100


@given(layouts())
def test_per_token_metadata_follows_from_per_run(layout):
    runs = layout.per_run
    tokens = layout.metadata
    for t, (position, run, item) in enumerate(zip(*(x.tolist() for x in tokens[:3]))):
        k = t - tokens.cu_lengths[run].item()
        assert runs.run_positions[run].item() + k == position < runs.run_ends[run].item()
        assert runs.run_item_indices[run].item() == item


@given(layouts(), mutations)
def test_memoized_per_run_metadata_survives_any_caller_mutation(layout, changes):
    arrays = (layout.cu_offsets, layout.run_positions, layout.run_lengths)
    expected = engine_per_run_metadata(*(a.tolist() for a in arrays))
    for index, change in enumerate(changes):
        got = layout.per_run
        assert_per_run_equal(got, expected)
        tensor = got[index % 4]
        {"fill": lambda: tensor.fill_(-7), "add": lambda: tensor.add_(1), "resize": lambda: tensor.resize_(0)}[change]()
    assert_per_run_equal(layout.per_run, expected)


def test_per_run_metadata_is_computed_once(monkeypatch):
    calls = []
    resolve = bt.resolve_mm_per_run_metadata
    monkeypatch.setattr(bt, "resolve_mm_per_run_metadata", lambda layout: calls.append(1) or resolve(layout))
    layout = bt.MmRunLayout([0, 2], [3, 9], [2, 0])
    for _ in range(3):
        assert layout.per_run.run_ends.tolist() == [5, 9]
    assert len(calls) == 1
