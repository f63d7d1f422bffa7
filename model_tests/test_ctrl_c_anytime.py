"""Ctrl-C at any moment of any run ends it in time, with its partial report, and leaves no process.

Twenty moments, drawn once from a fixed seed, spread over the first seconds of a run (loading the
modules, starting workers or the isolated child, searching, shrinking), each in one of the modes
below, in turn sent to the command alone (a `kill -INT`) or to its whole process group (a terminal's
Ctrl-C, which reaches the workers and the isolated child too). The machine is loaded meanwhile: one
busy process per core runs beside the command. Each run must:
- exit within EXIT_SECONDS of the signal: 130 ("interrupted"), or 1 when a counterexample had been
  found and is reported as the signal stopped its shrinking or the search for further ones;
- write its partial JSON report once the run had started (it printed "interrupted: ..."); a signal
  that arrives while the command is still loading its modules ends it with one line on stderr and no
  report (docs/robustness.md), and one that arrives while the interpreter itself starts, before
  cacheproof's entry point runs, ends it as it ends any Python program (killed by SIGINT);
- leave no process of its session alive (workers, the isolated child, multiprocessing's helpers).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_tests.ctrl_c import interruptible_cacheproof, wait_for

ROOT = Path(__file__).resolve().parent.parent
EXIT_SECONDS = 20.0
"""A run must have exited this soon after its Ctrl-C, on a machine loaded with one busy process per core."""
LATEST_MOMENT = 6.0
"""The moments are drawn between MOMENT_FLOOR and this many seconds after the command started."""
MOMENT_FLOOR = 0.3
"""Before this, the interpreter may not yet have installed its SIGINT handler (any Python program dies of the signal then)."""
MOMENTS = 20

CONFORMING = "examples.minimal_cache:MinimalCache"
MODES = {
    "search": ["check", "--impl", CONFORMING, "--examples", "1000000"],
    "workers": ["check", "--impl", CONFORMING, "--examples", "1000000", "--workers", "2"],
    "isolate": ["check", "--impl", CONFORMING, "--examples", "1000000", "--isolate"],
    "threads": ["check", "--impl", "model_tests.racy_caches:LockedCacheSpec", "--examples", "1000000", "--threads", "2"],
    "shrinking": ["check", "--impl", "model_tests.broken_caches:ClearDropsBusyEntries", "--examples", "1000000",
                  "--max-divergences", "50"],
    "blocks": ["check", "--spec", "blocks", "--impl", "model_tests.block_pools:ListBlockPool", "--examples", "1000000"],
}


def _plan() -> list:
    """(mode, seconds after the start, whether the whole process group gets the signal), 20 of them."""
    draw = random.Random(31)
    names = sorted(MODES)
    return [(names[index % len(names)], round(draw.uniform(MOMENT_FLOOR, LATEST_MOMENT), 2), index % 2 == 1)
            for index in range(MOMENTS)]


@pytest.fixture(scope="module")
def loaded_machine():
    """One busy process per core for the module's tests."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    yield
    for burner in burners:
        burner.kill()
        burner.wait()


def _session_processes(session: int) -> list[int]:
    """The pids of the live (not zombie) processes whose session is `session`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, sid = fields[0], int(fields[3])
        if sid == session and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("mode,moment,to_group", _plan(), ids=lambda value: str(value))
def test_ctrl_c_at_any_moment_ends_the_run(mode, moment, to_group, tmp_path, loaded_machine):
    report_path = tmp_path / "report.json"
    python, *arguments = interruptible_cacheproof(*MODES[mode], "--json", str(report_path), "--quiet")
    process = subprocess.Popen(
        [python, "-X", "faulthandler", *arguments],  # SIGABRT then prints where every thread of a hung run is
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background pytest passes it ignored
    )
    time.sleep(moment)
    assert process.poll() is None, f"the run ended before its Ctrl-C: {process.communicate()}"
    if to_group:
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = process.communicate(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        time.sleep(1)
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{mode}: no exit {EXIT_SECONDS:g} s after Ctrl-C at {moment} s\n{out}\n{err}")
    took = time.monotonic() - sent
    if process.returncode == -signal.SIGINT:  # Python's own default, before cacheproof's entry point ran
        assert "KeyboardInterrupt" in err and "cacheproof/__main__.py" not in err, err
        return
    assert "interrupted" in out + err, (process.returncode, out, err)
    started = "interrupted:" in out or "shrinking interrupted" in out or "interrupted by Ctrl-C" in out
    if started:
        report = json.loads(report_path.read_text())
        assert report["interrupted"] is True, report
        found = bool(report["divergences"])
        assert process.returncode == (1 if found else 130), (process.returncode, out, err)
        assert report["ok"] is (False if found else None)
    else:
        assert process.returncode == 130 and not report_path.exists(), (process.returncode, out, err)
    wait_for(lambda: not _session_processes(process.pid), 5.0, f"every process of the {mode} run ending "
             f"(left: {_session_processes(process.pid)})")
    print(f"{mode} at {moment} s ({'group' if to_group else 'command'}): exit {process.returncode} in {took:.1f} s")
