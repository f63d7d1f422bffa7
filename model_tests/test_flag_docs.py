"""The flags the README and docs/ name are the command line's, read from its parsers at run time.

- every `--flag` written in README.md or docs/*.md is a flag of a `cacheproof` command, of a
  repository tool with a parser (tools/mutate.py, tools/prove_mutations.py, tools/search_power.py),
  or of another program named in FOREIGN_FLAGS;
- every command line written in them (`cacheproof check ...`, `cacheproof bench monitor ...`,
  `python tools/mutate.py ...`) uses only flags of that command;
- every flag of every `cacheproof` command is documented: written in a command line of that command
  somewhere in README.md or docs/, and each flag of `cacheproof check` in docs/contract.md or the
  README, which users read for it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
from pathlib import Path

from cacheproof import cli

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*(?![\w>-])")
"""A long flag as written in prose or a command line."""

DIAGRAM_ARROW = "-->"
"""A line holding it is a diagram (`READY --acquire READY_HIT--> READY`): its `--word`s are no flags."""

TOOLS = {"tools/mutate.py": "tools.mutate", "tools/prove_mutations.py": "tools.prove_mutations",
         "tools/search_power.py": "tools.search_power", "tools/duel_fixture.py": "tools.duel_fixture"}
"""The repository's own tools whose flags the documents name: the script, its module (add_arguments)."""

FOREIGN_FLAGS = {
    "--config-settings": "pip install (README: Troubleshooting)",
    "--no-deps": "pip install (docs/engines.md: the engines' venv)",
    "--hypothesis-profile": "pytest, Hypothesis's plugin (docs/testing.md)",
    "--no-dashboard": "hypothesis fuzz, HypoFuzz's command (docs/scale.md: HypoFuzz campaigns)",
    "--cacheproof-settings": "pytest, cacheproof's own plugin (docs/testing.md; tested in test_pytest_plugin.py)",
    "--noconftest": "pytest, in the engines' own test commands (docs/mutation-duel.md)",
    "--deselect": "pytest, in SGLang's own test command (docs/mutation-duel.md)",
    "--import-mode": "pytest, in SGLang's own test command (docs/mutation-duel.md)",
    "--no-binary": "pip download, looking for SGLang's source distribution (docs/mutation-duel.md)",
}
"""Flags of other programs that the documents name, and which program."""

SEGMENT_END = re.compile(r"`| #|&&|;|(?<!\\)\| ")
"""Where a command line written in a document ends: its code span, a comment, the next command."""


def _flags_of(parser: argparse.ArgumentParser, name: str, into: dict[str, set[str]]) -> None:
    """Each command's long flags, a subcommand's (`bench monitor`) under its own name."""
    flags = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for kind, sub in action.choices.items():
                _flags_of(sub, f"{name} {kind}", into)
        else:
            flags.update(option for option in action.option_strings if option.startswith("--"))
    into[name] = flags


def command_flags() -> dict[str, set[str]]:
    """Every command's flags, from the parsers the command line builds: `cacheproof` itself (read
    from its --help), each subcommand (its module's add_arguments), and the repository's tools."""
    commands: dict[str, set[str]] = {}
    for name, (module, _) in cli._SUBCOMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"cacheproof {name}")
        importlib.import_module(module).add_arguments(parser)
        _flags_of(parser, name, commands)
    with contextlib.redirect_stdout(io.StringIO()) as top_help:
        cli.main(["--help"])
    commands[""] = set(FLAG.findall(top_help.getvalue())) | {"--help"}
    for script, module in TOOLS.items():
        parser = argparse.ArgumentParser(prog=script)
        importlib.import_module(module).add_arguments(parser)
        _flags_of(parser, script, commands)
    return commands


COMMANDS = command_flags()


def mentioned_flags(text: str) -> set[str]:
    """Every long flag written in `text`, diagrams left out."""
    return {flag for line in text.splitlines() if DIAGRAM_ARROW not in line for flag in FLAG.findall(line)}


def command_lines(text: str) -> list[tuple[str, str]]:
    """(command, what follows it) for every command line written in `text`: `cacheproof SUB` (and
    `cacheproof bench KIND`; `bench` alone where the kind is not written) or a tool's script, up to
    the end of its code span, a comment or the next command."""
    subcommands = "|".join(name for name in cli._SUBCOMMANDS)
    start = re.compile(rf"\bcacheproof ({subcommands})\b|({'|'.join(map(re.escape, TOOLS))})")
    found = []
    for line in text.splitlines():
        for match in start.finditer(line):
            rest = line[match.end():]
            rest = rest[: m.start()] if (m := SEGMENT_END.search(rest)) else rest
            command = match.group(1) or match.group(2)
            kind = rest.split()[0] if rest.split() else ""
            if f"{command} {kind}" in COMMANDS:
                command, rest = f"{command} {kind}", rest.split(None, 1)[1] if len(rest.split()) > 1 else ""
            found.append((command, rest))
    return found


def _flags_allowed(command: str) -> set[str]:
    """The flags a command line of `command` may carry: `bench` without its kind, any kind's;
    `mutate`, check's too (its --check-args passes them to each mutant's check)."""
    if command == "mutate":
        return COMMANDS["mutate"] | COMMANDS["check"]
    if command in COMMANDS and not any(name.startswith(command + " ") for name in COMMANDS):
        return COMMANDS[command]
    return set().union(*(flags for name, flags in COMMANDS.items() if name.startswith(command + " ")))


def test_the_parsers_are_read():
    assert {"--impl", "--examples", "--seed", "--isolate", "--threads"} <= COMMANDS["check"]
    assert "--sizes" in COMMANDS["bench blocks"] and "--slots" in COMMANDS["prove"]
    assert "--tests" in COMMANDS["tools/mutate.py"]


def test_every_flag_the_documents_name_exists():
    known = set().union(*COMMANDS.values()) | set(FOREIGN_FLAGS)
    unknown = [
        f"{document.relative_to(ROOT)}: {flag}"
        for document in DOCUMENTS
        for flag in sorted(mentioned_flags(document.read_text()))
        if flag not in known
    ]
    assert not unknown, "flags no parser has:\n" + "\n".join(unknown)


def test_every_command_line_in_the_documents_uses_that_commands_flags():
    wrong = [
        f"{document.relative_to(ROOT)}: cacheproof {command} ... {flag}".replace("cacheproof tools/", "tools/")
        for document in DOCUMENTS
        for command, rest in command_lines(document.read_text())
        for flag in FLAG.findall(rest)
        if flag not in _flags_allowed(command)
    ]
    assert not wrong, "command lines with flags their command lacks:\n" + "\n".join(wrong)


def test_every_flag_of_every_command_is_documented():
    written: dict[str, set[str]] = {}
    for document in DOCUMENTS:
        for command, rest in command_lines(document.read_text()):
            written.setdefault(command, set()).update(FLAG.findall(rest))
    missing = [
        f"cacheproof {command} {flag}"
        for command, flags in sorted(COMMANDS.items())
        if command and command not in TOOLS and command != "bench"
        for flag in sorted(flags - written.get(command, set()) - {"--help"})
    ]
    assert not missing, "flags no command line in README.md or docs/ shows:\n" + "\n".join(missing)


def test_every_flag_of_check_is_in_the_contract_or_the_readme():
    read = (ROOT / "docs" / "contract.md").read_text() + (ROOT / "README.md").read_text()
    missing = sorted(COMMANDS["check"] - mentioned_flags(read) - {"--help"})
    assert not missing, f"flags of cacheproof check that docs/contract.md and README.md do not name: {missing}"


def test_a_made_up_flag_in_a_command_line_is_caught():
    """The check bites: a wrong flag on a real command, and a flag of another command."""
    lines = command_lines("run `cacheproof check --impl m:f --no-such-flag` or `cacheproof bench monitor --sizes 2x2`")
    assert lines[0][0] == "check" and lines[1][0] == "bench monitor"
    assert "--no-such-flag" not in _flags_allowed("check") and "--sizes" not in _flags_allowed("bench monitor")
