"""Latent MoE (issue 22: Nemotron 3 Super and Ultra, ``moe_latent_size``; ``ffn.latent``): the
routed experts read and write a ``latent``-wide vector, between a shared fc1_latent_proj
[hidden -> latent] before dispatch and fc2_latent_proj [latent -> hidden] after combine; the
router and the shared expert stay at hidden width (transformers modeling_nemotron_h.py
NemotronHMoE / NemotronHExperts). Closed forms for the parameters, the FFN ops' FLOPs, weights
and dispatch bytes; the dispatch at latent width for any strategy (hypothesis); the exact
solver equal to brute force; the real configs against their cards. The op-by-op comparison
with tests/reference.py runs in test_costmodel_reference.py (model latent-moe-small)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import nemotron_h_like, strategy_rows, synthetic_latent_moe
from lts.cost.layouts import MODE_DIM1, MODE_NONE, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.specs import (SpecError, load_model, load_topology, model_from_dict, param_counts,
                       weight_params, with_expert_placement)
from lts.specs.strategy import N_COARSE, make_row
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force

H100 = load_topology("h100_dgx")
DATA = "tests/data/hf"
H, E, K, EI, SI, L = 1024, 16, 4, 512, 1024, 256     # synthetic_latent_moe's shapes
MOE_LAYERS = 4                                       # 6 layers, 2 without an FFN


def without_latent(m):
    """The same model with its experts at hidden width (no latent projections)."""
    return nemotron_h_like("m", experts=E, top_k=K, shared_intermediate=SI)


def test_latent_from_a_model_file():
    m = synthetic_latent_moe()
    assert m.ffn.latent == L and m.ffn.expert_width(H) == L
    assert without_latent(m).ffn.latent == 0 and without_latent(m).ffn.expert_width(H) == H


@pytest.mark.parametrize("value, message", [
    (-1, "-1 must be >= 0"),
    (2048, "2048 is wider than hidden = 1024 (the experts' latent width, at most "
             "hidden)"),
])
def test_latent_errors(value, message):
    d = json.loads(json.dumps({
        "name": "m", "source": "t", "layers": 2, "hidden": 1024, "vocab": 100,
        "attention": {"kind": "gqa", "heads": 8, "kv_heads": 8, "head_dim": 128},
        "ffn": {"kind": "moe", "gated": False, "experts": 4, "top_k": 1,
                "expert_intermediate": 64, "latent": value}}))
    with pytest.raises(SpecError) as e:
        model_from_dict(d, "m.toml")
    assert str(e.value) == f"m.toml: ffn.latent: {message}"


# ----------------------------------------------------------------------------------------------
# closed forms

def test_parameters_of_a_latent_moe():
    """Per MoE layer: E experts of up and down [L, EI] (relu2: two matrices), the shared
    expert's two [H, SI], the router [H, E], fc1 and fc2_latent_proj [H, L] each; active: K
    experts. The weight groups: the latent projections in shared_experts."""
    m, b = synthetic_latent_moe(), without_latent(synthetic_latent_moe())
    pm, pb = param_counts(m), param_counts(b)
    assert pb["params_total"] - pm["params_total"] == \
        MOE_LAYERS * (E * 2 * (H - L) * EI - 2 * H * L)
    assert pb["params_active"] - pm["params_active"] == \
        MOE_LAYERS * (K * 2 * (H - L) * EI - 2 * H * L)
    w = weight_params(m)
    assert w["experts"] == MOE_LAYERS * E * 2 * L * EI
    assert w["shared_experts"] == MOE_LAYERS * (2 * H * SI + 2 * H * L)
    assert w["router"] == MOE_LAYERS * H * E
    assert sum(w.values()) == pm["params_total"]


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_ffn_ops_of_a_latent_moe(phase):
    """tp 1, ep 1 (Megatron's modes: FFN1 column split, FFN2 row split, whole at tp 1): the
    FFN1 FLOPs are 2 tokens (K L EI + H SI + H L) against 2 tokens (K H EI + H SI) at hidden
    width (the compute times' ratio, at one rate); its weights are every expert's up [L, EI],
    the shared expert's up and fc1_latent_proj, in bf16."""
    m = synthetic_latent_moe()
    b = without_latent(m)
    work = Workload(phase, 2048)
    row = make_row(batch=8)[None, :N_COARSE]
    one_rate = dataclasses.replace(H100, grouped={})   # the experts at the dense rate, not the grouped ramp
    tm, tb = build_tables(m, one_rate, work, row), build_tables(b, one_rate, work, row)
    sl = SLOT["ffn1"]
    ratio = (K * L * EI + H * SI + H * L) / (K * H * EI + H * SI)
    assert tm.compute_s[0, sl, MODE_DIM1] / tb.compute_s[0, sl, MODE_DIM1] == \
        pytest.approx(ratio, rel=1e-12)
    assert tm.weight_bytes[0, sl, MODE_DIM1] == (E * L * EI + H * SI + H * L) * 2.0
    assert tm.weight_bytes[0, SLOT["ffn2"], MODE_NONE] == (E * EI * L + SI * H + L * H) * 2.0


def test_latent_projections_are_replicated_over_tp():
    """tp 4 (Megatron's modes): the experts and the shared expert split by their intermediate
    width, fc1_latent_proj whole on every rank (vLLM's ReplicatedLinear); the FFN1 weights a
    GPU holds at ep 1: (E L EI / 4 + H SI / 4 + H L) x 2 bytes."""
    m = synthetic_latent_moe()
    tab = build_tables(m, H100, Workload("decode", 4096), make_row(tp=4, batch=8)[None, :N_COARSE])
    assert tab.weight_bytes[0, SLOT["ffn1"], MODE_DIM1] == \
        (E * L * EI / 4 + H * SI / 4 + H * L) * 2.0


def _a2a(tab, slot):
    """{mode: bytes of its ep all-to-all} of one op (row 0)."""
    out = {}
    for (sl, mode), recs in tab.intrinsic.items():
        if sl == SLOT[slot]:
            out[mode] = sum(float(nb[0]) for kind, group, nb, _ in recs
                            if kind == "all-to-all" and group == "ep")
    return out


def test_dispatch_at_latent_width():
    """ep 4, tp 1, decode of 64 sequences: each dispatch and combine moves every routed copy of
    a token at latent width, 64 x K x L x 2 bytes (bf16), not 64 x K x H x 2 (under uniform
    routing: the skewed load's busiest group receives I times that, cost.expert_load)."""
    m = with_expert_placement(synthetic_latent_moe(), load="uniform")
    tab = build_tables(m, H100, Workload("decode", 4096), make_row(ep=4, batch=64)[None, :N_COARSE])
    rows = 64 / 4                                   # the tokens of one ep rank's sequences
    a = _a2a(tab, "ffn1")
    assert a[MODE_DIM1] == rows * K * L * 2.0
    assert _a2a(tab, "ffn2")[MODE_NONE] == rows * K * L * 2.0


@settings(max_examples=40, deadline=None)
@given(data=st.data(), phase=st.sampled_from(["decode", "prefill"]))
def test_dispatch_bytes_scale_by_latent_over_hidden(data, phase):
    """Any strategy, any mode: the latent MoE's dispatch and combine all-to-alls move L/H of
    the bytes the same MoE moves at hidden width, and its routed experts' weights per GPU are
    never more."""
    m = synthetic_latent_moe()
    b = without_latent(m)
    rows = np.stack(data.draw(st.lists(strategy_rows(m, H100, max_batch=512), min_size=1,
                                       max_size=6)))[:, :N_COARSE]
    work = Workload(phase, 2048)
    tm, tb = build_tables(m, H100, work, rows), build_tables(b, H100, work, rows)
    for (sl, mode), recs in tm.intrinsic.items():
        if sl not in (SLOT["ffn1"], SLOT["ffn2"]):
            continue
        for (kind, group, nb, _), (_, _, nb2, _) in zip(recs, tb.intrinsic[(sl, mode)]):
            if kind == "all-to-all":
                assert np.allclose(nb, nb2 * L / H, rtol=1e-12)


@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_with_a_latent_moe(work):
    exact_equals_brute_force(synthetic_latent_moe(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# the real configs

def test_nemotron_3_super_config():
    """NVIDIA-Nemotron-3-Super-120B-A12B (a copy of its config.json): 88 blocks, 40 Mamba-2,
    8 attention, 40 latent MoE (512 experts top-22 of 2688 in a latent of 1024, hidden 4096, a
    shared expert of 5376). The card (huggingface.co/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8,
    "120B total / 12B active"; NVIDIA's technical report: "12B active 120B total parameter")
    counts 120B total; lts 120.67B (the MTP layer, ~3B, counted apart: HF's 124B counts it).
    Active: lts 12.77B with the embedding and LM head (1.07B), 11.7B without them, the card's
    rounded 12B."""
    m = load_model(f"{DATA}/nemotron-3-super-120b-a12b.json")
    f = m.ffn
    assert (f.experts, f.top_k, f.expert_intermediate, f.shared_intermediate, f.latent) == \
        (512, 22, 2688, 5376, 1024)
    assert m.moe_layers == 40 and m.layers == 48 and len(m.no_ffn) == 8
    p = param_counts(m)
    assert p["params_total"] == pytest.approx(120e9, rel=0.02)
    assert p["params_active"] - 2 * m.vocab * m.hidden == pytest.approx(12e9, rel=0.05)
    res = evaluate(m, H100, Workload("decode", 16384), make_row(ep=8, batch=64)[None])
    assert res.valid[0]


def test_nemotron_3_ultra_config():
    """NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 (a copy of its config.json, layers_block_type):
    512 experts top-22 of 5120 in a latent of 2048, hidden 8192. The card
    (huggingface.co/nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16, "550B total / 55B active"):
    lts 549.3B total, 56.1B active."""
    m = load_model(f"{DATA}/nemotron-3-ultra-550b-a55b.json")
    assert (m.ffn.latent, m.ffn.expert_intermediate, m.hidden) == (2048, 5120, 8192)
    p = param_counts(m)
    assert p["params_total"] == pytest.approx(550e9, rel=0.02)
    assert p["params_active"] == pytest.approx(55e9, rel=0.02)


def test_shipped_toml_is_the_config_written_out():
    """models/nemotron-3-super-120b-a12b.toml has the config.json copy's shape (the TOML adds
    the FP8 checkpoint's precision, which hf_quant_config.json gives, and the card's counts)."""
    def strip(m):
        return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                                   active_params_published=0.0, precision=None)
    shipped = load_model("nemotron-3-super-120b-a12b")
    assert strip(shipped) == strip(load_model(f"{DATA}/nemotron-3-super-120b-a12b.json"))
    p = shipped.precision
    assert (p.weights, p.kv_cache, p.unquantized) == ("fp8", "fp8", ("embedding", "router", "norm"))
    assert shipped.params_published == 120e9
