"""The isolated child's pipe is closed once when two threads close it (issue 31: a Ctrl-C's clean-up in
the main thread and the search's worker thread, after a failed call, both closed it; the second close
found the descriptor gone, EBADF, and `check --isolate` exited 2 blaming the user's code)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from cacheproof.sandbox import program_isolation


def test_a_second_close_waits_for_the_first(monkeypatch):
    entered, release = threading.Event(), threading.Event()
    inside: list[str] = []

    def end_child(process, connection):
        inside.append(threading.current_thread().name)
        if len(inside) == 1:
            entered.set()
            release.wait(10)

    monkeypatch.setattr(program_isolation, "end_child", end_child)
    child = program_isolation._Child.__new__(program_isolation._Child)
    child.process, child.connection, child._closing = SimpleNamespace(), SimpleNamespace(), threading.Lock()
    first = threading.Thread(target=child.close, name="worker")
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=child.close, name="main")
    second.start()
    second.join(0.5)
    assert inside == ["worker"] and second.is_alive(), "the second close entered while the first was closing"
    release.set()
    first.join(10)
    second.join(10)
    assert inside == ["worker", "main"]
