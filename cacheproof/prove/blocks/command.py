"""`cacheproof prove --spec blocks`: the block pool's proofs and the refinement check.

Runs, under each semantics asked for (`--profile` of spec/blocks/semantics.py, `--semantics
FIELD=VALUE,...`, `--all-semantics`): the generic-block proofs (any number of blocks and
requests), the bounded induction proofs at N blocks (`--slots N`; the prove command's default
of 8 slots means the blocks default, 5), the simulation of the bounded model by the generic one at
N, and the bounded refinement check (`--refine-capacity`: blocks of the refined pool, default 3;
`--refine-entries`: the largest sum of ref counts of a reached state, default 3; `--no-refine`
skips it). One line per (model, invariant, operation); a counterexample prints as runnable
Python. Exit 0 when every obligation is proved and the spec refines the model, 1 otherwise, 2 on
a bad flag.
"""

from __future__ import annotations

import argparse

from cacheproof.prove.blocks import generic, proofs, refinement
from cacheproof.prove.induction import ProofResult
from cacheproof.prove.option_targets import OptionProver, TargetReport, run_option_kind
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT, BLOCK_OPTIONS, BLOCK_PROFILES


def bound_of(args: argparse.Namespace) -> refinement.Bound | None:
    """--refine-capacity blocks (at least 2) and --refine-entries as the largest sum of ref counts."""
    if getattr(args, "no_refine", False):
        return None
    return refinement.Bound(
        num_blocks=max(2, getattr(args, "refine_capacity", refinement.DEFAULT_BOUND.num_blocks)),
        max_refs=getattr(args, "refine_entries", refinement.DEFAULT_BOUND.max_refs),
    )


def summary_lines(results: list[ProofResult]) -> list[str]:
    """One line per (model, invariant, operation), its outcomes' times summed, and B1's argument."""
    groups: dict[tuple[str, str, str], list[ProofResult]] = {}
    for r in results:
        groups.setdefault((r.model, r.invariant, r.operation), []).append(r)
    lines = []
    for (model, invariant, operation), group in groups.items():
        failed = [r.outcome for r in group if not r.proved]
        verdict = "COUNTEREXAMPLE (" + ", ".join(failed) + ")" if failed else "proved"
        seconds = sum(r.seconds for r in group)
        lines.append(f"{model:<8} {invariant:<4} {operation:<13} {verdict:<40} {seconds * 1000:8.1f} ms")
    lines.append("generic  B1   (every operation): follows from Q for every block: the queue's blocks are the non-null blocks at ref 0")
    return lines


def size_words(report: TargetReport) -> str:
    """The solver seconds of each model and the bounded model's size."""
    seconds: dict[str, float] = {}
    for r in report.results:
        seconds[r.model] = seconds.get(r.model, 0.0) + r.seconds
    return "; solver seconds: " + ", ".join(f"{m} {s:.3f}" for m, s in seconds.items()) + f" (blocks={report.size})"


PROVER = OptionProver(
    kind="blocks", words="block", profiles=BLOCK_PROFILES, options=BLOCK_OPTIONS, contract=BLOCK_CONTRACT,
    default_size=proofs.DEFAULT_BLOCKS, size_rule="the block model needs >= 2 blocks (the null block and one usable)",
    size_field="blocks", bound=bound_of,
    bound_fields=lambda bound: {"refine_blocks": bound.num_blocks, "refine_refs": bound.max_refs},
    prove=lambda blocks, semantics: (generic.prove(semantics) + proofs.prove(blocks, semantics)
                                     + generic.simulation(blocks, semantics)),
    refine=lambda bound, semantics: refinement.check_refinement(bound, semantics=semantics),
    result_lines=summary_lines, size_words=size_words,
)


def run(args: argparse.Namespace) -> int:
    return run_option_kind(args, PROVER)
