"""`cacheproof mutate` ended by SIGTERM ends the test command it runs, whose process group is its
own, and keeps what it has, as Ctrl-C does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
SUBJECT = "model_tests.mutation_subject"


def _gone(pid: int, seconds: float) -> bool:
    """Whether process `pid` has ended (no longer exists) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_mutate_alone_ends_its_test_command_and_writes_the_report(tmp_path: Path, sent) -> None:
    marker, report = tmp_path / "tests-pid", tmp_path / "duel.json"
    tests = (f"{sys.executable} -c \"import os, pathlib, time; pathlib.Path({str(marker)!r}).write_text(str(os.getpid())); "
             "time.sleep(300)\"")
    command = [sys.executable, "-m", "cacheproof", "mutate", SUBJECT, "--impl", f"{SUBJECT}:CountingCache",
               "--examples", "5", "--tests", tests, "--limit", "2", "--json", str(report), "--quiet"]
    mutate = subprocess.Popen(command, cwd=REPOSITORY, env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()) and mutate.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), mutate.communicate(timeout=30)
        tests_pid = int(marker.read_text())
        mutate.send_signal(sent)  # to mutate alone, not to its group
        _, err = mutate.communicate(timeout=30)
    finally:
        if mutate.poll() is None:
            mutate.kill()
    assert mutate.returncode == 130, err
    assert "interrupted" in err
    assert _gone(tests_pid, 10), "the test command outlived mutate"
    written = json.loads(report.read_text())
    assert written["interrupted"] is True and written["mutants_run"] == 0
