"""examples/minimal_pool.py conforms to the block-pool contract, is plain Python, and is what the
command `cacheproof prove --spec blocks` points a user at holds to the spec."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import examples.minimal_pool
from cacheproof.cli import main
from cacheproof.prove.report import PROVES
from cacheproof.sandbox.factories import load_factory
from examples.minimal_pool import MinimalPool

ROOT = Path(__file__).resolve().parent.parent
CHECK_COMMAND = "cacheproof check --spec blocks --impl examples.minimal_pool:MinimalPool"
SEARCH = ["--examples", "120", "--seed", "1", "--quiet"]
"""A derandomized search of the default scope, enough to reach every outcome of the contract."""


class UnhashedFreedToTheTail(MinimalPool):
    """A freed block without a hash joins the tail of the free queue, not the head."""

    def _release(self, request, blocks, readable=False):
        super()._release(request, blocks, readable)
        unhashed = [block for block in self.queue if self.hash[block] is None and block in blocks]
        self.queue = [block for block in self.queue if block not in unhashed] + unhashed


def test_the_documented_check_command_loads_the_example():
    assert CHECK_COMMAND in examples.minimal_pool.__doc__
    assert load_factory(CHECK_COMMAND.split("--impl ")[1]) is MinimalPool


def test_the_command_prove_prints_holds_the_minimal_pool_to_the_spec(capsys):
    """The command `prove --spec blocks` names (issue 35: it once lacked `--spec blocks`), with the
    placeholder filled in, exits 0 on the example pool and 1 on a broken copy of it."""
    (command,) = re.findall(r"`(cacheproof check[^`]*)`", PROVES["blocks"])
    assert command == CHECK_COMMAND.replace("examples.minimal_pool:MinimalPool", "MODULE:FACTORY")
    arguments = command.split()[1:]
    filled = [CHECK_COMMAND.split("--impl ")[1] if word == "MODULE:FACTORY" else word for word in arguments]
    assert main(filled + SEARCH) == 0, capsys.readouterr().out
    assert "conforms" in capsys.readouterr().out
    broken = [f"{__name__}:UnhashedFreedToTheTail" if word == "MODULE:FACTORY" else word for word in arguments]
    assert main(broken + SEARCH + ["--max-divergences", "1"]) == 1
    assert "snapshot() differs from the spec's" in capsys.readouterr().out


def test_the_example_is_plain_python_on_the_spec_alone():
    """It imports the standard library and `cacheproof.spec` only: no torch, no checker."""
    tree = ast.parse((ROOT / "examples" / "minimal_pool.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    foreign = {name for name in modules
               if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith("cacheproof.spec.")}
    assert modules and not foreign, foreign
