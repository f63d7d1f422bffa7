"""The exit statuses every command shares, written once."""

INTERRUPTED_STATUS = 130
"""The exit status after the user's Ctrl-C (128 + SIGINT), as shells report it; `check` prints its
partial report first."""

CLOSED_OUTPUT_STATUS = 141
"""The exit status when the reader of the output went away (`cacheproof check | head`): 128 + SIGPIPE,
as a shell reports a program the closed pipe stopped. Report files are written before any printing."""
