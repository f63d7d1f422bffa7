"""`--json` and `--quiet` on the commands that print tables."""

from __future__ import annotations

import json

from cacheproof.cli import main


def test_bench_prove_writes_one_row_per_model(tmp_path, capsys):
    path = tmp_path / "prove.json"
    arguments = ["bench", "prove", "--slots", "2", "3", "--profiles", "vllm-encoder-cache", "--profile-slots", "2",
                 "--command-slots", "3"]
    assert main([*arguments, "--json", str(path), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    rows = json.loads(path.read_text())["figures"]
    assert [row["model"] for row in rows] == [
        "aggregate + liveness",
        "spec refines model",
        "entries, 2 slots",
        "entries, 3 slots",
        "prove --slots 3",
        "vllm-encoder-cache, 2 slots",
        "vllm-encoder-cache: refines",
    ]
    assert all(row["failed"] == 0 and row["obligations"] > 0 and row["cpu_seconds"] > 0 for row in rows)
    assert rows[1]["states"] > 0 and "capacities 1..3" in rows[1]["bound"]
    assert rows[4]["refinement_calls"] == rows[1]["obligations"]  # the command row ran the refinement check too
    assert rows[5]["waived"] == 1  # I5 does not hold where clear drops busy entries


def test_prove_quiet_prints_only_the_verdicts(capsys):
    assert main(["prove", "--slots", "2", "--quiet", "--refine-capacity", "2", "--refine-entries", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 2 and "obligations proved" in lines[0]
    assert lines[1].startswith("spec refines model: ") and ", agree (" in lines[1]


def test_check_quiet_prints_no_table(capsys):
    assert main(["check", "--max-divergences", "1", "--impl", "cacheproof.spec:CacheSpec", "--examples", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "┌" not in out and out.startswith("conforms:")


def test_bench_concurrent_reports_throughput_side_by_side_and_finds_every_racy_cache(tmp_path, capsys):
    from model_tests.racy_caches import RACY_CACHES

    path = tmp_path / "concurrent.json"
    arguments = [
        "bench", "concurrent", "--scenarios", "5", "--seeds", "1", "--shrink-seconds", "0",
        "--copy-commits", "5", "--copy-bytes", "65536",
    ]
    assert main([*arguments, "--json", str(path)]) == 0, capsys.readouterr().out
    figures = json.loads(path.read_text())["figures"]
    assert list(figures["throughput"]) == ["LockedCacheSpec", "TensorLRUCache (cpu)"]
    assert figures["throughput"]["LockedCacheSpec"]["ratio_to_first"] == 1.0
    assert all(row["ok"] and row["scenarios"] == 5 for row in figures["throughput"].values())
    assert set(figures["finding"]) == {cls.__name__ for cls in RACY_CACHES}
    assert all(row["found"] == "1/1" and row["median_seconds_to_find"] > 0 for row in figures["finding"].values())
    assert list(figures["commit_copies"]) == ["copy outside the lock", "copy under the lock"]
    assert all(row["commits_per_second"] > 0 and row["get_p99_microseconds"] > 0 for row in figures["commit_copies"].values())
    out = capsys.readouterr().out
    assert "scenarios/s" in out and "time to find each racy cache" in out and "scheduler get" in out
