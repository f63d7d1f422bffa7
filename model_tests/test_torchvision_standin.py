"""tools/torchvision_standin.py (the engines environment's torchvision): an import statement gets
it, `importlib.util.find_spec` does not (transformers' availability check stays False), and any
use of a name it hands out raises. Each case runs in a child interpreter, whose sys.meta_path the
finder may change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def run_child(code: str) -> subprocess.CompletedProcess:
    program = f"import sys; sys.path.insert(0, {str(TOOLS)!r})\nimport torchvision_standin\ntorchvision_standin.install()\n{code}"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)


def test_import_statements_get_the_stand_in_and_find_spec_does_not() -> None:
    child = run_child(
        "import importlib, importlib.util\n"
        "print(importlib.util.find_spec('torchvision') is None, importlib.util.find_spec('numbers') is None)\n"
        "import torchvision.transforms as T\n"
        "from torchvision.transforms.functional import InterpolationMode\n"
        "importlib.import_module('torchvision.io')\n"
        "print(type(T).__name__, repr(InterpolationMode.BICUBIC))\n"
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == [
        "True False", "module <torchvision stand-in torchvision.transforms.functional.InterpolationMode.BICUBIC>",
    ]


@pytest.mark.parametrize("use", ["T.Resize((2, 2))", "T.Compose([])(None)"])
def test_using_a_name_raises_module_not_found(use: str) -> None:
    child = run_child(f"import torchvision.transforms as T\n{use}\n")
    assert child.returncode == 1
    assert "ModuleNotFoundError" in child.stderr and "stand-in" in child.stderr and "answers imports only" in child.stderr


def test_a_module_that_is_not_torchvision_is_not_answered() -> None:
    child = run_child("import torchvisionx\n")
    assert child.returncode == 1 and "No module named 'torchvisionx'" in child.stderr
