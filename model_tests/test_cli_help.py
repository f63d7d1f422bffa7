"""The command line explains itself: `--version`; every command's (and bench kind's) help names each
argument with a meaningful metavar and a help text, its exit statuses and an example that parses."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from cacheproof.cli import _SUBCOMMANDS, command_parser, main
from cacheproof.cmdline.statuses import SHARED_STATUSES
from cacheproof.spec.kinds import get_kind, kind_names
from cacheproof.version import __version__


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return commands.choices[name]


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """(`cacheproof COMMAND [KIND]`, its parser) for every command and every bench kind."""
    found = []
    for name in _SUBCOMMANDS:
        sub = _subparser(command_parser(name), name)
        found.append((name, sub))
        if name == "bench":
            (kinds,) = [action for action in sub._actions if isinstance(action, argparse._SubParsersAction)]
            found += [(f"bench {kind}", parser) for kind, parser in kinds.choices.items()]
    return found


PARSERS = _parsers()


def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"cacheproof {__version__}"


@pytest.mark.parametrize("name, parser", PARSERS, ids=[name for name, _ in PARSERS])
def test_every_argument_has_help_and_a_meaningful_metavar(name: str, parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        label = "/".join(action.option_strings) or action.dest
        assert action.help, f"cacheproof {name} {label} has no help"
        takes_a_value = action.nargs != 0
        if takes_a_value and action.option_strings and action.choices is None:
            assert action.metavar, f"cacheproof {name} {label} shows argparse's default metavar {action.dest.upper()}"


@pytest.mark.parametrize("name, parser", PARSERS, ids=[name for name, _ in PARSERS])
def test_every_help_gives_the_exit_statuses_and_an_example_that_parses(name: str, parser: argparse.ArgumentParser):
    text = parser.format_help()
    statuses = text.split("exit status:\n", 1)[1].split("\n\nexample:\n", 1)[0]
    listed = {int(line.split()[0]) for line in statuses.splitlines()}
    assert 0 in listed and set(SHARED_STATUSES) <= listed
    for status, meaning in SHARED_STATUSES.items():
        assert f"{status:<4} {meaning}" in statuses
    examples = text.split("\n\nexample:\n", 1)[1].strip().splitlines()
    assert examples
    for example in examples:
        argv = shlex.split(example, comments=True)
        assert argv[0] == "cacheproof" and argv[1:len(name.split()) + 1] == name.split(), example
        command_parser(argv[1]).parse_args(argv[1:])  # exits (a failure) when the example does not parse


def test_the_top_level_help_lists_the_statuses_too(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:" in out and "--version" in out and "COMMAND --help" in out


def test_prove_says_it_proves_the_spec_not_the_users_cache(capsys):
    assert main(["prove", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "proves the tensor cache's spec" in out and "It proves nothing about your code" in out
    assert "--spec blocks: proves the KV block pool's spec" in out


def _help_text(capsys, command: str) -> str:
    """`cacheproof COMMAND --help` with its line breaks undone (argparse also breaks after a hyphen:
    `vllm-kv-cache-` then `manager`)."""
    assert main([command, "--help"]) == 0
    return " ".join(re.sub(r"(?<=\w-)\n\s*", "", capsys.readouterr().out).split())


def test_prove_points_each_kind_at_its_own_check_command(capsys):
    out = _help_text(capsys, "prove")
    cache_part, blocks_part = out.split("--spec blocks: proves", 1)
    assert "`cacheproof check --impl MODULE:FACTORY` tests it" in cache_part
    assert "`cacheproof check --spec blocks --impl MODULE:FACTORY` tests it" in blocks_part


def test_check_help_names_each_kinds_operations_and_profiles(capsys):
    out = _help_text(capsys, "check")
    options = out.split("--profile NAME semantics", 1)[1]
    profile_help, rest = options.split("--semantics FIELD=VALUE,...", 1)
    ops_help = rest.split("--ops OP,...", 1)[1].split("--no-bad-arguments", 1)[0]
    cache_profiles, block_profiles = profile_help.split("--spec blocks:", 1)
    assert "--spec cache:" in cache_profiles and "trtllm-tensor-lru" in cache_profiles
    assert "vllm-block-pool" in block_profiles and "trtllm" not in block_profiles
    cache_ops, block_ops = ops_help.split("--spec blocks:", 1)
    assert "reserve" in cache_ops and "allocate_slots" not in cache_ops
    assert "allocate_slots" in block_ops and "free_request" in block_ops and "reserve" not in block_ops
    assert "cacheproof.impl.kv_cache_manager:kv_cache_manager" in out  # the block kind's default --impl


@pytest.mark.parametrize("kind", kind_names())
def test_every_registered_kind_is_in_the_check_help(kind, capsys):
    out = _help_text(capsys, "check")
    spec = get_kind(kind)
    assert f"--spec {kind}: {spec.summary}" in out
    for name in (*spec.profiles, *spec.names):
        assert name in out, f"{name} of --spec {kind} is not in check --help"
    assert f"--spec {kind}: {', '.join(spec.key_domains)} ({spec.keys_are})" in out  # the --keys help

