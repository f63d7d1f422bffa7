"""The example database option (`--database`, CACHEPROOF_DATABASE; cacheproof/cmdline/databases.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis.database import InMemoryExampleDatabase

from cacheproof.cli import main
from cacheproof.cmdline.databases import DATABASE_VARIABLE, DatabaseChoice, DatabaseError, database_choice
from cacheproof.cmdline.databases import namespaced, open_database

ROOT = Path(__file__).resolve().parent.parent
BROKEN_POOL = "model_tests.block_pools:StaleHashMapPool"


def test_the_flag_wins_over_the_environment_which_may_name_several(tmp_path: Path) -> None:
    environ = {DATABASE_VARIABLE: f"{tmp_path / 'a'}, redis://cache-host:6379/2"}
    assert database_choice(None, environ=environ) == DatabaseChoice((str(tmp_path / "a"), "redis://cache-host:6379/2"))
    assert database_choice([str(tmp_path / "b")], environ=environ) == DatabaseChoice((str(tmp_path / "b"),))
    assert database_choice(None, environ={}) is None
    assert database_choice(None, environ={DATABASE_VARIABLE: " , "}) is None


@pytest.mark.parametrize(("location", "problem"), [
    ("redis://", "no host"),
    ("redis://host:0", "the port must be 1..65535"),
    ("redis://host:99999", "the port must be 1..65535"),
    ("redis://host:port", "the port must be 1..65535"),
    ("redis://host:6379/db", "the database number must be an integer >= 0"),
    ("redis://host:6379/0?timeout=1", "no query or fragment is allowed"),
    ("http://host:6379", "unknown scheme 'http'"),
])
def test_a_malformed_location_is_named_with_the_rule(location: str, problem: str) -> None:
    with pytest.raises(DatabaseError, match=problem):
        database_choice([location], environ={})


def test_a_file_is_not_a_database_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(DatabaseError, match="not a folder"):
        database_choice([str(tmp_path / "file")], environ={})


def test_read_only_needs_a_database_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="--database-read-only needs a database"):
        database_choice(None, read_only=True, environ={})
    folder = tmp_path / "never-made"
    database = open_database(DatabaseChoice((str(folder),), read_only=True))
    database.save(b"key", b"value")
    assert list(database.fetch(b"key")) == [] and not folder.exists()


def test_namespaces_keep_checks_apart_and_are_the_same_in_every_process() -> None:
    inner = InMemoryExampleDatabase()
    one, other = namespaced(inner, "impl:a", frozenset({"get", "put"})), namespaced(inner, "impl:b", frozenset({"get", "put"}))
    one.save(b"key", b"value")
    assert list(one.fetch(b"key")) == [b"value"] and list(other.fetch(b"key")) == []
    program = ("from cacheproof.cmdline.databases import namespaced; from hypothesis.database import InMemoryExampleDatabase; "
               "from cacheproof.spec.cache.semantics import CONTRACT; "
               "print(namespaced(InMemoryExampleDatabase(), 'x', CONTRACT, frozenset('abcdefgh')).prefix.decode())")
    prefixes = {
        subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": str(hash_seed), "PATH": ""}).stdout
        for hash_seed in (1, 2, 3)
    }
    assert len(prefixes) == 1  # sets are sorted: string hashing, which differs per process, does not show


def test_without_the_redis_package_a_redis_database_is_a_usage_error_naming_the_extra() -> None:
    program = ("import sys; sys.modules['redis'] = None; from cacheproof.cli import main; "
               "sys.exit(main(['check', '--spec', 'blocks', '--database', 'redis://127.0.0.1:6379']))")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "needs redis (the extra 'redis'): pip install redis" in done.stderr


def _blocks(tmp_path: Path, name: str, *flags: str) -> dict:
    report = tmp_path / f"{name}.json"
    assert main(["check", "--spec", "blocks", "--impl", BROKEN_POOL, "--max-divergences", "1", "--quiet",
                 "--json", str(report), *flags]) == 1
    return json.loads(report.read_text())


def test_a_block_pool_failure_replays_first_from_the_folder_database(tmp_path: Path, capsys) -> None:
    database = str(tmp_path / "examples")
    assert _blocks(tmp_path, "alone", "--seed", "2")["first_failure_example"] > 1
    found = _blocks(tmp_path, "found", "--seed", "1", "--database", database)
    replayed = _blocks(tmp_path, "replayed", "--seed", "2", "--database", database)
    assert replayed["first_failure_example"] == 1 and replayed["database"] == database
    assert replayed["divergences"][0]["kind"] == found["divergences"][0]["kind"]


def test_database_alone_names_the_user_cache_folder(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    report = _blocks(tmp_path, "default", "--seed", "1", "--database")
    folder = tmp_path / "cache" / "cacheproof" / "examples"
    assert report["database"] == str(folder)
    assert any(path.is_file() for path in folder.rglob("*"))


def test_a_conforming_run_stores_nothing(tmp_path: Path, capsys) -> None:
    """The run's end (its budget spent: a RunStop) is no failure, though Hypothesis saves what any
    BaseException ends: the database stays empty."""
    database = tmp_path / "examples"
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:ListBlockPool", "--examples", "30",
                 "--quiet", "--database", str(database)]) == 0
    assert database.is_dir() and [path for path in database.rglob("*") if path.is_file()] == []
