"""How long `cacheproof check` searches: a time budget, or a fixed count of examples.

An interactive run is bounded by time: without --examples it draws programs for --budget seconds
(DEFAULT_BUDGET_SECONDS), which on a two-core machine is tens of thousands of programs where a
fixed 200 are one or two seconds' worth. A run that must be reproducible counts examples instead:
`--examples N` alone, and every run under CI (the environment variable CI set to true or 1, as CI
services set it), where the default count holds. CACHEPROOF_BUDGET=SECONDS sets the default budget;
0 turns it off (the project's own test suite runs so). --thorough and --threads keep their own
counts. A counterexample found ends the search at once, budget or not (docs/decisions.md).

How many distinct divergences a run reports follows the same two modes, for every spec kind
(`resolve_max_divergences`): an interactive run stops at its first shrunk counterexample and says
how to search for more (`more_divergences_line`), as Hypothesis and `pytest -x` do; a fixed-count
run searches for up to MAX_DIVERGENCES, so that CI's report lists every distinct bug it met.
"""

from __future__ import annotations

import argparse
import os

DEFAULT_BUDGET_SECONDS = 30.0
BUDGET_EXAMPLES = 10**7
"""The examples a budgeted run may reach at most (an upper bound never met in practice)."""
BUDGET_VARIABLE = "CACHEPROOF_BUDGET"
MAX_DIVERGENCES = 8
"""Distinct kinds of divergence a fixed-count run reports at most by default (--max-divergences)."""


def resolve_budget(args: argparse.Namespace, default_examples: int) -> None:
    """Set `args.budget` (seconds, or None for a fixed count) and `args.examples` by the rules of the
    module docstring; a bad CACHEPROOF_BUDGET is a ValueError naming it."""
    fixed = args.examples is not None or getattr(args, "thorough", False) or args.threads is not None
    if args.budget == 0:  # --budget 0: no budget
        args.budget = None
    elif args.budget is None and not fixed:
        args.budget = _default_budget()
    if args.examples is None:
        args.examples = BUDGET_EXAMPLES if args.budget is not None else default_examples


def _default_budget() -> float | None:
    text = os.environ.get(BUDGET_VARIABLE)
    if text is not None:
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:
            raise ValueError(f"{BUDGET_VARIABLE}={text!r}: must be a number of seconds >= 0 (0: no budget)")
        return seconds or None
    if os.environ.get("CI", "").lower() in ("true", "1"):
        return None
    return DEFAULT_BUDGET_SECONDS


def resolve_max_divergences(args: argparse.Namespace) -> None:
    """Set `args.max_divergences` when --max-divergences was not given: 1 in a run bounded by time
    (`args.budget` set by `resolve_budget`: interactive), MAX_DIVERGENCES in a fixed-count run;
    `args.stops_at_first` says the first rule chose it."""
    args.stops_at_first = args.max_divergences is None and args.budget is not None
    if args.max_divergences is None:
        args.max_divergences = 1 if args.stops_at_first else MAX_DIVERGENCES


def more_divergences_line(args: argparse.Namespace, found: int) -> str | None:
    """The line (on stderr) an interactive run that stopped at its first counterexample ends with: how
    to search for more; None for any other run, and under --quiet."""
    if not getattr(args, "stops_at_first", False) or not found or getattr(args, "quiet", False):
        return None
    return (f"stopped at the first counterexample; to search for up to {MAX_DIVERGENCES} distinct ones, "
            f"run again with --max-divergences {MAX_DIVERGENCES}")


def max_divergences_help() -> str:
    """--max-divergences's help: what the default does in each mode."""
    return (f"report up to N distinct divergences, each shrunk (default: 1 in a run bounded by --budget, which "
            f"stops at the first counterexample and exits; {MAX_DIVERGENCES} in a run of --examples N, under "
            f"CI=true or with {BUDGET_VARIABLE}=0)")
