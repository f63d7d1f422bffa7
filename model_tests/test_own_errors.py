"""Errors are matched by class name for every spec kind: a pool raising its own classes, named as
the contract's (model_tests/own_error_pools.py), conforms; a pool whose bug is raised with its own
classes is reported once, with a snippet that fails when run; and a snippet asserts a result by the
checker's rule (same type), so a float where the contract returns an int fails it too."""

from __future__ import annotations

import pytest

from cacheproof.check.programs.command import snippet_of
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.contract.steps import outcome_of
from cacheproof.spec.kinds import get_kind, kind_names
from model_tests import block_pools, own_error_pools

KIND = get_kind("blocks")


def _check(factory, **options):
    return run_program_check(KIND, factory, generator_for("blocks"), **options)


def _run_snippet(snippet: str) -> None:
    exec(compile(snippet, "<snippet>", "exec"), {})


class _Raising:
    """A target whose `op` raises the given exception."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def op(self):
        raise self.error


ERRORS = {
    "cache": {"InvalidArgumentError", "TooLargeError", "UnknownKeyError", "WrongStateError", "ConflictError",
              "CapacityError"},
    "blocks": {"InvalidArgumentError", "WrongStateError", "CapacityError"},
    "radix": {"InvalidArgumentError", "WrongStateError", "CapacityError"},
    "slots": {"InvalidArgumentError", "WrongStateError"},
}
"""Each kind's contract errors, as docs/contract.md (Errors), docs/block-pool-contract.md,
docs/radix-contract.md and docs/slots-contract.md list them."""


def test_every_kind_names_the_errors_its_contract_lists():
    assert set(kind_names()) == set(ERRORS)
    for name, errors in ERRORS.items():
        assert get_kind(name).error_names == errors, name


def test_an_error_of_the_implementations_own_class_is_a_contract_error_by_name():
    error_names = KIND.error_names
    own = outcome_of(_Raising(own_error_pools.DoubleFreeError("twice")), Call("op", (), {}), error_names)
    assert own.crash is None and own.error == "DoubleFreeError"
    assert "WrongStateError" in own.error_classes and "CacheError" not in own.error_classes
    other = outcome_of(_Raising(KeyError(3)), Call("op", (), {}), error_names)
    assert other.error is None and other.crash == "KeyError: 3"


def test_a_pool_raising_its_own_same_named_classes_conforms():
    report = _check(own_error_pools.OwnErrorsPool, examples=150, seed=0, max_divergences=5)
    assert report.ok, [example.difference.describe() for example in report.counterexamples]
    assert report.coverage.missing() == (), report.coverage.summary()  # its errors were raised, and matched


def test_its_own_class_for_the_wrong_error_is_found_once_with_a_failing_snippet():
    report = _check(own_error_pools.WrongClassFreePool, examples=300, seed=0, max_divergences=5)
    assert len(report.counterexamples) == 1, [e.difference.describe() for e in report.counterexamples]
    example = report.counterexample
    assert example.calls[-1].op == "free"
    assert (example.difference.expected.error, example.difference.actual.error) == ("WrongStateError",
                                                                                      "InvalidArgumentError")
    snippet = snippet_of(KIND, "model_tests.own_error_pools:WrongClassFreePool", example, None)
    with pytest.raises(own_error_pools.InvalidArgumentError):
        _run_snippet(snippet)
    _run_snippet(snippet.replace("WrongClassFreePool as factory", "OwnErrorsPool as factory"))


def test_a_bug_of_a_pool_with_its_own_classes_is_found_with_a_failing_snippet():
    report = _check(own_error_pools.OwnErrorsDoubleFreePool, examples=300, seed=0, max_divergences=5)
    assert not report.ok
    assert all(example.difference.actual.crash is None for example in report.counterexamples)
    for example in report.counterexamples:
        snippet = snippet_of(KIND, "model_tests.own_error_pools:OwnErrorsDoubleFreePool", example, None)
        # an assertion of the spec's outcome or views, or the pool's own error where the spec returns
        with pytest.raises((AssertionError, own_error_pools.PoolError)):
            _run_snippet(snippet)


def test_a_result_of_another_type_fails_its_snippet():
    report = _check(block_pools.FloatCountPool, examples=100, seed=0)
    example = report.counterexample
    assert example is not None and example.calls[-1].op == "num_free"
    snippet = snippet_of(KIND, "model_tests.block_pools:FloatCountPool", example, None)
    with pytest.raises(AssertionError, match="this implementation: [0-9]+\\.0"):
        _run_snippet(snippet)
    _run_snippet(snippet.replace("FloatCountPool as factory", "ListBlockPool as factory"))


def test_the_command_line_passes_the_own_classes_pool_and_reports_the_wrong_class_once(capsys):
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.own_error_pools:OwnErrorsPool",
                 "--examples", "60", "--quiet", "--max-divergences", "5"]) == 0
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.own_error_pools:WrongClassFreePool",
                 "--examples", "200", "--quiet", "--max-divergences", "5"]) == 1
    out = capsys.readouterr().out
    assert "counterexample (" in out and "crashed" not in out


def test_the_pytest_kit_passes_the_own_classes_pool_and_fails_the_wrong_class():
    import unittest

    from cacheproof.testing import program_test_case

    def run(factory) -> unittest.TestResult:
        result = unittest.TestResult()
        program_test_case(factory, "blocks", examples=60)().run(result)
        return result

    passing = run(own_error_pools.OwnErrorsPool)
    assert passing.wasSuccessful(), passing.failures + passing.errors
    failing = run(own_error_pools.WrongClassFreePool)
    assert len(failing.failures) == 1
    assert "the spec raised WrongStateError, the implementation raised InvalidArgumentError" in failing.failures[0][1]


def test_isolate_carries_the_own_classes_by_name(capsys):
    assert main(["check", "--spec", "blocks", "--isolate", "--impl", "model_tests.own_error_pools:OwnErrorsPool",
                 "--examples", "15", "--quiet"]) == 0
    assert "conforms: 15 examples" in capsys.readouterr().out
