"""The exit statuses every command shares, written once, and the help's exit status section made from them.

Each command's module names what its 0 and 1 mean (`EXIT_STATUSES`) and gives one `EXAMPLE`; the
statuses below are the same for every command, and `epilog` writes both into the command's help.
"""

from __future__ import annotations

from typing import Mapping

USAGE_STATUS = 2
"""A usage error: a bad flag, an unreadable input, a factory that does not load; one line says which."""

INTERRUPTED_STATUS = 130
"""The exit status after the user's Ctrl-C (128 + SIGINT), as shells report it; `check` prints its
partial report first."""

CLOSED_OUTPUT_STATUS = 141
"""The exit status when the reader of the output went away (`cacheproof check | head`): 128 + SIGPIPE,
as a shell reports a program the closed pipe stopped. Report files are written before any printing."""


SHARED_STATUSES = {
    USAGE_STATUS: "a usage error: a bad flag or input, a factory that does not load (one line on stderr says which)",
    INTERRUPTED_STATUS: "interrupted by Ctrl-C",
    CLOSED_OUTPUT_STATUS: "the reader of the output went away (cacheproof ... | head); report files are complete",
}
"""What every command's statuses above 1 mean."""


def epilog(own: Mapping[int, str], example: str) -> str:
    """A command's help epilog: its own statuses (0, 1), then the shared ones, then one example
    (for argparse.RawDescriptionHelpFormatter, which keeps the lines as written)."""
    statuses = {**own, **SHARED_STATUSES}
    lines = ["exit status:"] + [f"  {status:<4} {meaning}" for status, meaning in sorted(statuses.items())]
    return "\n".join([*lines, "", "example:", *(f"  {line}" for line in example.splitlines())])
