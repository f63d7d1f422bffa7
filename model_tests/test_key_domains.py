"""`cacheproof check --keys int|str|bytes|tuple|mixed`: the key domain the calls draw from.

A cache keyed by hash strings is checked as it is (no wrapper), its counterexamples print and run
with string keys, their traces replay, a profile can name its domain, and `--threads` draws from
the domain too.
"""

from __future__ import annotations

import json
import random

import pytest

from cacheproof.check.concurrent.scenarios import draw_scenario
from cacheproof.check.programs.generators import default_scope, generator_for
from cacheproof.spec.kinds import get_kind
from cacheproof.cli import main
from cacheproof.contract.keys import KEY_DOMAINS
from model_tests.snippet_runs import assert_fails_where_it_diverges, snippets_in

KEYED = "model_tests.keyed_caches"
TYPES = {"int": ["int"], "str": ["str"], "bytes": ["bytes"], "tuple": ["tuple"], "mixed": ["bytes", "int", "str", "tuple"]}
"""The key types each domain's small scope reaches (written out here, not read from the table)."""


def _check(capsys, *arguments: str) -> tuple[int, str, str]:
    status = main(["check", *arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("domain", sorted(TYPES))
def test_each_domain_draws_its_own_key_types_and_the_spec_conforms(domain, tmp_path, capsys):
    report = tmp_path / "r.json"
    status, out, err = _check(capsys, "--impl", "cacheproof.spec:CacheSpec", "--keys", domain, "--examples", "30",
                              "--json", str(report))
    assert status == 0, out + err
    written = json.loads(report.read_text())
    assert written["keys"] == domain
    assert written["scope"]["key_types"] == TYPES[domain]


@pytest.mark.parametrize("domain", sorted(TYPES))
def test_each_domain_travels_to_an_isolated_cache_and_back(domain, capsys):
    """Evicted keys of every type come back from the child as they are (a list of bytes or tuple
    keys used to come back as a description, a false divergence)."""
    status, out, err = _check(capsys, "--impl", "cacheproof.spec:CacheSpec", "--keys", domain, "--examples", "20",
                              "--isolate", "--quiet")
    assert status == 0, out + err


def test_a_cache_of_hash_strings_fails_on_int_keys_and_conforms_on_str_keys(capsys):
    status, out, _ = _check(capsys, "--impl", f"{KEYED}:HashStringKeys", "--examples", "30", "--max-divergences", "1")
    assert status == 1 and "TypeError: keys are hash strings" in out
    status, out, err = _check(capsys, "--impl", f"{KEYED}:HashStringKeys", "--examples", "30", "--keys", "str")
    assert status == 0, out + err


def test_threads_draw_from_the_key_domain(capsys):
    status, out, _ = _check(capsys, "--impl", f"{KEYED}:HashStringKeys", "--threads", "2", "--examples", "10")
    assert status == 1, "int keys reach the string-keyed cache"
    status, out, err = _check(capsys, "--impl", f"{KEYED}:HashStringKeys", "--threads", "2", "--examples", "10",
                              "--keys", "str")
    assert status == 0, out + err


def test_a_scenario_names_only_keys_of_its_domain():
    keys = KEY_DOMAINS["bytes"]
    generator = generator_for("cache", default_scope("cache").with_keys("bytes"))
    for number in range(20):
        scenario = draw_scenario(get_kind("cache"), generator, random.Random(number), 2)
        calls = scenario.prefix + tuple(call for thread in scenario.threads for call in thread)
        named = {call.args[0] for call in calls if call.args and call.op not in ("evict",)}
        assert named <= set(keys), named - set(keys)


def test_a_str_keyed_counterexample_prints_runs_and_replays(tmp_path, capsys):
    """Keys that differ only in case: int keys never show the bug; its snippet fails, its trace replays."""
    status, out, err = _check(capsys, "--impl", f"{KEYED}:FoldsCaseOfHashes", "--examples", "50")
    assert status == 0, out + err
    trace = tmp_path / "c.trace"
    status, out, _ = _check(capsys, "--impl", f"{KEYED}:FoldsCaseOfHashes", "--keys", "str", "--max-divergences", "1",
                            "--trace-out", str(trace))
    assert status == 1
    [snippet] = snippets_in(out)
    assert "'A3F9C1D2'" in snippet, "the key whose case the cache folds"
    assert_fails_where_it_diverges(snippet)
    recorded = [json.loads(line) for line in trace.read_text().splitlines()[1:]]
    assert any(isinstance(record["args"][0], str) for record in recorded if record["args"])
    status = main(["replay", str(trace)])
    assert status == 0, "the trace is the spec's own behaviour"
    status = main(["replay", str(trace), "--impl", f"{KEYED}:FoldsCaseOfHashes"])
    replayed = capsys.readouterr().out
    assert status == 1 and "divergence at step" in replayed


def _key_types(capsys, tmp_path, *arguments: str) -> list[str]:
    report = tmp_path / "keys.json"
    status, out, err = _check(capsys, "--impl", "cacheproof.spec:CacheSpec", "--examples", "20", "--json", str(report),
                              *arguments)
    assert status in (0, 1), out + err  # the contract's spec diverges from another profile's semantics
    return json.loads(report.read_text())["scope"]["key_types"]


def test_a_profile_names_its_key_domain_and_keys_overrides_it(capsys, tmp_path):
    assert _key_types(capsys, tmp_path, "--profile", "vllm-encoder-cache") == ["str"], \
        "vLLM keys its encoder cache by mm_hash strings"
    assert _key_types(capsys, tmp_path, "--profile", "vllm-encoder-cache", "--keys", "int") == ["int"]
    assert _key_types(capsys, tmp_path) == ["int"], "the contract's profile: the small scope's own int keys"


@pytest.mark.parametrize("domain", ["str", "bytes", "tuple", "mixed"])
def test_a_domain_the_block_kind_lacks_is_a_one_line_usage_error_naming_its_domains(domain, capsys):
    status, out, err = _check(capsys, "--spec", "blocks", "--impl", "model_tests.block_pools:ListBlockPool",
                              "--keys", domain, "--examples", "3")
    assert status == 2 and out == ""
    assert err == f"cacheproof check: --keys {domain}: --spec blocks draws its request ids from int only " \
                  "(docs/decisions.md, Key domains per spec kind)\n"


def test_the_block_kinds_own_domain_is_accepted_and_reported(tmp_path, capsys):
    report = tmp_path / "r.json"
    status, out, err = _check(capsys, "--spec", "blocks", "--impl", "model_tests.block_pools:ListBlockPool",
                              "--keys", "int", "--examples", "5", "--quiet", "--json", str(report))
    assert status == 0, err
    assert json.loads(report.read_text())["keys"] == "int"


def test_every_kind_declares_key_domains_the_checker_knows():
    from cacheproof.spec.kinds import get_kind, kind_names

    for name in kind_names():
        kind = get_kind(name)
        assert kind.key_domains and set(kind.key_domains) <= set(KEY_DOMAINS), name
        assert kind.keys_are and kind.keys_are != "keys", f"{name} does not say what its keys are"
    assert get_kind("cache").key_domains == tuple(KEY_DOMAINS)  # the cache draws from every domain
    assert get_kind("blocks").key_domains == ("int",)


def test_an_unknown_key_domain_is_a_usage_error_listing_the_domains(capsys):
    assert main(["check", "--keys", "float"]) == 2
    err = capsys.readouterr().err
    assert "--keys" in err and "float" in err and "int, str, bytes, tuple, mixed" in err.replace("'", "")
