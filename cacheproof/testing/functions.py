"""`test_my_cache = cache_test(MyCache)`: a plain pytest test function that holds an implementation
of any spec kind to its spec (the tensor cache by default; `cache_test(MyPool, spec="blocks")`, a
KV block pool; "radix", a radix tree).

The function is a Hypothesis test, `@given(program=...)`. Each example is one `Program`: the byte
string a program is read from, as `cacheproof check --spec KIND` reads it
(`cacheproof.check.programs.program.run_program`): its swarm of operations, the size of a fresh
model and of a fresh `MyCache(size)`, then each call, drawn from the model's state and run on
both, the outcomes and the kind's views compared after every call. pytest, pytest-xdist and
HypoFuzz run it as they run any `@given` test. Its settings are those of the Hypothesis profile
active when the test module is imported (max_examples, database, derandomize, ...), with no
deadline and without Hypothesis's shrinking.

A divergence fails the test with one `CacheDivergence` (an AssertionError). When the failure is the
one reported (Hypothesis's final replay of the failing example), the checker's shrinker first
drops the calls and simplifies the arguments the divergence does not need (`shrink_program`), and
the failure says every difference and why (as `cacheproof check` prints them) and carries the
shrunk calls as a runnable snippet that fails where the implementation diverges; when the
implementation crashed there (raised something other than a contract error), its own exception,
cut to the user's frames, is chained to the failure. Shrinking and fuzzing stay fast: an example
that is not the reported one fails with one short line.

The cacheproof pytest plugin (`cacheproof.testing.plugin`) calls `bind_test` on each collected
test, so the test carries the name it is bound to, in pytest's report and in Hypothesis's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from hypothesis import HealthCheck, Phase as HypothesisPhase, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context, currently_in_test_context

from cacheproof.check.programs.command import explained_lines, explanations_of, misuse_checked, snippet_of
from cacheproof.check.programs.draws import ProgramDraws
from cacheproof.check.programs.generators import generator_for, program_scopes
from cacheproof.check.programs.program import ProgramCounterexample, ProgramSetup, run_program, shrink_program
from cacheproof.check.programs.run import BYTES_PER_CALL, DEFAULT_STEPS
from cacheproof.contract.calls import invoke
from cacheproof.contract.faults import with_users_frames_only
from cacheproof.contract.steps import error_classes, is_contract_error
from cacheproof.contract.keys import KEY_DOMAINS
from cacheproof.contract.values import REAL_VALUE_CAPACITY
from cacheproof.sandbox.factories import capacity_cap_of
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kind import SpecKind
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names
from cacheproof.testing.names import callers_module, default_test_name, impl_name

SUPPRESSED_HEALTH_CHECKS = (
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much, HealthCheck.large_base_example,
)
"""The health checks a cache test suppresses: a program is one large example by design. The others
stay on (HypoFuzz skips a test that suppresses `nested_given`)."""

SMALL_SCOPE = "small"
"""The scope a test draws from by default: every kind's generator declares it first."""


class CacheDivergence(AssertionError):
    """A cache test's failure: the implementation under test diverges from its kind's spec."""


class Program(NamedTuple):
    """One example: the bytes a program's swarm plan, size and calls are read from (`ProgramDraws`)."""

    picks: bytes

    def __repr__(self) -> str:
        return f"<Program: picks {picks_digest(self.picks)}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Hypothesis prints it
        printer.text(repr(self))


def picks_digest(picks: bytes) -> str:
    """A program's picks as Hypothesis prints them: a digest, not Python. The runnable form is the
    failure's snippet, and Hypothesis writes no patch of `@example`s for a repr that does not parse
    (it would patch cacheproof's source). Trailing zero bytes read as none, so they are left out."""
    return hashlib.sha256(picks.rstrip(bytes(1))).hexdigest()[:12]


def cache_test(
    factory: Callable[[int], Any],
    *,
    spec: str = DEFAULT_KIND,
    keys: str | None = None,
    profile: str | None = None,
    ops: Sequence[str] | None = None,
    semantics: Any = None,
    scope: str | None = None,
    steps: int | None = None,
    name: str | None = None,
) -> Callable[..., None]:
    """A pytest test function that holds `factory(size)` to the spec kind `spec` (see the module).

    `keys` names the key domain (`cacheproof.contract.keys.KEY_DOMAINS`, as many as the kind draws
    from: int, str, bytes, tuple, mixed for the tensor cache; None: the scope's own keys);
    `profile` the semantics (docs/profiles.md; default: the kind's; `semantics` overrides them
    whole); only the calls in `ops` (default: the profile's operations) are made; `scope` is small
    (the default), wide or long (docs/scope.md); each program makes up to `steps` calls (default:
    as `cacheproof check --spec KIND`). `name` is the test's name until pytest collects it under the
    name it is bound to. A bad option raises InvalidArgumentError here, when the test is made.
    """
    if spec not in kind_names():
        raise InvalidArgumentError(f"spec {spec!r}: the spec kinds are {', '.join(kind_names())}")
    if steps is not None and (type(steps) is not int or steps < 1):
        raise InvalidArgumentError(f"steps {steps!r}: a cache test makes at least 1 call per program")
    kind = get_kind(spec)
    impl = impl_name(factory)
    contract, strategies = kind_contract(
        factory, kind, profile=profile or kind.default_profile, ops=ops, semantics=semantics,
        steps=steps or DEFAULT_STEPS, impl=impl, failure=CacheDivergence, reporting=failure_is_reported,
        scope=scope or SMALL_SCOPE, keys=keys)
    contract.__name__ = contract.__qualname__ = name or default_test_name(factory)
    contract.__module__ = callers_module()
    test = cache_test_settings()(given(**strategies)(contract))
    test.cacheproof_impl = impl  # what the plugin recognizes its tests by
    return test


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
    scope: Any = SMALL_SCOPE,
    keys: str | None = None,
) -> tuple[Callable[[Program], None], dict[str, st.SearchStrategy]]:
    """The test function holding `factory(size)` to `kind`, and the strategies of its arguments:
    `profile`'s semantics (`semantics` overrides them whole) and operations (`ops` overrides them),
    up to `steps` calls per program drawn from the kind's scope named `scope` (or the scope itself), its keys from the
    key domain `keys`; a divergence raises `failure`, explained in full when `reporting()`. A bad
    option raises InvalidArgumentError here."""
    chosen = kind_profile(kind, profile)
    semantics = chosen.semantics if semantics is None else semantics
    operations = chosen.operations if ops is None else _operations(kind, ops)
    drawn_from = _scope(kind, scope, keys)
    made: list[ProgramSetup] = []

    def setup() -> ProgramSetup:
        """Built on the first example: a wide scope of the tensor cache probes the factory for
        whether its values hold memory (then its capacities are capped, as `check --thorough`'s)."""
        if not made:
            chosen_scope = drawn_from
            if getattr(drawn_from, "wide_capacities", False) and drawn_from.max_capacity is None:
                chosen_scope = replace(drawn_from, max_capacity=capacity_cap_of(factory, REAL_VALUE_CAPACITY))
            made.append(ProgramSetup(kind, lambda size: kind.new(size, semantics), factory,
                                     generator_for(kind.name, chosen_scope), operations, misuse_checked(semantics), steps))
        return made[0]

    def contract(program: Program) -> None:
        __tracebackhide__ = True  # the failure shows the user's frames only
        try:
            run = run_program(setup(), ProgramDraws(program.picks))
        except Exception as error:  # the user's code raised outside a call (the factory, say)
            raise with_users_frames_only(error)
        if run.difference is None:
            return
        if not reporting():
            raise failure(f"{impl} diverges from the {kind.name} spec: {run.difference.describe()}")
        example = shrink_program(setup(), ProgramCounterexample(run.size, run.calls, run.difference))
        cause = _raised_at_last_call(factory, example, kind.error_names) if example.difference.actual.crash else None
        raise failure(kind_failure_text(kind, impl, example, semantics)) from cause  # one line: Hypothesis sees one failure

    size = steps * BYTES_PER_CALL

    @st.composite  # a value Hypothesis prints by its repr (it prints a mapped or built one as the call)
    def programs(draw: Callable[[st.SearchStrategy], Any]) -> Program:
        return Program(draw(st.binary(min_size=size, max_size=size)))

    return contract, {"program": programs()}


def _scope(kind: SpecKind, name: Any, keys: str | None) -> Any:
    """The scope `name` of `kind`'s generator (or `name` itself when it is a scope, not a name),
    drawing its keys from the domain `keys`; InvalidArgumentError naming the scopes, the domains or
    the kind's domains otherwise."""
    scopes = program_scopes(kind.name)
    if not isinstance(name, str):
        scopes = {name.name: name}
        name = name.name
    elif name not in scopes:
        raise InvalidArgumentError(f"scope {name!r}: the scopes are {', '.join(scopes)}")
    if keys is not None and keys not in KEY_DOMAINS:
        raise InvalidArgumentError(f"keys {keys!r}: the key domains are {', '.join(KEY_DOMAINS)}")
    if keys is not None and keys not in kind.key_domains:
        raise InvalidArgumentError(f"keys {keys!r}: spec kind {kind.name!r} draws its {kind.keys_are} from "
                                   f"{', '.join(kind.key_domains)} only")
    scope = scopes[name]
    return scope.with_keys(keys) if keys is not None and hasattr(scope, "with_keys") else scope


def cache_test_settings() -> settings:
    """The active profile's settings, as a cache test takes them: no deadline, the health checks of
    `SUPPRESSED_HEALTH_CHECKS` off, and neither Hypothesis's shrinking (cacheproof's shrinker drops
    calls, on the failure reported, in a fraction of the time) nor its explain phase (it names
    cacheproof's lines, not the user's)."""
    phases = tuple(phase for phase in settings.default.phases if phase not in (HypothesisPhase.shrink, HypothesisPhase.explain))
    return settings(deadline=None, suppress_health_check=SUPPRESSED_HEALTH_CHECKS, phases=phases)


def bind_test(test: Callable[..., None], name: str) -> None:
    """Name `test` (a `cache_test`) `name`, the name pytest collected it under, so that Hypothesis's
    failure text ("Failing test case: name(...)") names what pytest's report does."""
    for function in (test, test.hypothesis.inner_test):
        function.__name__ = function.__qualname__ = name


def failure_is_reported() -> bool:
    """Whether a failure now is the one reported: Hypothesis's final replay of the minimal failing
    example, or a call outside Hypothesis's engine (then nothing will shrink it further)."""
    return not currently_in_test_context() or current_build_context().is_final


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
