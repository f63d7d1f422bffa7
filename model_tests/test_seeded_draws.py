"""One seed, one run: what other modules the process has loaded does not change the calls drawn."""

import sys
import types

import pytest

from cacheproof.check.seeded_draws import seeded_draws
from cacheproof.check.programs.generators import generator_for
from cacheproof.check.programs.run import BYTES_PER_CALL, run_program_check
from cacheproof.spec import CacheSpec
from cacheproof.spec.kinds import get_kind

STEPS = 4
"""Calls per program: its byte string, STEPS * BYTES_PER_CALL bytes, is short enough (50 bytes at
most) for Hypothesis to harvest byte strings of its length from a local module's source."""


def _module_full_of_constants(tmp_path, name: str) -> types.ModuleType:
    """A local module (a file outside site-packages) whose source holds many integer constants, and
    byte strings of a program's length (which Hypothesis draws in place of a program's bytes)."""
    path = tmp_path / f"{name}.py"
    programs = ", ".join(repr(bytes([n]) * (STEPS * BYTES_PER_CALL)) for n in range(1, 200))
    path.write_text("SIZES = [" + ", ".join(str(n) for n in range(3, 4000, 7)) + "]\n" + f"PROGRAMS = [{programs}]\n")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def _what_was_drawn(seed: int):
    """Every call a seeded run made, through a cache that records them (the spec itself)."""
    calls = []

    class RecordingSpec(CacheSpec):
        def __getattribute__(self, name):
            attribute = super().__getattribute__(name)
            if callable(attribute) and not name.startswith("_"):
                def recorded(*args, **kwargs):
                    calls.append((name, repr(args), repr(kwargs)))
                    return attribute(*args, **kwargs)
                return recorded
            return attribute

    report = run_program_check(get_kind("cache"), RecordingSpec, generator_for("cache"), examples=100, steps=STEPS,
                               seed=seed, call_timeout=None)
    assert report.ok and calls
    return calls


def test_loading_a_module_changes_nothing_in_a_seeded_run(tmp_path) -> None:
    before = _what_was_drawn(seed=3)
    name = "cacheproof_test_constants_module"
    sys.modules[name] = _module_full_of_constants(tmp_path, name)
    try:
        after = _what_was_drawn(seed=3)
    finally:
        del sys.modules[name]
    assert after == before


def test_the_local_constants_come_back_after_the_block() -> None:
    from hypothesis.internal.conjecture import providers

    original = providers._get_local_constants
    with seeded_draws():
        assert providers._get_local_constants is not original
        assert len(providers._get_local_constants()) == 0
    assert providers._get_local_constants is original


def test_the_private_names_seeded_draws_relies_on_still_exist() -> None:
    """No public Hypothesis API turns local constants off (cacheproof/check/seeded_draws.py); this
    fails when a Hypothesis release renames what seeded_draws() replaces."""
    from hypothesis.internal.conjecture import providers

    assert callable(providers._get_local_constants)
    assert hasattr(providers.CONSTANTS_CACHE, "cache")
    assert isinstance(providers.Constants(), providers.Constants)


def _provider(seed: int):
    """Hypothesis's own provider of a fresh test case whose generator is seeded with `seed`."""
    import random

    from hypothesis.internal.conjecture.data import ConjectureData

    return ConjectureData(random=random.Random(seed)).provider


@pytest.mark.parametrize("size", [0, 1, 7, 480, 4096])
def test_a_fixed_length_string_is_drawn_in_one_pass_as_the_bytes_hypothesis_draws(size) -> None:
    """`one_pass_bytes` against Hypothesis's own `draw_bytes` on generators seeded alike: the same
    bytes, and the generators left in the same state, so every later draw of the test case is the
    same too (about 10 of the 200 seeds first take Hypothesis's 1 in 20 chance of a constant)."""
    from cacheproof.check import seeded_draws as module

    for seed in range(200):
        hypothesis_own, one_pass = _provider(seed), _provider(seed)
        drawn = module._HYPOTHESIS_DRAW_BYTES(hypothesis_own, size, size)
        assert module.one_pass_bytes(one_pass, size, size) == drawn
        assert one_pass._random.getstate() == hypothesis_own._random.getstate()


def test_a_string_of_a_drawn_length_is_left_to_hypothesis() -> None:
    from cacheproof.check import seeded_draws as module

    for seed in range(50):
        hypothesis_own, one_pass = _provider(seed), _provider(seed)
        assert module.one_pass_bytes(one_pass, 0, 64) == module._HYPOTHESIS_DRAW_BYTES(hypothesis_own, 0, 64)


def test_hypothesis_draws_its_own_way_again_after_the_block() -> None:
    from hypothesis.internal.conjecture import providers

    from cacheproof.check import seeded_draws as module

    original = providers.HypothesisProvider.draw_bytes
    with seeded_draws():
        assert providers.HypothesisProvider.draw_bytes is module.one_pass_bytes
        with seeded_draws():
            pass
        assert providers.HypothesisProvider.draw_bytes is module.one_pass_bytes  # an inner block restores the outer's
    assert providers.HypothesisProvider.draw_bytes is original


def test_a_seeded_run_draws_the_same_calls_in_one_pass_as_byte_by_byte(monkeypatch) -> None:
    from cacheproof.check import seeded_draws as module

    in_one_pass = _what_was_drawn(seed=5)
    monkeypatch.setattr(module, "one_pass_bytes", module._HYPOTHESIS_DRAW_BYTES)
    assert _what_was_drawn(seed=5) == in_one_pass
