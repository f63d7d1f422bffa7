"""Output files: checked before any work, written atomically.

A command that writes a report (`--json`, `--trace-out`) checks every such path first, so that a
bad path is a one-line usage error (exit 2) instead of a traceback after the whole run, and writes
each file as a temporary file in the same folder renamed over the target, so that a failed write
never leaves half a report.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Mapping


class OutputPathError(ValueError):
    """An output path that cannot be written; the message names the path and the problem."""


def output_path_problem(path: str | os.PathLike) -> str | None:
    """Why a file cannot be written at `path` (it is a folder, its folder is missing or read-only), or None."""
    target = Path(path)
    if str(path) == "":
        return "the path is empty"
    if target.is_dir():
        return f"{str(path)!r} is a folder, not a file"
    folder = target.parent
    if not folder.exists():
        return f"{str(path)!r}: the folder {str(folder)!r} does not exist"
    if not folder.is_dir():
        return f"{str(path)!r}: {str(folder)!r} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{str(path)!r}: the folder {str(folder)!r} is not writable"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{str(path)!r}: the file exists and is not writable"
    return None


def first_problem(paths: Mapping[str, str | os.PathLike | None]) -> str | None:
    """The first problem among `{flag: path}` (None paths skipped), as "FLAG PATH: problem", or None."""
    for flag, path in paths.items():
        if path is None:
            continue
        problem = output_path_problem(path)
        if problem is not None:
            return f"{flag}: {problem}"
    return None


def refuse_unwritable(command: str, paths: Mapping[str, str | os.PathLike | None]) -> bool:
    """Whether `first_problem(paths)` finds a path that cannot be written; if so, it is printed to
    stderr as "cacheproof COMMAND: FLAG: problem", and the caller exits 2 before any work."""
    problem = first_problem(paths)
    if problem is not None:
        print(f"cacheproof {command}: {problem}", file=sys.stderr)
    return problem is not None


def check_output_path(path: str | os.PathLike, what: str = "output path") -> None:
    """Raise `OutputPathError` when a file cannot be written at `path`."""
    problem = output_path_problem(path)
    if problem is not None:
        raise OutputPathError(f"{what}: {problem}")


def write_atomically(path: str | os.PathLike, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`.

    A write that fails (a full disk, a folder removed meanwhile) leaves `path` as it was and raises
    `OutputPathError` naming the path and the system's reason.
    """
    target = Path(path)
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException as error:
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
        if isinstance(error, OSError):
            raise OutputPathError(f"cannot write {str(path)!r}: {error.strerror or error}") from error
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
