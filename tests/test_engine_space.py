"""Searching what an engine runs (issue 20): the engine's space against brute force, every
encoding of one deployment at one cost, the headroom, the objective per GPU of the budget, and
attention-DP ranks with their own token budgets."""
import functools
import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from generators import synthetic_dense, synthetic_moe
from lts.launch import emit
from lts.cli import cli
from lts.cost.model import evaluate
from lts.engines import ENGINES, REAL_ENGINES
from lts.engines.space import project, runnable, runnable_on, variants
from lts.search.exact_engine import search_engine_exact
from lts.search.problems import Problem, ServeProblem
from lts.search.methods import SEARCHERS
from lts.serving.serve import serve
from lts.specs import load_model, load_topology
from lts.specs.strategy import (BATCH, DP_ATTENTION, EXPERT_CHOICES, MEGATRON, N_COARSE, OP_COL,
                                Space, coarse_of, instance_gpus, make_row, n_choices,
                                parse_strategy)
from lts.specs.workload import Workload, compose_step

TOPO = load_topology("h100_dgx")


@functools.lru_cache(maxsize=2)
def every_choice(moe: bool):
    """Every per-op choice vector of a MoE or dense model, [K, 12] (itertools.product's order:
    the last op fastest)."""
    sizes = n_choices(moe)
    return np.indices(sizes).reshape(len(sizes), -1).T


def brute_force(model, work, space, engine):
    """The best tokens/s per GPU of the budget over every strategy of the space that the engine
    runs as written (``runnable`` on every per-op vector, costed by the plain evaluator)."""
    fine = every_choice(model.is_moe)
    budget = work.budget(TOPO)
    best, best_row = -np.inf, None
    every = np.empty((len(fine), N_COARSE + fine.shape[1]), dtype=np.int64)
    every[:, N_COARSE:] = fine
    for coarse in space.full_grid():
        every[:, :N_COARSE] = coarse
        rows = every[runnable(engine, model, every)]
        if not len(rows):
            continue
        res = evaluate(model, TOPO, work, rows)
        fill = np.floor(budget / res.gpus) * res.gpus / budget
        score = np.where(res.valid, res.tokens_per_s_per_gpu * fill, -np.inf)
        if score.max() > best:
            best, best_row = float(score.max()), rows[int(np.argmax(score))]
    return best, best_row


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("case", ["moe-decode", "moe-prefill", "dense-decode"])
def test_engine_exact_is_brute_force(engine, case):
    model = synthetic_dense() if case.startswith("dense") else synthetic_moe()
    work = (Workload("prefill", 2048, ttft_slo_ms=400, gpus=6) if "prefill" in case else
            Workload("decode", 4096, tpot_slo_ms=30, gpus=6))
    # every per-op vector (944k for the MoE) at each coarse row: few coarse rows for the MoE
    space = (Space(tp=(1, 2), ep=(1, 2), pp=(1,), batch=(64,), choices=n_choices(True), gpus=6)
             if model.is_moe else
             Space(tp=(1, 2), ep=(1,), pp=(1, 2), batch=(8, 64), choices=n_choices(False), gpus=6))
    p = Problem(model, TOPO, work, space, engine_space=engine)
    sr = search_engine_exact(p, top=3)
    want, row = brute_force(model, work, space, engine)
    assert sr.best_score == pytest.approx(want, rel=1e-12), (sr.best, row)
    assert runnable(engine, model, sr.top).all()
    # every method ranks only what the engine runs
    for method in ("random", "anneal", "megatron"):
        other = SEARCHERS[method](p, 300, np.random.default_rng(0), top=5)
        if other.best is not None:
            assert runnable(engine, model, other.top).all()
            assert other.best_score <= sr.best_score * (1 + 1e-12)


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_engine_serve_exact_is_brute_force_over_every_integer_concurrency(engine):
    """Serve: every runnable (tp, ep, pp, variant) at every integer concurrency up to what its
    KV cache and the engine hold, brute force, against the engine's exact."""
    model, topo = load_model("mixtral-8x7b"), TOPO
    space = Space(tp=(1, 2, 4), ep=(1, 2), pp=(1,), batch=(1, 2, 4, 8, 0),
                  choices=n_choices(True), gpus=8)
    p = ServeProblem(model, topo, 1500, 300, tpot_slo_ms=30, ttft_slo_ms=1500, gpus=8,
                     space=space, engine=ENGINES[engine].profile, engine_space=engine)
    sr = search_engine_exact(p, top=3)
    best = -np.inf
    for tp, ep in itertools.product(space.tp, space.ep):
        for v in variants(model):       # DP attention: each rank schedules its own requests
            row = make_row(v, tp=tp, ep=ep, batch=1)
            if not runnable(engine, model, row[None])[0]:
                continue
            kw = dict(tpot_slo_ms=30, ttft_slo_ms=1500, gpus=8, engine=ENGINES[engine].profile,
                      attention_dp=True)
            cap = ENGINES[engine].profile.holds(serve(model, topo, row[None], 1500, 300,
                                               **kw).kv_capacity)[0]
            cs = np.arange(1, int(cap) + 1)
            rows = np.repeat(row[None], len(cs), axis=0)
            rows[:, BATCH] = cs
            r = serve(model, topo, rows, 1500, 300, **kw)
            fill = np.floor(8 / r.gpus) * r.gpus / 8
            best = max(best, float(np.where(r.valid, r.output_tokens_per_s_per_gpu * fill,
                                            -np.inf).max(initial=-np.inf)))
    assert np.isfinite(best)
    assert sr.best_score == pytest.approx(best, rel=1e-9)


def test_runnable_agrees_with_the_launcher():
    """A row is runnable exactly when ``emit.check`` finds no reason against it."""
    rng = np.random.default_rng(0)
    for model in (synthetic_moe(), synthetic_dense()):
        sp = Space.for_model(model, 64)
        idx = sp.sample(rng, 400)
        rows = sp.decode(idx)
        rows[::3, N_COARSE:] = MEGATRON
        if model.is_moe:
            rows[1::3, N_COARSE:] = EXPERT_CHOICES
        for engine in REAL_ENGINES:
            ok = runnable(engine, model, rows)
            assert ok.any()
            for row, r in zip(rows, ok):
                assert r == (not emit.check(engine, model, row)), (engine, row)


def test_project_lands_on_the_engine_variant():
    model = synthetic_moe()
    rows = np.stack([parse_strategy("tp=2,ffn1=experts,ffn2=1"), parse_strategy("tp=2,qkv=0"),
                     parse_strategy("tp=1,ep=2,embedding=none")])
    out = project("vllm", model, rows.copy())
    assert tuple(out[0, N_COARSE:]) == EXPERT_CHOICES
    assert tuple(out[1, N_COARSE:]) == MEGATRON
    assert tuple(out[2, :N_COARSE]) == tuple(coarse_of(make_row(tp=1, ep=2)))
    assert (project("generic", model, rows.copy()) == rows).all()


def test_every_encoding_of_one_deployment_costs_the_same():
    """Rows that an engine launches with the same command are one deployment: they cost the
    same (tp = 1 with any per-op choices; a dense model's router; one FFN on 'experts')."""
    model, work = synthetic_moe(), Workload("decode", 4096, tpot_slo_ms=1e9, gpus=16)
    dense = synthetic_dense()
    rng = np.random.default_rng(1)
    for m in (model, dense):
        sp = Space.for_model(m, 16)
        rows = sp.decode(sp.sample(rng, 3000))
        rows = rows[instance_gpus(rows) <= 16]
        if m.is_moe:                                    # some of each variant
            rows[::4, N_COARSE:], rows[1::4, N_COARSE:] = DP_ATTENTION, MEGATRON
        for engine in REAL_ENGINES:
            groups = {}
            ok = runnable(engine, m, rows)
            for row in rows[ok]:
                cmds, _ = emit.commands(engine, m, TOPO, work, row, "synthetic.toml")
                # the batch is the load, not the deployment (--max-num-seqs rounds it per rank)
                groups.setdefault((repr(cmds), int(row[BATCH])), []).append(row)
            assert any(len(g) > 1 for g in groups.values())
            for g in groups.values():
                res = evaluate(m, TOPO, work, np.array(g))
                assert np.allclose(res.tokens_per_s_per_gpu, res.tokens_per_s_per_gpu[0],
                                   rtol=1e-12), (engine, g[0])
    # a lone ffn1=experts is the expert split of both (Problem.canonical)
    p = Problem(model, TOPO, work, engine_space="vllm", tables=False)
    a = p.evaluate_rows(p.canonical(parse_strategy("tp=2,ffn1=experts")[None]))
    b = p.evaluate_rows(parse_strategy("tp=2,ffn1=experts,ffn2=experts")[None])
    assert a.tokens_per_s_per_gpu[0] == b.tokens_per_s_per_gpu[0]


def test_attention_dp_ranks_schedule_their_own_steps():
    """compose_step over dp ranks with a budget each = dp copies of one rank's step; with the
    budget shared (SGLang) = dp copies of a rank with budget / dp."""
    work = Workload("mixed", 1000, isl=3000, osl=200, step_tokens=8192, cohort_base=3.0,
                    cohort_share=0.05)
    n = np.array([8.0, 64.0, 640.0])
    for dp in (1, 2, 8):
        whole, one = compose_step(n, work, dp), compose_step(n / dp, work, 1)
        assert np.allclose(whole.cohort, dp * one.cohort)
        assert np.allclose(whole.chunk, dp * one.chunk)
        assert np.allclose(whole.decoders, dp * one.decoders)
        assert np.allclose(whole.steps, one.steps)
        from dataclasses import replace
        shared = compose_step(n, replace(work, budget_per_rank=False), dp)
        alone = compose_step(n / dp, replace(work, step_tokens=8192 // dp), 1)
        assert np.allclose(shared.chunk, dp * alone.chunk)


def test_fill_counts_the_gpus_copies_leave_idle():
    p = Problem(synthetic_dense(), TOPO, Workload("decode", 1024, gpus=24), tables=False)
    assert np.allclose(p.fill(np.array([8, 16, 5, 24, 32])), [1.0, 16 / 24, 20 / 24, 1.0, 0.0])
    pool = Problem(synthetic_dense(), TOPO, Workload("decode", 1024, gpus=24), tables=False,
                   whole_budget=False)
    assert np.allclose(pool.fill(np.array([8, 16, 5])), 1.0)


def test_idle_gpus_change_the_ranking():
    """Mixtral-8x22B fp8 on 48 H100 (decode, 4k, TPOT <= 15 ms): the ranking is by tokens/s per
    GPU of the budget, so an instance size that divides 48 beats one that leaves GPUs idle even
    when the latter is faster per GPU it uses (issue 20)."""
    m = load_model("mixtral-8x22b", "fp8")
    p = Problem(m, TOPO, Workload("decode", 4096, tpot_slo_ms=15, gpus=48))
    sr = SEARCHERS["exact"](p, top=10)
    res = sr.evaluated
    cluster = p.per_cluster_gpu(res)
    assert (np.diff(sr.top_scores) <= 1e-9).all()
    assert np.allclose(cluster, sr.top_scores)
    assert 48 % int(res.gpus[0]) == 0
    used = res.tokens_per_s_per_gpu
    assert (used > used[0]).any() or (cluster[0] == used[0])


def test_search_json_reports_runnable_on_replicas_and_headroom():
    r = CliRunner().invoke(cli, ["search", "mixtral-8x7b", "h100_dgx", "--gpus", "12",
                                 "--engine", "vllm", "--json", "--top", "3"])
    assert r.exit_code == 0, r.output
    import json
    d = json.loads(r.output)
    assert d["engine_space"] == "vllm"
    for row in [d["best"], *d["top"]]:
        assert "vllm" in row["runnable_on"]
        assert row["replicas"] == 12 // row["gpus"]
        assert row["tokens_per_s_per_cluster_gpu"] == pytest.approx(
            row["tokens_per_s_per_gpu"] * row["replicas"] * row["gpus"] / 12)
    if "headroom" in d:
        assert d["headroom"] > 1.0
        assert d["best_any_sharding"]["tokens_per_s_per_cluster_gpu"] == pytest.approx(
            d["headroom"] * d["best"]["tokens_per_s_per_cluster_gpu"])
    g = json.loads(CliRunner().invoke(cli, ["search", "mixtral-8x7b", "h100_dgx", "--gpus",
                                            "12", "--json"]).output)
    assert g["engine_space"] == "generic" and "headroom" not in g
    assert g["best"]["tokens_per_s_per_cluster_gpu"] >= d["best"]["tokens_per_s_per_cluster_gpu"]


def test_runnable_on_names_the_engines():
    m = synthetic_moe()
    rows = np.stack([make_row(tp=2, ep=2, batch=8), parse_strategy("tp=2,ep=2,ffn1=experts,"
                                                              "ffn2=experts"),
                     parse_strategy("tp=2,embedding=none"), make_row(ep=4, batch=8)])
    on = runnable_on(m, rows)
    assert on[0] == ("sglang",)
    assert on[1] == ("vllm", "sglang")
    assert on[2] == ()
    assert on[3] == ("vllm", "sglang", "trtllm")
    assert OP_COL["ffn1"] == N_COARSE + 8


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_serve_emit_runs_for_every_engine(engine):
    """--phase serve --emit ENGINE: the one-pool and the two-pool commands (the pools are
    problems of their own phase, with the engine's memory rule)."""
    import json
    r = CliRunner().invoke(cli, ["search", "llama3.1-8b", "h100_dgx", "--gpus", "8", "--phase",
                                 "serve", "--isl", "2000", "--osl", "200", "--emit", engine,
                                 "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    d = json.loads(r.output)
    assert d["emit"]["commands"] and d["engine_space"] == engine
    assert d["emit_disagg"]["commands"]


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_serve_guide_bounds_hold_in_the_engines_space(engine):
    """The agent's bounds come from the whole space's solver (one scheduler per ep group); in
    an engine's space the data-parallel-attention layout is scheduled per rank. Every strategy
    the engine runs on the concurrency grid stays within its row's bound."""
    from lts.search.exact_engine import engine_rows
    from lts.search.methods import guide
    p = ServeProblem(load_model("mixtral-8x7b"), TOPO, 2000, 500, tpot_slo_ms=40,
                     ttft_slo_ms=3000, gpus=16, engine=ENGINES[engine].profile, engine_space=engine)
    bound = guide(p)
    idx = engine_rows(p)
    score = p.score(p.evaluate(idx, count=False))
    g = p.coarse_index(idx)
    ok = np.isfinite(score)
    assert ok.sum() > 10
    assert (score[ok] <= bound[g[ok]] * (1 + 1e-9)).all()


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("phase", ["decode", "serve"])
def test_the_agent_reaches_the_engines_optimum(engine, phase):
    """ppo (4000 calls) in an engine's space: at the engine's exact optimum (serve: both moved
    to their best integer concurrency), never below Megatron's best there."""
    from lts.search.methods import every_concurrency
    m = load_model("mixtral-8x7b")
    if phase == "serve":
        p = ServeProblem(m, TOPO, 1000, 300, tpot_slo_ms=30, gpus=16,
                         engine=ENGINES[engine].profile, engine_space=engine)
    else:
        p = Problem(m, TOPO, Workload("decode", 4096, tpot_slo_ms=25, gpus=16),
                    engine_space=engine)
    exact = SEARCHERS["exact"](p, top=1)
    agent = every_concurrency(p, SEARCHERS["ppo"](p, 4000, np.random.default_rng(0), top=10))
    mega = every_concurrency(p, SEARCHERS["megatron"](p, 4000, None, top=1))
    assert runnable(engine, m, agent.top).all()
    assert agent.best_score >= 0.99 * exact.best_score
    assert agent.best_score >= mega.best_score * (1 - 1e-9)
