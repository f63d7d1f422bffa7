"""The null block where a profile makes it a valid argument (`null_block="skip"`, vllm-block-pool):
the block generator pads touch, cache_blocks, free and evict with it as block tables do, the outcome
coverage counts those calls, a pool that passes over it conforms and one that pins it is found."""

from __future__ import annotations

import pytest

from cacheproof.check.programs.generators.block_calls import NULL_BLOCK_CASE, BlockCalls
from cacheproof.check.programs.command import snippet_of
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import run_program_check
from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.spec.blocks.operations import POOL_OPERATIONS
from cacheproof.spec.blocks.pool import BlockPoolSpec
from cacheproof.spec.kinds import get_kind
from model_tests import null_block_pools
from model_tests.drawn_block_calls import drawn_calls

KIND = get_kind("blocks")
VLLM = KIND.profiles["vllm-block-pool"]
POOL_OPS = POOL_OPERATIONS
"""vllm-block-pool's operations but the partial entries, which the list pools here do not have."""
TAKES_BLOCKS = {"touch": 1, "cache_blocks": 1, "free": 1, "writable": 0, "evict": 0}


def _vllm_check(factory, **options):
    return run_program_check(
        KIND, factory, generator_for("blocks"), semantics=VLLM.semantics, operations=POOL_OPS,
        misuse=False, **options,
    )


def _drawn_calls(semantics):
    """The suited calls of 60 fixed byte strings; none is an InvalidArgumentError (the null block
    among them, where it is skipped)."""
    drawn = drawn_calls(semantics, POOL_OPS)
    assert [d.call for d in drawn if d.raised == "InvalidArgumentError"] == []
    return [d.call for d in drawn]


def _carry_the_null_block(calls) -> set[str]:
    return {call.op for call in calls if call.op in TAKES_BLOCKS and 0 in call.args[TAKES_BLOCKS[call.op]]}


def test_the_generator_pads_every_block_taking_call_with_the_null_block_where_it_is_skipped():
    assert _carry_the_null_block(_drawn_calls(VLLM.semantics)) == set(TAKES_BLOCKS)


def test_under_the_contract_no_suited_call_carries_the_null_block():
    assert _carry_the_null_block(_drawn_calls(KIND.profiles["pool"].semantics)) == set()


def test_a_pool_that_passes_over_the_null_block_conforms_and_the_coverage_counts_the_null_block():
    report = _vllm_check(null_block_pools.NullSkippingPool, examples=150, seed=0)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    rows = {(op, NULL_BLOCK_CASE) for op in TAKES_BLOCKS}
    assert rows <= set(report.coverage.possible())
    assert all(report.coverage.counts[row] > 0 for row in rows), report.coverage.summary()
    assert report.coverage.to_json()["operations"]["touch"][NULL_BLOCK_CASE] > 0


def test_the_contract_has_no_null_block_rows():
    report = run_program_check(KIND, BlockPoolSpec, generator_for("blocks"), examples=20, seed=0)
    assert not any(row == NULL_BLOCK_CASE for _, row in report.coverage.possible())


def test_a_null_block_case_counts_only_when_the_call_returns():
    """Under the contract the null block is misuse: the call raises, and the case is not reached."""
    generator = BlockCalls()
    assert generator.case_of(Call("touch", (1, (0, 2)))) == NULL_BLOCK_CASE
    assert generator.case_of(Call("evict", ((2, 0),))) == NULL_BLOCK_CASE
    assert generator.case_of(Call("touch", (1, (2,)))) is None and generator.case_of(Call("lookup", ((0,),))) is None
    assert generator.cases(None) == () and len(generator.cases(VLLM.semantics)) == len(TAKES_BLOCKS)
    report = run_program_check(KIND, BlockPoolSpec, generator, examples=60, seed=0, operations=("allocate", "touch"))
    assert report.coverage.counts[("touch", "InvalidArgumentError")] > 0  # misuse touches of the null block among them
    assert report.coverage.counts[("touch", NULL_BLOCK_CASE)] == 0


def test_a_pool_that_pins_the_null_block_on_touch_is_found_with_a_snippet_that_fails(capsys):
    name = "NullPinningPool"
    status = main(["check", "--spec", "blocks", "--impl", f"model_tests.null_block_pools:{name}",
                   "--profile", "vllm-block-pool", "--ops", ",".join(POOL_OPS), "--examples", "200", "--seed", "0"])
    output = capsys.readouterr().out
    assert status == 1, output
    report = _vllm_check(null_block_pools.NullPinningPool, examples=200, seed=0)
    example = report.counterexample
    assert example is not None and example.calls[-1].op == "touch" and 0 in example.calls[-1].args[1]
    snippet = snippet_of(KIND, f"model_tests.null_block_pools:{name}", example, VLLM.semantics)
    with pytest.raises(AssertionError):
        exec(compile(snippet, "<snippet>", "exec"), {})
    passing = snippet_of(KIND, "model_tests.null_block_pools:NullSkippingPool", example, VLLM.semantics)
    exec(compile(passing, "<snippet>", "exec"), {})
