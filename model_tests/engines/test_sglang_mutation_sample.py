"""`cacheproof mutate` on SGLang's real RadixCache, a fixed sample of 5 mutants (the CI engines step):
the command keeps working on SGLang's code, and each sampled mutant keeps the fate measured in
docs/mutation-duel.md. SGLang's own tests are not committed, so only the cacheproof side runs here.
Skipped without SGLang."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "sglang.srt.mem_cache.radix_cache",
    reason="SGLang's RadixCache does not import: build the engines venv with `bash tools/engines_venv.sh VENV`",
)

from model_tests.mutation_samples import check_fixed_sample  # noqa: E402

KILLED = {
    99: "RadixKey.match_at loses its token arrays (t0, t1): every match and insert below the root raises",
    375: "inc_lock_ref no longer adds a newly locked node to protected_size",
    435: "a match ending inside a node splits it but answers the node above as its last: a lock on the match locks too little",
    533: "_delete_leaf leaves the evicted leaf among the evictable leaves: a later evict frees it again",
}
"""Mutants cacheproof kills, by number (SGLang 0.5.23's radix_cache.py), with what they change;
SGLang's unit tests kill 99 and 375 and miss 435 and 533 (docs/mutation-duel.md)."""
SURVIVING = {
    40: "RadixKey[0] raises IndexError (idx < 1 taken for a negative index): no RadixCache call indexes a key by int",
}
"""The mutant only SGLang's tests kill: RadixKey's int indexing, which no tree operation reaches."""


def test_the_fixed_sample_keeps_its_fates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    check_fixed_sample(
        "sglang.srt.mem_cache.radix_cache",
        ["--impl", "cacheproof.engines.sglang:radix_cache", "--spec", "radix", "--profile", "sglang-radix",
         "--examples", "30", "--check-args", "--call-timeout 60"],
        KILLED, SURVIVING, 592, tmp_path, monkeypatch, capsys)
