"""`cacheproof bench radix`: the workload is seeded and shared-prefix, the built-in tree runs it
(alone where SGLang does not import), and the report carries the rates and the ratio's inputs."""

from __future__ import annotations

import json

from cacheproof.bench.engines import radix
from cacheproof.cli import main
from cacheproof.impl.radix_cache import radix_cache


def test_the_workload_is_seeded_and_shares_prefixes() -> None:
    first, again = radix.make_workload(50, seed=3), radix.make_workload(50, seed=3)
    assert first == again and all(len(tokens) == radix.TOKENS for tokens in first)
    heads = [tokens[:radix.PREFIX_TOKENS] for tokens in first]
    assert max(heads.count(head) for head in heads) > 1


def test_the_built_in_tree_runs_it_and_caches_what_it_can() -> None:
    cache = radix_cache(256)
    seconds, calls = radix.run_workload(cache, radix.make_workload(40, seed=1), 256)
    assert seconds > 0 and calls >= 40 * 4
    assert cache.protected_size() == 0 and 0 < cache.total_size() <= 256


def test_the_command_writes_its_figures(tmp_path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", "radix", "--requests", "30", "--repeats", "1", "--num-slots", "256", "--quiet",
                 "--json", str(out)]) == 0
    figures = json.loads(out.read_text())["figures"]
    assert figures["requests"] == 30 and figures["TorchRadixCache"] > 0 and figures["calls"] >= 120


def test_too_few_slots_is_a_usage_error(capsys) -> None:
    assert main(["bench", "radix", "--num-slots", "10"]) == 2
    assert "--num-slots must be at least 64" in capsys.readouterr().err
