"""The optional extras of the installed package, and the one error for a module whose extra is missing.

The core (`pip install .` in a checkout; `pip install cacheproof` once it is on PyPI) is the spec,
the checker, the prover, traces and the command line, on Hypothesis, z3, rich and numpy. The torch implementations (`cacheproof.impl`: TensorLRUCache, the
block tables, the KV block pool) need the `torch` extra, the Triton kernel the `triton` extra. A module
that needs such a package imports it as

    try:
        import torch
    except ModuleNotFoundError as missing:
        raise missing_extra(missing, __name__) from None

so that a missing torch is one line naming the module, the extra that brings it and the `pip install`
that works today, whether cacheproof came from a checkout, a git URL or PyPI (`pip install torch`:
`cacheproof[torch]` resolves only where cacheproof is published), and the command line reports it as
a usage error (exit status 2). Standard library only: the implementations import it.
"""

from __future__ import annotations

EXTRA_OF_PACKAGE = {"torch": "torch", "triton": "triton", "redis": "redis"}
"""The extra (`.[EXTRA]` in a checkout, `cacheproof[EXTRA]` once published) that brings each optional
package the package imports."""


class MissingExtraError(ImportError):
    """`needed_by` (a module, or what the user asked for) needs `package`, which this installation
    lacks; the message names the extra that brings it and the command that installs the package."""

    def __init__(self, needed_by: str, package: str) -> None:
        self.needed_by = needed_by
        self.package = package
        self.extra = EXTRA_OF_PACKAGE[package]
        super().__init__(f"{needed_by} needs {package} (the extra '{self.extra}'): pip install {package}", name=package)


def missing_extra(error: ModuleNotFoundError, needed_by: str) -> ImportError:
    """What to raise for `error`, met while `needed_by` imported an optional package.

    Rule: a missing package that an extra brings (`error.name` is `torch` itself) is a
    `MissingExtraError` naming the extra; anything else (a module missing inside an installed torch,
    say) is a broken installation, and `error` is raised as it is.
    """
    if error.name in EXTRA_OF_PACKAGE:
        return MissingExtraError(needed_by, error.name)
    return error
