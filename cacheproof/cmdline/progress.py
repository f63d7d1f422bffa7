"""Progress of long runs and the summary table, on stderr and stdout via rich.

A run goes through phases: *searching* (examples done of the budget, steps/s), then, once a
divergence is found, *shrinking* ("divergence found at example 12, shrinking (31 calls, 4.2 s)",
the length of the smallest failing sequence so far), then *searching for further divergences*.
On a terminal the phase is the bar's text. Elsewhere (a CI log), unless quiet, it is one plain line
on stderr at each phase change and at most every PLAIN_LINE_SECONDS otherwise, so that a log shows
a run that is alive.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table

PLAIN_LINE_SECONDS = 10.0
"""Off a terminal, a phase's progress is printed at most this often (a phase change at once)."""

SEARCHING = "searching"
SHRINKING = "shrinking"
SEARCHING_FURTHER = "searching for further divergences"


class Progress:
    """The phases of one run (see the module): a rich bar on a terminal, plain lines on stderr
    elsewhere, nothing when quiet. `total` counts `unit`s (examples, scenarios); `clock` and
    `stream` are for tests."""

    def __init__(
        self, title: str, total: int, *, quiet: bool = False, unit: str = "examples", stream: TextIO | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        console = Console(stderr=True)
        self._title = title
        self._total = total
        self._unit = unit
        self._clock = clock
        self._on_terminal = not quiet and console.is_terminal
        self._plain_lines = not quiet and not console.is_terminal
        self._stream = stream
        self._started = clock()
        self._phase: str | None = None
        self._found_at: int | None = None
        self._phase_started = self._started
        self._last_line = float("-inf")
        self._done = 0
        self._bar = _RichProgress(
            TextColumn(f"[bold]{title}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task = self._bar.add_task(title, total=total, detail="")

    def __enter__(self) -> "Progress":
        if self._on_terminal:
            self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._on_terminal:
            self._bar.stop()

    def update(self, done: int, steps: int) -> None:
        """`done` examples of the budget ran, `steps` calls in all: searching, or searching for
        further divergences once a divergence was shrunk."""
        self._done = done
        phase = SEARCHING if self._phase in (None, SEARCHING) else SEARCHING_FURTHER
        elapsed = max(self._clock() - self._started, 1e-9)
        rate = f"{steps} steps, {steps / elapsed:.0f} steps/s"
        detail = rate if phase == SEARCHING else f"{phase}: {rate}"
        count = f"{done}" if self._total is None else f"{min(done, self._total)}/{self._total}"  # None: a time budget
        self._show(phase, None, detail, f"{phase}: {count} {self._unit}, {rate}")

    def shrinking(self, found_at: int | None, length: int) -> None:
        """A divergence found at example `found_at` (None: a further one seen on the way) is being
        shrunk; the smallest failing sequence so far has `length` calls."""
        now = self._clock()
        if self._phase != SHRINKING or found_at != self._found_at:
            self._phase_started = now
        seconds = now - self._phase_started
        where = "a further divergence found" if found_at is None else f"divergence found at example {found_at}"
        detail = f"{where}, shrinking ({length} calls, {seconds:.1f} s)"
        self._show(SHRINKING, found_at, detail, detail)

    def _show(self, phase: str, found_at: int | None, detail: str, line: str) -> None:
        changed = phase != self._phase or found_at != self._found_at
        self._phase, self._found_at = phase, found_at
        if self._on_terminal:
            done = self._done if self._total is None else min(self._done, self._total)
            self._bar.update(self._task, completed=done, detail=detail)
            return
        now = self._clock()
        if self._plain_lines and (changed or now - self._last_line >= PLAIN_LINE_SECONDS):
            self._last_line = now
            print(f"{self._title}: {line}", file=self._stream or sys.stderr, flush=True)


class _PlainPipeConsole(Console):
    """A console whose closed output pipe raises BrokenPipeError, as print() does (rich exits 1,
    the status of a counterexample); `cacheproof.cli` turns it into its closed-output status."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError("the output pipe was closed")


def summary_table(title: str, rows: dict[str, Any]) -> None:
    """Print a two-column table of results to stdout."""
    table = Table(title=title, show_header=False)
    for name, value in rows.items():
        table.add_row(name, str(value))
    _PlainPipeConsole().print(table)
