"""The cacheproof pytest plugin, entry point `pytest11: cacheproof` (docs/testing.md).

pytest loads it in every session of an environment where cacheproof is installed, so it imports
neither Hypothesis nor the checker until a session uses them.

- A `cache_test` bound in a test module (`test_my_cache = cache_test(MyCache)`) is named after the
  name it is bound to (Hypothesis's failure text then names it as pytest's report does) and gets
  a database key of its own, its node id: the key Hypothesis's plugin gives a parametrized test
  and HypoFuzz gives every test, so a failure HypoFuzz found replays under pytest. (cache_test's
  functions share one source, from which Hypothesis derives a test's key otherwise.)
- The `cacheproof_check` fixture: `cacheproof_check(MyCache, keys="str")` inside a test runs the
  same check there, for a cache built from other fixtures.
- `--cacheproof-settings ci|dev|thorough` loads cacheproof's Hypothesis settings of that name
  (`cacheproof.settings`). cacheproof's settings are registered, never loaded, when that option or
  `--hypothesis-profile cacheproof-...` names them; the user's own profiles are left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

SETTINGS_OPTION = "--cacheproof-settings"
SETTINGS_PREFIX = "cacheproof-"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("cacheproof").addoption(
        SETTINGS_OPTION, dest="cacheproof_settings", default=None, metavar="NAME",
        help="load cacheproof's Hypothesis settings NAME (ci, dev or thorough: cacheproof-NAME)",
    )


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's plugin loads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    chosen = config.getoption("cacheproof_settings")
    named = config.getoption("hypothesis_profile", None) or ""
    if chosen is None and not named.startswith(SETTINGS_PREFIX):
        return
    from hypothesis import settings

    from cacheproof.settings import CI_SETTINGS, DEV_SETTINGS, THOROUGH_SETTINGS, register_settings

    register_settings(load=False)
    if chosen is None:
        return
    names = [name.removeprefix(SETTINGS_PREFIX) for name in (CI_SETTINGS, DEV_SETTINGS, THOROUGH_SETTINGS)]
    if chosen.removeprefix(SETTINGS_PREFIX) not in names:
        raise pytest.UsageError(f"{SETTINGS_OPTION} {chosen!r}: cacheproof's settings are {', '.join(names)}")
    settings.load_profile(SETTINGS_PREFIX + chosen.removeprefix(SETTINGS_PREFIX))


def pytest_itemcollected(item: pytest.Item) -> None:
    test = getattr(item, "obj", None)
    if getattr(test, "cacheproof_impl", None) is None:
        return
    from cacheproof.testing.functions import bind_test

    bind_test(test, item.name)
    key_by(test, item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Before the report of a cache test's failure is made: its traceback cut to the user's frames."""
    if call.excinfo is not None and _checks_a_cache(item):
        from cacheproof.contract.faults import with_users_frames_only

        # The raw traceback is cut, not pytest's view of it, which pytest re-expands from raw entries.
        cut = with_users_frames_only(call.excinfo.value, also_hidden=_RUNNERS).__traceback__
        call.excinfo.traceback = type(call.excinfo.traceback)(cut if cut is not None else [])
    return (yield)


@pytest.fixture
def cacheproof_check(request: pytest.FixtureRequest) -> Callable[..., None]:
    """`cacheproof_check(factory, **options)`: check `factory`'s caches against the spec inside this
    test, as `cache_test(factory, **options)` does; a divergence fails the test."""

    def check(factory: Callable[[int], Any], **options: Any) -> None:
        __tracebackhide__ = True  # the failure shows the user's frames only
        from cacheproof.testing.functions import bind_test, cache_test
        from cacheproof.testing.names import impl_name

        test = cache_test(factory, **options)
        bind_test(test, request.node.name)
        key_by(test, f"{request.node.nodeid}::{impl_name(factory)}")
        test()

    return check


_RUNNERS = ("_pytest", "pytest", "pluggy")
"""The test runner's own modules, whose frames a cache test's failure leaves out too."""


def _checks_a_cache(item: pytest.Item) -> bool:
    return getattr(getattr(item, "obj", None), "cacheproof_impl", None) is not None or (
        "cacheproof_check" in getattr(item, "fixturenames", ())
    )


def key_by(test: Any, key: str) -> None:
    """Key `test`'s examples in Hypothesis's database by `key`. Hypothesis has no public way to do
    this; its pytest plugin (for parametrized tests) and HypoFuzz (for every test) set this attribute
    to the node id, and model_tests/test_pytest_plugin.py fails if a release drops it."""
    test.hypothesis.inner_test._hypothesis_internal_add_digest = key.encode()
