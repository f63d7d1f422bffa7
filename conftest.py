"""The suite's settings, and which tests are slow.

The README's test command runs `-m "not slow"` and stays under eight minutes on two cores;
.ci/run then runs the slow tests (`-m slow`) and the engines' tests. A test is slow when it takes
ten seconds or more of one worker on a two-core machine (measured with `--durations`): each
searches many examples, waits out call timeouts on purpose, or runs child processes.
"""

import os

import pytest
from hypothesis import settings

from cacheproof.settings import CI_SETTINGS, register_settings

register_settings(load=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or CI_SETTINGS)
"""The suite's Hypothesis searches are derandomized on every machine, CI or not (`cacheproof-ci`), so a
test that relies on a search finding a bug finds it everywhere or nowhere; HYPOTHESIS_PROFILE still
picks other settings for a run by hand."""

os.environ["CACHEPROOF_BUDGET"] = "0"
"""`cacheproof check` runs the suite starts count examples, as under CI, instead of searching for the
interactive default's 30 s (cacheproof/cmdline/budget.py); tests of the budget set it themselves."""

SLOW = (
    "model_tests/test_concurrent_check.py::test_check_threads_finds_the_race[EvictionPlanAfterUnlock]",
    "model_tests/test_concurrent_check.py::test_check_threads_finds_the_race[LostRefcountUpdate]",
    "model_tests/test_concurrent_check.py::test_check_threads_finds_the_race[CommitWithoutRecheck]",
    "model_tests/test_testing_kit.py::test_pytest_shows_the_snippet_and_the_divergence_only",
    "model_tests/test_cache_program_check.py::test_a_len_that_raises_in_the_child_is_a_counterexample",
    "model_tests/test_cache_program_check.py::test_a_call_raising_system_exit_is_its_outcome_and_diverges",
    "model_tests/test_cache_program_check.py::test_a_deterministic_broken_cache_is_not_called_not_deterministic",
    "model_tests/test_cache_program_check.py::test_a_view_that_raises_says_what_it_raised",
    "model_tests/test_cache_program_check.py::test_a_cache_that_answers_the_same_calls_differently_is_not_deterministic",
    "model_tests/test_exhaustive.py::test_a_locked_leaf_evicted_shows_at_the_fourth_call",
    "model_tests/test_parity.py::test_cell[exhaustive-radix]",
    "model_tests/test_parity.py::test_cell[max-divergences-radix]",
    "model_tests/test_parity.py::test_cell[max-divergences-blocks]",
    "model_tests/test_parity.py::test_cell[max-divergences-cache]",
    "model_tests/test_parity.py::test_cell[database-blocks]",
    "model_tests/test_parity.py::test_cell[database-radix]",
    "model_tests/test_parity.py::test_cell[database-cache]",
    "model_tests/test_parity.py::test_cell[call-timeout-isolate-cache]",
    "model_tests/test_parity.py::test_cell[workers-cache]",
    "model_tests/test_exhaustive.py::test_a_bug_of_three_keys_lies_beyond_the_default_scope_and_within_the_three_keys_one",
    "model_tests/test_exhaustive.py::test_each_broken_pool_within_the_default_scope_is_found_shortest[ForwardFreeRequestPool]",
    "model_tests/test_exhaustive.py::test_each_broken_pool_within_the_default_scope_is_found_shortest[LastInsertedLookupPool]",
    "model_tests/test_exhaustive.py::test_a_drifting_free_count_shows_at_the_fourth_call",
    "model_tests/test_exhaustive.py::test_each_broken_tree_within_the_default_scope_is_found_shortest[KeepsDuplicates]",
    "model_tests/test_exhaustive.py::test_the_counterexample_and_the_counts_are_the_same_over_workers",
    "model_tests/test_exhaustive.py::test_the_default_scope_of_each_built_in_implementation_is_searched_whole_and_clean[cache]",
    "model_tests/test_exhaustive.py::test_the_default_scope_of_each_built_in_implementation_is_searched_whole_and_clean[blocks]",
    "model_tests/test_programs.py::test_bench_throughput_prints_every_kinds_ratios_to_both_loops_and_report_times",
    "model_tests/test_prove_radix.py::test_the_spec_refines_the_model_under_every_profile",
    "model_tests/test_prove_radix.py::test_a_spec_whose_split_drops_the_lock_disagrees",
    "model_tests/test_prove_radix.py::test_the_command_exits_0_and_writes_its_report",
    "model_tests/engines/test_vllm_mutation_sample.py::test_each_fixed_sample_keeps_its_fates",
    "model_tests/engines/test_vllm_encoder_cache.py::test_conforms_under_the_profile_of_vllm_as_shipped",
    "model_tests/engines/test_vllm_encoder_cache.py::test_the_two_choices_are_divergences_under_vllm_encoder_cache",
    "model_tests/engines/test_sglang_mutation_sample.py::test_the_fixed_sample_keeps_its_fates",
    "model_tests/engines/test_sglang_mm_cache.py::test_each_broken_subclass_is_found",
    "model_tests/test_engines_stand_ins.py::test_sglang_s_set_must_assert_its_value_type_and_is_found_without_it",
    "model_tests/test_mutate.py::test_the_duel_sorts_each_mutant_by_who_kills_it",
    "model_tests/test_mutate.py::test_a_side_failing_on_the_unmutated_module_is_a_usage_error",
    "model_tests/test_checker_bites.py::test_check_finds_the_bug[CommitEvictsBeforeSizeCheck]",
    "model_tests/test_checker_bites.py::test_check_finds_the_bug[PutEvictsBeforeCheckingFit]",
    "model_tests/test_checker_bites.py::test_check_finds_the_bug[ReservationEvictable]",
    "model_tests/test_checker_bites.py::test_check_finds_the_bug[ReleaseOfIdleIsNoop]",
    "model_tests/test_testing_kit.py::test_broken_cache_fails_with_a_reproducing_snippet",
    "model_tests/test_robustness.py::test_each_fault_is_a_counterexample_under_isolation",
    "model_tests/test_robustness.py::test_the_snippet_of_a_crash_crashes",
    "model_tests/test_robustness.py::test_a_broken_cache_is_found_under_isolation_and_its_counterexample_replays",
    "model_tests/test_prove.py::test_entry_model_agrees_with_the_spec_on_random_states",
    "model_tests/test_prove.py::test_each_single_option_breaks_exactly_the_invariants_the_waiver_table_names",
    "model_tests/test_profile_traces.py::test_snapshot_levels_in_cache_test_case",
    "model_tests/test_checker.py::test_json_report_has_the_contract_fields",
    "model_tests/test_checker.py::test_printed_snippet_reproduces_the_failure",
    "model_tests/test_block_checker.py::test_every_broken_pool_is_found_with_a_snippet_that_fails",
    "model_tests/test_pool_faults.py::test_a_hanging_call_is_a_counterexample_within_the_call_timeout_and_one_shrinking",
    "model_tests/test_pool_faults.py::test_a_hang_needing_earlier_calls_is_shrunk_to_them",
    "model_tests/test_pool_faults.py::test_a_hanging_view_ends_the_snippet_after_calls_that_return",
    "model_tests/test_scope.py::test_the_wide_scope_finds_each_broken_scope_cache",
    "model_tests/test_scope.py::test_correct_caches_conform_in_every_scope",
    "model_tests/test_profiles.py::test_cache_test_case_takes_a_profile_and_ops",
    "model_tests/test_adapters.py::test_checker_finds_the_cachetools_release_order",
    "model_tests/test_report_schema.py::test_check_of_the_block_pool_reports_each_divergence_with_its_view_diff",
    "model_tests/test_report_schema.py::test_every_kind_prints_its_first_counterexample_before_searching_for_further_ones",
    "model_tests/test_report_schema.py::test_every_kind_prints_one_verdict_line_and_reports_its_first_shrunk_counterexample_s_time",
    "model_tests/test_core_install.py::test_the_core_install_has_no_torch_and_ships_its_metadata",
    "model_tests/test_core_install.py::test_the_core_install_checks_a_plain_python_cache",
    "model_tests/test_core_install.py::test_the_core_install_proves",
    "model_tests/test_core_install.py::test_the_core_install_names_the_extra_for_torch",
    "model_tests/test_search_power.py::test_a_default_run_finds_each_broken_cache_on_ten_of_ten_seeds",
    "model_tests/test_workers.py::test_a_broken_cache_is_found_by_two_workers_with_one_merged_report",
    "model_tests/test_workers.py::test_a_failure_found_by_the_workers_replays_first_next_run",
    "model_tests/test_redis_database.py::test_a_second_machine_replays_the_first_machines_failure_first",
    "model_tests/test_redis_database.py::test_a_read_only_database_is_replayed_and_not_written",
    "model_tests/test_redis_database.py::test_the_environment_variable_names_the_database_and_the_flag_wins",
    "model_tests/test_pytest_plugin.py::test_a_failure_shows_the_bound_name_the_users_frames_and_a_snippet_that_fails",
    "model_tests/test_pytest_plugin.py::test_pytest_xdist_runs_the_tests_unchanged",
    "model_tests/test_ctrl_c_anytime.py::test_ctrl_c_at_any_moment_ends_the_run",
    "model_tests/test_ctrl_c_unanswered.py::test_a_check_whose_main_thread_cannot_answer_still_writes_its_partial_report",
    "model_tests/test_workers.py::test_ctrl_c_stops_every_worker",
    "model_tests/test_workers.py::test_ctrl_c_stops_every_worker[blocks]",
    "model_tests/test_parity.py::test_cell[thorough-cache]",
    "model_tests/test_parity.py::test_cell[thorough-blocks]",
    "model_tests/test_parity.py::test_cell[thorough-radix]",
    "model_tests/test_parity.py::test_cell[workers-radix]",
    "model_tests/test_parity.py::test_cell[ctrl-c-cache]",
    "model_tests/test_parity.py::test_cell[ctrl-c-blocks]",
    "model_tests/test_parity.py::test_cell[ctrl-c-radix]",
    "model_tests/test_parity.py::test_cell[ctrl-c-slots]",
)
"""Node ids (or their prefixes, for every parameter of a test) of the slow tests."""


@pytest.fixture(autouse=True)
def every_report_is_valid(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                          monkeypatch: pytest.MonkeyPatch):
    """Every JSON report a test writes (in this process or a `cacheproof` it starts) is logged by the
    report writer (`cacheproof.cmdline.reports.REPORT_LOG_VARIABLE`) and validated against the
    shipped schema after the test: a report that breaks it fails the test."""
    from cacheproof.cmdline.reports import REPORT_LOG_VARIABLE

    log = tmp_path_factory.getbasetemp() / "report-logs" / f"{abs(hash(request.node.nodeid))}.log"
    log.parent.mkdir(exist_ok=True)
    log.unlink(missing_ok=True)
    monkeypatch.setenv(REPORT_LOG_VARIABLE, str(log))
    yield
    if log.exists():
        from model_tests.report_validation import logged_report_errors

        problems = logged_report_errors(log)
        if problems:
            pytest.fail("a report breaks cacheproof/schemas/report-v1.json:\n" + "\n".join(problems), pytrace=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.nodeid == slow or item.nodeid.startswith(slow + "[") for slow in SLOW):
            item.add_marker(pytest.mark.slow)
