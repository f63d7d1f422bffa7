"""Validation of the JSON reports against the shipped schema (cacheproof/schemas/report-v1.json), with
the `jsonschema` library: the suite's conftest.py validates every report a test writes, and
test_report_schema.py the reports of every command."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from cacheproof.cmdline.reports import schema


@lru_cache(maxsize=1)
def validator() -> Draft202012Validator:
    """The report schema's validator; `created` is checked as a date-time too."""
    Draft202012Validator.check_schema(schema())
    return Draft202012Validator(schema(), format_checker=FormatChecker())


def report_errors(report: Any) -> list[str]:
    """Every way `report` breaks the schema, one line each: where, and what."""
    found = sorted(validator().iter_errors(report), key=lambda error: list(error.absolute_path))
    return [f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in found]


def logged_report_errors(log: Path) -> list[str]:
    """The schema errors of every report `log` lists (`cacheproof.cmdline.reports.REPORT_LOG_VARIABLE`),
    each line naming the report; reports removed since are skipped."""
    if not log.exists():
        return []
    problems = []
    for name in dict.fromkeys(log.read_text().splitlines()):
        path = Path(name)
        if not path.exists():
            continue
        try:
            report = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            problems.append(f"{path}: not JSON: {error}")
            continue
        problems += [f"{path}: {problem}" for problem in report_errors(report)]
    return problems
