"""What `cacheproof prove` proves, said once, and the body of its JSON report.

The prover proves claims about the spec's model, never about a user's cache: z3 shows, from the
spec's own rules, that every operation of the model keeps the invariants, and the bounded
refinement check shows that the executable spec does what that model says on every small state.
A user's cache is held to the spec by `cacheproof check`. `PROVES` says this per spec kind; the
command prints it and the report carries it (`proves`).

The report body (`prove` in cacheproof/schemas/report-v1.json, docs/reports.md): the spec kind,
what was proved, the bounds, the verdict, and per semantics (`target`) every obligation with its
verdict, the refinement check and the waivers the proofs did not confirm.
"""

from __future__ import annotations

from typing import Any, Sequence

from cacheproof.cmdline.kind_words import check_command
from cacheproof.prove.induction import ProofResult
from cacheproof.spec.overrides import written_differences


def not_your_code(kind_name: str) -> str:
    """What the prover does not prove, and the command line that does hold code of `kind_name` to its spec."""
    return f"It proves nothing about your code: `{check_command(kind_name)}` tests it against the spec."


PROVES = {
    "cache": (
        "the tensor cache's spec: z3 proves from the spec's own rules (cacheproof.spec.cache.rules) that every "
        "operation keeps the invariants I1-I6, in the aggregate model (any number of entries), the liveness "
        "facts and the per-entry model of --slots slots; the bounded refinement check then runs the executable "
        "spec (cacheproof.spec.cache) on every small state and call and finds it doing what the model says. " + not_your_code("cache")
    ),
    "blocks": (
        "the KV block pool's spec: z3 proves that every operation keeps the block invariants, for any number "
        "of blocks and requests and in the bounded model of --slots blocks; the bounded refinement check then "
        "runs the executable spec (BlockPoolSpec) on every small reachable state and call and finds it doing "
        "what the model says. " + not_your_code("blocks")
    ),
    "radix": (
        "the radix cache's spec at the tree level: z3 proves that every step of its tree (split, new leaf, lock, "
        "unlock, evict, reset) keeps the tree well formed, lock counts at least their children's (R1), the size "
        "counters equal to the tokens of unlocked and locked nodes (R2), every KV slot free or in the tree (R3) "
        "and locked nodes in the tree (R6), in trees of up to --slots nodes, and the counts of free, evictable "
        "and protected tokens kept for any number of nodes; the bounded refinement check then runs the "
        "executable spec (RadixCacheSpec) on every small reachable state and tree-level call and finds a run "
        "of the model's steps doing the same. " + not_your_code("radix")
    ),
    "block-table": (
        "the index arithmetic of cacheproof's own block-table kernels (cacheproof.impl.block_ids, "
        "copy_block_offsets): z3 proves the fast paths equal the reference for every int32 id, and finds where "
        "seed 000's direct copy differs from the gather it replaced. It proves nothing about other kernels."
    ),
}
"""What `cacheproof prove` proves, per spec kind (and for --block-table)."""

PROVED = "proved"
COUNTEREXAMPLE = "counterexample"
WAIVED = "does not hold as waived"


def verdict_of(result: ProofResult) -> str:
    if result.proved:
        return PROVED
    return WAIVED if result.waived is not None else COUNTEREXAMPLE


def obligation(result: ProofResult) -> dict[str, Any]:
    """One obligation of the induction proofs, as the report writes it."""
    return {
        "model": result.model, "invariant": result.invariant, "operation": result.operation,
        "outcome": result.outcome, "verdict": verdict_of(result), "waived": result.waived,
        "seconds": round(result.seconds, 5),
        "counterexample": None if result.counterexample is None else result.counterexample.to_json(),
    }


def target(label: str, semantics: Any, ok: bool, seconds: float, obligations: Sequence[dict[str, Any]],
           refined: Any = None, unconfirmed: Sequence[str] = ()) -> dict[str, Any]:
    """The proofs under one semantics: `refined` is the refinement check's verdict (None: skipped)."""
    return {
        "label": label,
        "semantics": {} if semantics is None else written_differences(semantics),
        "ok": ok,
        "seconds": round(seconds, 3),
        "obligations": list(obligations),
        "refinement": None if refined is None else refined.to_json(),
        "unconfirmed_waivers": list(unconfirmed),
    }


def prove_body(spec: str, bound: dict[str, int | None], seconds: float, targets: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report body: `targets` as `target` writes them; ok when every target is."""
    return {
        "spec": spec, "proves": PROVES[spec], "bound": bound, "ok": all(t["ok"] for t in targets),
        "seconds": round(seconds, 3), "targets": list(targets),
    }


SEED_000_WAIVER = "ids outside [0, num_blocks): seed 000's claim holds only inside"


def block_table_target(claims: dict[str, Sequence[Any]], found: Sequence[Any], seconds: float) -> dict[str, Any]:
    """`prove --block-table` as one target: each claim of `claims` ({model: block_ids.ProofResult
    list}) an obligation, and each of seed 000's counterexamples (`found`) one that does not hold as
    expected; ok when every claim is proved and both counterexamples are found."""
    obligations = [
        {"model": model, "invariant": claim.name, "operation": "-", "outcome": claim.detail or "-",
         "verdict": PROVED if claim.proved else COUNTEREXAMPLE, "waived": None, "seconds": round(claim.seconds, 5),
         "counterexample": None}
        for model, results in claims.items() for claim in results
    ]
    obligations += [
        {"model": "seed 000 copy", "invariant": "no external behavior change", "operation": "copy_block_offsets",
         "outcome": example.name, "verdict": WAIVED, "waived": SEED_000_WAIVER, "seconds": round(example.seconds, 5),
         "counterexample": {"num_blocks": example.num_blocks, "block_id": example.block_id, "before": example.before,
                            "after": example.after, "python": example.snippet}}
        for example in found
    ]
    ok = all(claim.proved for results in claims.values() for claim in results) and len(found) == 2
    return target("block-table", None, ok, seconds, obligations)

