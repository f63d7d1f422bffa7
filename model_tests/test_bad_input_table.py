"""Every command, every class of bad input: the documented exit status, and no traceback of
cacheproof's or Hypothesis's own (docs/robustness.md).

One table per class of bad input, each row a command line and what it must print. Rows run
through `cacheproof.cli.main` in this process, except the two that need the real thing: the
user's Ctrl-C (a real SIGINT, every row in one child interpreter, see `_interrupt_rows`) and a
reader that closes the output pipe.

Statuses (docs/robustness.md): 1 a counterexample, 2 a usage error, 130 Ctrl-C, 141 a closed pipe.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cacheproof.contract.calls import Call, ValueRecipe
from cacheproof.contract.record import spec_trace, trace_text
from cacheproof.cli import main
from model_tests import faulty_caches
from model_tests.ctrl_c import interruptible_python

FAULTY = "model_tests.faulty_caches"
SPEC = "cacheproof.spec:CacheSpec"
REPOSITORY = Path(__file__).resolve().parents[1]
INTERNAL_FRAME = re.compile(r'File "[^"]*(cacheproof|hypothesis)/[^"]*", line \d+')

USAGE, COUNTEREXAMPLE, INTERRUPTED, CLOSED_OUTPUT = 2, 1, 130, 141


def assert_no_internal_traceback(text: str) -> None:
    assert not INTERNAL_FRAME.search(text), text


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """{tmp}: a folder holding a_folder/, a file, good and malformed traces, and the trace of calls
    that trip every faulty inspection of model_tests/faulty_caches.py."""
    monkeypatch.setattr(faulty_caches.fails_on_fifth_call, "calls", 0)
    (tmp_path / "a_folder").mkdir()
    header = '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": 8}'
    traces = {
        "ok.trace": header + "\n",
        "empty.trace": "",
        "not_json.trace": "not json\n",
        "list.trace": header + "\n[1, 2]\n",
        "truncated.trace": header + '\n{"op": "put", "args": [1, {"nbytes": 2, "tag": 0}\n',
        "unknown_op.trace": header + '\n{"op": "nope", "args": [], "result": null}\n',
        "arity.trace": header + '\n{"op": "evict", "args": [1, 2, 3], "result": 0}\n',
        "no_outcome.trace": header + '\n{"op": "get", "args": [1]}\n',
        "bad_recipe.trace": header + '\n{"op": "put", "args": [1, {"nbytes": -2, "tag": 0}], "result": true}\n',
        "bad_format.trace": '{"cacheproof_trace": 99}\n',
        "bad_capacity.trace": '{"cacheproof_trace": 1, "version": "0.1.0", "capacity_bytes": -5}\n',
    }
    for name, text in traces.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.trace").write_bytes(bytes(range(256)))
    calls = [Call("put", (1, ValueRecipe(5, 0))), Call("put", (2, ValueRecipe(1, 0))),
             Call("put", (3, ValueRecipe(1, 0))), Call("acquire", (1, 5))]
    (tmp_path / "faults.trace").write_text(trace_text(spec_trace(64, calls)))
    return tmp_path


def run_row(argv: list[str], folder: Path, capsys) -> tuple[int, str]:
    status = main([part.replace("{tmp}", str(folder)) for part in argv])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert_no_internal_traceback(output)
    return status, output


def _ids(rows):
    return [" ".join(row[0]) for row in rows]


# Bad flag values: every command and bench kind -------------------------------------------

BAD_FLAGS = [
    (["check", "--examples", "abc"], "argument --examples: must be an integer >= 1, got 'abc'"),
    (["check", "--examples", "0"], "must be an integer >= 1, got '0'"),
    (["check", "--steps", "-3"], "must be an integer >= 1, got '-3'"),
    (["check", "--seed", "x"], "must be an integer, got 'x'"),
    (["check", "--call-timeout", "0"], "must be a number of seconds > 0"),
    (["check", "--call-timeout", "nan"], "must be a number of seconds > 0"),
    (["check", "--impl", "missing-colon"], "--impl must look like MODULE:FACTORY"),
    (["check", "--profile", "no-such-profile"], "no-such-profile"),
    (["check", "--semantics", "no_such_field=1"], "no_such_field"),
    (["check", "--ops", "put,fly"], "fly"),
    (["check", "--threads", "two"], "must be an integer in 2..4, got 'two'"),
    (["check", "--threads", "9"], "must be in 2..4, got 9"),
    (["check", "--threads", "2", "--runs", "0"], "must be an integer >= 1, got '0'"),
    (["check", "--threads", "2", "--isolate"], "cannot be used with --threads"),
    (["check", "--threads", "2", "--call-timeout", "-1"], "must be a number of seconds > 0, got '-1'"),
    (["replay", "{tmp}/ok.trace", "--call-timeout", "soon"], "must be a number of seconds > 0, got 'soon'"),
    (["replay"], "the following arguments are required: trace"),
    (["replay", "{tmp}/ok.trace", "--profile", "nope"], "unknown profile 'nope'"),
    (["replay", "{tmp}/ok.trace", "--semantics", "put_present=bogus"], "put_present='bogus': valid values are"),
    (["replay", "{tmp}/ok.trace", "--ops", "fly"], "unknown fly"),
    (["prove", "--profile", "nope"], "unknown profile 'nope'"),
    (["bench", "prove", "--profile-slots", "abc"], "must be an integer >= 1, got 'abc'"),
    (["prove", "--slots", "abc"], "must be an integer >= 1, got 'abc'"),
    (["prove", "--refine-capacity", "abc"], "must be an integer >= 1, got 'abc'"),
    (["prove", "--refine-entries", "-1"], "must be an integer >= 0, got '-1'"),
    (["docs", "--out", "{tmp}/ok.trace"], "is a file, not a folder"),
    (["docs", "--out", "{tmp}/ok.trace/sub"], "cannot create the folder"),
    (["profiles", "--colour"], "unrecognized arguments: --colour"),
    (["bench", "no-such-kind"], "invalid choice"),
    (["bench", "cache", "--examples", "many"], "must be an integer >= 1, got 'many'"),
    (["bench", "blocks", "--sizes", "abc"], "REQUESTSxMAX_BLOCKS"),
    (["bench", "blocks", "--repeats", "0"], "must be an integer >= 1, got '0'"),
    (["bench", "linearizability", "--sizes", "8by200"], "must be THREADSxCALLS with integers >= 1 (e.g. 8x200), got '8by200'"),
    (["bench", "linearizability", "--sizes", "8x200", "0x5"], "must be THREADSxCALLS with integers >= 1 (e.g. 8x200), got '0x5'"),
    (["bench", "prove", "--slots", "4", "x"], "must be an integer >= 1, got 'x'"),
    (["bench", "monitor", "--calls", "0"], "must be an integer >= 1, got '0'"),
    (["bench", "monitor", "--device", "nope"], "must be a torch device this machine has, got 'nope'"),
    (["bench", "concurrent", "--scenarios", "x"], "must be an integer >= 1, got 'x'"),
    (["bench", "concurrent", "--shrink-seconds", "-1"], "must be a number of seconds >= 0, got '-1'"),
    (["bench", "trace", "--lengths", "100", "0"], "must be an integer >= 1, got '0'"),
    (["bench", "trace", "--device", "nope"], "must be a torch device this machine has, got 'nope'"),
    (["mutate"], "the following arguments are required: MODULE"),
    (["mutate", "no_such_module_anywhere", "--impl", "cacheproof.spec:CacheSpec"], "MODULE 'no_such_module_anywhere' is not installed"),
    (["mutate", "cacheproof.spec.errors", "--impl", "cacheproof.spec:CacheSpec", "--mutants", "x"], "--mutants takes mutant numbers"),
    (["mutate", "cacheproof.spec.errors", "--impl", "cacheproof.spec:CacheSpec", "--mutants", "999"], "--mutants 999: the module has mutants 1.."),
    (["no-such-command"], "invalid choice"),
]


@pytest.mark.parametrize("argv, message", BAD_FLAGS, ids=_ids(BAD_FLAGS))
def test_a_bad_flag_is_a_usage_error_in_plain_words(argv, message, folder, capsys):
    status, output = run_row(argv, folder, capsys)
    assert status == USAGE, output
    assert message in output


# Output paths that cannot be written: checked before any work ------------------------------

PATH_COMMANDS = [
    ["check", "--impl", SPEC],
    ["check", "--impl", SPEC, "--threads", "2"],
    ["replay", "{tmp}/ok.trace"],
    ["prove"],
    ["bench", "cache"],
    ["bench", "blocks"],
    ["bench", "prove"],
    ["bench", "monitor"],
    ["bench", "concurrent"],
    ["bench", "trace"],
]
BAD_PATHS = [
    ("{tmp}/a_folder", "is a folder, not a file"),
    ("{tmp}/missing/dir/x.json", "the folder '{tmp}/missing/dir' does not exist"),
    ("{tmp}/ok.trace/x.json", "is not a folder"),
]
OUTPUT_ROWS = [(command + ["--json", path], message) for command in PATH_COMMANDS for path, message in BAD_PATHS]
OUTPUT_ROWS += [(["check", "--impl", SPEC, "--trace-out", path], message) for path, message in BAD_PATHS]


@pytest.mark.parametrize("argv, message", OUTPUT_ROWS, ids=_ids(OUTPUT_ROWS))
def test_an_unwritable_output_path_is_one_line_before_any_work(argv, message, folder, capsys):
    started = time.perf_counter()
    status, output = run_row(argv, folder, capsys)
    assert status == USAGE, output
    assert message.replace("{tmp}", str(folder)) in output
    assert output.strip().count("\n") == 0, "one line naming the path and the problem"
    assert time.perf_counter() - started < 5, "refused before the run, not after it"


# Factories that cannot make a usable cache: usage errors, under every mode -------------------

CALL_TIMEOUT = "2"
"""Long enough that no healthy call of these factories' caches reaches it on a loaded machine; only
the factory that hangs for ever does."""
MODES = {
    "check": ["check", "--examples", "20", "--call-timeout", CALL_TIMEOUT],
    "isolated": ["check", "--examples", "20", "--call-timeout", CALL_TIMEOUT, "--isolate"],
    "threads": ["check", "--examples", "20", "--call-timeout", CALL_TIMEOUT, "--threads", "2"],
    "replay": ["replay", "{tmp}/ok.trace", "--call-timeout", CALL_TIMEOUT],
}
FACTORIES = [
    ("raises_on_construction", "raises_on_construction(64) raised RuntimeError: no device for a cache of 64 bytes"),
    ("fails_on_fifth_call", "raised OSError: out of device handles (on its call number 5; the 4 before it succeeded)"),
    ("returns_none", "returns_none(64) returned None"),
    ("NoEvict", "returned a NoEvict, which lacks evict, pop, clear"),
    ("hangs_on_construction", f"(64) did not return within {CALL_TIMEOUT} s"),
]
FACTORY_ROWS = [
    (MODES[mode] + ["--impl", f"{FAULTY}:{name}"], message)
    for mode in MODES for name, message in FACTORIES
    if not (mode == "replay" and name == "fails_on_fifth_call")  # a replay builds two caches, never five
]
FACTORY_ROWS += [(MODES[mode] + ["--impl", "no_such_module_at_all:factory"], "cannot import module") for mode in MODES]
FACTORY_ROWS += [  # a module that calls sys.exit() on import: under --isolate it ends the process preloading it
    (MODES[mode] + ["--impl", "model_tests.module_exits_on_import:factory"],
     "cannot import module 'model_tests.module_exits_on_import': SystemExit: 5")
    for mode in MODES
]


@pytest.mark.parametrize("argv, message", FACTORY_ROWS, ids=_ids(FACTORY_ROWS))
def test_a_factory_that_cannot_make_a_usable_cache_is_a_usage_error(argv, message, folder, capsys):
    status, output = run_row(argv, folder, capsys)
    assert status == USAGE, output
    assert message in output
    if "raised" in message:
        assert "Traceback of your code" in output and "faulty_caches.py" in output, "the user's own frames"


# The user's code failing outside the call under test: a counterexample naming it -------------

INSPECTIONS = [  # model_tests/faulty_caches.py: the locked spec, failing as soon as it holds an entry
    ("LockedSnapshotRaises", "snapshot() raised RuntimeError: snapshot lost its iterator", "RuntimeError"),
    ("LockedMakeValueRaises", "make_value(1, 0) raised MemoryError: cannot allocate 1 bytes", "MemoryError"),
    ("LockedStatsRaises", "stats() raised ValueError: pinned counter out of sync", "ValueError"),
    ("LockedLenRaises", "len() raised OverflowError: entry count overflowed", "OverflowError"),
    ("LockedContainsRaises", "in cache raised RuntimeError: lookup table corrupted", "RuntimeError"),
]
FAULT_MODES = {
    "check": ["check", "--examples", "20", "--steps", "10", "--quiet"],
    "isolated": ["check", "--examples", "20", "--steps", "10", "--quiet", "--isolate"],
    "replay": ["replay", "{tmp}/faults.trace"],
}
CHECKED_AS = {
    "LockedMakeValueRaises": "make_value(1, 1) raised MemoryError: cannot allocate 1 bytes, making a value for cache.",
}
"""`check`'s words where replay's differ: its values are tagged from 1."""
USER_CODE_ROWS = [  # the trace's first value has 5 bytes, the checker's first 1
    (FAULT_MODES[mode] + ["--impl", f"{FAULTY}:{name}"],
     message.replace("(1, 0)", "(5, 0)").replace(" 1 bytes", " 5 bytes") if mode == "replay" else CHECKED_AS.get(name, message))
    for mode in FAULT_MODES for name, message, _ in INSPECTIONS
]
USER_CODE_ROWS += [  # under --threads the views are read once the threads have joined; make_value inside a call
    (["check", "--threads", "2", "--examples", "20", "--quiet", "--impl", f"{FAULTY}:{name}"], error)
    for name, _, error in INSPECTIONS
]


@pytest.mark.parametrize("argv, message", USER_CODE_ROWS, ids=_ids(USER_CODE_ROWS))
def test_the_users_code_failing_on_a_call_sequence_is_a_counterexample(argv, message, folder, capsys):
    status, output = run_row(argv, folder, capsys)
    assert status == COUNTEREXAMPLE, output
    assert message in output


# Malformed traces --------------------------------------------------------------------------

TRACES = [
    ("a_folder", "cannot read the trace"),
    ("no_such.trace", "cannot read the trace"),
    ("empty.trace", "empty trace, expected a header line"),
    ("binary.trace", "cannot read the trace"),
    ("not_json.trace", "line 1: not JSON"),
    ("list.trace", "line 2: expected a JSON object, got list"),
    ("truncated.trace", "line 2: not JSON"),
    ("unknown_op.trace", "line 2: unknown op 'nope'"),
    ("arity.trace", "line 2: evict takes 1 positional arguments, got 3"),
    ("no_outcome.trace", "line 2: a call needs exactly one of \"result\" and \"error\""),
    ("bad_recipe.trace", "line 2: a value recipe needs an int nbytes >= 0"),
    ("bad_format.trace", "line 1: unsupported trace format 99"),
    ("bad_capacity.trace", "line 1: capacity_bytes must be an int >= 1, got -5"),
]
TRACE_ROWS = [(["replay", f"{{tmp}}/{name}"], message) for name, message in TRACES]
TRACE_ROWS += [(["replay", f"{{tmp}}/{name}", "--impl", SPEC], message) for name, message in TRACES[4:6]]


@pytest.mark.parametrize("argv, message", TRACE_ROWS, ids=_ids(TRACE_ROWS))
def test_a_malformed_trace_is_a_usage_error_naming_the_line(argv, message, folder, capsys):
    status, output = run_row(argv, folder, capsys)
    assert status == USAGE, output
    assert message in output and "{tmp}/".format(tmp=folder) + argv[1].rpartition("/")[2] in output


# Ctrl-C: every command, a real SIGINT ------------------------------------------------------

INTERRUPT_ROWS = [
    # (command line, what is running when the user presses Ctrl-C: MODULE:ATTRIBUTE, first call)
    (["check", "--impl", SPEC, "--examples", "50"], "cacheproof.spec:CacheSpec.__init__"),
    (["check", "--impl", SPEC, "--examples", "50", "--isolate"], "cacheproof.spec:CacheSpec.__init__"),
    (["check", "--impl", "model_tests.racy_caches:LockedCacheSpec", "--threads", "2", "--examples", "50"],
     "cacheproof.spec:CacheSpec.__init__"),
    (["replay", "{tmp}/faults.trace"], "cacheproof.spec:CacheSpec.__init__"),
    (["replay", "{tmp}/faults.trace", "--impl", SPEC], "cacheproof.spec:CacheSpec.__init__"),
    (["prove", "--slots", "2"], "z3:Solver.check"),
    (["docs", "--out", "{tmp}/a_folder"], "cacheproof.docs.command:render"),
    (["profiles"], "cacheproof.check.profiles_command:profile_lines"),
    (["bench", "cache", "--examples", "5"], "cacheproof.spec:CacheSpec.__init__"),
    (["bench", "blocks", "--sizes", "2x2", "--repeats", "1"], "cacheproof.bench.block_paths:_median_ms"),
    (["bench", "prove", "--slots", "2"], "z3:Solver.check"),
    (["bench", "monitor", "--calls", "100", "--repeats", "1"], "cacheproof.spec:CacheSpec.__init__"),
    (["bench", "concurrent", "--scenarios", "2", "--seeds", "1"], "cacheproof.spec:CacheSpec.__init__"),
    (["bench", "trace", "--lengths", "100"], "cacheproof.spec:CacheSpec.__init__"),
]


def _interrupt_rows(folder: str, results_path: str) -> None:
    """In a child interpreter: run every INTERRUPT_ROWS row through `main`, the first call of its
    target sending this process a real SIGINT (from whatever thread makes it, as a terminal's Ctrl-C
    reaches the main thread); write [status, output] per row as JSON to `results_path`."""
    import contextlib
    import importlib
    import io
    import threading

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        raise SystemExit("SIGINT does not raise KeyboardInterrupt in this child: no row could be interrupted")
    results = []
    for argv, target in INTERRUPT_ROWS:
        module_name, _, path = target.partition(":")
        owner = importlib.import_module(module_name)
        *parents, attribute = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = getattr(owner, attribute)
        fired = []

        def pressing_ctrl_c(*args, _original=original, _fired=fired, **kwargs):
            if not _fired:
                _fired.append(True)
                os.kill(os.getpid(), signal.SIGINT)
                if threading.current_thread() is threading.main_thread():
                    time.sleep(30)  # the KeyboardInterrupt arrives here
            return _original(*args, **kwargs)

        setattr(owner, attribute, pressing_ctrl_c)
        output = io.StringIO()
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                status = main([part.replace("{tmp}", folder) for part in argv])
        except BaseException as escaped:  # noqa: BLE001 - the row's failure, recorded for the test
            status = f"escaped: {escaped!r}"
        finally:
            setattr(owner, attribute, original)
        results.append([status, output.getvalue(), bool(fired)])
    Path(results_path).write_text(json.dumps(results))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("interrupt")
    (folder / "a_folder").mkdir()
    calls = [Call("put", (key, ValueRecipe(1, 0))) for key in range(4)]
    (folder / "faults.trace").write_text(trace_text(spec_trace(64, calls)))
    results = folder / "results.json"
    child = subprocess.run(
        interruptible_python(f"from model_tests.test_bad_input_table import _interrupt_rows; "
                             f"_interrupt_rows({str(folder)!r}, {str(results)!r})"),
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
    )
    assert_no_internal_traceback(child.stdout + child.stderr)
    assert results.exists(), child.stdout + child.stderr
    return json.loads(results.read_text())


@pytest.mark.parametrize("row", range(len(INTERRUPT_ROWS)), ids=_ids(INTERRUPT_ROWS))
def test_ctrl_c_exits_130_without_a_traceback(row, interrupted):
    status, output, fired = interrupted[row]
    assert fired, "the row never reached the code that presses Ctrl-C"
    assert_no_internal_traceback(output)
    assert status == INTERRUPTED, output
    assert "interrupted" in output


# A reader that closes the output pipe ------------------------------------------------------

def test_a_closed_output_pipe_exits_141_with_the_report_files_written(tmp_path):
    report = tmp_path / "r.json"
    argv = [sys.executable, "-m", "cacheproof", "check", "--impl", SPEC, "--examples", "2", "--json", str(report)]
    environment = dict(os.environ, PYTHONUNBUFFERED="1")  # each print reaches the pipe at once
    process = subprocess.Popen(argv, cwd=REPOSITORY, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    process.stdout.close()  # the reader goes away before the first line
    error = process.stderr.read()
    process.wait(timeout=120)
    assert_no_internal_traceback(error)
    assert "Traceback" not in error and "Exception ignored" not in error, error
    assert process.returncode == CLOSED_OUTPUT, error
    assert json.loads(report.read_text())["ok"] is True, "the report is complete"


def test_python_m_cacheproof_bench_is_the_bench_command():
    """`python -m cacheproof.bench` (the form docs/ cite) reports like `cacheproof bench`."""
    finished = subprocess.run([sys.executable, "-m", "cacheproof.bench", "cache", "--examples", "abc"], cwd=REPOSITORY,
                              capture_output=True, text=True, timeout=120)
    assert_no_internal_traceback(finished.stdout + finished.stderr)
    assert finished.returncode == USAGE
    assert "cacheproof bench cache: error: argument --examples: must be an integer >= 1, got 'abc'" in finished.stderr
