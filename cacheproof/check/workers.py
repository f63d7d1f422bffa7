"""`cacheproof check --workers N`, for every spec kind: N processes search distinct seeds; the first
failure wins.

The crew knows nothing of a kind: the caller gives it each worker's options and the kind's `work`,
a module-level function (so that "spawn" can send it by name) that runs one worker's check and
returns its report: `work(options, database, hooks)` opens `database` (a `DatabaseChoice`, or
None) itself, tells `hooks` its progress, the first failure it shrinks and each counterexample,
and returns a report with `examples`, `steps`, `counterexample` (None: no failure),
`first_failure_example`, `coverage` and, where the kind has one, `interrupted`. The crew returns
what the workers did (`CrewResult`); the kind merges that into its own report.

Worker i (0-based) runs on seed + i with its share of every phase's examples (`phases.shares`): the
budget is divided, not multiplied. Each worker is a fresh interpreter ("spawn": no thread or lock
of the parent's is copied) that loads the implementation and opens the example database itself, so
all of them read and write the same database (docs/scale.md).

The first worker to find a failure wins: the moment it starts shrinking, the others are stopped,
and the winner shrinks (and searches for further kinds) alone. A merged report sums every
worker's examples and steps (a stopped worker's as of its last progress message), counts the first
failure among all the examples run before it, and names the winner and its seed.

Ctrl-C reaches the parent alone (workers ignore SIGINT): the parent interrupts each worker with
INTERRUPT_SIGNAL, which raises KeyboardInterrupt there as Ctrl-C would, gathers their reports for
up to INTERRUPT_GRACE_SECONDS, and stops the rest within STOP_SECONDS: well within the command's
own grace for a Ctrl-C (`cmdline.interrupts.GRACE_SECONDS`), after which it is ended without its
partial report. Each worker talks to the parent through a pipe
of its own, so that stopping one cannot garble another's messages.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.cmdline.databases import DatabaseChoice
from cacheproof.cmdline.interrupts import GRACE_SECONDS, ctrl_c_held
from cacheproof.contract.faults import UsageAbort
from cacheproof.settings import scratch_storage

INTERRUPT_SIGNAL = signal.SIGUSR1
INTERRUPT_GRACE_SECONDS = GRACE_SECONDS / 2
"""How long interrupted workers get to send what they found (a counterexample being shrunk) before they
are stopped: half the command's grace, so that on a loaded machine the parent still stops them and
prints its partial report before the command is ended without it (it waited the whole grace, and a
fresh-clone CI run under load ended with "Ctrl-C not answered")."""
STOP_SECONDS = 2.0
"""How long stopped workers get, all together, to exit after SIGTERM before they are killed."""
PROGRESS_SECONDS = 0.05
"""A worker sends its counts at most this often (and always with its report)."""


@dataclass(frozen=True)
class Hooks:
    """What a worker's `work` tells the parent: `progress(examples, steps)` as it goes,
    `shrink(found_at, length)` when it starts shrinking a failure (found at its `found_at`th
    example; None: a further one), `counterexample(example)` when one is shrunk."""

    progress: Callable[[int, int], None]
    shrink: Callable[[int | None, int], None]
    counterexample: Callable[[Any], None]


@dataclass(frozen=True)
class ParentHooks:
    """What the parent is told, the winner's only once there is one: `on_progress(examples, steps)`
    of all workers summed, `on_shrink(found_at, length)` with `found_at` counted over all workers,
    `on_counterexample(example, seconds)`."""

    on_progress: Callable[[int, int], None] | None = None
    on_shrink: Callable[[int | None, int], None] | None = None
    on_counterexample: Callable[[Any, float], None] | None = None


@dataclass(frozen=True)
class WorkersSummary:
    """How many workers ran, which found the failure (0-based; None: none did) and its seed: the
    report's `workers` row and JSON field, alike for every kind."""

    count: int
    winner: int | None = None
    winner_seed: int | None = None

    def row(self) -> dict[str, str]:
        """The summary table's `workers` row."""
        found = "" if self.winner is None else f"; worker {self.winner + 1} (seed {self.winner_seed}) found the failure"
        return {"workers": f"{self.count}{found}"}

    def to_json(self) -> dict[str, Any]:
        """The JSON report's `workers` field."""
        return {"workers": {"count": self.count, "winner": self.winner, "winner_seed": self.winner_seed}}


@dataclass
class CrewResult:
    """What the workers of one run did: their reports (by worker), each one's latest (examples,
    steps), the winner, the first failure as (examples of all workers, seconds from the start),
    whether Ctrl-C interrupted the run, and its seconds."""

    workers: int
    seeds: dict[int, int | None]
    counts: dict[int, tuple[int, int]]
    reports: dict[int, Any]
    winner: int | None
    first_failure: tuple[int, float] | None
    interrupted: bool
    seconds: float

    @property
    def examples(self) -> int:
        return sum(examples for examples, _ in self.counts.values())

    @property
    def steps(self) -> int:
        return sum(steps for _, steps in self.counts.values())

    @property
    def winning(self) -> Any:
        """The winner's report (None: no worker failed, or the winner was stopped before reporting)."""
        return None if self.winner is None else self.reports.get(self.winner)

    @property
    def in_order(self) -> list[Any]:
        return [self.reports[index] for index in sorted(self.reports)]

    @property
    def summary(self) -> WorkersSummary:
        return WorkersSummary(self.workers, self.winner, None if self.winner is None else self.seeds[self.winner])

    def coverage(self) -> OutcomeCoverage | None:
        """The outcomes the workers that reported reached, counted together."""
        return OutcomeCoverage.merged(report.coverage for report in self.in_order)


def run_crew(
    work: Callable[[Any, DatabaseChoice | None, Hooks], Any], options: Sequence[Any], seeds: Sequence[int | None],
    database: DatabaseChoice | None = None, hooks: ParentHooks = ParentHooks(),
) -> CrewResult:
    """Run `work(options[i], database, ...)` in worker i, one process each, with `seeds[i]` for the
    report (see the module). UsageAbort when a worker reports one or dies before reporting. The
    workers are started with "spawn", which imports the caller's main module again: a script that
    calls this must do so under `if __name__ == "__main__":`."""
    context = multiprocessing.get_context("spawn")
    crew = Crew(len(options), time.perf_counter(), hooks)
    try:
        try:
            for index, (own, seed) in enumerate(zip(options, seeds)):
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(index, work, own, database, writer),
                                          name=f"cacheproof-worker-{index + 1}")
                with ctrl_c_held():  # a worker started is a worker the crew knows, whenever Ctrl-C comes
                    process.start()
                    crew.add(index, seed, process, reader)
                writer.close()
            crew.listen()
        except KeyboardInterrupt:
            crew.interrupt()
    finally:
        crew.stop_all()
    return crew.result()


class Crew:
    """The workers of one run, their pipes, their latest counts, their reports and the winner."""

    def __init__(self, workers: int, started: float, hooks: ParentHooks = ParentHooks()) -> None:
        self.workers, self.started, self.hooks = workers, started, hooks
        self.seeds: dict[int, int | None] = {}
        self.processes: dict[int, Any] = {}
        self.pipes: dict[int, Connection] = {}
        self.counts: dict[int, tuple[int, int]] = {}  # worker: (examples, steps)
        self.reports: dict[int, Any] = {}
        self.winner: int | None = None
        self.first_failure: tuple[int, float] | None = None  # (examples of all workers, seconds)
        self.interrupted = False

    def add(self, index: int, seed: int | None, process: Any, pipe: Connection) -> None:
        self.seeds[index], self.processes[index], self.pipes[index] = seed, process, pipe
        self.counts[index] = (0, 0)

    def listen(self, until: float | None = None) -> None:
        """Handle the workers' messages until each has reported or been stopped (or `until`)."""
        while self.pipes and (until is None or time.perf_counter() < until):
            for pipe in wait(list(self.pipes.values()), timeout=0.2):
                index = next((index for index, own in self.pipes.items() if own is pipe), None)
                if index is None:  # stopped while an earlier message of this batch was handled
                    continue
                try:
                    message = pipe.recv()
                except (EOFError, OSError):
                    self._lost(index)
                    continue
                self._handle(index, *message)

    def _handle(self, index: int, kind: str, *body: Any) -> None:
        hooks = self.hooks
        if kind == "progress":
            self.counts[index] = body[0], body[1]
            if hooks.on_progress is not None and self.winner is None:
                hooks.on_progress(*(sum(count) for count in zip(*self.counts.values())))
        elif kind == "shrink":
            if self.winner is None:
                self._won(index, body[0])
            if index == self.winner and hooks.on_shrink is not None:
                hooks.on_shrink(None if body[0] is None else self.first_failure[0], body[1])
        elif kind == "counterexample":
            if self.winner is None:
                self._won(index, None)
            if index == self.winner and hooks.on_counterexample is not None:
                hooks.on_counterexample(body[0], time.perf_counter() - self.started)
        elif kind == "report":
            report = body[0]
            self.counts[index] = report.examples, report.steps
            if report.counterexample is not None and self.winner is None:
                self._won(index, report.first_failure_example)
            self.reports[index] = report
            self.interrupted |= bool(getattr(report, "interrupted", False))
            self._close(index)
        elif kind == "abort":
            self.stop_all()
            raise UsageAbort(*body)

    def _won(self, index: int, found_at: int | None) -> None:
        """`index` found the first failure (its `found_at`th example): the others are stopped."""
        self.winner = index
        others = sum(examples for other, (examples, _) in self.counts.items() if other != index)
        self.first_failure = (others + (found_at or self.counts[index][0]), time.perf_counter() - self.started)
        for other in list(self.pipes):
            if other != index:
                self._stop(other)

    def _lost(self, index: int) -> None:
        """A worker's pipe closed before its report: it died (or Ctrl-C stopped it before it had one)."""
        process = self.processes[index]
        process.join(timeout=STOP_SECONDS)
        self._close(index)
        if not self.interrupted:
            self.stop_all()
            raise UsageAbort(
                f"worker {index + 1} of {self.workers} (seed {self.seeds[index]}) died with exit status "
                f"{process.exitcode} before reporting; an implementation that kills its process is a "
                "counterexample under --isolate"
            )

    def interrupt(self) -> None:
        """The user's Ctrl-C: interrupt every worker, gather their reports for a while, stop the rest."""
        self.interrupted = True
        for index in list(self.pipes):
            _signal(self.processes[index], INTERRUPT_SIGNAL)
        try:
            self.listen(until=time.perf_counter() + INTERRUPT_GRACE_SECONDS)
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
            pass

    def _stop(self, index: int) -> None:
        self.processes[index].terminate()
        self._close(index)

    def _close(self, index: int) -> None:
        pipe = self.pipes.pop(index, None)
        if pipe is not None:
            pipe.close()

    def stop_all(self) -> None:
        """Stop every worker still running: SIGTERM, STOP_SECONDS for all of them to exit, then SIGKILL."""
        for index in list(self.pipes):
            self._stop(index)
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.processes.values():
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self.processes.values():
            if process.is_alive():
                process.kill()
                process.join()

    def result(self) -> CrewResult:
        return CrewResult(
            self.workers, dict(self.seeds), dict(self.counts), dict(self.reports), self.winner, self.first_failure,
            self.interrupted, time.perf_counter() - self.started,
        )


def _signal(process: Any, number: int) -> None:
    if process.pid is not None and process.is_alive():
        try:
            os.kill(process.pid, number)
        except ProcessLookupError:
            pass


def _work(index: int, work: Callable[..., Any], options: Any, database: DatabaseChoice | None, pipe: Connection) -> None:
    """One worker: run `work`, sending progress, the first failure's shrinking and the report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent alone hears Ctrl-C, and passes it on
    signal.signal(INTERRUPT_SIGNAL, signal.default_int_handler)
    last = [0.0]
    sent = _sender(pipe)

    def progress(examples: int, steps: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= PROGRESS_SECONDS:
            last[0] = now
            sent("progress", examples, steps)

    hooks = Hooks(progress, lambda found_at, length: sent("shrink", found_at, length),
                  lambda example: sent("counterexample", example))
    try:
        with scratch_storage():
            report = work(options, database, hooks)
        sent("report", report)
    except KeyboardInterrupt:  # stopped before it had a report: the parent counts its last progress
        pass
    except UsageAbort as abort:
        sent("abort", abort.message, abort.details)
    except Exception as error:  # noqa: BLE001  (the parent reports it as a usage error, with the traceback)
        sent("abort", f"worker {index + 1}: {type(error).__name__}: {error}", traceback.format_exc())
    finally:
        pipe.close()


def _sender(pipe: Connection) -> Callable[..., None]:
    """Send a message; a parent that has gone (it stopped this worker's run) is no error."""
    def send(*message: Any) -> None:
        try:
            pipe.send(message)
        except (BrokenPipeError, OSError):
            pass
    return send

