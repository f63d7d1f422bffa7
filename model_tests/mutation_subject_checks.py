"""Factories of model_tests/mutation_subject.py's CountingCache for `cacheproof mutate --also-check`
(model_tests/test_mutate_also_check.py): checks other than the plain one, whose verdict on each
mutant can be reasoned out.

- `counted_cache` reads what the contract never reads: it builds the cache only when a get on a
  scratch cache counts one lookup, so a mutant that counts otherwise fails every build (the plain
  check misses it).
- `recorded_cache` builds the plain cache and appends, to the file named by RECORD_VARIABLE, the
  name of the folder the subject module was imported from: `original` for the unmutated module,
  `mutant-N` for mutant N (cacheproof/mutate/install.py), so a test sees which checks ran on what.
"""

from __future__ import annotations

import os
from pathlib import Path

from model_tests import mutation_subject
from model_tests.mutation_subject import CountingCache

RECORD_VARIABLE = "CACHEPROOF_MUTATION_RECORD"


def counted_cache(capacity_bytes: int) -> CountingCache:
    """A CountingCache, built only when a get on a scratch one counts one lookup."""
    scratch = CountingCache(1024)
    scratch.put("probe", b"ab")
    before = scratch.lookups
    scratch.get("probe")
    counted = scratch.lookups - before
    if counted != 1:
        raise AssertionError(f"counted_cache: a get counted {counted} lookups, not 1")
    return CountingCache(capacity_bytes)


def recorded_cache(capacity_bytes: int) -> CountingCache:
    """A CountingCache, its subject module's folder name appended to the file $RECORD_VARIABLE."""
    with open(os.environ[RECORD_VARIABLE], "a") as record:
        record.write(Path(mutation_subject.__file__).parent.name + "\n")
    return CountingCache(capacity_bytes)
