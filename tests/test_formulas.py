"""Golden formulas: one closed-form number per formula, written out by hand from the shipped TOML
values (models/*.toml, topologies/h100_dgx.toml), against what lts computes.

Each expected value is a literal expression whose factors are the file's keys, named in the
comment beside it; a change to a formula (or to a shipped file) fails with both numbers shown.
"""
import numpy as np
import pytest

from lts.cost import collectives as coll
from lts.cost.expert_load import busiest
from lts.cost.model import evaluate
from lts.cost.layouts import MODE_DIM0, MODE_DIM1, MODE_EXPERTS_T, MODE_NONE, SLOT
from lts.cost.tables import build_tables, roofline_time
from lts.specs.workload import Workload
from lts.specs import load_model, load_topology, with_expert_placement
from lts.specs.strategy import OP_COL, coarse_of, make_row

H100 = load_topology("h100_dgx")


def kv_bytes_per_token(name, tp=1, **ops):
    """KV cache of one token over all layers on one GPU, as the memory check counts it: per-GPU
    memory of one sequence at two contexts, difference over the added tokens (weights and
    workspace do not depend on the context in decode). ``ops``: choices other than Megatron's."""
    model, row = load_model(name), make_row(tp=tp)
    for op, choice in ops.items():
        row[OP_COL[op]] = choice
    mem = [evaluate(model, H100, Workload(context=c), row).memory_bytes[0] for c in (1024, 3072)]
    return (mem[1] - mem[0]) / 2048


def test_kv_cache_bytes_per_token_gqa():
    # llama3.1-70b: K and V of kv_heads = 8 heads of head_dim = 128, layers = 80, kv_cache bf16
    assert kv_bytes_per_token("llama3.1-70b") == pytest.approx(2 * 8 * 128 * 80 * 2, rel=1e-9)


def test_kv_cache_bytes_per_token_mla():
    # deepseek-v3: one latent of kv_lora_rank = 512 plus the rope key qk_rope_head_dim = 64,
    # shared by keys and values and all heads, layers = 61, kv_cache bf16 (2 B)
    assert kv_bytes_per_token("deepseek-v3") == pytest.approx((512 + 64) * 61 * 2, rel=1e-9)


def test_kv_cache_bytes_per_token_mla_split():
    # deepseek-v3 on tp = 8: splitting the heads (scores and context on dim 0, Megatron's) keeps
    # the whole latent of kv_lora_rank + qk_rope_head_dim = 576 values on every rank; splitting
    # head_dim (dim 1) splits the one latent, ceil(576 / 8) = 72 values a rank, and the values
    # are read from that same copy; layers = 61, bf16
    assert kv_bytes_per_token("deepseek-v3", tp=8) == pytest.approx(576 * 61 * 2, rel=1e-9)
    assert kv_bytes_per_token("deepseek-v3", tp=8, scores=1, context=1) == \
        pytest.approx(72 * 61 * 2, rel=1e-9)


def test_moe_dispatch_and_combine_bytes():
    # moe1.6t on tp=2, ep=8, pp=1, batch=64 (decode): each tp group holds 64 / 8 = 8 sequences of
    # one token; every token goes to top_k = 2 experts, hidden = 12288, activations bf16 (2 B).
    # Under uniform routing (--expert-load uniform) every ep group receives the mean:
    flat = with_expert_placement(load_model("moe1.6t"), load="uniform")
    tab = build_tables(flat, H100, Workload(), coarse_of(make_row(tp=2, ep=8, batch=64))[None])

    def all_to_all(slot, mode, group="ep", tab=tab):
        (nbytes,) = [nb[0] for kind, g, nb, _ in tab.intrinsic[(SLOT[slot], mode)]
                     if (kind, g) == ("all-to-all", group)]
        return nbytes

    # dispatch into row-parallel FFN1 (input split over tp): each rank sends its share 1/tp
    assert all_to_all("ffn1", MODE_DIM0) == 8 * 2 * 12288 * 2 / 2
    # dispatch into FFN1 `none` (input replicated over tp): the whole routed copies
    assert all_to_all("ffn1", MODE_NONE) == 8 * 2 * 12288 * 2
    # combine after column-parallel FFN2 (output split over tp): the share 1/tp
    assert all_to_all("ffn2", MODE_DIM1) == 8 * 2 * 12288 * 2 / 2
    # `experts` on tokens split over tp (T): each rank's ceil(8 / 2) = 4 sequences travel to the
    # rank of the tp group holding their expert, top_k = 2 copies of hidden = 12288 bf16 values
    assert all_to_all("ffn1", MODE_EXPERTS_T, "tp") == 4 * 2 * 12288 * 2
    # the collector's skewed load (the default): the busiest ep group, 2 of the 16 experts, with
    # the 64 tokens of the step routed, receives I times the mean (cost.expert_load)
    skew = build_tables(load_model("moe1.6t"), H100, Workload(),
                        coarse_of(make_row(tp=2, ep=8, batch=64))[None])
    load = float(busiest(load_model("moe1.6t").ffn, 2, 64))
    assert load > 1.2
    assert all_to_all("ffn1", MODE_NONE, tab=skew) == pytest.approx(8 * 2 * 12288 * 2 * load,
                                                                     rel=1e-12)


def test_moe_dispatch_time_every_peer_at_once():
    # the ep group of tp=2, ep=8 on h100_dgx: stride 2, so 4 members in a node (3 NVLink peers)
    # and 4 nodes' members over InfiniBand. A dispatch (collectives.dispatch) posts every peer at
    # once: per level min(peers, the log-depth steps) alphas (3 and 1: a level of 2 nodes), the
    # bytes at the links' own efficiency (nvlink4 450 GB/s x 0.75, ib_ndr400 50 x 0.92; not the
    # serving all-reduces' collective_efficiency 0.42)
    S = 8 * 2 * 12288 * 2.0
    expected = 3 * 1.4e-6 + 3 / 8 * S / (450e9 * 0.75) + 1 * 4.5e-6 + 4 / 8 * S / (50e9 * 0.92)
    assert coll.dispatch(H100.links, S, 8, 2) == pytest.approx(expected, rel=1e-12)
    flat = with_expert_placement(load_model("moe1.6t"), load="uniform")
    tab = build_tables(flat, H100, Workload(), coarse_of(make_row(tp=2, ep=8, batch=64))[None])
    [(kind, group, nbytes, t)] = tab.intrinsic[(SLOT["ffn1"], MODE_NONE)]
    assert (kind, group, nbytes[0]) == ("all-to-all", "ep", S)
    assert t[0] == pytest.approx(expected, rel=1e-12)
    # 64 ranks over 8 nodes at stride 1: 7 NVLink peers (7 steps), 56 over InfiniBand in 7 steps
    # (a level of 8 nodes: the ring's 7, = 7 log2(8) / 3), where an all-to-all pays 56
    assert coll.dispatch(H100.links, 0.0, 64, 1) == pytest.approx(7 * 1.4e-6 + 7 * 4.5e-6)
    assert coll.all_to_all(H100.links, 0.0, 64, 1) == pytest.approx(7 * 1.4e-6 + 56 * 4.5e-6)


def test_all_reduce_ring_on_one_level():
    # h100_dgx [[link]] nvlink4: bandwidth_gb_s = 450, efficiency = 0.75, latency_us = 1.4; a tp
    # group of 8 inside the node: ring all-reduce 2(p-1)/p * S / B + 2(p-1) * alpha
    S = 2.0**20
    expected = 2 * 7 / 8 * S / (450e9 * 0.75) + 2 * 7 * 1.4e-6
    assert coll.all_reduce(H100.links, S, 8, 1) == pytest.approx(expected, rel=1e-12)
    # inside a serving step the cost model uses the links at collective_efficiency = 0.42: the
    # hidden-split norm (mode 1) all-reduces one fp32 sum of squares per token, 64 tokens at tp=8
    tab = build_tables(load_model("llama3.1-70b"), H100, Workload(),
                       coarse_of(make_row(tp=8, batch=64))[None])
    [(kind, group, nbytes, t)] = tab.intrinsic[(SLOT["attn_norm"], MODE_DIM1)]
    assert (kind, group, nbytes[0]) == ("all-reduce", "tp", 64 * 4)
    expected = 2 * 7 / 8 * (64 * 4) / (450e9 * 0.75 * 0.42) + 2 * 7 * 1.4e-6
    assert t[0] == pytest.approx(expected, rel=1e-12)


def test_roofline_time_max_and_smooth():
    assert roofline_time(np.array(3.0), np.array(4.0), 0) == 4.0                 # max(c, m)
    assert roofline_time(np.array(3.0), np.array(4.0), 3) == pytest.approx((3**3 + 4**3) ** (1 / 3),
                                                                            rel=1e-12)
    # an op's time in the tables: llama3.1-70b output projection, `none` at tp=1, batch 64 decode
    # on h100_dgx (bf16_tflops = 989.4, compute_efficiency = 0.80, hbm_bandwidth_tb_s = 3.35,
    # memory_efficiency = 0.81, roofline_exponent = 3, kernel_overhead_us = 3.0): a [64, 8192] x
    # [heads 64 * head_dim 128 = 8192, hidden 8192] GEMM in bf16 (2 B weights and activations)
    tab = build_tables(load_model("llama3.1-70b"), H100, Workload(),
                       coarse_of(make_row(batch=64))[None])
    at = (0, SLOT["out_proj"], MODE_NONE)
    c = 2 * 64 * 8192 * 8192 / (989.4e12 * 0.80)                       # FLOPs / achievable peak
    m = (8192 * 8192 * 2 + 64 * (8192 + 8192) * 2) / (3.35e12 * 0.81)  # weights + rows in and out
    assert (tab.compute_s[at], tab.memory_s[at]) == (pytest.approx(c, rel=1e-12),
                                                     pytest.approx(m, rel=1e-12))
    assert tab.time_s[at] == pytest.approx((c**3 + m**3) ** (1 / 3) + 3.0e-6, rel=1e-12)
