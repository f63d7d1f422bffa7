"""A `cacheproof mutate --json` report made small enough to commit: every field kept, each side's
`output_tail` emptied (the diffs, statuses, exit codes and seconds stay). The README's table of
duel results and docs/mutation-duel.md's summary are read against these fixtures
(model_tests/test_mutation_duel_figures.py), so the figures cannot drift from what a duel wrote.

    python tools/duel_fixture.py REPORT.json model_tests/mutation_duels/NAME.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def trimmed(report: dict) -> dict:
    """`report` with every mutant's side outputs emptied."""
    for mutant in report.get("mutants", []):
        for side in ("cacheproof", "tests"):
            if mutant.get(side):
                mutant[side]["output_tail"] = ""
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python tools/duel_fixture.py REPORT.json OUT.json", file=sys.stderr)
        return 2
    source, target = map(Path, argv)
    try:
        report = json.loads(source.read_text())
    except (OSError, ValueError) as error:
        print(f"duel_fixture: cannot read {source}: {error}", file=sys.stderr)
        return 2
    if report.get("command") != "mutate":
        print(f"duel_fixture: {source} is not a `cacheproof mutate --json` report (command {report.get('command')!r})",
              file=sys.stderr)
        return 2
    target.write_text(json.dumps(trimmed(report), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
