"""Hypothesis generators (``@st.composite``) and small fixed models for the cost-model tests.

- ``model_specs()``: small synthetic ModelSpec built through ``model_from_dict`` (so the loader's
  checks apply): dense or MoE (with or without shared experts and leading dense layers), GQA or
  MLA, several precisions. Divisibility the loader requires is respected by construction
  (kv_heads divides heads, top_k <= experts, dense_layers < layers, MLA head_dim = nope + rope);
  widths are multiples of 64 or powers of two, so most tp values divide them.
- ``topologies()``: a shipped topology or a synthetic one with one to three link tiers.
- ``workloads()``: decode or prefill at a drawn context.
- ``strategy_rows(model, topo)``: one strategy row drawn index by index from ``Space.for_model``.
- ``synthetic_moe()``, ``synthetic_mla()``, ``synthetic_dense()``: fixed small models;
  ``synthetic_sparse()`` the MLA one with DeepSeek Sparse Attention;
  ``synthetic_window()`` one with two layer kinds (sliding window and full attention);
  ``synthetic_linear()`` one with linear attention (Gated DeltaNet) and full attention layers.
  ``synthetic_mamba()`` one with Mamba-2 and full attention layers;
  ``synthetic_nemotron_h()`` one with layers without an FFN (Nemotron-H's blocks);
  ``synthetic_head_gate()`` one with Step-3.7's head-wise output gate and per-kind heads;
  ``synthetic_compressed()`` DeepSeek-V4's compressed attention and hyper-connections;
  ``synthetic_kda()`` Kimi-K3's Kimi Delta Attention beside gated MLA, attention residuals;
  ``synthetic_nas()`` layers without attention and FFNs of their own widths (Nemotron NAS);
  ``synthetic_partly_quantized()`` a weight group quantized in some of its layers only;
  ``synthetic_block_sparse()`` MiniMax-M3's block-sparse attention beside full attention.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from lts.specs import (load_topology, model_from_dict, shipped_names, topology_from_dict,
                       with_expert_placement)
from lts.specs.strategy import Space

SHIPPED_TOPOLOGIES = tuple(n for n in ("h100_dgx", "gb200_nvl72", "a100_dgx", "b200_dgx",
                                       "h200_dgx") if n in shipped_names("topologies"))


def synthetic_dense():
    return model_from_dict(dict(
        name="dense-small", source="test", layers=4, hidden=1024, vocab=32000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64),
        ffn=dict(kind="dense", gated=True, intermediate=4096)), "synthetic:dense-small")


def synthetic_moe():
    """GQA MoE with a shared expert and 2 leading dense layers (a dense FFN 8x wider than the
    routed part, so dense and MoE layers can pick different layouts)."""
    return model_from_dict(dict(
        name="moe-small", source="test", layers=8, hidden=2048, vocab=32000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=128),
        ffn=dict(kind="moe", gated=True, experts=16, top_k=2, expert_intermediate=512,
                 shared_experts=1, dense_layers=2, intermediate=8192)), "synthetic:moe-small")


def synthetic_moe_eplb(redundant=8):
    """``synthetic_moe`` deployed with EPLB and ``redundant`` redundant experts (24 slots: ep 3,
    6, 12 and 24 divide them, 16 does not)."""
    return with_expert_placement(synthetic_moe(), redundant, eplb=True)


def synthetic_moe_uniform():
    """``synthetic_moe`` costed with uniform routing (every expert alike)."""
    return with_expert_placement(synthetic_moe(), load="uniform")


def synthetic_mla():
    """DeepSeek-V3-like MLA MoE, scaled down: low-rank query, 1 shared expert, 1 dense layer."""
    return model_from_dict(dict(
        name="mla-small", source="test", layers=6, hidden=1024, vocab=16000,
        attention=dict(kind="mla", heads=16, kv_heads=16, head_dim=96, q_lora_rank=384,
                       kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                       v_head_dim=64),
        ffn=dict(kind="moe", gated=True, experts=32, top_k=4, expert_intermediate=256,
                 shared_experts=1, dense_layers=1, intermediate=2048)), "synthetic:mla-small")


def synthetic_sparse(index_topk=256):
    """``synthetic_mla`` with DeepSeek Sparse Attention on every layer: an indexer of 8 heads of
    64 picks ``index_topk`` keys per query (small, so that test contexts fall on both sides)."""
    return model_from_dict(dict(
        name="sparse-small", source="test", layers=6, hidden=1024, vocab=16000,
        attention=dict(kind="mla", heads=16, kv_heads=16, head_dim=96, q_lora_rank=384,
                       kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                       v_head_dim=64, index_topk=index_topk, index_heads=8, index_head_dim=64),
        ffn=dict(kind="moe", gated=True, experts=32, top_k=4, expert_intermediate=256,
                 shared_experts=1, dense_layers=1, intermediate=2048)), "synthetic:sparse-small")


def synthetic_shared_index(index_topk=256):
    """``synthetic_sparse`` over 8 layers with GLM-5.2's shared indexers (attention.indexer_types):
    the indexer on layers 0 and 4 only, layers 1-3 and 5-7 attending over their top-k. pp 1, 2
    give every stage the same indexer layers, pp 4, 8 do not."""
    return model_from_dict(dict(
        name="shared-index-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="mla", heads=16, kv_heads=16, head_dim=96, q_lora_rank=384,
                       kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                       v_head_dim=64, index_topk=index_topk, index_heads=8, index_head_dim=64,
                       indexer_types=["full", "shared", "shared", "shared"] * 2),
        ffn=dict(kind="moe", gated=True, experts=32, top_k=4, expert_intermediate=256,
                 shared_experts=1, dense_layers=2, intermediate=2048)),
        "synthetic:shared-index-small")


def synthetic_window():
    """gpt-oss-like layer kinds, scaled down: a sliding window of 512 tokens on every other
    layer (the first of each pair), full attention on the others; MoE in every layer. 8 layers:
    pp 1, 2, 4 give every stage both kinds alike, pp 8 does not (one layer a stage)."""
    return model_from_dict(dict(
        name="window-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, sliding_window=512,
                       layer_types=["sliding_attention", "full_attention"]),
        ffn=dict(kind="moe", gated=True, experts=8, top_k=2, expert_intermediate=512)),
        "synthetic:window-small")


def synthetic_linear():
    """Qwen3.5-like layer kinds, scaled down: three linear-attention (Gated DeltaNet) layers then
    one full-attention layer with an output gate, repeated; MoE with a shared expert. 8 layers:
    pp 1, 2 give every stage both kinds alike, pp 4, 8 do not."""
    return model_from_dict(dict(
        name="linear-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64, output_gate=True,
                       layer_types=["linear_attention"] * 3 + ["full_attention"]),
        linear_attention=dict(key_heads=4, value_heads=8, key_head_dim=64, value_head_dim=64,
                              conv_kernel=4),
        ffn=dict(kind="moe", gated=True, experts=8, top_k=2, expert_intermediate=512,
                 shared_experts=1)), "synthetic:linear-small")


def synthetic_mamba(**precision):
    """Nemotron-H-like layer kinds, scaled down: three Mamba-2 layers then one full-attention
    layer, repeated (each with lts's FFN slot: a dense gated FFN). 8 layers: pp 1, 2 give every
    stage both kinds alike, pp 4, 8 do not. ``precision``: its [precision] table."""
    return model_from_dict(dict(**({"precision": precision} if precision else {}),
        name="mamba-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64,
                       layer_types=["mamba"] * 3 + ["full_attention"]),
        mamba=dict(heads=16, head_dim=64, state_size=128, groups=2, conv_kernel=4,
                   chunk_size=128),
        ffn=dict(kind="dense", gated=True, intermediate=2048)), "synthetic:mamba-small")


def nemotron_h_like(name, **ffn):
    """Nemotron-H-like blocks, scaled down: the pattern M * E M E (Nemotron 3's "MEM*E": a
    Mamba-2 block with no FFN block after it, then attention + MoE, then Mamba-2 + MoE) as lts
    layers [mamba alone, full + MoE, mamba + MoE], repeated; MoE of non-gated (relu2) experts
    with a shared expert (``ffn`` changes its keys). 6 layers: pp 1, 2 give every stage the
    same layers, ending with an FFN; pp 3 does not (a stage ending with a layer without an
    FFN), pp 6 neither."""
    return model_from_dict(dict(
        name=name, source="test", layers=6, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64,
                       layer_types=["mamba", "full_attention", "mamba"]),
        mamba=dict(heads=16, head_dim=64, state_size=128, groups=2, conv_kernel=4,
                   chunk_size=128),
        ffn=dict(kind="moe", gated=False, experts=8, top_k=2, expert_intermediate=512,
                 shared_experts=1, no_ffn_layers=[0, 3]) | ffn), f"synthetic:{name}")


def synthetic_nemotron_h():
    """nemotron_h_like: 8 experts top-2 of 512, a shared expert of 512."""
    return nemotron_h_like("nemotron-h-small")


def synthetic_latent_moe():
    """nemotron_h_like with a latent MoE (Nemotron 3 Super's moe_latent_size, scaled down):
    the experts [256, 512] in a 256-wide latent between fc1_latent_proj [1024 -> 256] and
    fc2_latent_proj [256 -> 1024]; 16 experts top-4 (ep 2 and 4 split them), a shared expert
    of 1024."""
    return nemotron_h_like("latent-moe-small", experts=16, top_k=4, shared_intermediate=1024,
                           latent=256)


def synthetic_shapes():
    """Layer kinds with their own attention shapes, scaled down: Gemma-4-like full layers (128-wide
    heads, 2 KV heads, V made by k_proj: k_eq_v) between MiMo-V2-Flash-like sliding ones (a V
    narrower than Q and K, sinks, more KV heads); MoE with a shared expert. 8 layers alternating:
    pp 1, 2, 4 give every stage both kinds alike, pp 8 does not."""
    return model_from_dict(dict(
        name="shapes-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, v_head_dim=48,
                       sliding_window=512, sinks=True,
                       layer_types=["sliding_attention", "full_attention"],
                       full=dict(kv_heads=2, head_dim=128, v_head_dim=0, k_eq_v=True,
                                 sinks=False)),
        ffn=dict(kind="moe", gated=True, experts=8, top_k=2, expert_intermediate=512,
                 shared_experts=1, shared_intermediate=768)),
        "synthetic:shapes-small")


def synthetic_chunked():
    """Llama-4-Maverick-like layer kinds, scaled down: chunked local attention of 512 tokens on
    three layers of four, full attention on the fourth; MoE with a shared expert on every other
    layer (ffn.moe_every 2), dense FFNs between. 8 layers: pp 1, 2 give every stage both kinds
    alike, pp 4, 8 do not."""
    return model_from_dict(dict(
        name="chunked-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, chunk_size=512,
                       layer_types=["chunked_attention"] * 3 + ["full_attention"]),
        ffn=dict(kind="moe", gated=True, experts=8, top_k=2, expert_intermediate=512,
                 shared_experts=1, moe_every=2, intermediate=2048)), "synthetic:chunked-small")


def synthetic_head_gate():
    """Step-3.7-like layer kinds, scaled down: a full-attention layer then three sliding-window
    layers of 512 tokens with more query heads (24 against 16, ``[attention.sliding]``), a
    head-wise output gate on every layer (``head_gate``: one sigmoid a query head); 2 dense
    layers, then MoE with a shared expert. 8 layers: pp 1, 2 give every stage both kinds alike,
    pp 4, 8 do not."""
    return model_from_dict(dict(
        name="head-gate-small", source="test", layers=8, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, sliding_window=512,
                       head_gate=True,
                       layer_types=["full_attention"] + ["sliding_attention"] * 3,
                       sliding=dict(heads=24)),
        ffn=dict(kind="moe", gated=True, experts=16, top_k=4, expert_intermediate=256,
                 shared_experts=1, dense_layers=2, intermediate=2048)),
        "synthetic:head-gate-small")


def synthetic_compressed(**attention):
    """DeepSeek-V4-like, scaled down: compressed attention (one 128-wide KV entry, q through a
    256-wide low rank, the output through 4 groups of a 128-wide low rank, a window of 64) with
    layers of ratio 0 (the window alone), 4 (CSA: an indexer of 4 heads of 64 picks 32
    entries) and 16 (HCA), repeated; hyper-connections of 4 copies; MoE with a shared expert on
    every layer. 6 layers: pp 1, 2 give every stage the three kinds, pp 3, 6 do not."""
    att = dict(kind="compressed", heads=16, kv_heads=1, head_dim=128, q_lora_rank=256,
               qk_rope_head_dim=32, o_lora_rank=128, o_groups=4, sliding_window=64, sinks=True,
               compress_ratios=[0, 4, 16] * 2, index_topk=32, index_heads=4, index_head_dim=64,
               index_ratio=4)
    att.update(attention)
    return model_from_dict(dict(
        name="compressed-small", source="test", layers=6, hidden=1024, vocab=16000, hc_mult=4,
        attention=att,
        ffn=dict(kind="moe", gated=True, experts=16, top_k=2, expert_intermediate=256,
                 shared_experts=1)), "synthetic:compressed-small")


def synthetic_kda():
    """Kimi-K3-like layer kinds, scaled down: three Kimi Delta Attention layers (8 heads of 64,
    the decay through rank 64, a full-rank output gate) then one MLA layer with an output gate,
    repeated; attention residuals over blocks of 3 layers; a dense first layer, then a latent
    MoE (16 experts top-4 in a 256-wide latent) with a shared expert. 8 layers: pp 1, 2 give
    every stage both kinds alike, pp 4, 8 do not."""
    return model_from_dict(dict(
        name="kda-small", source="test", layers=8, hidden=1024, vocab=16000, attn_res_block=3,
        attention=dict(kind="mla", heads=16, kv_heads=16, head_dim=96, q_lora_rank=384,
                       kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                       v_head_dim=64, output_gate=True,
                       layer_types=["linear_attention"] * 3 + ["full_attention"]),
        linear_attention=dict(kind="kda", key_heads=8, value_heads=8, key_head_dim=64,
                              value_head_dim=64, conv_kernel=4, decay_rank=64),
        ffn=dict(kind="moe", gated=True, experts=16, top_k=4, expert_intermediate=256,
                 shared_experts=1, dense_layers=1, intermediate=2048, latent=256)),
        "synthetic:kda-small")


def synthetic_nas():
    """Llama-Nemotron-NAS-like layers, scaled down: a dense model whose every third layer has
    no attention (DeciLM's no_op: the FFN alone) and whose FFNs have three widths. 6 layers:
    pp 1, 2 give every stage the same layers and widths, pp 3, 6 do not."""
    return model_from_dict(dict(
        name="nas-small", source="test", layers=6, hidden=1024, vocab=16000,
        attention=dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
                       layer_types=["full_attention", "full_attention", "no_attention"]),
        ffn=dict(kind="dense", gated=True,
                 intermediate_by_layer=[4096, 1536, 512, 1536, 4096, 512])),
        "synthetic:nas-small")


def synthetic_block_sparse(**attention):
    """MiniMax-M3-like, scaled down: GQA of 16 heads over 4 KV heads of 64, a full-attention
    layer then two block-sparse ones, repeated: blocks of 64 tokens, each KV head attending to
    its top 4 (256 keys at most), picked by an indexer of 8 heads of 64 (two a KV head); MoE
    with a shared expert on every layer. 6 layers: pp 1, 2 give every stage both kinds alike,
    pp 3, 6 do not."""
    att = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
               layer_types=["full_attention"] + ["block_sparse_attention"] * 2,
               sparse_block_size=64, sparse_topk_blocks=4, index_heads=8, index_head_dim=64)
    att.update(attention)
    return model_from_dict(dict(
        name="block-sparse-small", source="test", layers=6, hidden=1024, vocab=16000,
        attention=att,
        ffn=dict(kind="moe", gated=True, experts=16, top_k=2, expert_intermediate=256,
                 shared_experts=1)), "synthetic:block-sparse-small")


def synthetic_partly_quantized():
    """``synthetic_mamba`` in fp8 with its Mamba-2 mixers quantized in half of their layers
    (``precision.quantized_share``: NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4's exclude list, 6 of
    its 23 Mamba blocks kept bf16), the attention layers bf16."""
    return synthetic_mamba(weights="fp8", unquantized=["attention"],
                           quantized_share={"ssm": 0.5})


@st.composite
def model_specs(draw, kinds=("dense", "moe"), attention=("gqa", "mla")):
    layers = draw(st.integers(1, 8))
    hidden = 64 * draw(st.integers(1, 32))
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    att_kind = draw(st.sampled_from(attention))
    if att_kind == "gqa":
        kv_heads = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32, 64) if heads % d == 0]))
        att = dict(kind="gqa", heads=heads, kv_heads=kv_heads,
                   head_dim=draw(st.sampled_from([32, 64, 128])))
    else:
        nope = draw(st.sampled_from([32, 64, 128]))
        rope = draw(st.sampled_from([16, 32, 64]))
        att = dict(kind="mla", heads=heads, kv_heads=heads, head_dim=nope + rope,
                   q_lora_rank=draw(st.sampled_from([0, 128, 384])),
                   kv_lora_rank=draw(st.sampled_from([64, 128, 512])),
                   qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                   v_head_dim=draw(st.sampled_from([32, 64, 128])))
    kind = draw(st.sampled_from(kinds))
    gated = draw(st.booleans())
    if kind == "dense":
        ffn = dict(kind="dense", gated=gated, intermediate=64 * draw(st.integers(1, 128)))
    else:
        experts = draw(st.sampled_from([2, 4, 8, 16, 32, 64, 128]))
        dense_layers = draw(st.integers(0, layers - 1))
        ffn = dict(kind="moe", gated=gated, experts=experts,
                   top_k=draw(st.integers(1, min(8, experts))),
                   expert_intermediate=64 * draw(st.integers(1, 64)),
                   shared_experts=draw(st.integers(0, 2)), dense_layers=dense_layers)
        if dense_layers:
            ffn["intermediate"] = 64 * draw(st.integers(1, 128))
    precision = dict(weights=draw(st.sampled_from(["bf16", "fp8", "fp4"])),
                     kv_cache=draw(st.sampled_from(["bf16", "fp8"])), activations="bf16")
    data = dict(name="synthetic", source="hypothesis", layers=layers, hidden=hidden,
                vocab=draw(st.sampled_from([1000, 32000, 128256])),
                tie_embeddings=draw(st.booleans()), attention=att, ffn=ffn, precision=precision)
    return model_from_dict(data, "hypothesis")


@st.composite
def synthetic_topologies(draw):
    """A cluster with one to three link tiers, innermost first, spans strictly increasing."""
    per_node = draw(st.sampled_from([1, 2, 4, 8, 16, 72]))
    nodes = draw(st.sampled_from([1, 2, 8, 64, 512]))
    gpus = per_node * nodes
    spans = sorted({s for s in (draw(st.sampled_from([2, 4])), per_node) if 1 < s < gpus})
    spans.append(gpus)
    links = [dict(name=f"tier{i}", span_gpus=span,
                  bandwidth_gb_s=draw(st.floats(5.0, 2000.0)),
                  latency_us=draw(st.floats(0.0, 20.0)),
                  efficiency=draw(st.floats(0.1, 1.0)))
             for i, span in enumerate(spans)]
    gpu = dict(name="gpu", bf16_tflops=draw(st.floats(10.0, 5000.0)),
               fp8_tflops=draw(st.floats(10.0, 10000.0)),
               hbm_gib=draw(st.floats(8.0, 300.0)), hbm_bandwidth_tb_s=draw(st.floats(0.5, 10.0)),
               compute_efficiency=draw(st.floats(0.1, 1.0)),
               memory_efficiency=draw(st.floats(0.1, 1.0)),
               kernel_overhead_us=draw(st.floats(0.0, 10.0)), hbm_reserve_gib=1.0)
    # optional calibration keys: absent (the defaults) or drawn
    if draw(st.booleans()):
        gpu.update(fp8_compute_efficiency=draw(st.floats(0.1, 1.0)),
                   fp8_memory_efficiency=draw(st.floats(0.1, 1.0)),
                   step_overhead_us=draw(st.floats(0.0, 10000.0)),
                   roofline_exponent=draw(st.sampled_from([1.0, 2.0, 3.0, 8.0])),
                   collective_efficiency=draw(st.floats(0.1, 1.0)))
    if draw(st.booleans()):
        # per-format dense GEMM rates and grouped MoE GEMM rates ramping with tokens per expert
        eff = st.floats(0.05, 1.0)
        n = draw(st.integers(1, 4))
        points = sorted(set(draw(st.lists(st.floats(1.0, 4096.0), min_size=n, max_size=n))))
        gpu["gemm"] = {f: {"compute": draw(eff), "memory": draw(eff)}
                       for f in draw(st.sets(st.sampled_from(["bf16", "fp8_block", "nvfp4"])))}
        gpu["grouped_gemm"] = {"tokens_per_expert": points, **{
            f: {"compute": [draw(eff) for _ in points], "memory": draw(eff)}
            for f in ("bf16", "fp8", "fp8_block", "nvfp4")}}
    return topology_from_dict(dict(name="synthetic", source="hypothesis", gpu=gpu,
                                   node=dict(gpus=per_node, count=nodes), link=links),
                              "hypothesis")


def topologies():
    return st.one_of(st.sampled_from(SHIPPED_TOPOLOGIES).map(load_topology),
                     synthetic_topologies())


@st.composite
def workloads(draw):
    from lts.specs.workload import Workload
    phase = draw(st.sampled_from(["decode", "prefill"]))
    return Workload(phase=phase, context=draw(st.sampled_from([1, 17, 512, 4096, 16384, 65536])),
                    tpot_slo_ms=draw(st.sampled_from([1.0, 50.0, 1e6])),
                    ttft_slo_ms=draw(st.sampled_from([0.0, 100.0])))


def space_for(model, topo, max_batch=4096):
    return Space.for_model(model, topo.gpus, max_batch=max_batch)


@st.composite
def strategy_rows(draw, model, topo, max_batch=4096):
    """One strategy row [WIDTH] of Space.for_model(model, topo.gpus): one index per head."""
    space = space_for(model, topo, max_batch)
    idx = [draw(st.integers(0, size - 1)) for size in space.sizes]
    return space.decode(np.array([idx], dtype=np.int64))[0]


@st.composite
def problems(draw, models=None, n_max=12):
    """(model, topology, workload, strategies [n, WIDTH]) with 1..n_max strategy rows."""
    model = draw(models if models is not None else model_specs())
    topo = draw(topologies())
    work = draw(workloads())
    rows = draw(st.lists(strategy_rows(model, topo), min_size=1, max_size=n_max))
    return model, topo, work, np.stack(rows)


def with_link_factors(topo, bandwidth=None, efficiency=None, latency=None):
    """A copy of ``topo`` whose link i has bandwidth, efficiency (capped at 1) and latency
    multiplied by the i-th factor of each sequence given."""
    n = len(topo.links)
    bandwidth, efficiency, latency = (f if f is not None else (1.0,) * n
                                      for f in (bandwidth, efficiency, latency))
    links = tuple(dataclasses.replace(link, bandwidth_bytes_s=link.bandwidth_bytes_s * b,
                                      efficiency=min(1.0, link.efficiency * e),
                                      latency_s=link.latency_s * a)
                  for link, b, e, a in zip(topo.links, bandwidth, efficiency, latency))
    return dataclasses.replace(topo, links=links)
