"""Search methods: exact equals brute force on small spaces, exact >= every method, determinism,
and the PPO agent learns."""
import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, strategies as st

from generators import synthetic_dense, synthetic_mla, synthetic_moe
from lts.agent import ppo, proposer
from lts.cost.model import evaluate
from lts.specs.workload import Workload
from lts.search.methods import SEARCHERS
from lts.search.problems import Problem
from lts.specs import load_model, load_topology
from lts.specs.strategy import Space, coarse_of, format_strategy, instance_gpus, make_row


def brute_force(problem):
    """Best tokens/s/GPU over every strategy of the (small) space."""
    sp = problem.space
    best = -np.inf
    coarse = list(itertools.product(*[range(len(v)) for v in sp.values]))
    fine = np.array(list(itertools.product(*[range(n) for n in sp.choices])))
    for c in coarse:
        idx = np.concatenate([np.tile(c, (len(fine), 1)), fine], axis=1)
        best = max(best, float(problem.score(problem.evaluate(idx, count=False)).max()))
    return best


CASES = {
    # a MoE with 2 dense layers out of 8: pp=2 puts every dense layer in the first stage
    "moe-decode": (synthetic_moe(), Workload("decode", context=4096, tpot_slo_ms=20),
                   Space(tp=(1, 2, 4), ep=(1, 2), pp=(1, 2), batch=(1, 16, 256),
                         choices=(2, 3, 2, 2, 2, 2, 3, 2, 4, 4, 2, 2), gpus=64)),
    "mla-prefill": (synthetic_mla(), Workload("prefill", context=2048, ttft_slo_ms=500),
                    Space(tp=(1, 4), ep=(1, 4), pp=(1, 2, 3), batch=(1, 8),
                          choices=(2, 2, 2, 3, 3, 2, 2, 2, 4, 4, 2, 2), gpus=64)),
    "dense-decode": (synthetic_dense(), Workload("decode", context=8192, tpot_slo_ms=5),
                     Space(tp=(1, 2, 8), ep=(1,), pp=(1, 2), batch=(4, 64, 1024),
                           choices=(2, 3, 3, 2, 2, 3, 3, 1, 3, 3, 2, 2), gpus=64)),
}


def test_ppo_sweeps_the_baseline_where_the_bound_allows():
    """PPOConfig.baseline_sweep: the baseline's strategy (lts.search passes Megatron's choices) at
    every coarse row whose bound beats the best found, best bound first, before any network:
    where only the baseline's strategy of the lowest-bound row is good, the sweep finds it in
    its first call and the agent is never below the baseline (FRESH2 of scripts/benchmark.py:
    3 of 42 runs were before)."""
    sizes = (4, 1, 1, 1, 3, 3)
    sweep = np.array([[g, 0, 0, 0, 1, 2] for g in range(4)])

    def evaluate(idx):
        good = (idx == sweep[3]).all(axis=1)
        return np.where(good, 5.0, 1.0), np.ones(len(idx), bool)

    bound = np.array([10.0, 10.0, 10.0, 5.0]).reshape(4, 1, 1, 1)
    cfg = ppo.PPOConfig(d_model=16, n_heads=2, d_ff=16, n_steps=8, chunks=2)
    found = {}
    for on in (True, False):
        _, raw, _, _ = ppo.train(evaluate, sizes, 16, np.random.default_rng(0),
                                 replace(cfg, baseline_sweep=on), bound=bound, sweep=sweep,
                                 coarse=4, step_head=3)
        found[on] = raw.max()
        if on:
            assert raw[3] == 5.0            # the sweep's first call, in bound order
    assert found == {True: 5.0, False: 1.0}


def test_ppo_climb_moves_a_group_at_once():
    """At an aimed restart the climb also changes both heads of each of train's ``groups`` (a
    pair) at once: where a strategy pays off only with two heads changed together (each alone
    is worse), the climb finds it in its first sweep; with no groups its single changes cannot."""
    sizes = (2, 1, 1, 1, 3, 3, 3)

    def evaluate(idx):
        both, one = (idx[:, 4] == 2) & (idx[:, 5] == 2), (idx[:, 4] == 2) ^ (idx[:, 5] == 2)
        return np.where(both, 11.0, np.where(one, 0.5, 1.0)) - idx[:, 0], np.ones(len(idx), bool)

    bound = np.array([11.0, 1.0]).reshape(2, 1, 1, 1)
    cfg = ppo.PPOConfig(d_model=16, n_heads=2, d_ff=16, n_steps=32, chunks=2)
    first = {}
    for groups in (((4, 5),), ()):
        rows, raw, _, _ = ppo.train(evaluate, sizes, 64, np.random.default_rng(0), cfg,
                                    seed=np.zeros((1, 7), np.int64), bound=bound, groups=groups,
                                    coarse=4, step_head=3)
        first[groups] = int(np.argmax(raw == 11.0)) if (raw == 11.0).any() else len(raw)
    singles = 1 + 1 + 6             # the seed, the climb's start, its 6 single changes
    assert first[((4, 5),)] < singles + 4 and first[()] >= singles   # (+ the pair's 4 joint)


@pytest.mark.parametrize("case", sorted(CASES))
def test_exact_equals_brute_force(case):
    model, work, space = CASES[case]
    problem = Problem(model, load_topology("h100_dgx"), work, space)
    res = SEARCHERS["exact"](problem, 0, None, top=3)
    want = brute_force(problem)
    assert np.isfinite(want)
    assert res.best_score == pytest.approx(want, rel=1e-12), format_strategy(res.best)
    # the reported strategy really scores that, through the evaluator
    check = evaluate(model, problem.topo, work, res.best[None])
    assert check.valid[0] and check.tokens_per_s_per_gpu[0] == pytest.approx(want, rel=1e-12)
    assert list(res.top_scores) == sorted(res.top_scores, reverse=True)


def test_exact_is_at_least_every_method():
    model, work, space = CASES["moe-decode"]
    problem = Problem(model, load_topology("h100_dgx"), work, space)
    exact = SEARCHERS["exact"](problem, 0, None).best_score
    for name, search in SEARCHERS.items():
        problem.calls = 0
        res = search(problem, 300, np.random.default_rng(1))
        assert res.best_score <= exact * (1 + 1e-12), name
        if name == "ppo" and res.evaluations < 300:
            # the bound-guided agent stops only once no coarse row's bound beats its best
            assert res.best_score >= exact * (1 - 1e-12), name
            assert res.stats["ended"] == "on the proof of optimality"
        elif name not in ("exact", "megatron"):
            assert res.evaluations == 300, name


def test_exact_on_a_paper_model_beats_megatron_and_agrees_with_evaluate():
    from lts.specs import load_model
    problem = Problem(load_model("moe1.6t"), load_topology("h100_dgx"), Workload())
    exact = SEARCHERS["exact"](problem, 0, None)
    megatron = SEARCHERS["megatron"](problem, 0, None)
    assert exact.best_score >= megatron.best_score
    res = evaluate(problem.model, problem.topo, problem.work, exact.top)
    assert np.allclose(res.tokens_per_s_per_gpu, exact.top_scores, rtol=1e-12) and res.valid.all()


@pytest.mark.parametrize("method", ["ppo", "anneal", "random-walk", "random"])
def test_same_seed_same_result(method):
    model, work, space = CASES["moe-decode"]
    problem = Problem(model, load_topology("h100_dgx"), work, space)
    runs = []
    for _ in range(2):
        problem.calls = 0
        runs.append(SEARCHERS[method](problem, 400, np.random.default_rng(7)))
    a, b = runs
    assert np.array_equal(a.top, b.top) and np.array_equal(a.history, b.history)
    # ppo stops early only once no coarse row's bound beats its best (test above)
    assert len(a.history) == 400 or (method == "ppo" and len(a.history) < 400)


def test_ppo_learns_on_a_small_problem():
    """PPO's later samples are better than its first ones, and it beats uniform sampling."""
    model, work, space = CASES["moe-decode"]
    problem = Problem(model, load_topology("h100_dgx"), work, space)
    scores = []

    def evaluate_fn(idx):
        res = problem.evaluate(idx)
        scores.append(np.where(res.valid, res.tokens_per_s_per_gpu, 0.0))
        return res.tokens_per_s_per_gpu, res.valid

    # one network for the whole budget (no restarts, which deliberately explore again): the
    # learning alone must move its samples to better strategies
    ppo.train(evaluate_fn, space.sizes, 1200, np.random.default_rng(0), ppo.PPOConfig(chunks=1))
    s = np.concatenate(scores)
    assert s[-256:].mean() > 1.5 * s[:64].mean()
    uniform = problem.score(problem.evaluate(space.sample(np.random.default_rng(0), 1200)))
    assert s.max() >= uniform.max()


def _restart_kinds(cfg, budget=8 * 64):
    """Restart kinds of ppo.train on a flat landscape: every strategy valid and equally good, so
    the first chunk improves the best (from nothing) and every later chunk stalls."""
    sizes = (3, 2, 4, 3, 3, 2)
    flat = lambda idx: (np.ones(len(idx)), np.ones(len(idx), dtype=bool))    # noqa: E731
    small = dict(d_model=16, n_heads=2, d_ff=16, n_steps=32, chunks=8, confidence=1.01)
    return ppo.train(flat, sizes, budget, np.random.default_rng(0),
                     ppo.PPOConfig(**{**small, **cfg}), coarse=4, step_head=3)[3].kinds


def test_ppo_restart_schedule():
    """After a stall: global restarts alternating with local ones (``alternate``), or global for
    the rest of the budget; the paper's agent restarts fresh."""
    assert _restart_kinds({}) == ["fresh", "local", "global", "local", "global", "local",
                                  "global", "local"]
    assert _restart_kinds({"alternate": False}) == ["fresh", "local"] + ["global"] * 6
    assert _restart_kinds({"global_on_stall": False}) == ["fresh"] + ["local"] * 7
    paper = ppo.PPOConfig.paper()
    assert not paper.alternate and not paper.global_on_stall
    assert _restart_kinds({"elite_prior": 0.0}) == ["fresh"] * 8


def test_ppo_restart_priors():
    """A local restart centres every head on the elite; a global one leaves the degrees uniform
    and keeps ``global_fine`` on the elite's per-op choices."""
    sizes = (4, 3, 5, 6, 3, 4)
    row = np.array([1, 0, 4, 2, 2, 1])
    cfg = ppo.PPOConfig(elite_prior=0.9, coarse_kernel=1.0, global_fine=0.7)
    starts = np.concatenate([[0], np.cumsum(sizes)])

    def probs(kind):
        b = proposer.restart_bias(sizes, row, kind, cfg, coarse=4)
        return [np.exp(b[i:j]) / np.exp(b[i:j]).sum() for i, j in zip(starts[:-1], starts[1:])]

    local, glob = probs("local"), probs("global")
    for h, n in enumerate(sizes):
        if h < 4:
            assert local[h].argmax() == row[h]
            assert np.allclose(local[h], np.exp(-np.abs(np.arange(n) - row[h]))
                               / np.exp(-np.abs(np.arange(n) - row[h])).sum())
            assert np.allclose(glob[h], 1.0 / n)
        else:
            assert np.isclose(local[h][row[h]], 0.9) and np.isclose(glob[h][row[h]], 0.7)
            assert np.allclose(np.delete(glob[h], row[h]), 0.3 / (n - 1))


def test_ppo_global_restart_leaves_the_expert_split_uniform():
    """A global restart makes the switch heads uniform (search_ppo passes a MoE's router, FFN1
    and FFN2 columns) and keeps ``global_fine`` on the other per-op heads; the paper's agent
    does not."""
    from lts.specs.strategy import N_COARSE, OP_COL, n_choices
    cfg = ppo.PPOConfig()
    assert cfg.global_uniform and not ppo.PPOConfig.paper().global_uniform
    switch = tuple(OP_COL[op] for op in ("router", "ffn1", "ffn2"))
    sizes = (4, 3, 5, 1, 1, 1, 6) + n_choices(True)    # tp, ep, pp, cp, dcp, etp, batch, ops
    assert len(sizes) == N_COARSE + len(n_choices(True))
    row = np.array([1, 0, 4, 0, 0, 0, 2] + [1] * len(n_choices(True)))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for c, heads in ((cfg, switch), (ppo.PPOConfig(global_uniform=False), ())):
        b = proposer.restart_bias(sizes, row, "global", c, switch)
        for h, (i, j) in enumerate(zip(starts[:-1], starts[1:])):
            p = np.exp(b[i:j]) / np.exp(b[i:j]).sum()
            if h < N_COARSE or h in heads:
                assert np.allclose(p, 1.0 / sizes[h])
            else:
                assert np.isclose(p[row[h]], cfg.global_fine)


# ----------------------------------------------------------------------------------------------
# the serve phase as a search problem

def test_serve_problem_scores_what_the_serve_phase_computes():
    """ServeProblem.evaluate (tables, index rows) equals serve.serve (direct) on random rows."""
    from lts.serving import serve
    from lts.search.problems import ServeProblem
    from lts.specs import load_model
    m, t = load_model("mixtral-8x7b"), load_topology("h100_dgx")
    p = ServeProblem(m, t, 500, 300, tpot_slo_ms=40.0, gpus=16)
    idx = p.canonical(p.space.sample(np.random.default_rng(3), 200))
    got = p.evaluate(idx)
    want = serve.serve(m, t, p.space.decode(idx), 500, 300, tpot_slo_ms=40.0, gpus=16)
    assert p.calls == 200
    assert np.array_equal(got.valid, want.valid) and got.valid.any() and not got.valid.all()
    np.testing.assert_allclose(got.tokens_per_s_per_gpu, want.output_tokens_per_s_per_gpu,
                               rtol=1e-12)
    np.testing.assert_allclose(got.tpot_s, want.tpot_s, rtol=1e-12)
    np.testing.assert_allclose(got.ttft_s, want.ttft_s, rtol=1e-12)
    np.testing.assert_allclose(got.memory_bytes, want.memory_bytes, rtol=1e-12)
    np.testing.assert_allclose(p.evaluate_rows(p.space.decode(idx)).tokens_per_s_per_gpu,
                               got.tokens_per_s_per_gpu, rtol=1e-12)


def test_serve_search_beats_its_first_samples_and_exact_beats_it():
    from lts.search.problems import ServeProblem
    from lts.specs import load_model
    p = ServeProblem(load_model("llama3.1-8b"), load_topology("h100_dgx"), 1000, 1000, gpus=8)
    sr = SEARCHERS["ppo"](p, 600, np.random.default_rng(0))
    rnd = SEARCHERS["random"](ServeProblem(p.model, p.topo, 1000, 1000, gpus=8), 32,
                              np.random.default_rng(0))
    assert sr.best is not None and sr.best_score > rnd.best_score
    mega = SEARCHERS["megatron"](p, 0, None)
    assert sr.best_score >= 0.9 * mega.best_score
    assert SEARCHERS["exact"](p, 0, None).best_score >= sr.best_score


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_exact_with_max_gpus_equals_exact_on_the_smaller_budget(phase):
    """search_exact(max_gpus=b) on the whole budget's problem (its bounds computed once and
    kept) finds the optimum of the problem whose budget is b."""
    from lts.search.exact import search_exact
    from lts.specs import load_model, load_topology
    model, topo = load_model("mixtral-8x7b"), load_topology("h100_dgx")
    work = dict(phase=phase, context=2048, tpot_slo_ms=40, ttft_slo_ms=1500)
    whole = Problem(model, topo, Workload(**work, gpus=16))
    for b in (16, 4, 2, 1, 8):
        got = search_exact(whole, top=1, max_gpus=b)
        want = search_exact(Problem(model, topo, Workload(**work, gpus=b)), top=1)
        assert got.best_score == pytest.approx(want.best_score, rel=1e-12), b
        assert got.best is None or int(instance_gpus(got.best)) <= b


def test_ppo_seed_points_are_tried_first_within_the_budget():
    """PPOConfig.seed_points: the engines' schemes (strategy.presets) at the coarse rows of best
    bound (search.methods.guide, no evaluator call) are evaluated first, inside the budget."""
    from lts.search.methods import guide, search_ppo, seed_rows
    from lts.specs import load_model
    from lts.specs.strategy import n_choices, presets
    space = Space(tp=(1, 2, 4), ep=(1, 2), pp=(1, 2), batch=(16, 256), choices=n_choices(True),
                  gpus=8)
    problem = Problem(load_model("mixtral-8x7b"), load_topology("h100_dgx"), Workload(gpus=8),
                      space)
    rows = seed_rows(problem, 2)
    ub = guide(problem)
    g = problem.coarse_index(rows)
    assert len(rows) == len(np.unique(g)) * len(presets(True))
    assert ub[g].max() == ub.max() and np.isfinite(ub[g]).all()
    seeded = problem.evaluate(rows, count=False)
    res = search_ppo(problem, 200, np.random.default_rng(0), cfg=ppo.PPOConfig(seed_points=2))
    assert len(rows) <= res.evaluations <= 200
    assert res.best_score >= problem.score(seeded).max()


@pytest.mark.parametrize("case", sorted(CASES))
def test_guide_bounds_are_upper_bounds(case):
    """The agent's guide (exact.guide_bounds) bounds every strategy of each coarse row from above
    (brute force), is -inf only where no strategy of the row is valid, and is tighter than the
    cheap bound it starts from."""
    from lts.search.exact import cheap_bounds, guide_bounds
    model, work, space = CASES[case]
    problem = Problem(model, load_topology("h100_dgx"), work, space)
    ub, cheap = guide_bounds(problem), cheap_bounds(problem)
    fine = np.array(list(itertools.product(*[range(n) for n in space.choices])))
    for g, c in enumerate(np.ndindex(*problem.grid_shape)):
        idx = np.concatenate([np.tile(c, (len(fine), 1)), fine], axis=1)
        best = float(problem.score(problem.evaluate(idx, count=False)).max())
        assert best <= ub[g] * (1 + 1e-12) and ub[g] <= cheap[g], (c, best, ub[g])
    assert np.isfinite(ub).any()


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_cheap_least_counts_a_moes_dense_layers_per_stage(phase):
    """``_Exact.least`` (the cheap bound every exact search and the agent's guide start from) is
    below the least slowest stage (``least_exact``) and counts the last stage's layers as they
    are: its leading dense FFNs (none past the first stage at pp = 2 of 8 layers, 2 at pp = 1)
    at the dense FFN's fastest, the others at the MoE FFN's. It once took the cheaper FFN for
    every layer: DeepSeek-V3's (3 dense of 61) cheap bound fell ~6x below its least step and the
    agent's guide, mostly cheap bounds on a large serve grid, pointed it at nothing."""
    from lts.cost.layouts import SLOT, SLOT_MODES
    from lts.cost.tables import build_tables
    from lts.search.exact import _Exact
    model = synthetic_moe()           # 8 layers, the first 2 dense, the dense FFN 8x wider
    sp = CASES["moe-decode"][2]
    ex = _Exact(model, sp.choices)
    coarse = coarse_of(np.stack([make_row(tp=tp, ep=ep, pp=pp, batch=b) for tp in (1, 2, 4)
                                 for ep in (1, 2) for pp in (1, 2) for b in (1, 16, 256)]))
    tab = build_tables(model, load_topology("h100_dgx"), Workload(phase, context=2048), coarse)
    g = np.arange(len(coarse))
    least, exact = ex.least(tab, g), ex.least_exact(tab, g)
    ok = exact < 1e29
    assert ok.sum() > 10
    assert (least[ok] <= exact[ok] * (1 + 1e-12)).all()
    op = tab.op_total_s

    def fastest(*slots):
        return sum(op[:, SLOT[s], :len(SLOT_MODES[s])].min(axis=1) for s in slots)

    attn = fastest("attn_norm", "qkv", "scores", "context", "out_proj", "ffn_norm")
    moe, dense = fastest("router", "ffn1", "ffn2"), fastest("ffn1_dense", "ffn2_dense")
    d = np.where(coarse[:, 2] == 1, 2.0, 0.0)        # dense layers in the last stage
    lp = 8.0 / coarse[:, 2]
    assert (moe != dense).all()       # (the cheaper of the two for all 8 layers is another sum)
    np.testing.assert_allclose(least, lp * attn + (lp - d) * moe + d * dense, rtol=1e-12)


@pytest.mark.parametrize("name", ["moe1.6t", "llama3.1-8b", "nemotron-3-super-120b-a12b",
                                  "qwen3.5-397b-a17b"])
def test_least_exact_is_the_whole_grids_minimum(name):
    """``_Exact.least_exact(memory=True)``, which ``coarse_bounds`` takes for models without
    dense layers, is bit for bit the minimum over ``block``'s whole grid of the slowest stage
    and of the fullest stage's memory (the heads and tails taken at their least first)."""
    from lts.search.exact import _Exact
    problem = Problem(load_model(name), load_topology("h100_dgx"),
                      Workload("decode", context=4096, gpus=64))
    tab = problem.tables
    g = np.flatnonzero(tab.fixed_invalid == 0)[:96]
    ex = _Exact(problem.model, problem.space.choices)
    lp, A, Aw, G, M = ex.block(tab, g)
    t, m = ex.least_exact(tab, g, memory=True)
    assert np.array_equal(t, (lp[:, None, None] * A.min(-1) + G.min(-1)).min((1, 2)))
    assert np.array_equal(m, (lp[:, None, None] * Aw.min(-1) + M.min(-1)).min((1, 2)))


@pytest.mark.parametrize("name", ["moe1.6t", "llama3.1-8b", "deepseek-v3", "gpt-oss-120b",
                                  "nemotron-3-super-120b-a12b"])
def test_the_exact_searchs_bounds_are_ordered_and_the_layout_paths_exact(name):
    """The three lower bounds on a row's slowest stage are ordered, least <= least_layer <=
    least_exact, on rows of every kind (dense, MoE with dense layers, layers without an FFN);
    and least_exact's attention block by shortest paths over layouts (``_least_attn``) gives
    bit for bit the minimum over ``block``'s whole grid (which enumerates the 81 combinations;
    for a MoE with dense layers least_exact is a bound below it)."""
    from lts.cost.tables import build_tables
    from lts.search.exact import _Exact
    model, topo = load_model(name), load_topology("h100_dgx")
    ex = _Exact(model, Space.for_model(model, 64).choices)
    rng = np.random.default_rng(0)
    coarse = coarse_of(np.stack([make_row(tp=tp, ep=ep, pp=pp, batch=b) for tp, ep, pp, b in zip(
        rng.choice([1, 2, 4, 8], 200), rng.choice([1, 2, 4, 8], 200),
        rng.choice([1, 2, 4], 200), rng.integers(1, 3000, 200))]))
    for work in (Workload("decode", context=4096, gpus=64),
                 Workload("prefill", context=2048, gpus=64)):
        tab = build_tables(model, topo, work, coarse)
        g = np.flatnonzero(tab.fixed_invalid == 0)
        least, layer, exact = ex.least(tab, g), ex.least_layer(tab, g), ex.least_exact(tab, g)
        ok = exact < 1e29
        assert ok.sum() > 20
        assert (least[ok] <= layer[ok] * (1 + 1e-9)).all()    # (least_layer is shaved 1e-12)
        assert (layer[ok] <= exact[ok]).all()
        if not model.no_ffn:
            assert (layer[ok] > least[ok]).any()          # (tighter somewhere: not least again)
        lp, A, _, G, _ = ex.block(tab, g[:40], memory=False)   # the whole grid's minimum
        whole = (lp[:, None, None] * A.min(-1) + G.min(-1)).min((1, 2))
        if model.is_moe and model.dense_ffn_layers:             # (a bound there)
            assert (exact[:40] <= whole * (1 + 1e-12)).all()
        else:
            assert np.array_equal(exact[:40], whole)


@given(st.integers(0, 2**32 - 1), st.sampled_from([(1, 1, 3, 5), (2, 3, 4, 7), (3, 3, 9, 16)]),
       st.sampled_from([0.0, 0.3, 0.7, 1.0, 2.0]))
def test_within_memory_is_the_grids_argmin(seed, shape, fill):
    """``exact.within_memory`` (a row's least time under the memory limit, from each rest list
    sorted by memory) gives the value and the first index of argmin over the whole grid, with
    ties in time and in memory (small integers), invalid times, sums landing on the limit, and
    nothing fitting."""
    from lts.search.exact import INVALID_S, within_memory
    rng = np.random.default_rng(seed)
    n2, n7, na, nf = shape
    lp = float(rng.integers(1, 4))
    A, Aw = rng.integers(0, 5, (n2, n7, na)) * 0.5, rng.integers(0, 4, (n2, n7, na)) * 1.0
    G, M = rng.integers(0, 6, (n2, n7, nf)) * 0.25, rng.integers(0, 8, (n2, n7, nf)) * 1.0
    G[rng.random(G.shape) < 0.1] = INVALID_S
    usable = fill * (lp * Aw.max() + M.max())
    T = lp * A[..., :, None] + G[..., None, :]
    W = lp * Aw[..., :, None] + M[..., None, :]
    T = np.where((W <= usable) & (T < INVALID_S), T, np.inf).ravel()
    assert within_memory(lp, A, Aw, G, M, usable) == (T[T.argmin()], T.argmin())


def test_within_memory_with_many_memories_inside_one_rounding_step():
    """Sums lp * Aw + M of 80 GB round in steps of ~1.5e-5 B: 64 rest-list memories 2e-6 B
    apart fall in a few steps, the limit on one of them (a fix-up by runs once raised here)."""
    from lts.search.exact import within_memory
    A, Aw = np.zeros((1, 1, 1)), np.full((1, 1, 1), 7.9e10)
    M = (9e8 + np.arange(64) * 2e-6).reshape(1, 1, -1)
    G = np.linspace(10, 1, 64).reshape(1, 1, -1)
    sums = np.unique(Aw[..., :, None] + M[..., None, :])
    for usable in sums[:6]:
        W = Aw[..., :, None] + M[..., None, :]
        T = np.where(W <= usable, A[..., :, None] + G[..., None, :], np.inf).ravel()
        assert within_memory(1.0, A, Aw, G, M, usable) == (T[T.argmin()], T.argmin())


@pytest.mark.parametrize("name,phase", [("moe1.6t", "decode"), ("deepseek-v3", "prefill"),
                                        ("llama3.1-70b", "decode")])
def test_rows_in_bound_order_lazily_are_the_sorted_bounds(name, phase):
    """``exact._in_bound_order`` (rows tightened lazily from the cheap bounds' order) gives the
    same rows, bounds and order, ties included, as sorting every row's ``coarse_bounds``."""
    from lts.search.exact import _in_bound_order, coarse_bounds
    model = load_model(name)
    p = Problem(model, load_topology("h100_dgx"), Workload(phase, context=4096, gpus=512))
    cand = np.flatnonzero(p.tables.fixed_invalid == 0)
    got = list(_in_bound_order(p, cand))
    p2 = Problem(model, load_topology("h100_dgx"), Workload(phase, context=4096, gpus=512))
    ub = coarse_bounds(p2)                               # every row at once, fresh tables
    order = np.argsort(-ub, kind="stable")
    order = order[np.isfinite(ub[order])]
    assert len(got) == len(order) > 100
    assert [r for r, _ in got] == list(cand[order])
    assert np.array_equal([b for _, b in got], ub[order])
