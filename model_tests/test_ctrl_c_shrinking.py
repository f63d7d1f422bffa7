"""A Ctrl-C after a failure was found keeps it, and a run shows which phase it is in.

Pressed while a counterexample is being shrunk (by Hypothesis, or by the checker's own shrinker),
the smallest failing sequence found so far is reported: exit 1, "shrinking interrupted", a snippet
that fails when run. Pressed while searching for further divergences, those found are reported.
Off a terminal, progress is a plain line on stderr at each phase change and every ten seconds.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramSetup, divergence_kind, program_failure
from cacheproof.check.phases import Phase
from cacheproof.check.programs.generators.cache_calls import SMALL
from cacheproof.check.programs.run import ProgramOptions, run_program_check, run_program_phases
from cacheproof.cli import main
from cacheproof.cmdline.progress import PLAIN_LINE_SECONDS, Progress
from cacheproof.spec import CacheSpec
from cacheproof.spec.kinds import get_kind
from model_tests.block_pools import ListBlockPool
from model_tests.broken_caches import ClearDropsBusyEntries
from model_tests.cache_checks import KIND as CACHE_KIND, check_cache, snippet
from model_tests.ctrl_c import interruptible_cacheproof, press_ctrl_c, wait_for
from model_tests.snippet_runs import assert_fails_where_it_diverges, snippets_in

REPOSITORY = Path(__file__).resolve().parents[1]
BROKEN = "model_tests.broken_caches:ClearDropsBusyEntries"


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt in this process while the test runs (a background pytest
    inherits it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class InterruptsItsShrinkingCache(ClearDropsBusyEntries):
    """ClearDropsBusyEntries that presses Ctrl-C (a SIGINT to this process) when the `press_at`th
    cache is built after its clear dropped a busy entry (its bug): the checker is then shrinking, by
    Hypothesis or its own. `start_over(press_at)` before each run."""

    misbehaved = False
    built_since = 0
    press_at = 3

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        cls = InterruptsItsShrinkingCache
        if cls.misbehaved:
            cls.built_since += 1
            if cls.built_since == cls.press_at:
                os.kill(os.getpid(), signal.SIGINT)

    def clear(self):
        if any(entry.state.name == "RESERVED" or entry.refcount > 0 for entry in self.snapshot()):
            InterruptsItsShrinkingCache.misbehaved = True
        super().clear()

    @classmethod
    def start_over(cls, press_at: int) -> None:
        cls.misbehaved, cls.built_since, cls.press_at = False, 0, press_at


@pytest.mark.parametrize("hypothesis_shrinks", [True, False], ids=["hypothesis-shrinking", "own-shrinking"])
def test_ctrl_c_while_shrinking_reports_the_smallest_failing_sequence_so_far(hypothesis_shrinks, ctrl_c_raises):
    lengths: list[int] = []
    InterruptsItsShrinkingCache.start_over(3)
    report = run_program_phases(CACHE_KIND, InterruptsItsShrinkingCache, (Phase(SMALL, 200, 100, hypothesis_shrinks),),
                                ProgramOptions(max_divergences=8, on_shrink=lambda found_at, length: lengths.append(length)))
    assert InterruptsItsShrinkingCache.built_since >= 3, "Ctrl-C was pressed: the run shrank"
    assert not report.ok and report.interrupted and report.shrinking_interrupted
    example = report.counterexamples[-1]
    assert example.message.endswith("(shrinking interrupted)"), example.message
    assert len(example.calls) <= lengths[0], "no longer than the failing sequence shrinking started from"
    assert example.difference is not None and example.difference.views, "replayed: every difference at the diverging call"
    assert_fails_where_it_diverges(snippet(example, BROKEN))


def test_the_same_run_uninterrupted_shrinks_further_than_the_interrupted_one(ctrl_c_raises):
    """The interrupted report is the sequence shrinking had reached, not a finished shrink."""
    InterruptsItsShrinkingCache.start_over(2)
    interrupted = check_cache(InterruptsItsShrinkingCache).counterexample
    finished = check_cache(ClearDropsBusyEntries).counterexample
    assert len(finished.calls) < len(interrupted.calls)
    assert "shrinking interrupted" not in finished.message


def test_ctrl_c_while_searching_for_further_divergences_reports_those_found(ctrl_c_raises):
    events: list[str] = []

    def on_shrink(found_at, length):
        events.append("shrinking")

    def on_example(examples, steps):  # not called while shrinking: after a shrink, the further search
        if events and "pressed" not in events:
            events.append("pressed")
            os.kill(os.getpid(), signal.SIGINT)

    report = check_cache(ClearDropsBusyEntries, on_shrink=on_shrink, on_example=on_example, max_divergences=8)
    assert "pressed" in events, "Ctrl-C was pressed once the first divergence was shrunk"
    assert report.interrupted and not report.shrinking_interrupted and not report.ok
    assert "shrinking interrupted" not in report.counterexample.message
    assert_fails_where_it_diverges(snippet(report.counterexample, BROKEN))


def test_ctrl_c_before_any_failure_still_has_no_verdict(ctrl_c_raises, monkeypatch, tmp_path, capsys):
    """Through the program pipeline's API (no report: the Ctrl-C propagates) and `cacheproof check`
    (exit 130, the counts of the examples run, a report whose verdict is null)."""
    counted: list[int] = []

    def on_example(examples, steps):
        counted.append(examples)
        if examples == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        check_cache(CacheSpec, on_example=on_example)
    assert counted[:2] == [1, 2]  # the search runs in a worker thread: it may have begun one more example
    update = Progress.update

    def update_then_ctrl_c(progress, examples, steps):
        update(progress, examples, steps)
        if examples == 2:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Progress, "update", update_then_ctrl_c)
    path = tmp_path / "report.json"
    assert main(["check", "--json", str(path)]) == 130
    said = re.search(r"interrupted: (\d+) examples, ", capsys.readouterr().out)
    report = json.loads(path.read_text())
    # The Ctrl-C came at the second example's count, from the worker thread, which may finish the
    # example it began before the main thread takes the signal and stops it: 2 or more, the same
    # count in the line and in the report.
    assert said is not None and int(said.group(1)) == report["examples"] >= 2, report
    assert report["ok"] is None and report["divergences"] == [], report


def test_cacheproof_check_interrupted_while_shrinking_exits_1_with_a_failing_snippet(tmp_path):
    """The command, a real SIGINT: the progress says it is shrinking, then the Ctrl-C."""
    report, errors = tmp_path / "r.json", tmp_path / "stderr"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            interruptible_cacheproof("check", "--impl", "model_tests.faulty_caches:SlowToShrink", "--steps", "40",
                                     "--json", str(report)),
            cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
        try:
            wait_for(lambda: "shrinking (" in errors.read_text(), 60, "the progress line of shrinking", process)
            out, _ = press_ctrl_c(process)
        finally:
            process.kill()
    progress = errors.read_text()
    assert process.returncode == 1, out + progress
    assert "check: searching: 0/200 examples" in progress
    assert "check: divergence found at example " in progress and ", shrinking (" in progress
    assert "shrinking interrupted by Ctrl-C: the last counterexample" in out
    [verdict] = [line for line in out.splitlines() if line.startswith("counterexample (")]
    assert verdict.endswith("(shrinking interrupted)"), verdict
    [snippet] = snippets_in(out)
    assert_fails_where_it_diverges(snippet)
    written = json.loads(report.read_text())
    assert written["ok"] is False and written["shrinking_interrupted"] is True
    assert written["divergences"][0]["message"].endswith("(shrinking interrupted)")


def test_progress_off_a_terminal_prints_each_phase_change_and_then_every_ten_seconds():
    now = [0.0]
    stream = io.StringIO()
    progress = Progress("check", 200, stream=stream, clock=lambda: now[0])
    with progress:
        for done in range(5):  # searching, all within the first second: one line
            now[0] += 0.1
            progress.update(done, done * 100)
        now[0] = PLAIN_LINE_SECONDS + 1
        progress.update(6, 600)  # ten seconds on: a line
        progress.shrinking(7, 40)  # a phase change: a line at once
        now[0] += 3
        progress.shrinking(7, 12)  # within ten seconds: none
        now[0] += PLAIN_LINE_SECONDS
        progress.shrinking(7, 5)
        progress.update(8, 960)  # further search: a line at once
    assert stream.getvalue().splitlines() == [
        "check: searching: 0/200 examples, 0 steps, 0 steps/s",
        "check: searching: 6/200 examples, 600 steps, 55 steps/s",
        "check: divergence found at example 7, shrinking (40 calls, 0.0 s)",
        "check: divergence found at example 7, shrinking (5 calls, 13.0 s)",
        "check: searching for further divergences: 8/200 examples, 960 steps, 40 steps/s",
    ]


def test_quiet_progress_prints_nothing():
    stream = io.StringIO()
    with Progress("check", 10, quiet=True, stream=stream) as progress:
        progress.update(1, 10)
        progress.shrinking(1, 3)
    assert stream.getvalue() == ""


class InterruptsItsShrinkingPool(ListBlockPool):
    """A pool whose reset answers the opposite of the truth, and presses Ctrl-C (a SIGINT to this
    process) when the third pool is built after one was reset (its bug): the checker is then
    shrinking, by Hypothesis or its own. `start_over()` before each run."""

    misbehaved = False
    built_since = 0

    def __init__(self, num_blocks: int) -> None:
        super().__init__(num_blocks)
        if InterruptsItsShrinkingPool.misbehaved:
            InterruptsItsShrinkingPool.built_since += 1
            if InterruptsItsShrinkingPool.built_since == 3:
                os.kill(os.getpid(), signal.SIGINT)

    def reset(self):
        InterruptsItsShrinkingPool.misbehaved = True
        return not super().reset()

    @classmethod
    def start_over(cls) -> None:
        cls.misbehaved, cls.built_since = False, 0


class _WrongResetPool(ListBlockPool):
    """The same bug without the Ctrl-C, to replay the report's counterexample on."""

    def reset(self):
        return not super().reset()


@pytest.mark.parametrize("seeded", [False, True], ids=["hypothesis-shrinking", "own-shrinking"])
def test_every_kind_reports_the_smallest_failing_program_so_far_on_ctrl_c_while_shrinking(seeded, ctrl_c_raises):
    """Issue 32: the program pipeline (here the block pool's) keeps a failure a Ctrl-C interrupts."""
    kind, lengths = get_kind("blocks"), []
    InterruptsItsShrinkingPool.start_over()
    report = run_program_check(kind, InterruptsItsShrinkingPool, generator_for("blocks"), examples=200, steps=40,
                               seed=0, seeded=seeded, on_shrink=lambda found_at, length: lengths.append(length))
    assert InterruptsItsShrinkingPool.built_since >= 3, "Ctrl-C was pressed"
    assert not report.ok and report.interrupted and report.shrinking_interrupted
    example = report.counterexamples[-1]
    assert example.message.endswith("(shrinking interrupted)"), example.message
    assert len(example.calls) <= lengths[0], "no longer than the failing program shrinking started from"
    setup = ProgramSetup(kind, kind.new, _WrongResetPool, generator_for("blocks"), kind.names, True, 40)
    step, difference = program_failure(setup, example.size, example.calls, None)
    assert step.step == len(example.calls) - 1 and divergence_kind(difference) == divergence_kind(example.difference)


def test_cacheproof_check_of_any_kind_interrupted_while_shrinking_exits_1_with_a_failing_snippet(
        tmp_path, capsys, ctrl_c_raises):
    InterruptsItsShrinkingPool.start_over()
    report = tmp_path / "r.json"
    status = main(["check", "--spec", "blocks", "--impl", f"{__name__}:InterruptsItsShrinkingPool",
                   "--examples", "200", "--max-divergences", "1", "--json", str(report)])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "shrinking interrupted by Ctrl-C: the last counterexample" in out
    [verdict] = [line for line in out.splitlines() if line.startswith("counterexample (")]
    assert verdict.endswith("(shrinking interrupted)"), verdict
    written = json.loads(report.read_text())
    assert written["ok"] is False and written["interrupted"] is True and written["shrinking_interrupted"] is True
    assert written["divergences"][0]["message"].endswith("(shrinking interrupted)")
