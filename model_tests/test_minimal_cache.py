"""examples/minimal_cache.py conforms, and docs/contract.md names everything the code defines.

The names are read from the code at test time (operations, errors, stats and view fields), so a
name added to the spec without a word in the contract fails here.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import examples.minimal_cache
from cacheproof.sandbox.factories import load_factory
from cacheproof.spec import Acquired, CacheSpec, CacheStats, EntryState, EntryView, errors
from cacheproof.spec.cache.transitions import OPERATIONS
from cacheproof.testing import cache_test_case
from examples.minimal_cache import MinimalCache

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"
CHECK_COMMAND = "cacheproof check --impl examples.minimal_cache:MinimalCache"

TestMinimalCache = cache_test_case(MinimalCache)
"""The state machine, CacheSpec beside MinimalCache, under the active Hypothesis profile."""


@pytest.fixture(scope="module")
def contract() -> str:
    return CONTRACT.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The part of `text` from the line `heading` to the next heading of the same or a higher level."""
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ")[0]
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(level)}}} ", text) if m.start() > start]
    return text[start: ends[0] if ends else len(text)]


def test_the_documented_check_command_loads_the_example():
    assert CHECK_COMMAND in examples.minimal_cache.__doc__
    assert load_factory(CHECK_COMMAND.split("--impl ")[1]) is MinimalCache


def _public_methods() -> list[str]:
    return [
        name for name in vars(CacheSpec)
        if not name.startswith("_") and callable(getattr(CacheSpec, name))
    ]


def _error_classes() -> list[type]:
    return [
        value for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    ]


def test_contract_names_every_operation(contract):
    names = set(OPERATIONS) | set(_public_methods())
    assert {"reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear",
            "stats", "snapshot"} <= names
    missing = [name for name in sorted(names) if not re.search(rf"\b{name}\(", contract)]
    assert not missing, f"docs/contract.md never shows these operations as calls: {missing}"
    assert "len(cache)" in contract and "key in cache" in contract


def test_contract_names_every_error_with_its_bases(contract):
    classes = _error_classes()
    assert len(classes) >= 7
    for cls in classes:
        bases = ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
        assert f"| `{cls.__name__}` | {bases} |" in contract, f"no row for {cls.__name__}({bases}) in the errors table"


def test_contract_names_every_stats_field_in_order(contract):
    fields = [field.name for field in dataclasses.fields(CacheStats)]
    table = section(contract, "### `stats() -> CacheStats`")
    positions = [table.find(f"| `{name}` |") for name in fields]
    assert -1 not in positions, f"CacheStats fields without a row: {[n for n, p in zip(fields, positions) if p < 0]}"
    assert positions == sorted(positions), "the CacheStats table is not in field order"


def test_contract_gives_entry_view_fields_in_order(contract):
    table = section(contract, "### `snapshot() -> tuple[EntryView, ...]`")
    for index, name in enumerate(EntryView._fields):
        assert f"| {index} | `{name}` |" in table, f"EntryView field {index} should be {name}"


def test_contract_names_every_enum_member(contract):
    for member in [*Acquired, *EntryState]:
        assert f"`{member.name}`" in contract, member


def test_contract_covers_the_command(contract):
    command = section(contract, "## The `cacheproof check` command")
    for text in ("--impl", "--examples", "--seed", "--json", "reports.md", "counterexample"):
        assert text in command, text
    exit_status = section(command, "### Exit status")
    for status in (0, 1, 2):
        assert f"| {status} |" in exit_status, status
    report = section(command, "### The `--json` report")
    for field in ("ok", "examples", "first_failure_example", "steps", "seconds", "divergences"):
        assert f"| `{field}` |" in report, field
    assert "examples/minimal_cache.py" in section(contract, "## Writing a conforming cache")


def test_contract_gives_every_argument_check_with_its_parameters(contract):
    import inspect

    from cacheproof.spec.cache import arguments

    checks = [name for name, value in vars(arguments).items()
              if inspect.isfunction(value) and not name.startswith("_") and value.__module__ == arguments.__name__]
    assert len(checks) >= 7
    for name in checks:
        parameters = ", ".join(inspect.signature(getattr(arguments, name)).parameters)
        assert f"| `{name}({parameters})` |" in contract, f"no row for {name}({parameters})"
