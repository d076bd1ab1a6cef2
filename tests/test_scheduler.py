"""What a step holds, for the analytic loop: one deployment costs the same however it is
written, and a chunked prompt is costed as the chunk the scheduler counts (issue 33's two
defects)."""
import numpy as np
import pytest

from lts.engines import ENGINES
from lts.serving.scheduler import Scheduler
from lts.serving.serve import Evaluator, serve
from lts.serving.two_pool import prefill_workload
from lts.specs import load_model, load_topology
from lts.specs.strategy import DP_ATTENTION, EXPERTS, N_COARSE, OPS, make_row


@pytest.fixture(scope="module")
def dsv3():
    return load_model("deepseek-v3"), load_topology("h200_dgx")


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_attention_dp_8_with_experts_over_8_costs_the_same_however_written(dsv3, engine):
    # tp=1,ep=8 (lts's attention DP over ep groups) and tp=8 with data-parallel attention and
    # whole experts over the group: one deployment, 8 ranks each scheduling its own requests
    m, topo = dsv3
    a = make_row(ep=8, batch=64)
    b = make_row(tp=8, batch=64)
    choices = list(DP_ATTENTION)
    choices[OPS.index("ffn1")] = choices[OPS.index("ffn2")] = EXPERTS
    b[N_COARSE:] = choices
    r = serve(m, topo, np.stack([a, b]), 4000, 1000, engine=ENGINES[engine].profile.for_gpu(topo),
              attention_dp=True)
    assert r.ttft_s[1] == pytest.approx(r.ttft_s[0], rel=0.01)
    assert r.tpot_s[1] == pytest.approx(r.tpot_s[0], rel=0.01)
    assert r.mixed_step_s[1] == pytest.approx(r.mixed_step_s[0], rel=0.01)


def test_a_chunked_prompt_is_costed_as_its_chunk(dsv3):
    # SGLang on 32 H200, attention DP 32: the budget (8192 tokens) is shared by the ranks, 256
    # each, so a step holds 8192 prompt tokens; it was costed as if each rank ran a whole
    # 4,000-token prompt (2,138 ms, 8x the prefill of the same tokens)
    m, topo = dsv3
    eng = ENGINES["sglang"].profile.for_gpu(topo)
    row = make_row(ep=32, batch=256)
    step = serve(m, topo, row[None, :], 4000, 1000, engine=eng, attention_dp=True).mixed_step_s[0]
    ev = Evaluator(m, eng.topology(topo))
    whole = ev(prefill_workload(4000), make_row(ep=32, batch=32)[None, :]).step_s[0]
    per_token_step = (step - eng.step_overhead_s) / 8192
    per_token_pass = whole / (32 * 4000)
    assert per_token_step < 1.5 * per_token_pass


def test_scheduler_of_each_engine():
    for name, rule, block in (("vllm", "demand", 16), ("sglang", "ratio", 1),
                              ("trtllm", "reserve", 32), ("generic", "demand", 1)):
        s = Scheduler.of(ENGINES[name].profile, ranks=4)
        assert (s.kv_rule, s.block) == (rule, block)
        per_rank = ENGINES[name].profile.budget_per_rank
        assert s.budget == ENGINES[name].profile.step_tokens * (4 if per_rank else 1)


def test_a_fitted_request_time_reaches_the_simulator_too():
    # vLLM 0.15's simulator has its own fitted time per request; one a user fits on their own
    # cluster (lts calibrate, an --engine-profile overlay) replaces both
    p = ENGINES["vllm"].profiles["0.15"]
    assert p.sim_request_overhead_s is not None        # its own fit (30 ms, as the loop's)
    q = p.with_request_time(0.012)
    assert q.request_overhead_s == q.simulated_request_s == 0.012
    assert q.sim_request_overhead_s is None
