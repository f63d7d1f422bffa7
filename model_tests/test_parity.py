"""One pipeline for every spec kind (issue 32): every flag and guarantee of `cacheproof check`, for
every registered kind, works or is refused with one line that says why the kind cannot have it.

`TABLE` is the table: a row per flag or guarantee, each with the cell that runs it for a kind and
the kinds that refuse it (with words of the reason their refusal must say). The test runs every
(row, kind) pair, the kinds read from the registry (`cacheproof.spec.kinds`): a kind registered
later, or a flag added to the table, shows its gaps here. Each kind is checked through `SUBJECTS`:
a conforming implementation, a broken one, one only the kind's wide scope breaks, one that hangs,
one safe under threads, one whose answers agree but whose views do not; a kind without a subject
fails every cell, naming what to add.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from cacheproof.check.programs.generators import exhaustive_scopes
from cacheproof.cli import main
from cacheproof.contract.keys import KEY_DOMAINS
from cacheproof.spec.kinds import get_kind, kind_names
from model_tests.ctrl_c import cpu_seconds, interruptible_cacheproof, press_ctrl_c, wait_for
from model_tests.report_validation import report_errors

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Subject:
    """What the cells check a kind with: its --spec flags, implementations (MODULE:FACTORY) that
    conform, break in a default run, break only in the kind's wide scope, hang in a call, stay
    linearizable under threads, and answer as the spec does while a view (snapshot) differs; a
    --semantics override under which `conforming` diverges; two of its operations for --ops.
    `semantics_subject`: where every field of the kind only trusts its callers more (the slot
    budget's misuse), no conforming implementation diverges under an override; the cell then checks
    that the override reaches the checker by this broken implementation conforming under it."""

    flags: tuple[str, ...]
    conforming: str
    broken: str
    wide_broken: str
    hangs: str
    thread_safe: str
    semantics: str
    ops: str
    view_broken: str
    semantics_subject: str = ""


SUBJECTS = {
    "cache": Subject(
        (), "examples.minimal_cache:MinimalCache", "model_tests.broken_caches:ClearDropsBusyEntries",
        "model_tests.broken_scope_caches:FixedTableOfEight", "model_tests.faulty_caches:EvictHangs",
        "model_tests.racy_caches:LockedCacheSpec", "get_missing=none", "reserve,commit",
        "model_tests.view_liars:CacheSnapshotRetainFlipped",
    ),
    "blocks": Subject(
        ("--spec", "blocks"), "model_tests.block_pools:ListBlockPool", "model_tests.block_pools:DoubleFreePool",
        "model_tests.broken_scope_pools:FreeCountInSixBits", "model_tests.faulty_pools:LookupHangs",
        "cacheproof.impl.kv_cache_manager:kv_cache_manager", "null_block=skip", "allocate,free",
        "model_tests.view_liars:PoolQueueReversedInSnapshot",
    ),
    "radix": Subject(
        ("--spec", "radix"), "model_tests.radix_trees:LastInFirstOutCache", "model_tests.radix_trees:KeepsDuplicates",
        "model_tests.radix_trees:FreeCountInSixBits", "model_tests.radix_trees:MatchHangs",
        "cacheproof.impl.radix_cache:radix_cache", "page_size=2", "insert,match_prefix",
        "model_tests.radix_trees:TreeSnapshotOneSlotShort",
    ),
    "slots": Subject(
        ("--spec", "slots"), "model_tests.slot_budgets:SlotBudget", "model_tests.slot_budgets:FreesTwice",
        "model_tests.slot_budgets:FreeCountInSixBits", "model_tests.slot_budgets:EndStepHangs",
        "model_tests.slot_budgets:LockedSlotBudget", "misuse=trusted", "schedule,end_step",
        "model_tests.slot_budgets:FreeSlotsOneShort", semantics_subject="model_tests.slot_budgets:FreesTwice",
    ),
}

SHORT = ("--examples", "3", "--steps", "10")
"""A run of a few short examples: enough to see that a flag took effect."""


def _check(subject: Subject, impl: str, *flags: str) -> int:
    return main(["check", *subject.flags, "--impl", impl, *flags])


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def workers(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    assert _check(subject, subject.conforming, "--workers", "2", "--examples", "4", "--steps", "10",
                  "--json", str(path)) == 0, capsys.readouterr()
    report = _json(path)
    assert report["workers"] == {"count": 2, "winner": None, "winner_seed": None}
    assert report["examples"] == 4 and report["ok"] is True


def thorough(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """The flaw lies beyond the default scope: only --thorough's wide scope finds it."""
    path = tmp_path / "report.json"
    assert _check(subject, subject.wide_broken, "--thorough", "--max-divergences", "1", "--quiet",
                  "--json", str(path)) == 1, capsys.readouterr()
    report = _json(path)
    assert report["scope"]["scopes"][0] == "small" and "wide" in report["scope"]["scopes"]
    assert report["budget"]["examples"] > report["first_failure_example"] > 1000


def exhaustive(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """One search for every kind: the conforming implementation is clean to depth 2, the broken one
    diverges within 3 calls (each kind's broken subject does: model_tests/test_exhaustive.py)."""
    path = tmp_path / "report.json"
    assert _check(subject, subject.conforming, "--exhaustive", "--depth", "2", "--quiet", "--json", str(path)) == 0
    report = _json(path)
    assert report["exhaustive"]["complete"] is True and report["ok"] is True and report_errors(report) == []
    assert "exhaustive: no divergence in" in capsys.readouterr().out
    assert _check(subject, subject.broken, "--exhaustive", "--depth", "3", "--quiet") == 1
    assert "exhaustive: shortest counterexample" in capsys.readouterr().out


def depth(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    assert _check(subject, subject.conforming, "--exhaustive", "--depth", "1", "--quiet", "--json", str(path)) == 0
    report = _json(path)["exhaustive"]
    assert report["depth"] == report["frontier_depth"] == 1 and len(report["states_per_depth"]) == 2


def scope(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """Every kind declares a scope beyond its default one, which --scope picks."""
    path = tmp_path / "report.json"
    wider = list(exhaustive_scopes(kind))[1]
    assert _check(subject, subject.conforming, "--exhaustive", "--scope", wider, "--depth", "1", "--quiet",
                  "--json", str(path)) == 0
    assert _json(path)["exhaustive"]["scope"] == wider


def keys(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    spec_kind = get_kind(kind)
    for domain in spec_kind.key_domains:
        path = tmp_path / f"{domain}.json"
        assert _check(subject, subject.conforming, "--keys", domain, *SHORT, "--json", str(path)) == 0, domain
        assert _json(path)["keys"] == domain
    capsys.readouterr()
    for domain in (domain for domain in KEY_DOMAINS if domain not in spec_kind.key_domains):
        assert _check(subject, subject.conforming, "--keys", domain, *SHORT) == 2
        _assert_refused(capsys.readouterr().err, f"--keys {domain}", (spec_kind.keys_are, *spec_kind.key_domains))


def semantics(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """The override reaches the spec: an implementation of the contract diverges from it (or, for a
    kind with `semantics_subject`, that broken implementation conforms under it)."""
    path = tmp_path / "report.json"
    impl, status = (subject.semantics_subject, 0) if subject.semantics_subject else (subject.conforming, 1)
    assert _check(subject, impl, "--semantics", subject.semantics, "--examples", "50", "--steps", "20",
                  "--max-divergences", "1", "--quiet", "--json", str(path)) == status, capsys.readouterr()
    name, _, value = subject.semantics.partition("=")
    assert _json(path)["semantics"] == {name: value}


def _hang(isolate: bool) -> Callable[..., None]:
    def cell(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
        path = tmp_path / "report.json"
        assert _check(subject, subject.hangs, "--call-timeout", "0.5", *(["--isolate"] if isolate else []),
                      "--max-divergences", "1", "--quiet", "--json", str(path)) == 1, capsys.readouterr()
        [divergence] = _json(path)["divergences"]
        assert "did not return within 0.5 s" in divergence["message"]
        assert divergence["ending"] != "diverges here"
    return cell


def budget(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    assert _check(subject, subject.conforming, "--budget", "1", "--quiet", "--json", str(path)) == 0
    report = _json(path)
    assert report["budget_seconds"] == 1 and report["seconds"] >= 1 and report["examples"] > 0


def database(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """A failure stored by one run is replayed first by the next, whatever its seed: seed 40 alone
    fails later than its first example, after seed 0's run it fails at its first."""
    def first_failure(seed: str, *flags: str) -> int:
        path = tmp_path / "report.json"
        assert _check(subject, subject.broken, "--seed", seed, "--max-divergences", "1", "--quiet", *flags,
                      "--json", str(path)) == 1
        return _json(path)["first_failure_example"]

    stored = ("--database", str(tmp_path / "examples"))
    assert first_failure("40") > 1
    first_failure("0", *stored)
    assert first_failure("40", *stored) == 1


def trace_out(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """The trace replays: the spec alone agrees with it, the broken implementation diverges again."""
    trace = tmp_path / "trace.jsonl"
    assert _check(subject, subject.broken, "--max-divergences", "1", "--quiet", "--trace-out", str(trace)) == 1
    assert main(["replay", str(trace), "--quiet"]) == 0
    assert main(["replay", str(trace), "--impl", subject.broken, "--quiet"]) == 1
    assert "divergence at step" in capsys.readouterr().out


def threads(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    assert _check(subject, subject.thread_safe, "--threads", "2", "--examples", "3", "--quiet",
                  "--json", str(path)) == 0, capsys.readouterr()
    report = _json(path)
    assert report["threads"] == 2 and report["examples"] == 3 and report["ok"] is True


def threads_views(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """Under --threads the final views are compared as the sequential check compares them, for
    every kind: an implementation that answers as the spec does but whose snapshot differs fails,
    the reason naming the view."""
    path = tmp_path / "report.json"
    assert _check(subject, subject.view_broken, "--threads", "2", "--examples", "20", "--quiet",
                  "--json", str(path)) == 1, capsys.readouterr()
    [divergence] = _json(path)["divergences"]
    assert divergence["kind"] == "not linearizable"
    assert any(f"{view}() is" in divergence["message"] for view in get_kind(kind).views), divergence["message"]
    assert "# cacheproof concurrent counterexample" in divergence["snippet"]


def ops(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    path = tmp_path / "report.json"
    assert _check(subject, subject.conforming, "--ops", subject.ops, *SHORT, "--json", str(path)) == 0
    report = _json(path)
    assert report["operations"] == subject.ops.split(",")
    assert set(report["coverage"]["operations"]) == set(subject.ops.split(","))


def profile(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """Every profile of the kind is accepted and recorded, with its operations; a profile with an
    operation the implementation lacks (vllm-block-pool's partial entries, which the list pool
    does not have) is a usage error naming it."""
    module, _, attribute = subject.conforming.partition(":")
    implementation = getattr(importlib.import_module(module), attribute)
    for name, chosen in get_kind(kind).profiles.items():
        path = tmp_path / f"{name}.json"
        missing = [op for op in chosen.operations
                   if get_kind(kind).operation(op).form == "method" and not hasattr(implementation, op)]
        if missing:
            capsys.readouterr()
            assert _check(subject, subject.conforming, "--profile", name, *SHORT, "--json", str(path)) == 2, name
            assert f"lacks {', '.join(missing)}" in capsys.readouterr().err, name
            continue
        assert _check(subject, subject.conforming, "--profile", name, *SHORT, "--max-divergences", "1", "--quiet",
                      "--json", str(path)) in (0, 1), name
        report = _json(path)
        assert report["profile"] == name and report["operations"] == list(chosen.operations)


def max_divergences(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    found = {}
    for most in ("1", "2"):
        path = tmp_path / f"{most}.json"
        assert _check(subject, subject.broken, "--max-divergences", most, "--quiet", "--json", str(path)) == 1
        found[most] = len(_json(path)["divergences"])
    assert found["1"] == 1 and 1 <= found["2"] <= 2


def json_report(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    for impl, status in ((subject.conforming, 0), (subject.broken, 1)):
        path = tmp_path / "report.json"
        assert _check(subject, impl, *SHORT, "--max-divergences", "1", "--quiet", "--json", str(path)) in (0, 1)
        report = _json(path)
        assert report_errors(report) == [] and report["spec"] == kind and report["impl"] == impl


def max_capacity(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    assert _check(subject, subject.conforming, "--max-capacity", "4096", *SHORT) == 0
    assert _check(subject, subject.conforming, "--max-capacity", str(2**40), *SHORT) == 2
    assert "must be at most" in capsys.readouterr().err


def ctrl_c(kind: str, subject: Subject, tmp_path: Path, capsys) -> None:
    """Ctrl-C ends the check with exit 130 and a partial report (no verdict)."""
    path = tmp_path / "report.json"
    process = subprocess.Popen(
        interruptible_cacheproof("check", *subject.flags, "--impl", subject.conforming, "--examples", "1000000",
                                 "--quiet", "--json", str(path)),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    # CPU time, not wall time: about a second goes to imports, the rest to examples
    wait_for(lambda: cpu_seconds(process.pid) >= 4.0, 120, "the check running examples", process)
    out, err = press_ctrl_c(process)
    assert process.returncode == 130 and path.exists(), out + err
    report = _json(path)
    assert report["ok"] is None and report["interrupted"] is True and report["examples"] > 0
    assert report["spec"] == kind and report["divergences"] == []


@dataclass(frozen=True)
class Row:
    """One flag or guarantee: the cell that runs it for a kind that has it; `refused`, per kind that
    cannot have it, the flags that ask for it and words its one-line refusal must say (why)."""

    cell: Callable[..., None]
    refused: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)


TABLE = {
    "workers": Row(workers),
    "thorough": Row(thorough),
    "exhaustive": Row(exhaustive),
    "depth": Row(depth),
    "scope": Row(scope),
    "keys": Row(keys),
    "semantics": Row(semantics),
    "call-timeout": Row(_hang(isolate=False)),
    "call-timeout-isolate": Row(_hang(isolate=True)),
    "budget": Row(budget),
    "database": Row(database),
    "trace-out": Row(trace_out),
    "threads": Row(threads),
    "threads-views": Row(threads_views),
    "ops": Row(ops),
    "profile": Row(profile),
    "max-divergences": Row(max_divergences),
    "json": Row(json_report),
    "ctrl-c": Row(ctrl_c),
    "max-capacity": Row(max_capacity, refused={
        "blocks": (("--max-capacity", "4096"), ("--max-capacity", "stores no values")),
        "radix": (("--max-capacity", "4096"), ("--max-capacity", "stores no values")),
        "slots": (("--max-capacity", "4096"), ("--max-capacity", "stores no values")),
    }),
}
"""The parity table: (flag or guarantee) x (kind), one test per cell."""


def _assert_refused(err: str, flag: str, why: tuple[str, ...]) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cacheproof check: ") and flag in lines[0], lines[0]
    assert all(word in lines[0] for word in why), (why, lines[0])


@pytest.mark.parametrize("kind", kind_names())
@pytest.mark.parametrize("row", TABLE)
def test_cell(row: str, kind: str, tmp_path: Path, capsys) -> None:
    assert kind in SUBJECTS, f"spec kind {kind!r} has no subject: add its implementations to SUBJECTS"
    subject = SUBJECTS[kind]
    refused = TABLE[row].refused.get(kind)
    if refused is None:
        TABLE[row].cell(kind, subject, tmp_path, capsys)
        return
    flags, why = refused
    assert _check(subject, subject.conforming, *flags, *SHORT) == 2
    _assert_refused(capsys.readouterr().err, flags[0], why)


def test_every_flag_of_check_has_a_row() -> None:
    """A flag added to `cacheproof check` without a row here fails, so that its parity is decided."""
    import argparse

    from cacheproof.check.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {option[2:] for action in parser._actions for option in action.option_strings if option.startswith("--")}
    not_kind_flags = {"help", "spec", "impl", "examples", "steps", "seed", "quiet", "isolate", "no-bad-arguments",
                      "runs", "database-read-only"}
    assert flags - not_kind_flags - set(TABLE) == set()
