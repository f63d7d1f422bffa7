"""The architecture of docs/architecture.md, enforced.

- import-linter's contracts in pyproject.toml (the layers, impl on the spec alone, a stdlib-only
  spec) are kept;
- `cacheproof.spec` imports with the heavy and third-party packages blocked, and `import cacheproof`
  loads none of hypothesis, z3, torch or numpy;
- no folder holds more than 12 modules and no module more than 500 lines (cacheproof/, spec/, impl/);
- at most five modules name `CacheSpec` (the spec, its kind, the package's lazy names, and the
  cache kind's own proof pieces); everything else reads the spec-kind interface;
- no private Hypothesis name is used outside cacheproof/check/seeded_draws.py, whose reason is
  written there and tested in test_seeded_draws.py, and cacheproof/testing/plugin.py, which keys a
  test's database entries by its node id as Hypothesis's own pytest plugin and HypoFuzz do (tested in
  test_pytest_plugin.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_FOLDERS = ("cacheproof", "spec", "impl")
HEAVY = ("hypothesis", "z3", "torch", "numpy", "triton", "rich", "pytest")


def _modules(folder: str) -> list[Path]:
    """Every module under `folder`, not following the links cacheproof/spec and cacheproof/impl."""
    return sorted(path for path in (ROOT / folder).rglob("*.py") if not path.is_symlink())


def _all_modules() -> list[Path]:
    return [path for folder in SOURCE_FOLDERS for path in _modules(folder)]


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") >= 3


def test_the_layers_contract_sees_a_planted_violation(tmp_path: Path) -> None:
    planted = ROOT / "cacheproof" / "contract" / "_planted_violation.py"
    planted.write_text("def later():\n    from cacheproof.check.programs import run\n")
    try:
        lint = Path(sys.executable).with_name("lint-imports")
        result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    finally:
        planted.unlink()
    assert result.returncode != 0
    assert "cacheproof.contract._planted_violation -> cacheproof.check.programs.run" in result.stdout


_BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {heavy!r}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
"""


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)


def test_the_spec_imports_on_the_standard_library_alone() -> None:
    spec_modules = sorted(
        ".".join(p.relative_to(ROOT / "spec").with_suffix("").parts) for p in _modules("spec") if p.stem != "__init__"
    )
    code = _BLOCKER.format(heavy=set(HEAVY)) + "".join(
        f"import cacheproof.spec.{name}\n" for name in spec_modules
    ) + "from cacheproof.spec.kinds import get_kind, kind_names\n" \
        "print(sorted(get_kind(name).name for name in kind_names()))\n"
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert "'blocks', 'cache'" in result.stdout


def test_the_blocker_does_block() -> None:
    result = _run_python(_BLOCKER.format(heavy=set(HEAVY)) + "import hypothesis\n")
    assert result.returncode != 0 and "blocked: hypothesis" in result.stderr


def test_importing_cacheproof_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, cacheproof\n"
        "assert cacheproof.CacheSpec(8).capacity_bytes == 8\n"
        f"print(sorted(m for m in {HEAVY[:4]!r} if m in sys.modules))\n"
    )
    result = _run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


_FIRST_IMPORTS = """
import os, sys, traceback
import hypothesis, numpy, rich, torch, z3  # third-party, imported once before the children fork
bad = []
for name in NAMES:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(name)
        except BaseException as error:
            os.write(write, f"{type(error).__name__}: {error}".encode())
            os._exit(1)
        os._exit(0)
    os.close(write)
    message = os.read(read, 4096).decode()
    os.close(read)
    if os.waitpid(pid, 0)[1]:
        bad.append((name, message))
print(bad)
"""


def _module_names() -> dict[str, Path]:
    """Every module of the three source folders by its import name (spec/ and impl/ are imported as
    cacheproof.spec and cacheproof.impl), but scripts and planted test modules."""
    names = {}
    for path in _all_modules():
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] != "cacheproof":
            parts = ("cacheproof", *parts)
        if parts[-1] in ("__main__", "_block_table_triton") or parts[-1].startswith("_planted"):
            continue
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _executed_at_import(tree: ast.Module) -> list[ast.AST]:
    """The import statements a module runs when it is imported: those outside function bodies, and
    those of a module-level `__getattr__` (a package's lazy names load on first use, which a module
    importing such a name does at its own import)."""
    found, stack = [], list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                not (node in tree.body and node.name == "__getattr__"):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) or isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _imports_at_module_level(names: dict[str, Path]) -> dict[str, set[str]]:
    """For each module, the modules of `names` that importing it may import first: its parent
    packages, what its import statements name (a `from package import name` may name a submodule or
    a lazy name), and every module a string constant of its lazy `__getattr__` or tables names.
    Over-approximate on purpose: a module never reached here cannot be on a cycle of imports."""
    graph = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = {name.rpartition(".")[0]}
        for node in _executed_at_import(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant):
                targets.add(node.value)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                targets.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
        graph[name] = {prefix for target in targets for prefix in _prefixes(target) if prefix in names} - {name}
    return graph


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def _on_a_cycle(graph: dict[str, set[str]]) -> set[str]:
    """The modules on some cycle of `graph` (the strongly connected components of more than one)."""
    reaches = {name: set() for name in graph}
    for name in graph:
        stack = list(graph[name])
        while stack:
            other = stack.pop()
            if other not in reaches[name]:
                reaches[name].add(other)
                stack.extend(graph[other])
    return {name for name in graph if name in reaches[name]}


def test_no_import_cycle_at_module_level() -> None:
    """Every module imports on its own, first. A module can fail so only on a cycle of module-level
    imports, so the modules on one (read from their import statements, over-approximated) each import
    in a child forked from an interpreter that has imported nothing of cacheproof (a cycle fails when
    entered from one of its modules); all the others import together in one more child."""
    names = _module_names()
    cyclic = sorted(_on_a_cycle(_imports_at_module_level(names)))
    result = _run_python(f"NAMES = {cyclic!r}\n" + _FIRST_IMPORTS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout
    rest = sorted(set(names) - set(cyclic))
    together = _run_python("".join(f"import {name}\n" for name in rest))
    assert together.returncode == 0, together.stderr


def test_the_import_graph_puts_a_planted_cycle_on_a_cycle_and_a_lazy_name_on_its_package(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from cyc.b import B\nA = 1\n")
    (tmp_path / "b.py").write_text("from cyc.a import A\nB = 2\n")
    (tmp_path / "lazy.py").write_text("def __getattr__(name):\n    import importlib\n    return importlib.import_module('cyc.c')\n")
    (tmp_path / "c.py").write_text("from cyc.lazy import thing\n")
    names = {f"cyc.{stem}": tmp_path / f"{stem}.py" for stem in ("a", "b", "lazy", "c")}
    graph = _imports_at_module_level(names)
    assert graph["cyc.c"] == {"cyc.lazy"} and graph["cyc.lazy"] == {"cyc.c"}
    assert _on_a_cycle(graph) == {"cyc.a", "cyc.b", "cyc.c", "cyc.lazy"}


def test_the_cycle_check_sees_a_planted_cycle(tmp_path: Path) -> None:
    (tmp_path / "cyc").mkdir()
    (tmp_path / "cyc" / "__init__.py").write_text("")
    (tmp_path / "cyc" / "a.py").write_text("from cyc.b import B\nA = 1\n")
    (tmp_path / "cyc" / "b.py").write_text("from cyc.a import A\nB = 2\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\nNAMES = ['cyc.a']\n" + _FIRST_IMPORTS
    result = _run_python(code)
    assert "cyc.a" in result.stdout and "ImportError" in result.stdout


@pytest.mark.parametrize("folder", SOURCE_FOLDERS)
def test_no_folder_holds_more_than_twelve_modules(folder: str) -> None:
    crowded = {}
    for directory in {path.parent for path in _modules(folder)}:
        count = len([p for p in directory.glob("*.py") if p.name != "__init__.py"])
        if count > 12:
            crowded[str(directory.relative_to(ROOT))] = count
    assert crowded == {}


def test_no_module_is_over_five_hundred_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _all_modules() if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


def test_at_most_five_modules_name_the_cache_spec_class() -> None:
    naming = [str(p.relative_to(ROOT)) for p in _all_modules() if re.search(r"\bCacheSpec\b", p.read_text())]
    assert len(naming) <= 5, naming


def test_no_private_hypothesis_name_outside_draws() -> None:
    private = re.compile(r"_hypothesis_internal|hypothesis\.internal|from hypothesis\.[\w.]+ import _|hypothesis\._")
    allowed = (ROOT / "cacheproof" / "check" / "seeded_draws.py", ROOT / "cacheproof" / "testing" / "plugin.py")
    users = [str(p.relative_to(ROOT)) for p in _all_modules() if private.search(p.read_text()) and p not in allowed]
    assert users == []


def test_prove_imports_nothing_from_check() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _modules("cacheproof/prove")
                 if re.search(r"^\s*(from|import) cacheproof\.check\b", p.read_text(), re.M)]
    assert offenders == []
