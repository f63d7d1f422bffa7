"""The example database: where Hypothesis keeps the failing examples a check found, so that the next
run, on this machine or another, replays them first (docs/scale.md).

A location is a folder (PATH: a Hypothesis `DirectoryBasedExampleDatabase`) or a Redis server
(`redis://HOST[:PORT][/DB]`, or `rediss://` for TLS: a `RedisExampleDatabase`, which needs the
`redis` extra). `--database LOCATION` may be given more than once; without it, the environment
variable CACHEPROOF_DATABASE holds the locations, separated by commas; the flag wins. Several
locations are one multiplexed database: every location is read, every save goes to all of them.
`--database` with no location names DEFAULT_FOLDER. `--database-read-only` reads the locations and
writes nothing to them (CI replaying a campaign's failures).

Each check reads and writes only its own examples: `namespaced` prefixes every key with a digest
of what gives the stored choices their meaning (the implementation, the semantics, the scope...), so
that one database can serve many checks. There is no default database: without a location, the
checker stores nothing (docs/decisions.md, "Scale-out").
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from cacheproof.extras import MissingExtraError

DATABASE_VARIABLE = "CACHEPROOF_DATABASE"
REDIS_SCHEMES = ("redis", "rediss")
REDIS_CONNECT_SECONDS = 5.0
"""How long opening a Redis location waits for the server before the check stops with exit 2."""


def default_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """The folder `--database` with no location names: $XDG_CACHE_HOME/cacheproof/examples, else
    ~/.cache/cacheproof/examples."""
    cache_home = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "cacheproof" / "examples"


class DatabaseError(ValueError):
    """A location that is malformed, cannot be opened, or whose server cannot be reached."""


@dataclass(frozen=True)
class DatabaseChoice:
    """The locations of the example database, as plain data (workers open their own connections),
    and whether it is read only."""

    locations: tuple[str, ...]
    read_only: bool = False

    def describe(self) -> str:
        """The report's `database` row."""
        return ", ".join(self.locations) + (" (read only)" if self.read_only else "")


def database_choice(
    flagged: Iterable[str] | None, read_only: bool = False, environ: Mapping[str, str] = os.environ
) -> DatabaseChoice | None:
    """The database the flags (`--database`, each given location) or else CACHEPROOF_DATABASE name;
    None when neither names one. DatabaseError for a malformed location, or `read_only` without one."""
    if flagged:
        source, locations = "--database", [str(location) for location in flagged]
    else:
        source = DATABASE_VARIABLE
        locations = [part.strip() for part in environ.get(DATABASE_VARIABLE, "").split(",") if part.strip()]
    if not locations:
        if read_only:
            raise DatabaseError(f"--database-read-only needs a database: --database LOCATION or {DATABASE_VARIABLE}")
        return None
    for location in locations:
        _check_location(source, location)
    return DatabaseChoice(tuple(dict.fromkeys(locations)), read_only)


def open_database(choice: DatabaseChoice) -> ExampleDatabase:
    """The Hypothesis database of `choice`: each location opened (a folder created unless read
    only, a Redis server answering a ping), several multiplexed, read only when chosen.
    DatabaseError when a location cannot be opened; MissingExtraError without the redis package."""
    opened = [_open_location(location, choice.read_only) for location in choice.locations]
    database = opened[0] if len(opened) == 1 else MultiplexedDatabase(*opened)
    return ReadOnlyDatabase(database) if choice.read_only else database


class RunStop(BaseException):
    """The base of the checkers' exceptions that end a Hypothesis run without being a failure (a
    spent budget, a time limit). Hypothesis saves the test case that any BaseException but
    KeyboardInterrupt ends, taking it for a crash; `Namespaced` drops that save, so that the
    database keeps failures only."""


class Namespaced(ExampleDatabase):
    """`inner`, every key prefixed by `prefix` (`namespaced`); a save made while a `RunStop` is
    raised is dropped."""

    def __init__(self, inner: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self.inner, self.prefix = inner, prefix

    def __repr__(self) -> str:
        return f"Namespaced({self.inner!r}, {self.prefix!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Namespaced) and (self.inner, self.prefix) == (other.inner, other.prefix)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.prefix + key)

    def save(self, key: bytes, value: bytes) -> None:
        if not isinstance(sys.exc_info()[1], RunStop):
            self.inner.save(self.prefix + key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)


def namespaced(database: ExampleDatabase, *parts: Any) -> Namespaced:
    """`database` with every key prefixed by a digest of `parts` (plain data: dataclasses, tuples,
    sets, strings, numbers), the same in every process and on every machine: a check whose parts
    differ neither replays nor deletes another's examples."""
    digest = hashlib.sha256(stable_text(parts).encode()).hexdigest()[:24]
    return Namespaced(database, f"cacheproof-{digest}:".encode())


def stable_text(value: Any) -> str:
    """`value` as text that is the same in every process: dataclasses by their fields, the members
    of sets sorted (a set's own order follows the process's string hashing), the rest by repr."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{field.name}={stable_text(getattr(value, field.name))}" for field in dataclasses.fields(value))
        return f"{type(value).__name__}({fields})"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(stable_text(member) for member in value)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(stable_text(member) for member in value) + ")"
    return repr(value)


def _check_location(source: str, location: str) -> None:
    """DatabaseError unless `location` is a Redis URL of the form redis://HOST[:PORT][/DB] or a path."""
    if "://" not in location:
        if Path(location).exists() and not Path(location).is_dir():
            raise DatabaseError(f"{source} {location!r}: not a folder (a database is a folder or redis://HOST:PORT[/DB])")
        return
    url = urlsplit(location)
    if url.scheme not in REDIS_SCHEMES:
        raise DatabaseError(f"{source} {location!r}: unknown scheme {url.scheme!r}; "
                            "a database is a folder or redis://HOST:PORT[/DB]")
    try:
        port = url.port
    except ValueError:
        port = -1
    problem = (
        "no host" if not url.hostname else
        "the port must be 1..65535" if port is not None and not 1 <= port <= 65535 else
        "the database number must be an integer >= 0" if url.path not in ("", "/") and not url.path[1:].isdigit() else
        "no query or fragment is allowed" if url.query or url.fragment else None
    )
    if problem is not None:
        raise DatabaseError(f"{source} {location!r}: {problem} (expected redis://HOST:PORT[/DB])")


def _open_location(location: str, read_only: bool) -> ExampleDatabase:
    if "://" in location:
        return _open_redis(location)
    folder = Path(location)
    if not read_only:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise DatabaseError(f"--database {location!r}: cannot create the folder: {error.strerror or error}") from None
        if not os.access(folder, os.W_OK):
            raise DatabaseError(f"--database {location!r}: the folder is not writable")
    return DirectoryBasedExampleDatabase(folder)


def _open_redis(location: str) -> ExampleDatabase:
    """A RedisExampleDatabase on the server of `location`, after a ping (DatabaseError if it does not answer)."""
    try:
        import redis
    except ModuleNotFoundError as missing:
        if missing.name != "redis":
            raise
        raise MissingExtraError(f"--database {location}", "redis") from None
    from hypothesis.extra.redis import RedisExampleDatabase

    client = redis.Redis.from_url(location, socket_connect_timeout=REDIS_CONNECT_SECONDS)  # port 6379 when none is given
    try:
        client.ping()
    except redis.RedisError as error:
        raise DatabaseError(f"--database {location}: the Redis server does not answer: {error}") from None
    return RedisExampleDatabase(client)


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """`--database [LOCATION]` (repeatable) and `--database-read-only`."""
    parser.add_argument("--database", action="append", nargs="?", const=str(default_folder()), metavar="LOCATION",
                        help=f"keep failing examples in this example database and replay them first: a folder or "
                        f"redis://HOST:PORT[/DB]; again for several; alone: {default_folder()}; default: "
                        f"${DATABASE_VARIABLE} (comma-separated), else none (docs/scale.md)")
    parser.add_argument("--database-read-only", action="store_true",
                        help="replay the database's examples but write nothing to it (CI replaying a campaign's failures)")


def chosen_database(args: argparse.Namespace) -> tuple[DatabaseChoice | None, ExampleDatabase | None]:
    """The database `--database`, `--database-read-only` and CACHEPROOF_DATABASE choose, and it opened
    (None, None: none). DatabaseError or MissingExtraError when it cannot be opened."""
    choice = database_choice(args.database, args.database_read_only)
    return choice, None if choice is None else open_database(choice)


def database_row(choice: DatabaseChoice | None) -> str:
    """The report's `database` row."""
    return "none" if choice is None else choice.describe()
