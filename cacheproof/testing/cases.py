"""Check a cache inside your own test suite: `TestMyCache = cache_test_case(MyCache)`.

The returned `unittest.TestCase` runs the program checker of `cache_test` (the spec beside your
cache, `cacheproof.testing.functions.kind_contract`) as a Hypothesis test, and fails with the shrunk
counterexample: every difference, why, and a runnable snippet; pytest and unittest collect it like
any other. Settings come from the Hypothesis profile active when the test runs (max_examples,
derandomize, database, ...; `stateful_step_count` is the calls per program), so
`--hypothesis-profile`, `settings.load_profile` and Hypothesis's automatic `ci` profile under CI
all apply. If no profile was loaded (Hypothesis's "default" is active), cacheproof's own profile
for this environment is used for these tests only (see `cacheproof.settings`). Set the class
attribute `settings` to a `hypothesis.settings` to override everything. Under the `thorough`
profile the test draws from the wide and long scopes too (`profile_scopes`; docs/scope.md); the
class attribute `scopes` overrides that.

`program_test_case(MyPool, kind="blocks")` does the same for another spec kind (`cacheproof check
--spec KIND`): the kind's program checker, its shrunk counterexample as a runnable snippet.

`concurrent_cache_test_case(MyCache)` does the same for threads: it holds the cache to the spec
under several threads (`cacheproof check --threads`; docs/concurrency.md) and fails with the
shrunk scenario, the observed history, the reason no sequential order explains it, and a
runnable script.
"""

from __future__ import annotations

import sys
import unittest
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.reporting import with_reporter

from cacheproof.check.concurrent.run import DEFAULT_RUNS, run_concurrent_check
from cacheproof.check.programs.command import misuse_checked
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import DEFAULT_STEPS as DEFAULT_PROGRAM_STEPS, run_program_check
from cacheproof.check.programs.generators.cache_calls import SMALL, THOROUGH, CacheScope
from cacheproof.check.seeded_draws import seeded_draws
from cacheproof.settings import THOROUGH_SETTINGS, register_settings, settings_for_environment
from cacheproof.spec.cache.profiles import DEFAULT_PROFILE
from cacheproof.spec.cache.semantics import Semantics
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind
from cacheproof.testing.functions import failure_is_reported, kind_contract, kind_failure_text, kind_profile
from cacheproof.testing.plugin import key_by
from cacheproof.testing.names import cache_name, callers_module, impl_name, unique_name


def cache_test_case(
    factory: Callable[[int], Any],
    *,
    steps: int = DEFAULT_PROGRAM_STEPS,
    name: str | None = None,
    profile: str = DEFAULT_PROFILE,
    ops: Sequence[str] | None = None,
    semantics: Semantics | None = None,
) -> type[unittest.TestCase]:
    """A TestCase that holds `factory(capacity_bytes)` to the tensor cache's spec; programs of
    `steps` calls (the settings' `stateful_step_count` when the class attribute `settings` gives one).

    `profile` names the semantics (docs/profiles.md; `semantics` overrides it whole); only the
    calls in `ops` (default: the profile's operations) are made. A bad name raises
    InvalidArgumentError here, when the test case is made.
    """
    kind = get_kind(DEFAULT_KIND)
    impl = impl_name(factory)
    name = name or unique_name(cache_name(factory), factory, sys._getframe(1).f_globals)

    def contract(scope: Any, program_steps: int) -> tuple[Callable[..., None], dict]:
        return kind_contract(factory, kind, profile=profile, ops=ops, semantics=semantics, steps=program_steps,
                             impl=impl, failure=AssertionError, reporting=failure_is_reported, scope=scope)

    contract(SMALL, steps)  # a bad profile or operation is refused now

    class CacheContractTest(unittest.TestCase):
        settings: settings | None = None
        scopes: tuple[CacheScope, ...] | None = None  # None: as the active profile says (`profile_scopes`)
        cache_impl = impl  # "module:qualname" of the factory

        def __repr__(self) -> str:  # pytest prints it as `self = ...` above a failure
            return f"<{type(self).__qualname__} testing {impl}>"

        def runTest(self) -> None:
            for scope in type(self).scopes or profile_scopes():
                _run_quietly(contract, scope, scope_settings(type(self).settings or active_settings(steps), scope), impl)

    CacheContractTest.__name__ = CacheContractTest.__qualname__ = f"Test{name}"
    CacheContractTest.__module__ = callers_module()
    return CacheContractTest


def concurrent_cache_test_case(
    factory: Callable[[int], Any],
    *,
    threads: int = 3,
    scenarios: int = 50,
    runs: int = DEFAULT_RUNS,
    seed: int | None = 0,
    name: str | None = None,
    spec: str = DEFAULT_KIND,
) -> type[unittest.TestCase]:
    """A TestCase that checks `factory(size)` is linearizable w.r.t. the spec of kind `spec` (the
    tensor cache by default; "blocks", "radix") under `threads` threads: `scenarios` scenarios, each
    run `runs` times (class attributes of the same names override them), through the one concurrent
    checker of `check --threads`. The same seed draws the same scenarios."""
    kind = get_kind(spec)
    impl = impl_name(factory)
    name = name or cache_name(factory)

    class ConcurrentCacheTest(unittest.TestCase):
        def runTest(self) -> None:
            cls = type(self)
            report = run_concurrent_check(
                kind, factory, threads=cls.threads, scenarios=cls.scenarios, runs=cls.runs, seed=cls.seed
            )
            example = report.counterexample
            if example is not None:
                raise AssertionError(
                    f"not linearizable: {example.reason}\n\nobserved history:\n"
                    + "\n".join(f"  {line}" for line in example.history.lines())
                    + f"\n\n{example.to_python(kind, impl)}"
                )

    ConcurrentCacheTest.threads = threads
    ConcurrentCacheTest.scenarios = scenarios
    ConcurrentCacheTest.runs = runs
    ConcurrentCacheTest.seed = seed
    ConcurrentCacheTest.__name__ = ConcurrentCacheTest.__qualname__ = f"Test{name}Concurrently"
    ConcurrentCacheTest.__module__ = callers_module()
    return ConcurrentCacheTest


def active_settings(steps: int = DEFAULT_PROGRAM_STEPS) -> settings:
    """The active profile (cacheproof's own if none was loaded) with `steps` calls per program
    (`stateful_step_count`). There is no deadline and no health check: a whole program is one example.
    """
    parent = settings.default
    if settings.get_current_profile_name() == "default":
        chosen = register_settings()
        settings.load_profile("default")
        parent = settings.get_profile(chosen)
    return settings(parent, stateful_step_count=steps, deadline=None, suppress_health_check=list(HealthCheck))


def _program_settings(parent: settings) -> settings:
    """`parent` as a program test takes it: no deadline and no health check (a whole program is one
    example), and neither Hypothesis's shrinking nor its explain phase: the failure reported is
    shrunk by the checker's shrinker (`shrink_program`), as a `cache_test`'s is, in a fraction of the time."""
    kept = tuple(phase for phase in parent.phases if phase not in (Phase.shrink, Phase.explain))
    return settings(parent, phases=kept, deadline=None, suppress_health_check=list(HealthCheck))


def _run_quietly(contract: Callable[[Any, int], tuple[Callable[..., None], dict]], scope: CacheScope,
                 run_settings: settings, impl: str) -> None:
    """Run the `@given` test of `contract(scope, steps)` under `run_settings`, its examples keyed
    in the database by the implementation and the scope; its failure is raised again as one
    AssertionError of its text alone (the implementation's own exception chained, when it crashed).
    Hypothesis's own report (the failing example's picks, a digest) is dropped: the failure says
    the divergence and carries its shrunk calls as a snippet. Hypothesis's printing stays on only
    for a verbosity of `verbose` or more, which a user asks for explicitly. Draws depend on the
    profile's seed alone, not on which modules the suite has loaded (`cacheproof.check.seeded_draws`).
    """
    __tracebackhide__ = True  # pytest shows the user's test, not this frame
    function, strategies = contract(scope, run_settings.stateful_step_count)
    test = _program_settings(run_settings)(given(**strategies)(function))
    key_by(test, impl if scope is SMALL else f"{impl}, {scope.name}")
    try:
        with seeded_draws():
            if run_settings.verbosity >= Verbosity.verbose:
                test()
            else:
                with with_reporter(lambda message: None):
                    test()
    except AssertionError as failure:
        raise AssertionError(str(failure)) from failure.__cause__


def profile_scopes(profile: str | None = None) -> tuple[CacheScope, ...]:
    """The scopes a `cache_test_case` runs under the profile `profile` (default: the active one):
    the small, wide and long scopes under "cacheproof-thorough" (as `cacheproof check --thorough`), else the small one."""
    if profile is None:
        profile = settings.get_current_profile_name()
        if profile == "default":  # none loaded: `active_settings` uses the environment's
            profile = settings_for_environment()
    return tuple(phase.scope for phase in THOROUGH) if profile == THOROUGH_SETTINGS else (SMALL,)


def scope_settings(parent: settings, scope: CacheScope) -> settings:
    """`parent` as it applies to `scope`: the small scope takes it as it is; the others take the
    share of examples that `THOROUGH` gives them beside the small scope (programs of the same
    number of calls: a long life of `THOROUGH`'s is longer than one example of Hypothesis holds)."""
    phases = {phase.scope.name: phase for phase in THOROUGH}
    if scope is SMALL or scope.name not in phases:
        return parent
    small, phase = phases[SMALL.name], phases[scope.name]
    return settings(parent, max_examples=max(1, parent.max_examples * phase.examples // small.examples))


def program_test_case(
    factory: Callable[[int], Any],
    kind: str = "blocks",
    *,
    profile: str = "contract",
    examples: int | None = None,
    seed: int = 0,
    steps: int = DEFAULT_PROGRAM_STEPS,
    name: str | None = None,
) -> type[unittest.TestCase]:
    """A TestCase that holds `factory(size)` to the spec kind `kind` (`cacheproof check --spec
    KIND`): `examples` programs (None: the active Hypothesis settings' max_examples, see
    `active_settings`) of up to `steps` calls from `seed`, under `profile`'s semantics and
    operations; class attributes of the same names override them. A divergence fails the test
    with the shrunk counterexample as a runnable snippet. A bad kind or profile raises
    InvalidArgumentError here, when the test case is made."""
    spec_kind = get_kind(kind)
    chosen = kind_profile(spec_kind, profile)
    impl = impl_name(factory)
    name = name or unique_name(cache_name(factory), factory, sys._getframe(1).f_globals)

    class ProgramContractTest(unittest.TestCase):
        cache_impl = impl  # "module:qualname" of the factory

        def runTest(self) -> None:
            cls = type(self)
            report = run_program_check(
                spec_kind, factory, generator_for(spec_kind.name), examples=cls.examples or active_settings().max_examples,
                steps=cls.steps, seed=cls.seed, semantics=chosen.semantics, operations=chosen.operations,
                misuse=misuse_checked(chosen.semantics),
            )
            example = report.counterexample
            if example is not None:
                raise AssertionError(kind_failure_text(spec_kind, impl, example, chosen.semantics))

    ProgramContractTest.examples = examples
    ProgramContractTest.seed = seed
    ProgramContractTest.steps = steps
    ProgramContractTest.__name__ = ProgramContractTest.__qualname__ = f"Test{name}"
    ProgramContractTest.__module__ = callers_module()
    return ProgramContractTest
