"""Check a cache inside your own test suite: `TestMyCache = cache_test_case(MyCache)`.

The returned `unittest.TestCase` runs cacheproof's state machine (the spec beside your cache) as a
Hypothesis stateful test; pytest and unittest collect it like any other. Settings come from the
Hypothesis profile active when the test runs (max_examples, derandomize, database, ...), so
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

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from cacheproof.check.concurrent.run import DEFAULT_RUNS, run_concurrent_check
from cacheproof.check.programs.command import misuse_checked
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import DEFAULT_STEPS as DEFAULT_PROGRAM_STEPS, run_program_check
from cacheproof.contract.outcomes import Divergence
from cacheproof.check.seeded_draws import seeded_draws
from cacheproof.check.sequential.machine import Tally, machine_for
from cacheproof.check.sequential.run import DEFAULT_STEPS_PER_EXAMPLE
from cacheproof.check.sequential.scope import SMALL, THOROUGH, Scope
from cacheproof.settings import THOROUGH_SETTINGS, register_settings, settings_for_environment
from cacheproof.spec.cache.profiles import DEFAULT_PROFILE, check_operations, profile_named
from cacheproof.spec.cache.semantics import Semantics
from cacheproof.spec.kinds import DEFAULT_KIND, get_kind
from cacheproof.testing.failures import explained
from cacheproof.testing.functions import kind_failure_text, kind_profile
from cacheproof.testing.names import cache_name, callers_module, impl_name, unique_name


def cache_test_case(
    factory: Callable[[int], Any],
    *,
    steps: int = DEFAULT_STEPS_PER_EXAMPLE,
    name: str | None = None,
    profile: str = DEFAULT_PROFILE,
    ops: Sequence[str] | None = None,
    semantics: Semantics | None = None,
) -> type[unittest.TestCase]:
    """A TestCase that holds `factory(capacity_bytes)` to the spec; `steps` calls per example.

    `profile` names the semantics (docs/profiles.md; `semantics` overrides it whole); only the
    calls in `ops` (default: the profile's operations) are made. A bad name raises
    InvalidArgumentError here, when the test case is made.
    """
    chosen = profile_named(profile)
    semantics = semantics or chosen.semantics
    operations = chosen.operations if ops is None else check_operations(list(ops))
    tally = Tally()
    impl = impl_name(factory)
    name = name or unique_name(cache_name(factory), factory, sys._getframe(1).f_globals)

    def machine(scope: Scope) -> type:
        # A class name of its own gives each factory (and scope) its own key in Hypothesis's example database.
        label = impl if scope is SMALL else f"{impl}, {scope.name}"
        bound = machine_for(factory, tally, semantics=semantics, operations=operations, scope=scope)
        return type(f"CacheMachine[{label}]", (bound,), {"__module__": __name__})

    class CacheContractTest(unittest.TestCase):
        settings: settings | None = None
        scopes: tuple[Scope, ...] | None = None  # None: as the active profile says (`profile_scopes`)
        cache_impl = impl  # "module:qualname" of the factory

        def __repr__(self) -> str:  # pytest prints it as `self = ...` above a failure
            return f"<{type(self).__qualname__} testing {impl}>"

        def runTest(self) -> None:
            run_settings = type(self).settings or active_settings(steps)
            for scope in type(self).scopes or profile_scopes():
                failure = _failure(
                    machine(scope), scope_settings(run_settings, scope), factory, impl, tally, semantics
                )
                if failure is not None:
                    raise AssertionError(failure)

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


def active_settings(steps: int = DEFAULT_STEPS_PER_EXAMPLE) -> settings:
    """The active profile (cacheproof's own if none was loaded) with `steps` calls per example.

    Like Hypothesis's own stateful TestCase, there is no deadline and no health check: a whole
    sequence of calls is one example.
    """
    parent = settings.default
    if settings.get_current_profile_name() == "default":
        chosen = register_settings()
        settings.load_profile("default")
        parent = settings.get_profile(chosen)
    return settings(parent, stateful_step_count=steps, deadline=None, suppress_health_check=list(HealthCheck))


def _failure(
    machine: type, run_settings: settings, factory: Callable[[int], Any], impl: str, tally: Tally, semantics: Semantics
) -> str | None:
    """Run the state machine; None if the cache conforms, else the divergence and its snippet.

    Hypothesis's own report (its rule-by-rule listing of the failing example) is dropped: the
    snippet says the same in the cache's own calls. Its step printing stays on only for a
    verbosity of `verbose` or more, which a user asks for explicitly. Draws depend on the profile's
    seed alone, not on which modules the suite has loaded (`cacheproof.check.seeded_draws`).
    """
    reporter = None if run_settings.verbosity >= Verbosity.verbose else (lambda message: None)
    try:
        with seeded_draws():
            if reporter is None:
                run_state_machine_as_test(machine, settings=run_settings)
            else:
                with with_reporter(reporter):
                    run_state_machine_as_test(machine, settings=run_settings)
    except Divergence as error:
        return explained(factory, impl, tally.capacity_bytes, tally.calls, str(error), semantics).text
    return None


def profile_scopes(profile: str | None = None) -> tuple[Scope, ...]:
    """The scopes a `cache_test_case` runs under the profile `profile` (default: the active one):
    the small, wide and long scopes under "cacheproof-thorough" (as `cacheproof check --thorough`), else the small one."""
    if profile is None:
        profile = settings.get_current_profile_name()
        if profile == "default":  # none loaded: `active_settings` uses the environment's
            profile = settings_for_environment()
    return tuple(phase.scope for phase in THOROUGH) if profile == THOROUGH_SETTINGS else (SMALL,)


def scope_settings(parent: settings, scope: Scope) -> settings:
    """`parent` as it applies to `scope`: the small scope takes it as it is; the others take the
    share of examples, and the steps, that `THOROUGH` gives them beside the small scope, and a
    scope with bursts leaves shrinking to the checker (as `cacheproof check` does)."""
    phases = {phase.scope.name: phase for phase in THOROUGH}
    if scope is SMALL or scope.name not in phases:
        return parent
    small, phase = phases[SMALL.name], phases[scope.name]
    examples = max(1, parent.max_examples * phase.examples // small.examples)
    kept = tuple(p for p in parent.phases if phase.shrink or p is not Phase.shrink)
    return settings(parent, max_examples=examples, stateful_step_count=phase.steps, phases=kept)


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
