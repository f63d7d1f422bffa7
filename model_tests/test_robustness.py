"""No traceback of cacheproof's own, whatever the input; no cache, however broken, takes the checker down.

Every fault of model_tests/faulty_caches.py must be found, shrunk, and printed as a snippet that
reproduces it. The table of every command against every class of bad input (and its exit status)
is model_tests/test_bad_input_table.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cacheproof.cmdline import output_paths
from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.cmdline.output_paths import OutputPathError, write_atomically
from cacheproof.cli import main
from cacheproof.spec import CacheSpec
from cacheproof.trace.monitor import monitor
from model_tests import faulty_caches
from model_tests.cache_checks import check_cache, snippet as snippet_of
from model_tests.ctrl_c import interruptible_cacheproof, press_ctrl_c, wait_for

FAULTY = "model_tests.faulty_caches"
SPEC = "cacheproof.spec:CacheSpec"
REPOSITORY = Path(__file__).resolve().parents[1]
INTERNAL_FRAME = re.compile(r'File "[^"]*(cacheproof|hypothesis)/[^"]*", line \d+')


def assert_no_internal_traceback(text: str) -> None:
    assert not ("Traceback" in text and INTERNAL_FRAME.search(text)), text


def run_main(argv, capsys) -> tuple[int, str]:
    status = main(argv)
    captured = capsys.readouterr()
    output = captured.err + captured.out  # stdout last: the report ends with its snippet (stderr: progress)
    assert_no_internal_traceback(output)
    return status, output


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a_folder").mkdir()
    trace = tmp_path / "ok.trace"
    trace.write_text('{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 8}\n')
    (tmp_path / "bad.trace").write_text("not json\n")
    return tmp_path


def test_a_bad_output_path_is_reported_before_any_work(folder, capsys, monkeypatch):
    import cacheproof.check.programs.command as command

    monkeypatch.setattr(command, "load_factory", lambda *a, **k: pytest.fail("the factory was loaded"))
    monkeypatch.setattr(command, "run_program_phases", lambda *a, **k: pytest.fail("the run started"))
    status, output = run_main(["check", "--max-divergences", "1", "--impl", SPEC, "--json", f"{folder}/missing/r.json"], capsys)
    assert status == 2
    assert output.strip().count("\n") == 0, "one line naming the path and the problem"
    assert f"{folder}/missing/r.json" in output


def test_reports_are_written_atomically(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("the previous report\n")

    def failing_replace(source, destination):
        raise OSError("disk full")

    monkeypatch.setattr(output_paths.os, "replace", failing_replace)
    with pytest.raises(OutputPathError, match=f"cannot write {re.escape(repr(str(target)))}: disk full"):
        write_atomically(target, "half")
    assert target.read_text() == "the previous report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"], "no temporary file left behind"


def test_written_report_is_readable_by_others(tmp_path, capsys):
    path = tmp_path / "r.json"
    status, _ = run_main(["check", "--max-divergences", "1", "--impl", SPEC, "--examples", "3", "--quiet", "--json", str(path)], capsys)
    assert status == 0
    assert json.loads(path.read_text())["ok"] is True
    assert path.stat().st_mode & 0o044, "group/other may read it, as with a plain write"


def test_monitor_refuses_an_unwritable_trace_path(tmp_path):
    with pytest.raises(OutputPathError, match=re.escape(str(tmp_path / "no" / "t.trace"))):
        monitor(CacheSpec(8), trace_path=tmp_path / "no" / "t.trace")
    with pytest.raises(OutputPathError, match="is a folder"):
        monitor(CacheSpec(8), trace_path=tmp_path)


# Faulty caches --------------------------------------------------------------------------

FOUND = [
    ("EvictHangs", "cache.evict(", "did not return within 0.5 s"),
    ("PopExits", "cache.pop(", "the implementation crashed with SystemExit: 3"),
    ("ClearRaisesKeyboardInterrupt", "cache.clear()", "the implementation crashed with KeyboardInterrupt"),
    ("ReleaseRaisesGeneratorExit", "cache.release(", "the implementation crashed with GeneratorExit: the binding's generator was"),
    ("SnapshotRaises", "snapshot() raised RuntimeError: snapshot lost its iterator, after cache.", ""),
    ("MakeValueRaises", "make_value(", "raised MemoryError: cannot allocate 5 bytes, making a value for cache.put("),
    ("MakeValueHangs", "cache.make_value(5, ", "did not return within 0.5 s, making a value for cache."),
    ("StatsRaises", "stats() raised ValueError: pinned counter out of sync, after cache.", ""),
    ("LenRaises", "len() raised OverflowError: entry count overflowed, after cache.", ""),
    ("ContainsRaises", "0 in cache raised RuntimeError: lookup table corrupted, after cache.", ""),
    ("SnapshotHangs", "cache.snapshot() did not return within 0.5 s, after cache.", ""),
    ("SnapshotRaisesUnprintable", "snapshot() raised _Unprintable: <its str() raised ValueError>, after cache.", ""),
    ("ReleaseFlips", "not deterministic: the same ", "cache.release("),
    ("GetReturnsUncomparable", "cache.get(", "comparing the implementation's outcome with the spec's raised TypeError"),
]


def timeout_for(start: str, detail: str) -> str:
    """Half a second where the row is a hang (the test waits that long); the default 10 s elsewhere, so a
    slow call on a loaded host is not taken for a hang."""
    return "0.5" if "did not return" in start + detail else "10"


@pytest.mark.parametrize("name, start, detail", FOUND, ids=[item[0] for item in FOUND])
def test_each_fault_is_a_counterexample(name, start, detail, tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["check", "--max-divergences", "1", "--impl", f"{FAULTY}:{name}", "--examples", "60", "--call-timeout", timeout_for(start, detail),
            "--json", str(path)]
    status, output = run_main(argv, capsys)
    assert status == 1, output
    line = next(line for line in output.splitlines() if line.startswith("counterexample ("))
    message = line.partition("): ")[2]
    assert message.startswith(start) and detail in message, message
    assert json.loads(path.read_text())["divergences"][0]["calls"]


SHAPES = [
    ("SnapshotReturnsCount", "snapshot() returned 1, which is not a list of entries with key, state, refcount, nbytes, retain"),
    ("StatsReturnsNone", "stats() returned None, which has no field capacity_bytes"),
]
"""An inspection answered in another shape than the contract's: a usage problem (issue 35)."""


@pytest.mark.parametrize("name, said", SHAPES, ids=[item[0] for item in SHAPES])
@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_an_inspection_of_another_shape_is_one_usage_problem(name, said, isolate, tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["check", "--max-divergences", "3", "--impl", f"{FAULTY}:{name}", "--examples", "40", "--json", str(path),
            *(["--isolate"] if isolate else [])]
    status = main(argv)
    captured = capsys.readouterr()
    assert status == 2, captured.out + captured.err  # as every usage error of `check`
    assert "counterexample (" not in captured.out and not path.exists()
    problem = captured.err.strip().splitlines()[-1]
    assert problem.startswith(f"cacheproof check: {FAULTY}:{name}: {said}") and "A usage problem, not a divergence" in problem


def test_a_hang_is_shrunk_to_the_calls_that_hang(tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["check", "--max-divergences", "1", "--impl", f"{FAULTY}:EvictHangs", "--call-timeout", "0.5", "--json", str(path), "--quiet"]
    status, output = run_main(argv, capsys)
    assert status == 1
    calls = json.loads(path.read_text())["divergences"][0]["calls"]
    assert [call["op"] for call in calls][-1] == "evict"
    assert len(calls) == 2, "one call to make the cache non-empty, then the evict that hangs"


def _snippet(output: str) -> str:
    return output[output.index("# cacheproof counterexample"):]


def _run_snippet(snippet: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", snippet], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=timeout)


def test_the_snippet_of_a_hang_hangs(capsys):
    _, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:EvictHangs", "--call-timeout", "0.5"], capsys)
    with pytest.raises(subprocess.TimeoutExpired):
        _run_snippet(_snippet(output), timeout=3)


def test_the_snippet_of_an_exit_exits(capsys):
    _, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:PopExits", "--call-timeout", "10"], capsys)
    assert _run_snippet(_snippet(output), timeout=60).returncode == 3


def test_the_snippet_of_a_malformed_result_prints_it():
    example = check_cache(faulty_caches.StatsReturnsNone, seed=0).counterexample
    assert example.message.startswith("stats() returned None, which has no field capacity_bytes, after "), example.message
    snippet = snippet_of(example, f"{FAULTY}:StatsReturnsNone")
    assert snippet.rstrip().endswith("print(cache.stats())  # <- returns what the contract does not allow"), snippet
    run = _run_snippet(snippet, timeout=60)
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1] == "None", run.stdout + run.stderr


@pytest.mark.parametrize("name, error, ending", [
    ("SnapshotRaises", "snapshot lost its iterator", "cache.snapshot()  # <- raises"),
    ("ContainsRaises", "lookup table corrupted", "0 in cache  # <- raises"),
])
def test_the_snippet_of_a_failing_inspection_raises_there(name, error, ending, capsys):
    _, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:{name}"], capsys)
    snippet = _snippet(output)
    assert snippet.rstrip().endswith(ending), snippet
    with pytest.raises(RuntimeError, match=error):
        exec(compile(snippet, "<counterexample>", "exec"), {})


def test_the_snippet_of_a_hanging_inspection_hangs_there(capsys):
    _, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:SnapshotHangs", "--call-timeout", "0.5"], capsys)
    snippet = _snippet(output)
    assert snippet.rstrip().endswith("cache.snapshot()  # <- does not return"), snippet
    with pytest.raises(subprocess.TimeoutExpired):
        _run_snippet(snippet, timeout=3)
    calls_only = snippet.rstrip().rpartition("\n")[0] + "\n"
    assert _run_snippet(calls_only, timeout=60).returncode == 0, "the calls alone return: the inspection hangs"


def test_a_factory_failing_on_its_fifth_call_is_a_usage_error_with_the_users_traceback(capsys, monkeypatch):
    monkeypatch.setattr(faulty_caches.fails_on_fifth_call, "calls", 0)
    status, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:fails_on_fifth_call"], capsys)
    assert status == 2
    assert "raised OSError: out of device handles (on its call number 5; the 4 before it succeeded)" in output
    assert "faulty_caches.py" in output and "Flaky" not in output


def test_replay_reports_a_hang_as_a_divergence(tmp_path, capsys):
    trace = tmp_path / "hang.trace"
    calls = [Call("put", (1, ValueRecipe(2, 0))), Call("evict", (8,))]
    trace.write_text(trace_text(spec_trace(8, calls)))
    argv = ["replay", str(trace), "--impl", f"{FAULTY}:EvictHangs", "--call-timeout", "0.5"]
    status, output = run_main(argv, capsys)
    assert status == 1
    assert "divergence at step 2" in output and "cache.evict(8) did not return within 0.5 s" in output


@pytest.mark.parametrize("name, message", [
    ("GetReturnsUncomparable", "comparing the implementation's outcome with the spec's raised TypeError"),
    ("SnapshotRaises", "snapshot() raised RuntimeError: snapshot lost its iterator"),
])
def test_replay_reports_the_users_code_failing_as_a_divergence(name, message, tmp_path, capsys):
    trace = tmp_path / "t.trace"
    calls = [Call("put", (1, ValueRecipe(1, 0))), Call("put", (2, ValueRecipe(1, 0))), Call("get", (1,))]
    trace.write_text(trace_text(spec_trace(8, calls)))
    status, output = run_main(["replay", str(trace), "--impl", f"{FAULTY}:{name}"], capsys)
    assert status == 1
    assert message in output


@pytest.mark.parametrize("isolation", [[], ["--isolate"]], ids=["in-process", "isolated"])
def test_ctrl_c_stops_check_with_a_partial_report(isolation, tmp_path):
    marker = tmp_path / "started"
    environment = dict(os.environ, CACHEPROOF_SLOW_MARKER=str(marker))
    process = subprocess.Popen(
        interruptible_cacheproof("check", "--max-divergences", "1", "--impl", f"{FAULTY}:SlowCache",
                                 "--json", str(tmp_path / "r.json"), *isolation),
        cwd=REPOSITORY, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(marker.exists, 60, "the cache's first call", process)
        out, err = press_ctrl_c(process)
    finally:
        process.kill()
    assert_no_internal_traceback(out + err)
    assert process.returncode == 130, out + err
    assert re.search(r"interrupted: \d+ examples, \d+ steps in [\d.]+ s; no verdict", out)
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["interrupted"] is True and report["ok"] is None


# --isolate ------------------------------------------------------------------------------

ISOLATED = [
    ("GetSegfaults", "cache.get(", "killed the process running the cache (signal SIGSEGV, segmentation fault)"),
    ("GetAborts", "cache.get(", "killed the process running the cache (signal SIGABRT, aborted)"),
    ("PutKilled", "cache.put(", "killed the process running the cache (signal SIGKILL, killed; an out-of-memory kill"),
    ("SnapshotHangs", "cache.snapshot() did not return within 0.5 s (its process was killed), after cache.", ""),
    ("ContainsRaises", "0 in cache raised RuntimeError: lookup table corrupted, after cache.", ""),
    ("PutExitsHard", "cache.put(", "killed the process running the cache (exit status 7)"),
    ("EvictHangs", "cache.evict(", "did not return within 0.5 s (its process was killed)"),
    ("PopExits", "cache.pop(", "the implementation crashed with SystemExit: 3"),
    ("SnapshotRaises", "snapshot() raised RuntimeError: snapshot lost its iterator, after cache.", ""),
    ("MakeValueRaises", "make_value(5, ", "raised MemoryError: cannot allocate 5 bytes, making a value for"),
    # the parent sees the child's line of the snippet hang, not which of make_value and the call it was in
    ("MakeValueHangs", "cache.put(", "did not return within 0.5 s (its process was killed)"),
    ("SnapshotRaisesUnprintable", "snapshot() raised _Unprintable: <its str() raised ValueError>, after cache.", ""),
]


@pytest.mark.parametrize("name, start, detail", ISOLATED, ids=[item[0] for item in ISOLATED])
def test_each_fault_is_a_counterexample_under_isolation(name, start, detail, tmp_path, capsys):
    path = tmp_path / "r.json"
    argv = ["check", "--max-divergences", "1", "--impl", f"{FAULTY}:{name}", "--isolate", "--examples", "40", "--call-timeout", timeout_for(start, detail),
            "--json", str(path)]
    status, output = run_main(argv, capsys)
    assert status == 1, output
    line = next(line for line in output.splitlines() if line.startswith("counterexample ("))
    message = line.partition("): ")[2]
    assert message.startswith(start) and detail in message, message
    assert len(json.loads(path.read_text())["divergences"][0]["calls"]) <= 2, "shrunk, each attempt in a fresh child"


@pytest.mark.parametrize("name, ending", [
    ("GetSegfaults", -signal.SIGSEGV), ("GetAborts", -signal.SIGABRT), ("PutKilled", -signal.SIGKILL),
    ("PutExitsHard", 7),
])
def test_the_snippet_of_a_crash_crashes(name, ending, capsys):
    _, output = run_main(["check", "--max-divergences", "1", "--impl", f"{FAULTY}:{name}", "--isolate", "--examples", "40"], capsys)
    assert _run_snippet(_snippet(output), timeout=60).returncode == ending


@pytest.mark.parametrize("impl", [SPEC, "cacheproof.bench.cache:tensor_cache_on_cpu"])
def test_a_correct_cache_conforms_under_isolation(impl, capsys):
    status, output = run_main(["check", "--max-divergences", "1", "--impl", impl, "--isolate", "--examples", "15", "--quiet"], capsys)
    assert status == 0, output


def test_a_broken_cache_is_found_under_isolation_and_its_counterexample_replays(tmp_path, capsys):
    from cacheproof.contract import calls as call_format
    from cacheproof.contract.sequence import first_divergence
    from model_tests.broken_caches import GetDoesNotPromote

    path = tmp_path / "r.json"
    argv = ["check", "--max-divergences", "1", "--impl", "model_tests.broken_caches:GetDoesNotPromote", "--isolate", "--json", str(path)]
    status, output = run_main(argv, capsys)
    assert status == 1, output
    counterexample = json.loads(path.read_text())["divergences"][0]
    calls = [call_format.from_json(call) for call in counterexample["calls"]]
    found = first_divergence(GetDoesNotPromote, counterexample["size"], calls)
    assert found is not None and found.step == len(calls) - 1
    assert first_divergence(CacheSpec, counterexample["size"], calls) is None


@pytest.mark.parametrize("impl, message", [
    (f"{FAULTY}:returns_none", "returned None"),
    (f"{FAULTY}:NoEvict", "returned a NoEvict, which lacks evict, pop, clear"),
    ("no_such_module_at_all:factory", "cannot import module 'no_such_module_at_all'"),
    ("missing-colon", "must look like MODULE:FACTORY"),
])
def test_factory_problems_are_usage_errors_under_isolation(impl, message, capsys):
    status, output = run_main(["check", "--max-divergences", "1", "--impl", impl, "--isolate"], capsys)
    assert status == 2, output
    assert message in output


def _users_helper_that_fails():
    raise LookupError("a registry the user's module reads at run time")


def test_an_exception_from_the_users_code_that_nothing_attributes_is_a_usage_error(capsys):
    from cacheproof.cli import _users_error

    try:
        _users_helper_that_fails()
    except LookupError as error:
        assert _users_error("check", error) == 2
    err = capsys.readouterr().err
    assert "cacheproof check: your code raised LookupError: a registry the user's module reads" in err
    assert "_users_helper_that_fails" in err
    assert_no_internal_traceback(err)


def test_an_exception_from_cacheproofs_own_code_is_not_hidden():
    from cacheproof.cmdline.flag_types import any_integer
    from cacheproof.cli import _users_error

    with pytest.raises(Exception) as caught:
        any_integer("x")
    with pytest.raises(type(caught.value)):
        _users_error("check", caught.value)


def test_shrinking_a_hang_stops_when_its_time_budget_runs_out(monkeypatch):
    """Each attempt that hangs costs a whole call timeout; shrinking stops at its budget, and so
    takes at most the budget plus one attempt, with the shortest failing sequence found so far."""
    from cacheproof.sandbox import fault_search
    from cacheproof.sandbox.fault_search import HANG, Failure, shrink_failure

    clock = [0.0]
    monkeypatch.setattr(fault_search.time, "monotonic", lambda: clock[0])
    attempts = []

    def attempt(candidate):  # every candidate still hangs at its last call, after a 1 s timeout
        attempts.append(len(candidate))
        clock[0] += 1.0
        return Failure(len(candidate) - 1, "cache.evict(1) did not return within 1 s", HANG)

    calls = [Call("put", (key, ValueRecipe(1, 0))) for key in range(64)]
    shrunk, found, cut_short = shrink_failure(attempt, calls, Failure(63, "hang", HANG), seconds=5.0)
    assert cut_short and found.kind == HANG
    assert len(attempts) <= 6 and clock[0] <= 5.0 + 1.0, "the budget plus at most one attempt"
    assert len(shrunk) < len(calls), "what was shrunk before the budget ran out is kept"

    clock[0], attempts[:] = 0.0, []
    shrunk, _, cut_short = shrink_failure(attempt, calls, Failure(63, "hang", HANG), seconds=1000.0)
    assert not cut_short and len(shrunk) == 1, "with time enough, the hang shrinks to the one call"


def test_shrinking_simplifies_the_arguments_of_the_calls_it_keeps():
    """After dropping calls, shrinking drops tuple elements and lowers ints, never below 1, while the
    failure holds at the same operation: here a lookup fails when its tuple holds a 7 and its count
    is 3 or more, so the smallest is (7,) and 3; the recipe's 9 bytes drop to the 5 a put must
    have, its key and tag to 1. A candidate failing at another operation is not kept."""
    from cacheproof.sandbox.fault_search import DIVERGENCE, Failure, shrink_failure

    def attempt(candidate):
        for step, call in enumerate(candidate):
            if call.op == "lookup" and 7 in call.args[0] and call.args[1] >= 3:
                return Failure(step, "lookup", DIVERGENCE)
            if call.op == "put" and call.args[1].nbytes >= 5:
                return Failure(step, "put", DIVERGENCE)
        return None

    lookup = [Call("get", (1,)), Call("lookup", ((4, 7, 2, 7), 40))]
    assert shrink_failure(attempt, lookup, Failure(1, "lookup", DIVERGENCE), 60.0)[0] == [Call("lookup", ((7,), 3))]
    put = [Call("put", (3, ValueRecipe(9, 4)))]
    assert shrink_failure(attempt, put, Failure(0, "put", DIVERGENCE), 60.0)[0] == [Call("put", (1, ValueRecipe(5, 1)))]

    def slips(candidate):  # the lookup fails after a put of 2 bytes or more; a 1-byte put fails itself
        for step, call in enumerate(candidate):
            if call.op == "put" and call.args[1].nbytes == 1:
                return Failure(step, "put", DIVERGENCE)
            if call.op == "lookup" and any(c.op == "put" and c.args[1].nbytes >= 2 for c in candidate[:step]):
                return Failure(step, "lookup", DIVERGENCE)
        return None

    slipping = [Call("put", (2, ValueRecipe(4, 1))), Call("lookup", ((7,), 3))]
    assert shrink_failure(slips, slipping, Failure(1, "lookup", DIVERGENCE), 60.0)[0] == [
        Call("put", (1, ValueRecipe(2, 1))), Call("lookup", ((), 1))]


def test_simplifying_arguments_stops_after_its_count_of_attempts():
    """Every simplification of 40 calls of 20-element tuples would be kept; the pass stops after
    SIMPLIFY_ATTEMPTS replays (a count: the same counterexample on any machine), last call first."""
    from cacheproof.sandbox.fault_search import DIVERGENCE, SIMPLIFY_ATTEMPTS, Failure, shrink_failure

    replays = []

    def attempt(candidate):  # fails only with every call, and so drops none
        replays.append(candidate)
        return Failure(39, "lookup", DIVERGENCE) if len(candidate) == 40 else None

    calls = [Call("lookup", (tuple(range(20)),)) for _ in range(40)]
    shrunk, _, cut_short = shrink_failure(attempt, calls, Failure(39, "lookup", DIVERGENCE), 600.0)
    dropping = sum(len(candidate) < 40 for candidate in replays)
    assert not cut_short and len(replays) - dropping == SIMPLIFY_ATTEMPTS
    assert shrunk[-1] == Call("lookup", ((),)) and shrunk[0] == calls[0]


def test_check_threads_bounds_each_thread_by_the_call_timeout(monkeypatch, capsys):
    import cacheproof.check.concurrent.command as concurrent_command

    seen = {}
    real = concurrent_command.run_concurrent_check

    def recording(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(concurrent_command, "run_concurrent_check", recording)
    argv = ["check", "--threads", "2", "--impl", "model_tests.racy_caches:ReentersItsLock", "--call-timeout", "0.3",
            "--examples", "50", "--quiet"]
    status, output = run_main(argv, capsys)
    assert status == 1, output
    assert seen["timeout"] == 0.3
    assert "never returned from cache.release(" in output and "a deadlock" in output


@pytest.mark.parametrize("threads", [None, "2"])
def test_a_make_value_that_hangs_is_a_counterexample_within_the_call_timeout(threads, capsys):
    """Before any example (the capacity probe makes a value) and under --threads (the scenario's values
    are made before its prefix) alike, a make_value that never returns is reported, within the call
    timeout per attempt, naming make_value; it was an internal traceback and a run that never ended."""
    argv = ["check", "--impl", f"{FAULTY}:LockedMakeValueHangs", "--call-timeout", "0.5", "--examples", "20",
            "--max-divergences", "1", "--quiet"] + ([] if threads is None else ["--threads", threads])
    status, output = run_main(argv, capsys)
    assert status == 1, output
    assert_no_internal_traceback(output)
    assert re.search(r"cache\.make_value\(\d+, \d+\) (did not return within 0\.5 s, making a value for cache\.|"
                     r"never returned while the scenario's values were made)", output), output


def test_one_child_process_serves_every_example_of_a_run(monkeypatch):
    """--isolate costs a fork per run, not per example or call: every example's cache lives in the same child."""
    from cacheproof.sandbox import program_isolation

    started = []
    real_child = program_isolation._Child

    def counting(impl, watch):
        started.append(impl)
        return real_child(impl, watch)

    monkeypatch.setattr(program_isolation, "_Child", counting)
    report = check_cache(None, examples=8, steps=10, impl=SPEC, isolate=True)
    assert report.ok and report.examples >= 8
    assert started == [SPEC]


ATOMIC_WRITERS = [
    (["check", "--max-divergences", "1", "--impl", SPEC, "--examples", "2", "--quiet", "--json", "{out}"], 0),
    (["check", "--max-divergences", "1", "--impl", f"{FAULTY}:SnapshotRaises", "--quiet", "--trace-out", "{out}"], 1),
    (["check", "--max-divergences", "1", "--impl", "model_tests.racy_caches:LockedCacheSpec", "--threads", "2", "--examples", "2", "--quiet",
      "--json", "{out}"], 0),
    (["replay", "{trace}", "--quiet", "--json", "{out}"], 0),
    (["bench", "monitor", "--calls", "200", "--repeats", "1", "--quiet", "--json", "{out}"], 0),
    (["bench", "trace", "--lengths", "100", "--quiet", "--json", "{out}"], 0),
]


@pytest.mark.parametrize("argv, status", ATOMIC_WRITERS,
                         ids=[" ".join(row[0][:2]) + " " + row[0][-2] for row in ATOMIC_WRITERS])
def test_every_report_file_is_renamed_into_place(argv, status, tmp_path, capsys, monkeypatch):
    """Each report reaches its path by renaming a complete temporary file (write_atomically), never by a plain write."""
    out, trace = tmp_path / "report.out", tmp_path / "ok.trace"
    trace.write_text(trace_text(spec_trace(8, [Call("put", (1, ValueRecipe(2, 0)))])))
    renamed = []
    real_replace = os.replace

    def recording(source, destination):
        renamed.append((Path(source).read_text(), Path(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", recording)
    argv = [part.replace("{out}", str(out)).replace("{trace}", str(trace)) for part in argv]
    assert run_main(argv, capsys)[0] == status
    assert [text for text, destination in renamed if destination == out] == [out.read_text()]


@pytest.mark.parametrize("command", [["check", "--max-divergences", "1", "--impl", SPEC, "--examples", "2"], ["replay", "{trace}"]])
def test_a_report_that_cannot_be_written_at_the_end_is_one_line_and_keeps_the_old_file(command, tmp_path, capsys,
                                                                                       monkeypatch):
    import errno

    out, trace = tmp_path / "r.json", tmp_path / "ok.trace"
    out.write_text("the previous report\n")
    trace.write_text(trace_text(spec_trace(8, [Call("put", (1, ValueRecipe(2, 0)))])))

    def disk_full(source, destination):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", disk_full)
    argv = [part.replace("{trace}", str(trace)) for part in command] + ["--json", str(out)]
    status, output = run_main(argv, capsys)
    assert status == 2, output
    assert f"cannot write {str(out)!r}: No space left on device" in output
    assert out.read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.trace", "r.json"], "no temporary file left"
    if command[0] == "check":
        assert "conforms: " in output, "the verdict is printed all the same"
