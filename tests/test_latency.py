"""The one latency seam (``lts.cost.latency``, issue 21): its functions against numbers worked
by hand, and the callers' figures equal to what it gives from their step times and counts."""
import numpy as np
import pytest

from lts.cost import latency
from lts.search.problems import ServeProblem
from lts.serving.serve import mixed_workload, serve, step_counts
from lts.specs import load_model, load_topology
from lts.specs.strategy import BATCH, make_row


def test_step_is_pp_stage_times_and_a_pass_fills_and_drains():
    # 4 stages, the slowest 10 ms, 1 ms fixed per step: decode 4 x 10 + 1; prefill 7 x 10 + 1
    assert latency.step_s(4, 0.010, 0.001, fill_drain=False) == pytest.approx(0.041)
    assert latency.step_s(4, 0.010, 0.001, fill_drain=True) == pytest.approx(0.071)
    assert latency.step_s(1, 0.010, 0.001, fill_drain=True) == pytest.approx(0.011)


def test_request_times_from_step_counts():
    # 3 mixed steps of 20 ms to the first token, then 2 mixed and 5 decode steps of 10 ms for
    # the other 7 tokens, 5 ms per request: decode time 40 + 50 = 90 ms
    ttft, tpot, lat = latency.request_s(3.0, 2.0, 5.0, 0.020, 0.010, 8, 0.005)
    assert ttft == pytest.approx(3 * 0.020 + 0.005)
    assert tpot == pytest.approx(0.090 / 7)
    assert lat == pytest.approx(0.060 + 0.090 + 0.005)
    assert lat == pytest.approx(ttft + 7 * tpot)          # L = TTFT + (osl - 1) TPOT


def test_one_token_request_has_no_tpot_unless_told():
    _, tpot, lat = latency.request_s(np.array([2.0, 3.0]), 0.0, 0.0, 0.02, 0.01, 1, 0.0)
    assert np.isnan(tpot).all() and tpot.shape == (2,)
    _, tpot0, _ = latency.request_s(np.array([2.0, 3.0]), 0.0, 0.0, 0.02, 0.01, 1, 0.0,
                                    one_token_tpot=0.0)
    assert (tpot0 == 0.0).all()
    np.testing.assert_allclose(lat, [0.04, 0.06])


def test_closed_queue_is_whole_latencies_for_the_clients_beyond_the_running():
    # 12 clients, 4 running, 200 ms a request: the other 8 wait 8 / 4 = 2 latencies
    np.testing.assert_allclose(latency.closed_queue_s(np.array([12.0, 3.0]), 4.0, 0.2),
                               [0.4, 0.0])


def test_pool_ttft_is_one_and_a_half_passes_and_the_transfer():
    assert latency.QUEUE_PASSES == 1.5
    assert latency.pool_ttft_s(0.2, 0.01) == pytest.approx(0.31)
    assert latency.pool_pass_limit(0.31, 0.01) == pytest.approx(0.2)   # its inverse


@pytest.mark.parametrize("limit, transfer", [(2.0, 0.1), (0.065, 0.004), (1.5, 0.0)])
def test_the_pool_pass_limit_is_the_inverse_of_the_pool_ttft(limit, transfer):
    """Two pools size their prefill pass with ``pool_pass_limit``: a change to how a pool's TTFT
    is computed that forgets its inverse fails here instead of breaking the TTFT limit."""
    assert latency.pool_ttft_s(latency.pool_pass_limit(limit, transfer), transfer) == \
        pytest.approx(limit, rel=1e-12)


def test_the_closed_loop_is_the_seam_bit_for_bit():
    """``serve``'s TTFT, TPOT and latency are ``request_s`` of its own step times and
    ``step_counts``, with ``closed_queue_s`` for the clients it cannot run."""
    model, topo = load_model("llama3.1-8b"), load_topology("h100_dgx")
    isl, osl = 1000, 200
    engine = ServeProblem(model, topo, isl, osl).engine          # the default engine
    rows = np.stack([make_row(tp=tp, batch=c) for tp in (1, 2) for c in (8, 4096)])
    r = serve(model, topo, rows, isl, osl, engine=engine)
    counts = step_counts(engine, mixed_workload(isl, osl, engine), r.running)
    ttft, tpot, lat = latency.request_s(*counts, r.mixed_step_s, r.decode_step_s, osl,
                                        engine.request_overhead_s)
    wait = latency.closed_queue_s(r.strategies[:, BATCH].astype(float), r.running, lat)
    assert (wait > 0).any() and (wait == 0).any()      # some rows queue, some do not
    np.testing.assert_array_equal(r.tpot_s, tpot)
    np.testing.assert_array_equal(r.ttft_s, ttft + wait)
    np.testing.assert_array_equal(r.latency_s, lat + wait)


def test_mixed_engine_ttft_is_the_mean_request_of_its_cohort():
    """issue 23: a cohort of k prompts filling s steps in turn finishes prompt j at step
    ceil(j a), a = s / k; the TTFT counts a (k + 1) / 2 + 1/2 steps (the mean), not s, and the
    cohort's later prefill steps fall in the request's decode instead."""
    from dataclasses import replace
    from lts.engines import get
    from lts.specs.workload import compose_step
    engine = replace(get("vllm").profile, cohort_base=8.0, cohort_share=0.0)
    isl, osl = 4096, 200
    work = mixed_workload(isl, osl, engine)
    n = np.array([8.0, 64.0])
    mix = compose_step(n, work)
    k, s = mix.cohort, mix.steps
    first, mid_mix, mid_dec = step_counts(engine, work, n)
    mean = s / k * (k + 1) / 2 + 0.5
    m = n / k
    queue = np.maximum(m * s - (s + osl - 1), 0.0)
    np.testing.assert_allclose(first, queue + np.clip(mean, 1.0, s))
    np.testing.assert_allclose(mid_mix, np.minimum(osl - 1, m * s - np.clip(mean, 1.0, s)))
    np.testing.assert_allclose(mid_mix + mid_dec, osl - 1)
    assert (first < queue + s).all()                      # earlier than the cohort's last
    # brute force: the mean over the cohort of the step each prompt's last token is in
    for i in range(len(n)):
        a = isl / (8192 - (n[i] - k[i]))                  # steps a prompt takes beside decodes
        ends = np.ceil(np.arange(1, int(k[i]) + 1) * a)
        assert abs(ends.mean() - mean[i]) <= 0.5 + 1e-9
