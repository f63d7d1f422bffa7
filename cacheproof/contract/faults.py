"""What can stop a check other than a divergence, and how each is told apart.

- `UserCodeError`: the user's code outside the call under test (make_value, snapshot, stats, len)
  raised. On a call sequence it becomes a divergence message ("snapshot() raised RuntimeError: ...,
  after cache.put(...)"), shrunk like any other.
- `UsageAbort`: the factory raised, hung or returned something unusable: a usage error (exit 2),
  shown as one line plus the user's own traceback.
- `CacheFault`: a call hung past the call timeout, or (under --isolate) killed its process; the
  sequence that led there is shrunk and reported as a counterexample.
- `StopRequested`: the checker asked the thread running the cache to stop (the user's Ctrl-C).

`UsageAbort`, `CacheFault` and `StopRequested` derive from BaseException so that neither the
cache's `except Exception` nor Hypothesis (which catches Exception, SystemExit and GeneratorExit as
test failures) can swallow them: they end the run at once.
"""

from __future__ import annotations

import os
import threading
import traceback
import types
from pathlib import Path

import importlib.util

_OUR_FOLDERS = tuple(
    str(folder) + os.sep
    for folder in (
        Path(__file__).resolve().parents[1],
        Path(importlib.util.find_spec("cacheproof.spec").origin).resolve().parent,  # its own folder in a checkout
        Path(importlib.util.find_spec("hypothesis").origin).resolve().parent,
    )
)
_OUR_FILES = (str(Path(threading.__file__).resolve()),)


class UserCodeError(Exception):
    """`where` (e.g. "snapshot()", "make_value(4, 7)") raised `error`."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(where, error)
        self.where = where
        self.error = error

    def __str__(self) -> str:
        return f"{self.where} raised {type(self.error).__name__}: {error_text(self.error)}"


class MalformedResult(UserCodeError):
    """`where` (e.g. "stats()") returned `result`, which is not what the contract says it returns (`problem`)."""

    def __init__(self, where: str, result: object, problem: str) -> None:
        super().__init__(where, TypeError(problem))
        self.result = result
        self.problem = problem

    def __str__(self) -> str:
        text = repr(self.result)
        return f"{self.where} returned {text if len(text) <= 60 else text[:57] + '...'}, {self.problem}"


class UsageAbort(BaseException):
    """A usage error found while running: `message` (one line) and `details` (the user's traceback, or "")."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def said_by(self, command: str) -> str:
        """What `command` ("cacheproof check") writes to stderr for it: its one line, then the details."""
        return f"{command}: {self.message}" + (f"\n{self.details}" if self.details else "")


class CacheFault(BaseException):
    """A call that hung or killed its process: `message` says which call and how; `kind` is "hang" or "crash"."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class StopRequested(BaseException):
    """Raised in the thread running the cache when the checker stops it (the user pressed Ctrl-C)."""


CONTROL_EXCEPTIONS = (UserCodeError, UsageAbort, CacheFault, StopRequested)
"""Exceptions of the checker's own that pass through a call instead of becoming its outcome."""


def user_traceback(error: BaseException) -> str:
    """The traceback of `error` with only the user's frames (none in cacheproof/, hypothesis/ or threading)."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not is_ours(frame.filename)
    ]
    lines = ["Traceback of your code (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines).rstrip("\n")


def with_users_frames_only(error: BaseException, also_hidden: tuple[str, ...] = ()) -> BaseException:
    """`error` with its traceback cut to the frames `user_traceback` shows (the user's code alone),
    for a report that shows where the user's code raised and nothing of cacheproof's; the frames of
    the top-level packages `also_hidden` (a test runner's, say) are cut too."""
    kept = []
    entry = error.__traceback__
    while entry is not None:
        package = (entry.tb_frame.f_globals.get("__name__") or "").partition(".")[0]
        if not is_ours(entry.tb_frame.f_code.co_filename) and package not in also_hidden:
            kept.append(entry)
        entry = entry.tb_next
    cut = None
    for entry in reversed(kept):
        cut = types.TracebackType(cut, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return error.with_traceback(cut)


def raised_in_users_code(error: BaseException) -> bool:
    """Whether the innermost frame of `error`'s traceback is the user's (not cacheproof's, not Hypothesis's)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and not is_ours(frames[-1].filename)


def is_ours(filename: str) -> bool:
    """Whether code in `filename` is cacheproof's (the spec too), Hypothesis's or threading's: not the user's."""
    resolved = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return resolved.startswith(_OUR_FOLDERS) or resolved in _OUR_FILES


def error_text(error: BaseException) -> str:
    """str(error), or a description when the error's own __str__ raises (a broken cache's may)."""
    try:
        return str(error)
    except Exception as failure:  # noqa: BLE001 - the user's __str__ may raise anything
        return f"<its str() raised {type(failure).__name__}>"


def one_line(error: BaseException) -> str:
    """`Type: message` on one line."""
    text = " ".join(error_text(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
