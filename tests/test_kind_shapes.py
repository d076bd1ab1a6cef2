"""Attention shapes by layer kind (issue 22): [attention.sliding] / [attention.full] give the layers
of one kind their own heads, KV heads, head widths, a V of its own width (MiMo-V2-Flash) or none
(k_eq_v: Gemma 4's full layers), read and refused with exact messages; each kind's bytes per
token, weights and FLOPs in closed form; a window never costs more than full attention in the
same shapes; the exact solver equals brute force on a model with two shapes. (The scalar
reference walks each layer in its own shape: tests/test_costmodel_reference.py, model
``shapes-small``.)"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_shapes
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.tables import build_tables
from lts.search.exact import _Exact
from lts.specs import SpecError, attention_params, load_topology, model_from_dict, param_counts
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force, never_costs_more

H100 = load_topology("h100_dgx")
H, W = 1024, 512
# synthetic_shapes: sliding layers Q 16 x 64, K 4 x 64, V 4 x 48, sinks; full layers Q 16 x 128,
# K 2 x 128, V made by k_proj (cached apart: 2 x 128)
SLIDE_K, SLIDE_V = 4 * 64 * 2, 4 * 48 * 2
FULL_K = FULL_V = 2 * 128 * 2


def shapes(**att):
    base = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, sliding_window=W,
                layer_types=["sliding_attention", "full_attention"])
    base.update(att)
    return model_from_dict(dict(name="s", source="test", layers=4, hidden=H, vocab=1000,
                                attention=base,
                                ffn=dict(kind="dense", gated=True, intermediate=4096)), "s.toml")


# ----------------------------------------------------------------------------------------------
# reading

def test_kind_tables_from_a_model_file():
    m = synthetic_shapes()
    a = m.attention
    assert (a.heads, a.kv_heads, a.head_dim, a.v_dim, a.sinks, a.k_eq_v) == (16, 4, 64, 48, True,
                                                                             False)
    full = m.kind_attention(None)
    assert (full.heads, full.kv_heads, full.head_dim, full.v_dim, full.sinks, full.k_eq_v) == \
        (16, 2, 128, 128, False, True)
    assert m.kind_attention(W) is a
    # a table that sets nothing is the model's shape; no table, one shape
    assert shapes(full={}).kind_attention(None) == dataclasses.replace(shapes().attention)
    assert shapes().attention.kinds == ()


@pytest.mark.parametrize("att, key, message", [
    (dict(layer_types=["sliding_attention"], full=dict(heads=8)), "attention.full",
     "is set but the model has no full_attention layers"),
    (dict(layer_types=["full_attention"], sliding=dict(heads=8)), "attention.sliding",
     "is set but the model has no sliding_attention layers"),
    (dict(full=dict(kv_heads=3)), "attention.full.kv_heads",
     "3 does not divide attention.full.heads = 16"),
    (dict(full=dict(window=3)), "attention.full.window", "unknown key"),
    (dict(full=dict(k_eq_v=True, v_head_dim=32)), "attention.full.k_eq_v",
     "true needs v_head_dim = head_dim (64): V is made by k_proj"),
    (dict(k_eq_v=True, v_head_dim=32), "attention.k_eq_v",
     "true needs v_head_dim = head_dim (64): V is made by k_proj"),
    (dict(full=dict(head_dim=0)), "attention.full.head_dim", "0 must be > 0"),
    (dict(full=7), "attention.full", "7 is not a table"),
])
def test_bad_kind_tables_are_refused(att, key, message):
    with pytest.raises(SpecError) as e:
        shapes(**att)
    assert e.value.key == key and message in str(e.value)


def test_kind_tables_are_gqa_only():
    att = dict(kind="mla", heads=16, kv_heads=16, head_dim=192, kv_lora_rank=512,
               qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
               sliding=dict(heads=8), sliding_window=W)
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="s", source="t", layers=2, hidden=H, vocab=10, attention=att,
                             ffn=dict(kind="dense", gated=True, intermediate=64)), "s.toml")
    assert (e.value.key, str(e.value).split(": ")[-1]) == (
        "attention.sliding", "is only supported with gqa attention")


# ----------------------------------------------------------------------------------------------
# closed forms

def test_weights_of_each_kind():
    m = synthetic_shapes()
    slide = attention_params(m)
    full = attention_params(m, m.kind_attention(None))
    assert slide == {"qkv": H * (16 * 64 + 4 * 64 + 4 * 48), "o": 16 * 48 * H, "bias": 16}
    assert full == {"qkv": H * (16 * 128 + 2 * 128), "o": 16 * 128 * H}      # no v_proj
    expert, shared = 3 * H * 512, 3 * H * 768
    moe = 8 * expert + shared + H * 8
    assert param_counts(m)["params_total"] == 4 * sum(slide.values()) + 4 * sum(full.values()) \
        + 8 * (2 * H + moe) + 2 * 16000 * H + H


@pytest.mark.parametrize("context", [100, W, 4096, 131072])
def test_each_kind_holds_its_own_bytes(context):
    m = synthetic_shapes()
    assert kv.layer_token_bytes(m) == [(SLIDE_K, SLIDE_V), (FULL_K, FULL_V)] * 4
    assert not kv.uniform(m)
    with pytest.raises(ValueError, match="op tables"):
        kv.token_bytes(m)
    held = 4 * min(context, W) * (SLIDE_K + SLIDE_V) + 4 * context * (FULL_K + FULL_V)
    assert kv.request_bytes(m, context) == held
    # the tables' mean layer holds the same per layer (one sequence, one GPU)
    tab = build_tables(m, H100, Workload("decode", context), coarse_of(make_row())[None])
    assert tab.kv_layer_bytes[0, MODE_NONE, MODE_NONE] * 8 == pytest.approx(held, rel=1e-12)


@pytest.mark.parametrize("context", [100, 4096])
def test_each_kind_attends_in_its_own_shape(context):
    """Decode, one sequence on one GPU: the scores and context ops are the mean of the two kinds,
    each with its own heads, widths and cache; the projections' weights too."""
    m = synthetic_shapes()
    tab = build_tables(m, H100, Workload("decode", context), coarse_of(make_row())[None])
    peak = H100.peak_for("bf16") * H100.compute_efficiency_for("bf16")
    hbm = H100.hbm_bandwidth_bytes_s * H100.memory_efficiency
    held = min(context, W)

    def op(slot):
        sl = SLOT[slot]
        return (tab.compute_s[0, sl, MODE_NONE] * peak, tab.memory_s[0, sl, MODE_NONE] * hbm,
                tab.weight_bytes[0, sl, MODE_NONE])

    fl, by, _ = op("scores")
    assert fl == pytest.approx((2 * 16 * 64 * held + 2 * 16 * 128 * context) / 2, rel=1e-12)
    assert by == pytest.approx((held * SLIDE_K + 16 * 64 * 2 * 2
                                + context * FULL_K + 16 * 128 * 2 * 2) / 2, rel=1e-12)
    fl, by, _ = op("context")
    assert fl == pytest.approx((2 * 16 * 48 * held + 2 * 16 * 128 * context) / 2, rel=1e-12)
    assert by == pytest.approx((held * SLIDE_V + 16 * 48 * 2 * 2
                                + context * FULL_V + 16 * 128 * 2 * 2) / 2, rel=1e-12)
    _, _, w = op("qkv")
    assert w == (attention_params(m)["qkv"] + attention_params(m, m.kind_attention(None))["qkv"]) \
        / 2 * 2
    _, _, w = op("out_proj")
    assert w == (16 * 48 * H + 16 * 128 * H) / 2 * 2


def test_one_shape_tables_are_unchanged():
    """A kind table that repeats the model's shape costs exactly what no table does."""
    work = Workload("decode", 4096)
    rows = coarse_of(np.stack([make_row(tp=2, batch=8), make_row(pp=2, batch=64)]))
    a = build_tables(shapes(), H100, work, rows)
    b = build_tables(shapes(full=dict(heads=16)), H100, work, rows)
    assert np.allclose(a.time_s, b.time_s, rtol=1e-12, equal_nan=True)
    assert np.allclose(a.kv_layer_bytes, b.kv_layer_bytes, rtol=1e-12)
    assert np.allclose(a.weight_bytes, b.weight_bytes, rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# a window never costs more than full attention, each kind in its own shape

@st.composite
def windowed_shapes(draw):
    """(synthetic_shapes whose sliding layers attend to everything, the same with a window)."""
    m = synthetic_shapes()
    window = draw(st.sampled_from([1, 16, 500, 4096]))
    never = dataclasses.replace(m.attention, window=10 ** 12)
    return dataclasses.replace(m, attention=never), \
        dataclasses.replace(m, attention=dataclasses.replace(m.attention, window=window))


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_window_never_costs_more_than_full_attention_in_its_shape(data):
    never_costs_more(data, *data.draw(windowed_shapes()))


# ----------------------------------------------------------------------------------------------
# the exact solver

def test_exact_solver_takes_two_shapes():
    _Exact(synthetic_shapes(), [1] * 12)          # no longer refused


@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_on_two_shapes(work):
    exact_equals_brute_force(synthetic_shapes(), work, pp=(1, 2, 8))


# ----------------------------------------------------------------------------------------------
# HuggingFace configs: Gemma 4 and MiMo-V2-Flash
#
# tests/data/hf/gemma-4-26b-a4b.json: huggingface.co/google/gemma-4-26B-A4B config.json;
# gemma-4-26b-a4b-nvfp4/, gemma-4-31b-it-nvfp4/: huggingface.co/nvidia/Gemma-4-26B-A4B-NVFP4 and
# nvidia/Gemma-4-31B-IT-NVFP4 config.json and hf_quant_config.json; mimo-v2-flash.json:
# huggingface.co/XiaomiMiMo/MiMo-V2-Flash config.json (verbatim copies)

DATA = "tests/data/hf"

# published totals (text model; the vision encoder, "~550M", apart): Gemma 4 26B A4B "25.2B
# total / 3.8B active" (the model card as quoted by vast.ai/model/gemma-4-26b-a4b-it and
# llmradar.eu/models/gemma-4-26b-a4b-it), 31B "30.7B" (ccm-design-engineer.netlify.app's model
# card summary); MiMo-V2-Flash "309B total parameters and 15B active" (MiMo-V2-Flash Technical
# Report, arXiv 2601.02780, abstract)
PUBLISHED = {"gemma-4-26b-a4b.json": 25.2e9, "gemma-4-26b-a4b-nvfp4": 25.2e9,
             "gemma-4-31b-it-nvfp4": 30.7e9, "mimo-v2-flash.json": 309e9}


def hf(name):
    from lts.specs import load_model
    return load_model(f"{DATA}/{name}")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_totals_within_2pct_of_published(name):
    total = param_counts(hf(name))["params_total"]
    assert abs(total / PUBLISHED[name] - 1) < 0.02, (total, PUBLISHED[name])


def test_gemma4_26b_shapes():
    m = hf("gemma-4-26b-a4b.json")
    a, full = m.attention, m.kind_attention(None)
    assert (a.heads, a.kv_heads, a.head_dim, a.v_dim, a.k_eq_v, a.window) == (16, 8, 256, 256,
                                                                               False, 1024)
    assert (full.heads, full.kv_heads, full.head_dim, full.k_eq_v) == (16, 2, 512, True)
    assert m.layer_types.count("full_attention") == 5 and m.layer_types[5] == "full_attention"
    f = m.ffn      # every layer: the MLP (a shared expert) beside 128 experts, top 8
    assert (f.experts, f.top_k, f.expert_intermediate, f.shared_experts, f.shared_intermediate,
            f.dense_layers) == (128, 8, 704, 1, 2112, 0)
    h = 2816
    assert attention_params(m) == {"qkv": h * (16 * 256 + 2 * 8 * 256), "o": 16 * 256 * h}
    assert attention_params(m, full) == {"qkv": h * (16 * 512 + 2 * 512), "o": 16 * 512 * h}
    # bf16: sliding 2 x 8 x 256, full 2 x 2 x 512 (K and V cached apart) per token
    assert kv.layer_token_bytes(m)[:6] == [(8 * 256 * 2, 8 * 256 * 2)] * 5 + [(2048, 2048)]
    assert kv.request_bytes(m, 4096) == 25 * 1024 * 8192 + 5 * 4096 * 4096
    counts = param_counts(m)
    assert counts["params_active"] == pytest.approx(3.8e9, rel=0.02)
    assert "its vision tower (vision_config) has 0.57B parameters" in m.source


def test_gemma4_nvfp4_checkpoints():
    m = hf("gemma-4-26b-a4b-nvfp4")       # only the routed experts in NVFP4
    p = m.precision
    assert (p.weights, p.kv_cache) == ("nvfp4", "fp8")
    assert set(p.unquantized) >= {"attention", "router", "shared_experts", "lm_head"}
    assert p.format_of("experts") == "nvfp4"
    m = hf("gemma-4-31b-it-nvfp4")        # dense; attention and the LM head in bf16
    assert m.ffn.kind == "dense" and m.ffn.intermediate == 21504
    assert m.precision.format_of("dense_ffn") == "nvfp4"
    assert set(m.precision.unquantized) >= {"attention", "lm_head"}
    full = m.kind_attention(None)
    assert (full.kv_heads, full.head_dim, full.k_eq_v) == (4, 512, True)


def test_mimo_v2_flash_shapes():
    m = hf("mimo-v2-flash.json")
    a, swa = m.attention, m.kind_attention(128)
    assert (a.heads, a.kv_heads, a.head_dim, a.v_dim, a.sinks) == (64, 4, 192, 128, False)
    assert (swa.heads, swa.kv_heads, swa.head_dim, swa.v_dim, swa.sinks) == (64, 8, 192, 128,
                                                                             True)
    assert m.layer_types.count("full_attention") == 9 and m.layer_types[0] == "full_attention"
    assert (m.ffn.dense_layers, m.ffn.intermediate, m.ffn.experts, m.ffn.top_k,
            m.ffn.shared_experts) == (1, 16384, 256, 8, 0)
    h = 4096
    assert attention_params(m) == {"qkv": h * (64 * 192 + 4 * 192 + 4 * 128), "o": 64 * 128 * h}
    assert attention_params(m, swa) == {"qkv": h * (64 * 192 + 8 * 192 + 8 * 128),
                                        "o": 64 * 128 * h, "bias": 64}
    # bf16 KV: full K 4 x 192, V 4 x 128; sliding K 8 x 192, V 8 x 128
    assert set(kv.layer_token_bytes(m)) == {(4 * 192 * 2, 4 * 128 * 2), (8 * 192 * 2, 8 * 128 * 2)}
    assert kv.request_bytes(m, 1000) == 9 * 1000 * 1280 * 2 + 39 * 128 * 2560 * 2
    assert m.precision.weights == "fp8_block"


def write_hf(tmp_path, base, **changes):
    import json
    cfg = json.load(open(f"{DATA}/{base}"))
    cfg.get("text_config", cfg).update(changes)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


@pytest.mark.parametrize("base, changes, key, message", [
    ("gemma-4-26b-a4b.json", dict(num_kv_shared_layers=10), "text_config.num_kv_shared_layers",
     "10 is not supported (expected 0: layers that reuse an earlier layer's keys and values are "
     "not costed by lts)"),
    ("gemma-4-26b-a4b.json", dict(hidden_size_per_layer_input=256),
     "text_config.hidden_size_per_layer_input",
     "256 is not supported (expected 0: per-layer input embeddings are not costed by lts)"),
    ("gemma-4-26b-a4b.json", dict(use_double_wide_mlp=True), "text_config.use_double_wide_mlp",
     "true is not supported (expected false: double-wide MLPs are not costed by lts)"),
    ("gemma-4-26b-a4b.json", dict(attention_bias=True), "text_config.attention_bias",
     "true is not supported (expected false: the checkpoints' q/k/v/o projections have no "
     "biases)"),
    ("gemma-4-26b-a4b.json", dict(num_global_key_value_heads=3),
     "num_global_key_value_heads", "3 does not divide num_attention_heads = 16"),
    ("mimo-v2-flash.json", dict(hybrid_layer_pattern=[0, 1]), "hybrid_layer_pattern",
     "[0, 1] is not 48 entries of 0 (full attention) or 1 (sliding window)"),
    ("mimo-v2-flash.json", dict(moe_layer_freq=[1] * 47 + [0]), "moe_layer_freq",
     "is not supported (expected 48 entries: 0 for the leading dense layers, then 1)"),
    ("mimo-v2-flash.json", dict(swa_num_key_value_heads=None), "swa_num_key_value_heads",
     "null is not an integer"),
    ("mimo-v2-flash.json", dict(swa_num_key_value_heads=5), "swa_num_key_value_heads",
     "5 does not divide swa_num_attention_heads = 64"),
])
def test_bad_configs_are_refused_naming_the_key(tmp_path, base, changes, key, message):
    from click.testing import CliRunner
    from lts.cli import cli
    p = write_hf(tmp_path, base, **changes)
    r = CliRunner().invoke(cli, ["models", "--show", str(p)], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    line, = r.output.strip().splitlines()
    assert line.startswith(f"Error: {p}: {key}: ") and message in line, line


def test_gemma4_vision_tower_closed_form():
    import json
    from lts.specs.hf import gemma4_vision_params
    v = json.load(open(f"{DATA}/gemma-4-26b-a4b.json"))["vision_config"]
    h, i = 1152, 4304          # 27 layers of 16 heads of 72; patch 16, 10240 positions
    block = 4 * h * 16 * 72 + 3 * h * i + 2 * 72 + 4 * h
    want = 27 * block + 3 * 16 * 16 * h + 2 * 10240 * h + 2 * h
    assert gemma4_vision_params(v) == want
    assert gemma4_vision_params(v, 2816) == want + h * 2816
