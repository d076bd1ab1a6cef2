"""The serve phase's exact optimum (lts.search.serve_exact) against brute force on small spaces: the
optimum, and the trade-off frontier (for each tokens/s per user, the best tokens/s per GPU)."""
import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from generators import synthetic_dense, synthetic_moe
from lts.engines import ENGINES
from lts.serving import serve
from lts.serving.pareto import pareto_front
from lts.search.problems import ServeProblem, take
from lts.search.methods import SEARCHERS, _distinct_top, frontier
from lts.specs import load_topology
from lts.specs.strategy import BATCH, Space

H100 = load_topology("h100_dgx")
CAP = serve.AT_CAPACITY
# small GPUs, so that memory caps the running batch and each strategy has its own capacity
# (SGLang's: its tier below 35 GiB reserves 2.8 + tp*pp/10 GiB, profiles.sglang_mem_fraction);
# SLOs that bind; each engine's loop (mixed cohorts, SGLang's prefill first, TRT-LLM's memory)
CASES = {
    "dense-generic": (synthetic_dense(), replace(H100, hbm_bytes=6e9), 2000, 200, 15, 400,
                      ENGINES["generic"].profile,
                      Space(tp=(1, 2, 4), ep=(1,), pp=(1, 2), batch=(1, 8, 64, CAP),
                            choices=(2, 2, 3, 2, 2, 2, 2, 1, 2, 2, 2, 2), gpus=8)),
    "moe-sglang": (synthetic_moe(), replace(H100, hbm_bytes=5.5e9), 1000, 100, 20, 300,
                   ENGINES["sglang"].profile,
                   Space(tp=(1, 2), ep=(1, 2), pp=(1, 2), batch=(4, 32, CAP),
                         choices=(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 2, 1), gpus=8)),
    "moe-trtllm": (synthetic_moe(), replace(H100, hbm_bytes=5e9), 1500, 400, 10, 300,
                   ENGINES["trtllm"].profile,
                   Space(tp=(1, 2), ep=(1, 2, 4), pp=(1, 2), batch=(1, 8, 64, CAP),
                         choices=(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 2, 1), gpus=8)),
}


def every_strategy(problem):
    """Every strategy of the (small) space, evaluated, and its score."""
    sp = problem.space
    coarse = np.array(list(itertools.product(*[range(len(v))
                                               for v in sp.values])))
    fine = np.array(list(itertools.product(*[range(n) for n in sp.choices])))
    idx = np.concatenate([np.repeat(coarse, len(fine), axis=0),
                          np.tile(fine, (len(coarse), 1))], axis=1)
    res = problem.evaluate(idx, count=False)
    return res, problem.score(res)


def points(res):
    """A frontier's (tokens/s per user, tokens/s per GPU), rounded, in order."""
    return sorted(zip(np.round(1 / res.tpot_s, 6), np.round(res.tokens_per_s_per_gpu, 6)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_serve_exact_equals_brute_force(case):
    model, topo, isl, osl, tpot, ttft, engine, space = CASES[case]
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine)
    res, score = every_strategy(p)
    ok = np.flatnonzero(res.valid)
    # the case is not trivial: memory, the SLOs and the capacity all decide
    assert 0 < len(ok) < len(score) or engine is ENGINES["sglang"].profile
    assert len(np.unique(res.running[ok])) > 5
    exact = SEARCHERS["exact"](p, 0, None, top=3)
    assert exact.best_score == pytest.approx(score.max(), rel=1e-12)
    assert exact.evaluated.valid[0]
    np.testing.assert_allclose(listed_scores(p, exact), top_k_of(p, res, score, 3), rtol=1e-12)
    # the frontier drawn from the exact search's strategies is the frontier of every strategy
    cand = p.evaluate_rows(exact.coarse_best)
    got = frontier(take(cand, np.flatnonzero(cand.valid)))
    want = take(res, ok[pareto_front(1 / res.tpot_s[ok], res.tokens_per_s_per_gpu[ok],
                                     res.ttft_s[ok])])
    assert len(points(want)) >= 5 and points(got) == points(want)


def top_k_of(p, res, score, k):
    """The top-k the search must list (``methods._distinct_top``), by brute force: the k best
    distinct deployments (all but the concurrency) among the best strategy of each (tp, ep,
    pp, concurrency), of those that do not queue there (the same choices at their capacity
    serve as fast), and the frontier's."""
    ok = np.flatnonzero(res.valid)
    slots = np.repeat(np.arange(len(p.grid)), len(score) // len(p.grid))
    conc = res.strategies[:, BATCH]
    served = np.where((conc != CAP) & (res.running < conc), -np.inf, score)   # queued: out
    order = np.lexsort((-served, slots))
    cands = order[np.r_[True, slots[order][1:] != slots[order][:-1]]]
    cands = cands[np.isfinite(served[cands])]
    cands = np.r_[cands, ok[pareto_front(1 / res.tpot_s[ok], res.tokens_per_s_per_gpu[ok],
                                         res.ttft_s[ok])]]
    _, inverse = np.unique(np.delete(res.strategies[cands], BATCH, axis=1), axis=0,
                           return_inverse=True)
    per_deployment = np.full(inverse.max() + 1, -np.inf)
    np.maximum.at(per_deployment, inverse.ravel(), score[cands])
    return np.sort(per_deployment)[::-1][:k]


def listed_scores(p, exact):
    """The scores of the deployments ``lts search`` lists from an exact result, best first."""
    listed = _distinct_top(p, exact)
    assert len(np.unique(np.delete(listed, BATCH, axis=1), axis=0)) == len(listed)
    return np.sort(p.score(p.evaluate_rows(listed)))[::-1]


# problems where a looser threshold on the k-th deployment once left one out (a review's fuzz:
# a deployment that stopped being its slot's best still counted towards k)
TOP_K = [("dense-generic", 4, dict(hbm_bytes=5e9), 2000, 50, 30, 100),
         ("dense-generic", 7, dict(hbm_bytes=5.5e9), 1000, 50, 5, 300),
         ("moe-trtllm", 6, dict(hbm_bytes=7e9), 4000, 200, 30, 1000),
         ("moe-sglang", 9, dict(hbm_bytes=6e9), 1000, 400, 10, 0)]


@pytest.mark.parametrize("case,k,topo_set,isl,osl,tpot,ttft", TOP_K)
def test_serve_exact_lists_the_top_k_of_brute_force(case, k, topo_set, isl, osl, tpot, ttft):
    model, topo, _, _, _, _, engine, space = CASES[case]
    p = ServeProblem(model, replace(topo, **topo_set), isl, osl, tpot, ttft or None, gpus=8,
                     space=space, engine=engine)
    res, score = every_strategy(p)
    want = top_k_of(p, res, score, k)
    assert len(want) == k
    np.testing.assert_allclose(listed_scores(p, SEARCHERS["exact"](p, 0, None, top=k)), want,
                               rtol=1e-12)


def test_serve_exact_is_at_least_what_the_samplers_find():
    model, topo, isl, osl, tpot, ttft, engine, space = CASES["moe-trtllm"]
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine)
    exact = SEARCHERS["exact"](p, 0, None).best_score
    for method in ("ppo", "random"):      # (Megatron's choices lie outside this small space)
        assert SEARCHERS[method](p, 300, np.random.default_rng(0)).best_score <= exact


def test_serve_exact_refuses_a_space_without_the_capacity_concurrency():
    model, topo, isl, osl, tpot, ttft, engine, space = CASES["dense-generic"]
    no_cap = replace(space, batch=(1, 8, 64))
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=no_cap, engine=engine)
    with pytest.raises(ValueError, match="needs the AT_CAPACITY concurrency"):
        SEARCHERS["exact"](p, 0, None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_serve_guide_bounds_are_upper_bounds(case):
    """The agent's guide for the serve phase (serve_exact.guide_bounds) bounds every strategy of
    each (tp, ep, pp, concurrency) from above: queued strategies and the TTFT their queue adds
    included (brute force)."""
    from lts.search.serve_exact import guide_bounds
    model, topo, isl, osl, tpot, ttft, engine, space = CASES[case]
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine)
    res, score = every_strategy(p)
    ub = guide_bounds(p, tighten=4)           # a few rows tight, the others cheap
    per_row = score.reshape(len(p.grid), -1).max(axis=1)
    assert np.all(per_row <= ub * (1 + 1e-12))
    assert np.isfinite(ub).any() and (np.isfinite(ub) >= np.isfinite(per_row)).all()


@pytest.mark.parametrize("nx,ny", [(1, 1), (1, 5), (4, 1), (3, 4), (50, 50)])
def test_unique_pairs_is_numpy_unique_of_the_pairs(nx, ny):
    """serve_exact._unique_pairs (the distinct (fixed, per-request) byte pairs of a list) equals
    np.unique over the pairs as complex numbers, order and inverse included."""
    from lts.search.serve_exact import _unique_pairs
    rng = np.random.default_rng(nx * 100 + ny)
    x = rng.choice(rng.normal(size=nx) * 1e9, size=(3, 7, 9))
    y = rng.choice(rng.normal(size=ny) * 1e6, size=(3, 7, 9))
    (ux, uy), inverse = _unique_pairs(x, y)
    ref, ref_inverse = np.unique(x + 1j * y, return_inverse=True)
    assert np.array_equal(ux, ref.real) and np.array_equal(uy, ref.imag)
    assert np.array_equal(inverse, ref_inverse.reshape(x.shape))


_TIMES = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-9, 1.0 + 1e-3, 2.0, 3.0, np.inf])


@given(st.integers(1, 3).flatmap(lambda i: st.integers(1, 12).flatmap(lambda k: st.tuples(
    arrays(np.float64, (i, k), elements=_TIMES), arrays(np.float64, (i, k), elements=_TIMES),
    arrays(np.int64, (i, k), elements=st.integers(0, 2))))))
def test_undominated_leaves_out_exactly_the_dominated_entries(mdg):
    """serve_exact._undominated against its definition, pair by pair: an entry is left out
    where another of the same row i and term has the same times and a lower index, or is at
    most as slow in both and faster by the margin in one; near ties (1 + 1e-9) are kept."""
    from lts.search.serve_exact import MARGIN, _undominated
    m, d, g = mdg
    I, K = m.shape
    want = np.ones((I, K), dtype=bool)
    for i, k, j in itertools.product(range(I), range(K), range(K)):
        if j == k or g[i, j] != g[i, k]:
            continue
        tie = m[i, j] == m[i, k] and d[i, j] == d[i, k] and j < k
        faster = m[i, j] <= m[i, k] and d[i, j] <= d[i, k] and (
            m[i, j] < m[i, k] * (1 - MARGIN) or d[i, j] < d[i, k] * (1 - MARGIN))
        if tie or faster:
            want[i, k] = False
    assert np.array_equal(_undominated(m, d, g), want)


@pytest.mark.parametrize("bad", [-1.0, np.nan])
def test_undominated_keeps_every_entry_beside_a_negative_or_nan_time(bad):
    """The margin's test (m' < m (1 - MARGIN)) holds for times >= 0 only: where a time is
    negative or NaN, no entry is left out (an entry would otherwise dominate itself)."""
    from lts.search.serve_exact import _undominated
    m = np.array([[bad, 2.0, 2.0, 3.0]])
    d = np.array([[1.0, 1.0, 1.0, 5.0]])
    assert _undominated(m, d, np.zeros((1, 4), dtype=np.int64)).all()
    assert _undominated(d, m, np.zeros((1, 4), dtype=np.int64)).all()


@pytest.mark.parametrize("case", ["moe-sglang", "moe-trtllm"])
def test_serve_guide_bounds_hold_on_every_strategy(case):
    """The agent's serve bounds (serve_exact.guide_bounds, the whole space) stay above every
    strategy of each coarse row (brute force) for a MoE whose experts run the grouped GEMM rates
    by tokens per expert (H100's [gpu.grouped_gemm]: a step's time is not monotone in the
    tokens each expert gets), and reach the best of the row somewhere (not vacuous)."""
    from lts.search.methods import guide
    model, topo, isl, osl, tpot, ttft, engine, space = CASES[case]
    assert topo.grouped
    p = ServeProblem(model, topo, isl, osl, tpot, ttft, gpus=8, space=space, engine=engine)
    res, score = every_strategy(p)
    bound = np.asarray(guide(p)).ravel()
    sp = p.space
    coarse = np.array(list(itertools.product(*[range(len(v))
                                               for v in sp.values])))
    g = np.repeat(np.ravel_multi_index(tuple(coarse.T), p.grid_shape),
                  len(score) // len(coarse))
    ok = np.isfinite(score)
    assert (score[ok] <= bound[g[ok]] * (1 + 1e-9)).all()
    best = np.full(len(bound), -np.inf)
    np.maximum.at(best, g[ok], score[ok])
    assert np.isclose(best, bound, rtol=1e-9).any()
