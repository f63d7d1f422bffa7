"""A fixed sample of an engine module's mutants run through `cacheproof mutate` (the CI engines
step's samples, model_tests/engines/test_*_mutation_sample.py): the cacheproof side only, since the
engines' own tests are not committed. Each sampled mutant must keep the fate docs/mutation-duel.md
measured, the report must fit the schema, and the module must still yield as many mutants (a new
engine release renumbers them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cacheproof.cli import main
from model_tests.report_validation import report_errors

REPOSITORY = Path(__file__).resolve().parents[1]


def check_fixed_sample(module: str, mutate_args: list[str], killed: dict[int, str], surviving: dict[int, str],
                       generated: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """Run `cacheproof mutate MODULE MUTATE_ARGS --mutants (killed + surviving) --workers 2` from the
    repository and assert: exit 1 when a sampled mutant survives (else 0), every fate as given, the
    report valid, `generated` mutants generated, and the killed count in the table."""
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.setenv("PYTHONPATH", str(REPOSITORY))
    report_path = tmp_path / "sample.json"
    numbers = sorted({*killed, *surviving})
    status = main(["mutate", module, *mutate_args, "--mutants", ",".join(map(str, numbers)),
                   "--workers", "2", "--json", str(report_path)])
    assert status == (1 if surviving else 0)  # without --tests: any survivor fails the run
    report = json.loads(report_path.read_text())
    assert report_errors(report) == []
    fates = {mutant["number"]: mutant["category"] for mutant in report["mutants"]}
    assert fates == {**dict.fromkeys(killed, "killed"), **dict.fromkeys(surviving, "survived")}
    assert report["mutants_generated"] == generated
    assert re.search(rf"killed by cacheproof +{len(killed)}\n", capsys.readouterr().out)
