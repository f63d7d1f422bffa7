"""The suite's settings, and which tests are slow.

The README's test command runs `-m "not slow"` and stays under eight minutes on two cores;
.ci/run then runs the slow tests (`-m slow`) and the engines' tests. A test is slow when it takes
ten seconds or more of one worker on a two-core machine (measured with `--durations`): each
searches many examples, waits out call timeouts on purpose, or runs child processes.
"""

import pytest

from cacheproof.settings import register_settings

register_settings()

SLOW = (
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
    "model_tests/test_scope.py::test_the_wide_scope_finds_each_broken_scope_cache",
    "model_tests/test_profiles.py::test_cache_test_case_takes_a_profile_and_ops",
    "model_tests/test_adapters.py::test_checker_finds_the_cachetools_release_order",
)
"""Node ids (or their prefixes, for every parameter of a test) of the slow tests."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.nodeid == slow or item.nodeid.startswith(slow + "[") for slow in SLOW):
            item.add_marker(pytest.mark.slow)
