"""The call generator of each spec kind, and the protocol they share.

A generator picks (`cacheproof.check.programs.draws`) the size of a fresh model and, given the model's current state, the next call:
mostly calls that suit the state (a request's own blocks to free), sometimes misuse (a block freed
twice), where the kind's semantics say the implementation must reject it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Protocol

from cacheproof.check.phases import Phase
from cacheproof.check.programs.draws import Draws, choice, integer
from cacheproof.contract.calls import Call


class CallGenerator(Protocol):
    """What `run_program_check` needs of a kind's generator."""

    def size(self, draws: Draws) -> int:
        """The size of a fresh model (the kind's `size_name`)."""

    def draw_call(self, draws: Draws, model: Any, operations: tuple[str, ...], misuse: bool) -> Call:
        """The next call, among `operations`, drawn from the state of `model` (never changed here);
        misuse calls only when `misuse`."""

    def exhaustive_sizes(self, scope: Any) -> tuple[int, ...]:
        """The sizes of a fresh model `check --exhaustive` starts from in `scope` (one of the
        module's `EXHAUSTIVE` scopes), smallest first."""

    def enabled_calls(self, scope: Any, model: Any, operations: tuple[str, ...], misuse: bool) -> tuple[Call, ...]:
        """Every call among `operations` that `scope` tries in the state of `model` (never changed
        here), in a fixed order; misuse calls only when `misuse`. The order decides which of several
        shortest counterexamples an exhaustive search reports."""

    def cases(self, semantics: Any) -> tuple[tuple[str, str], ...]:
        """(operation, case): the argument cases the outcome coverage counts beside the outcomes
        under `semantics` (None: the kind's contract), e.g. a call that carries the null block."""

    def case_of(self, call: Call) -> str | None:
        """The case of `cases` that `call` belongs to, if any; it counts when the call returns."""


MISUSE_PERCENT = 12
"""Where the semantics check misuse, how many calls in a hundred a generator draws as misuse."""


def drawn_size(draws: Draws, usual: int, more: int) -> int:
    """A fresh model's size: 1..`usual`, and in one model of four 1..`more` (the block, radix and
    slot kinds' rule; the tensor cache draws a capacity and keys instead)."""
    return integer(draws, 1, more if draws.randrange(4) == 3 else usual)


def drawn_call(draws: Draws, state: Any, operations: tuple[str, ...], misuse: bool,
               suited: Mapping[str, Callable[[Draws, Any], Call]],
               misused: Mapping[str, Callable[[Draws, Any], Call]]) -> Call:
    """An operation drawn from `operations`, then its call from `state`: by its `misused` drawer in
    MISUSE_PERCENT calls of a hundred when `misuse`, else by its `suited` one."""
    operation = choice(draws, operations)
    if misuse and draws.randrange(100) < MISUSE_PERCENT:
        return misused[operation](draws, state)
    return suited[operation](draws, state)


NOT_INTS = ("1", None, True, 1.5)
"""Misused ints (requests, hashes, tokens, counts): a string, None, a bool (an int subclass the
contracts refuse), a float."""

_REGISTRY = {
    "cache": "cacheproof.check.programs.generators.cache_calls:CacheCalls",
    "blocks": "cacheproof.check.programs.generators.block_calls:BlockCalls",
    "radix": "cacheproof.check.programs.generators.radix_calls:RadixCalls",
    "slots": "cacheproof.check.programs.generators.slot_calls:SlotCalls",
}
"""Each kind's generator class. Its module may declare the kind's scopes as data: `SCOPES` (by name,
the default first), which the class takes as its one argument, and `THOROUGH`, the phases `check
--thorough` runs (`cacheproof.check.phases.Phase`s of those scopes); a module without `THOROUGH`
has no wide scope, and `--thorough` is refused. `EXHAUSTIVE` (by name, the default first) holds the
scopes `check --exhaustive` enumerates (`CallGenerator.enabled_calls`). A scope may offer
`with_keys(domain)` (`--keys`, a profile's key domain) and `capped(bytes)` (`--max-capacity`, for
an implementation whose values hold memory; a kind none of whose scopes offers it has the flag
refused); a generator may offer `reached()`, its measures of what its programs reached (the
report's `scope` in place of `largest_size`: the tensor cache's most live entries, key types, ...)."""


def generator_for(kind: str, scope: Any = None) -> CallGenerator:
    """A fresh generator of `kind`'s calls, drawing from `scope` (None: the kind's default scope)."""
    module_name, _, attribute = _REGISTRY[kind].partition(":")
    generator = getattr(importlib.import_module(module_name), attribute)
    return generator() if scope is None else generator(scope)


def default_scope(kind: str) -> Any:
    """The scope `kind`'s checks draw from without --thorough: the first its generator's module
    declares (None: the generator's own, unnamed)."""
    module_name = _REGISTRY[kind].partition(":")[0]
    return next(iter(getattr(importlib.import_module(module_name), "SCOPES", {None: None}).values()))


def program_scopes(kind: str) -> dict[str, Any]:
    """`kind`'s scopes by name, the default first, as its generator's module declares them (`SCOPES`)."""
    module_name = _REGISTRY[kind].partition(":")[0]
    return dict(getattr(importlib.import_module(module_name), "SCOPES", {}))


def thorough_phases(kind: str) -> tuple[Phase, ...] | None:
    """The phases of `kind`'s `--thorough` run, as its generator's module declares them; None when it
    declares none."""
    module_name = _REGISTRY[kind].partition(":")[0]
    return getattr(importlib.import_module(module_name), "THOROUGH", None)


def exhaustive_scopes(kind: str) -> dict[str, Any]:
    """`kind`'s exhaustive scopes by name, the default first, as its generator's module declares them
    (empty when it declares none: `--exhaustive` is then refused)."""
    module_name = _REGISTRY[kind].partition(":")[0]
    return getattr(importlib.import_module(module_name), "EXHAUSTIVE", {})

