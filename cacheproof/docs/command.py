"""`cacheproof docs`: regenerate every generated document under docs/ (or check they are current).

`--check` in a folder that holds none of the documents (outside a clone) is a usage error (exit 2).

Each document has a module with `render() -> str`; tests compare the committed files with it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from cacheproof.cmdline.output_paths import first_problem, write_atomically

GENERATED = {
    "invariants.md": "cacheproof.docs.invariants",
    "lifecycle.md": "cacheproof.docs.lifecycle",
    "block-pool-invariants.md": "cacheproof.docs.block_pool",
}


def render(name: str) -> str:
    """The current text of the generated document `name` (a key of GENERATED)."""
    return importlib.import_module(GENERATED[name]).render()


def _not_the_docs_folder(out: Path) -> str:
    """Why `out` is not a folder of cacheproof's documents (it holds none of them, or is missing)."""
    names = ", ".join(GENERATED)
    where = f"no folder {str(out)!r} here" if not out.exists() else f"{str(out)!r} holds none of {names}"
    return (f"{where}, so there is nothing to check; run it from the root of a cacheproof clone, "
            "or name the folder with --out")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder to write (default docs/)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file is out of date, 2 if --out holds none of them")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        print(f"cacheproof docs: --out: {str(args.out)!r} is a file, not a folder", file=sys.stderr)
        return 2
    if args.check and not any((args.out / name).exists() for name in GENERATED):
        print(f"cacheproof docs --check: {_not_the_docs_folder(args.out)}", file=sys.stderr)
        return 2
    if not args.check:
        problem = first_problem({"--out": args.out / name for name in GENERATED}) if args.out.is_dir() else None
        if problem is not None:
            print(f"cacheproof docs: {problem}", file=sys.stderr)
            return 2
    stale = []
    for name in GENERATED:
        path = args.out / name
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            print(f"cacheproof docs: --out: cannot create the folder {str(path.parent)!r}: {error.strerror}", file=sys.stderr)
            return 2
        write_atomically(path, text)
        print(f"wrote {path}")
    for path in stale:
        print(f"out of date: {path} (run `cacheproof docs`)")
    return 1 if stale else 0
