"""Run printed counterexample snippets in a fresh interpreter and say where they fail.

A snippet must fail where the checker saw the difference: at its diverging call (marked
`# <- diverges here`, or the `with raises(...)` around it; an inspection made again last is marked
`# <- raises`) or at one of the assertions after it,
and never before. Run against a correct cache instead (its import line swapped), it must pass.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

REPOSITORY = Path(__file__).resolve().parents[1]
MARKER = "  # <- "
_HEADER = "# cacheproof counterexample"


class SnippetRun(NamedTuple):
    returncode: int
    failing_line: int | None  # the snippet's line (1-based) where the traceback ends, if any
    error: str  # the last line of stderr: "AssertionError: spec: ..."


def snippets_in(output: str) -> list[str]:
    """Every snippet of a `cacheproof check` output: each header up to the next one."""
    found: list[list[str]] = []
    for line in output.splitlines():
        if line.startswith(_HEADER):
            found.append([line])
        elif found:
            found[-1].append(line)
    return ["\n".join(lines).rstrip() + "\n" for lines in found]


def run_snippet(snippet: str, timeout: float = 60) -> SnippetRun:
    """Run `snippet` with `python -c` in the repository's folder (so model_tests is importable)."""
    done = subprocess.run([sys.executable, "-c", snippet], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=timeout)
    lines = [int(n) for n in re.findall(r'File "<string>", line (\d+)', done.stderr)]
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return SnippetRun(done.returncode, lines[-1] if lines else None, last)


def diverging_line(snippet: str) -> int:
    """The first line of the diverging call: the marked line, or the `with raises` opening it."""
    lines = snippet.splitlines()
    index = next(i for i, line in enumerate(lines) if MARKER in line)
    if index > 0 and lines[index - 1].startswith("with raises("):
        index -= 1
    return index + 1


def on_cache(snippet: str, module: str, name: str) -> str:
    """The snippet with `factory` imported from `module:name` instead."""
    return re.sub(r"^from \S+ import \S+ as factory$", f"from {module} import {name} as factory", snippet,
                  count=1, flags=re.MULTILINE)


def assert_fails_where_it_diverges(snippet: str) -> SnippetRun:
    """Run `snippet`; it must exit non-zero from its diverging call or an assertion after it."""
    run = run_snippet(snippet)
    assert run.returncode != 0, f"the snippet ran to its end:\n{snippet}"
    assert run.failing_line is not None and run.failing_line >= diverging_line(snippet), (
        f"failed at line {run.failing_line}, before the diverging call (line {diverging_line(snippet)}): "
        f"{run.error}\n{snippet}"
    )
    return run
