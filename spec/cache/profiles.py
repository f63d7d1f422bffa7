"""Named `Semantics`: the contract, and the designs real engines ship (docs/profiles.md says,
per field, what each peer's code does and where).

A profile may also name the operations its caches have (`operations`); the checker makes no
other calls when it is checked under that profile and no `--ops` is given.
"""

from __future__ import annotations

from dataclasses import replace

from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.cache.operations import ALL_OPERATIONS
from cacheproof.spec.cache.semantics import Semantics
from cacheproof.spec.kind import Profile

_VLLM_ENCODER_CACHE = Semantics(
    release_missing="noop",
    eviction_time="reservation",
    refresh_on=frozenset({"ready_hit", "reservation_hit", "release"}),
    acquire_conflict="size",
    transient_entries=False,
    clear_busy="drop",
    argument_checks="trusted",
    snapshot_order="idle",
)
"""vLLM's EncoderCacheManager's design (profile vllm-encoder-cache; vllm-encoder-cache-0.34 adds what 0.34.0 ships)."""
_VLLM_ENCODER_OPERATIONS = ("acquire", "commit", "get", "release", "evict", "clear", "contains")

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("contract", Semantics(), ALL_OPERATIONS, "the contract of docs/contract.md (default)"),
        Profile(
            "trtllm-tensor-lru",
            Semantics(
                put_present="replace",
                put_too_large="false",
                get_missing="none",
                argument_checks="trusted",
                refresh_on=frozenset({"ready_hit", "get"}),
                pop_missing="absent",
            ),
            tuple(name for name in ALL_OPERATIONS if name != "reserve"),
            "TensorRT-LLM TensorLRUCache with reservations (PR #17876 at 533f124: acquire, commit, ensure_capacity)",
        ),
        Profile(
            "plain-lru",
            Semantics(put_present="replace", put_too_large="false", get_missing="none", argument_checks="trusted"),
            ("put", "get", "pop", "clear", "contains"),
            "plain byte LRU: TensorRT-LLM upstream TensorLRUCache",
        ),
        Profile(
            "sglang-mm-cache",
            Semantics(put_present="keep", put_too_large="false", get_missing="none", argument_checks="value_type",
                      refresh_on=frozenset({"ready_hit", "reservation_hit", "get", "put_hit"})),
            ("put", "get", "pop", "clear", "contains"),
            "SGLang MultiModalStaticCache (set of a present hash keeps the old embedding, made newest; "
            "set asserts it is given an EmbeddingResult)",
        ),
        Profile(
            "vllm-encoder-cache",
            _VLLM_ENCODER_CACHE,
            _VLLM_ENCODER_OPERATIONS,
            "vLLM EncoderCacheManager (check_and_update_cache, can_allocate, free_encoder_input, reset)",
            keys="str",  # vLLM keys encoder outputs by mm_hash, a hex digest string
        ),
        Profile(
            "vllm-encoder-cache-0.34",
            replace(_VLLM_ENCODER_CACHE, abandoned_reservation="kept", commit_size="reserved"),
            _VLLM_ENCODER_OPERATIONS,
            "vLLM 0.34.0 EncoderCacheManager as shipped: vllm-encoder-cache, and an abandoned reservation kept "
            "in freeable, an output's size never checked",
            keys="str",
        ),
    )
}
"""Every named profile, by name."""

DEFAULT_PROFILE = "contract"


def profile_named(name: str) -> Profile:
    """The profile called `name`; InvalidArgumentError listing the names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}") from None


def check_operations(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Operation names as given to --ops, validated (InvalidArgumentError lists the valid ones)."""
    unknown = [name for name in names if name not in ALL_OPERATIONS]
    if unknown or not names:
        raise InvalidArgumentError(
            f"--ops {','.join(names) or '(empty)'}: unknown {', '.join(unknown) or 'empty list'}; "
            f"operations: {', '.join(ALL_OPERATIONS)}"
        )
    return tuple(name for name in ALL_OPERATIONS if name in names)
