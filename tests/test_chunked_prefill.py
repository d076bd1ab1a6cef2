"""A prefill pass in chunks of the engine's token budget (issue 37 item 3; specs.workload
.prefill_steps, cost.tables._chunked): a prompt of isl tokens under a budget of c is ceil(isl/c)
steps, each reading the cache of its prompt so far and, under MLA, up-projecting every earlier
latent key again; a prompt within the budget costs exactly what it did."""
import numpy as np
import pytest

from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables, mla_prefill_shape
from lts.engines import ENGINES, chunked
from lts.specs import load_model, load_topology
from lts.specs.strategy import coarse_of, make_row, parse_strategy
from lts.specs.workload import Workload, prefill_steps

H200 = load_topology("h200_dgx")
V3 = load_model("deepseek-v3")
LLAMA = load_model("llama3.1-70b")
ONE = coarse_of(make_row())[None]    # tp 1, one prompt: every head on one GPU (MODE_NONE)


def attention_flops(model, work):
    """(scores, context) FLOPs of one layer's ops in MODE_NONE, one prompt, one step: their
    compute time at the rate of a decode step's context op (absorbed over the latent, 2 heads
    kv_lora FLOPs a key), as tests/test_mla_prefill.py takes it."""
    a = model.attention
    dec = build_tables(model, H200, Workload("decode", 8192), ONE)
    rate = 2.0 * a.heads * a.kv_lora_rank * 8192 / dec.compute_s[0, SLOT["context"], MODE_NONE]
    tab = build_tables(model, H200, work, ONE)
    return (tab.compute_s[0, SLOT["scores"], MODE_NONE] * rate,
            tab.compute_s[0, SLOT["context"], MODE_NONE] * rate)


@pytest.mark.parametrize("isl, budget", [(32768, 8192), (131072, 8192), (20000, 8192)])
def test_mla_earlier_keys_up_projected_again(isl, budget):
    # n = ceil(isl / c) chunks of isl / n tokens; chunk j up-projects the (j - 1) isl / n keys
    # before it: over the pass (isl / n) n (n - 1) / 2 keys, each 2 kv_lora heads qk_nope FLOPs
    # for K (scores) and 2 kv_lora heads v_head_dim for V (context); the queries' attention
    # itself is the one pass's
    n = -(-isl // budget)
    keys = isl / n * n * (n - 1) / 2
    _, _, up_k, up_v = mla_prefill_shape(V3.attention)
    one = attention_flops(V3, Workload("prefill", isl))
    step = attention_flops(V3, Workload("prefill", isl, step_tokens=budget))
    assert n * step[0] - one[0] == pytest.approx(keys * up_k, rel=1e-9)
    assert n * step[1] - one[1] == pytest.approx(keys * up_v, rel=1e-9)


def test_steps_of_a_pass():
    ep = np.array([1.0, 2.0, 8.0])
    # vLLM: each DP rank its own 8,192 tokens; SGLang: the ranks share them
    assert list(prefill_steps(Workload("prefill", 131072, step_tokens=8192), ep)) == [16] * 3
    shared = Workload("prefill", 131072, step_tokens=8192, budget_per_rank=False)
    assert list(prefill_steps(shared, ep)) == [16, 32, 128]
    assert list(prefill_steps(Workload("prefill", 131072), ep)) == [1, 1, 1]    # no budget
    # a cached prefix is not prefilled: 131,072 - 65,536 new tokens, 8 steps
    cached = Workload("prefill", 131072, step_tokens=8192, cached=65536)
    assert float(prefill_steps(cached)) == 8


def test_engines_that_chunk():
    work = Workload("prefill", 131072)
    got = {name: chunked(work, e.profile.for_gpu(H200)).step_tokens
           for name, e in ENGINES.items()}
    # vLLM and SGLang chunk a long prompt by default (8,192 tokens a step on an H200); the
    # generic engine and TensorRT-LLM (enable_chunked_prefill off) run it in one pass
    assert got == {"generic": 0, "vllm": 8192, "sglang": 8192, "trtllm": 0}


@pytest.mark.parametrize("model, cached", [(V3, 0), (LLAMA, 0), (LLAMA, 1000)])
def test_within_the_budget_unchanged(model, cached):
    rows = np.stack([parse_strategy(s, model.is_moe) for s in
                     ("tp=8,batch=1", "tp=4,pp=2,batch=4", "tp=2,batch=2,qkv=none")])
    one, budget = (evaluate(model, H200, Workload("prefill", 6000, cached=cached,
                                                  step_tokens=st), rows)
                   for st in (0, 8192))
    for f in ("ttft_s", "step_s", "memory_bytes", "tokens_per_s"):
        assert np.array_equal(getattr(one, f), getattr(budget, f)), f


@pytest.mark.parametrize("model, strategy", [
    (LLAMA, "tp=8,batch=1"),
    (V3, "tp=8,batch=1,embedding=1,attn_norm=1,ffn_norm=1,router=0,final_norm=1,lm_head=0")])
def test_a_long_prompt_costs_more_in_chunks(model, strategy):
    row = parse_strategy(strategy, model.is_moe)[None]
    one = evaluate(model, H200, Workload("prefill", 131072, gpus=8), row)
    steps = evaluate(model, H200, Workload("prefill", 131072, gpus=8, step_tokens=8192), row)
    assert one.valid[0] and steps.valid[0]
    # 16 steps re-read the weights and their prompt so far (and MLA's earlier latents, again
    # up-projected): the pass is slower, by less than the steps' weight reads and
    # re-projections could make it on their own worst case (2x)
    assert one.ttft_s[0] < steps.ttft_s[0] < 2 * one.ttft_s[0]
