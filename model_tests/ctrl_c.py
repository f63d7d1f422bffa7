"""Pressing Ctrl-C on a child process in tests, so that they pass or fail in seconds wherever they run.

A process started in the background by a non-interactive shell (`pytest ... &`, a CI step, nohup)
inherits SIGINT *ignored*, and Python then installs no KeyboardInterrupt handler: a SIGINT sent to
such a child is dropped, and a test that waits for the child to react waits out its whole timeout.
So every child these tests interrupt starts with Python's own handler installed
(`interruptible_python`), and `press_ctrl_c` checks that the child catches SIGINT before sending it
(Linux: /proc/PID/status), then gives it a short deadline to exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

EXIT_SECONDS = 30.0
"""A child must exit this soon after its Ctrl-C (the checker replays one sequence, writes its report)."""

_WITH_HANDLER = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


def interruptible_python(code: str) -> list[str]:
    """argv running `code` in a fresh interpreter that turns SIGINT into KeyboardInterrupt, even when
    this process was started with SIGINT ignored."""
    return [sys.executable, "-c", _WITH_HANDLER + code]


def interruptible_cacheproof(*arguments: str) -> list[str]:
    """argv of `python -m cacheproof ARGUMENTS` that a SIGINT reaches (see `interruptible_python`)."""
    code = "import runpy; runpy.run_module('cacheproof', run_name='__main__', alter_sys=True)"
    return [*interruptible_python(code), *arguments]


def catches_sigint(pid: int) -> bool | None:
    """Whether process `pid` has a handler for SIGINT (None where /proc cannot tell)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), None)
    return None if caught is None else bool(int(caught, 16) >> (signal.SIGINT - 1) & 1)


def press_ctrl_c(process: subprocess.Popen, seconds: float = EXIT_SECONDS) -> tuple[str, str]:
    """Send `process` a SIGINT and return its (stdout, stderr) once it exits; fail at once if it does
    not catch SIGINT, and after `seconds` if it does not exit (the child is killed either way)."""
    handler = catches_sigint(process.pid)
    if handler is False:
        process.kill()
        process.communicate()
        raise AssertionError(f"the child {process.args[:4]} ignores SIGINT: a Ctrl-C cannot reach it")
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"no exit {seconds:g} s after SIGINT\n{out}\n{err}") from None


def wait_for(condition, seconds: float, what: str, process: subprocess.Popen | None = None) -> None:
    """Poll `condition()` every 50 ms for up to `seconds`; fail naming `what` (and the child's
    output, if it exited first)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"the child exited ({process.returncode}) before {what}\n{out}\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.05)


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process `pid` has used (0 once it is gone): what a test waits on
    before its Ctrl-C, so that a loaded machine only makes it take longer."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
