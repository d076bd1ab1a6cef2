"""The closed-loop serving model (lts.serving.serve, docs/design.md §8) and the engine profiles."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_dense, synthetic_moe, with_link_factors
from lts.cost.model import evaluate
from lts.specs.workload import Workload, compose_step
from lts.engines import ENGINES
from lts.engines.profiles import sglang_mem_fraction
from lts.serving.serve import decode_workload, serve
from lts.specs import load_model, load_topology
from lts.specs.strategy import BATCH, make_row
from lts.specs.units import GIB

PROFILES = [e.profile for e in ENGINES.values()]
GENERIC = ENGINES["generic"].profile


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama3.1-8b"), load_topology("h100_dgx")


def rows(batch, tps=(1, 2, 4, 8)):
    return np.stack([make_row(tp=tp, batch=batch) for tp in tps])


# ----------------------------------------------------------------------------------------------
# closed forms

@pytest.mark.parametrize("engine", PROFILES, ids=lambda e: e.name)
def test_one_request_is_its_prefill_then_osl_minus_one_decode_steps(llama8b, engine):
    """C = 1: nothing shares its steps. TTFT is one request's prefill (one pass of isl tokens),
    TPOT one decode step of one request, each with the engine's time per step; the loop turns
    over once per request latency."""
    m, topo = llama8b
    isl, osl = 1000, 200
    r = serve(m, topo, rows(1), isl, osl, engine=engine)
    t = engine.topology(topo)
    prefill = evaluate(m, t, Workload("prefill", isl), rows(1)).step_s
    step = evaluate(m, t, decode_workload(isl, osl), rows(1)).step_s
    c0 = engine.step_overhead_s
    assert r.valid.all() and (r.running == 1).all()
    np.testing.assert_allclose(r.ttft_s, prefill + c0 + engine.request_overhead_s, rtol=1e-9)
    np.testing.assert_allclose(r.tpot_s, step + c0, rtol=1e-9)
    np.testing.assert_allclose(r.latency_s, r.ttft_s + (osl - 1) * r.tpot_s, rtol=1e-12)
    np.testing.assert_allclose(r.output_tokens_per_s, osl / r.latency_s, rtol=1e-12)
    np.testing.assert_allclose(r.tokens_per_s_per_user, 1 / r.tpot_s)


@pytest.mark.parametrize("engine", PROFILES, ids=lambda e: e.name)
def test_ttft_grows_with_concurrency(llama8b, engine):
    m, topo = llama8b
    conc = np.array([1, 2, 3, 5, 8, 13, 16, 31, 64, 100, 128, 200, 256, 1000, 3000])
    for isl, osl in ((1024, 128), (4096, 1024), (20000, 64)):
        r = serve(m, topo, np.stack([make_row(tp=2, batch=c) for c in conc]), isl, osl,
                  engine=engine)
        assert (np.diff(r.ttft_s) >= -1e-12 * r.ttft_s[1:]).all(), (isl, osl, r.ttft_s)
        # ... and the KV cache caps the running batch; the rest queue
        assert (r.running == np.minimum(conc, r.kv_capacity if not engine.max_running
                                        else np.minimum(r.kv_capacity, engine.max_running))).all()


@pytest.mark.parametrize("engine", PROFILES, ids=lambda e: e.name)
def test_throughput_never_exceeds_the_pure_decode_bound(llama8b, engine):
    """n running requests make at most n tokens per decode step, and no decode step of theirs is
    cheaper than the one at the shortest context, isl."""
    m, topo = llama8b
    isl, osl = 2048, 256
    conc = np.array([1, 4, 16, 64, 256, 1024])
    for tp in (1, 4):
        r = serve(m, topo, np.stack([make_row(tp=tp, batch=c) for c in conc]), isl, osl,
                  engine=engine)
        fastest = evaluate(m, engine.topology(topo), Workload("decode", isl, tpot_slo_ms=1e9),
                           np.stack([make_row(tp=tp, batch=n) for n in r.running])).step_s
        assert (r.output_tokens_per_s <= r.running / fastest).all()


def test_requests_beyond_the_kv_cache_queue_and_add_whole_cycles_to_ttft(llama8b):
    m, topo = llama8b
    cap = int(serve(m, topo, rows(1, (1,)), 4096, 4096).kv_capacity[0])
    r = serve(m, topo, np.stack([make_row(batch=c) for c in (cap, 3 * cap)]), 4096, 4096)
    assert r.valid.all() and (r.running == cap).all()
    np.testing.assert_allclose(r.output_tokens_per_s[1], r.output_tokens_per_s[0])
    # 2 * cap requests wait: two whole request latencies each, on average
    loop = r.latency_s[0]
    np.testing.assert_allclose(r.ttft_s[1] - r.ttft_s[0], 2 * loop, rtol=1e-9)


def test_invalid_only_when_not_one_request_fits():
    m, topo = load_model("llama3.1-70b"), load_topology("h100_dgx")
    r = serve(m, topo, rows(64, (1, 2)), 128, 128)       # 131 GiB of bf16 weights on 80 GiB
    assert not r.valid[0] and "memory" in r.reason_list(0)
    assert r.valid[1] and r.kv_capacity[1] >= 1


@pytest.mark.parametrize("engine, slos", [
    ("generic", (None, None)), ("vllm", (30.0, None)), ("sglang", (25.0, 800.0)),
    ("trtllm", (None, 500.0))])
def test_best_batch_is_the_best_integer_concurrency(engine, slos):
    """best_batch = brute force over every integer C from 1 to what the KV cache holds, under
    SLOs or none, for each engine; MoE rows with ep > 1 (attention DP) included."""
    m, topo = load_model("mixtral-8x7b"), load_topology("h100_dgx")
    prof = ENGINES[engine].profile
    strat = np.stack([make_row(tp=2), make_row(tp=4),
                      make_row(ep=4), make_row(tp=2, ep=2, pp=2)])
    kw = dict(tpot_slo_ms=slos[0], ttft_slo_ms=slos[1], engine=prof)
    best = serve(m, topo, strat, 700, 300, best_batch=True, **kw)
    limit = prof.holds(serve(m, topo, strat, 700, 300, engine=prof).kv_capacity)
    for i in range(len(strat)):
        cs = np.arange(1, int(limit[i]) + 1)
        every = np.repeat(strat[i:i + 1], len(cs), axis=0)
        every[:, BATCH] = cs
        ev = serve(m, topo, every, 700, 300, **kw)
        score = np.where(ev.valid, ev.output_tokens_per_s, -np.inf)
        if not np.isfinite(score.max()):
            assert not best.valid[i]
            continue
        assert best.valid[i]
        assert best.output_tokens_per_s[i] == pytest.approx(score.max(), rel=1e-12)
        first_best = np.flatnonzero(score >= score.max() * (1 - 1e-12))[0]
        assert best.strategies[i, BATCH] == cs[first_best]


def test_compose_step_cohorts():
    work = Workload("mixed", 1000, isl=1000, osl=100, step_tokens=8192, cohort_base=2.0,
                    cohort_share=0.1)
    mix = compose_step(np.array([1.0, 10.0, 100.0, 2000.0]), work)
    # 2 + 0.1 n, at least n / osl, at most n
    np.testing.assert_allclose(mix.cohort, [1.0, 3.0, 12.0, 202.0])
    np.testing.assert_allclose(mix.decoders, [0.0, 7.0, 88.0, 1798.0])
    # the budget left after the decode tokens takes the prompts, over as many steps as needed
    np.testing.assert_allclose(mix.steps, np.ceil(mix.cohort * 1000 / (8192 - mix.decoders)))
    first = compose_step(np.array([4.0, 20.0]), dataclasses.replace(work, mixed=False))
    np.testing.assert_allclose(first.decoders, 0.0)
    np.testing.assert_allclose(first.chunk, [4000.0, 8192.0])
    np.testing.assert_allclose(first.steps, [1.0, 20000 / 8192])


def test_sglang_memory_fraction_is_its_server_args_rule():
    # H100 (81559 MiB) at tp 1 / 8: (81559 - (9.5 + p/2) * 1024) / 81559, rounded to 3 places
    h100 = 81559 * 2**20
    assert sglang_mem_fraction(h100, 1) == pytest.approx(0.874)
    assert sglang_mem_fraction(h100, 8) == pytest.approx(0.831)


def test_engine_profiles_cite_every_default():
    for e in PROFILES:
        assert e.notes and all(isinstance(n, str) and n for n in e.notes)
        assert e.step_tokens > 0 and e.memory in ("reserve", "utilization", "static", "free")


# ----------------------------------------------------------------------------------------------
# invariants (hypothesis)

MODELS = {"dense": synthetic_dense(), "moe": synthetic_moe()}


@st.composite
def serve_cases(draw):
    model = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    topo = load_topology(draw(st.sampled_from(["h100_dgx", "gb200_nvl72", "a100_dgx"])))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    ep = draw(st.sampled_from([1, 2, 4])) if model.is_moe else 1
    pp = draw(st.sampled_from([1, 2]))
    conc = draw(st.integers(1, 3000))
    isl, osl = draw(st.integers(1, 20000)), draw(st.integers(1, 4000))
    engine = draw(st.sampled_from(PROFILES))
    return model, topo, make_row(tp=tp, ep=ep, pp=pp, batch=conc)[None], isl, osl, engine


@settings(max_examples=40)
@given(case=serve_cases(), f_link=st.floats(1.0, 8.0), f_hbm=st.floats(1.0, 4.0))
def test_more_bandwidth_is_never_slower(case, f_link, f_hbm):
    model, topo, row, isl, osl, engine = case
    faster = with_link_factors(topo, bandwidth=(f_link,) * len(topo.links))
    faster = dataclasses.replace(faster, hbm_bandwidth_bytes_s=topo.hbm_bandwidth_bytes_s * f_hbm)
    a = serve(model, topo, row, isl, osl, engine=engine)
    b = serve(model, faster, row, isl, osl, engine=engine)
    tol = 1 + 1e-9
    assert b.running[0] == a.running[0]
    assert b.ttft_s[0] <= a.ttft_s[0] * tol
    if osl > 1:                                   # one output token: no TPOT (nan)
        assert b.tpot_s[0] <= a.tpot_s[0] * tol
    else:
        assert np.isnan(a.tpot_s[0]) and np.isnan(b.tpot_s[0])
    assert b.output_tokens_per_s[0] * tol >= a.output_tokens_per_s[0]


@settings(max_examples=40)
@given(case=serve_cases(), extra_gib=st.floats(0.5, 200.0))
def test_more_hbm_never_holds_fewer_requests(case, extra_gib):
    model, topo, row, isl, osl, engine = case
    bigger = dataclasses.replace(topo, hbm_bytes=topo.hbm_bytes + extra_gib * GIB)
    a = serve(model, topo, row, isl, osl, engine=engine)
    b = serve(model, bigger, row, isl, osl, engine=engine)
    assert b.kv_capacity[0] >= a.kv_capacity[0] and b.running[0] >= a.running[0]
    assert b.valid[0] or not a.valid[0]


def test_generic_is_the_default_engine(llama8b):
    m, topo = llama8b
    a, b = serve(m, topo, rows(32), 512, 512), serve(m, topo, rows(32), 512, 512, engine=GENERIC)
    np.testing.assert_array_equal(a.ttft_s, b.ttft_s)


def test_cached_evaluator_grown_call_by_call_equals_uncached():
    """serve.Evaluator(cached=True) appends each call's new coarse rows to one TableCache, whose
    tables grow by doubling (cost.tables.append_tables: spare rows, writes in place): evaluated in
    many small calls, every strategy costs exactly what a fresh uncached evaluation gives."""
    from lts.serving.serve import Evaluator
    model, topo = load_model("mixtral-8x7b"), load_topology("h100_dgx")
    work = Workload("decode", 2048, gpus=8)
    rng = np.random.default_rng(0)
    tp, ep = rng.choice([1, 2, 4, 8], 300), rng.choice([1, 2, 4, 8], 300)
    batch, choices = rng.integers(1, 400, 300), rng.integers(0, 3, (300, 12))
    rows = np.stack([make_row(c, tp=t, ep=e, batch=b)
                     for t, e, b, c in zip(tp, ep, batch, choices)])
    cached = Evaluator(model, topo, cached=True)
    got = [cached(work, rows[i:i + 7]) for i in range(0, 300, 7)]
    cache = cached.cache(work)
    assert len(cache.tables.coarse) > cache.used     # spare rows were made, and left unread
    want = evaluate(model, topo, work, rows)
    for name in ("valid", "tokens_per_s_per_gpu", "memory_bytes", "step_s"):
        a = np.concatenate([getattr(r, name) for r in got])
        assert np.array_equal(a, getattr(want, name), equal_nan=True), name
