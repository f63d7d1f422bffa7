"""The repository stands alone and its folders show the architecture.

- No tracked file points outside the repository (the old `../shared/` contract, a build machine's
  absolute path), and no document cites results under /tmp/.
- cacheproof/ keeps at most 8 modules at its top; everything else lives in the subpackage of its role.
- Lower layers never import higher ones: spec/ imports nothing of cacheproof outside spec/, impl/
  only the spec, check/ neither trace/ nor prove/ nor docs/, trace/ and prove/ not docs/, trace/ not
  prove/. Imports are read from the source with `ast`, so a lazy import inside a function counts too.
- The mutation tooling is not in the installed package.
"""

from __future__ import annotations

import ast
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN_IMPORTS = {
    "spec": ("cacheproof.check", "cacheproof.prove", "cacheproof.trace", "cacheproof.docs", "cacheproof.impl",
             "cacheproof.bench", "cacheproof.cli", "cacheproof.testing", "cacheproof.settings", "cacheproof.cmdline.progress"),
    "impl": ("cacheproof.check", "cacheproof.prove", "cacheproof.trace", "cacheproof.docs", "cacheproof.bench",
             "cacheproof.cli", "cacheproof.testing"),
    "cacheproof/check": ("cacheproof.trace", "cacheproof.prove", "cacheproof.docs", "cacheproof.bench"),
    "cacheproof/trace": ("cacheproof.prove", "cacheproof.docs", "cacheproof.bench"),
    "cacheproof/prove": ("cacheproof.trace", "cacheproof.docs", "cacheproof.bench"),
}


def _tracked_files() -> list[Path]:
    listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listing.splitlines() if (ROOT / name).is_file()]


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_tracked_file_points_outside_the_repository() -> None:
    outside = ("../shared", "/work/", "/home/", "/root/")
    offenders = []
    for path in _tracked_files():
        if path.suffix not in {".py", ".md", ".toml", ".sh", ".json", ".cfg", ".txt", ".yml", ".yaml", ""}:
            continue
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{path.relative_to(ROOT)}: {marker}" for marker in outside if marker in text]
    assert offenders == []


def test_no_document_cites_a_temporary_folder() -> None:
    """Results a document cites must be in the repository, not in a /tmp/ no one else has."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _tracked_files() if path.suffix == ".md"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if "/tmp/" in line or "/var/tmp/" in line
    ]
    assert offenders == []


def test_the_readme_and_decisions_link_the_contract_in_the_repository() -> None:
    assert (ROOT / "docs" / "contract.md").is_file()
    assert "docs/contract.md" in (ROOT / "README.md").read_text()
    assert "contract.md" in (ROOT / "docs" / "decisions.md").read_text()


def test_at_most_eight_modules_at_the_top_of_the_package() -> None:
    top = sorted(path.name for path in (ROOT / "cacheproof").glob("*.py"))
    assert len(top) <= 8, top


@pytest.mark.parametrize("folder", sorted(FORBIDDEN_IMPORTS))
def test_lower_layers_never_import_higher_ones(folder: str) -> None:
    violations = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for module in _imported_modules(path):
            violations += [f"{path.relative_to(ROOT)} imports {module}"
                           for banned in FORBIDDEN_IMPORTS[folder]
                           if module == banned or module.startswith(banned + ".")]
    assert violations == []


def test_the_layering_check_sees_a_violation(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def later():\n    from cacheproof.trace.format import read_trace\n")
    assert "cacheproof.trace.format" in _imported_modules(planted)


def test_the_mutation_tooling_is_not_in_the_installed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = config["tool"]["setuptools"]["packages"]
    assert all(not package.startswith("tools") for package in packages)
    assert not list((ROOT / "cacheproof").rglob("mutate*.py"))
    assert (ROOT / "tools" / "mutate.py").is_file()


def test_every_package_folder_is_declared_for_installation() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = set(config["tool"]["setuptools"]["packages"])
    folders = {
        "cacheproof." + str(init.parent.relative_to(ROOT / "cacheproof")).replace("/", ".")
        for init in (ROOT / "cacheproof").rglob("__init__.py") if init.parent != ROOT / "cacheproof"
    }
    assert folders <= declared, folders - declared


def test_every_documented_public_name_still_imports() -> None:
    import cacheproof
    import cacheproof.impl.block_table as block_table
    from cacheproof.impl import TensorLRUCache
    from cacheproof.settings import register_settings
    from cacheproof.spec import __all__ as spec_names
    from cacheproof.testing import cache_test_case

    assert callable(cacheproof.monitor) and issubclass(cacheproof.DivergenceError, Exception)
    assert callable(cache_test_case) and callable(register_settings) and isinstance(TensorLRUCache, type)
    assert all(hasattr(cacheproof, name) for name in spec_names)
    assert hasattr(block_table, "MmRunLayout")


@pytest.mark.parametrize("command", ["check", "prove", "replay", "bench", "docs"])
def test_every_documented_command_still_answers_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from cacheproof.cli import main

    assert main([command, "--help"]) == 0
    assert "usage:" in capsys.readouterr().out


def test_mutate_is_a_command_of_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    from cacheproof.cli import main

    assert main(["mutate", "--help"]) == 0
    assert "--tests COMMAND" in capsys.readouterr().out
