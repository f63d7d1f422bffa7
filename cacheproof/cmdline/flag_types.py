"""Argument types for every command's numeric flags, with errors in plain words.

argparse reports `argument --examples: must be an integer >= 1, got 'abc'`: the flag, the rule and
what was given. Each type is a function of the flag's text; the bound is part of its name.
"""

from __future__ import annotations

import argparse
import math

from cacheproof.extras import missing_extra


def integer_at_least(minimum: int):
    """An argparse type: an integer >= `minimum`."""

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        return number

    parse.__name__ = f"integer >= {minimum}"
    return parse


def any_integer(text: str) -> int:
    """An argparse type: any integer (a seed)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return seconds


def non_negative_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text!r}")
    return seconds


positive_integer = integer_at_least(1)
"""An argparse type: an integer >= 1."""


def torch_device(text: str) -> str:
    """An argparse type: a torch device that this machine can allocate on ("cpu", "cuda", "cuda:1");
    without torch, the error names the extra that brings it."""
    try:
        import torch
    except ModuleNotFoundError as missing:
        raise argparse.ArgumentTypeError(str(missing_extra(missing, "a torch device"))) from None

    try:
        torch.empty(1, device=torch.device(text))
    except (RuntimeError, AssertionError, ValueError) as error:  # an unknown name, or a device not here
        reason = " ".join(str(error).split()).split(". ")[0]
        raise argparse.ArgumentTypeError(f"must be a torch device this machine has, got {text!r} ({reason})") from None
    return text


def add_seed_flag(parser: argparse.ArgumentParser) -> None:
    """`--seed N`, as every benchmark takes it: the same seed, the same run (default 0)."""
    parser.add_argument("--seed", metavar="N", help="the random seed: the same seed, the same run (default 0)", type=any_integer, default=0)
