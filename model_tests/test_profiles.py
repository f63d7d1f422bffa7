"""Semantics and profiles: each option changes exactly what it names; the default is the contract."""

from __future__ import annotations

import io
import unittest

import pytest

from cacheproof.spec import CacheSpec, ConflictError, InvalidArgumentError, TooLargeError, UnknownKeyError, WrongStateError
from cacheproof.spec.cache.profiles import PROFILES, check_operations, profile_named
from cacheproof.spec.cache.semantics import CONTRACT, Semantics
from cacheproof.spec.cache.types import Acquired, EntryState


def keys(spec: CacheSpec) -> list:
    return [entry.key for entry in spec.snapshot()]


def test_default_is_the_contract():
    assert CacheSpec(4).semantics == CONTRACT == profile_named("contract").semantics
    assert CONTRACT.differences() == {}


def test_bad_semantics_values_are_rejected_with_the_valid_ones():
    with pytest.raises(InvalidArgumentError, match="replace"):
        Semantics(put_present="overwrite")
    with pytest.raises(InvalidArgumentError, match="ready_hit"):
        Semantics(refresh_on={"acquire"})
    with pytest.raises(InvalidArgumentError, match="put_present"):
        CONTRACT.with_overrides("no_such_field=1")
    with pytest.raises(InvalidArgumentError, match="commit, reservation"):
        CONTRACT.with_overrides("eviction_time=never")
    assert CONTRACT.with_overrides("refresh_on=get,clear_busy=drop").differences() == {
        "refresh_on": frozenset({"get"}), "clear_busy": "drop"}


def test_put_present():
    for choice, expected_value in (("replace", b"bb"), ("keep", b"a")):
        spec = CacheSpec(4, Semantics(put_present=choice))
        spec.put("k", b"a")
        spec.put("j", b"c")
        assert spec.put("k", b"bb") is True
        assert spec.get("k") == expected_value
    spec = CacheSpec(4, Semantics(put_present="replace"))
    spec.reserve("r", 1)
    with pytest.raises(WrongStateError):
        spec.put("r", b"x")
    contract = CacheSpec(4)
    contract.put("k", b"a")
    with pytest.raises(WrongStateError, match="never replaces"):
        contract.put("k", b"b")


def test_put_too_large_false_changes_nothing():
    spec = CacheSpec(2, Semantics(put_too_large="false"))
    spec.put("a", b"x")
    assert spec.put("b", b"xyz") is False
    assert keys(spec) == ["a"]
    with pytest.raises(TooLargeError):
        CacheSpec(2).put("b", b"xyz")


def test_get_missing_none_for_absent_and_reserved():
    spec = CacheSpec(4, Semantics(get_missing="none"))
    spec.reserve("r", 1)
    assert spec.get("absent") is None and spec.get("r") is None and spec.pop("r") is None
    assert keys(spec) == ["r"]
    with pytest.raises(UnknownKeyError):
        CacheSpec(4).get("absent")


def test_release_missing_noop():
    spec = CacheSpec(4, Semantics(release_missing="noop"))
    spec.put("idle", b"x")
    assert spec.release("absent") is False and spec.release("idle") is False
    assert spec.snapshot()[0].refcount == 0


def test_eviction_at_reservation_counts_reserved_bytes_as_used():
    spec = CacheSpec(2, Semantics(eviction_time="reservation"))
    spec.put("old", b"xx")
    assert spec.reserve("new", 1) is True
    assert keys(spec) == ["new"]  # the reservation evicted "old"
    assert spec.commit("new", b"y") == []
    contract = CacheSpec(2)
    contract.put("old", b"xx")
    contract.reserve("new", 1)
    assert keys(contract) == ["old", "new"] and contract.commit("new", b"y") == ["old"]


def test_refresh_on():
    spec = CacheSpec(8, Semantics(refresh_on=frozenset({"ready_hit"})))
    spec.put("a", b"x")
    spec.put("b", b"x")
    spec.get("a")
    assert keys(spec) == ["a", "b"]  # get does not refresh
    spec.reserve("r", 1)
    spec.put("c", b"x")
    spec.acquire("r", 1)
    assert keys(spec) == ["a", "b", "r", "c"]  # a reservation hit does not either
    spec.acquire("a", 1)
    assert keys(spec) == ["b", "r", "c", "a"]
    by_release = CacheSpec(8, Semantics(refresh_on=frozenset({"release"})))
    by_release.put("a", b"x")
    by_release.put("b", b"x")
    by_release.acquire("a", 1)
    assert keys(by_release) == ["a", "b"]
    by_release.release("a")
    assert keys(by_release) == ["b", "a"]


def test_acquire_conflict_hit_and_transient_kept():
    spec = CacheSpec(8, Semantics(acquire_conflict="hit", transient_entries=False))
    spec.reserve("k", 2, retain=False)
    assert spec.acquire("k", 3).name == "RESERVATION_HIT"
    spec.commit("k", b"xy")
    spec.release("k")
    spec.release("k")
    assert keys(spec) == ["k"] and spec.snapshot()[0].nbytes == 2
    contract = CacheSpec(8)
    contract.reserve("k", 2)
    with pytest.raises(ConflictError):
        contract.acquire("k", 3)


def test_acquire_conflict_size_compares_the_size_alone():
    spec = CacheSpec(8, Semantics(acquire_conflict="size"))
    spec.reserve("k", 2)
    with pytest.raises(ConflictError, match="must agree on nbytes"):
        spec.acquire("k", 3)
    assert spec.snapshot()[0].refcount == 1  # the conflict changed nothing
    assert spec.acquire("k", 2, retain=False).name == "RESERVATION_HIT"  # another retain is a hit
    assert spec.snapshot()[0].refcount == 2 and spec.snapshot()[0].retain is True
    contract = CacheSpec(8)
    contract.reserve("k", 2)
    with pytest.raises(ConflictError, match="must agree on nbytes and retain"):
        contract.acquire("k", 2, retain=False)


def test_clear_busy_drop():
    spec = CacheSpec(4, Semantics(clear_busy="drop"))
    spec.reserve("r", 1)
    spec.clear()
    assert len(spec) == 0 and spec.stats().reserved_bytes == 0
    spec.check_invariants()


def test_abandoned_reservation_kept_stays_idle_is_evicted_and_revived():
    """vLLM's freeable list keeps an item whose output was never stored (abandoned_reservation="kept")."""
    spec = CacheSpec(4, Semantics(abandoned_reservation="kept", refresh_on=frozenset({"release"})))
    assert spec.acquire("a", 2) is Acquired.NEW_RESERVATION
    assert spec.release("a") is False  # kept: not removed
    (entry,) = spec.snapshot()
    assert (entry.state, entry.refcount, entry.nbytes) == (EntryState.RESERVED, 0, 2)
    assert (spec.stats().reserved_bytes, spec.stats().idle_bytes) == (0, 2)
    spec.check_invariants()  # I3 is waived under kept
    with pytest.raises(WrongStateError):
        spec.get("a")  # still no value
    assert spec.acquire("a", 2) is Acquired.RESERVATION_HIT  # referenced again: its bytes reserved
    assert (spec.stats().reserved_bytes, spec.stats().idle_bytes) == (2, 0)
    spec.release("a")
    assert spec.evict(3) == ["a"]  # evicted like an idle entry
    assert len(spec) == 0
    spec.acquire("b", 1)
    spec.release("b")
    assert spec.commit("b", b"x") == [] and spec.get("b") == b"x"  # committed while idle: READY, refcount 0
    assert spec.snapshot()[0].refcount == 0 and spec.stats().idle_bytes == 1
    removed = CacheSpec(4)
    removed.acquire("a", 2)
    assert removed.release("a") is True and len(removed) == 0  # the contract drops it


def test_commit_size_reserved_stores_at_the_reserved_size():
    spec = CacheSpec(4, Semantics(commit_size="reserved"))
    spec.reserve("k", 2)
    assert spec.commit("k", b"abc") == []
    assert spec.snapshot()[0].nbytes == 2 and spec.get("k") == b"abc"
    checked = CacheSpec(4)
    checked.reserve("k", 2)
    with pytest.raises(ConflictError):
        checked.commit("k", b"abc")


def test_trusted_arguments_skip_type_checks():
    spec = CacheSpec(4, Semantics(argument_checks="trusted"))
    assert spec.reserve("k", 1, retain=1) is True
    with pytest.raises(InvalidArgumentError):
        CacheSpec(4).reserve("k", 1, retain=1)


def test_value_type_checks_refuse_an_unsizable_value_and_trust_the_rest():
    spec = CacheSpec(4, Semantics(argument_checks="value_type"))
    with pytest.raises(InvalidArgumentError, match=r"put\(1\): a value of type str has no size"):
        spec.put(1, "not sizable")
    assert spec.snapshot() == ()  # refused: nothing changed
    assert spec.reserve("k", 1, retain=1) is True  # a retain flag that is no bool: trusted
    with pytest.raises(InvalidArgumentError, match="commit"):
        spec.commit("k", object())
    assert spec.commit("k", b"x") == [] and spec.put(2, b"") is True  # an empty value: trusted


def test_profiles_and_operations():
    assert {"contract", "trtllm-tensor-lru", "plain-lru", "vllm-encoder-cache"} <= set(PROFILES)
    assert profile_named("plain-lru").operations == ("put", "get", "pop", "clear", "contains")
    with pytest.raises(InvalidArgumentError, match="plain-lru"):
        profile_named("lru")
    assert check_operations(["get", "put"]) == ("put", "get")
    with pytest.raises(InvalidArgumentError, match="reserve"):
        check_operations(["put", "fetch"])


# The checker under profiles -----------------------------------------------------------------------

from cacheproof.cli import main  # noqa: E402
from examples.plain_lru_cache import PlainLRUCache  # noqa: E402
from examples.trtllm_tensor_lru_cache import TrtllmTensorLRUCache  # noqa: E402
from examples.vllm_style_encoder_cache import profile_factory as vllm_profile_factory  # noqa: E402
from model_tests import broken_profile_caches as broken  # noqa: E402
from model_tests.cache_checks import check_cache  # noqa: E402

BUDGET = 60


def check(factory, profile: str, seed: int = 0):
    chosen = profile_named(profile)
    return check_cache(factory, examples=BUDGET, seed=seed, semantics=chosen.semantics, operations=chosen.operations)


@pytest.mark.parametrize(
    "factory, profile",
    [(TrtllmTensorLRUCache, "trtllm-tensor-lru"), (PlainLRUCache, "plain-lru"), (vllm_profile_factory, "vllm-encoder-cache")],
    ids=["trtllm", "plain-lru", "vllm"],
)
def test_each_example_conforms_to_its_profile_and_not_to_the_contract(factory, profile):
    report = check(factory, profile)
    assert report.ok, report.counterexample and report.counterexample.message
    if profile != "plain-lru":  # plain-lru lacks reserve...: a usage error under the contract, tested below
        assert not check_cache(factory, examples=BUDGET, seed=0).ok


def test_trtllm_put_that_evicts_itself_is_found():
    example = check(broken.PutEvictsItselfCache, "trtllm-tensor-lru").counterexample
    assert example is not None and example.calls[-1].op == "put"
    assert (example.difference.expected.result, example.difference.actual.result) == (False, True), example.message


def test_sglang_oversized_set_that_evicts_everything_is_found():
    example = check(broken.OversizedSetEvictsAllCache, "plain-lru").counterexample
    assert example is not None and example.calls[-1].op == "put"
    assert example.difference.views[0][0] == "len", example.message


def test_a_get_that_does_not_refresh_is_found_by_plain_lru():
    assert not check(broken.GetRefreshesCache, "plain-lru").ok


def test_calls_outside_the_subset_are_never_made():
    made: set = set()

    class Recording(PlainLRUCache):
        def put(self, key, value):
            made.add("put")
            return super().put(key, value)

        def get(self, key):
            made.add("get")
            return super().get(key)

        def pop(self, key):
            made.add("pop")
            return super().pop(key)

        def clear(self):
            made.add("clear")
            super().clear()

    report = check_cache(Recording, examples=20, seed=1, semantics=profile_named("plain-lru").semantics, operations=("put", "get"))
    assert report.ok and made == {"put", "get"}


def run_cli(*args: str) -> int:
    return main(["check", "--examples", "20", "--quiet", *args])


def test_cli_profile_conforms_and_finds(capsys):
    assert run_cli("--impl", "examples.plain_lru_cache:PlainLRUCache", "--profile", "plain-lru") == 0
    assert run_cli("--impl", "model_tests.broken_profile_caches:OversizedSetEvictsAllCache", "--profile", "plain-lru",
                   "--examples", "200") == 1


@pytest.mark.parametrize(
    "args, named",
    [
        (("--profile", "lru"), "plain-lru"),
        (("--semantics", "put_present=overwrite"), "replace"),
        (("--semantics", "colour=red"), "put_present"),
        (("--ops", "put,fetch"), "reserve"),
        (("--impl", "examples.plain_lru_cache:PlainLRUCache"), "lacks reserve, acquire, commit, release, evict"),
        (("--impl", "examples.plain_lru_cache:PlainLRUCache", "--profile", "plain-lru", "--ops", "put,release"), "lacks release"),
    ],
)
def test_cli_usage_errors(capsys, args, named):
    assert run_cli(*args) == 2
    assert named in capsys.readouterr().err


def test_default_profile_is_unchanged():
    from examples.minimal_cache import MinimalCache

    assert check_cache(MinimalCache, examples=BUDGET, seed=0).ok
    assert check_cache(MinimalCache, examples=BUDGET, seed=0, semantics=profile_named("contract").semantics).ok


def test_cache_test_case_takes_a_profile_and_ops():
    from hypothesis import settings

    from cacheproof.testing import cache_test_case

    conforming = cache_test_case(PlainLRUCache, steps=20, profile="plain-lru", ops=["put", "get", "pop"])
    broken_case = cache_test_case(broken.OversizedSetEvictsAllCache, steps=20, profile="plain-lru")
    for case in (conforming, broken_case):
        case.settings = settings(max_examples=150, derandomize=True, deadline=None, database=None)
    assert unittest.TextTestRunner(stream=io.StringIO()).run(conforming()).wasSuccessful()
    result = unittest.TextTestRunner(stream=io.StringIO()).run(broken_case())
    assert len(result.failures) == 1 and "len(): spec" in result.failures[0][1]
    with pytest.raises(InvalidArgumentError, match="plain-lru"):
        cache_test_case(PlainLRUCache, profile="lru")


def test_profiles_command_lists_every_profile_with_its_fields(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for name in PROFILES:
        assert f"{name}:" in out
    assert "put_too_large=false" in out and "eviction_time=reservation" in out


def test_profiles_command_groups_every_kinds_profiles_under_its_kind(capsys):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    cache_part, blocks_part = out.split("--spec blocks:", 1)
    assert cache_part.startswith("--spec cache:") and "trtllm-tensor-lru:" in cache_part
    assert "vllm-block-pool:" not in cache_part and "trtllm" not in blocks_part
    vllm = blocks_part.split("  vllm-block-pool:", 1)[1]
    assert "operations: allocate,touch,cache_blocks,lookup,free,unpin,writable,evict,reset,num_free,cache_partial,move_hashes\n" in vllm
    assert "    misuse=trusted\n" in vllm and "    null_block=skip\n" in vllm
    contract = blocks_part.split("  contract:", 1)[1].split("  pool:", 1)[0]
    assert "misuse=" not in contract  # no field differs from the kind's own contract


def test_profiles_all_fields_prints_each_kinds_own_fields(capsys):
    assert main(["profiles", "--all-fields"]) == 0
    cache_part, blocks_part = capsys.readouterr().out.split("--spec blocks:", 1)
    pool = blocks_part.split("  pool:", 1)[1].split("  vllm-block-pool:", 1)[0]
    assert "    misuse=checked\n" in pool and "    null_block=error\n" in pool and "put_present" not in pool
    assert "    put_present=error\n" in cache_part and "null_block" not in cache_part


def test_monitor_takes_a_profile():
    import cacheproof

    monitored = cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, profile="plain-lru")
    assert monitored.put("a", b"xy") is True and monitored.put("a", b"z") is True  # replaces under plain-lru
    assert monitored.get("absent") is None
    strict = cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4)
    strict.put("a", b"xy")
    with pytest.raises(cacheproof.DivergenceError):
        strict.put("a", b"z")
    with pytest.raises(InvalidArgumentError, match="plain-lru"):
        cacheproof.monitor(PlainLRUCache(4), capacity_bytes=4, profile="lru")
