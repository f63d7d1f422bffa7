"""`test_my_pool = cache_test(MyPool, spec="blocks")`: a plain pytest test function that holds an
implementation of another spec kind than the tensor cache to its spec (`cacheproof check --spec
KIND`; the tensor cache's own is `cacheproof.testing.functions`).

The function becomes a Hypothesis test, `@given(program=...)`, in `cache_test`. Each example is
one program's byte string,
read as `cacheproof check --spec KIND` reads it (`cacheproof.check.programs.program.run_program`):
its swarm of operations, the size of a fresh model and a fresh `MyPool(size)`, then each call,
drawn from the model's state and run on both, outcomes and the kind's views compared. pytest,
pytest-xdist and HypoFuzz run it as they run any `@given` test; its settings are those of the
active Hypothesis profile, with no deadline and without Hypothesis's shrinking.

A divergence fails the test with one `CacheDivergence`. When the failure is the one reported
(Hypothesis's final replay), the checker's shrinker first drops the calls and simplifies the
arguments the divergence does not need (`shrink_program`), and the failure carries the shrunk calls
as a runnable snippet that fails where the implementation diverges; when the implementation crashed
there (raised something other than a contract error), its own exception, cut to the user's frames,
is chained to the failure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from hypothesis import strategies as st

from cacheproof.check.programs.command import explained_lines, explanations_of, misuse_checked, snippet_of
from cacheproof.check.programs.draws import ProgramDraws
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, run_program, shrink_program
from cacheproof.check.programs.run import BYTES_PER_CALL
from cacheproof.contract.calls import invoke
from cacheproof.contract.faults import with_users_frames_only
from cacheproof.contract.outcomes import error_classes, is_contract_error
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind


class KindProgram(NamedTuple):
    """One example: the bytes a program's swarm plan, size and calls are read from (`ProgramDraws`)."""

    picks: bytes

    def __repr__(self) -> str:
        return f"<Program: picks {picks_digest(self.picks)}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Hypothesis prints it
        printer.text(repr(self))


def picks_digest(picks: bytes) -> str:
    """A program's picks as Hypothesis prints them: a digest, not Python. The runnable form is the
    failure's snippet, and Hypothesis writes no patch of `@example`s for a repr that does not parse
    (it would patch cacheproof's source)."""
    return hashlib.sha256(picks.rstrip(bytes(1))).hexdigest()[:12]


def kind_contract(
    factory: Callable[[int], Any],
    kind: SpecKind,
    *,
    profile: str,
    ops: Sequence[str] | None,
    semantics: Any,
    steps: int,
    impl: str,
    failure: type[AssertionError],
    reporting: Callable[[], bool],
) -> tuple[Callable[[KindProgram], None], dict[str, st.SearchStrategy]]:
    """The test function holding `factory(size)` to `kind`, and the strategies of its arguments:
    `profile`'s semantics (`semantics` overrides them whole) and operations (`ops` overrides them),
    up to `steps` calls per program; a divergence raises `failure`, explained in full when
    `reporting()`. A bad profile or operation raises InvalidArgumentError here."""
    chosen = kind_profile(kind, profile)
    semantics = chosen.semantics if semantics is None else semantics
    operations = chosen.operations if ops is None else _operations(kind, ops)

    def new_model(size: int) -> Any:
        return kind.new(size, semantics)

    setup = ProgramSetup(kind, new_model, factory, generator_for(kind.name), operations, misuse_checked(semantics), steps)

    def contract(program: KindProgram) -> None:
        __tracebackhide__ = True  # the failure shows the user's frames only
        try:
            run = run_program(setup, ProgramDraws(program.picks))
        except Exception as error:  # the user's code raised outside a call (the factory, say)
            raise with_users_frames_only(error)
        if run.difference is None:
            return
        if not reporting():
            raise failure(f"{impl} diverges from the {kind.name} spec: {run.difference.describe()}")
        example = shrink_program(setup, ProgramCounterexample(run.size, run.calls, run.difference))
        cause = _raised_at_last_call(factory, example, kind.error_names) if example.difference.actual.crash else None
        raise failure(kind_failure_text(kind, impl, example, semantics)) from cause  # one line: Hypothesis sees one failure

    size = steps * BYTES_PER_CALL

    @st.composite  # a value Hypothesis prints by its repr (it prints a mapped or built one as the call)
    def programs(draw: Callable[[st.SearchStrategy], Any]) -> KindProgram:
        return KindProgram(draw(st.binary(min_size=size, max_size=size)))

    return contract, {"program": programs()}


def kind_profile(kind: SpecKind, name: str) -> Any:
    """The profile `name` of `kind`; InvalidArgumentError naming the kind's profiles otherwise."""
    if name not in kind.profiles:
        raise InvalidArgumentError(f"profile {name!r}: spec kind {kind.name!r} has the profiles {', '.join(kind.profiles)}")
    return kind.profiles[name]


def kind_failure_text(kind: SpecKind, impl: str, example: ProgramCounterexample, semantics: Any) -> str:
    """A kind test's failure: which implementation diverges and how, every difference and why (as
`cacheproof check` prints them), and the shrunk calls as a runnable snippet."""
    (explanation,) = explanations_of(kind, semantics, [example])
    said = [] if explanation is None else explained_lines(example.difference, explanation)
    return (f"{impl} diverges from the {kind.name} spec: {example.difference.describe()}\n" + "\n".join(said) +
            f"\n\nshrunk to {len(example.calls)} calls:\n{snippet_of(kind, impl, example, semantics)}")


def _raised_at_last_call(factory: Callable[[int], Any], example: ProgramCounterexample,
                         error_names: Collection[str]) -> BaseException | None:
    """The implementation's own exception at the example's last call, replayed on a fresh one, cut to
    the user's frames (the failure chains it, as a cache test's does); None if it raises none now or
    raises a contract error (named in `error_names`)."""
    implementation = factory(example.size)
    for call in example.calls[:-1]:
        try:
            invoke(implementation, call)
        except Exception:  # noqa: BLE001 - an earlier call's error is its outcome, as in the run
            pass
    try:
        invoke(implementation, example.calls[-1])
    except Exception as error:  # noqa: BLE001 - the crash the failure reports
        return None if is_contract_error(error_classes(error), error_names) else with_users_frames_only(error)
    return None


def _operations(kind: SpecKind, ops: Sequence[str]) -> tuple[str, ...]:
    unknown = [op for op in ops if op not in kind.names]
    if unknown or not ops:
        raise InvalidArgumentError(
            f"ops {list(ops)!r}: spec kind {kind.name!r} has the operations {', '.join(kind.names)}"
            + (f"; not {', '.join(map(str, unknown))}" if unknown else "; name at least one")
        )
    return tuple(ops)
