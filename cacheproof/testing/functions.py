"""`test_my_cache = cache_test(MyCache)`: a plain pytest test function that holds a cache to the spec.

The function is a Hypothesis test, `@given(program=...)`. Each example is one `Program` drawn up
front, the programs `cacheproof check` runs (`cacheproof.check.sequential.programs`): a capacity,
the keys, a swarm plan and the picks of its calls. It runs on a fresh spec and a fresh
`MyCache(capacity)` side by side, and after every call the outcome, len(), `in`, stats() and
snapshot() are compared. pytest, pytest-xdist and HypoFuzz run it as they run any `@given` test.
Its settings are those of the Hypothesis profile active when the test module is imported
(max_examples, database, derandomize, ...), with no deadline.

A divergence fails the test with one `CacheDivergence` (an AssertionError): which cache diverges,
how, and the calls shrunk to a runnable snippet (by the checker's shrinker, which drops calls and
simplifies arguments; Hypothesis's own shrinking is off, see `cache_test_settings`). When raising was the cache's difference, its own exception is chained to
the failure, cut to the user's frames. The failure is explained in full only when Hypothesis
replays the minimal failing example to report it, so shrinking and fuzzing stay fast.

`cache_test(MyPool, spec="blocks")` does the same for another spec kind, the KV block pool say
(`cacheproof.testing.kind_functions`).

The cacheproof pytest plugin (`cacheproof.testing.plugin`) calls `bind_test` on each collected
test, so the test carries the name it is bound to, in pytest's report and in Hypothesis's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from hypothesis import HealthCheck, Phase as HypothesisPhase, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context, currently_in_test_context

from cacheproof.check.programs.run import DEFAULT_STEPS as DEFAULT_PROGRAM_STEPS
from cacheproof.check.sequential.machine import Tally, machine_for
from cacheproof.check.sequential.programs import BYTES_PER_CALL, program_test
from cacheproof.check.sequential.run import DEFAULT_STEPS_PER_EXAMPLE, REAL_VALUE_CAPACITY, capacity_cap_of
from cacheproof.check.sequential.scope import SCOPES, SMALL, SMALL_SIZE_KINDS, Phase, Scope, capacities, universes
from cacheproof.check.sequential.scope import with_key_domain
from cacheproof.contract.faults import with_users_frames_only
from cacheproof.contract.keys import KEY_DOMAINS
from cacheproof.contract.outcomes import Divergence
from cacheproof.spec.cache.profiles import DEFAULT_PROFILE, check_operations, profile_named
from cacheproof.spec.cache.semantics import Semantics
from cacheproof.spec.errors import InvalidArgumentError
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind, kind_names
from cacheproof.testing.failures import Explained, diverges, explained
from cacheproof.testing.kind_functions import kind_contract, picks_digest
from cacheproof.testing.names import callers_module, default_test_name, impl_name

SUPPRESSED_HEALTH_CHECKS = (
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much, HealthCheck.large_base_example,
)
"""The health checks a cache test suppresses: a program is one large example by design. The others
stay on (HypoFuzz skips a test that suppresses `nested_given`)."""


class CacheDivergence(AssertionError):
    """A cache test's failure: the cache under test diverges from the spec."""


class Program(NamedTuple):
    """One example: a fresh cache of `capacity_bytes`, the `keys` its calls may name, and `picks`,
    the bytes its swarm plan and each call's arguments are read from (`ProgramDraws`)."""

    capacity_bytes: int
    keys: tuple
    picks: bytes

    def __repr__(self) -> str:
        return f"<Program: capacity {self.capacity_bytes}, keys {self.keys!r}, picks {picks_digest(self.picks)}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # how Hypothesis prints it
        printer.text(repr(self))


def programs(scope: Scope, steps: int, max_capacity: int | None) -> st.SearchStrategy[Program]:
    """The programs of `scope`: capacities up to `max_capacity` (None: the scope's), picks for
    `steps` calls (as `cacheproof check` draws them: `cacheproof.check.sequential.programs`)."""
    size = steps * BYTES_PER_CALL[scope.size_kinds == SMALL_SIZE_KINDS]

    @st.composite  # a value Hypothesis prints by its repr (it prints a mapped or built one as the call)
    def program(draw: Callable[[st.SearchStrategy], Any]) -> Program:
        capacity, keys = draw(capacities(scope, max_capacity)), draw(universes(scope))
        return Program(capacity, keys, draw(st.binary(min_size=size, max_size=size)))

    return program()


def cache_test(
    factory: Callable[[int], Any],
    *,
    spec: str = DEFAULT_KIND,
    keys: str | None = None,
    profile: str = DEFAULT_PROFILE,
    ops: Sequence[str] | None = None,
    semantics: Any = None,
    scope: str | None = None,
    steps: int | None = None,
    name: str | None = None,
) -> Callable[..., None]:
    """A pytest test function that holds `factory(size)` to the spec kind `spec` (see the module;
    another kind than the tensor cache, "blocks" say: `cacheproof.testing.kind_functions`).

    `keys` names the key domain (`cacheproof.contract.keys.KEY_DOMAINS`: int, str, bytes, tuple,
    mixed; None: the scope's own keys); `profile` the semantics (docs/profiles.md; `semantics`
    overrides it whole); only the calls in `ops` (default: the profile's operations) are made;
    `scope` is small (the default), wide or long (docs/scope.md); each program makes up to `steps`
    calls (default: as `cacheproof check --spec KIND`). `keys` and `scope` are the tensor cache's.
    `name` is the test's name until pytest collects it under the name it is bound to. A bad option
    raises InvalidArgumentError here, when the test is made.
    """
    if spec not in kind_names():
        raise InvalidArgumentError(f"spec {spec!r}: the spec kinds are {', '.join(kind_names())}")
    if steps is not None and (type(steps) is not int or steps < 1):
        raise InvalidArgumentError(f"steps {steps!r}: a cache test makes at least 1 call per program")
    impl = impl_name(factory)
    if spec == DEFAULT_KIND:
        contract, strategies = _cache_contract(factory, impl, keys, profile, ops, semantics, scope or SMALL.name,
                                               steps or DEFAULT_STEPS_PER_EXAMPLE)
    else:
        for option, value in (("keys", keys), ("scope", scope)):
            if value is not None:
                raise InvalidArgumentError(f"{option} {value!r}: an option of the tensor cache's tests, not of spec {spec!r}")
        contract, strategies = kind_contract(
            factory, get_kind(spec), profile=profile, ops=ops, semantics=semantics, steps=steps or DEFAULT_PROGRAM_STEPS,
            impl=impl, failure=CacheDivergence, reporting=_reporting)
    contract.__name__ = contract.__qualname__ = name or default_test_name(factory)
    contract.__module__ = callers_module()
    test = cache_test_settings()(given(**strategies)(contract))
    test.cacheproof_impl = impl  # what the plugin recognizes its tests by
    return test


def _cache_contract(
    factory: Callable[[int], Any], impl: str, keys: str | None, profile: str, ops: Sequence[str] | None,
    semantics: Semantics | None, scope: str, steps: int,
) -> tuple[Callable[[Program], None], dict[str, st.SearchStrategy]]:
    """The tensor cache's test function and the strategies of its arguments (see the module)."""
    chosen = profile_named(profile)
    operations = chosen.operations if ops is None else check_operations(list(ops))
    semantics = semantics or chosen.semantics
    drawn_from = with_key_domain(_scope_named(scope), _key_domain(keys))
    tally = Tally()
    phase = Phase(drawn_from, 0, steps)
    machine = machine_for(factory, tally, semantics=semantics, operations=operations, scope=drawn_from)
    run_one = program_test(machine, phase, None).hypothesis.inner_test  # one program, given its draws

    def program_strategy() -> st.SearchStrategy[Program]:
        # Built on the first draw: a wide scope probes the factory for the values it makes.
        cap = None if drawn_from.name == SMALL.name else capacity_cap_of(factory, REAL_VALUE_CAPACITY)
        return programs(drawn_from, steps, cap)

    def cache_contract(program: Program) -> None:
        __tracebackhide__ = True  # the failure shows the user's frames only
        divergence = None
        try:
            run_one(setup=(program.capacity_bytes, program.keys), blob=program.picks)
        except Divergence as error:
            divergence = str(error)
        except Exception as error:  # the user's code raised outside a call (the factory, say)
            raise with_users_frames_only(error)
        if divergence is not None:
            report = Explained(diverges(impl, divergence))
            if _reporting():
                report = explained(factory, impl, tally.capacity_bytes, tally.calls, divergence, semantics)
            raise CacheDivergence(report.text) from report.cause  # one line: Hypothesis sees one failure

    return cache_contract, {"program": st.deferred(program_strategy)}


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


def _reporting() -> bool:
    """Whether a failure now is the one reported: Hypothesis's final replay of the minimal failing
    example, or a call outside Hypothesis's engine (then nothing will shrink it further)."""
    return not currently_in_test_context() or current_build_context().is_final


def _scope_named(name: str) -> Scope:
    if name not in SCOPES:
        raise InvalidArgumentError(f"scope {name!r}: the scopes are {', '.join(SCOPES)}")
    return SCOPES[name]


def _key_domain(name: str | None) -> str | None:
    if name is not None and name not in KEY_DOMAINS:
        raise InvalidArgumentError(f"keys {name!r}: the key domains are {', '.join(KEY_DOMAINS)}")
    return name
