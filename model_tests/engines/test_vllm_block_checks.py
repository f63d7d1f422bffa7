"""The program checker against vLLM's REAL classes: the unmodified BlockPool conforms under the
vllm-block-pool profile, each broken subclass (model_tests/vllm_broken_pools.py) is found, the
contract reports vLLM's unchecked double free as a short runnable counterexample, and vLLM's
KVCacheManager is driven at the request level. Skipped without vLLM."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "vllm.v1.core.kv_cache_manager",
    reason="vLLM is not installed: build the engines venv with `bash tools/engines_venv.sh VENV`",
)

from cacheproof.check.programs.command import snippet_of  # noqa: E402
from cacheproof.check.programs.generators import generator_for  # noqa: E402
from cacheproof.check.programs.run import run_program_check  # noqa: E402
from cacheproof.engines.vllm import (  # noqa: E402
    block_pool, block_pool_uncached, kv_cache_manager, kv_cache_manager_full, kv_cache_manager_hybrid, kv_cache_manager_mamba,
    kv_cache_manager_swa, kv_cache_manager_uncached,
)
from cacheproof.engines.vllm_manager import kv_cache_manager_retained  # noqa: E402
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError  # noqa: E402
from cacheproof.spec.kinds import get_kind  # noqa: E402
from model_tests.engine_profiles import check_under_profile  # noqa: E402
from model_tests import vllm_broken_managers, vllm_broken_pools  # noqa: E402

KIND = get_kind("blocks")


def test_unmodified_pool_conforms_under_the_vllm_profile() -> None:
    report = check_under_profile("blocks", "vllm-block-pool", block_pool, examples=60)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()


def test_pool_without_caching_conforms_under_its_profile() -> None:
    report = check_under_profile("blocks", "vllm-block-pool-uncached", block_pool_uncached, examples=60)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert block_pool_uncached(4).pool.enable_caching is False


@pytest.mark.parametrize("name", sorted(vllm_broken_pools.FACTORIES))
def test_each_broken_subclass_is_found(name: str) -> None:
    factory = vllm_broken_pools.FACTORIES[name]
    pool = factory(4)
    assert {type(pool.pool), type(pool.peer)} & set(vllm_broken_pools.BROKEN_POOL_CLASSES)
    found = any(not check_under_profile("blocks", "vllm-block-pool", factory, examples=200, seed=seed).ok for seed in (1, 2))
    assert found, f"{name} was not found in two seeded runs of 200 programs"


def test_silent_eviction_differs_in_the_events_view_alone() -> None:
    """vLLM's pool with its BlockRemoved events dropped keeps a right state: the events view finds it."""
    report = check_under_profile("blocks", "vllm-block-pool", vllm_broken_pools.silent_eviction, examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["events"]


def test_event_tokens_one_late_differ_in_the_events_view_alone() -> None:
    """vLLM's pool naming its blocks' tokens from one token late: the events view finds it."""
    report = check_under_profile("blocks", "vllm-block-pool", vllm_broken_pools.tokens_one_late, examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["events"]


@pytest.mark.parametrize("factory", [vllm_broken_pools.lookahead_one_late, vllm_broken_pools.extra_keys_dropped])
def test_lookahead_and_extra_keys_differ_in_the_events_view_alone(factory) -> None:
    """vLLM's pool naming each block's lookahead tokens one token late, or no extra keys at all:
    what an event says of its blocks' tokens is compared, so the events view alone finds it."""
    report = check_under_profile("blocks", "vllm-block-pool", factory, examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["events"]


def test_the_request_levels_events_carry_the_requests_tokens() -> None:
    """vLLM's manager names the tokens of the blocks it stores, chained after the ones it stored
    before; the pool level's made-up tokens read back as none."""
    m = kv_cache_manager(6)
    m.allocate_slots(1, (0, 1, 2, 0, 1))
    assert m.events() == (((None, (H1, H2), (0, 1, 2, 0)),), (), False)
    m.allocate_slots(1, (0, 1, 2, 0, 1, 5))
    assert m.events() == (((H2, (hash((H2, (1, 5))),), (1, 5)),), (), False)
    pool = block_pool(4)
    pool.cache_blocks(1, pool.allocate(1, 2), (10, 11))
    assert pool.events() == (((None, (10, 11), ()),), (), False)


def test_contract_reports_the_double_free_as_a_short_runnable_counterexample() -> None:
    report = run_program_check(KIND, block_pool, generator_for("blocks"), examples=200, operations=("allocate", "free"), max_divergences=3)
    double_frees = [
        example for example in report.counterexamples
        if example.difference.call.op == "free" and example.difference.expected.error == "WrongStateError"
    ]
    assert double_frees, [example.difference.describe() for example in report.counterexamples]
    example = double_frees[0]
    assert len(example.calls) <= 4
    assert example.difference.actual.error is None  # vLLM frees it again, no error
    snippet = snippet_of(KIND, "cacheproof.engines.vllm:block_pool", example, KIND.profiles["contract"].semantics)
    with pytest.raises(AssertionError):
        exec(compile(snippet, "<counterexample>", "exec"), {"__name__": "counterexample"})


H1 = hash(((0, 1),))
H2 = hash((H1, (2, 0)))


def test_vllm_kv_cache_manager_hand_worked() -> None:
    m = kv_cache_manager(6)
    assert m.allocate_slots(1, (0, 1, 2, 0, 1)) == (1, 2, 3)
    assert m.snapshot() == ((4, 5), ((0, None), (1, H1), (1, H2), (1, None), (0, None), (0, None)), ((1, (1, 2, 3)),))
    assert m.contents() == ((1, None, (0, 1)), (2, H1, (2, 0)), (3, H2, (1,)))
    assert m.find_cached_prefix((0, 1, 2, 0, 9)) == 4 and m.find_cached_prefix((0, 1, 2, 0)) == 2
    assert m.allocate_slots(2, (0, 1, 2, 0, 7)) == (1, 2, 4)
    assert m.allocate_slots(2, (0, 1, 2, 0, 7, 7, 7, 7, 7, 7)) is None  # 2 more blocks, 1 free
    assert m.tables() == ((1, (1, 2, 3)), (2, (1, 2, 4)))
    with pytest.raises(WrongStateError):
        m.allocate_slots(1, (5,))
    m.free_request(1)
    m.free_request(2)
    assert m.snapshot()[0] == (4, 3, 5, 2, 1) and m.tables() == ()  # 3 (partial, unhashed) went to the head


def test_vllm_kv_cache_manager_frees_an_unknown_request_silently() -> None:
    """A contract difference: free of a request vLLM never saw is a no-op there (the scheduler is
    trusted), a WrongStateError in the contract."""
    m = kv_cache_manager(4)
    before = m.snapshot()
    m.free_request(7)
    assert m.snapshot() == before


def test_vllm_kv_cache_manager_conforms_unmodified_under_its_own_profile() -> None:
    """The standard generator, free_request of any request included: vllm-kv-cache-manager makes
    that a no-op (free_unknown_request="noop") and holds the request level only."""
    report = check_under_profile("blocks", "vllm-kv-cache-manager", kv_cache_manager, examples=60)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert report.examples == 60


def test_vllm_kv_cache_manager_in_full_report_mode_conforms_under_its_profile() -> None:
    """Requests in kv_cache_report_mode "full": get_computed_blocks re-announces every hit it finds,
    the connector's lookup included (hit_events="lookup"); unmodified, the manager conforms."""
    report = check_under_profile("blocks", "vllm-kv-cache-manager-full", kv_cache_manager_full, examples=60)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    m = kv_cache_manager_full(6)
    m.allocate_slots(1, (0, 1, 2, 0, 1))
    assert m.find_cached_prefix((0, 1, 2, 0, 9)) == 4
    assert m.events() == (((None, (H1, H2), (0, 1, 2, 0)),), (), False)


def test_vllm_sliding_window_manager_hand_worked() -> None:
    """One sliding-window group of 4 tokens (two blocks of 2): a running request's call frees the
    blocks the window has left (the null block takes their places, before the new block is
    taken), a lookup finds the last two blocks the window reads, and a new request pins only
    those."""
    m = kv_cache_manager_swa(12)
    assert m.allocate_slots(1, tuple(range(8))) == (1, 2, 3, 4)
    assert m.allocate_slots(1, tuple(range(9))) == (0, 0, 3, 4, 5)  # 8 computed: tokens 0-4 left the window
    assert m.num_free() == 8 and m.snapshot()[0][-2:] == (2, 1)  # freed last first, cached: at the tail
    assert m.allocate_slots(1, tuple(range(12))) == (0, 0, 0, 4, 5, 6)
    assert m.find_cached_prefix(tuple(range(12))) == 10 and m.find_cached_prefix(tuple(range(5))) == 4
    assert m.allocate_slots(2, tuple(range(11))) == (0, 0, 0, 4, 5, 7)
    m.free_request(1)
    assert m.tables() == ((2, (0, 0, 0, 4, 5, 7)),) and m.snapshot()[0][-1] == 6


def test_vllm_sliding_window_manager_conforms_under_its_profile() -> None:
    report = check_under_profile("blocks", "vllm-kv-cache-manager-swa", kv_cache_manager_swa, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    full = check_under_profile("blocks", "vllm-kv-cache-manager", kv_cache_manager_swa, examples=100)
    assert not full.ok  # the window is reached: held to full attention, it differs


def test_vllm_mamba_manager_hand_worked() -> None:
    """One Mamba group in align mode, blocks of 2: a request holds its running state's block and
    the one its step starts from; a call ending on a block boundary caches that state and the
    scheduler's drain (take_boundary_state_offloads) offers it; a hit is one block. vLLM takes a
    call that runs a request stopped inside a block past that block's end, and caches the state
    of token 9 as the state at 10: the contract refuses that call (the scheduler never makes it)."""
    m = kv_cache_manager_mamba(8)
    t = tuple(range(100, 120))
    assert m.allocate_slots(1, t[:4]) == (0, 1) and m.boundary_states() == ((1, 1, 4),)
    assert m.allocate_slots(1, t[:6]) == (0, 1, 2) and m.boundary_states() == ((1, 2, 6),)
    assert m.allocate_slots(1, t[:7]) == (0, 0, 2, 3) and m.boundary_states() == ()
    assert m.snapshot()[0] == (4, 5, 6, 7, 1)  # block 1 retired, hashed: at the tail
    assert m.allocate_slots(1, t[:8]) == (0, 0, 0, 3) and m.boundary_states() == ((1, 3, 8),)
    assert m.allocate_slots(1, t[:12]) == (0, 0, 0, 3, 0, 4)
    assert m.find_cached_prefix(t[:12]) == 8
    assert m.allocate_slots(2, t[:9]) == (0, 0, 0, 3, 5)
    assert m.allocate_slots(2, t[:12]) == (0, 0, 0, 0, 5, 6)  # what the contract refuses
    assert m.boundary_states() == ((2, 5, 10), (2, 6, 12))  # block 5 offered as the state at 10
    m.free_request(1)
    assert m.tables() == ((2, (0, 0, 0, 0, 5, 6)),) and m.snapshot()[0] == (7, 1, 2, 3, 4)


def test_vllm_mamba_manager_conforms_under_its_profile() -> None:
    report = check_under_profile("blocks", "vllm-kv-cache-manager-mamba", kv_cache_manager_mamba, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    full = check_under_profile("blocks", "vllm-kv-cache-manager", kv_cache_manager_mamba, examples=100)
    assert not full.ok  # held to full attention, its tables differ



def test_vllm_hybrid_manager_hand_worked() -> None:
    """A full-attention group and a window of 4 on one pool of 16 blocks of 2: a call takes the full
    group's blocks, then the window's; each group stores its own event; the window frees what it
    left; `free_request` frees the full group last first, then the window's; a hit is the window's
    within the full group's."""
    m = kv_cache_manager_hybrid(16)
    assert m.allocate_slots(1, tuple(range(7))) == (1, 2, 3, 4, 5, 6, 7, 8)
    stored = m.events()[0]
    assert [len(hashes) for _, hashes, _ in stored] == [3, 3] and not set(stored[0][1]) & set(stored[1][1])
    assert m.allocate_slots(1, tuple(range(8))) == (1, 2, 3, 4, 0, 0, 7, 8)
    assert m.snapshot()[0] == (9, 10, 11, 12, 13, 14, 15, 6, 5) and m.cached_tokens() == ((1, 8),)
    m.free_request(1)
    assert m.snapshot()[0][-8:] == (6, 5, 4, 3, 2, 1, 8, 7)
    assert m.find_cached_prefix(tuple(range(8))) == 6
    assert m.allocate_slots(2, tuple(range(8))) == (1, 2, 3, 9, 0, 6, 7, 10)
    m.free_request(2)
    m.evict((7,))
    assert m.find_cached_prefix(tuple(range(8))) == 4
    m.evict((2,))
    assert m.find_cached_prefix(tuple(range(8))) == 2


def test_vllm_hybrid_manager_conforms_under_its_profile() -> None:
    report = check_under_profile("blocks", "vllm-kv-cache-manager-hybrid", kv_cache_manager_hybrid, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    one_group = check_under_profile("blocks", "vllm-kv-cache-manager", kv_cache_manager_hybrid, examples=100)
    assert not one_group.ok  # held to one group, its tables differ


@pytest.mark.parametrize("factory", [kv_cache_manager_hybrid, kv_cache_manager_retained], ids=["cut", "retained"])
def test_vllm_retained_first_group_hand_worked(factory) -> None:
    """model_tests/test_block_spec.py's walk on vLLM's manager, without and with `retains_longer_hit`
    on the full group's manager: a load adopts the full group's own longer hit only when it is retained."""
    m = factory(16)
    assert m.allocate_slots(1, tuple(range(7))) == (1, 2, 3, 4, 5, 6, 7, 8)
    m.free_request(1)
    m.evict((7,))
    assert m.find_cached_prefix(tuple(range(8))) == 4
    retained = factory is kv_cache_manager_retained
    assert m.manager.retained_hit_group_ids == ((0,) if retained else ())
    assert m.load_slots(2, tuple(range(8))) == ((1, 2, 3, 8, 0, 0, 4, 9) if retained else (1, 2, 8, 4, 0, 0, 9, 10))
    m.finish_load(2)
    assert m.cached_tokens() == ((2, 8),)


def test_vllm_retained_manager_conforms_under_its_profile() -> None:
    report = check_under_profile("blocks", "vllm-kv-cache-manager-retained", kv_cache_manager_retained, examples=100)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    cut = check_under_profile("blocks", "vllm-kv-cache-manager-hybrid", kv_cache_manager_retained, examples=100)
    assert not cut.ok  # held to the common hit, its loads adopt more


def test_the_long_requests_scope_reaches_the_window(capsys) -> None:
    """`--exhaustive --scope long-requests` extends a request to 9 tokens, so a manager whose window
    never slides is found at the shortest: two calls to run past the window, a third to see it."""
    from cacheproof.cli import main

    assert main(["check", "--spec", "blocks", "--impl", "model_tests.vllm_broken_managers:window_never_slides",
                 "--profile", "vllm-kv-cache-manager-swa", "--exhaustive", "--scope", "long-requests", "--quiet"]) == 1
    assert "shortest counterexample, 3 calls" in capsys.readouterr().out


def test_the_two_groups_scope_reaches_the_window_group(capsys) -> None:
    """`--exhaustive --scope two-groups` gives a pool of 8 blocks, so a request of two groups runs
    past its window (each token block takes a block in both groups, and a window of 4 tokens leaves
    a block behind from 5): a manager whose window group never slides is found at the shortest, two
    calls to run past the window and a third to see it. `long-requests` (5 blocks) cannot reach it."""
    from cacheproof.cli import main

    assert main(["check", "--spec", "blocks", "--impl", "model_tests.vllm_broken_managers:window_group_never_slides",
                 "--profile", "vllm-kv-cache-manager-hybrid", "--exhaustive", "--scope", "two-groups", "--quiet"]) == 1
    assert "shortest counterexample, 3 calls" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(vllm_broken_managers.FACTORIES))
def test_each_broken_manager_is_found(name: str) -> None:
    profile, factory = vllm_broken_managers.FACTORIES[name]
    assert type(factory(4).manager) in vllm_broken_managers.BROKEN_MANAGER_CLASSES
    found = any(not check_under_profile("blocks", profile, factory, examples=200, seed=seed).ok for seed in (1, 2))
    assert found, f"{name} was not found in two seeded runs of 200 programs"


def test_events_naming_no_group_kind_differ_in_the_events_view_alone() -> None:
    """A manager whose stored events leave out the group's kind: the events view finds it."""
    report = check_under_profile("blocks", "vllm-kv-cache-manager", vllm_broken_managers.unannotated_events,
                                 examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["events"]
    m = vllm_broken_managers.unannotated_events(6)
    m.allocate_slots(1, (0, 1, 2))
    assert m.events()[0][0][2] == ((0, 1), (0, None, None))  # the group named without its kind


def test_find_cached_prefix_answers_both_lookups_when_they_differ() -> None:
    """The probe (get_num_cached_tokens) and the lookup must agree: a probe that counts the last
    token answers a pair, which no spec answer equals."""
    m = vllm_broken_managers.probe_counts_last_token(6)
    m.allocate_slots(1, (0, 1, 2, 0, 1))
    assert m.find_cached_prefix((0, 1, 2, 0)) == (4, 2)  # the lookup leaves the last token: 2
    healthy = kv_cache_manager(6)
    healthy.allocate_slots(1, (0, 1, 2, 0, 1))
    assert healthy.find_cached_prefix((0, 1, 2, 0)) == 2


def test_cached_tokens_are_the_managers_estimate_and_a_wrong_one_differs_in_that_view_alone() -> None:
    m = kv_cache_manager(6)
    m.allocate_slots(1, (0, 1, 2, 0, 1))
    assert m.cached_tokens() == ((1, 4),)
    report = check_under_profile("blocks", "vllm-kv-cache-manager", vllm_broken_managers.cached_tokens_of_hit,
                                 examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["cached_tokens"]


def test_prefix_cache_stats_count_each_admitted_request_and_a_wrong_count_differs_in_that_view_alone() -> None:
    """The manager's statistics, taken after each call: an admitted request with its tokens and hit
    tokens, a probe counted nowhere, a reset flagged; a manager that also counts at lookup differs there alone."""
    m = kv_cache_manager(6)
    m.allocate_slots(1, (0, 1, 2, 0, 1))
    assert m.prefix_cache_stats() == (1, 5, 0, False)
    m.find_cached_prefix((0, 1, 2, 0, 1))
    assert m.prefix_cache_stats() == (0, 0, 0, False)
    m.allocate_slots(2, (0, 1, 2, 0, 1))
    assert m.prefix_cache_stats() == (1, 5, 4, False)  # two full blocks of 2 hit; the last token is recomputed
    m.free_request(1)
    m.free_request(2)
    assert m.reset() is True
    assert m.prefix_cache_stats() == (0, 0, 0, True)
    report = check_under_profile("blocks", "vllm-kv-cache-manager", vllm_broken_managers.stats_at_lookup,
                                 examples=200, seed=1)
    assert not report.ok
    assert [view for view, _, _ in report.counterexample.difference.views] == ["prefix_cache_stats"]


def test_a_running_request_handed_no_new_token_is_refused_and_changes_nothing() -> None:
    """vLLM's ValueError for a call with no new tokens is the contract's InvalidArgumentError, with
    nothing changed; a manager that answers the call instead is found."""
    m = kv_cache_manager(6)
    table = m.allocate_slots(1, (0, 1, 2))
    before = (m.snapshot(), m.tables())
    with pytest.raises(InvalidArgumentError):
        m.allocate_slots(1, (0, 1, 2))
    assert (m.snapshot(), m.tables()) == before
    assert m.allocate_slots(1, (0, 1, 2, 0)) == table
    answering = vllm_broken_managers.no_new_tokens_answered(6)
    answering.allocate_slots(1, (0, 1, 2))
    assert answering.allocate_slots(1, (0, 1, 2)) == table  # the contract refuses it


def test_a_loading_request_is_found_by_no_lookup_until_its_load_finishes() -> None:
    """vLLM's manager admits a request whose KV a connector loads with its caching delayed: no hash,
    no event, no hit for another request, and the connector writes the blocks it is handed (the
    unhashed ones); finish_load caches its full blocks as one stored group. A manager that caches at
    once is found."""
    m = kv_cache_manager(8)
    assert m.load_slots(1, (0, 1, 2, 0, 1)) == (1, 2, 3)
    assert m.events() == ((), (), False)
    assert m.contents() == ((1, None, (0, 1)), (2, H1, (2, 0)), (3, H2, (1,)))  # the connector's writes
    assert m.find_cached_prefix((0, 1, 2, 0, 1, 2)) == 0
    m.finish_load(1)
    assert m.events() == (((None, (H1, H2), (0, 1, 2, 0)),), (), False)
    assert m.find_cached_prefix((0, 1, 2, 0, 1, 2)) == 4
    assert m.allocate_slots(1, (0, 1, 2, 0, 1, 2)) == (1, 2, 3)
    assert m.load_slots(2, (1, 1, 1), reserve=3) is None  # 4 blocks free: the 2 it takes would leave 2
    assert m.load_slots(2, (1, 1, 1), reserve=2) == (4, 5)
    eager = vllm_broken_managers.caches_while_loading(8)
    eager.load_slots(1, (0, 1, 2, 0, 1))
    assert eager.find_cached_prefix((0, 1, 2, 0, 1, 2)) == 4  # the contract finds nothing while loading


def test_the_worker_table_grows_by_the_new_blocks_allocate_slots_answers() -> None:
    """A running request's answer is its table extended by the blocks allocate_slots answered, as the
    scheduler hands them to the worker: a manager that records new blocks but answers none is
    seen in the answer, while its own record (the tables view) holds them."""
    m = vllm_broken_managers.new_blocks_unreported(6)
    assert m.allocate_slots(1, (0, 1, 2)) == (1, 2)
    assert m.allocate_slots(1, (0, 1, 2, 0, 1)) == (1, 2)  # the contract answers (1, 2, 3)
    assert m.tables() == ((1, (1, 2, 3)),)
    healthy = kv_cache_manager(6)
    healthy.allocate_slots(1, (0, 1, 2))
    assert healthy.allocate_slots(1, (0, 1, 2, 0, 1)) == (1, 2, 3) and healthy.tables() == ((1, (1, 2, 3)),)


def test_vllm_kv_cache_manager_without_prefix_caching_conforms_under_its_profile() -> None:
    """Built with enable_caching=False the manager hashes nothing and finds nothing
    (prefix_caching="off"); under the caching profile the same manager is flagged."""
    report = check_under_profile("blocks", "vllm-kv-cache-manager-uncached", kv_cache_manager_uncached, examples=60)
    assert report.ok, report.counterexample and report.counterexample.difference.describe()
    assert not check_under_profile("blocks", "vllm-kv-cache-manager", kv_cache_manager_uncached, examples=60).ok
    m = kv_cache_manager_uncached(6)
    assert m.allocate_slots(1, (0, 1, 2, 0, 1)) == (1, 2, 3) and m.find_cached_prefix((0, 1, 2, 0, 9)) == 0
    assert m.manager.enable_caching is False


def test_the_contract_flags_vllms_free_of_an_unknown_request() -> None:
    """Without the profile's field the same calls diverge: the contract wants WrongStateError."""
    semantics = KIND.profiles["vllm-kv-cache-manager"].semantics.with_overrides("free_unknown_request=error")
    report = run_program_check(
        KIND, kv_cache_manager, generator_for("blocks"), examples=60, misuse=False,
        semantics=semantics, operations=("allocate_slots", "free_request"),
    )
    assert not report.ok
    assert report.counterexample.difference.call.op == "free_request"
    assert report.counterexample.difference.expected.error == "WrongStateError"
