"""Kimi-K3 (issue 36): Kimi Delta Attention (``[linear_attention] kind = "kda"``) beside MLA layers
with an output gate, attention residuals (``attn_res_block``) and a latent MoE after a dense
layer: read and refused with exact messages, weights in closed form, the exact solver equal to
brute force (the scalar reference walks each layer: tests/test_costmodel_reference.py,
``kda-small``), the decode recurrence against measured kernels at two shapes, and Kimi-K3's
config.json against its published counts."""
import dataclasses

import pytest

from generators import synthetic_kda
from lts.cost import kv
from lts.cost.layouts import MODE_DIM0, SLOT
from lts.cost.tables import build_tables
from lts.specs import (attention_params, linear_params, load_model, load_topology, param_counts,
                       res_params)
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import EXACT_WORKS, exact_equals_brute_force

H = 1024


def test_kda_projections_in_closed_form():
    m = synthetic_kda()
    g = m.linear
    kd = vd = 8 * 64
    assert g.kda and g.decay_rank == 64 and g.gate_rank == 0
    # q, k, v, a full-rank output gate g, beta a head, the decay's f_a [H -> 64], f_b [64 -> kd]
    assert g.in_proj(H) == {"key": (H * 2 * kd + 64 * kd, 3 * kd),
                            "value": (H * vd + H * vd + H * 8, 2 * vd + 8),
                            "repl": (H * 64, 64)}
    p = linear_params(m)
    assert p["qkv"] == H * (4 * kd + 8 + 64) + 64 * kd
    assert p["o"] == vd * H and p["conv"] == 3 * kd * 4 and p["other"] == kd + 8 + 64
    # a low-rank output gate: g_a [H -> r] replicated, g_b [r -> vd] by value heads
    low = dataclasses.replace(g, gate_rank=32)
    assert low.in_proj(H)["value"] == (H * vd + 32 * vd + H * 8, 2 * vd + 8)
    assert low.in_proj(H)["repl"] == (H * (64 + 32), 96)
    # the recurrent state is Gated DeltaNet's shape: heads x dk x dv fp32, conv over q, k, v
    assert kv.state_bytes(m) == (8 * 64 * 64 * 4.0, 3 * (3 * kd) * 2.0)


def test_mla_output_gate_and_attention_residuals_in_closed_form():
    m = synthetic_kda()
    plain = dataclasses.replace(m, attention=dataclasses.replace(m.attention, output_gate=False))
    # g_proj [hidden, heads v_head_dim]
    assert attention_params(m)["qkv"] - attention_params(plain)["qkv"] == H * 16 * 64
    # attention residuals over blocks of 3: a layer l's points mix floor(l / 3) snapshots and
    # the stream, 8 layers: (1 + 1 + 1 + 2 + 2 + 2 + 3 + 3) / 8; the output point 8 // 3 + 1
    assert m.res_rows() == 15 / 8 and m.res_rows(final=True) == 3
    assert res_params(m) == (2 * 8 + 1) * 2 * H
    assert res_params(dataclasses.replace(m, attn_res_block=0)) == 0


@pytest.mark.parametrize("change, key, message", [
    (dict(kind="kda"), "linear_attention.decay_rank", "missing (expected an integer)"),
    (dict(gate_rank=8), "linear_attention.gate_rank",
     "is only supported with kind = \"kda\" (Kimi Delta Attention)"),
])
def test_bad_kda_is_refused(change, key, message):
    from lts.specs import SpecError, model_from_dict
    lin = dict(key_heads=4, value_heads=4, key_head_dim=64, value_head_dim=64, conv_kernel=4)
    lin.update(change)
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="k", source="t", layers=4, hidden=H, vocab=100,
                             attention=dict(kind="gqa", heads=8, kv_heads=2, head_dim=64,
                                            layer_types=["linear_attention", "full_attention"]),
                             linear_attention=lin,
                             ffn=dict(kind="dense", gated=True, intermediate=2048)), "k.toml")
    assert str(e.value) == f"k.toml: {key}: {message}"


@pytest.mark.parametrize("work", EXACT_WORKS)
def test_exact_equals_brute_force_with_kda(work):
    exact_equals_brute_force(synthetic_kda(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# Kimi-K3's config.json
#
# tests/data/hf/kimi-k3.json: huggingface.co/moonshotai/Kimi-K3 config.json as a public serving
# tool bundles it (ai-dynamo/aiconfigurator at 095f58a5, aic-core/src/aiconfigurator_core/
# model_configs/moonshotai--Kimi-K3_config.json). Published: "2.8T total / 104B activated, 93
# (69 KDA + 24 Gated MLA)" (docs.nvidia.com/nemo/automodel/model-coverage/large-language-
# models/moonshotai/kimi-k3), the vision tower apart.

K3 = "tests/data/hf/kimi-k3.json"


def test_the_shipped_file_is_its_config():
    """models/kimi-k3.toml and the config.json import: the same model."""
    def strip(m):
        return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                                   active_params_published=0.0)
    assert strip(load_model("kimi-k3")) == strip(load_model(K3))


def test_kimi_k3_against_its_published_counts():
    m = load_model(K3)
    assert (m.layers, m.linear_layers, m.attn_res_block) == (93, 69, 12)
    # the lists are 1-based: MLA on layers 3, 7, ..., 91 and 92 (0-based)
    assert [i for i, t in enumerate(m.layer_types) if t == "full_attention"] == \
        list(range(3, 92, 4)) + [92]
    a, g, f = m.attention, m.linear, m.ffn
    assert (a.kind, a.heads, a.output_gate, g.kda, g.key_heads, g.decay_rank) == \
        ("mla", 96, True, True, 96, 128)
    assert (f.experts, f.top_k, f.latent, f.shared_intermediate, f.dense_layers,
            f.intermediate) == (896, 16, 3584, 6144, 1, 33792)
    # only the routed experts are MXFP4 (the ignore list and SGLang's quant_config=None)
    p = m.precision
    assert p.format_of("experts") == "mxfp4"
    assert {p.format_of(x) for x in ("attention", "router", "shared_experts", "dense_ffn",
                                     "lm_head")} == {"bf16"}
    counts = param_counts(m)
    assert abs(counts["params_total"] / 2.8e12 - 1) < 0.03, counts
    assert abs((counts["params_active"] - m.vocab * m.hidden) / 104e9 - 1) < 0.03, counts
    assert "vision tower (vision_config) has 0.45B parameters" in m.source


# ----------------------------------------------------------------------------------------------
# the recurrence against measured kernels
#
# shared/data/kernels/{h200_sxm,b200_sxm}/kda/vllm/0.1.dev19262/kda_perf.parquet, op
# fused_kda_decode (the conv update, the recurrence and the gated norm of one decode step),
# generation, batch 64, num_k_heads = num_v_heads 96 (Kimi-K3 at tp 1), head dims 128:
# 0.2264 ms on H200, 0.1479 ms on B200. lts's scores (the recurrence) and context (the conv and
# the gated norm) ops of a KDA layer at the same shape (a model of 92 KDA layers and one MLA
# layer, the MLA share taken out) stay within 25%: both are the fp32 state's traffic.

MEASURED_DECODE = {"h200_dgx": 0.2264e-3, "b200_dgx": 0.1479e-3}


@pytest.mark.parametrize("topo", sorted(MEASURED_DECODE))
def test_kda_decode_against_the_measured_kernel(topo):
    m = load_model(K3)
    heavy = dataclasses.replace(m, layer_types=("linear_attention",) * 92 + ("full_attention",))
    full = dataclasses.replace(m, layer_types=())
    t = load_topology(topo)

    def mixer(model):
        tab = build_tables(model, t, Workload("decode", context=4096),
                           coarse_of(make_row(batch=64))[None])
        return sum(tab.time_s[0, SLOT[x], MODE_DIM0] for x in ("scores", "context"))
    kda = (mixer(heavy) - mixer(full) / 93) * 93 / 92
    assert abs(kda / MEASURED_DECODE[topo] - 1) < 0.25, kda
