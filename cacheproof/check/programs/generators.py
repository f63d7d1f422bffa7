"""The call generator of each spec kind, and the protocol they share.

A generator picks (`cacheproof.check.programs.draws`) the size of a fresh model and, given the model's current state, the next call:
mostly calls that suit the state (a request's own blocks to free), sometimes misuse (a block freed
twice), where the kind's semantics say the implementation must reject it.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from cacheproof.check.programs.draws import Draws
from cacheproof.contract.calls import Call


class CallGenerator(Protocol):
    """What `run_program_check` needs of a kind's generator."""

    def size(self, draws: Draws) -> int:
        """The size of a fresh model (the kind's `size_name`)."""

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        """The next call, among `operations`, drawn from the state of `model` (never changed here);
        misuse calls only when `misuse`."""

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """(operation, case): the argument cases the outcome coverage counts beside the outcomes
        under `semantics` (None: the kind's contract), e.g. a call that carries the null block."""

    def case_of(self, call: Call) -> str | None:
        """The case of `cases` that `call` belongs to, if any; it counts when the call returns."""


_REGISTRY = {"blocks": "cacheproof.check.programs.block_calls:BlockCalls"}


def generator_for(kind: str) -> CallGenerator:
    """A fresh generator of `kind`'s calls."""
    module_name, _, attribute = _REGISTRY[kind].partition(":")
    return getattr(importlib.import_module(module_name), attribute)()
