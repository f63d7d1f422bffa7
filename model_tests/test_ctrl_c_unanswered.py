"""A Ctrl-C the main thread cannot answer still ends the command, with its last words, in time.

The main thread is made deaf, as a `check --threads` run under heavy load once was (issue 31, its
main thread waiting in `Thread.start()` for more than 20 s): SIGINT is blocked in it, so the kernel
hands the signal to another thread, and it then waits in a C call that never comes back to Python
(libc's `pause`, which only a handled signal ends, and the main thread handles none). A wait on a
Python lock would not do: any EINTR there makes CPython run the pending Python handler, so the
main thread would answer after all; it did once under load, and the program then waited on its
child at exit (issue 31). Under
`cacheproof.cmdline.interrupts.ctrl_c_raises` the watch thread ends the process `grace` seconds after
the Ctrl-C: every thread's stack on stderr, the command's partial report (`last_words`), its child
processes ended, exit 130. Without it the same program waits for ever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_tests.ctrl_c import interruptible_cacheproof, wait_for

ROOT = Path(__file__).resolve().parent.parent
GRACE = 1.0

DEAF = (
    "import ctypes, multiprocessing, signal, sys, time\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)  # a background pytest passes SIGINT ignored\n"
    "from cacheproof.cmdline.interrupts import ctrl_c_raises, last_words\n"
    "def deaf():\n"
    "    child = multiprocessing.get_context('spawn').Process(target=time.sleep, args=(60,))\n"
    "    child.start()\n"
    "    print('child', child.pid, flush=True)\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})\n"
    "    print('waiting', flush=True)\n"
    "    ctypes.CDLL(None).pause()\n"
    "if __name__ == '__main__':\n"
    "{use}"
)
WATCHED = ("    with ctrl_c_raises(grace={grace}), last_words(lambda: print('partial report', flush=True)):\n"
           "        deaf()\n")
UNWATCHED = "    deaf()\n"


def _started(code: str, tmp_path: Path) -> tuple[subprocess.Popen, int]:
    """The program running, deaf; and the pid of its child process."""
    script = tmp_path / "deaf.py"
    script.write_text(code)
    process = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = int(process.stdout.readline().split()[1])
    assert process.stdout.readline().strip() == "waiting"
    # Python runs a signal's handler in the main thread at its next bytecode, whichever thread the
    # kernel gave the signal to: a Ctrl-C sent between "waiting" and pause() is answered after all
    # (a fresh-clone CI run saw the KeyboardInterrupt at the print, and the program then waited on
    # its child at exit). So the Ctrl-C waits until the main thread sleeps, inside pause().
    wait_for(lambda: _state(process.pid) == "S", 30.0, "the deaf program's main thread sleeping in pause()", process)
    return process, child


def _state(pid: int) -> str | None:
    """The scheduler state of process `pid`'s main thread (R, S, Z, ...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def test_the_watch_ends_a_command_deaf_to_ctrl_c(tmp_path):
    process, child = _started(DEAF.format(use=WATCHED.format(grace=GRACE)), tmp_path)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = process.communicate(timeout=30)
    took = time.monotonic() - sent
    assert process.returncode == 130, (process.returncode, out, err)
    assert GRACE <= took, took
    assert "partial report" in out, out
    assert f"Ctrl-C not answered within {GRACE:g} s" in err and "in deaf" in err, err
    wait_for(lambda: not _alive(child), 10.0, f"the command's child {child} ending")


def test_without_the_watch_the_same_command_waits_for_ever(tmp_path):
    """The test above can fail: Python's own handling leaves this program waiting."""
    process, child = _started(DEAF.format(use=UNWATCHED), tmp_path)
    process.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        process.communicate(timeout=3 * GRACE + 2)
    os.kill(child, signal.SIGKILL)  # first: it holds the program's output open
    process.kill()
    process.communicate()


SWALLOWING_MODULE = (
    "import os, signal\n"
    "from examples.minimal_cache import MinimalCache\n"
    "try:  # as torch's C-level start does when a Ctrl-C lands in its import of numpy\n"
    "    os.kill(os.getpid(), signal.SIGINT)\n"
    "    for _ in range(10000000): pass\n"
    "except KeyboardInterrupt:\n"
    "    pass\n"
)


def test_a_ctrl_c_swallowed_while_the_factory_loads_still_ends_the_check(tmp_path):
    """Loading the factory holds a Ctrl-C (`ctrl_c_held`) and raises it after: the check does not start."""
    (tmp_path / "swallowing.py").write_text(SWALLOWING_MODULE)
    done = subprocess.run(interruptible_cacheproof("check", "--impl", "swallowing:MinimalCache", "--examples", "20"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 130 and "interrupted" in done.stderr, (done.returncode, done.stdout, done.stderr)
    assert "conforms" not in done.stdout and "not answered" not in done.stderr, (done.stdout, done.stderr)


@pytest.mark.parametrize("under_ctrl_c_raises", [False, True])
def test_a_ctrl_c_while_the_factory_imports_is_raised_after_the_import(under_ctrl_c_raises, monkeypatch):
    """A KeyboardInterrupt raised inside torch's import aborts the process (its pybind11 module start
    throws a C++ exception that nothing catches: exit -6, found by a CI run under load); so the
    import runs to its end and the Ctrl-C is raised after it, under Python's handler and the
    command's alike. The signal is sent from inside the import, so its moment is forced."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from cacheproof.cmdline.interrupts import ctrl_c_raises
    from cacheproof.sandbox import factories

    finished = []

    def importing(name):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100000):  # Python code runs on: an unheld Ctrl-C is raised here
            pass
        finished.append(name)
        return SimpleNamespace(factory=lambda size: None)

    monkeypatch.setattr(factories.importlib, "import_module", importing)
    with ctrl_c_raises() if under_ctrl_c_raises else nullcontext():
        with pytest.raises(KeyboardInterrupt):
            factories.load_factory("anywhere:factory")
        assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    assert finished == ["anywhere"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


DEAF_SUPERVISOR_MODULE = (
    "import ctypes, signal, sys\n"
    "from cacheproof.sandbox import guarded_call\n"
    "from examples.minimal_cache import MinimalCache\n"
    "ended = guarded_call._ended\n"
    "def deaf(piece, seconds):  # the main thread supervising the search stops answering, as under load\n"
    "    if piece.work.__name__ != 'search':  # the probe of the factory\n"
    "        return ended(piece, seconds)\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
    "    print('deaf', file=sys.stderr, flush=True)\n"
    "    ctypes.CDLL(None).pause()\n"
    "guarded_call._ended = deaf\n"
)


def test_a_check_whose_main_thread_cannot_answer_still_writes_its_partial_report(tmp_path):
    """The program check's last words are its partial report: a Ctrl-C its main thread never
    answers still ends it with exit 130 and a report with no verdict (the watch writes it)."""
    (tmp_path / "deaf_supervisor.py").write_text(DEAF_SUPERVISOR_MODULE)
    report = tmp_path / "report.json"
    process = subprocess.Popen(
        interruptible_cacheproof("check", "--impl", "deaf_supervisor:MinimalCache", "--examples", "1000000", "--quiet",
                                 "--json", str(report)),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stderr.readline().strip() == "deaf"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and report.exists(), (process.returncode, out, err)
    assert "Ctrl-C not answered within" in err and "interrupted:" in out, (out, err)
    written = json.loads(report.read_text())
    assert written["ok"] is None and written["interrupted"] is True and written["divergences"] == [], written
