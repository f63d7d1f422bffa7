"""The block pool's scopes (`cacheproof.check.programs.generators.block_calls`): the wide scope reaches what the
small one never does, `--thorough` runs them all and says how far it went, and a kind that declares
no wide scope is refused `--thorough` with one line saying so (docs/scope.md)."""

from __future__ import annotations

from dataclasses import replace

from cacheproof.check.phases import Phase
from cacheproof.check.programs import command as program_command
from cacheproof.check.programs.generators.block_calls import SMALL, THOROUGH, WIDE
from cacheproof.check.programs.run import run_program_phases
from cacheproof.cli import main
from cacheproof.spec.kinds import get_kind
from model_tests.block_pools import ListBlockPool
from model_tests.broken_scope_pools import FreeCountInSixBits

KIND = get_kind("blocks")


def test_only_the_wide_scope_finds_a_free_count_that_wraps_past_63() -> None:
    small = run_program_phases(KIND, FreeCountInSixBits, (Phase(SMALL, 100, 100),), seed=0, max_divergences=1)
    assert small.ok and small.largest_size <= SMALL.more_blocks
    wide = run_program_phases(KIND, FreeCountInSixBits, (Phase(WIDE, 200, 100, shrink=False),), seed=0,
                              max_divergences=1)
    assert not wide.ok and wide.scopes == ("wide",)
    assert wide.counterexample.calls[-1].op == "num_free" and wide.counterexample.size >= 65


def test_the_thorough_phases_reach_every_block_scope() -> None:
    fewer = tuple(replace(phase, examples=examples) for phase, examples in zip(THOROUGH, (20, 20, 2)))
    report = run_program_phases(KIND, ListBlockPool, fewer, seed=0, max_divergences=1)
    assert report.ok and report.scopes == ("small", "wide", "long")
    assert report.examples == 42 and report.longest_sequence == 1000
    assert report.largest_size > SMALL.more_blocks


def test_a_seeded_phase_gives_the_same_counterexample_on_the_same_seed() -> None:
    runs = [run_program_phases(KIND, FreeCountInSixBits, (Phase(WIDE, 200, 100, shrink=False),), seed=3,
                               max_divergences=1) for _ in range(2)]
    assert runs[0].counterexample.calls == runs[1].counterexample.calls
    assert runs[0].first_failure_example == runs[1].first_failure_example


def test_thorough_sets_its_own_budget_for_the_block_pool_too(capsys) -> None:
    assert main(["check", "--spec", "blocks", "--thorough", "--examples", "5"]) == 2
    assert "--thorough sets its own budget" in capsys.readouterr().err


def test_a_kind_without_a_wide_scope_is_refused_thorough_in_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(program_command, "thorough_phases", lambda kind: None)
    assert main(["check", "--spec", "blocks", "--thorough", "--impl", "model_tests.block_pools:ListBlockPool"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--thorough is not for --spec blocks" in lines[0]
    assert "declares no wide scope" in lines[0]
