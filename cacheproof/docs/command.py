"""`cacheproof docs`: regenerate every generated document under docs/ (or check they are current).

Each document has a module with `render() -> str`; tests compare the committed files with it.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

GENERATED = {
    "invariants.md": "cacheproof.docs.invariants",
    "lifecycle.md": "cacheproof.docs.lifecycle",
}


def render(name: str) -> str:
    """The current text of the generated document `name` (a key of GENERATED)."""
    return importlib.import_module(GENERATED[name]).render()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder to write (default docs/)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file is out of date")


def run(args: argparse.Namespace) -> int:
    stale = []
    for name in GENERATED:
        path = args.out / name
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    for path in stale:
        print(f"out of date: {path} (run `cacheproof docs`)")
    return 1 if stale else 0
