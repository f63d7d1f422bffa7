"""`cacheproof check --workers N`: N processes search distinct seeds; the first failure wins.

Worker i (0-based) runs `run_check` with seed + i on its share of every phase's examples: the budget
is divided, not multiplied, so `--examples` stays the total and N workers spend it up to N times
sooner. Each worker is a fresh interpreter ("spawn": no thread or lock of the parent's is copied)
that loads the implementation and opens the example database itself, so all of them read and write
the same database (docs/scale.md).

The first worker to find a failure wins: the moment it starts shrinking, the others are stopped,
and the winner shrinks (and searches for further kinds) alone. The merged report sums every
worker's examples and steps (a stopped worker's as of its last progress message), counts the
first failure among all the examples run before it, and names the winner and its seed. When every
worker conforms, the report conforms with the sums, the scopes reached merged.

Ctrl-C reaches the parent alone (workers ignore SIGINT): the parent interrupts each worker with
INTERRUPT_SIGNAL, which raises KeyboardInterrupt there as Ctrl-C would, gathers their reports for
up to INTERRUPT_GRACE_SECONDS, stops the rest, and reports as `run_check` does (CheckInterrupted
when nothing failed). Each worker talks to the parent through a pipe of its own, so that stopping
one cannot garble another's messages.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterator

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.sequential.machine import Tally
from cacheproof.check.sequential.run import CheckInterrupted, CheckOptions, CheckReport, ScopeCovered, run_check
from cacheproof.check.sequential.scope import SMALL, Phase
from cacheproof.cmdline.databases import DatabaseChoice, open_database
from cacheproof.contract.faults import UsageAbort
from cacheproof.sandbox.factories import check_impl_syntax, load_factory
from cacheproof.settings import scratch_storage

INTERRUPT_SIGNAL = signal.SIGUSR1
INTERRUPT_GRACE_SECONDS = 10.0
"""How long interrupted workers get to send what they found (a counterexample being shrunk) before they are stopped."""
PROGRESS_SECONDS = 0.05
"""A worker sends its counts at most this often (and always with its report)."""


@dataclass(frozen=True)
class MergedReport(CheckReport):
    """`run_check`'s report over `workers` processes; `winner` (0-based) found the first failure, with `winner_seed`."""

    workers: int = 1
    winner: int | None = None
    winner_seed: int | None = None

    def rows(self) -> dict[str, str]:
        """The summary table's `workers` row."""
        found = "" if self.winner is None else f"; worker {self.winner + 1} (seed {self.winner_seed}) found the failure"
        return {"workers": f"{self.workers}{found}"}

    def workers_json(self) -> dict[str, Any]:
        """The JSON report's `workers` field."""
        return {"workers": {"count": self.workers, "winner": self.winner, "winner_seed": self.winner_seed}}


def worker_rows(report: CheckReport) -> dict[str, str]:
    """The `workers` row of a merged report; none for a report of one process."""
    return report.rows() if isinstance(report, MergedReport) else {}


def worker_json(report: CheckReport) -> dict[str, Any]:
    """The `workers` field of a merged report's JSON; none for a report of one process."""
    return report.workers_json() if isinstance(report, MergedReport) else {}


def shares(phases: tuple[Phase, ...], workers: int) -> list[tuple[Phase, ...]]:
    """Each worker's phases: every phase's examples divided as evenly as they go (the first workers
    get one more); ValueError when a worker would get no example of some phase."""
    smallest = min(phase.examples for phase in phases)
    if smallest < workers:
        raise ValueError(f"--workers {workers} needs at least {workers} examples per phase, got {smallest}")
    return [
        tuple(replace(phase, examples=phase.examples // workers + (index < phase.examples % workers)) for phase in phases)
        for index in range(workers)
    ]


def workers_check(workers: int, phases: tuple[Phase, ...], database: DatabaseChoice | None) -> Callable[..., CheckReport]:
    """`run_check` over `workers` processes (`cacheproof check --workers`), called as `run_check` is
    (its `factory` is unused: each worker loads `impl`). ValueError when a phase of `phases` has
    fewer examples than workers."""
    shares(phases, workers)

    def check(factory: Callable[[int], Any], **fields: Any) -> CheckReport:
        return run_workers(CheckOptions(**fields), workers, database)

    return check


def run_workers(options: CheckOptions, workers: int, database: DatabaseChoice | None = None) -> MergedReport:
    """The check `options` describes, over `workers` processes sharing the example database of
    `database` (see the module). `options.on_example` gets a Tally of the summed examples and steps,
    `options.on_shrink` and `options.on_counterexample` the winner's; `options.database` and
    `options.seed` are replaced by each worker's. UsageAbort when a worker reports one or dies.
    The workers are started with "spawn", which imports the caller's main module again: a script
    that calls this must do so under `if __name__ == "__main__":`."""
    phases = tuple(options.phases) if options.phases is not None else (
        Phase(SMALL, options.examples, options.steps_per_example),)
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    crew = Crew(options, workers, started)
    try:
        try:
            for index, share in enumerate(shares(phases, workers)):
                seed = None if options.seed is None else options.seed + index
                worker_options = replace(options, seed=seed, phases=share, examples=sum(phase.examples for phase in share),
                                         on_example=None, on_shrink=None, on_counterexample=None, database=None)
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(target=_work, args=(index, worker_options, database, writer),
                                          name=f"cacheproof-worker-{index + 1}")
                with _ctrl_c_deferred():  # a worker started is a worker the crew knows, whenever Ctrl-C comes
                    process.start()
                    crew.add(index, seed, process, reader)
                writer.close()
            crew.listen()
        except KeyboardInterrupt:
            crew.interrupt()
    finally:
        crew.stop_all()
    return crew.merged(phases)


class Crew:
    """The workers of one run, their pipes, their latest counts, their reports and the winner."""

    def __init__(self, options: CheckOptions, workers: int, started: float) -> None:
        self.options, self.workers, self.started = options, workers, started
        self.seeds: dict[int, int | None] = {}
        self.processes: dict[int, Any] = {}
        self.pipes: dict[int, Connection] = {}
        self.counts: dict[int, tuple[int, int]] = {}  # worker: (examples, steps)
        self.reports: dict[int, CheckReport] = {}
        self.winner: int | None = None
        self.first_failure: tuple[int, float] | None = None  # (examples of all workers, seconds)
        self.interrupted = False
        self.tally = Tally()

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
        if kind == "progress":
            self.counts[index] = body[0], body[1]
            self.tally.examples, self.tally.steps = (sum(count) for count in zip(*self.counts.values()))
            if self.options.on_example is not None and self.winner is None:
                self.options.on_example(self.tally)
        elif kind == "shrink":
            if self.winner is None:
                self._won(index, body[0])
            if index == self.winner and self.options.on_shrink is not None:
                found_at = body[0]
                self.options.on_shrink(None if found_at is None else self.first_failure[0], body[1])
        elif kind == "counterexample":
            if self.winner is None:
                self._won(index, None)
            if index == self.winner and self.options.on_counterexample is not None:
                self.options.on_counterexample(body[0], time.perf_counter() - self.started)
        elif kind in ("report", "interrupted"):
            report = body[0]
            self.counts[index] = report.examples, report.steps
            if report.counterexample is not None and self.winner is None:
                self._won(index, report.first_failure_example)
            self.reports[index] = report
            self.interrupted |= kind == "interrupted" or report.interrupted
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
        """A worker's pipe closed before its report: it died."""
        process = self.processes[index]
        process.join(timeout=5)
        self._close(index)
        if not self.interrupted:
            self.stop_all()
            raise UsageAbort(
                f"worker {index + 1} of {self.workers} (seed {self.seeds[index]}) died with exit status "
                f"{process.exitcode} before reporting; a cache that kills its process is a counterexample under --isolate"
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
        for index in list(self.pipes):
            self._stop(index)
        for process in self.processes.values():
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()

    def merged(self, phases: tuple[Phase, ...]) -> MergedReport:
        """One report of every worker's (see the module); CheckInterrupted when interrupted before any failure."""
        seconds = time.perf_counter() - self.started
        examples = sum(examples for examples, _ in self.counts.values())
        steps = sum(steps for _, steps in self.counts.values())
        reports = [self.reports[index] for index in sorted(self.reports)]
        winning = None if self.winner is None else self.reports.get(self.winner)
        scope = _merged_scope([report.scope for report in reports]) if reports else ScopeCovered.of(Tally(), phases, None)
        common = dict(
            examples=examples, steps=steps, seconds=seconds, scope=scope, coverage=_merged_coverage(reports),
            workers=self.workers, interrupted=self.interrupted,
        )
        if winning is None:
            report = MergedReport(ok=not self.interrupted, counterexample=None, **common)
            if self.interrupted:
                raise CheckInterrupted(report)
            return report
        return MergedReport(
            ok=False, counterexample=winning.counterexample, counterexamples=winning.counterexamples,
            shrinking_interrupted=winning.shrinking_interrupted, first_failure_example=self.first_failure[0],
            first_failure_seconds=self.first_failure[1], first_report_seconds=winning.first_report_seconds,
            winner=self.winner, winner_seed=self.seeds[self.winner], **common,
        )


def _merged_scope(scopes: list[ScopeCovered]) -> ScopeCovered:
    """What the workers' examples reached together: the largest of each measure, every scope and key type."""
    return ScopeCovered(
        tuple(dict.fromkeys(name for scope in scopes for name in scope.scopes)),
        max(scope.most_live_entries for scope in scopes),
        max(scope.most_distinct_keys for scope in scopes),
        tuple(sorted({key_type for scope in scopes for key_type in scope.key_types})),
        max(scope.largest_capacity for scope in scopes),
        max(scope.longest_sequence for scope in scopes),
        next((scope.capacity_cap for scope in scopes if scope.capacity_cap is not None), None),
    )


def _merged_coverage(reports: list[CheckReport]) -> OutcomeCoverage | None:
    """The outcomes the workers that reported reached, counted together."""
    coverages = [report.coverage for report in reports if report.coverage is not None]
    if not coverages:
        return None
    merged = OutcomeCoverage(coverages[0].operations, coverages[0].cases)
    for coverage in coverages:
        merged.counts.update(coverage.counts)
        merged.programs += coverage.programs
    return merged


@contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """Hold a Ctrl-C back until the block is done, then raise its KeyboardInterrupt (in the main
    thread; elsewhere signals do not reach Python code and the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: pressed.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def _signal(process: Any, number: int) -> None:
    if process.pid is not None and process.is_alive():
        try:
            os.kill(process.pid, number)
        except ProcessLookupError:
            pass


def _work(index: int, options: CheckOptions, database: DatabaseChoice | None, pipe: Connection) -> None:
    """One worker: run the check, sending progress, the first failure's shrinking and the report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent alone hears Ctrl-C, and passes it on
    signal.signal(INTERRUPT_SIGNAL, signal.default_int_handler)
    last = [0.0]
    sent = _sender(pipe)

    def progress(tally: Tally) -> None:
        now = time.perf_counter()
        if now - last[0] >= PROGRESS_SECONDS:
            last[0] = now
            sent("progress", tally.examples + tally.rejected, tally.steps)

    try:
        with scratch_storage():
            factory = check_impl_syntax(options.impl) if options.isolate else load_factory(options.impl)
            report = run_check(factory, replace(
                options, database=None if database is None else open_database(database), on_example=progress,
                on_shrink=lambda found_at, length: sent("shrink", found_at, length),
                on_counterexample=lambda example, seconds: sent("counterexample", example),
            ))
        sent("report", report)
    except CheckInterrupted as interrupted:
        sent("interrupted", interrupted.report)
    except KeyboardInterrupt:  # stopped while it loaded the implementation: nothing to report yet
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
