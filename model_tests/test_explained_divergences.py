"""A divergence of any spec kind is explained the same way: every difference at the diverging call
(the outcome, each part of each view that differs) with what it concerns, then why (the spec's
rule for the call, the invariants the implementation's own step breaks, those the differences
concern), values named readably: hashes short and consistent in one report, blocks and requests by
their nouns (cacheproof/contract/explaining/).

The expected lines are worked out here from the block-pool contract (docs/block-pool-contract.md)
and the broken pools' docstrings, not read from the explainer's output."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from cacheproof.check.programs.program import ProgramCounterexample
from cacheproof.check.programs.command import explained_lines
from cacheproof.check.report import divergence_lines, program_divergence
from cacheproof.cli import main
from cacheproof.contract.calls import Call
from cacheproof.contract.explaining.names import Names, shortest_length
from cacheproof.contract.explaining.steps import diverging_call, explain_all
from cacheproof.contract.steps import differential_step
from cacheproof.report.command import page_of
from cacheproof.report.inputs import read_input
from cacheproof.spec.blocks.kind import BLOCK_KIND
from cacheproof.spec.blocks.semantics import BLOCK_CONTRACT
from cacheproof.spec.errors import WrongStateError
from cacheproof.spec.kind import Argument, Operation, SpecKind, ViewPart
from model_tests import block_pools
from model_tests.snippet_runs import diverging_line, run_snippet, snippets_in

MASK = 2**64 - 1


def _explained(pool_class, size: int, calls: list[Call]):
    """`calls` run on a fresh spec and a fresh pool, compared at every call as the checker does; the
    difference at the last one, explained."""
    model, pool = BLOCK_KIND.new(size, BLOCK_CONTRACT), pool_class(size)
    for call in calls[:-1]:
        assert differential_step(model, pool, call, BLOCK_KIND.views, error_names=BLOCK_KIND.error_names,
                                 readers=BLOCK_KIND.view_readers) is None
    difference = differential_step(model, pool, calls[-1], BLOCK_KIND.views, error_names=BLOCK_KIND.error_names,
                                   readers=BLOCK_KIND.view_readers)
    assert difference is not None
    (explanation,) = explain_all(BLOCK_KIND, [diverging_call(BLOCK_KIND, size, BLOCK_CONTRACT, calls, difference)])
    return difference, explanation


def test_a_double_free_is_explained_difference_by_difference_with_named_blocks_and_requests():
    # 3 usable blocks: request 1 takes blocks 1 and 2, caches block 1, then frees block 1 twice in one call
    cached = 0x1A2B3C4D5E6F7081
    difference, explanation = _explained(block_pools.DoubleFreePool, 4, [
        Call("allocate", (1, 2)), Call("cache_blocks", (1, (1,), (cached,))), Call("free", (1, (1, 1)))])
    assert difference.describe() == ("cache.free(1, (1, 1)): the spec raised WrongStateError, the implementation "
                                     "returned None; snapshot() differs from the spec's")
    assert explanation.differences == (
        "outcome: spec raised WrongStateError; this implementation returned None",
        # the spec changes nothing; the pool queues block 1 behind block 3, the one free block
        "snapshot(), free queue (head first): spec block 3; this implementation blocks 3, 1 (concerns B1, B2)",
        # the hash is the same on both sides: the difference concerns the ref count's invariants only
        "snapshot(), block 1: spec ref 1, hash #1a2b3c…; this implementation ref -1, hash #1a2b3c… (concerns B1, B3, B7)",
        "snapshot(), request 1 holdings: spec blocks 1, 2; this implementation block 2 (concerns B7)",
    )
    why = explanation.why
    assert why[0].startswith("the spec's rule for free: free(request=1, block=1): ") and "double free" in why[0]
    # ref -1 (B3); block 1 queued while its count is not 0 (B2), so the queue is longer than the free
    # blocks (B1); no request holds block 1 any more while its count is -1 (B7): each with its witness
    assert explanation.broken == (
        "your implementation breaks B1: the free queue holds 2 blocks while 1 non-null block has ref count 0",
        "your implementation breaks B2: block 1 is in the free queue with ref -1",
        "your implementation breaks B3: block 1 has ref -1",
        "your implementation breaks B7: block 1 has ref -1 while no request holds it",
    )
    assert explanation.lines()[:4] == explanation.broken  # said before the differences
    assert all("B8" not in line and "B4" not in line for line in why)  # the pool did not raise; hashes agree
    assert str(cached) not in "\n".join(explanation.lines())


def test_a_foreign_free_names_the_request_whose_holding_was_taken():
    # the two calls of ForeignFreePool's docstring: request 2 frees block 1, which request 1 holds
    _, explanation = _explained(block_pools.ForeignFreePool, 3, [Call("allocate", (1, 1)), Call("free", (2, (1,)))])
    assert explanation.differences == (
        "outcome: spec raised WrongStateError; this implementation returned None",
        "snapshot(), free queue (head first): spec block 2; this implementation blocks 1, 2 (concerns B1, B2)",
        "snapshot(), block 1: spec ref 1, no hash; this implementation ref 0, no hash (concerns B1, B3, B7)",
        "snapshot(), request 1 holdings: spec block 1; this implementation absent (concerns B7)",
    )
    assert explanation.why[0].startswith("the spec's rule for free: free(request=2, block=1): ")
    # the pool's own state is consistent: only the contract's rule (a request frees what it holds) is broken
    assert not any("breaks" in line for line in explanation.why)
    assert "the differences concern B7: no orphan" in "\n".join(explanation.why)


def test_hashes_are_short_the_same_hash_reads_the_same_and_the_differences_name_the_invariants():
    # request 1 writes two full blocks (chained hashes); reset drops them while the blocks are in use
    tokens = (5, 6, 7, 8, 9)
    _, explanation = _explained(block_pools.ResetInUsePool, 4, [Call("allocate_slots", (1, tokens)), Call("reset", ())])
    first = hash(((5, 6),))  # block_hash(None, tokens): hash((tokens,)) (docs/block-pool-contract.md)
    second = hash((first, (7, 8)))
    short = {value: f"#{format(value & MASK, '016x')[:6]}…" for value in (first, second)}
    assert short[first] != short[second]
    assert explanation.differences[0] == "outcome: spec returned False; this implementation returned True"
    assert explanation.differences[1:] == (  # the ref counts agree: the differences concern the hashes' invariants
        f"snapshot(), block 1: spec ref 1, hash {short[first]}; this implementation ref 1, no hash (concerns B4, B5)",
        f"snapshot(), block 2: spec ref 1, hash {short[second]}; this implementation ref 1, no hash (concerns B4, B5)",
        "cached_tokens(), request 1 cached tokens: spec 4; this implementation 0 (concerns B4, B5)",  # two full blocks of 2
    )
    text = "\n".join(explanation.lines())
    assert str(first) not in text and str(second) not in text  # never the 19-digit form
    assert "the differences concern B4: the hash map is exact" in text


def test_names_tell_hashes_apart_within_one_report():
    close = (0x1A2B3C4D00000001, 0x1A2B3C4D00000002, -5)  # two share 15 hex digits; -5 is ffff...fffb
    names = Names()
    for value in close:
        names.hash(value)
    settled = names.settled()
    forms = [settled.hash(value) for value in close]
    assert len(set(forms)) == 3
    assert forms[0] == "#1a2b3c4d00000001" and forms[1] == "#1a2b3c4d00000002"  # all 16 digits needed
    assert settled.hash(close[0]) == forms[0]  # the same hash, the same form
    assert Names().settled().hash(close[0]) == "#1a2b3c…"  # alone, six digits do
    assert settled.hash(7) == "#7" and settled.hash(-42) == "#-42"  # small hashes read whole
    assert shortest_length([0xABCDEF1000000000, 0xABCDEF2000000000]) == 7
    assert Names().things("block", ()) == "none" and Names().things("request", (2,)) == "request 2"
    assert Names().things("block", (2, 3, 4, 5, 1, 7, 8)) == "blocks 2-5, 1, 7, 8"  # runs of three or more
    assert Names().things("block", (3, 4, 5, -1, 0, 1)) == "blocks 3-5, -1, 0, 1"  # ids are >= 0


# A third kind, given nothing: it is explained from the interface alone ------------------------

class _Trie:
    """A tiny radix tree: keys inserted, the snapshot the sorted keys; inserting a key twice is an error."""

    def __init__(self, size: int, semantics=None) -> None:
        self.keys: list[str] = []

    def insert(self, key: str) -> None:
        if key in self.keys:
            raise WrongStateError(f"insert({key!r}): the key is already in the tree")
        self.keys.append(key)

    def snapshot(self) -> tuple:
        return tuple(sorted(self.keys))


class _DroppingTrie(_Trie):
    """Inserting a key that shares a first letter with one in the tree replaces that one."""

    def insert(self, key: str) -> None:
        self.keys = [k for k in self.keys if k[:1] != key[:1]]
        super().insert(key)


_TRIE_KIND = SpecKind(
    name="trie", summary="a radix tree", size_name="nodes", new=_Trie, invariants=(),
    operations=(Operation("insert", (Argument("key", "key"),), "None", ("WrongStateError",), True,
                          summary="add the key; every other key stays"),),
)


def _trie_explained(kind: SpecKind):
    calls = [Call("insert", ("ab",)), Call("insert", ("ac",))]
    model, tree = kind.new(4), _DroppingTrie(4)
    assert differential_step(model, tree, calls[0], kind.views, error_names=kind.error_names) is None
    difference = differential_step(model, tree, calls[1], kind.views, error_names=kind.error_names)
    (explanation,) = explain_all(kind, [diverging_call(kind, 4, None, calls, difference)])
    return explanation


def test_a_kind_with_no_readings_gets_each_view_whole_and_the_operations_rule():
    explanation = _trie_explained(_TRIE_KIND)
    assert explanation.differences == ("snapshot(): spec ('ab', 'ac'); this implementation ('ac',)",)
    assert explanation.why == ("the spec's rule for insert: add the key; every other key stays",)


def test_a_kind_that_reads_its_views_gets_them_part_by_part():
    def keys(answer, names):
        return [ViewPart(f"key {key!r}", "present", ("T1",)) for key in answer]

    invariant = dataclasses.make_dataclass("Invariant", ["name", "rule", "holds"])
    kind = dataclasses.replace(
        _TRIE_KIND, readings={"snapshot": keys},
        invariants=(invariant("T1", "no key is lost", lambda step: set(step[0]) <= set(step[1])),),
        judge=lambda call, size, before, after, raised, result, semantics: (before["snapshot"], after["snapshot"]),
    )
    explanation = _trie_explained(kind)
    assert explanation.differences == ("snapshot(), key 'ab': spec present; this implementation absent (concerns T1)",)
    # a table without witnesses: the rule says what is broken
    assert explanation.broken == ("your implementation breaks T1: no key is lost",)
    assert explanation.why == ("the spec's rule for insert: add the key; every other key stays", "T1: no key is lost")


# The check command, its JSON report and the HTML page ------------------------------------------

def test_check_prints_every_difference_and_why_and_its_snippet_still_fails(tmp_path: Path, capsys):
    report_path = tmp_path / "report.json"
    status = main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool", "--examples", "60",
                   "--seed", "3", "--max-divergences", "1", "--json", str(report_path)])
    out = capsys.readouterr().out
    assert status == 1
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("counterexample ("))
    said = lines[at + 1:lines.index(next(line for line in lines if line.startswith("# cacheproof counterexample")))]
    # the invariants the pool's own state breaks come first, then the kind of the divergence
    broken = [line for line in said if line.startswith("  your implementation breaks ")]
    assert broken and said[:len(broken)] == broken, said
    assert said[len(broken)].startswith("  kind: ")
    assert any(line.startswith("  the spec's rule for ") for line in said), said
    assert all(len(line) < 400 for line in said), "no nested tuple of the whole state"
    (snippet,) = snippets_in(out)
    run = run_snippet(snippet)
    assert run.returncode != 0 and run.failing_line is not None and run.failing_line >= diverging_line(snippet), run
    (divergence,) = json.loads(report_path.read_text())["divergences"]
    assert divergence["why"] and divergence["why"] == [line.strip() for line in said if not line.startswith("  kind: ")
                                                       and line != "  every difference at that call:"]
    assert [f"  your implementation breaks {found['name']}: {found['witness']}"
            for found in divergence["broken_invariants"]] == broken
    for view in divergence["state_diff"]["views"]:  # the JSON keeps the views whole
        assert isinstance(view["spec"], list) and isinstance(view["implementation"], list)
    page = page_of(read_input(report_path))
    assert "<h3>Why</h3>" in page and "the spec&#x27;s rule for " in page


def test_the_differences_are_listed_unless_the_counterexample_line_says_them():
    # the tensor cache's line is its first difference; another kind's says the outcomes and only names the views
    said = "0 in cache: spec True, this cache False"
    assert divergence_lines("put: ...", [said], ["why"], listed=False) == ["  kind: put: ...", "  why"]
    queue = "snapshot(), free queue (head first): spec block 2; this implementation blocks 1, 2"
    assert divergence_lines("touch: ...", [queue], [], listed=True) == [
        "  kind: touch: ...", "  every difference at that call:", f"    {queue}"]
    only_outcome, outcome_said = _explained(block_pools.ResetInUsePool, 4, [Call("allocate", (1, 1)), Call("reset", ())])
    with_views, explanation = _explained(block_pools.ForeignFreePool, 3, [Call("allocate", (1, 1)),
                                                                          Call("free", (2, (1,)))])
    assert "  every difference at that call:" not in explained_lines(only_outcome, outcome_said)
    assert explained_lines(with_views, explanation)[1:3] == [
        "  every difference at that call:", "    outcome: spec raised WrongStateError; this implementation returned None"]


def test_the_html_page_shows_a_pool_divergence_part_by_part_with_the_same_short_hashes(tmp_path: Path):
    calls = [Call("allocate_slots", (1, (5, 6, 7, 8, 9))), Call("reset", ())]
    difference, explanation = _explained(block_pools.ResetInUsePool, 4, calls)
    example = ProgramCounterexample(4, tuple(calls), difference)
    divergence = program_divergence(example, "pass\n", explanation)
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"ok": False, "spec": "blocks", "impl": "model_tests.block_pools:ResetInUsePool",
                                "profile": "contract", "seed": 0, "divergences": [divergence]}))
    page = page_of(read_input(path))
    first = hash(((5, 6),))
    short = f"#{format(first & MASK, '016x')[:6]}…"
    why = page[page.index("<h3>Why</h3>"):]
    table = page[:page.index("<h3>Why</h3>")]
    assert f"snapshot(), block 1: spec ref 1, hash {short}; this implementation ref 1, no hash" in why
    assert "<th>snapshot(), block 1</th>" in table and f"<td class=\"value\">ref 1, hash {short}</td>" in table
    assert str(first) not in table  # the table too writes it short (the snippet keeps it whole)
