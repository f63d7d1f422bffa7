"""The call generator of each spec kind, and the protocol they share.

A generator draws the size of a fresh model and, given the model's current state, the next call:
mostly calls that suit the state (a request's own blocks to free), sometimes misuse (a block freed
twice), where the kind's semantics say the implementation must reject it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Protocol

from hypothesis import strategies as st

from cacheproof.contract.calls import Call

Draw = Callable[[st.SearchStrategy], Any]
"""`data.draw` of `st.data()`: draws one value of a strategy inside the running example."""


class CallGenerator(Protocol):
    """What `run_program_check` needs of a kind's generator."""

    def sizes(self) -> st.SearchStrategy[int]:
        """The sizes of fresh models (the kind's `size_name`)."""

    def draw_call(self, draw: Draw, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        """The next call, among `operations`, drawn from the state of `model` (never changed here);
        misuse calls only when `misuse`."""


_REGISTRY = {"blocks": "cacheproof.check.programs.block_calls:BlockCalls"}


def generator_for(kind: str) -> CallGenerator:
    """A fresh generator of `kind`'s calls."""
    module_name, _, attribute = _REGISTRY[kind].partition(":")
    return getattr(importlib.import_module(module_name), attribute)()
