"""`drawn_calls`: the block generator's calls on fixed byte strings, each made on the spec it was
drawn against, for tests that ask what the suited calls of a profile reach."""

from __future__ import annotations

from typing import NamedTuple

from cacheproof.check.programs.draws import ProgramDraws
from cacheproof.check.programs.generators.block_calls import BlockCalls
from cacheproof.contract.calls import Call
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.errors import CacheError


class Drawn(NamedTuple):
    """One drawn call, the spec's partial entries before it (`BlockPoolSpec.entries`), and the
    error type it raised on the spec (None: it returned)."""

    call: Call
    entries: tuple
    raised: str | None


def drawn_calls(semantics, operations: tuple[str, ...], programs: int = 60, steps: int = 30) -> list[Drawn]:
    """The suited calls of `programs` fixed byte strings of `steps` calls each, on pools of 6 blocks."""
    generator, drawn = BlockCalls(), []
    for seed in range(programs):
        draws = ProgramDraws(bytes((seed * 131 + i * 29 + (i * i) % 7) % 256 for i in range(steps * 12)))
        model = BlockPoolSpec(6, semantics)
        for _ in range(steps):
            call = generator.draw_call(draws, model, operations, False)
            entries, raised = model.entries(), None
            try:
                getattr(model, call.op)(*call.args, **call.kwargs)
            except CacheError as error:
                raised = type(error).__name__
            drawn.append(Drawn(call, entries, raised))
    return drawn
