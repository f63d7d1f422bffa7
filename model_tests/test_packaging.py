"""The package's metadata (pyproject.toml) and the files that go with it.

- the core depends on Hypothesis, z3, rich and numpy only; torch, triton and pytest come with
  extras; the metadata states ranges, never an exact pin (those are in constraints/), and the CPU
  constraints satisfy the extras' ranges;
- the version is written once (cacheproof/version.py, read by pyproject.toml), and CHANGELOG.md has
  a section for it and one for unreleased changes;
- py.typed ships, the license is MIT with its LICENSE file, authors and project URLs are given;
- the README's extras table names exactly the extras pyproject.toml declares.
(model_tests/test_core_install.py installs the package and checks what is installed.)
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from cacheproof.version import __version__

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
EXTRAS = PROJECT["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(text).name for text in requirements}


def test_the_core_needs_no_torch_triton_or_pytest():
    assert _names(PROJECT["dependencies"]) == {"hypothesis", "z3-solver", "rich", "numpy"}
    assert "torch" in _names(EXTRAS["torch"]) and "triton" in _names(EXTRAS["triton"])
    assert {"pytest", "pytest-xdist"} <= _names(EXTRAS["test"])
    (itself,) = [Requirement(text) for text in EXTRAS["test"] if Requirement(text).name == "cacheproof"]
    assert {"torch", "triton"} <= itself.extras


def test_the_metadata_pins_nothing_exactly():
    every = PROJECT["dependencies"] + [text for extra in EXTRAS.values() for text in extra]
    pinned = [text for text in every if any(spec.operator in ("==", "===") for spec in Requirement(text).specifier)]
    assert not pinned


def test_the_fuzz_constraints_pin_the_pair_within_the_ranges_of_the_fuzz_extra_and_the_core():
    pins = {}
    for line in (ROOT / "constraints" / "fuzz.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name] = spec.version
    assert set(pins) == {"hypothesis", "hypofuzz"}
    ranges = {Requirement(text).name: Requirement(text).specifier for text in PROJECT["dependencies"] + EXTRAS["fuzz"]}
    assert all(ranges[name].contains(version) for name, version in pins.items())
    assert "hypofuzz" not in _names(EXTRAS["test"])  # the main suite runs on the newest Hypothesis


def test_the_cpu_constraints_pin_torch_within_the_extras_ranges():
    pins = {}
    for line in (ROOT / "constraints" / "cpu.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name] = spec.version
    assert pins["torch"] == "2.13.0"
    ranges = {Requirement(text).name: Requirement(text).specifier for text in EXTRAS["torch"] + EXTRAS["triton"]}
    assert set(pins) == set(ranges)
    assert all(ranges[name].contains(version) for name, version in pins.items())


def test_the_version_is_written_once():
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"] == {
        "version": {"attr": "cacheproof.version.__version__"}
    }
    literal = re.compile(rf"""["']{re.escape(__version__)}["']""")
    sources = [path for folder in ("cacheproof", "spec", "impl") for path in (ROOT / folder).rglob("*.py")
               if not path.is_symlink() and "/cacheproof/spec/" not in str(path) and "/cacheproof/impl/" not in str(path)]
    writers = [str(path.relative_to(ROOT)) for path in sources if literal.search(path.read_text())]
    assert writers == ["cacheproof/version.py"]


def test_the_changelog_has_the_version_and_unreleased_changes():
    headings = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == "Unreleased" and __version__ in headings


def test_license_authors_urls_and_py_typed():
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert PROJECT["authors"] == [{"name": "cacheproof developers"}]
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(PROJECT["urls"])
    assert (ROOT / "cacheproof" / "py.typed").exists()
    assert "py.typed" in SETUPTOOLS["package-data"]["cacheproof"]


def test_the_readme_names_each_extra():
    readme = (ROOT / "README.md").read_text()
    installing = readme.split("## Installing", 1)[1].split("\n## ", 1)[0]
    assert "`pip install cacheproof`" in installing
    assert "not published on PyPI yet" in installing, "until it is, the README must not promise the registry"
    repository = PROJECT["urls"]["Repository"]
    assert f"pip install 'cacheproof @ git+{repository}'" in installing
    assert f"pip install 'cacheproof[torch] @ git+{repository}'" in installing
    assert "pip install ." in installing and "Once cacheproof is released to PyPI" in installing
    rows = re.findall(r"^\| `([a-z]+)` \|", installing, re.MULTILINE)
    assert sorted(rows) == sorted(EXTRAS)


def test_every_source_folder_is_a_listed_package():
    """A folder of modules that pyproject's `packages` forgets is left out of a wheel: the core
    install then fails at import (seen with spec/radix)."""
    folders = {prefix: Path(folder) for prefix, folder in SETUPTOOLS["package-dir"].items()}
    found = set()
    for prefix, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join((prefix, *relative.parts)))
    assert found - set(SETUPTOOLS["packages"]) == set()
