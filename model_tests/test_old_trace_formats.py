"""Traces written before format 2 still replay: the tensor cache's format 1 header and the other
kinds' program-trace header (model_tests/old_traces/, written as cacheproof 0.1.0 wrote them), read
into the one `Trace`, replay on the spec and beside an implementation, and are written back as format 2
with nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cacheproof.cli import main
from cacheproof.trace.format import parse_trace, read_trace, trace_text

OLD = Path(__file__).parent / "old_traces"

# file, kind, size, a correct implementation, a broken one and the step where it parts from the spec
CASES = [
    ("cache-format-1.jsonl", "cache", 8, "cacheproof.spec:CacheSpec", "model_tests.broken_caches:TransientSurvivesRelease", 7),
    ("cache-format-1-plain-lru.jsonl", "cache", 4, "examples.plain_lru_cache:PlainLRUCache",
     "model_tests.broken_profile_caches:OversizedSetEvictsAllCache", 2),
    ("blocks-program-format-1.jsonl", "blocks", 4, "model_tests.block_pools:ListBlockPool",
     "model_tests.block_pools:DoubleFreePool", 4),
    ("blocks-program-format-1-skip.jsonl", "blocks", 4, None, None, None),
]


@pytest.mark.parametrize("name, kind, size, correct, broken, step", CASES)
def test_an_old_trace_replays_on_the_spec_and_beside_implementations(name, kind, size, correct, broken, step, capsys):
    path = OLD / name
    trace = read_trace(path)
    assert (trace.kind, trace.size, trace.version) == (kind, size, "0.1.0")
    assert main(["replay", str(path), "--quiet"]) == 0
    if correct is not None:
        assert main(["replay", str(path), "--impl", correct, "--quiet"]) == 0
    if step is not None:
        capsys.readouterr()
        assert main(["replay", str(path), "--impl", broken, "--quiet"]) == 1
        assert f"divergence at step {step} " in capsys.readouterr().out


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_an_old_trace_is_written_back_as_format_2_with_nothing_lost(name):
    old = read_trace(OLD / name)
    text = trace_text(old)
    header = json.loads(text.splitlines()[0])
    assert header["cacheproof_trace"] == 2 and header["spec"] == old.kind
    assert parse_trace(text) == old


def test_the_old_program_header_keeps_naming_the_field(tmp_path, capsys):
    lines = (OLD / "blocks-program-format-1.jsonl").read_text().splitlines()
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([lines[0], lines[1].replace('"op"', '"operation"')]) + "\n")
    assert main(["replay", str(path)]) == 2
    assert f"{path} line 2, field 'op': missing" in capsys.readouterr().err
