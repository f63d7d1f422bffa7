"""`cacheproof prove --spec radix`: the radix cache's proofs and the refinement check.

Runs, under the semantics asked for (`--profile` of spec/radix/semantics.py, `--semantics
FIELD=VALUE,...`; `--all-semantics`: every profile and option): the aggregate proofs (any number
of nodes), the induction proofs in trees of up to N nodes (`--slots N`; the prove command's
default of 8 slots means the radix default, 4), and the bounded refinement check of the spec as
written (`--refine-capacity`: KV slots 1..N, default 3; `--refine-entries`: states per size,
default 25; `--no-refine` skips it). The model is the tree level, whose steps none of the
semantics' fields change (the page size, misuse and access stamps change which calls happen and
what times they write, never a lock, a count or a slot): every target proves the same
obligations, and the refinement check runs the spec under each. One line per (model, invariant,
operation); a counterexample prints as its states. Exit 0 when every obligation is proved and
the spec refines the model, 1 otherwise, 2 on a bad flag.
"""

from __future__ import annotations

import argparse
from functools import lru_cache

from cacheproof.prove.cache.refinement_domain import DEFAULT_BOUND as CACHE_BOUND
from cacheproof.prove.induction import ProofResult
from cacheproof.prove.option_targets import OptionProver, TargetReport, run_option_kind
from cacheproof.prove.radix import proofs, refinement
from cacheproof.spec.radix.semantics import RADIX_CONTRACT, RADIX_OPTIONS, RADIX_PROFILES


def bound_of(args: argparse.Namespace) -> refinement.Bound | None:
    """The refinement bound: --refine-capacity KV slots and --refine-entries states per size, each
    left at `cacheproof prove`'s default (the tensor cache's) read as the radix default."""
    if getattr(args, "no_refine", False):
        return None
    capacity = getattr(args, "refine_capacity", CACHE_BOUND.max_capacity)
    states = getattr(args, "refine_entries", CACHE_BOUND.max_entries)
    return refinement.DEFAULT_BOUND._replace(
        max_slots=refinement.DEFAULT_BOUND.max_slots if capacity == CACHE_BOUND.max_capacity else capacity,
        max_states=refinement.DEFAULT_BOUND.max_states if states == CACHE_BOUND.max_entries else max(1, states),
    )


@lru_cache(maxsize=4)
def tree_proofs(nodes: int) -> list[ProofResult]:
    """The tree level's obligations, the same under every semantics (the module docstring says why)."""
    return proofs.prove(nodes)


def result_lines(results: list[ProofResult]) -> list[str]:
    return [f"{r.model:<10} {r.invariant:<6} {r.operation:<8} {'proved' if r.proved else 'COUNTEREXAMPLE':<16} "
            f"{r.seconds * 1000:8.1f} ms" for r in results]


PROVER = OptionProver(
    kind="radix", words="radix", profiles=RADIX_PROFILES, options=RADIX_OPTIONS, contract=RADIX_CONTRACT,
    default_size=proofs.DEFAULT_NODES, size_rule="the radix model needs trees of >= 2 nodes (a split makes two)",
    size_field="nodes", bound=bound_of,
    bound_fields=lambda bound: {"refine_slots": bound.max_slots, "refine_states": bound.max_states},
    prove=lambda nodes, semantics: tree_proofs(nodes),
    refine=lambda bound, semantics: refinement.check_refinement(bound, semantics),
    result_lines=result_lines,
    size_words=lambda report: f" (trees of up to {report.size} nodes, and any number in the aggregate model)",
)


def run(args: argparse.Namespace) -> int:
    return run_option_kind(args, PROVER)
