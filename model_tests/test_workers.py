"""`cacheproof check --workers N`: distinct seeds in N processes, the first failure wins, one merged
report (docs/scale.md); the tensor cache and the block pool alike, through one crew."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import time
from pathlib import Path

import pytest

from cacheproof.check.phases import Phase, shares
from cacheproof.check.programs.generators.cache_calls import SMALL, THOROUGH
from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.check.programs.run import ProgramOptions, ProgramReport
from cacheproof.check.programs.workers import merged
from cacheproof.contract.calls import Call
from cacheproof.sandbox.fault_search import DIVERGENCE, Failure
from cacheproof.spec.kinds import get_kind
from cacheproof.check.workers import Crew
from cacheproof.cli import main
from model_tests.ctrl_c import cpu_seconds, interruptible_cacheproof, press_ctrl_c, wait_for
from model_tests.snippet_runs import assert_fails_where_it_diverges, snippets_in

BROKEN = "model_tests.broken_caches:CommitEvictsBeforeSizeCheck"
CONFORMING = "examples.minimal_cache:MinimalCache"
KINDS = {
    "cache": ([], BROKEN, CONFORMING),
    "blocks": (["--spec", "blocks"], "model_tests.block_pools:DoubleFreePool", "model_tests.block_pools:ListBlockPool"),
}
"""Per kind: its --spec flags, a broken implementation and a conforming one."""
ROOT = Path(__file__).resolve().parent.parent


def test_each_worker_gets_its_share_of_every_phase_and_the_shares_add_up() -> None:
    for phases, workers in (((Phase(SMALL, 7, 10),), 3), (THOROUGH, 4)):
        divided = shares(phases, workers)
        assert len(divided) == workers
        for number, phase in enumerate(phases):
            counts = [share[number].examples for share in divided]
            assert sum(counts) == phase.examples and max(counts) - min(counts) <= 1
            assert all(share[number].scope == phase.scope and share[number].steps == phase.steps for share in divided)


@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_cache_is_found_by_two_workers_with_one_merged_report(kind: str, tmp_path: Path, capsys) -> None:
    flags, broken, _ = KINDS[kind]
    report_path = tmp_path / "report.json"
    status = main(["check", *flags, "--impl", broken, "--workers", "2", "--seed", "5", "--max-divergences", "1",
                   "--json", str(report_path)])
    output = capsys.readouterr().out
    assert status == 1
    report = json.loads(report_path.read_text())
    workers = report["workers"]
    assert report["spec"] == kind
    assert workers["count"] == 2 and workers["winner"] in (0, 1)
    assert workers["winner_seed"] == 5 + workers["winner"]
    assert f"worker {workers['winner'] + 1} (seed {workers['winner_seed']}) found the failure" in output
    assert 1 <= report["first_failure_example"] <= report["examples"] <= 200
    assert len(report["divergences"]) == 1
    snippets = snippets_in(output)
    assert len(snippets) == 1
    assert_fails_where_it_diverges(snippets[0])


@pytest.mark.parametrize("kind", KINDS)
def test_a_conforming_cache_conforms_over_two_workers_with_the_examples_summed(kind: str, tmp_path: Path, capsys) -> None:
    flags, _, conforming = KINDS[kind]
    report_path = tmp_path / "report.json"
    status = main(["check", *flags, "--impl", conforming, "--workers", "2", "--examples", "31", "--steps", "20",
                   "--json", str(report_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["examples"] == 31 and report["steps"] > 31
    assert report["workers"] == {"count": 2, "winner": None, "winner_seed": None}
    assert "conforms: 31 examples" in output


@pytest.mark.parametrize(("flags", "message"), [
    (["--workers", "0"], "argument --workers: must be an integer >= 1, got '0'"),
    (["--workers", "two"], "argument --workers: must be an integer >= 1, got 'two'"),
    (["--workers", "3", "--examples", "2"], "--workers 3 needs at least 3 examples per phase, got 2"),
    (["--workers", "2", "--threads", "2"], "--workers and --database are for sequential checks; not with --threads"),
])
def test_a_bad_workers_flag_is_a_usage_error(flags: list[str], message: str, capsys) -> None:
    assert main(["check", "--impl", CONFORMING, *flags]) == 2
    assert message in capsys.readouterr().err


def test_a_failure_found_by_the_workers_replays_first_next_run(tmp_path: Path) -> None:
    database = tmp_path / "examples"
    first, again = tmp_path / "first.json", tmp_path / "again.json"
    assert main(["check", "--impl", BROKEN, "--workers", "2", "--seed", "5", "--max-divergences", "1", "--quiet",
                 "--json", str(first), "--database", str(database)]) == 1
    assert main(["check", "--impl", BROKEN, "--workers", "2", "--seed", "40", "--max-divergences", "1", "--quiet",
                 "--json", str(again), "--database", str(database)]) == 1
    found, replayed = json.loads(first.read_text()), json.loads(again.read_text())
    assert replayed["first_failure_example"] == 1
    assert replayed["divergences"][0]["kind"] == found["divergences"][0]["kind"]


@pytest.mark.parametrize("kind", KINDS)
def test_ctrl_c_stops_every_worker(kind: str, tmp_path: Path) -> None:
    flags, _, conforming = KINDS[kind]
    report_path = tmp_path / "report.json"
    process = subprocess.Popen(
        interruptible_cacheproof("check", *flags, "--impl", conforming, "--workers", "2", "--examples", "100000",
                                 "--quiet", "--json", str(report_path)),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    workers: list[int] = []

    def workers_started() -> bool:
        # multiprocessing's resource tracker is a child too; the workers are the spawned ones
        workers[:] = [pid for pid in _children(process.pid) if "spawn_main" in _command_line(pid)]
        return len(workers) >= 2

    wait_for(workers_started, 120, "two workers starting", process)
    # CPU time, not wall time, so that a loaded machine only makes it take longer: a worker imports
    # the checker in about one CPU second, so by WORKER_CPU_SECONDS it has run examples
    wait_for(lambda: all(cpu_seconds(pid) >= WORKER_CPU_SECONDS for pid in workers), 120, "the workers running examples",
             process)
    out, err = press_ctrl_c(process)
    assert process.returncode == 130, out + err
    assert "interrupted" in out
    report = json.loads(report_path.read_text())
    assert report["ok"] is None and report["examples"] > 0 and report["spec"] == kind
    wait_for(lambda: not any(_alive(pid) for pid in workers), 10, "every worker gone")


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    found: list[int] = []
    for task in tasks.iterdir() if tasks.exists() else ():
        children = (task / "children").read_text().split()
        found += [int(child) for child in children]
    return found


WORKER_CPU_SECONDS = 4.0


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


class _FinishedProcess:
    """A worker process stand-in: already done, it records being stopped."""

    pid = None
    exitcode = 0

    def __init__(self) -> None:
        self.terminated = False

    def terminate(self) -> None:
        self.terminated = True

    def join(self, timeout: float | None = None) -> None:
        return None

    def is_alive(self) -> bool:
        return False


def test_a_message_from_a_worker_stopped_earlier_in_the_same_batch_is_skipped() -> None:
    """Worker 1's progress is ready beside worker 0's first failure: worker 0 wins and stops worker 1
    while the batch is handled; worker 1's message is then skipped, not looked up."""
    crew = Crew(2, time.perf_counter())
    processes, writers = [_FinishedProcess(), _FinishedProcess()], []
    for index, process in enumerate(processes):
        reader, writer = multiprocessing.Pipe(duplex=False)
        crew.add(index, 10 + index, process, reader)
        writers.append(writer)
    example = ProgramCounterexample(64, (Call("get", (1,)),), None, Failure(0, "diverges", DIVERGENCE))
    found = ProgramReport("cache", examples=3, steps=30, seconds=0.1, first_failure_example=2,
                          counterexamples=[example])
    writers[0].send(("shrink", 2, 5))
    writers[1].send(("progress", 7, 70))
    writers[0].send(("report", found))
    for writer in writers:
        writer.close()
    crew.listen()
    report = merged(get_kind("cache"), crew.result(), ProgramOptions())
    assert processes[1].terminated and not processes[0].terminated
    assert (report.workers.winner, report.workers.winner_seed, report.counterexample) == (0, 10, example)
    assert report.examples == 3 and report.first_failure_example == 2


def test_stopped_workers_get_stop_seconds_together_then_are_killed(monkeypatch):
    """After a Ctrl-C the parent gathers reports for INTERRUPT_GRACE_SECONDS and gives the workers
    STOP_SECONDS, all of them together, to exit after SIGTERM: both within the command's grace, so
    its partial report comes before the grace ends the command without one (each worker got 5 s to
    exit, and the gathering the whole 10 s grace: a CI run under load ended "not answered"). Three
    workers that never exit; the clock is the joins' own."""
    from types import SimpleNamespace

    from cacheproof.check import workers
    from cacheproof.cmdline.interrupts import GRACE_SECONDS

    now = [0.0]
    monkeypatch.setattr(workers, "time", SimpleNamespace(monotonic=lambda: now[0], perf_counter=time.perf_counter))
    waited = []

    class NeverExits:
        pid = None

        def terminate(self):
            waited.append("terminated")

        def join(self, timeout=None):
            if timeout is not None:
                now[0] += timeout
                waited.append(timeout)

        def is_alive(self):
            return True

        def kill(self):
            waited.append("killed")

    class Pipe:
        def close(self):
            pass

    crew = Crew(3, 0.0)
    for index in range(3):
        crew.add(index, index, NeverExits(), Pipe())
    crew.stop_all()
    assert waited.count("terminated") == 3 and waited.count("killed") == 3
    assert sum(timeout for timeout in waited if type(timeout) is float) == pytest.approx(workers.STOP_SECONDS)
    assert workers.INTERRUPT_GRACE_SECONDS + workers.STOP_SECONDS < GRACE_SECONDS
