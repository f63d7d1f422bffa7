"""The signatures of docs/contract.md and docs/block-pool-contract.md are generated from the
operation tables (cacheproof/docs/signatures.py), and the tables agree with the executable specs'
own Python signatures, so a user who writes from the documents writes what the checker calls."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cacheproof.cli import main
from cacheproof.docs import signatures
from cacheproof.docs.command import render as render_document
from cacheproof.spec.kinds import get_kind, kind_names

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.mark.parametrize("document", signatures.SECTIONS)
def test_the_committed_section_is_the_generated_one(document):
    text = (DOCS / document).read_text(encoding="utf-8")
    assert signatures.has_section(text)
    assert signatures.with_section(text, signatures.render(signatures.SECTIONS[document])) == text


@pytest.mark.parametrize("kind_name", kind_names())
def test_the_table_agrees_with_the_specs_own_methods(kind_name):
    """Each operation's arguments (names, order, keyword-only, defaults) are those of the
    executable spec's method: the table, hence the documents, cannot name another signature."""
    kind = get_kind(kind_name)
    spec = kind.new(64)
    for operation in kind.operations:
        method = getattr(spec, "__contains__" if operation.form == "contains" else operation.name)
        parameters = list(inspect.signature(method).parameters.values())
        assert [p.name for p in parameters] == [a.name for a in operation.arguments], operation.name
        for parameter, argument in zip(parameters, operation.arguments):
            assert (parameter.kind is inspect.Parameter.KEYWORD_ONLY) == argument.keyword, (operation.name, argument)
            default = None if parameter.default is inspect.Parameter.empty else repr(parameter.default)
            assert default == argument.default, (operation.name, argument)


def test_signatures_are_written_as_a_user_implements_them():
    """Worked by hand from the contracts' prose."""
    blocks, cache = signatures.render("blocks"), signatures.render("cache")
    assert "| `allocate(request: int, n: int) -> tuple[int, ...]` | `InvalidArgumentError`, `WrongStateError`, `CapacityError` |" in blocks
    assert "`allocate_slots(request: int, tokens: tuple[int, ...]) -> tuple[int, ...] \\| None`" in blocks
    assert "`reset() -> bool` | none |" in blocks and "factory(num_blocks: int)" in blocks
    assert "`reserve(key: Hashable, nbytes: int, *, retain: bool = True) -> bool`" in cache
    assert "`__contains__(key: Hashable) -> bool` | `InvalidArgumentError` |" in cache
    assert "factory(capacity_bytes: int)" in cache


def test_a_kind_without_a_type_for_a_domain_is_named(monkeypatch):
    monkeypatch.delitem(get_kind("blocks").types, "tokens")
    with pytest.raises(KeyError, match="'blocks'.*no Python type for 'tokens'"):
        signatures.render("blocks")


def test_docs_check_reports_a_stale_section_and_docs_rewrites_it(tmp_path, capsys):
    for name in signatures.SECTIONS:
        text = (DOCS / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(signatures.with_section(text, f"{signatures.START}\nstale\n{signatures.END}"))
    (tmp_path / "invariants.md").write_text(render_document("invariants.md"))
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert all(f"out of date: {tmp_path / name}" in out for name in signatures.SECTIONS), out
    assert main(["docs", "--out", str(tmp_path)]) == 0
    for name in signatures.SECTIONS:
        assert (tmp_path / name).read_text(encoding="utf-8") == (DOCS / name).read_text(encoding="utf-8")


def test_writing_a_section_into_a_text_without_its_markers_is_refused():
    with pytest.raises(signatures.SignatureSectionError, match="no .* section to write"):
        signatures.with_section(f"{signatures.END}\n{signatures.START}\n", signatures.render("blocks"))


def test_a_document_without_the_markers_is_left_alone(tmp_path):
    """`cacheproof docs --out DIR` in a user's folder never touches their own contract.md."""
    own = tmp_path / "contract.md"
    own.write_text("# our own contract\n")
    assert main(["docs", "--out", str(tmp_path)]) == 0
    assert own.read_text() == "# our own contract\n"


def test_the_block_pool_contract_names_each_compared_view():
    text = (DOCS / "block-pool-contract.md").read_text(encoding="utf-8")
    compared = text.split("### What the checker compares", 1)[1].split("\n### ", 1)[0]
    for view in get_kind("blocks").views:
        assert f"| `{view}()` |" in compared, view
