"""A Ctrl-C that Python hands to its handler inside a finalizer (a gc callback, as Hypothesis
installs one, or a `__del__`) still ends the command: the handler of `cacheproof.cmdline.interrupts`
sends it again once outside, where Python's own would raise there and have it printed as "Exception
ignored" and lost (seen in CI: `bench cache` ran on after a Ctrl-C that landed in Hypothesis's
gc_callback). It does so without a thread or a lock: a collection may start while the interrupted
code holds threading's shutdown lock (`Thread.join` does), and a thread started from the handler
then never starts (the `check --threads` hang of issue 31, forced here by holding that lock)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from model_tests.ctrl_c import interruptible_python

ROOT = Path(__file__).resolve().parent.parent

GC_PRESSED = (
    "def pressed(phase, info):\n"
    "    if phase == 'start':\n"
    "        os.kill(os.getpid(), signal.SIGINT)\n"
    "        for _ in range(10000): pass  # the handler runs here, inside the callback\n"
    "def finalize():\n"
    "    gc.callbacks.append(pressed)\n"
    "    try:\n"
    "{collect}"
    "    finally:\n"
    "        gc.callbacks.remove(pressed)\n"
)

PRESSED_IN = {
    "gc callback": GC_PRESSED.format(collect="        gc.collect()\n"),
    "gc callback while threading's shutdown lock is held": GC_PRESSED.format(
        collect="        with threading._shutdown_locks_lock:  # as Thread.join holds it when a collection starts\n"
                "            gc.collect()\n"),
    "weakref callback": (
        "class Member:\n"
        "    pass\n"
        "def pressed(dead):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    for _ in range(10000): pass  # the handler runs here, inside the callback (as a WeakSet's _remove)\n"
        "def finalize():\n"
        "    member = Member()\n"
        "    watched = weakref.ref(member, pressed)\n"
        "    del member\n"
    ),
    "__del__": (
        "class Pressed:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(10000): pass  # the handler runs here, inside __del__\n"
        "def finalize():\n"
        "    Pressed()\n"
    ),
}

RUN = (
    "import gc, os, signal, threading, time, weakref\n"
    "from cacheproof.cmdline.interrupts import ctrl_c_raises\n"
    "{pressed}"
    "{use}"
    "    try:\n"
    "        finalize()\n"
    "        time.sleep(20)\n"
    "        print('lost')\n"
    "    except KeyboardInterrupt:\n"
    "        print('interrupted')\n"
)


@pytest.mark.parametrize("where", sorted(PRESSED_IN))
def test_a_ctrl_c_in_a_finalizer_is_not_lost(where):
    code = RUN.format(pressed=PRESSED_IN[where], use="with ctrl_c_raises():\n")
    done = subprocess.run(interruptible_python(code), cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == "interrupted" and "Exception ignored" not in done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("where", sorted(PRESSED_IN))
def test_pythons_own_handler_loses_it_there(where):
    """The test above can fail: without the handler the same Ctrl-C is printed and lost."""
    code = RUN.format(pressed=PRESSED_IN[where], use="if True:\n").replace("time.sleep(20)", "time.sleep(1)")
    done = subprocess.run(interruptible_python(code), cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert done.stdout.strip() == "lost" and "Exception ignored" in done.stderr, done.stdout + done.stderr
