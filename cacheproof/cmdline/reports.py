"""The JSON reports of every command (`--json`): one envelope, one schema, one writer.

A report is one JSON object: the envelope, then the command's own fields.

- `schema`: REPORT_SCHEMA, the name and version of the schema it follows;
- `command`: check, prove, replay, bench or mutate;
- `tool`: {"name": "cacheproof", "version": ...};
- `hypothesis_version`: the Hypothesis that drew the examples, null when the command ran none;
- `created`: when it was written, ISO 8601 in UTC.

The schema, JSON Schema draft 2020-12, is shipped in the package (`schema()`, the file
cacheproof/schemas/report-v1.json); docs/reports.md describes the fields in words. A field added
to a report is added to the schema in the same change: the suite validates every report it writes.

When the environment variable REPORT_LOG_VARIABLE names a file, every report's absolute path is
appended to it, one a line (the suite's conftest.py sets it, and validates each report logged).
"""

from __future__ import annotations

import enum
import json
import os
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Mapping

from cacheproof.cmdline.output_paths import write_atomically
from cacheproof.version import __version__

REPORT_SCHEMA = "cacheproof/report/v1"
SCHEMA_FILE = "report-v1.json"
COMMANDS = ("check", "prove", "replay", "bench", "mutate")
REPORT_LOG_VARIABLE = "CACHEPROOF_REPORT_LOG"


def envelope(command: str, ran_hypothesis: bool) -> dict[str, Any]:
    """The fields every report starts with (see the module docstring)."""
    if command not in COMMANDS:
        raise ValueError(f"a report's command is one of {', '.join(COMMANDS)}, got {command!r}")
    return {
        "schema": REPORT_SCHEMA,
        "command": command,
        "tool": {"name": "cacheproof", "version": __version__},
        "hypothesis_version": metadata.version("hypothesis") if ran_hypothesis else None,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def report_of(command: str, body: Mapping[str, Any], ran_hypothesis: bool = False) -> dict[str, Any]:
    """The report of `command`: the envelope, then `body` (which may not redefine an envelope field)."""
    head = envelope(command, ran_hypothesis)
    clashing = sorted(set(head) & set(body))
    if clashing:
        raise ValueError(f"a report body may not set the envelope's {', '.join(clashing)}")
    return {**head, **body}


def write_report(path: str | os.PathLike, command: str, body: Mapping[str, Any], ran_hypothesis: bool = False) -> None:
    """Write the report of `command` with `body` to `path`, atomically (`write_atomically`): indented
    JSON; a value JSON cannot hold is written as its repr."""
    text = json.dumps(report_of(command, body, ran_hypothesis), indent=2, default=plain) + "\n"
    write_atomically(path, text)
    log = os.environ.get(REPORT_LOG_VARIABLE)
    if log:
        with open(log, "a") as stream:
            stream.write(f"{Path(path).resolve()}\n")


def plain(value: Any) -> Any:
    """`value` as JSON can hold it: JSON's own scalars as they are, an enum member by name, tuples
    and lists as lists, sets as sorted lists of reprs, dicts with their keys as text, anything else
    as its repr (json.dumps calls this for what it cannot write itself)."""
    if value is None or isinstance(value, (str, int, float, bool)) and not isinstance(value, enum.Enum):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (tuple, list)):
        return [plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(repr(item) for item in value)
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    return repr(value)


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The report schema shipped in the package (JSON Schema draft 2020-12)."""
    return json.loads(resources.files("cacheproof").joinpath("schemas", SCHEMA_FILE).read_text())
