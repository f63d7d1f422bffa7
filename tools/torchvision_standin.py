"""A stand-in for torchvision in the engines environment only (tools/engines_venv.sh installs it
with a .pth line; the product never imports it).

SGLang 0.5.23's RadixCache import chain reaches `sglang.srt.multimodal.internvl_utils`, which
imports `torchvision.transforms` at module level and uses it only inside functions; torch 2.13.0
has no torchvision in the registry that imports beside it. The rule: the stand-in answers an
`import torchvision...` statement only, never `importlib.util.find_spec` (so transformers'
`is_torchvision_available()` stays False and takes none of its torchvision paths), and every
name it hands out raises ModuleNotFoundError when called. Limit: once a module has imported it,
it is in sys.modules, where find_spec finds it; transformers evaluates (and caches) its check when
it is imported, which SGLang's chain does first (tools/engines_venv.sh's smoke import asserts it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

_NAME = "torchvision"
_WHY = ("torchvision is a stand-in in the cacheproof engines environment (tools/torchvision_standin.py): "
        "it answers imports only; {name} was used")


class _Placeholder:
    """A name of the stand-in: any attribute is another placeholder; any use raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> "_Placeholder":
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Placeholder(f"{self._name}.{attribute}")

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError(_WHY.format(name=self._name), name=_NAME)

    def __repr__(self) -> str:
        return f"<torchvision stand-in {self._name}>"


def _in_import_statement() -> bool:
    """Whether the import system is loading a module (an import statement, `import_module`): the
    frames just above the finder are the import system's own and one is `_find_and_load`. A call of
    `importlib.util.find_spec` reaches the finder through importlib.util instead."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == "<frozen importlib._bootstrap>":
        if frame.f_code.co_name == "_find_and_load":
            return True
        frame = frame.f_back
    return False


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name, "torchvision stand-in (answers imports only)")
        module.__getattr__ = lambda attribute: _Placeholder(f"{spec.name}.{attribute}")  # type: ignore[attr-defined]
        module.__path__ = []  # a package: its submodules import too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class StandinFinder(importlib.abc.MetaPathFinder):
    """Finds torchvision and its submodules for import statements only, after every real finder."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] != _NAME or not _in_import_statement():
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install() -> None:
    """Append the finder to sys.meta_path (last: a real torchvision, if any, wins)."""
    if not any(isinstance(finder, StandinFinder) for finder in sys.meta_path):
        sys.meta_path.append(StandinFinder())
