"""How long `cacheproof check` searches: a time budget, or a fixed count of examples.

An interactive run is bounded by time: without --examples it draws programs for --budget seconds
(DEFAULT_BUDGET_SECONDS), which on a two-core machine is tens of thousands of programs where a
fixed 200 are one or two seconds' worth. A run that must be reproducible counts examples instead:
`--examples N` alone, and every run under CI (the environment variable CI set to true or 1, as CI
services set it), where the default count holds. CACHEPROOF_BUDGET=SECONDS sets the default budget;
0 turns it off (the project's own test suite runs so). --thorough and --threads keep their own
counts. A counterexample found ends the search at once, budget or not (docs/decisions.md).
"""

from __future__ import annotations

import argparse
import os

DEFAULT_BUDGET_SECONDS = 30.0
BUDGET_EXAMPLES = 10**7
"""The examples a budgeted run may reach at most (an upper bound never met in practice)."""
BUDGET_VARIABLE = "CACHEPROOF_BUDGET"


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
