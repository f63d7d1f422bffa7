"""The core install (`pip install .`, no extras; `pip install cacheproof` once published) checks and proves without torch.

- In a fresh virtual environment with the project installed from a copy of this checkout (not
  editable, so the wheel's package list is what is tested), torch, triton and pytest are absent; a
  plain-Python cache in the user's own folder is checked (a conforming one passes, a broken copy is
  caught), `cacheproof prove` proves the spec's model and its refinement check, and what needs torch
  (the default `cacheproof check`, `cacheproof.impl` modules) fails with one line naming the extra.
- In this interpreter, with torch and triton blocked: every torch module of `cacheproof.impl` refuses
  to import with `MissingExtraError` naming itself and the extra, and the command line turns that
  into exit status 2.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TORCH_LINE = "needs torch (the extra 'torch'): pip install torch"
NOT_COPIED = (".git", ".venv", ".venv-engines", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis",
              ".import_linter_cache", "mutants")


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """A venv with cacheproof installed from a copy of the checkout, without extras: its bin folder."""
    base = tmp_path_factory.mktemp("core")
    source = base / "source"  # a copy: no stale build/ of the checkout ends up in the wheel
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    bin_folder = base / "venv" / "bin"
    installed = _run([str(bin_folder / "python"), "-m", "pip", "install", "-q", str(source)], base)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return bin_folder


def test_the_core_install_has_no_torch_and_ships_its_metadata(core):
    probe = "import importlib.util as u; print(sorted(n for n in ('torch', 'triton', 'pytest', 'numpy', 'z3', 'hypothesis', 'rich') if u.find_spec(n)))"
    found = _run([str(core / "python"), "-c", probe], core)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "['hypothesis', 'numpy', 'rich', 'z3']"
    metadata = (
        "import cacheproof, pathlib, importlib.metadata as m; d = m.metadata('cacheproof')\n"
        "print((pathlib.Path(cacheproof.__file__).parent / 'py.typed').exists(), d['License-Expression'], "
        "d['Version'] == cacheproof.__version__)\n"
        "print(*sorted(r for r in d.get_all('Requires-Dist') if 'torch' in r), sep='\\n')"
    )
    shipped = _run([str(core / "python"), "-c", metadata], core)
    assert shipped.returncode == 0, shipped.stderr
    first, *torch_requirements = shipped.stdout.splitlines()
    assert first == "True MIT True"
    assert torch_requirements and all("extra ==" in line for line in torch_requirements), torch_requirements


def test_the_core_install_checks_a_plain_python_cache(core, tmp_path):
    """The user's own cache in the user's own folder: a conforming one, and one whose release
    releases nothing."""
    cache = (ROOT / "examples" / "minimal_cache.py").read_text()
    broken = cache.replace("entry.refcount -= 1  # recency is unchanged", "entry.refcount -= 0")
    assert broken != cache
    (tmp_path / "my_cache.py").write_text(cache)
    (tmp_path / "my_broken_cache.py").write_text(broken)
    check = [str(core / "cacheproof"), "check", "--examples", "40", "--seed", "1", "--quiet", "--impl"]
    conforming = _run(check + ["my_cache:MinimalCache"], tmp_path)
    assert conforming.returncode == 0, conforming.stdout + conforming.stderr
    assert conforming.stdout.startswith("conforms: 40 examples")
    caught = _run(check + ["my_broken_cache:MinimalCache"], tmp_path)
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "counterexample" in caught.stdout and "release(" in caught.stdout


def test_the_core_install_proves(core, tmp_path):
    proved = _run([str(core / "cacheproof"), "prove", "--slots", "2"], tmp_path)
    assert proved.returncode == 0, proved.stdout + proved.stderr
    lines = proved.stdout.splitlines()
    totals = next(line for line in lines if "obligations proved" in line)
    done, _, total = totals.split()[0].partition("/")
    assert done == total and int(total) > 0
    assert any(line.startswith("spec refines model:") and ", agree (" in line for line in lines)


def test_the_core_install_names_the_extra_for_torch(core, tmp_path):
    default = _run([str(core / "cacheproof"), "check"], tmp_path)
    assert default.returncode == 2
    assert default.stderr.strip() == f"cacheproof check: cacheproof.impl.tensor_lru_cache {TORCH_LINE}"
    imported = _run([str(core / "python"), "-c", "import cacheproof.impl.kv_block_pool"], tmp_path)
    assert imported.returncode == 1
    assert imported.stderr.strip().splitlines()[-1] == (
        f"cacheproof.extras.MissingExtraError: cacheproof.impl.kv_block_pool {TORCH_LINE}"
    )


# torch blocked in this interpreter's child ------------------------------------------------------

_BLOCK_TORCH = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in ('torch', 'triton'):
            raise ModuleNotFoundError(f'No module named {name!r}', name=name)
sys.meta_path.insert(0, Block())
"""



def _imports_torch_at_load(path: Path) -> bool:
    """Whether the module imports torch when it is loaded: at its top level, or in a top-level try."""
    statements = []
    for node in ast.parse(path.read_text()).body:
        statements += node.body if isinstance(node, ast.Try) else [node]
    return any(isinstance(node, ast.Import) and any(alias.name == "torch" for alias in node.names)
               for node in statements)


TORCH_MODULES = sorted(path.stem for path in (ROOT / "impl").glob("*.py") if _imports_torch_at_load(path))
"""The modules of cacheproof.impl that import torch when loaded (read from their code, so a new one is tested)."""


def _with_torch_blocked(code: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-c", _BLOCK_TORCH + code], ROOT, timeout=120)


def test_every_torch_module_of_impl_names_the_extra_when_torch_is_missing():
    assert {"tensor_lru_cache", "kv_block_pool", "block_table"} <= set(TORCH_MODULES)
    code = """
from cacheproof.extras import MissingExtraError
for name in {names!r}:
    try:
        __import__('cacheproof.impl.' + name)
    except MissingExtraError as error:
        print(error)
    else:
        print(name, 'imported')
""".format(names=TORCH_MODULES)
    result = _with_torch_blocked(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"cacheproof.impl.{name} {TORCH_LINE}" for name in TORCH_MODULES]


def test_the_command_line_exits_2_naming_the_extra_when_torch_is_missing():
    code = "import sys\nfrom cacheproof.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    for argv, module in [(["check"], "cacheproof.impl.tensor_lru_cache"),
                         (["check", "--spec", "blocks"], "cacheproof.impl.kv_cache_manager"),
                         (["bench", "cache", "--examples", "1"], "cacheproof.impl.tensor_lru_cache")]:
        result = _run([sys.executable, "-c", _BLOCK_TORCH + code, *argv], ROOT, timeout=120)
        assert result.returncode == 2, (argv, result.stderr)
        assert result.stderr.strip() == f"cacheproof {argv[0]}: {module} {TORCH_LINE}", argv


def test_a_broken_torch_is_not_taken_for_a_missing_one():
    """A module missing inside an installed torch is the installation's fault: raised as it is."""
    code = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == 'torch':
            raise ModuleNotFoundError("No module named 'torch._C'", name='torch._C')
sys.meta_path.insert(0, Block())
try:
    import cacheproof.impl.tensor_lru_cache
except Exception as error:
    print(type(error).__name__, error.name)
"""
    result = _run([sys.executable, "-c", code], ROOT, timeout=120)
    assert result.stdout.strip() == "ModuleNotFoundError torch._C", result.stderr
