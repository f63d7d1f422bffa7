"""The `cacheproof` command line: check | prove | replay | bench | docs | profiles | report | mutate.

Each subcommand lives in its own module, which exposes `add_arguments(parser)` and `run(args) -> int`.
Modules are imported only when their subcommand runs, so `cacheproof check` does not load z3.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from cacheproof.cmdline.interrupts import ctrl_c_raises
from cacheproof.cmdline.output_paths import OutputPathError
from cacheproof.extras import MissingExtraError
from cacheproof.cmdline.statuses import CLOSED_OUTPUT_STATUS, INTERRUPTED_STATUS, epilog
from cacheproof.version import __version__
from pathlib import Path

from cacheproof.settings import scratch_storage

_SUBCOMMANDS = {
    "check": ("cacheproof.check.command", "run the differential checker: spec vs an implementation (a cache, a block pool)"),
    "prove": ("cacheproof.prove.command", "prove with z3 that the spec's model keeps its invariants (not your cache)"),
    "replay": ("cacheproof.trace.replay", "replay a trace against the spec or a cache"),
    "bench": ("cacheproof.bench", "benchmarks that print ratios side by side (cacheproof bench --help lists them)"),
    "docs": ("cacheproof.docs.command", "regenerate the generated documents under docs/"),
    "profiles": ("cacheproof.check.profiles_command", "list the semantics profiles of every spec kind (shipped caches, block pools)"),
    "report": ("cacheproof.report.command", "an HTML page of a check report or a trace: figures over the calls"),
    "mutate": ("cacheproof.mutate.command", "mutants of an installed module, killed by cacheproof check and by your tests, side by side"),
}


def main(argv: list[str] | None = None) -> int:
    try:
        with ctrl_c_raises():  # never lost inside a finalizer (cacheproof/cmdline/interrupts.py)
            return _main(argv)
    except KeyboardInterrupt:  # pressed before the command started (while its modules load)
        print("cacheproof: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = command_parser(argv[0] if argv and argv[0] in _SUBCOMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    if args.command is None:
        parser.print_help()
        return 2
    shadow = shadowing_folder(Path.cwd())
    if shadow is not None:
        print(f"cacheproof: warning: {shadow_warning(shadow)}", file=sys.stderr)
    module_name = _SUBCOMMANDS[args.command][0]
    try:
        with scratch_storage():  # no .hypothesis/ left in the user's folder
            return importlib.import_module(module_name).run(args)
    except KeyboardInterrupt:
        print(f"cacheproof {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except BrokenPipeError:
        _discard_output()
        return CLOSED_OUTPUT_STATUS
    except OutputPathError as error:  # a report file that could not be written at the end (a full disk)
        print(f"cacheproof {args.command}: {error}", file=sys.stderr)
        return 2
    except MissingExtraError as error:  # the command needs an extra this installation lacks (torch)
        print(f"cacheproof {args.command}: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        return _users_error(args.command, error)


TOP_EXAMPLE = "cacheproof check --impl mypackage.cache:make_cache --json report.json\ncacheproof COMMAND --help"


def command_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser of `cacheproof`, with the arguments of the subcommand `chosen` (None: none; each
    subcommand's module is imported only when chosen). A subcommand's help ends with its exit
    statuses and one example (its module's EXIT_STATUSES and EXAMPLE)."""
    parser = argparse.ArgumentParser(
        prog="cacheproof", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog({0: "the command's verdict holds (each command's --help says which)",
                       1: "it does not: a counterexample, a divergence, a failed proof"}, TOP_EXAMPLE),
    )
    parser.add_argument("--version", action="version", version=f"cacheproof {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in _SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(sub)
            sub.epilog = epilog(module.EXIT_STATUSES, module.EXAMPLE)
    return parser


def _discard_output() -> None:
    """Point stdout at the null device, so that the interpreter's final flush into the closed pipe
    does not print an error of its own."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


def shadowing_folder(folder: Path) -> Path | None:
    """`folder/cacheproof` when it is a folder without __init__.py (a clone of cacheproof, say).

    A script run in `folder` imports it as an empty namespace package instead of the installed
    cacheproof: an editable install's finder is asked only after the folders on sys.path, which
    start with the script's own. Nothing of cacheproof runs in that script's `import cacheproof`,
    so the warning can only come from here (and README's Troubleshooting).
    """
    candidate = folder / "cacheproof"
    return candidate if candidate.is_dir() and not (candidate / "__init__.py").exists() else None


def shadow_warning(shadow: Path) -> str:
    return (
        f"{shadow} has no __init__.py, so a Python script run in this folder imports it as an empty "
        "namespace package instead of the installed cacheproof (\"module 'cacheproof' has no attribute "
        "'monitor'\"); run scripts from another folder, rename that folder, or install with "
        "`pip install -e . --config-settings editable_mode=strict` (README: Troubleshooting)"
    )


def _users_error(command: str, error: Exception) -> int:
    """Last resort: an exception raised in the user's code where no check attributes it is a usage
    error (exit 2) shown with the user's frames only; anything else is a bug of cacheproof's, re-raised."""
    from cacheproof.contract.faults import raised_in_users_code, one_line, user_traceback

    if not raised_in_users_code(error):
        raise error
    print(f"cacheproof {command}: your code raised {one_line(error)}", file=sys.stderr)
    print(user_traceback(error), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
