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
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

__all__ = ["ProofResult", "prove_block_transform"]

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


def main() -> int:
    """Print each claim with its verdict and time; exit status 0 only if all are proved."""
    results = prove_block_transform()
    for result in results:
        verdict = "proved" if result.proved else "NOT PROVED"
        print(f"{verdict:10} {result.seconds:8.3f} s  {result.name} {result.detail}")
    print(f"total {sum(r.seconds for r in results):.3f} s")
    return 0 if all(r.proved for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
