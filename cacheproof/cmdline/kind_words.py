"""What the command line says about spec kinds, made from the kind registry (`spec.kinds`), so that
every kind registered there is named in helps and hints with nothing more written: the `--spec`
flag that selects a kind, a command line for it, and one phrase per kind for a flag's help."""

from __future__ import annotations

from typing import Callable

from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names


def spec_flag(kind_name: str) -> str:
    """` --spec NAME` for a kind other than the default, else nothing (the default needs no flag)."""
    return "" if kind_name == DEFAULT_KIND else f" --spec {kind_name}"


def check_command(kind_name: str) -> str:
    """The command line that holds an implementation of `kind_name` to its spec."""
    return f"cacheproof check{spec_flag(kind_name)} --impl MODULE:FACTORY"


def every_kind() -> tuple[SpecKind, ...]:
    """Every registered kind, the default first."""
    return tuple(get_kind(name) for name in kind_names())


def per_kind(describe: Callable[[SpecKind], str]) -> str:
    """`describe(kind)` for every kind, each after the `--spec` that selects it ("--spec cache: ...;
    --spec blocks: ...")."""
    return "; ".join(f"--spec {kind.name}: {describe(kind)}" for kind in every_kind())


def key_domains() -> tuple[str, ...]:
    """Every key domain some kind declares (`SpecKind.key_domains`), in the order first declared."""
    return tuple(dict.fromkeys(domain for kind in every_kind() for domain in kind.key_domains))


def key_domain_problem(kind: SpecKind, domain: str | None) -> str | None:
    """Why `--keys domain` does not suit `kind` (one line naming the kind's domains), or None."""
    if domain is None or domain in kind.key_domains:
        return None
    return (f"--keys {domain}: --spec {kind.name} draws its {kind.keys_are} from {', '.join(kind.key_domains)} "
            "only (docs/decisions.md, Key domains per spec kind)")
