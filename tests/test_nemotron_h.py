"""Nemotron-H (issue 22): layers without an FFN (``ffn.no_ffn_layers``) and the nemotron_h
config.json import. The representation and its errors; the parameters, weights and op times a
layer without an FFN saves (closed forms at tp 1, where no conversion costs anything); one tp
all-reduce per single-op block; the pipeline split; the exact solver equal to brute force; the
real configs with their published totals and the refusals (patterns lts cannot pair); latent
MoE in test_latent_moe.py. The op-by-op comparison with tests/reference.py runs in
test_costmodel_reference.py (model nemotron-h-small)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import strategy_rows, synthetic_nemotron_h
from lts.cost import kv
from lts.cost.layouts import MODE_DIM0, MODE_DIM1, MODE_NONE, SLOT
from lts.cost.model import breakdown, evaluate
from lts.cost.tables import build_tables
from lts.specs import (SpecError, load_model, load_topology, model_from_dict, model_from_hf_config,
                       param_counts, weight_params)
from lts.specs.strategy import N_COARSE, make_row
from lts.specs.workload import Workload
from test_layer_kinds import exact_equals_brute_force

H100 = load_topology("h100_dgx")
DATA = "tests/data/hf"
H, V, E, K, EI = 1024, 16000, 8, 2, 512           # synthetic_nemotron_h's shapes


def model_dict(**ffn):
    """synthetic_nemotron_h as a dict: [mamba alone, full + MoE, mamba + MoE] twice."""
    return dict(name="m", source="test", layers=6, hidden=H, vocab=V,
                attention=dict(kind="gqa", heads=16, kv_heads=2, head_dim=64,
                               layer_types=["mamba", "full_attention", "mamba"]),
                mamba=dict(heads=16, head_dim=64, state_size=128, groups=2, conv_kernel=4,
                           chunk_size=128),
                ffn=dict(kind="moe", gated=False, experts=E, top_k=K, expert_intermediate=EI,
                         shared_experts=1, **({"no_ffn_layers": [0, 3]} | ffn)))


def without_bare(d):
    """The same model with an FFN on every layer."""
    d = json.loads(json.dumps(d))
    del d["ffn"]["no_ffn_layers"]
    return d


# ----------------------------------------------------------------------------------------------
# the representation and its errors

def test_layers_without_an_ffn_from_a_model_file():
    m = model_from_dict(model_dict(), "m.toml")
    assert m == synthetic_nemotron_h().__class__(**{**synthetic_nemotron_h().__dict__,
                                                    "name": "m", "source": "test",
                                                    "path": "m.toml"})
    assert m.no_ffn == (0, 3)
    assert m.layer_has_ffn == (False, True, True, False, True, True)
    assert m.layer_moe == m.layer_has_ffn
    assert (m.ffn_layers, m.moe_layers, m.dense_ffn_layers) == (4, 4, 0)
    dense = model_dict()
    dense["ffn"] = dict(kind="dense", gated=False, intermediate=2048, no_ffn_layers=[0, 3])
    d = model_from_dict(dense, "m.toml")
    assert (d.ffn_layers, d.moe_layers, d.dense_ffn_layers) == (4, 0, 4)


@pytest.mark.parametrize("value, message", [
    ("0", "'0' is not a list of integers (expected layer indices 0 to 5)"),
    ([3, 0], "[3, 0] is not in ascending order without repeats"),
    ([0, 0], "[0, 0] is not in ascending order without repeats"),
    ([0, 6], "6 is not a layer index (expected 0 to 5)"),
    ([-1], "-1 is not a layer index (expected 0 to 5)"),
    ([0, 5], "5 is the last layer (lts needs an FFN on the last layer: the final norm takes its "
             "output)"),
])
def test_no_ffn_layers_errors(value, message):
    with pytest.raises(SpecError) as e:
        model_from_dict(model_dict(no_ffn_layers=value), "m.toml")
    assert str(e.value) == f"m.toml: ffn.no_ffn_layers: {message}"


def test_no_ffn_layers_with_dense_layers_is_refused():
    with pytest.raises(SpecError) as e:
        model_from_dict(model_dict(dense_layers=1, intermediate=2048), "m.toml")
    assert str(e.value) == ("m.toml: ffn.no_ffn_layers: with ffn.dense_layers or ffn.moe_every is "
                            "not supported (lts costs one FFN pattern a model)")


# ----------------------------------------------------------------------------------------------
# what a layer without an FFN saves: closed forms

def test_parameters_of_a_layer_without_an_ffn():
    """Two layers without an FFN: two MoE blocks (non-gated experts: up and down, the shared
    expert likewise, the router) and two ffn_norms fewer."""
    a = model_from_dict(model_dict(), "m.toml")
    b = model_from_dict(without_bare(model_dict()), "m.toml")
    moe = E * 2 * H * EI + 2 * H * EI + H * E        # experts, shared expert (width EI), router
    assert param_counts(b)["params_total"] - param_counts(a)["params_total"] == 2 * (moe + H)
    assert param_counts(b)["params_active"] - param_counts(a)["params_active"] == \
        2 * (K * 2 * H * EI + 2 * H * EI + H * E + H)
    wa, wb = weight_params(a), weight_params(b)
    assert wb["norm"] - wa["norm"] == 2 * H and wa["norm"] == 6 * 2 * H - 2 * H + H
    assert wb["experts"] - wa["experts"] == 2 * E * 2 * H * EI


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_a_layer_without_an_ffn_saves_its_ffn_norm_and_ffn(phase):
    """At tp 1 (no conversion costs anything) the model with FFNs on every layer takes, per
    layer without an FFN, exactly one ffn_norm, router, FFN1 and FFN2 more time (their op
    times in Megatron's modes) and their weights more memory; the mixers and the KV state are
    the same."""
    a = model_from_dict(model_dict(), "m.toml")
    b = model_from_dict(without_bare(model_dict()), "m.toml")
    work = Workload(phase, 2048)
    row = make_row(batch=8)
    ra, rb = evaluate(a, H100, work, row[None]), evaluate(b, H100, work, row[None])
    tab = build_tables(a, H100, work, row[None, :N_COARSE])
    modes = {"ffn_norm": MODE_NONE, "router": MODE_NONE, "ffn1": MODE_DIM1, "ffn2": MODE_DIM0}
    op = sum(tab.op_total_s[0, SLOT[s], m] for s, m in modes.items())
    w = sum(tab.weight_bytes[0, SLOT[s], m] for s, m in modes.items())
    step = rb.step_s[0] - ra.step_s[0]
    assert step == pytest.approx(2 * op, rel=1e-9)
    assert rb.memory_bytes[0] - ra.memory_bytes[0] == pytest.approx(2 * w, rel=1e-12)
    # the FFN weights in closed form: bf16, every expert held at ep 1, the router, the norm
    assert w == (E * 2 * H * EI + 2 * H * EI + H * E + H) * 2.0


@settings(max_examples=40, deadline=None)
@given(data=st.data(), phase=st.sampled_from(["decode", "prefill"]))
def test_a_layer_without_an_ffn_never_holds_more(data, phase):
    """Any strategy (valid or not), any phase: taking the FFN off layers never adds memory per
    GPU (its weights, the ffn_norm's; the mixers, their state and the workspace are the same)."""
    a = model_from_dict(model_dict(), "m.toml")
    b = model_from_dict(without_bare(model_dict()), "m.toml")
    rows = np.stack(data.draw(st.lists(strategy_rows(a, H100, max_batch=512), min_size=1,
                                       max_size=8)))
    work = Workload(phase, 2048)
    ra, rb = evaluate(a, H100, work, rows), evaluate(b, H100, work, rows)
    assert (ra.memory_bytes <= rb.memory_bytes * (1 + 1e-12)).all()
    assert (ra.gpus == rb.gpus).all()


def test_one_tp_all_reduce_per_block():
    """Under Megatron's tp every single-op block's output is all-reduced once: 6 mixer blocks
    and 4 FFN blocks, 10 all-reduces (plus the embedding's, vocab split); the lts layers
    without an FFN add one each, not two."""
    m = synthetic_nemotron_h()
    _, ops = breakdown(m, H100, Workload("decode", 4096), make_row(tp=2, batch=8))
    count = {}
    for o in ops:
        for c in o["collectives"]:
            if c["kind"] == "all-reduce":
                count[o["name"]] = count.get(o["name"], 0) + c["count"]
    assert count == {"attn_norm": 1 + 2 + 3, "ffn_norm": 4, "final_norm": 1}
    assert sum(count.values()) - 1 == 6 + 4           # less the embedding's
    by_name = {o["name"]: o["count"] for o in ops}
    assert by_name["ffn_norm"] == by_name["ffn1"] == by_name["router"] == 4
    assert by_name["attn_norm"] == by_name["qkv"] == 6


def test_pipeline_stages_end_with_an_ffn():
    """[alone, full + MoE, mamba + MoE] x 2: pp 2 splits it alike; pp 3 leaves a stage ending
    with a layer without an FFN and pp 6 stages of different layers: indivisible."""
    m = synthetic_nemotron_h()
    assert kv.even_split(m, np.array([1, 2, 3, 6])).tolist() == [True, True, False, False]
    rows = np.array([make_row(pp=pp, batch=8) for pp in (1, 2, 3, 6)])
    res = evaluate(m, H100, Workload("decode", 4096), rows)
    assert [("divisibility" in res.reason_list(i)) for i in range(4)] == [False, False, True, True]


@pytest.mark.parametrize("work", [Workload("decode", context=8192, tpot_slo_ms=20),
                                  Workload("prefill", context=2048, ttft_slo_ms=300)])
def test_exact_equals_brute_force_with_layers_without_an_ffn(work):
    exact_equals_brute_force(synthetic_nemotron_h(), work, pp=(1, 2, 3))   # pp 3: refused


# ----------------------------------------------------------------------------------------------
# the real configs

def test_nemotron_3_nano_config():
    """NVIDIA-Nemotron-3-Nano-30B-A3B (a copy of its config.json): 52 blocks
    MEMEM*EMEMEM*E... = 23 Mamba-2, 6 attention, 23 MoE; as lts layers 23 mixer + MoE pairs
    and 6 Mamba-2 layers without an FFN (each M before a *). The card
    (huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16): 31.6B total parameters,
    about 3.2B active (3.6B with the embeddings)."""
    m = load_model(f"{DATA}/nemotron-3-nano-30b-a3b.json")
    assert m.layers == 29 and len(m.no_ffn) == 6 and m.moe_layers == 23
    assert m.linear_layers == 23 and m.layer_types.count("full_attention") == 6
    assert all(m.layer_types[i] == "mamba" for i in m.no_ffn)
    f = m.ffn
    assert (f.gated, f.experts, f.top_k, f.expert_intermediate, f.shared_intermediate) == \
        (False, 128, 6, 1856, 3712)
    assert (m.linear.heads, m.linear.head_dim, m.linear.state_size, m.linear.groups,
            m.linear.conv_kernel, m.linear.chunk_size) == (64, 64, 128, 8, 4, 128)
    p = param_counts(m)
    assert p["params_total"] == pytest.approx(31.6e9, rel=0.02)
    assert p["params_active"] == pytest.approx(3.6e9, rel=0.02)
    res = evaluate(m, H100, Workload("decode", 16384), make_row(batch=64)[None])
    assert res.valid[0]


def test_nemotron_h_56b_config():
    """Nemotron-H-56B-Base-8K (a copy of its config.json): 118 blocks M-M-...M*-... = 54
    Mamba-2, 10 attention, 54 MLP (relu2, two matrices of intermediate_size 32768) as 64 lts
    layers, 10 without an FFN. The card (huggingface.co/nvidia/Nemotron-H-56B-Base-8K; arXiv
    2504.03624): 56B parameters."""
    m = load_model(f"{DATA}/nemotron-h-56b-base-8k.json")
    assert m.layers == 64 and len(m.no_ffn) == 10 and not m.is_moe
    assert (m.ffn.gated, m.ffn.intermediate, m.attention.head_dim) == (False, 32768, 128)
    assert param_counts(m)["params_total"] == pytest.approx(56e9, rel=0.02)


def _config(tmp_path, **change):
    cfg = json.loads(open(f"{DATA}/nemotron-3-nano-30b-a3b.json").read())
    cfg.update(change)
    for k in [k for k, v in change.items() if v is None]:
        del cfg[k]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "config.json"


@pytest.mark.parametrize("change, key, message", [
    (dict(hybrid_override_pattern="EM*E", num_hidden_layers=4), "hybrid_override_pattern",
     "block 0 (moe) follows no block; lts pairs each MLP or MoE block with the mixer block "
     "before it"),
    (dict(hybrid_override_pattern="MEE", num_hidden_layers=3), "hybrid_override_pattern",
     "block 2 (moe) follows moe; lts pairs each MLP or MoE block with the mixer block before it"),
    (dict(hybrid_override_pattern="ME*-", num_hidden_layers=4), "hybrid_override_pattern",
     "has both MLP and MoE blocks; lts costs one FFN kind in a Nemotron-H model"),
    (dict(hybrid_override_pattern="ME*", num_hidden_layers=3), "hybrid_override_pattern",
     "ends with a attention block; lts needs an FFN block last (the final norm takes an FFN's "
     "output)"),
    (dict(hybrid_override_pattern="MX*E", num_hidden_layers=4), "hybrid_override_pattern",
     "'X' is not a block (expected a string of M Mamba-2, * attention, - MLP, E MoE)"),
    (dict(num_hidden_layers=50), "num_hidden_layers",
     "50 is not the 52 blocks of hybrid_override_pattern"),
    (dict(mlp_hidden_act="silu"), "mlp_hidden_act",
     "'silu' is not supported (expected 'relu2': a non-gated MLP of two matrices)"),
    (dict(mamba_num_heads=None), "mamba_num_heads", "missing (expected an integer)"),
    (dict(n_groups=3), "n_groups", "3 does not divide mamba_num_heads = 64"),
])
def test_nemotron_h_config_errors(tmp_path, change, key, message):
    path = _config(tmp_path, **change)
    with pytest.raises(SpecError) as e:
        model_from_hf_config(path)
    assert str(e.value) == f"{path}: {key}: {message}"


def test_layers_block_type_is_read_like_the_pattern(tmp_path):
    """transformers 5's layers_block_type (Nemotron 3 Ultra, 3.5) gives the same model as the
    pattern string."""
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    cfg = json.loads(open(f"{DATA}/nemotron-3-nano-30b-a3b.json").read())
    blocks = [names[ch] for ch in cfg["hybrid_override_pattern"]]
    path = _config(tmp_path, hybrid_override_pattern=None, num_hidden_layers=None,
                   layers_block_type=blocks)
    a, b = model_from_hf_config(path), load_model(f"{DATA}/nemotron-3-nano-30b-a3b.json")
    assert (a.layer_types, a.no_ffn, param_counts(a)) == (b.layer_types, b.no_ffn,
                                                         param_counts(b))


# ----------------------------------------------------------------------------------------------
# quantized checkpoints: exclude lists by block index, the Mamba-2 mixers' own group (ssm)

def test_lightning_mixed_precision_gives_mamba_its_own_format():
    """NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4 (its config.json; its hf_quant_config.json
    with the per-expert entries of experts 1-126 left out: every MoE block lists all 128 alike,
    and lts maps them to one group): ModelOpt MIXED_PRECISION with block indices
    (backbone.layers.N.mixer.*). The 23 Mamba-2 blocks' in_proj / out_proj FP8 (the ssm
    group), the 6 attention blocks' q/k/v/o_proj excluded (bf16), the experts, shared experts
    and LM head W4A16_NVFP4, every gate excluded (router bf16), conv1d skipped. Its shape is
    Nano's (31.58B; no card found for Lightning: the name's 30B, Nano's card 31.6B)."""
    m = load_model(f"{DATA}/nemotron-3.5-lightning-30b-a3b-nvfp4")
    p = m.precision
    assert p.weights == "w4a16_nvfp4" and p.kv_cache == "fp8"
    assert {g: p.format_of(g) for g in ("attention", "ssm", "router", "experts",
                                        "shared_experts", "lm_head", "embedding")} == \
        {"attention": "bf16", "ssm": "fp8", "router": "bf16", "experts": "w4a16_nvfp4",
         "shared_experts": "w4a16_nvfp4", "lm_head": "w4a16_nvfp4", "embedding": "bf16"}
    assert param_counts(m)["params_total"] == pytest.approx(31.6e9, rel=0.02)
    w = weight_params(m)
    g = m.linear
    # the Mamba-2 mixers: in_proj, out_proj, conv1d with its bias, A_log, D, dt_bias, the norm
    assert w["ssm"] == 23 * (m.hidden * g.in_proj_out + g.intermediate * m.hidden
                             + g.conv_channels * (g.conv_kernel + 1) + 3 * g.heads
                             + g.intermediate)
    assert w["attention"] == 6 * m.hidden * (32 + 2 * 2) * 128 + 6 * 32 * 128 * m.hidden


def test_nano_nvfp4_quantizes_its_mamba_mixers_in_17_of_23_blocks():
    """NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 (its config.json and hf_quant_config.json) keeps
    the Mamba-2 mixers of the 6 Mamba blocks before an attention block (4, 11, 18, 25, 32, 41)
    unquantized, the other 17 NVFP4 (issue 36: a format per layer): the ssm group quantized in
    17/23 of its layers, its bytes the mean of the two formats'."""
    from lts.specs import weight_bytes, weight_params
    from lts.specs.units import WEIGHT_FORMATS
    path = f"{DATA}/nemotron-3-nano-30b-a3b-nvfp4"
    m = load_model(path)
    p = m.precision
    assert p.format_of("ssm") == "nvfp4" and p.share_of("ssm") == 17 / 23
    assert p.share_of("experts") == 1.0 and p.format_of("attention") == "bf16"
    n = weight_params(m)["ssm"]
    assert weight_bytes(m)["ssm"] == pytest.approx(
        n * (17 / 23 * WEIGHT_FORMATS["nvfp4"][0] + 6 / 23 * 2.0), rel=1e-12)


def test_ssm_format_costs_the_mamba_projections_only():
    """[precision] formats = {ssm = "fp8"} on synthetic_nemotron_h (4 Mamba-2 layers of 6):
    at tp 1 a GPU holds exactly the 4 Mamba layers' in_proj and out_proj in one byte instead
    of two; the attention layers' projections keep bf16."""
    d = model_dict()
    a = model_from_dict(d, "m.toml")
    b = model_from_dict(d | {"precision": {"weights": "bf16", "formats": {"ssm": "fp8"}}},
                        "m.toml")
    assert b.precision.format_of("ssm") == "fp8" and b.precision.format_of("attention") == "bf16"
    work = Workload("decode", 4096)
    row = make_row(batch=8)[None]
    ra, rb = evaluate(a, H100, work, row), evaluate(b, H100, work, row)
    g = a.linear
    assert ra.memory_bytes[0] - rb.memory_bytes[0] == \
        pytest.approx(4 * (H * g.in_proj_out + g.intermediate * H) * 1.0, rel=1e-12)

