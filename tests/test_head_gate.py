"""Step-3.7's head-wise output gate (issue 36): ``attention.head_gate`` (g_proj [hidden, heads], a
sigmoid per query head), read and refused with exact messages, its weights and FLOPs in closed
form, never cheaper than the same model without it; the exact solver equals brute force on a
model with the gate and per-kind heads; Step-3.7-Flash's config.json read as its engines build it.
(The scalar reference walks the gate: tests/test_costmodel_reference.py, ``head-gate-small``.)"""
import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_head_gate
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.tables import build_tables
from lts.specs import (SpecError, attention_params, load_model, load_topology, model_from_dict,
                       param_counts)
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import EXACT_WORKS, exact_equals_brute_force, never_costs_more

H100 = load_topology("h100_dgx")
H = 1024


def gated(**att):
    base = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64, head_gate=True)
    base.update(att)
    return model_from_dict(dict(name="g", source="test", layers=4, hidden=H, vocab=1000,
                                attention=base,
                                ffn=dict(kind="dense", gated=True, intermediate=4096)), "g.toml")


# ----------------------------------------------------------------------------------------------
# reading and closed forms

def test_the_gate_adds_one_column_a_query_head():
    a = gated().attention
    assert a.head_gate and not a.output_gate
    assert a.q_out == 16 * 64 + 16                      # the queries, then one gate a head
    assert attention_params(gated())["qkv"] == H * (16 * 65 + 2 * 4 * 64)
    plain = gated(head_gate=False)
    assert attention_params(gated())["qkv"] - attention_params(plain)["qkv"] == H * 16
    # the per-kind heads carry their own gate columns (24 sliding heads: 24 gates)
    m = synthetic_head_gate()
    assert m.kind_attention(512).heads == 24 and m.kind_attention(512).q_out == 24 * 65
    assert m.kind_attention(None).q_out == 16 * 65


def test_the_gate_is_gqa_only():
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="m", source="t", layers=2, hidden=512, vocab=100,
                             attention=dict(kind="mla", heads=8, kv_heads=8, head_dim=96,
                                            kv_lora_rank=128, qk_nope_head_dim=64,
                                            qk_rope_head_dim=32, v_head_dim=64, head_gate=True),
                             ffn=dict(kind="dense", gated=True, intermediate=1024)), "m.toml")
    assert str(e.value) == "m.toml: attention.head_gate: true is not supported with mla " \
                           "attention (gqa only)"


def test_gate_flops_and_weights_in_the_qkv_table():
    """The qkv op of a gated model, replicated (``none`` mode), costs 2 tokens x hidden x heads
    FLOPs more than without the gate and holds hidden x heads more weights (bf16)."""
    work = Workload("decode", context=1024)
    coarse = coarse_of(make_row(batch=8))[None]
    a, b = (build_tables(m, H100, work, coarse) for m in (gated(), gated(head_gate=False)))
    sl = SLOT["qkv"]
    assert a.weight_bytes[0, sl, MODE_NONE] - b.weight_bytes[0, sl, MODE_NONE] == H * 16 * 2
    fl = (a.compute_s - b.compute_s)[0, sl, MODE_NONE]
    assert fl * H100.peak_for("bf16") * H100.compute_efficiency_for("bf16") == \
        pytest.approx(2.0 * 8 * H * 16, rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_a_gate_never_makes_a_step_cheaper(data):
    m = synthetic_head_gate()
    plain = dataclasses.replace(m, attention=dataclasses.replace(
        m.attention, head_gate=False, kinds=tuple(
            (t, dataclasses.replace(k, head_gate=False)) for t, k in m.attention.kinds)))
    never_costs_more(data, m, plain)


# ----------------------------------------------------------------------------------------------
# the exact solver

@pytest.mark.parametrize("work", EXACT_WORKS)
def test_exact_equals_brute_force_with_a_head_gate(work):
    exact_equals_brute_force(synthetic_head_gate(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# Step-3.7-Flash's config.json
#
# tests/data/hf/step-3.7-flash.json and step-3.7-flash-fp8/config.json: the copies a public
# serving tool bundles (ai-dynamo/aiconfigurator, aic-core/src/aiconfigurator_core/model_configs/
# stepfun-ai--Step-3.7-Flash_config.json and -FP8_config.json at 095f58a5), without
# attention_other_setting. Published: "196B sparse language backbone" with a 1.8B perception
# encoder, ~11B active (vLLM's recipe page for stepfun-ai/Step-3.7-Flash and StepFun's release
# notes as quoted by digitalapplied.com, 2026-05); the MTP layers (45-47) apart.

STEP = "tests/data/hf/step-3.7-flash.json"
PUBLISHED = 196e9


def test_step_3_7_flash_as_its_config_gives_it():
    m = load_model(STEP)
    a = m.attention
    assert (a.heads, a.kv_heads, a.head_dim, a.head_gate, a.window) == (64, 8, 128, True, 512)
    assert dict(m.kind_groups) == {None: 12, 512: 33}
    f = m.ffn
    assert (f.experts, f.top_k, f.expert_intermediate, f.shared_intermediate, f.dense_layers,
            f.intermediate) == (288, 8, 1280, 1280, 3, 11264)
    assert m.mtp_layers == 0 and "3 multi-token-prediction layers" in m.source
    assert "no attention_other_setting" in m.source
    total = param_counts(m)["params_total"]
    assert abs(total / PUBLISHED - 1) < 0.03, total
    fp8 = load_model("tests/data/hf/step-3.7-flash-fp8")
    assert fp8.precision.weights == "fp8_block"
    assert param_counts(fp8)["params_total"] == total


def test_step_3_7_sliding_heads_from_attention_other_setting(tmp_path):
    """Step-3.7-Flash's own config gives the sliding layers 96 query heads (its
    attention_other_setting, transformers Step3p7TextConfig's num_sliding_attention_heads)."""
    c = json.load(open(STEP))
    c["attention_other_setting"] = {"attention_type": "sliding_attention",
                                    "num_attention_heads": 96, "num_attention_groups": 8,
                                    "head_dim": 128}
    (tmp_path / "config.json").write_text(json.dumps(c))
    m = load_model(str(tmp_path))
    assert m.kind_attention(512).heads == 96 and m.kind_attention(None).heads == 64
    assert "attention_other_setting" not in m.source
    extra = param_counts(m)["params_total"] - param_counts(load_model(STEP))["params_total"]
    # 33 sliding layers, each 32 more heads of q_proj, o_proj and a gate
    assert extra == 33 * 32 * (2 * 4096 * 128 + 4096)
    assert abs(param_counts(m)["params_total"] / PUBLISHED - 1) < 0.03
