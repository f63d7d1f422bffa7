"""The checker's worker threads (cacheproof.sandbox.worker_threads): a worker that finished its work
runs the next piece, a busy one is never handed a second, and a forked child starts its own."""

from __future__ import annotations

import multiprocessing
import threading

import pytest

from cacheproof.contract.faults import CacheFault
from cacheproof.sandbox import worker_threads
from cacheproof.sandbox.guarded_call import Watch, supervised


def _current_thread() -> threading.Thread:
    return threading.current_thread()


def test_an_idle_worker_runs_the_next_piece_of_work() -> None:
    first = supervised(_current_thread, Watch(None))
    second = supervised(_current_thread, Watch(None))
    assert first is second
    assert first is not threading.main_thread()
    assert worker_threads.is_idle_worker(first) and first.name == worker_threads.IDLE_WORKER_NAME


def test_a_worker_is_named_busy_while_it_works() -> None:
    names = supervised(lambda: (threading.current_thread().name,), Watch(None))
    assert names == (worker_threads.WORKER_NAME,)


def test_an_error_of_the_work_is_raised_in_the_supervising_thread_and_the_worker_serves_on() -> None:
    def fails() -> None:
        raise ValueError("raised in the worker")

    with pytest.raises(ValueError, match="raised in the worker"):
        supervised(fails, Watch(None))
    assert supervised(lambda: 7, Watch(None)) == 7


def test_a_busy_worker_is_handed_no_second_piece() -> None:
    release = threading.Event()
    busy = worker_threads.start(lambda: (release.wait(10), threading.current_thread())[1])
    try:
        other = supervised(_current_thread, Watch(None))
        assert not busy.done.is_set()
    finally:
        release.set()
    assert busy.done.wait(10)
    assert busy.result is not other


def test_a_hung_piece_keeps_its_worker_out_of_the_idle_ones() -> None:
    release = threading.Event()
    watch = Watch(0.2)

    def hangs() -> None:
        watch.begin("snapshot", ())
        release.wait(10)
        watch.end()

    with pytest.raises(CacheFault, match="snapshot"):
        supervised(hangs, watch)
    hung = [thread for thread in threading.enumerate() if thread.name == worker_threads.WORKER_NAME]
    try:
        assert hung, "the hung worker is still running its piece"
        assert supervised(_current_thread, Watch(None)) not in hung
    finally:
        release.set()


def _supervised_in_child(results: multiprocessing.Queue) -> None:
    results.put(supervised(lambda: "ran in the child", Watch(None)))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="fork is POSIX only")
def test_a_forked_child_runs_its_work_in_a_worker_of_its_own() -> None:
    supervised(lambda: None, Watch(None))  # an idle worker in the parent, which the child lacks
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_supervised_in_child, args=(results,))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert results.get(timeout=5) == "ran in the child"


def test_the_refinement_check_forks_beside_an_idle_worker_and_not_beside_a_busy_one(monkeypatch) -> None:
    from cacheproof.prove.cache import refinement

    idle = supervised(_current_thread, Watch(None))
    busy = threading.Thread(name=worker_threads.WORKER_NAME)
    monkeypatch.setattr(refinement.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(refinement.multiprocessing, "get_all_start_methods", lambda: ["fork", "spawn"])
    monkeypatch.setattr(refinement.threading, "enumerate", lambda: [threading.main_thread(), idle])
    assert refinement._may_fork()
    monkeypatch.setattr(refinement.threading, "enumerate", lambda: [threading.main_thread(), idle, busy])
    assert not refinement._may_fork()
