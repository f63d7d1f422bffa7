"""A block pool that hangs or ends its process is a counterexample as a tensor cache is (issue 32):
found within the call timeout plus one shrinking, in-process and under --isolate, worded alike,
with a snippet that hangs or dies where the checker saw it.

The runs are `cacheproof check` processes in the interactive mode (a time budget, no CI), timed
from their start: the bound is the call timeout, the shrinking cap (`fault_search.shrink_seconds`)
and a generous start-up allowance, so that only a run that waits for the hang (the defect: more
than 300 s, no output) fails it. The hangs wait on an Event that is never set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_tests.snippet_runs import snippets_in

from cacheproof.sandbox.fault_search import shrink_seconds

REPOSITORY = Path(__file__).resolve().parents[1]
CALL_TIMEOUT = 1.0
START_UP_SECONDS = 30.0
"""Imports, the isolated children's forkserver, and a loaded two-core host."""
BOUND = CALL_TIMEOUT + shrink_seconds(CALL_TIMEOUT) + START_UP_SECONDS


def interactive_check(*argv: str, timeout: float = BOUND) -> tuple[int, str, str, float]:
    """`cacheproof check ARGV` as a user at a terminal runs it (no CI, no CACHEPROOF_BUDGET): its
    status, stdout, stderr and wall time. Running past `timeout` fails the test."""
    env = {name: value for name, value in os.environ.items() if name not in ("CI", "CACHEPROOF_BUDGET")}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "cacheproof", "check", *argv], cwd=REPOSITORY, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cacheproof check {' '.join(argv)} ran past {timeout:.0f} s")
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def counterexample_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("counterexample "))


def run_snippet(snippet: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", snippet], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
@pytest.mark.parametrize("pool", ["LookupHangs", "FreeOfCachedHangs"])
def test_a_hanging_call_is_a_counterexample_within_the_call_timeout_and_one_shrinking(pool, isolate, tmp_path):
    report = tmp_path / "r.json"
    status, stdout, stderr, seconds = interactive_check(
        "--spec", "blocks", "--impl", f"model_tests.faulty_pools:{pool}", "--call-timeout", f"{CALL_TIMEOUT:g}",
        "--budget", "30", "--json", str(report), *(["--isolate"] if isolate else []))
    assert status == 1, stdout + stderr
    assert seconds < BOUND
    line = counterexample_line(stdout)
    assert f"did not return within {CALL_TIMEOUT:g} s" in line, line
    assert "out-of-memory" not in stdout + stderr and "ChildFailure" not in stdout
    divergence = json.loads(report.read_text())["divergences"][0]
    assert divergence["ending"] == "does not return" and divergence["kind"] is None
    snippet, = snippets_in(stdout)
    assert snippet.rstrip().endswith("# <- does not return"), snippet
    with pytest.raises(subprocess.TimeoutExpired):
        run_snippet(snippet, timeout=5)


def test_a_hang_needing_earlier_calls_is_shrunk_to_them(tmp_path):
    """free hangs only on a block that carries a hash: the calls that hash a held block, then the free."""
    report = tmp_path / "r.json"
    status, stdout, stderr, _ = interactive_check(
        "--spec", "blocks", "--impl", "model_tests.faulty_pools:FreeOfCachedHangs", "--call-timeout", "1",
        "--budget", "30", "--json", str(report), "--quiet")
    assert status == 1, stdout + stderr
    calls = json.loads(report.read_text())["divergences"][0]["calls"]
    assert calls[-1]["op"] in ("free", "free_request") and 2 <= len(calls) <= 3, calls


def test_a_hanging_view_ends_the_snippet_after_calls_that_return():
    status, stdout, stderr, seconds = interactive_check(
        "--spec", "blocks", "--impl", "model_tests.faulty_pools:TablesHangs", "--call-timeout", "1", "--budget", "30")
    assert status == 1 and seconds < BOUND, stdout + stderr
    assert counterexample_line(stdout).partition("): ")[2].startswith("cache.tables() did not return within 1 s, after ")
    snippet, = snippets_in(stdout)
    assert snippet.rstrip().endswith("cache.tables()  # <- does not return"), snippet
    with pytest.raises(subprocess.TimeoutExpired):
        run_snippet(snippet, timeout=5)
    calls_only = snippet.rstrip().rpartition("\n")[0] + "\n"
    assert run_snippet(calls_only, timeout=60).returncode == 0, "the calls alone return: the view hangs"


def test_the_snippet_of_a_pool_that_ends_its_process_ends_it():
    status, stdout, stderr, seconds = interactive_check(
        "--spec", "blocks", "--isolate", "--impl", "model_tests.block_pools:ExitsOnDoubleFreePool", "--budget", "30")
    assert status == 1 and seconds < BOUND, stdout + stderr
    assert "killed the process running the cache (exit status 134)" in counterexample_line(stdout)
    snippet, = snippets_in(stdout)
    assert snippet.rstrip().endswith("# <- kills the process"), snippet
    assert run_snippet(snippet, timeout=60).returncode == 134


def test_a_factory_that_hangs_is_a_usage_error_within_the_call_timeout():
    status, stdout, stderr, seconds = interactive_check(
        "--spec", "blocks", "--impl", "model_tests.faulty_pools:hangs_when_built", "--call-timeout", "1")
    assert status == 2 and seconds < CALL_TIMEOUT + START_UP_SECONDS, stdout + stderr
    assert "hangs_when_built: factory(4) did not return within 1 s" in stderr
