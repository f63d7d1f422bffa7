"""A failure one machine finds is replayed first by another, through a shared Redis example database.

The test starts a real redis-server (the Debian/Ubuntu package `redis-server`; `.ci/run` installs
it) on a free loopback port with no persistence, and runs `cacheproof check` as separate processes:
the first finds a broken cache's counterexample and stores it in Redis; the second, with a different
seed and a local folder database of its own beside the same Redis, fails at its first example with
the same kind of divergence, where the same seed without the shared database needs many; a read-only
run replays without writing a key. A missing redis-server fails the test with how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis as redis_package

BROKEN = "model_tests.broken_caches:CommitEvictsBeforeSizeCheck"
QUICK_BROKEN = "model_tests.broken_caches:GetTakesReference"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def redis_url(tmp_path: Path):
    """A fresh redis-server on a free loopback port (no snapshot, no append-only file), stopped at the end."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.fail("redis-server is not installed: apt-get install -y redis-server (as .ci/run does)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = tmp_path / "redis"
    folder.mkdir()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis_package.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis_package.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"redis-server did not start on port {port} (exit status {process.poll()})")
            time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0", client
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=10)


def _check(tmp_path: Path, name: str, *flags: str, impl: str = BROKEN) -> dict:
    """`cacheproof check` in a process of its own; its JSON report (the run must find the bug)."""
    report = tmp_path / f"{name}.json"
    completed = subprocess.run(
        [sys.executable, "-m", "cacheproof", "check", "--impl", impl, "--max-divergences", "1", "--quiet",
         "--json", str(report), *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    return json.loads(report.read_text())


def _kind(report: dict) -> str:
    """The kind of the report's first divergence: the same bug, whatever length shrinking reached in
    the time it had (shrinking is bounded by time, so lengths vary with the host's load)."""
    return report["divergences"][0]["kind"]


def test_a_second_machine_replays_the_first_machines_failure_first(tmp_path: Path, redis_url) -> None:
    url, client = redis_url
    alone = _check(tmp_path, "alone", "--seed", "2", "--database", str(tmp_path / "alone-db"))
    assert alone["first_failure_example"] > 1  # this seed on its own searches before it fails

    first = _check(tmp_path, "first", "--seed", "1", "--database", url)
    assert first["database"] == url
    assert client.dbsize() > 0  # the failure is stored in Redis

    own_folder = tmp_path / "second-machine-db"
    second = _check(tmp_path, "second", "--seed", "2", "--database", str(own_folder), "--database", url)
    assert second["first_failure_example"] == 1
    assert _kind(second) == _kind(first)
    assert any(path.is_file() for path in own_folder.rglob("*"))  # saved to its own folder too


def test_a_read_only_database_is_replayed_and_not_written(tmp_path: Path, redis_url) -> None:
    url, client = redis_url
    first = _check(tmp_path, "first", "--seed", "1", "--database", url)
    keys = sorted(client.keys())
    replayed = _check(tmp_path, "replayed", "--seed", "3", "--database", url, "--database-read-only")
    assert replayed["first_failure_example"] == 1 and _kind(replayed) == _kind(first)
    other = _check(tmp_path, "other", "--seed", "3", "--database", url, "--database-read-only", impl=QUICK_BROKEN)
    assert other["divergences"]  # a new failure, found and reported...
    assert sorted(client.keys()) == keys  # ...but written nowhere


def test_the_environment_variable_names_the_database_and_the_flag_wins(tmp_path: Path, redis_url) -> None:
    url, client = redis_url
    report = tmp_path / "env.json"
    completed = subprocess.run(
        [sys.executable, "-m", "cacheproof", "check", "--impl", QUICK_BROKEN, "--max-divergences", "1", "--quiet",
         "--json", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "CACHEPROOF_DATABASE": url},
    )
    assert completed.returncode == 1, completed.stderr
    assert json.loads(report.read_text())["database"] == url and client.dbsize() > 0
    flagged = tmp_path / "flagged"
    completed = subprocess.run(
        [sys.executable, "-m", "cacheproof", "check", "--impl", QUICK_BROKEN, "--max-divergences", "1", "--quiet",
         "--json", str(report), "--database", str(flagged)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "CACHEPROOF_DATABASE": url},
    )
    assert completed.returncode == 1 and json.loads(report.read_text())["database"] == str(flagged)

