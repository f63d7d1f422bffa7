"""z3 bit-vector proofs that the vectorized block-id transform equals the legacy semantics.

The reference (`block_ids_reference`) maps an int32 page p >= -1 to
``0 if p == -1 else (p * scale) // divisor`` with Python's exact integers and raises
OverflowError when that exceeds INT32_MAX. The fast paths instead:

1. check once, on the largest page only, that ``(max(hi, 0) * scale) // divisor <= INT32_MAX``
   (exact Python integers) and take the int64 path only when ``max(hi, 0) * scale`` fits int64;
2. compute ``max(p, 0)`` in int32, widen to int64, multiply by scale, divide by divisor
   (skipped when divisor == 1), and truncate to int32.

Each claim below is stated as "no counterexample exists" over all int32 pages and all 64-bit
scale/divisor >= 1 (the int64 path's range). Exact integers are modelled by 128-bit vectors,
wide enough that p * scale (< 2**94) never wraps there. Division in the model is bvsdiv, i.e.
truncation as in C and Triton; the claims show it equals exact floor division, which is what
numpy and torch compute for these non-negative operands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import z3

__all__ = ["ProofResult", "prove_block_transform"]

_EXACT = 128
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProofResult:
    """One claim: proved (z3 found no counterexample), how long it took, and any counterexample."""

    name: str
    proved: bool
    seconds: float
    detail: str = ""


def _exact(value: z3.BitVecRef, signed: bool) -> z3.BitVecRef:
    extra = _EXACT - value.size()
    return z3.SignExt(extra, value) if signed else z3.ZeroExt(extra, value)


def _exact_const(value: int) -> z3.BitVecNumRef:
    return z3.BitVecVal(value, _EXACT)


def _reference(page: z3.BitVecRef, scale: z3.BitVecRef, divisor: z3.BitVecRef) -> z3.BitVecRef:
    """The legacy block id in exact integers: 0 for BAD (-1), else (p * scale) // divisor."""
    p, s, d = _exact(page, True), _exact(scale, False), _exact(divisor, False)
    return z3.If(page == -1, _exact_const(0), z3.UDiv(p * s, d))


def _fast(page: z3.BitVecRef, scale: z3.BitVecRef, divisor: z3.BitVecRef, divide: bool) -> z3.BitVecRef:
    """The vectorized transform: int32 max(p, 0), int64 multiply and divide, int32 result."""
    clamped = z3.If(page < 0, z3.BitVecVal(0, 32), page)
    wide = z3.SignExt(32, clamped) * scale
    if divide:
        wide = wide / divisor  # bvsdiv: truncating signed division
    return z3.Extract(31, 0, wide)


def _check(name: str, premises: list[z3.BoolRef], claim: z3.BoolRef, timeout_ms: int) -> ProofResult:
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


def prove_block_transform(timeout_s: float = 300.0) -> list[ProofResult]:
    """Prove, for every int32 page p >= -1 and 64-bit scale, divisor in [1, 2**63):

    - identity: with scale == divisor == 1, max(p, 0) is the reference value;
    - divisor == 1 branch and divisor > 1 branch: whenever the largest product fits int64 and
      the overflow check passes, the int64 transform truncated to int32 equals the reference
      value exactly (so the int32 cast loses nothing);
    - overflow check on the maximum suffices: the reference is monotone in p, so if the largest
      page passes the check every page does, and if it fails the reference raises too;
    - the int64 guard on the maximum suffices: p <= hi and hi * scale fits int64 imply
      p * scale fits int64.
    """
    timeout_ms = int(timeout_s * 1000)
    page, high = z3.BitVecs("page high", 32)
    scale, divisor = z3.BitVecs("scale divisor", 64)
    in_range = [page >= -1, z3.UGE(scale, 1), z3.ULE(scale, _INT64_MAX), z3.UGE(divisor, 1), z3.ULE(divisor, _INT64_MAX)]
    clamped_exact = z3.If(page == -1, _exact_const(0), _exact(page, True))
    product_fits_int64 = z3.ULE(clamped_exact * _exact(scale, False), _exact_const(_INT64_MAX))
    reference = _reference(page, scale, divisor)
    passes_check = z3.ULE(reference, _exact_const(_INT32_MAX))
    matches = lambda fast: _exact(fast, True) == reference  # noqa: E731
    identity = z3.If(page < 0, z3.BitVecVal(0, 32), page)
    one = z3.BitVecVal(1, 64)
    results = [
        _check(
            "identity path: scale == divisor == 1 gives max(p, 0)",
            [page >= -1],
            _exact(identity, True) == _reference(page, one, one),
            timeout_ms,
        )
    ]
    results.append(
        _check(
            "divisor == 1 branch: int64 p * scale, cast to int32, equals the reference",
            [*in_range, divisor == 1, product_fits_int64, passes_check],
            matches(_fast(page, scale, divisor, divide=False)),
            timeout_ms,
        )
    )
    results.append(
        _check(
            "divisor > 1 branch: int64 p * scale // divisor, cast to int32, equals the reference",
            [*in_range, z3.UGT(divisor, 1), product_fits_int64, passes_check],
            matches(_fast(page, scale, divisor, divide=True)),
            timeout_ms,
        )
    )
    results.append(
        _check(
            "overflow check on the largest page suffices (reference is monotone in p)",
            [*in_range, high >= page],
            z3.ULE(reference, _reference(high, scale, divisor)),
            timeout_ms,
        )
    )
    high_exact = z3.If(high == -1, _exact_const(0), _exact(high, True))
    results.append(
        _check(
            "int64 guard on the largest page suffices (p <= hi, hi * scale fits => p * scale fits)",
            [*in_range, high >= page, z3.ULE(high_exact * _exact(scale, False), _exact_const(_INT64_MAX))],
            product_fits_int64,
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
