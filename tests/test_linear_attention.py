"""Linear-attention (Gated DeltaNet) layers, issue 22 item 1: the [linear_attention] table and its
errors, the state a request holds (closed form, and it does not grow with the context), the
delta rule's FLOPs and bytes per token in decode and prefill (closed forms), the mean layer of
linear and full attention, the parameters, and the exact solver equal to brute force on a model
mixing both kinds. The op-by-op comparison with tests/reference.py runs in
test_costmodel_reference.py (model linear-small)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_linear
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import DELTA_CHUNK, build_tables, delta_rule_flops
from lts.specs import (SpecError, linear_params, load_model, load_topology, model_from_dict,
                       param_counts)
from lts.specs.strategy import N_COARSE, coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force

H100 = load_topology("h100_dgx")
NK, NV, DK, DV, K = 4, 8, 64, 64, 4              # synthetic_linear's Gated DeltaNet shapes
KD, VD = NK * DK, NV * DV
CHANNELS = 2 * KD + VD                            # conv1d over q, k, v
REC = NV * DK * DV * 4.0                          # the recurrent state, fp32
CONV = (K - 1) * CHANNELS * 2.0                   # the conv state, bf16 (the KV type)
IO = (2 * KD + 2 * VD + 2 * NV) * 2.0             # q, k, v, g, beta in, o out (bf16)


def model_dict(**att):
    return dict(name="l", source="test", layers=4, hidden=1024, vocab=16000,
                attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64,
                               layer_types=["linear_attention"] * 3 + ["full_attention"], **att),
                linear_attention=dict(key_heads=NK, value_heads=NV, key_head_dim=DK,
                                      value_head_dim=DV, conv_kernel=K),
                ffn=dict(kind="dense", gated=True, intermediate=2048))


def full_only(m):
    """The same model with every layer full attention (no linear layers)."""
    return dataclasses.replace(m, layer_types=(), linear=None)


# ----------------------------------------------------------------------------------------------
# the representation and its errors

def test_linear_layers_from_a_model_file():
    m = model_from_dict(model_dict(), "l.toml")
    assert m.linear_layers == 3 and m.layer_windows.count("linear_attention") == 3
    assert m.kind_groups == (("linear_attention", 3), (None, 1))
    assert (m.linear.key_dim, m.linear.value_dim, m.linear.conv_channels) == (KD, VD, CHANNELS)


def _with(change):
    d = model_dict()
    change(d)
    return d


@pytest.mark.parametrize("change, key, message", [
    (lambda d: d.pop("linear_attention"), "linear_attention",
     "missing table (attention.layer_types has linear_attention layers)"),
    (lambda d: d["attention"].update(layer_types=["full_attention"]), "linear_attention",
     "is set but attention.layer_types has no linear_attention layers"),
    (lambda d: d["attention"].update(layer_types=["linear_attention"]), "attention.layer_types",
     "every layer is linear_attention (lts needs at least one full_attention or "
     "sliding_attention layer)"),
    (lambda d: d["linear_attention"].update(key_heads=3), "linear_attention.key_heads",
     "3 does not divide linear_attention.value_heads = 8"),
    (lambda d: d["linear_attention"].update(conv_kernel=0), "linear_attention.conv_kernel",
     "0 must be > 0"),
    (lambda d: d["linear_attention"].update(heads=8), "linear_attention.heads", "unknown key"),
    (lambda d: d["linear_attention"].update(decay_rank=64), "linear_attention.decay_rank",
     "is only supported with kind = \"kda\" (Kimi Delta Attention)"),
    (lambda d: d["linear_attention"].update(kind="kda"), "linear_attention.decay_rank",
     "missing (expected an integer)"),
    (lambda d: d["linear_attention"].update(kind="gla"), "linear_attention.kind",
     "'gla' is not one of 'gated_deltanet', 'kda'"),
])
def test_bad_linear_attention_is_refused(change, key, message):
    with pytest.raises(SpecError) as e:
        model_from_dict(_with(change), "l.toml")
    assert str(e.value) == f"l.toml: {key}: {message}"


# ----------------------------------------------------------------------------------------------
# the state a request holds

def test_state_bytes_closed_form():
    m = model_from_dict(model_dict(), "l.toml")
    assert kv.state_bytes(m) == (REC, CONV)
    assert kv.state_bytes(full_only(m)) == (0.0, 0.0)
    kv_tok = 2 * 2 * 64 * 2.0                     # K and V of 2 heads of 64, bf16, a token
    for ctx in (1, 4096, 131072):
        assert kv.request_bytes(m, ctx) == 3 * (REC + CONV) + 1 * ctx * kv_tok


@st.composite
def linear_models(draw):
    nk = draw(st.sampled_from([1, 2, 4, 16]))
    nv = nk * draw(st.sampled_from([1, 2, 4]))
    pattern = draw(st.sampled_from([["linear_attention", "full_attention"],
                                    ["linear_attention"] * 3 + ["full_attention"],
                                    ["full_attention", "linear_attention"]]))
    d = dict(name="h", source="test", layers=len(pattern) * draw(st.integers(1, 3)),
             hidden=draw(st.sampled_from([256, 1024])), vocab=1000,
             attention=dict(kind="gqa", heads=8, kv_heads=draw(st.sampled_from([1, 2, 8])),
                            head_dim=64, layer_types=pattern,
                            output_gate=draw(st.booleans())),
             linear_attention=dict(key_heads=nk, value_heads=nv,
                                   key_head_dim=draw(st.sampled_from([32, 128])),
                                   value_head_dim=draw(st.sampled_from([64, 128])),
                                   conv_kernel=draw(st.integers(2, 4))),
             ffn=dict(kind="dense", gated=True, intermediate=512),
             precision=dict(kv_cache=draw(st.sampled_from(["bf16", "fp8"]))))
    return model_from_dict(d, "h.toml")


@settings(max_examples=40, deadline=None)
@given(linear_models(), st.integers(1, 200_000), st.integers(1, 200_000))
def test_a_requests_state_does_not_grow_with_context(m, c1, c2):
    """request bytes minus the attention layers' KV is the linear layers' state at any context;
    the tables hold the same state per sequence at both contexts."""
    check_state_is_constant(m, c1, c2)


def check_state_is_constant(m, c1, c2):
    """The check of ``test_a_requests_state_does_not_grow_with_context`` for any model whose
    recurrent layers (Gated DeltaNet or Mamba-2) hold a fixed state: ``kv.request_bytes`` less
    the attention layers' KV, and the tables' held bytes of the recurrent op, are the same at
    contexts c1 and c2 and equal ``kv.state_bytes`` per layer."""
    attn = full_only(m)
    n_attn = m.layers - m.linear_layers
    state = [kv.request_bytes(m, c) - kv.request_bytes(attn, c) * n_attn / m.layers
             for c in (c1, c2)]
    assert state[0] == pytest.approx(state[1], rel=1e-9)
    assert state[0] == pytest.approx(m.linear_layers * sum(kv.state_bytes(m)), rel=1e-9)
    row = np.array([make_row(batch=4)])
    held = [sum(_linear_part(m, Workload("decode", c), row, slot)[2]
                for slot in ("scores", "context")) for c in (c1, c2)]   # recurrent + conv
    assert held[0] == pytest.approx(held[1], rel=1e-9)
    assert held[0] == pytest.approx(4 * sum(kv.state_bytes(m)), rel=1e-9)


# ----------------------------------------------------------------------------------------------
# the delta rule's FLOPs and bytes per token

def _linear_part(m, work, row, slot="scores"):
    """(FLOPs, bytes, held bytes) of one linear layer's ``slot`` op in mode none at ``row``: the
    mixed tables' value less the attention layers' share, over the linear share."""
    a = (m.layers - m.linear_layers) / m.layers
    mix, att = (build_tables(x, H100, work, row[:, :N_COARSE]) for x in (m, full_only(m)))
    sl = SLOT[slot]
    out = []
    for arr, rate in (("compute_s", H100.peak_for("bf16") * H100.compute_efficiency_for("bf16")),
                      ("memory_s", H100.hbm_bandwidth_bytes_s * H100.memory_efficiency),
                      ("kv_bytes", 1.0)):
        x, y = getattr(mix, arr)[0, sl, MODE_NONE], getattr(att, arr)[0, sl, MODE_NONE]
        out.append((x - a * y) / (1 - a) * rate)
    return out


def test_delta_rule_flops_closed_form():
    m = synthetic_linear()
    assert delta_rule_flops(m.linear, prefill=False) == 7 * DK * DV
    c = DELTA_CHUNK
    assert c == 64
    assert delta_rule_flops(m.linear, prefill=True) == 6 * DK * DV + c * (6 * DK + 4 * DV) \
        + c * c / 3


def test_decode_reads_and_writes_the_state_once_a_token():
    m = model_from_dict(model_dict(), "l.toml")
    row = np.array([make_row()])
    for ctx in (100, 100_000):
        fl, by, held = _linear_part(m, Workload("decode", ctx), row)
        assert fl == pytest.approx(NV * 7 * DK * DV, rel=1e-9)
        assert by == pytest.approx(2 * REC + IO, rel=1e-9)
        assert held == pytest.approx(REC, rel=1e-9)
        fl, by, held = _linear_part(m, Workload("decode", ctx), row, "context")
        assert fl == pytest.approx(2 * K * CHANNELS, rel=1e-9)
        assert by == pytest.approx(2 * CONV + (2 * CHANNELS + 3 * VD) * 2.0, rel=1e-9)
        assert held == pytest.approx(CONV, rel=1e-9)


@pytest.mark.parametrize("length", [64, 1000, 32768])
def test_prefill_costs_linear_in_length(length):
    m = model_from_dict(model_dict(), "l.toml")
    fl, by, held = _linear_part(m, Workload("prefill", length), np.array([make_row()]))
    per_tok = NV * (6 * DK * DV + 64 * (6 * DK + 4 * DV) + 64 * 64 / 3)
    assert fl == pytest.approx(length * per_tok, rel=1e-9)
    # the final state written, each chunk's state written and read, the token io
    assert by == pytest.approx(REC + length * (IO + 2 * REC / 64), rel=1e-9)
    assert held == pytest.approx(REC, rel=1e-9)


def test_projection_weights_and_parameters():
    m = model_from_dict(model_dict(), "l.toml")
    h = 1024
    p = linear_params(m)
    assert p == {"qkv": h * (2 * KD + 2 * VD + 2 * NV), "o": VD * h, "conv": CHANNELS * K,
                 "other": 2 * NV + DV}
    # the full layer's q_proj is not gated here; a gate doubles it
    att = 1024 * (16 + 2 * 2) * 64 + 16 * 64 * 1024
    gated = model_from_dict(model_dict(output_gate=True), "l.toml")
    embed = 16000 * h * 2 + h
    ffn = 3 * h * 2048
    assert param_counts(m)["params_total"] == 3 * sum(p.values()) + att + 4 * (2 * h + ffn) + embed
    assert param_counts(gated)["params_total"] - param_counts(m)["params_total"] == h * 16 * 64
    # the tables' resident weights of qkv and out_proj: the mean of the two kinds
    tab = build_tables(m, H100, Workload("decode", 10), coarse_of(make_row())[None])
    for slot, lin, full in (("qkv", p["qkv"], 1024 * 20 * 64), ("out_proj", p["o"], 1024 * 1024)):
        assert tab.weight_bytes[0, SLOT[slot], MODE_NONE] == pytest.approx(
            (3 * lin + full) / 4 * 2.0, rel=1e-12)


def test_uneven_pipeline_split_is_refused():
    """8 layers, three linear then one full, twice: pp 4 and 8 give stages different kinds."""
    model = synthetic_linear()
    rows = np.array([make_row(pp=pp, batch=8) for pp in (1, 2, 4, 8)])
    res = evaluate(model, H100, Workload("decode", 4096), rows)
    assert [("divisibility" in res.reason_list(i)) for i in range(4)] == [False, False, True, True]


def test_linear_layers_hold_less_than_full_attention_at_long_context():
    m = synthetic_linear()
    full = full_only(m)
    rows = np.array([make_row(tp=2, batch=64)])
    work = Workload("decode", 131072)
    a, b = evaluate(m, H100, work, rows), evaluate(full, H100, work, rows)
    assert a.memory_bytes[0] < b.memory_bytes[0]


# ----------------------------------------------------------------------------------------------
# the exact solver on linear and full attention layers

@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_on_linear_and_full_layers(work):
    exact_equals_brute_force(synthetic_linear(), work, pp=(1, 2, 4))   # pp 4: uneven, refused


# ----------------------------------------------------------------------------------------------
# Qwen3-Next and Qwen3.5 from config.json; models/qwen3.5-397b-a17b.toml

QWEN35 = "tests/data/hf/qwen3.5-397b-a17b.json"   # the keys lts reads (models/qwen3.5-397b-a17b.toml)
# Qwen/Qwen3-Next-80B-A3B-Instruct config.json (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct):
# the keys lts reads, without layer_types (the default rule: every 4th layer full attention)
QWEN_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
             "dtype": "bfloat16", "decoder_sparse_step": 1, "full_attention_interval": 4,
             "head_dim": 256, "hidden_size": 2048, "intermediate_size": 5120,
             "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
             "linear_num_value_heads": 32, "linear_value_head_dim": 128, "mlp_only_layers": [],
             "moe_intermediate_size": 512, "num_attention_heads": 16, "num_experts": 512,
             "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
             "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
             "vocab_size": 151936, "mtp_num_hidden_layers": 1}


def _strip(m):
    return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                               active_params_published=0.0)


def test_qwen35_config_and_shipped_file_agree_with_the_published_counts():
    toml, hf = load_model("qwen3.5-397b-a17b"), load_model(QWEN35)
    assert _strip(toml) == _strip(hf)
    assert toml.linear_layers == 45 and toml.layer_types[:4] == (
        "linear_attention", "linear_attention", "linear_attention", "full_attention")
    assert toml.attention.output_gate and toml.ffn.shared_experts == 1 and toml.mtp_layers == 1
    p = param_counts(toml)
    # model card: 397B total (within 2%: 396.35B; the vision tower, ~0.45B, is not counted)
    assert p["params_total"] == pytest.approx(toml.params_published, rel=0.02)
    assert p["params_total"] == pytest.approx(396.35e9, rel=1e-4)
    # "17B activated" is rounded: 17.35B with the embedding and the head
    assert p["params_active"] == pytest.approx(17.35e9, rel=1e-3)
    # the MTP layer: a full-attention layer, the MoE, fc [2h -> h] and 3 norms, no copies of the
    # embedding and head (shared with the model)
    h = 4096
    layer = h * (32 * 2 + 2 * 2) * 256 + 32 * 256 * h + 2 * h
    moe = 512 * 3 * h * 1024 + 3 * h * 1024 + h * 512
    assert p["params_mtp"] == layer + moe + 2 * h * h + 3 * h
    assert "mtp_num_hidden_layers" in hf.source and "text_config" in hf.source


def test_qwen3_next_from_a_flat_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN_NEXT))
    m = load_model(path)
    assert m.linear_layers == 36 and m.kind_groups == (("linear_attention", 36), (None, 12))
    assert (m.linear.key_heads, m.linear.value_heads, m.linear.conv_kernel) == (16, 32, 4)
    assert m.attention.output_gate                     # HF default: Qwen3-Next always gates
    # model card (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct): 80B total
    assert param_counts(m)["params_total"] == pytest.approx(80e9, rel=0.02)


def test_qwen35_dense_text_config(tmp_path):
    """qwen3_5 (Qwen3.5-27B's layout): the same layers with a dense FFN."""
    text = {k: v for k, v in QWEN_NEXT.items() if "expert" not in k and k not in (
        "architectures", "decoder_sparse_step", "mlp_only_layers", "model_type")}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen3_5", "text_config": {
        **text, "model_type": "qwen3_5_text", "intermediate_size": 5120}}))
    m = load_model(path)
    assert m.ffn.kind == "dense" and m.ffn.intermediate == 5120 and m.linear_layers == 36


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("linear_num_value_heads"),
     "linear_num_value_heads: missing (expected an integer)"),
    (lambda c: c.update(sliding_window=4096),
     "sliding_window: 4096 is not supported (expected null: the full-attention layers attend to "
     "the whole context)"),
    (lambda c: c.update(layer_types=["linear_attention"] * 48),
     "layer_types: every layer is linear_attention (lts needs at least one full_attention or "
     "sliding_attention layer)"),
])
def test_bad_qwen3_next_configs_name_the_key(tmp_path, change, message):
    cfg = dict(QWEN_NEXT)
    change(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(SpecError) as e:
        load_model(path)
    assert str(e.value) == f"{path}: {message}"


def test_full_attention_interval_one_is_all_full_attention(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN_NEXT, "full_attention_interval": 1}))
    m = load_model(path)
    assert m.linear is None and m.linear_layers == 0 and m.attention.output_gate


def test_qwen35_text_config_model_type_is_checked(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen3_5_moe",
                                "text_config": {"model_type": "qwen3_next"}}))
    with pytest.raises(SpecError) as e:
        load_model(path)
    assert str(e.value) == (f"{path}: text_config.model_type: 'qwen3_next' is not the text model "
                            "of a qwen3_5_moe config (expected qwen3_5_moe_text)")


@pytest.mark.parametrize("context", [4096, 131072])
def test_qwen35_state_plus_kv_per_request(context):
    """Must show: Qwen3.5-397B-A17B's bytes per request, the 45 linear layers' state (64 value
    heads x 128 x 128 fp32, and 3 x 12,288 conv channels in bf16) and the 15 full layers' KV (2
    KV heads x 256, K and V, bf16, per token)."""
    m = load_model("qwen3.5-397b-a17b")
    state = 45 * (64 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 64 * 128) * 2)
    kv_bytes = 15 * 2 * 2 * 256 * 2 * context
    assert state == 45 * 4_268_032
    assert kv.request_bytes(m, context) == state + kv_bytes
    assert m.linear_layers * sum(kv.state_bytes(m)) == state
