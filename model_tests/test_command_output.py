"""`--json` and `--quiet` on the commands that print tables."""

from __future__ import annotations

import json

from cacheproof.cli import main


def test_bench_prove_writes_one_row_per_model(tmp_path, capsys):
    path = tmp_path / "prove.json"
    assert main(["bench", "prove", "--slots", "2", "3", "--json", str(path), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    rows = json.loads(path.read_text())
    assert [row["model"] for row in rows] == ["aggregate + liveness", "entries, 2 slots", "entries, 3 slots"]
    assert all(row["failed"] == 0 and row["obligations"] > 0 for row in rows)


def test_prove_quiet_prints_only_the_verdict(capsys):
    assert main(["prove", "--slots", "2", "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1 and "obligations proved" in lines[0]


def test_check_quiet_prints_no_table(capsys):
    assert main(["check", "--impl", "cacheproof.spec:CacheSpec", "--examples", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "┌" not in out and out.startswith("conforms:")
