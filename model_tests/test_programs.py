"""Programs drawn whole (check/programs/draws.py, the generators' calls), the outcome coverage
(check/coverage.py), the time budget and the time to the first report."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from cacheproof.check.coverage import OutcomeCoverage
from cacheproof.check.programs.draws import SWARM_MOST, ProgramDraws, choice, integer, some, swarm
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.generators.cache_calls import SMALL
from cacheproof.check.programs.run import run_program_check
from cacheproof.contract.calls import invoke
from cacheproof.spec import CacheError, EntryState
from cacheproof.spec.kind import Argument, Operation, outcome_name
from cacheproof.spec.kinds import get_kind, new_spec
from model_tests import broken_caches
from model_tests.cache_checks import check_cache


def test_program_draws_read_little_endian_bytes_and_zero_past_the_end():
    draws = ProgramDraws(bytes([7, 0x34, 0x12, 200]))
    assert draws.randrange(5) == 2  # 7 % 5
    assert draws.randrange(2**16) == 0x1234  # two bytes, little-endian
    assert draws.randrange(256) == 200
    assert [draws.randrange(9), draws.randrange(2**40)] == [0, 0]  # past the end: the simplest pick


def test_the_simplest_program_calls_every_operation_and_the_first_of_everything():
    draws = ProgramDraws(b"")
    operations = ("reserve", "commit", "get")
    assert swarm(draws, operations) == operations
    assert (choice(draws, "abc"), integer(draws, 3, 9), some(draws, "xy", 4)) == ("a", 3, ("x",))


def test_a_swarm_program_calls_a_few_operations_repeats_weighing_more():
    # 1: not all; 2: three picks (1 + 2); then reserve, commit, reserve
    draws = ProgramDraws(bytes([1, 2, 0, 1, 0]))
    assert swarm(draws, ("reserve", "commit", "get")) == ("reserve", "commit", "reserve")
    assert SWARM_MOST >= 3


def test_outcome_names_follow_the_operation_table():
    reserve = Operation("reserve", (Argument("key", "key"),), "bool", ("WrongStateError",), True)
    get = Operation("get", (Argument("key", "key"),), "the value", ("UnknownKeyError",), True)
    assert reserve.outcomes == ("returns True", "returns False", "WrongStateError")
    assert get.outcomes == ("returns", "UnknownKeyError")
    assert [outcome_name(True, None), outcome_name(b"v", None), outcome_name(None, "UnknownKeyError")] == [
        "returns True", "returns", "UnknownKeyError"]
    coverage = OutcomeCoverage((reserve, get))
    coverage.record("reserve", "returns True")
    coverage.record("get", "UnknownKeyError")
    coverage.record("get", "UnknownKeyError")
    assert coverage.missing() == (("reserve", "returns False"), ("reserve", "WrongStateError"), ("get", "returns"))
    assert coverage.summary() == ("2 of 5 outcomes (not reached: reserve returns False, reserve WrongStateError, "
                                  "get returns)")
    assert coverage.to_json()["operations"]["get"] == {"returns": 0, "UnknownKeyError": 2}
    coverage.record("get", "ConflictError")
    assert coverage.unlisted() == (("get", "ConflictError"),)
    assert coverage.summary().endswith("; not in the operation table: get ConflictError")


def test_a_default_check_reaches_every_outcome_of_the_contract():
    report = check_cache(new_spec, examples=200, seed=0)
    assert report.ok
    assert report.coverage.missing() == () and report.coverage.unlisted() == (), report.coverage.summary()


def test_coverage_counts_only_the_checked_operations():
    report = check_cache(new_spec, examples=30, seed=0, operations=("reserve", "commit"), misuse=False)
    assert {op.name for op in report.coverage.operations} == {"reserve", "commit"}
    assert report.coverage.counts[("reserve", "returns True")] > 0


def test_the_block_kind_reports_its_coverage_too():
    report = run_program_check(get_kind("blocks"), get_kind("blocks").new, generator_for("blocks"), examples=100)
    assert report.ok
    reached = {pair for pair, count in report.coverage.counts.items() if count}
    assert {("allocate", "returns"), ("allocate", "CapacityError"), ("free", "WrongStateError")} <= reached
    assert report.coverage.programs == report.examples == 100


def test_a_default_block_check_reaches_every_outcome_of_the_block_contract():
    """Every error of the block operation table, misuse of lookup and the request level among them."""
    report = run_program_check(get_kind("blocks"), get_kind("blocks").new, generator_for("blocks"), examples=200, seed=0)
    assert report.ok
    assert report.coverage.missing() == () and report.coverage.unlisted() == (), report.coverage.summary()


def _spec_states(plan_operations: tuple[str, ...], keys: int, seed: int, programs: int) -> list:
    """Every spec snapshot the programs of one plan reach on a 64-byte spec with `keys` keys (the
    tensor cache's generator driven by random.Random, no misuse)."""
    generator = generator_for("cache", replace(SMALL, key_pool=SMALL.key_pool[:keys], min_keys=keys, max_keys=keys))
    rng = random.Random(seed)
    seen = []
    for _ in range(programs):
        generator.size(rng)
        generator.keys = generator.scope.key_pool  # every key of the plan, as a swarm plan of `keys` keys has
        spec = new_spec(64)
        for _ in range(40):
            try:
                invoke(spec, generator.draw_call(rng, spec, plan_operations, False))
            except CacheError:
                pass
            seen.append(spec.snapshot())
    return seen


def test_swarm_plans_reach_the_sharing_patterns():
    """Several pending reservations at once, and one entry held by three holders with retain=False:
    the patterns the whole mix of operations rarely builds (issue: search power)."""
    pending = _spec_states(("reserve", "reserve", "commit"), 4, seed=1, programs=20)
    assert max(sum(e.state is EntryState.RESERVED for e in snapshot) for snapshot in pending) >= 3
    holders = _spec_states(("acquire", "acquire", "release"), 1, seed=1, programs=20)
    assert any(e.refcount >= 3 and not e.retain for snapshot in holders for e in snapshot)


def test_the_time_budget_ends_a_conforming_run():
    report = check_cache(new_spec, examples=10**7, seed=0, budget_seconds=1.0)
    assert report.ok and 0 < report.examples < 10**7
    assert report.seconds >= 1.0


def test_the_first_report_comes_after_the_first_failure_shrunk_before_the_further_search():
    reports = []
    report = check_cache(broken_caches.ReleaseOfIdleIsNoop, seed=0, max_divergences=3,
                         on_counterexample=lambda example, seconds: reports.append((example, seconds)))
    assert not report.ok
    (first, seconds), = reports
    assert first is report.counterexamples[0]
    assert report.seconds_to_failure <= seconds == report.first_report_seconds <= report.seconds
    assert len(first.calls) <= 3  # put or commit an entry, release it while idle


def test_programs_make_bad_arguments_only_when_asked():
    def bad_calls(misuse: bool) -> int:
        counts = check_cache(new_spec, examples=50, seed=0, misuse=misuse).coverage.counts
        return sum(count for (_, outcome), count in counts.items() if outcome == "InvalidArgumentError")

    assert bad_calls(True) > 0
    assert bad_calls(False) == 0


def test_bench_throughput_prints_every_kinds_ratios_to_both_loops_and_report_times(tmp_path, capsys):
    from cacheproof.cli import main
    from cacheproof.bench.throughput import PAIRS

    path = tmp_path / "t.json"
    impl = "model_tests.broken_caches:ReleaseOfIdleIsNoop"
    assert main(["bench", "throughput", "--examples", "5", "--repeats", "1", "--impl", impl, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "radix: spec vs TorchRadixCache" in out and "minimal" in out and "ratio" in out
    figures = json.loads(path.read_text())["figures"]
    assert {PAIRS[name][0] for name in figures["throughput"]} == {"cache", "blocks", "radix", "slots"}
    assert set(figures["throughput"]) == {"cache: spec vs spec", "cache: spec vs TensorLRUCache (meta)",
                                          "blocks: spec vs spec", "blocks: spec vs KVCacheManager",
                                          "radix: spec vs spec", "radix: spec vs TorchRadixCache",
                                          "slots: spec vs spec", "slots: spec vs SlotBudget (model_tests)"}
    for row in figures["throughput"].values():  # rates rounded to whole steps/s, the ratios to 3 decimals
        checked = row["checker_steps_per_second"]
        for loop, ratio in (("minimal_loop", "minimal_ratio"), ("bare_loop", "bare_ratio")):
            rate = row[f"{loop}_steps_per_second"]
            rounding = checked / rate * (0.5 / checked + 0.5 / rate) + 5e-4
            assert row[ratio] == pytest.approx(checked / rate, abs=rounding)
    reported = figures["reports"][impl]
    assert reported["found"] and reported["first_failure_seconds"] <= reported["first_report_seconds"]
    assert reported["calls"] <= 3


def test_every_loop_of_bench_throughput_runs_programs_of_the_length_asked():
    """The three loops measure programs of one length (`--steps`): the spec against itself never
    differs, so 4 programs of 7 calls are 28 steps in each."""
    from cacheproof.bench.throughput import LOOPS
    from cacheproof.spec.kinds import new_spec

    assert {label: measure("cache", new_spec, 4, 0, 7)[0] for label, measure in LOOPS.items()} == \
        {"minimal_loop": 28, "bare_loop": 28, "checker": 28}
