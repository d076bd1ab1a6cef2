"""Two pools as engines run them (issue 21): each pool's strategies obey the engine's memory rule
(``EngineProfile.kv_pool_bytes``), checked here independently of the rule tables the solvers
use, the pool optimum stays exact under it, and sizing for a request rate answers for two pools
as well as for one."""
from dataclasses import replace

import numpy as np
import pytest

from lts.search import disagg
from lts.cost.model import evaluate
from lts.engines import ENGINES, GENERIC, REAL_ENGINES
from lts.search.exact import search_exact
from lts.cost import kv
from lts.cost.tables import REASON_BIT
from lts.search.problems import Problem, ServeProblem
from lts.search.methods import size_disagg
from lts.specs import load_model, load_topology
from lts.specs.strategy import BATCH, N_COARSE, OP_COL, PP, TP, Space, make_row
from lts.specs.workload import Workload

GIB = 2**30


def kv_bytes(model, row, context) -> float:
    """KV cache per GPU of a Megatron row of a dense model with kv_heads divisible by tp: the
    batch's requests of ``context`` tokens, split over tp and pp."""
    assert model.attention.kv_heads % row[TP] == 0
    return kv.request_bytes(model, context) * row[BATCH] / (row[TP] * row[PP])


def fits(engine, topo, memory, kv, parallel) -> bool:
    """The engine's rule as its engine module states it: the KV cache within the pool the engine
    leaves once the fixed bytes (weights, workspace) are held."""
    return kv <= engine.kv_pool_bytes(topo, memory - kv, parallel) * (1 + 1e-12)


def serve_problem(engine, model="llama3.1-70b", topo="h100_dgx", gpus=8, isl=7500, osl=500,
                  tpot=100, ttft=4000, space=None):
    return ServeProblem(load_model(model), load_topology(topo), isl, osl, tpot_slo_ms=tpot,
                        ttft_slo_ms=ttft, gpus=gpus, engine=ENGINES[engine].profile,
                        engine_space=engine if space is None else space)


@pytest.mark.parametrize("engine", REAL_ENGINES)
def test_every_pool_strategy_fits_its_engines_memory_rule(engine):
    """(a) Every prefill and decode pool strategy returned, and the deployment chosen, fits the
    engine's rule, recomputed from the engine's profile with the KV cache computed from the model; and the
    rule bites: a plain pool (the topology's own rule) returns one that breaks it."""
    p = serve_problem(engine)
    topo = p.engine.topology(p.topo)
    prefills, decodes, _ = disagg.pool_candidates(p)
    assert prefills and decodes
    best, front = disagg.disaggregate(p)
    chosen = [d.prefill for d in [best, *front]] + [d.decode for d in [best, *front]]
    for res, context in [(r, p.isl) for r in prefills] + [(r, p.isl + p.osl) for r in decodes] \
            + [(r, None) for r in chosen]:
        row = res.strategies[0]
        ctx = context or (p.isl if np.isnan(res.tpot_s[0]) else p.isl + p.osl)
        assert res.valid[0]
        assert fits(p.engine, topo, res.memory_bytes[0], kv_bytes(p.model, row, ctx),
                    row[TP] * row[PP]), (engine, row[:N_COARSE], res.memory_bytes[0] / GIB)
    broken = 0
    for pool, context in ((disagg.prefill_pool(p), p.isl), (disagg.decode_pool(p), p.isl + p.osl)):
        plain = Problem(pool.model, pool.engine_topo, pool.work, tables=pool.figures,
                        engine_space=engine, whole_budget=False)
        for res in disagg.pools(plain):
            row = res.strategies[0]
            broken += not fits(p.engine, topo, res.memory_bytes[0],
                               kv_bytes(p.model, row, context), row[TP] * row[PP])
    assert broken


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("phase", ("prefill", "decode"))
def test_each_strategy_is_valid_exactly_where_the_rule_holds(engine, phase):
    """Megatron rows at every batch 1..192 (memory per GPU in fine steps): the pool's evaluator
    finds a row valid exactly where the rule holds and nothing else fails; rows fall between
    the rule and the topology's limit, and for SGLang between its tp * pp = 1 limit and a larger
    tp * pp's (the per-row margin)."""
    p = serve_problem(engine)
    pool = disagg.prefill_pool(p) if phase == "prefill" else disagg.decode_pool(p)
    topo, context = pool.engine_topo, pool.work.context
    rows = np.stack([make_row(tp=t, pp=q, batch=b) for t in (1, 2, 4, 8) for q in (1, 2)
                     if t * q <= 8 for b in range(1, 193)])
    mine = pool.evaluate_rows(rows)
    res = evaluate(p.model, topo, pool.work, rows)
    kv = np.array([kv_bytes(p.model, r, context) for r in rows])
    rule = np.array([fits(p.engine, topo, m, k, r[TP] * r[PP])
                     for m, k, r in zip(res.memory_bytes, kv, rows)])
    ok = (res.reasons & ~REASON_BIT["memory"]) == 0
    assert np.array_equal(mine.valid, ok & rule)
    assert np.array_equal(mine.memory_bytes, res.memory_bytes)
    free = (res.reasons & ~(REASON_BIT["memory"] | REASON_BIT["slo"])) == 0    # any SLO
    plain = free & (res.memory_bytes <= topo.hbm_bytes - topo.hbm_reserve_bytes)
    assert (plain & ~rule).any() and (free & rule).any()
    if engine == "sglang":
        parallel = rows[:, TP] * rows[:, PP]
        assert (free & ~rule & (parallel > 1)
                & (res.memory_bytes <= p.engine.kv_pool_bytes(topo, 0.0, 1))).any()


def test_the_generic_engine_keeps_its_pools():
    """The generic engine's rule is the topology's own: its pools stay plain problems."""
    p = serve_problem("generic", space="generic")
    assert type(disagg.prefill_pool(p)) is Problem and type(disagg.decode_pool(p)) is Problem
    assert p.engine is ENGINES[GENERIC].profile


def _all_rows(space: Space) -> np.ndarray:
    """Every strategy of a small space, values [N, WIDTH]."""
    axes = [np.asarray(v) for v in space.values] \
        + [np.arange(n) for n in space.choices]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(axes))


@pytest.mark.parametrize("engine", REAL_ENGINES)
@pytest.mark.parametrize("phase", ("prefill", "decode"))
def test_the_pool_optimum_is_exact_under_the_rule(engine, phase):
    """(b) Over a tiny per-op space (the generic space, solved by ``exact.search_exact`` on the
    rule's tables): every strategy costed on its own, its KV cache found independently (the
    same strategy with a KV cache twice as wide, less its memory), the engine's rule applied;
    none that meets the rule beats the pool's optimum, and the optimum meets it."""
    p = serve_problem(engine, space="generic")
    topo = replace(p.engine.topology(p.topo), step_overhead_s=p.engine.topology(p.topo)
                   .step_overhead_s + p.engine.step_overhead_s)
    work = Workload(phase, p.isl if phase == "prefill" else p.isl + p.osl, tpot_slo_ms=100,
                    ttft_slo_ms=60000 if phase == "prefill" else 0.0, gpus=4)
    full = Space.for_model(p.model, 4)
    space = replace(full, tp=(1, 2, 4), pp=(1, 2, 4), batch=(1, 2, 8, 32, 64, 128),
                    choices=tuple(min(n, 2) for n in full.choices))
    pool = disagg.EnginePool(p.model, topo, work, p.engine, space=space)
    got = search_exact(pool, top=1)
    rows = _all_rows(space)
    rows = rows[rows[:, TP] * rows[:, PP] <= 4]
    res = evaluate(p.model, topo, work, rows)
    wide = replace(p.model, precision=replace(p.model.precision, kv_cache="fp32"))
    assert p.model.precision.kv_cache == "bf16"
    kv = evaluate(wide, topo, work, rows).memory_bytes - res.memory_bytes
    ok = (res.reasons & ~REASON_BIT["memory"]) == 0
    rule = np.array([fits(p.engine, topo, m, k, t * q) for m, k, t, q in
                     zip(res.memory_bytes, kv, rows[:, TP], rows[:, PP])])
    score = np.where(ok & rule, res.tokens_per_s_per_gpu, -np.inf)
    assert np.isfinite(score.max())
    assert got.best_score == pytest.approx(score.max(), rel=1e-9)
    # strategy by strategy, the pool's evaluator (on the rule's tables) agrees with the rule
    mine = pool.evaluate(space.encode(rows), count=False)
    assert np.array_equal(mine.valid, ok & rule)
    assert np.allclose(mine.memory_bytes, res.memory_bytes, rtol=1e-12)
    # the rule bites: strategies within the topology's own limit break it; for decode the best
    # without it is out of reach
    plain = ok & (res.memory_bytes <= pool.engine_topo.hbm_bytes
                  - pool.engine_topo.hbm_reserve_bytes)
    assert (plain & ~rule).any()
    if phase == "decode":
        assert np.where(plain, res.tokens_per_s_per_gpu, -np.inf).max() > score.max() * 1.01
    best = got.evaluated
    router = np.arange(rows.shape[1]) != OP_COL["router"]     # dense: stands for Megatron's
    i = int(np.flatnonzero((rows[:, router] == best.strategies[0][router]).all(1))[0])
    assert rule[i] and best.memory_bytes[0] == pytest.approx(res.memory_bytes[i])


def test_the_issues_prefill_pool_fits_vllm():
    """(c) Llama-3.1-70B bf16 on H200, vLLM: tp 1 needs 132.8 GiB per GPU for one prompt of
    2000 tokens, above 0.9 x 140.4 GiB less the 3.9 GiB reserve; no such pool is returned."""
    p = serve_problem("vllm", topo="h200_dgx", isl=2000, osl=500, tpot=25, ttft=1000)
    topo = p.engine.topology(p.topo)
    limit = 0.9 * topo.hbm_bytes - topo.hbm_reserve_bytes
    one = make_row()
    pool = disagg.prefill_pool(p)
    alone = pool.evaluate_rows(one[None])
    assert alone.memory_bytes[0] / GIB == pytest.approx(132.8, abs=0.05)
    assert alone.memory_bytes[0] > limit and alone.reason_list(0) == ["memory"]
    prefills, decodes, _ = disagg.pool_candidates(p)
    assert prefills and decodes
    for res in prefills:
        row = res.strategies[0]
        assert res.memory_bytes[0] <= limit and not (row[TP] == 1 and row[PP] == 1)
        assert fits(p.engine, topo, res.memory_bytes[0], kv_bytes(p.model, row, p.isl),
                    row[TP] * row[PP])
    best, _ = disagg.disaggregate(p)
    assert best.prefill.memory_bytes[0] <= limit


@pytest.mark.parametrize("rate", (0.5, 5.0, 23.0))
def test_two_pool_sizing_is_the_fewest_gpus(rate):
    """(d) The two-pool sizing serves the rate within the SLOs, and no pair of the pools'
    strategies at any instance counts does so on fewer GPUs (brute force)."""
    p = serve_problem("vllm", topo="h200_dgx", isl=2000, osl=500, tpot=25, ttft=1000)
    sz = size_disagg(p, rate)
    dg = sz.deployment
    assert dg.requests_per_s >= rate and dg.ttft_s <= 1.0 and dg.tpot_s <= 0.025
    assert dg.gpus == dg.prefill_instances * int(dg.prefill.gpus[0]) \
        + dg.decode_instances * int(dg.decode.gpus[0])
    assert sz.fits == (dg.gpus <= 8)
    prefills, decodes, _ = disagg.pool_candidates(p)
    for pre in prefills:
        for dec in decodes:
            r_p = pre.strategies[0][BATCH] / pre.ttft_s[0]
            r_d = dec.strategies[0][BATCH] / (p.osl * dec.tpot_s[0])
            for x in range(1, 40):
                for y in range(1, 40):
                    d = disagg.deployment(p, pre, dec, x, y)
                    if min(x * r_p, y * r_d) >= rate and d.ttft_s <= 1.0:
                        assert d.gpus >= dg.gpus


def test_the_cli_sizes_one_pool_and_two():
    """``--request-rate``: the text has a Sizing line for each, the JSON ``sizing_disagg``
    beside ``sizing``."""
    import json
    from click.testing import CliRunner
    from lts.cli import cli
    args = ["search", "llama3.1-70b", "h200_dgx", "--gpus", "8", "--phase", "serve", "--isl",
            "2000", "--osl", "500", "--ttft-slo-ms", "1000", "--tpot-slo-ms", "25", "--engine",
            "vllm", "--request-rate", "5"]
    r = CliRunner().invoke(cli, args + ["--no-color"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "Sizing 5 requests/s" in r.output and "Sizing (two pools) 5 requests/s" in r.output
    r = CliRunner().invoke(cli, args + ["--json"])
    d = json.loads(r.output)
    two = d["sizing_disagg"]
    assert d["sizing"] is not None and two["request_rate"] == 5
    assert two["gpus"] == two["prefill_instances"] * two["deployment"]["prefill"]["gpus"] \
        + two["decode_instances"] * two["deployment"]["decode"]["gpus"]
    assert two["deployment"]["requests_per_s"] >= 5
    assert two["deployment"]["prefill"]["memory_gib_per_gpu"] <= 0.9 * 140.4 - 3.9


@pytest.mark.parametrize("ttft", (4000, 400))
def test_loop_concurrency_figures_are_the_loops_at_its_concurrency(ttft):
    """``disagg.loop_concurrency`` keeps the first call's figures for the deployments whose
    concurrency stays at what their decode pool holds and costs the others again: the same
    figures, bit for bit, as one closed loop of every pair at the concurrencies it returns
    (a tight TTFT makes some pairs bisect down)."""
    from dataclasses import fields
    from lts.serving.two_pool import TwoPoolResult
    p = serve_problem("vllm", topo="h200_dgx", isl=2000, osl=500, tpot=25, ttft=ttft)
    prefills, decodes, _ = disagg.pool_candidates(p)
    budget = p.work.budget(p.topo)
    pairs = [(pre, dec, *got[2:4]) for pre in prefills for dec in decodes
             if (got := disagg.pair(p, pre, dec, budget)) is not None]
    assert pairs
    conc, loop = disagg.loop_concurrency(p, pairs)
    full = np.array([y * d.strategies[0][BATCH] for _, d, _, y in pairs], dtype=np.float64)
    if ttft == 400:
        assert (conc < full).any()
    again = disagg.closed_loop(p, pairs, conc)
    for f in fields(TwoPoolResult):
        assert np.array_equal(getattr(loop, f.name), getattr(again, f.name), equal_nan=True)
