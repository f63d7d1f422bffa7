"""Hunt for a Ctrl-C that `cacheproof check --threads` does not answer (issue 31).

Runs `check --threads 2` on model_tests.racy_caches:LockedCacheSpec under `-X faulthandler`,
sends SIGINT to the command alone at a random moment 0.6-1.6 s after its start, and, when it has
not exited 20 s later, prints the native stacks (gdb, where installed), each thread's signal masks
and whether the process still burns CPU, then sends SIGABRT so that faulthandler prints every
thread, and kills its process group. Stops at the first hang. Run it with busy processes beside it:

    for k in 1 2 3 4; do python -c "while True: pass" & done
    python tools/ctrl_c_threads_hunt.py 40
    kill %1 %2 %3 %4

It found the Ctrl-C that torch's import clears (docs/robustness.md); since the watch thread of
`cacheproof.cmdline.interrupts` ends an unanswered command after 10 s, a hang now shows as a run
that took 10 s and printed "Ctrl-C not answered" with every thread's stack.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WITH_HANDLER = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); import runpy; "
                "runpy.run_module('cacheproof', run_name='__main__', alter_sys=True)")
COMMAND = ["check", "--impl", "model_tests.racy_caches:LockedCacheSpec", "--examples", "1000000", "--threads", "2",
           "--quiet"]


def _signals_and_cpu(pid: int) -> str:
    """Each thread's pending and blocked signal masks, and the process's CPU ticks 3 s apart: a
    Ctrl-C lost while the command runs on, or one never delivered."""
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    first = ticks()
    time.sleep(3)
    lines = [f"cpu ticks in 3 s: {ticks() - first}"]
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = dict(line.split(":", 1) for line in (task / "status").read_text().splitlines() if ":" in line)
        lines.append(f"task {task.name}: " + " ".join(f"{k}={status[k].strip()}" for k in ("SigPnd", "ShdPnd", "SigBlk")))
    return "\n".join(lines)


def main(tries: int) -> int:
    for number in range(1, tries + 1):
        moment = random.uniform(0.6, 1.6)
        process = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", WITH_HANDLER, *COMMAND], cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(moment)
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            native = subprocess.run(["gdb", "-p", str(process.pid), "-batch", "-iex", "add-auto-load-safe-path /", "-ex", "thread apply all py-bt"],
                                    capture_output=True, text=True).stdout if shutil.which("gdb") else ""
            print(native)
            print(_signals_and_cpu(process.pid))
            process.send_signal(signal.SIGABRT)
            time.sleep(1)
            os.killpg(process.pid, signal.SIGKILL)
            _, err = process.communicate()
            print(f"try {number}: no exit 20 s after Ctrl-C at {moment:.2f} s\n{err}")
            return 1
    print(f"{tries} tries, every run ended")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
