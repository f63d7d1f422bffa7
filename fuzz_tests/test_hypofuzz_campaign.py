"""A HypoFuzz campaign on a `cache_test` finds the failure, shrinks it, and pytest replays it.

Runs in its own venv with the pinned pair (constraints/fuzz.txt; docs/scale.md, "HypoFuzz
campaigns"), not in the main suite: HypoFuzz 25.11.1 shrinks a failure with a Hypothesis internal
(`ConjectureResult.slice_comments`) that Hypothesis 6.157.1 and later no longer have, so with the
newest Hypothesis the campaign crashes while shrinking. Without HypoFuzz, or with another pair,
this module skips with one line; under CI (`CI` set) it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from model_tests.browser import under_ci

ROOT = Path(__file__).resolve().parents[1]
PINS = dict(line.split("==") for line in (ROOT / "constraints" / "fuzz.txt").read_text().splitlines()
            if line and not line.startswith("#"))
"""The pinned pair, by package: {"hypothesis": "6.157.0", "hypofuzz": "25.11.1"}."""


def _installed_pair() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    def installed(package: str) -> str | None:
        try:
            return version(package)
        except PackageNotFoundError:
            return None

    return {package: installed(package) for package in PINS}


FUZZ_MISSING = (f"HypoFuzz campaigns need the pinned pair ({', '.join(f'{p}=={v}' for p, v in PINS.items())}; "
                f"installed: {', '.join(f'{p} {v}' for p, v in _installed_pair().items())}): "
                "pip install -e '.[fuzz]' -c constraints/fuzz.txt; under CI this is a failure")

if _installed_pair() != PINS:
    if under_ci():
        raise RuntimeError(FUZZ_MISSING)
    pytest.skip(FUZZ_MISSING, allow_module_level=True)

FUZZED = '''
from cacheproof.testing import cache_test
from model_tests.broken_caches import GetTakesReference

test_fuzzed_cache = cache_test(GetTakesReference)
'''

REPLAY_ONLY = '''
from hypothesis import Phase, settings

settings.register_profile("replay-only", phases=[Phase.explicit, Phase.reuse])
'''

FAILURES = '''
import json
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.internal.reflection import function_digest
from hypofuzz.database import FailureState, HypofuzzDatabase
from test_fuzzed import test_fuzzed_cache

def weight(choices):
    return sum(choice if isinstance(choice, int) else sum(map(bool, choice)) for choice in choices)

inner = test_fuzzed_cache.hypothesis.inner_test
inner._hypothesis_internal_add_digest = b"test_fuzzed.py::test_fuzzed_cache"  # HypoFuzz keys a test by its node id
key = function_digest(inner)
database = HypofuzzDatabase(DirectoryBasedExampleDatabase(".hypothesis/examples"))
print(json.dumps({state.name: sorted(weight(choices) for choices in database.failures(state=state).fetch(key))
                  for state in (FailureState.SHRUNK, FailureState.UNSHRUNK)}))
'''
"""Prints the weight (the ints, and the nonzero bytes of the program's picks) of each failure of the
fuzzed test in HypoFuzz's database, shrunk and not."""

CAMPAIGN_SECONDS = 240
"""At most this long for the campaign: it finds GetTakesReference's failure in seconds, shrinks it
and stops once every test it fuzzes has failed."""


def _run(command: list[str], folder: Path, timeout: float) -> str:
    """`command`'s output, run in `folder` with the repository importable and no CI profile; its
    whole process group killed past `timeout` seconds."""
    env = {name: value for name, value in os.environ.items() if name not in ("CI", "HYPOTHESIS_PROFILE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(folder)])
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return output


def test_a_campaign_finds_and_shrinks_a_failure_that_pytest_replays(tmp_path: Path) -> None:
    (tmp_path / "test_fuzzed.py").write_text(FUZZED)
    (tmp_path / "conftest.py").write_text(REPLAY_ONLY)
    fuzzed = _run([str(Path(sys.executable).with_name("hypothesis")), "fuzz", "-n", "1", "--no-dashboard", "--",
                   "test_fuzzed.py", "-p", "no:cacheprovider"], tmp_path, CAMPAIGN_SECONDS)
    assert "to fuzz 1 test" in fuzzed and "Found a failing input for every test!" in fuzzed, fuzzed
    assert "slice_comments" not in fuzzed, fuzzed
    stored = json.loads(_run([sys.executable, "-c", FAILURES], tmp_path, 60).strip().splitlines()[-1])
    (shrunk,) = stored["SHRUNK"]  # one failure, shrunk (6.157.1 and later: none, the shrinking crashed)
    assert all(shrunk <= found for found in stored["UNSHRUNK"]), stored
    replayed = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                     "--hypothesis-profile", "replay-only", "test_fuzzed.py"], tmp_path, 120)
    assert "1 failed" in replayed and "test_fuzzed_cache(" in replayed, replayed
    assert "# <- diverges here" in replayed, replayed
    calls = int(re.search(r"shrunk to (\d+) calls", replayed).group(1))
    assert calls <= 3, replayed  # a reserved or put entry, its get (GetTakesReference takes a reference)
