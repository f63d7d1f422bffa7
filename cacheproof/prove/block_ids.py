"""z3 proofs that the vectorized block-id transform equals the legacy semantics.

The reference (`block_ids_reference`) maps an int32 page p >= -1 to
``0 if p == -1 else (p * scale) // divisor`` with Python's exact integers and raises
OverflowError when that exceeds INT32_MAX. The fast paths instead:

1. check once, on the largest page hi only, that ``(max(hi, 0) * scale) // divisor <= INT32_MAX``
   (exact Python integers) and take the int64 path only when ``max(hi, 0) * scale`` fits int64
   (otherwise they compute with Python integers, which is the reference formula itself);
2. compute ``max(p, 0)`` in int32, then multiply by scale and divide by divisor (skipped when
   divisor == 1) in int32 when scale, divisor and the largest product fit int32, else widened
   to int64 and truncated back to int32.

The bit-vector claims hold for every int32 page and every 64-bit scale, divisor in [1, 2**63)
(the int64 path's whole range). Exact products are 128-bit vectors, wide enough that
p * scale (< 2**94) never wraps. Under the int64 guard the exact product is below 2**63, so the
exact quotient is 64-bit unsigned division of that product, once the product is proved exact
(claim 2); z3 cannot bit-blast a 128-bit division against a 64-bit one in reasonable time. The fast
division is bvsdiv (truncation, as in C and Triton); the claims show it equals floor division,
which numpy and torch compute, for these operands. The two claims about the checks on the
largest page are about exact arithmetic and use z3's integers.

Seed 000 (`prove_copy_vs_gather`, `seed_000_counterexamples`): TensorRT-LLM's
`BlockManager.copy_block_offsets` wrote ``arange(num_blocks, int32)[tensor(ids, int32)]`` into a
row; seed 000 writes ``tensor(ids, int32)`` directly and claims "no external behavior change". The
model follows torch's indexing rule: an index i is valid when -num_blocks <= i < num_blocks, a
negative one reads entry num_blocks + i, anything else raises IndexError. The claims: the copy
equals the gather exactly for ids in [0, num_blocks) (so the claim holds there and only there),
row by row too, and cacheproof's `copy_block_offsets(..., num_blocks=N)` writes exactly where they
agree and raises InvalidArgumentError elsewhere. Outside that range z3 finds counterexamples (an id
>= num_blocks: IndexError before, the id written after; -1: the last block before, -1 after), each
printed as a runnable Python snippet. Scope: every int32 id, every num_blocks in [0, 2**31].
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

__all__ = ["Counterexample", "ProofResult", "prove_block_transform", "prove_copy_vs_gather", "seed_000_counterexamples"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProofResult:
    """One claim: proved (z3 found no counterexample), how long it took, and why not if not."""

    name: str
    proved: bool
    seconds: float
    detail: str = ""


def _check(name: str, premises: list[z3.BoolRef], claim: z3.BoolRef, timeout_ms: int) -> ProofResult:
    """Prove `claim` under `premises` by showing that its negation is unsatisfiable."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*premises)
    solver.add(z3.Not(claim))
    start = time.perf_counter()
    verdict = solver.check()
    seconds = time.perf_counter() - start
    if verdict == z3.unsat:
        return ProofResult(name, True, seconds)
    if verdict == z3.sat:
        return ProofResult(name, False, seconds, f"counterexample: {solver.model()}")
    return ProofResult(name, False, seconds, f"unknown: {solver.reason_unknown()}")


def _clamp(page: z3.BitVecRef) -> z3.BitVecRef:
    """max(p, 0) on int32: what the fast paths compute first (maps BAD_PAGE_INDEX to 0)."""
    return z3.If(page < 0, z3.BitVecVal(0, 32), page)


def prove_block_transform(timeout_s: float = 120.0) -> list[ProofResult]:
    """Prove, for every int32 page p >= -1 and 64-bit scale, divisor in [1, 2**63):

    - identity path: with scale == divisor == 1, max(p, 0) is the reference value;
    - int64 product: when max(p, 0) * scale fits int64, the int64 product is exact,
      non-negative, and 0 for BAD_PAGE_INDEX;
    - divisor == 1 branch: the int64 product truncated to int32 equals the reference value
      whenever the overflow check passes;
    - divisor > 1 branch: for every exact non-negative int64 product (the previous claim),
      dividing by divisor (truncating, signed) and truncating to int32 equals the exact floor
      quotient whenever the check passes;
    - int32 path (the numpy path's common case): when scale and max(p, 0) * scale fit int32,
      the int32 product is exact, and for every such non-negative product and divisor in
      [1, 2**31) the truncating int32 divide is the floor quotient;
    - overflow check on the largest page suffices: the reference is monotone in p;
    - int64 guard on the largest page suffices: p <= hi and hi * scale fits int64 imply
      p * scale fits int64.
    """
    timeout_ms = int(timeout_s * 1000)
    page = z3.BitVec("page", 32)
    scale, divisor = z3.BitVecs("scale divisor", 64)
    in_range = [page >= -1, z3.UGE(scale, 1), z3.ULE(scale, _INT64_MAX), z3.UGE(divisor, 1), z3.ULE(divisor, _INT64_MAX)]
    clamped = _clamp(page)
    exact_product = z3.ZeroExt(96, clamped) * z3.ZeroExt(64, scale)
    fits_int64 = z3.ULE(exact_product, _INT64_MAX)
    int64_product = z3.SignExt(32, clamped) * scale
    bad = page == -1
    zero32 = z3.BitVecVal(0, 32)

    def fits_int32(value: z3.BitVecRef) -> z3.BoolRef:
        return z3.ULE(value, z3.BitVecVal(_INT32_MAX, value.size()))

    def as_int32(value: z3.BitVecRef) -> z3.BitVecRef:
        return z3.Extract(31, 0, value)

    one = z3.BitVecVal(1, 64)
    reference_div1 = z3.If(bad, z3.BitVecVal(0, 128), exact_product)
    product = z3.BitVec("product", 64)  # any exact, non-negative int64 product (claim 2)
    int32_product = clamped * z3.Extract(31, 0, scale)
    product32, divisor32 = z3.BitVecs("product32 divisor32", 32)  # int32 product (claim 5), divisor
    exact_quotient = z3.UDiv(product, divisor)
    results = [
        _check(
            "identity path: scale == divisor == 1 gives max(p, 0)",
            [page >= -1],
            clamped == z3.If(bad, zero32, as_int32(z3.UDiv(z3.SignExt(32, page) * one, one))),
            timeout_ms,
        ),
        _check(
            "int64 product is exact when max(p, 0) * scale fits int64",
            [*in_range, fits_int64],
            z3.And(
                int64_product >= 0,
                z3.ZeroExt(64, int64_product) == exact_product,
                z3.Implies(bad, int64_product == 0),
            ),
            timeout_ms,
        ),
        _check(
            "divisor == 1 branch: int32(int64 max(p, 0) * scale) equals the reference",
            [*in_range, divisor == 1, fits_int64, fits_int32(reference_div1)],
            z3.ZeroExt(96, as_int32(int64_product)) == reference_div1,
            timeout_ms,
        ),
        _check(
            "divisor > 1 branch: int32(exact int64 product / divisor) equals the floor quotient",
            [product >= 0, z3.UGT(divisor, 1), z3.ULE(divisor, _INT64_MAX), fits_int32(exact_quotient)],
            z3.ZeroExt(32, as_int32(product / divisor)) == exact_quotient,
            timeout_ms,
        ),
        _check(
            "int32 path: when scale and max(p, 0) * scale fit int32, the int32 product is exact",
            [*in_range, z3.ULE(scale, _INT32_MAX), z3.ULE(exact_product, _INT32_MAX)],
            z3.And(
                int32_product >= 0,
                z3.ZeroExt(96, int32_product) == exact_product,
                z3.Implies(bad, int32_product == 0),
            ),
            timeout_ms,
        ),
        _check(
            "int32 path: int32(exact int32 product / divisor) equals the floor quotient",
            [product32 >= 0, divisor32 >= 1],
            product32 / divisor32 == z3.UDiv(product32, divisor32),
            timeout_ms,
        ),
    ]
    p, hi, s, d = z3.Ints("p hi s d")

    def legacy(x: z3.ArithRef) -> z3.ArithRef:
        return z3.If(x == -1, 0, (x * s) / d)

    results.append(
        _check(
            "overflow check on the largest page suffices (reference monotone in p)",
            [p >= -1, hi >= p, s >= 1, d >= 1],
            legacy(p) <= legacy(hi),
            timeout_ms,
        )
    )
    results.append(
        _check(
            "int64 guard on the largest page suffices (p <= hi, hi * scale fits => p * scale fits)",
            [p >= 0, hi >= p, s >= 1, hi * s <= _INT64_MAX],
            p * s <= _INT64_MAX,
            timeout_ms,
        )
    )
    return results


# ------------------------------------------------------------------ seed 000: copy vs identity gather

_Outcome = z3.Datatype("CopyOutcome")
_Outcome.declare("wrote", ("value", z3.BitVecSort(64)))
_Outcome.declare("index_error")
_Outcome.declare("invalid_argument")
_Outcome = _Outcome.create()


class _CopyModel:
    """One int32 block id `block_id` and the pool's `num_blocks` in [0, 2**31], with what each
    version of copy_block_offsets does with the id (an `_Outcome`)."""

    def __init__(self, block_id: z3.BitVecRef, num_blocks: z3.BitVecRef) -> None:
        self.block_id = block_id
        self.num_blocks = num_blocks
        self.wide = z3.SignExt(32, block_id)  # tensor(ids, int32), widened for exact comparisons
        self.premises = [z3.ULE(num_blocks, 2**31)]
        self.in_pool = z3.And(self.wide >= 0, self.wide < num_blocks)

    def gather(self, wide: z3.BitVecRef | None = None) -> z3.DatatypeRef:
        """Before seed 000: arange(num_blocks)[id] under torch's indexing rule."""
        i = self.wide if wide is None else wide
        k = z3.BitVec("k", 64)
        arange = z3.Lambda([k], k)  # base_block_offsets[k] == k for every valid k
        valid = z3.And(i >= -self.num_blocks, i < self.num_blocks)
        entry = z3.If(i < 0, i + self.num_blocks, i)
        return z3.If(valid, _Outcome.wrote(z3.Select(arange, entry)), _Outcome.index_error)

    def copy(self, wide: z3.BitVecRef | None = None) -> z3.DatatypeRef:
        """Seed 000: the id itself."""
        return _Outcome.wrote(self.wide if wide is None else wide)

    def checked(self) -> z3.DatatypeRef:
        """cacheproof's copy_block_offsets(..., num_blocks=N): the id if in [0, N), else an error."""
        return z3.If(self.in_pool, _Outcome.wrote(self.wide), _Outcome.invalid_argument)


def prove_copy_vs_gather(timeout_s: float = 60.0) -> list[ProofResult]:
    """Prove, for every int32 id and num_blocks in [0, 2**31]:

    - seed 000's direct copy equals the identity gather if and only if 0 <= id < num_blocks;
    - a whole row: when every id of a row is in [0, num_blocks), the gathered and copied rows are
      equal cell by cell (ids as a z3 array, any row length);
    - cacheproof's checked copy writes the id exactly where the two agree and raises
      InvalidArgumentError everywhere else (so it never writes what the gather would not).
    """
    timeout_ms = int(timeout_s * 1000)
    model = _CopyModel(z3.BitVec("block_id", 32), z3.BitVec("num_blocks", 64))
    ids = z3.Array("row_ids", z3.BitVecSort(64), z3.BitVecSort(32))
    length, column = z3.BitVecs("length column", 64)

    def at(c: z3.BitVecRef) -> z3.BitVecRef:
        return z3.SignExt(32, ids[c])

    c = z3.BitVec("c", 64)
    row_in_pool = z3.ForAll([c], z3.Implies(z3.ULT(c, length), z3.And(at(c) >= 0, at(c) < model.num_blocks)))
    agree = model.gather() == model.copy()
    return [
        _check(
            "seed 000: direct copy == identity gather exactly when 0 <= id < num_blocks",
            model.premises,
            agree == model.in_pool,
            timeout_ms,
        ),
        _check(
            "seed 000: a row whose ids are all in [0, num_blocks) is written the same, cell by cell",
            [*model.premises, row_in_pool],
            z3.ForAll([c], z3.Implies(z3.ULT(c, length), model.gather(at(c)) == model.copy(at(c)))),
            timeout_ms,
        ),
        _check(
            "cacheproof copy_block_offsets(num_blocks=N) writes where they agree, else InvalidArgumentError",
            model.premises,
            model.checked() == z3.If(agree, model.copy(), _Outcome.invalid_argument),
            timeout_ms,
        ),
    ]


@dataclass(frozen=True)
class Counterexample:
    """A concrete id where seed 000's copy and the identity gather differ, and its snippet."""

    name: str
    num_blocks: int
    block_id: int
    before: str  # what the identity gather does: "IndexError" or the written value
    after: int  # what the direct copy writes
    seconds: float
    snippet: str


def _outcome_text(value: z3.DatatypeRef) -> str:
    if z3.is_true(z3.simplify(_Outcome.is_wrote(value))):
        return str(z3.simplify(_Outcome.value(value)).as_signed_long())
    return "IndexError" if z3.is_true(z3.simplify(_Outcome.is_index_error(value))) else "InvalidArgumentError"


def seed_000_counterexamples(timeout_s: float = 60.0) -> list[Counterexample]:
    """z3 refutes "no external behavior change" for every int32 id: the smallest pool of at least
    two blocks (so a wrapped id differs from block 0, which is also what a zeroed row holds) and
    the nearest id for each way out of range (an id >= num_blocks; a negative id, which z3 pushes
    to -1). Each comes with a runnable snippet whose printout shows the difference."""
    cases = [
        ("an id >= num_blocks: the gather raised IndexError, the copy writes the id",
         lambda m: m.wide >= m.num_blocks, False),
        ("a negative id: the gather wrapped it to num_blocks + id, the copy writes it",
         lambda m: m.wide < 0, True),
    ]
    found = []
    for name, where, nearest_to_zero_from_below in cases:
        model = _CopyModel(z3.BitVec("block_id", 32), z3.BitVec("num_blocks", 64))
        solver = z3.Optimize()
        solver.set("timeout", int(timeout_s * 1000))
        solver.add(*model.premises, model.num_blocks >= 2, where(model), model.gather() != model.copy())
        solver.minimize(model.num_blocks)
        signed_id = z3.BV2Int(model.block_id, is_signed=True)
        if nearest_to_zero_from_below:
            solver.maximize(signed_id)
        else:
            solver.minimize(signed_id)
        start = time.perf_counter()
        verdict = solver.check()
        seconds = time.perf_counter() - start
        if verdict != z3.sat:
            continue
        values = solver.model()
        num_blocks = values.eval(model.num_blocks).as_long()
        block_id = values.eval(model.block_id).as_signed_long()
        before = _outcome_text(values.eval(model.gather(), model_completion=True))
        after = int(_outcome_text(values.eval(model.copy(), model_completion=True)))
        snippet = _snippet(num_blocks, block_id, before, after)
        found.append(Counterexample(name, num_blocks, block_id, before, after, seconds, snippet))
    return found


def _snippet(num_blocks: int, block_id: int, before: str, after: int) -> str:
    """A runnable reproduction: the identity gather, seed 000's copy, and cacheproof's check."""
    expected_before = "IndexError: ..." if before == "IndexError" else f"[{before}]"
    return f"""\
# seed 000 counterexample (z3): num_blocks={num_blocks}, block id {block_id}
# expected printout: before {expected_before}; after [{after}]; cacheproof InvalidArgumentError
import torch
from cacheproof.impl.block_table import copy_block_offsets
from cacheproof.spec.errors import InvalidArgumentError

num_blocks, block_ids = {num_blocks}, [{block_id}]
base_block_offsets = torch.arange(num_blocks, dtype=torch.int32)  # the buffer seed 000 removed
ids = torch.tensor(block_ids, dtype=torch.int32, device="cpu")

before = torch.zeros((1, 1), dtype=torch.int32)
try:
    before[0, 0 : len(block_ids)].copy_(base_block_offsets[ids])  # before seed 000: identity gather
    print("before seed 000:", before[0].tolist())
except IndexError as error:
    print("before seed 000: IndexError:", error)

after = torch.zeros((1, 1), dtype=torch.int32)
after[0, 0 : len(block_ids)].copy_(ids)  # seed 000: direct copy
print("after seed 000: ", after[0].tolist())

checked = torch.zeros((1, 1), dtype=torch.int32)
try:
    copy_block_offsets(checked, [0], [block_ids], num_blocks=num_blocks)
    print("cacheproof:     ", checked[0].tolist())
except InvalidArgumentError as error:
    print("cacheproof:      InvalidArgumentError:", error)
"""


def _print_results(title: str, results: list[ProofResult]) -> None:
    print(title)
    for result in results:
        verdict = "proved" if result.proved else "NOT PROVED"
        print(f"{verdict:10} {result.seconds:8.3f} s  {result.name} {result.detail}")


def main(json_path: str | None = None, quiet: bool = False) -> int:
    """Print each claim with its verdict and time, then seed 000's counterexamples as snippets
    (`quiet`: the last line only), and write the JSON report to `json_path` if given; exit status 0
    only if every claim is proved and both counterexamples are found."""
    from cacheproof.cmdline.reports import write_report
    from cacheproof.prove.report import PROVES, block_table_target, prove_body

    started = time.perf_counter()
    claims = {"block-id transform": prove_block_transform(), "seed 000 copy": prove_copy_vs_gather()}
    found = seed_000_counterexamples()
    seconds = time.perf_counter() - started
    report = block_table_target(claims, found, seconds)
    if json_path is not None:
        write_report(json_path, "prove", prove_body("block-table", {}, seconds, [report]))
    if not quiet:
        print(f"proving {PROVES['block-table']}\n")
        _print_results("block-id transform (block_ids_* against block_ids_reference)", claims["block-id transform"])
        _print_results("\nseed 000: direct copy against the identity gather it replaced", claims["seed 000 copy"])
        print('\nseed 000 says "no external behavior change"; it holds only for ids in [0, num_blocks).')
        for example in found:
            print(
                f"\ncounterexample ({example.seconds:.3f} s): {example.name}\n"
                f"  num_blocks={example.num_blocks}, id={example.block_id}: "
                f"before seed 000 {example.before}, after seed 000 writes {example.after}\n"
            )
            print(example.snippet)
    results = [claim for found_claims in claims.values() for claim in found_claims]
    print(f"{'proved' if report['ok'] else 'NOT PROVED'}: {len(results)} claims, {len(found)} counterexamples "
          f"to seed 000 found; total {seconds:.3f} s")
    return 0 if report["ok"] else 1

if __name__ == "__main__":
    raise SystemExit(main())
