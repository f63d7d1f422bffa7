"""Finish a tools/mutate.py run whose mutmut stage is done: recheck its timeouts in a fresh
interpreter and print (and optionally write as JSON) the report, exactly as the command would.

    python tools/mutation_report.py WORKDIR PATH STAGED [--tests T ...] [--json OUT]

WORKDIR is the per-path staged folder (the one holding mutants/), PATH the requested path (spec,
impl/tensor_lru_cache.py) and STAGED its staged path (src/cacheproof/spec, ...). Used when a run was
started with an older tools/mutate.py that did not recheck timeouts yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import mutate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir", type=Path)
    parser.add_argument("path")
    parser.add_argument("staged")
    parser.add_argument("--tests", nargs="+", default=mutate.DEFAULT_TESTS)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--target", type=float, default=mutate.DEFAULT_TARGET)
    args = parser.parse_args(argv)
    rechecked = mutate.recheck_timeouts(args.workdir, args.tests)
    report = mutate.read_report(args.workdir, {args.path: args.staged}, args.target, rechecked)
    print(mutate.format_report(report))
    print(f"rechecked timeouts: {json.dumps(rechecked, indent=1, ensure_ascii=False)}")
    if args.json is not None:
        payload = report.to_json()
        payload["rechecked_timeouts"] = rechecked
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return 0 if report.met else 1


if __name__ == "__main__":
    raise SystemExit(main())
