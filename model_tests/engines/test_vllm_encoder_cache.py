"""vLLM's real EncoderCacheManager (vllm 0.34.0) through cacheproof.engines.vllm:encoder_cache: the
one command runs to a verdict, never an adapter error. Runs in the engines venv
(`.venv-engines/bin/python -m pytest -q model_tests/engines`); skips where vllm does not import."""

from __future__ import annotations

import pytest

from cacheproof.cli import main

try:
    from vllm.v1.core.encoder_cache_manager import EncoderCacheManager
except ImportError as error:  # noqa: F841
    pytest.skip(f"vllm is not importable here ({error}); run with .venv-engines/bin/python", allow_module_level=True)


def test_the_one_command_runs_to_a_verdict_without_an_adapter_error(capsys):
    status = main(["check", "--impl", "cacheproof.engines.vllm:encoder_cache", "--examples", "30", "--quiet",
                   "--max-divergences", "1"])
    captured = capsys.readouterr()
    assert status in (0, 1), captured.err
    assert "adapter error" not in captured.out + captured.err


def test_a_manager_missing_a_method_is_an_adapter_error_naming_it():
    from cacheproof.adapt import AdapterError
    from cacheproof.engines import vllm as engine

    older = type("Older", (EncoderCacheManager,), {})
    older.free_encoder_input = property(lambda self: None)  # readable, so hasattr passes: dropped below
    del older.free_encoder_input
    lacking = type("Lacking", (), {"__init__": lambda self, size: None})
    with pytest.raises(AdapterError, match="free_encoder_input"):
        engine.encoder_cache(8, manager_class=lacking)
    assert engine.encoder_cache(8, manager_class=older).manager is not None


def test_conforms_under_the_profile_of_vllm_as_shipped(capsys):
    """vllm-encoder-cache-0.34 accepts vLLM's two choices (an abandoned reservation kept in
    `freeable`, an output's size never checked): the unmodified manager conforms."""
    status = main(["check", "--impl", "cacheproof.engines.vllm:encoder_cache", "--profile", "vllm-encoder-cache-0.34",
                   "--examples", "100", "--seed", "0", "--call-timeout", "60", "--quiet"])
    assert status == 0, capsys.readouterr().out


def test_the_two_choices_are_divergences_under_vllm_encoder_cache(capsys):
    """Under vllm-encoder-cache, which does not accept them, each of the two is reported."""
    status = main(["check", "--impl", "cacheproof.engines.vllm:encoder_cache", "--profile", "vllm-encoder-cache",
                   "--examples", "100", "--seed", "0", "--call-timeout", "60", "--max-divergences", "2"])
    out = capsys.readouterr().out
    assert status == 1
    assert "release(" in out and "ConflictError" in out, out


class ResetKeepsRequestInputs(EncoderCacheManager):
    """encoder_cache_manager #6 of the duel as a subclass: reset() leaves `request_cached_ids`, so a
    request that held an input before the reset still names it after, while its references are gone."""

    def reset(self) -> None:
        kept = {request: set(ids) for request, ids in self.request_cached_ids.items()}
        super().reset()
        self.request_cached_ids.update(kept)


def test_a_request_outlives_a_clear_and_releases_after_it():
    """The scheduler resets the manager under running requests (a weight update): the request that
    held an input before the clear releases it after. vLLM's manager answers as the contract does
    (the key left `cached` at the clear, so release says False); the broken reset crashes there."""
    from cacheproof.engines.vllm import encoder_cache

    cache = encoder_cache(8)
    cache.acquire("a", 3)
    cache.clear()
    assert cache.release("a") is False
    assert cache.snapshot() == ()
    broken = encoder_cache(8, manager_class=ResetKeepsRequestInputs)
    broken.acquire("a", 3)
    broken.clear()
    with pytest.raises(KeyError):
        broken.release("a")


def test_a_reset_that_keeps_request_inputs_is_found(capsys):
    assert "KeyError" in _found_with("_reset_keeping_inputs", capsys)


def _found_with(factory: str, capsys) -> str:
    """The check's output on this module's `factory` (a broken manager's), which it must find (exit 1)."""
    status = main(["check", "--impl", f"{__name__}:{factory}", "--profile", "vllm-encoder-cache-0.34",
                   "--examples", "100", "--seed", "0", "--call-timeout", "60", "--max-divergences", "1"])
    out = capsys.readouterr().out
    assert status == 1, out
    return out


def _reset_keeping_inputs(capacity_bytes: int):
    from cacheproof.engines.vllm import encoder_cache

    return encoder_cache(capacity_bytes, manager_class=ResetKeepsRequestInputs)


class FreedInputStaysCached(EncoderCacheManager):
    """encoder_cache_manager #83 of the duel as a subclass: free_encoder_input gives the reference
    back but leaves the input among the request's cached inputs (and so the request's reference
    table in place), so the request's finishing `free(request)` frees it a second time."""

    def free_encoder_input(self, request, input_id) -> None:
        request_id = request.request_id
        was_cached = input_id in self.request_cached_ids.get(request_id, ())
        super().free_encoder_input(request, input_id)
        if was_cached:
            self.request_cached_ids.setdefault(request_id, set()).add(input_id)
            self.request_hash_refs.setdefault(request_id, {})


def test_a_request_finishes_when_the_adapter_says_its_last_input_is_released(capsys):
    """The adapter, like the scheduler, knows when a request finishes: its last held input released.
    The freed input FreedInputStaysCached keeps is then freed again by free(request), whose reference
    count is gone: the check finds the crash."""
    assert "KeyError" in _found_with("_freed_input_stays_cached", capsys)


def _freed_input_stays_cached(capacity_bytes: int):
    from cacheproof.engines.vllm import encoder_cache

    return encoder_cache(capacity_bytes, manager_class=FreedInputStaysCached)


def test_an_acquire_with_another_embedding_count_is_rejected_and_changes_nothing():
    """The 0.34.0 scheduler rejects a request whose item is cached with another embedding count
    (`_reject_on_encoder_cache_embed_mismatch`): the profiles' acquire_conflict="size"."""
    from cacheproof.engines.vllm import encoder_cache
    from cacheproof.spec import ConflictError

    cache = encoder_cache(8)
    cache.acquire("a", 3)
    before = cache.snapshot()
    with pytest.raises(ConflictError, match="holds 3 embeddings"):
        cache.acquire("a", 2)
    assert cache.snapshot() == before
    assert cache.acquire("a", 3, retain=False).name == "RESERVATION_HIT"  # vLLM has no retain: a hit


class ForgetsEmbeddingCounts(EncoderCacheManager):
    """encoder_cache_manager #24 of the duel, as a behaviour: `get_cached_num_encoder_embeds`
    answers None, so the scheduler's guard never rejects another count and it is a hit."""

    def get_cached_num_encoder_embeds(self, request, input_id):
        return None


def test_a_manager_that_forgets_embedding_counts_is_found(capsys):
    assert "ConflictError" in _found_with("_forgets_embedding_counts", capsys)


def _forgets_embedding_counts(capacity_bytes: int):
    from cacheproof.engines.vllm import encoder_cache

    return encoder_cache(capacity_bytes, manager_class=ForgetsEmbeddingCounts)
