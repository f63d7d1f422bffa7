"""Installing a mutant: a folder that, put first on PYTHONPATH, makes every Python process started
with it import the mutated source in place of the module.

The folder holds the mutated source and a `sitecustomize.py`, which Python imports at start-up
from the first folder of sys.path that has one. It puts a finder first on `sys.meta_path` that
answers for the module's name alone with the mutated file (a package's `__init__` keeps the
package's own folders for its submodules), then runs the `sitecustomize` the folder hid, if the
environment has one. So both `cacheproof check` and the user's test command (pytest, a script, any
child process they start) see the mutant, and nothing of the installed package is written.
"""

from __future__ import annotations

import os
from pathlib import Path

MUTANT_FILE = "cacheproof_mutant_source.py"

_SITECUSTOMIZE = '''"""Written by cacheproof mutate: imports {module} from {mutant_file} (cacheproof/mutate/install.py)."""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_MODULE = {module!r}
_SEARCH = {search!r}


class _MutantFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != _MODULE:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(_HERE, {mutant_file!r}), submodule_search_locations=_SEARCH)


sys.meta_path.insert(0, _MutantFinder())
_others = [folder for folder in sys.path if os.path.abspath(folder or ".") != _HERE]
_hidden = importlib.machinery.PathFinder.find_spec("sitecustomize", _others)
if _hidden is not None and _hidden.loader is not None:
    _module = importlib.util.module_from_spec(_hidden)
    _hidden.loader.exec_module(_module)
'''


def install_folder(folder: Path, module: str, source: str, package_folders: list[str] | None) -> Path:
    """Write into `folder` the mutated `source` of `module` and the sitecustomize.py that imports it
    (`package_folders`: the module's own submodule search folders when it is a package, else None);
    return `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MUTANT_FILE).write_text(source)
    (folder / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(module=module, mutant_file=MUTANT_FILE, search=package_folders))
    return folder


def environment_with(folder: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (the current environment by default) with `folder` first on PYTHONPATH and no
    bytecode written (a mutant's .pyc must never be found by a later run)."""
    environment = dict(os.environ if base is None else base)
    rest = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = str(folder) + (os.pathsep + rest if rest else "")
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    return environment
