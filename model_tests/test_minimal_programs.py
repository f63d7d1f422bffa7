"""Shrinking reaches the minimal failing program on every path (issue 32): `cacheproof check --spec
blocks` and the pytest kit (`program_test_case`, `cache_test(..., spec="blocks")`) report the
2-call bug of `ForeignFreePool` (`allocate(1, 1); free(2, (1,))`: a request frees a block another
request holds) in 2 calls, and no shrunk sequence keeps a call that a simplified argument emptied.

Before: the command line reported 6 calls on seed 0 (`allocate_slots(1, (1, 1)); free_request(1);
allocate(1, 1); allocate(1, 1); touch(2, (1,)); free(1, (1,))`), the kit 3; removing calls and
lowering arguments cannot turn request 1 into request 2.
"""

from __future__ import annotations

import json
import unittest

import pytest

from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.sandbox.fault_search import DIVERGENCE, Failure, shrink_failure
from cacheproof.testing import program_test_case
from model_tests.block_pools import ForeignFreePool

MINIMAL = 2
"""allocate (or allocate_slots, or a touch of a cached block) for one request, then the other's free."""


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_command_line_shrinks_the_two_call_bug_to_two_calls(seed, tmp_path, capsys):
    report = tmp_path / "r.json"
    status = main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:ForeignFreePool", "--seed", str(seed),
                   "--examples", "200", "--max-divergences", "1", "--json", str(report), "--quiet"])
    capsys.readouterr()
    assert status == 1
    calls = json.loads(report.read_text())["divergences"][0]["calls"]
    assert len(calls) == MINIMAL and calls[-1]["op"] == "free", calls


def test_the_kit_shrinks_the_two_call_bug_to_two_calls():
    result = unittest.TestResult()
    program_test_case(ForeignFreePool, "blocks", examples=200)().run(result)
    message = result.failures[0][1]
    assert f"shrunk to {MINIMAL} calls:" in message, message


def test_a_call_that_a_simpler_argument_empties_is_dropped():
    """The failure needs the touch while `y` has argument 2; once `y(1)` is simpler, it fails without
    the touch, whose emptied `touch(1, ())` (a call that changes nothing) must go too."""
    def attempt(calls: list[Call]) -> Failure | None:
        ops = [call.op for call in calls]
        if not ops or ops[-1] != "x" or "y" not in ops:
            return None
        touched = any(call.op == "touch" and call.args[1] for call in calls)
        y = next(call for call in calls if call.op == "y")
        return Failure(len(calls) - 1, "fails", DIVERGENCE) if touched or y.args[0] == 1 else None

    calls = [Call("touch", (1, (3,))), Call("y", (2,)), Call("x", ())]
    shrunk, _, cut_short = shrink_failure(attempt, calls, Failure(2, "fails", DIVERGENCE), seconds=60)
    assert not cut_short
    assert shrunk == [Call("y", (1,)), Call("x", ())]
