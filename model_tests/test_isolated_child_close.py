"""The isolated child's pipe is closed once when two threads close it (issue 31: a Ctrl-C's clean-up in
the main thread and the search's worker thread, after a failed call, both closed it; the second close
found the descriptor gone, EBADF, and `check --isolate` exited 2 blaming the user's code), and not
while a request is under way: the CI run of 2026-12-07 found the 4-byte length and pickle of a
request written into the report log, which had taken the descriptor's number after the main
thread's clean-up closed the pipe under the worker thread's send."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from cacheproof.sandbox import program_isolation
from cacheproof.sandbox.guarded_call import Watch


def test_a_second_close_waits_for_the_first(monkeypatch):
    entered, release = threading.Event(), threading.Event()
    inside: list[str] = []

    def end_child(process):
        inside.append(threading.current_thread().name)
        if len(inside) == 1:
            entered.set()
            release.wait(10)

    monkeypatch.setattr(program_isolation, "end_child", end_child)
    child = program_isolation._Child.__new__(program_isolation._Child)
    child.process, child.connection, child._closing = SimpleNamespace(), SimpleNamespace(close=lambda: None), threading.Lock()
    child._requests, child._ended = 0, False
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


class _BlockingPipe:
    """A pipe whose send waits for `release`, recording the order of sends and closes."""

    def __init__(self) -> None:
        self.sending, self.release, self.happened = threading.Event(), threading.Event(), []

    def send(self, request):
        self.sending.set()
        self.release.wait(10)
        self.happened.append("send")
        raise BrokenPipeError  # the child was killed meanwhile

    def close(self):
        self.happened.append("close")


def test_a_close_during_a_request_leaves_the_pipe_to_the_request(monkeypatch):
    monkeypatch.setattr(program_isolation, "end_child", lambda process: None)
    child = program_isolation._Child.__new__(program_isolation._Child)
    pipe = _BlockingPipe()
    child.process = SimpleNamespace(join=lambda timeout: None, exitcode=-9)
    child.connection, child._closing, child._requests, child._ended = pipe, threading.Lock(), 0, False
    child.watch = Watch(timeout=1.0)
    failures: list[BaseException] = []

    def worker():
        try:
            child.request(("get", (1,), {}), "get", (1,), 1.0)
        except BaseException as error:  # noqa: BLE001 - the test reads what the request raised
            failures.append(error)

    sender = threading.Thread(target=worker, name="worker")
    sender.start()
    assert pipe.sending.wait(10)
    child.close()  # the main thread's clean-up, as the worker sends
    assert pipe.happened == [], "the pipe was closed under a request still sending on it"
    pipe.release.set()
    sender.join(10)
    assert pipe.happened == ["send", "close"]
    assert [type(error).__name__ for error in failures] == ["CacheFault"]
