"""Progress bars for long runs and the summary table, on stderr and stdout via rich."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table


class Progress:
    """A bar of examples done, with steps and steps/s; silent when quiet or not on a terminal."""

    def __init__(self, title: str, total: int, *, quiet: bool = False) -> None:
        console = Console(stderr=True)
        self._enabled = not quiet and console.is_terminal
        self._started = time.perf_counter()
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
        if self._enabled:
            self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._enabled:
            self._bar.stop()

    def update(self, done: int, steps: int) -> None:
        if not self._enabled:
            return
        elapsed = max(time.perf_counter() - self._started, 1e-9)
        self._bar.update(self._task, completed=min(done, self._bar.tasks[0].total or done), detail=f"{steps} steps, {steps / elapsed:.0f} steps/s")


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
