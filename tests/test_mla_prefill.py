"""MLA prefill un-absorbed, decode absorbed (issue 23, item 3; lts.cost.tables.mla_prefill_shape):
the attention FLOPs of a prefill's queries in closed form for DeepSeek-V3 against the absorbed
form it was costed in before, decode unchanged, sparse MLA absorbed in both phases."""
import pytest

from generators import synthetic_sparse
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.tables import build_tables, mla_prefill_shape
from lts.specs import load_model, load_topology
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload

H200 = load_topology("h200_dgx")
V3 = load_model("deepseek-v3")
ONE = coarse_of(make_row())[None]    # tp 1, one sequence: every head on one GPU (MODE_NONE)


def flops(model, phase, context):
    """(scores, context) FLOPs of one layer's ops in MODE_NONE, one sequence. The rate is taken
    from a decode step's context op at the same context, absorbed over the latent (2 heads
    kv_lora FLOPs a key), so the test does not depend on the peak."""
    a = model.attention
    dec = build_tables(model, H200, Workload("decode", context), ONE)
    tab = build_tables(model, H200, Workload(phase, context), ONE)
    sc, cx = SLOT["scores"], SLOT["context"]
    rate = 2.0 * a.heads * a.kv_lora_rank * context / dec.compute_s[0, cx, MODE_NONE]
    return tab.compute_s[0, sc, MODE_NONE] * rate, tab.compute_s[0, cx, MODE_NONE] * rate


def test_deepseek_v3_prefill_shape():
    # config.json: 128 heads, qk_nope 128, qk_rope 64, v_head_dim 128, kv_lora_rank 512
    qk, v, up_k, up_v = mla_prefill_shape(V3.attention)
    assert (qk, v) == (192, 128)
    assert (up_k, up_v) == (2 * 512 * 128 * 128, 2 * 512 * 128 * 128)
    assert mla_prefill_shape(synthetic_sparse().attention) is None     # sparse: absorbed


# per query token and layer of a causal prompt of L tokens, (L + 1)/2 keys on average:
#   un-absorbed  2 * 128 * (192 + 128) = 81,920 FLOPs a key
#   absorbed     2 * 128 * (576 + 512) = 278,528 FLOPs a key (3.4x)
# L = 1,024: 42.0 M against 142.7 M; 8,192: 335.6 M against 1,141.0 M; 32,768: 1,342.2 M against
# 4,563.7 M FLOPs a token and layer
@pytest.mark.parametrize("context", [1024, 8192, 32768])
def test_deepseek_v3_prefill_attention_flops_per_token(context):
    sc, cx = flops(V3, "prefill", context)
    keys = (context + 1) / 2
    assert sc / context == pytest.approx(2 * 128 * 192 * keys, rel=1e-9)
    assert cx / context == pytest.approx(2 * 128 * 128 * keys, rel=1e-9)
    absorbed = 2 * 128 * (576 + 512) * keys
    assert absorbed / ((sc + cx) / context) == pytest.approx(1088 / 320, rel=1e-9)


@pytest.mark.parametrize("context", [1024, 32768])
def test_decode_stays_absorbed(context):
    # one query, context keys: MQA over the 576-wide latent key and 512-wide latent value
    sc, cx = flops(V3, "decode", context)
    assert sc == pytest.approx(2 * 128 * 576 * context, rel=1e-12)
    assert cx == pytest.approx(2 * 128 * 512 * context, rel=1e-12)


def test_sparse_mla_prefill_stays_absorbed():
    m = synthetic_sparse(1 << 20)            # top-k above the prompt: every key selected
    a, L = m.attention, 2048
    sc, cx = flops(m, "prefill", L)
    keys = (L + 1) / 2
    idx = 2 * a.index_heads * a.index_head_dim * keys      # the indexer, over the same keys
    assert sc / L == pytest.approx(2 * a.heads * (a.kv_lora_rank + a.qk_rope_head_dim) * keys
                                   + idx, rel=1e-9)
    assert cx / L == pytest.approx(2 * a.heads * a.kv_lora_rank * keys, rel=1e-9)


def test_chunked_prefill_up_projects_the_earlier_context_each_chunk():
    """A prefill-only step (mixed=False) of one 8,192-token prompt in 4 chunks of 2,048: each
    chunk's queries attend un-absorbed to (8,192 + 1)/2 keys on average (the prompt's mean), and
    chunk j up-projects the j - 1 chunks before it again (vLLM _compute_prefill_context): a mean
    of (4 + 1)/2 - 1 = 1.5 chunks of 2,048 keys, 2 x 512 x 128 x 128 FLOPs a key for K (scores)
    and as many for V (context)."""
    L, ch = 8192, 2048
    work = Workload("mixed", context=L, isl=L, osl=1, step_tokens=ch, mixed=False)
    tab = build_tables(V3, H200, work, ONE)
    dec = build_tables(V3, H200, Workload("decode", L), ONE)
    cx = SLOT["context"]
    rate = 2.0 * 128 * 512 * L / dec.compute_s[0, cx, MODE_NONE]
    earlier = ch * 1.5
    up = 2 * 512 * 128 * 128
    keys = (L + 1) / 2
    assert tab.compute_s[0, SLOT["scores"], MODE_NONE] * rate == \
        pytest.approx(ch * 2 * 128 * 192 * keys + earlier * up, rel=1e-9)
    assert tab.compute_s[0, cx, MODE_NONE] * rate == \
        pytest.approx(ch * 2 * 128 * 128 * keys + earlier * up, rel=1e-9)
