"""Running one side (`cacheproof check`, or the user's test command) against one installed mutant:
a child process in its own process group, ended with its whole group when it outlives its time.

A side kills a mutant when its command exits with any status but 0 (a counterexample, a failing
test, a crash at import: each is the mutant detected) or outlives its time limit (a mutant that
hangs is detected too, and said as "timed out"). Exit 0 is the mutant surviving that side.
cacheproof's side may be several checks (`--impl`, then each `--also-check`), run in order until
one kills (`checks_until_killed`): cacheproof kills the mutant when any of them does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Sequence

KILLED = "killed"
SURVIVED = "survived"
TIMED_OUT = "timed out"
OUTPUT_TAIL = 2000
"""The last characters of a side's output kept in the report (the reason it killed)."""


@dataclass(frozen=True)
class SideResult:
    """What one side did with one mutant: KILLED, SURVIVED or TIMED_OUT, its exit status (None when
    timed out), its seconds and the tail of its output."""

    status: str
    exit_code: int | None
    seconds: float
    output_tail: str

    @property
    def killed(self) -> bool:
        return self.status != SURVIVED

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "exit_code": self.exit_code, "seconds": round(self.seconds, 3),
                "output_tail": self.output_tail}


class ChildProcesses:
    """The child processes running now, so that Ctrl-C or an error ends them all (each with its group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def run(self, command: str | Sequence[str], environment: dict[str, str], timeout: float) -> SideResult:
        """Run `command` (a string: through the shell) with `environment`; TIMED_OUT after `timeout` s."""
        started = time.monotonic()
        with self._lock:
            if self._stopped:
                raise KeyboardInterrupt
            child = subprocess.Popen(command, shell=isinstance(command, str), env=environment,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
            self._running.add(child)
        try:
            output, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(child)
            output, _ = child.communicate()
            return SideResult(TIMED_OUT, None, time.monotonic() - started, _tail(output))
        finally:
            _end_group(child)
            with self._lock:
                self._running.discard(child)
        status = SURVIVED if child.returncode == 0 else KILLED
        return SideResult(status, child.returncode, time.monotonic() - started, _tail(output))

    def stop(self) -> None:
        """End every running child's group; no new child starts afterwards."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for child in running:
            _end_group(child)


def checks_until_killed(children: ChildProcesses, commands: Sequence[Sequence[str]], environment: dict[str, str],
                        limits: Sequence[float]) -> Iterator[SideResult]:
    """Run the checks `commands` in order with `environment`, each under its own limit, yielding each
    one's result as it ends; stop after the first that kills (the later checks never run)."""
    for command, limit in zip(commands, limits, strict=True):
        result = children.run(list(command), environment, limit)
        yield result
        if result.killed:
            return


def _end_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(output: bytes | None) -> str:
    text = (output or b"").decode(errors="replace")
    return text[-OUTPUT_TAIL:]
