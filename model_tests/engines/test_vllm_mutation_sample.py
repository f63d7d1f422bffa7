"""`cacheproof mutate` on vLLM's real BlockPool, fixed samples of mutants (the CI engines step):
the command keeps working on the engine's code, and each sampled mutant keeps the fate measured in
docs/mutation-duel.md. vLLM's own tests are not committed, so only the cacheproof side runs here.
Skipped without vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "vllm.v1.core.block_pool",
    reason="vLLM is not installed: build the engines venv with `bash tools/engines_venv.sh VENV`",
)

from model_tests.mutation_samples import check_fixed_sample  # noqa: E402

KILLED = {
    1: "BlockHashToBlockMap.__init__ no longer keeps the block list: every lookup raises",
    14: "contain() reads the duplicates map when there is none",
    27: "BlockHashToBlockMap.clear() leaves the single-block map: hashes survive reset_prefix_cache",
    40: "num_hash_lookahead_tokens never set: the KV-cache-events path raises AttributeError",
    53: "get_cached_block() returns None on a hit and the block list on a miss",
    66: "the hash and the group id exchanged when the group suffix is made",
    80: "a cached block's key made with - instead of + (bytes: TypeError)",
    93: "the BlockStored event's parent hash chosen the wrong way round (the events view)",
    119: "extra_keys_list.appendleft on a list: AttributeError on the events path",
    132: "reused-block events emitted the wrong way round (the events view, hit_events=stored)",
    145: "the reused-block events' extra keys built from exchanged arguments: AttributeError",
    70: "cache_full_blocks' block_mask read inverted: the blocks it should cache are skipped (the adapter "
        "masks the null blocks)",
    315: "unpin_blocks puts the released blocks with appendleft on a list: AttributeError",
    333: "is_block_writable's `not is_null` dropped: no block in use is writable",
    106: "the events loop of cache_full_blocks stops at a null block: fewer lookahead tokens and extra "
         "keys than hashes (the events view reads them with the tokens)",
    343: "free_blocks keeps another pool's block (block.pool not followed): it never rejoins its "
         "own pool's free queue (the adapter frees through a peer pool)",
}
"""Mutants cacheproof kills, by number (vLLM 0.34.0's block_pool.py), with what they change; #93,
#106, #132 and #145 change only what vLLM's KV cache events say (the events view of the block
kind)."""
SURVIVING = {
    130: "emit_cached_block_events' early return for no hit made `and`: the same return is reached one "
         "line later, as no hash is named",
}
"""A mutant cacheproof misses (docs/mutation-duel.md: vLLM's tests miss it too)."""


UNCACHED_KILLED = {
    291: "get_new_blocks with caching off: its assert that a handed-out block has ref 0 inverted",
    293: "get_new_blocks with caching off: a handed-out block's ref_cnt never set to 1",
    295: "get_new_blocks with caching off: a handed-out block's ref_cnt set to 0",
}
"""Mutants in the enable_caching=False branch of get_new_blocks, which vLLM's tests kill and the
duel's pool (caching on) never reaches: killed under the profile of a pool built without caching."""
UNCACHED_SURVIVING = {296: "the metrics collector's call in that branch: no collector"}


PARTIAL_KILLED = {
    5: "contain()'s test of the duplicates map inverted: `block_id in None` raises TypeError once a "
       "block with a hash is given another (only partial entries do that)",
    77: "cache_full_blocks' cover one block too many: a later partial entry goes beside the hash "
        "instead of replacing it",
    174: "cache_partial_block(replace_existing_hashes=True) no longer removes the block's entries: "
         "NameError on the replace path",
    188: "a partial entry's cover divided instead of multiplied by hash_block_size",
    226: "a partial entry keyed by the hash one unit before its boundary",
    261: "the further hashes' set made with exchanged setdefault arguments: TypeError",
    269: "move_block_hashes drops the source's entries without giving them to the copy",
}
"""Mutants in the partial prefix-cache entries (cache_partial_block, move_block_hashes and what they
read), which vLLM's tests kill and the block contract reached only once it had cache_partial and
move_hashes (profile vllm-block-pool, hash_units=2)."""
EVENT_DATA_KILLED = {
    118: "cache_full_blocks' events name no extra keys (the per-block list never filled)",
    129: "each block's lookahead token ids sliced before the block's end instead of after it",
}
"""Mutants in what a BlockStored says of its blocks' tokens besides their ids, which the events
view compares since the adapter's pool hashes one lookahead token after each block."""
PARTIAL_SURVIVING = {
    160: "cache_partial_block's assert that the block size is a multiple of hash_block_size removed: "
         "it holds on every call (equivalent)",
}


POOL = ["--impl", "cacheproof.engines.vllm:block_pool", "--spec", "blocks", "--profile", "vllm-block-pool"]
UNCACHED = ["--impl", "cacheproof.engines.vllm:block_pool_uncached", "--spec", "blocks",
            "--profile", "vllm-block-pool-uncached"]
SAMPLES = {
    "pool": (POOL, KILLED, SURVIVING),
    "uncached pool": (UNCACHED, UNCACHED_KILLED, UNCACHED_SURVIVING),
    "partial entries and event data": (POOL, {**PARTIAL_KILLED, **EVENT_DATA_KILLED}, PARTIAL_SURVIVING),
}
"""Each fixed sample: the adapter and profile it runs under, the mutants it must kill, the ones it
must not."""


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_each_fixed_sample_keeps_its_fates(sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    check_args, killed, surviving = SAMPLES[sample]
    check_fixed_sample("vllm.v1.core.block_pool", [*check_args, "--examples", "100", "--check-args", "--call-timeout 60"],
                       killed, surviving, 395, tmp_path, monkeypatch, capsys)
