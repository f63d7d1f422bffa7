"""`cacheproof docs`: regenerate every generated document (or check they are current).

It writes only where the user says: into `--out DIR` (the folder itself is created if missing, never
its parents), or, without --out, into docs/ of the cacheproof checkout it is run from the root of
(a folder whose pyproject.toml names the project cacheproof). Anywhere else, without --out, it is a
usage error (exit 2) that writes nothing: it never creates a docs/ folder in a user's project.

Each document has a module with `render() -> str`; tests compare the committed files with it. The
kinds' contract documents are written by hand but for their signatures section, which this command
rewrites (and `--check` compares) in the copies of those documents the folder holds, where they hold
the section's markers (cacheproof/docs/signatures.py); a folder without them is left alone.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

from cacheproof.cmdline.output_paths import first_problem, write_atomically
from cacheproof.docs import signatures

GENERATED = {
    "invariants.md": "cacheproof.docs.invariants",
    "lifecycle.md": "cacheproof.docs.lifecycle",
    "block-pool-invariants.md": "cacheproof.docs.block_pool",
    "radix-invariants.md": "cacheproof.docs.kind_invariants:radix",
    "slots-invariants.md": "cacheproof.docs.kind_invariants:slots",
}
"""Each generated document and its writer: a module's `render()`, or `render(ARGUMENT)` for
"module:ARGUMENT"."""


def render(name: str) -> str:
    """The current text of the generated document `name` (a key of GENERATED)."""
    module_name, _, argument = GENERATED[name].partition(":")
    module = importlib.import_module(module_name)
    return module.render(argument) if argument else module.render()


EXIT_STATUSES = {0: "every document written (with --check: every one current)",
                 1: "with --check: a document is out of date (each is named)"}
EXAMPLE = "cacheproof docs --check          # in the root of a cacheproof checkout"


def checkout_docs(folder: Path) -> Path | None:
    """`folder/docs` when `folder` is the root of a cacheproof checkout (its pyproject.toml names
    the project cacheproof), else None."""
    pyproject = folder / "pyproject.toml"
    try:
        text = pyproject.read_text()
    except OSError:
        return None
    return folder / "docs" if re.search(r'^name\s*=\s*"cacheproof"\s*$', text, re.MULTILINE) else None


def _not_the_docs_folder(out: Path) -> str:
    """Why `out` is not a folder of cacheproof's documents (it holds none of them, or is missing)."""
    names = ", ".join(GENERATED)
    where = f"no folder {str(out)!r}" if not out.exists() else f"{str(out)!r} holds none of {names}"
    return f"{where}, so there is nothing to check"


def _signature_sections(folder: Path, check: bool) -> list[str]:
    """Rewrite (with `check`: compare) the signatures section of each kind's contract document in
    `folder` that holds one; the paths of those out of date (with `check`)."""
    stale = []
    for name, kind_name in signatures.SECTIONS.items():
        path = folder / name
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not signatures.has_section(text):
            continue
        current = signatures.with_section(text, signatures.render(kind_name))
        if current == text:
            continue
        if check:
            stale.append(str(path))
        else:
            write_atomically(path, current)
            print(f"wrote {path} (its signatures)")
    return stale


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="the folder to write (created if missing, not its parents); default: docs/ of the "
                        "cacheproof checkout it runs in the root of; elsewhere --out is required")
    parser.add_argument("--check", action="store_true",
                        help="write nothing: exit 1 if a document in the folder is out of date, 2 if it holds none")


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = checkout_docs(Path.cwd())
        if args.out is None:
            print("cacheproof docs: this folder is not the root of a cacheproof checkout (no pyproject.toml naming "
                  "cacheproof here), so there is no docs/ to write or check; name the folder with --out DIR "
                  "(nothing was written)", file=sys.stderr)
            return 2
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
            path.parent.mkdir(exist_ok=True)
        except OSError as error:
            print(f"cacheproof docs: --out: cannot create the folder {str(path.parent)!r}: {error.strerror}", file=sys.stderr)
            return 2
        write_atomically(path, text)
        print(f"wrote {path}")
    stale += _signature_sections(args.out, args.check)
    for path in stale:
        print(f"out of date: {path} (run `cacheproof docs`)")
    return 1 if stale else 0
