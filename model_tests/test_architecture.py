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


def test_no_import_cycle_at_module_level() -> None:
    """Every module imports on its own, first: each in a child forked from an interpreter that has
    imported nothing of cacheproof (a cycle at module level fails when entered from one of its
    modules)."""
    names = []
    for path in _all_modules():
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] != "cacheproof":
            parts = ("cacheproof", *parts)
        if parts[-1] in ("__main__", "_block_table_triton") or parts[-1].startswith("_planted"):
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    result = _run_python(f"NAMES = {names!r}\n" + _FIRST_IMPORTS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


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
