"""Sparse attention (DeepSeek Sparse Attention: DeepSeek-V3.2, GLM-5; issue 22, item 1) and
multi-token-prediction layers counted in the parameters: the [attention] index keys and their
errors, deepseek_v32 / glm_moe_dsa configs, bytes and FLOPs per layer in closed form below and
above index_topk, sparse attention never reads more MLA latent than dense MLA (hypothesis), the
scalar reference (tests/reference.py) on a sparse model, the shipped files against their
published counts, and DeepSeek-V3.2 at a 131,072-token context against dense MLA."""
import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_mla, synthetic_shared_index, synthetic_sparse
from lts.cli import cli
from lts.cost import kv
from lts.cost.layouts import MODE_NONE, SLOT
from lts.cost.model import evaluate
from lts.cost.tables import build_tables
from lts.specs import (SpecError, attention_params, load_model, load_topology, model_from_dict,
                       param_counts)
from lts.specs.strategy import Space, coarse_of, make_row
from lts.specs.workload import Workload
from test_costmodel_reference import WORKLOADS, compare, report
from test_layer_kinds import scores     # (FLOPs, bytes, KV) of one sequence's scores op

H100 = load_topology("h100_dgx")
K = 256                                    # synthetic_sparse's index_topk
HEADS, LATENT, IH, IHD = 16, 256 + 32, 8, 64
LATENT_BYTES = LATENT * 2                  # bf16 latent (kv_lora + rope) of one token
INDEX_BYTES = IHD + 4                      # fp8 key + one fp32 scale (per 128 values)


def mla(**att):
    a = dict(kind="mla", heads=16, kv_heads=16, head_dim=96, q_lora_rank=384, kv_lora_rank=256,
             qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)
    a.update(att)
    return dict(name="s", source="test", layers=2, hidden=1024, vocab=1000, attention=a,
                ffn=dict(kind="dense", gated=True, intermediate=2048))


# ----------------------------------------------------------------------------------------------
# the representation

def test_index_keys_from_a_model_file():
    m = synthetic_sparse()
    a = m.attention
    assert a.sparse and (a.index_topk, a.index_heads, a.index_head_dim) == (K, IH, IHD)
    assert not synthetic_mla().attention.sparse
    assert kv.index_token_bytes(m) == INDEX_BYTES and kv.index_token_bytes(synthetic_mla()) == 0
    # the indexer's weights: wq_b [384 -> 8 x 64], wk [1024 -> 64], k_norm (2 x 64),
    # weights_proj [1024 -> 8]
    assert attention_params(m)["indexer"] == 384 * 8 * 64 + 1024 * 64 + 2 * 64 + 1024 * 8
    assert sum(attention_params(m).values()) == \
        sum(attention_params(synthetic_mla()).values()) + attention_params(m)["indexer"]


@pytest.mark.parametrize("att, key, message", [
    (dict(index_topk=2048, index_heads=64, index_head_dim=128, kind="gqa", heads=16, kv_heads=16,
          head_dim=64), "attention.index_topk",
     "is only supported with mla attention (DeepSeek Sparse Attention)"),
    (dict(index_topk=2048, index_heads=64), "attention.index_head_dim",
     "missing (expected an integer: attention.index_topk is set, and sparse attention needs "
     "index_topk, index_heads and index_head_dim)"),
    (dict(index_topk=0, index_heads=64, index_head_dim=128), "attention.index_topk",
     "0 must be > 0"),
])
def test_bad_index_keys_are_refused(att, key, message):
    with pytest.raises(SpecError) as e:
        model_from_dict(mla(**att), "s.toml")
    assert str(e.value) == f"s.toml: {key}: {message}"


def test_sparse_attention_with_a_window_is_refused():
    data = mla(index_topk=2048, index_heads=64, index_head_dim=128, sliding_window=4096)
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "s.toml")
    assert str(e.value) == ("s.toml: attention.index_topk: sparse attention with a sliding "
                            "window or layer_types is not supported (lts costs DeepSeek Sparse "
                            "Attention on every layer)")


def test_mtp_layers_key():
    assert model_from_dict(mla(), "s.toml").mtp_layers == 0
    assert model_from_dict({**mla(), "mtp_layers": 1}, "s.toml").mtp_layers == 1
    with pytest.raises(SpecError) as e:
        model_from_dict({**mla(), "mtp_layers": -1}, "s.toml")
    assert str(e.value) == "s.toml: mtp_layers: -1 must be >= 0"


# ----------------------------------------------------------------------------------------------
# closed forms per layer

@pytest.mark.parametrize("context", [100, K, 4096, 131072])
def test_decode_reads_top_k_latents_and_every_index_key(context):
    sel = min(context, K)
    fl, by, cache = scores(synthetic_sparse(), Workload("decode", context))
    # MLA over the selected latents + the indexer over every key
    assert fl == pytest.approx(2 * HEADS * LATENT * sel + 2 * IH * IHD * context, rel=1e-12)
    # the selected latents, every indexer key, the query in and the scores out
    assert by == pytest.approx(sel * LATENT_BYTES + context * INDEX_BYTES
                               + HEADS * LATENT * 2 * 2, rel=1e-12)
    # every token's latent and indexer key is held
    assert cache == pytest.approx(context * (LATENT_BYTES + INDEX_BYTES), rel=1e-12)
    assert kv.request_bytes(synthetic_sparse(), context) == \
        6 * context * (LATENT_BYTES + INDEX_BYTES)


@pytest.mark.parametrize("context", [100, K, 2048])
def test_prefill_attends_min_position_top_k_keys(context):
    L = context
    mean = sum(min(i, K) for i in range(1, L + 1)) / L      # query i: min(i, K) keys
    fl, by, cache = scores(synthetic_sparse(), Workload("prefill", context))
    assert fl == pytest.approx(2 * HEADS * LATENT * L * mean + 2 * IH * IHD * L * (L + 1) / 2,
                               rel=1e-12)
    # the prompt's latents (every key is some query's choice) and indexer keys, queries in and
    # scores out
    assert by == pytest.approx(L * (LATENT_BYTES + INDEX_BYTES) + L * HEADS * LATENT * 2 * 2,
                               rel=1e-12)
    assert cache == pytest.approx(L * (LATENT_BYTES + INDEX_BYTES), rel=1e-12)


def test_below_top_k_sparse_is_dense_mla_plus_the_indexer():
    work = Workload("decode", 200)
    fs, bs, cs = scores(synthetic_sparse(), work)
    fd, bd, cd = scores(synthetic_mla(), work)
    assert fs - fd == pytest.approx(2 * IH * IHD * 200, rel=1e-9)
    assert bs - bd == pytest.approx(200 * INDEX_BYTES, rel=1e-9)
    assert cs - cd == pytest.approx(200 * INDEX_BYTES, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(topk=st.integers(1, 1 << 17), context=st.integers(1, 1 << 18),
       phase=st.sampled_from(["decode", "prefill"]), tp=st.sampled_from([1, 2, 4, 8]),
       batch=st.sampled_from([1, 8, 64]))
def test_sparse_attention_never_reads_more_latent_than_dense_mla(topk, context, phase, tp, batch):
    """The context op reads only MLA latents: never more with sparse attention, in any mode;
    the scores op's reads beyond the indexer's keys neither. A prefill's queries in and results
    out are apart: dense MLA runs them un-absorbed (heads x 96 and 64 wide, tables.
    mla_prefill_shape), sparse MLA absorbed (288 and 256), so MODE_NONE less those."""
    hbm = H100.hbm_bandwidth_bytes_s * H100.memory_efficiency
    io = {"scores": (0.0, 0.0), "context": (0.0, 0.0)}    # (sparse, dense) query bytes
    modes = slice(0, 4)
    if phase == "prefill":
        context = min(context, 8192)
        rows, modes = batch * context, slice(MODE_NONE, MODE_NONE + 1)
        io = {op: (rows * HEADS * d_sp * 2 * 2 / hbm, rows * HEADS * d_de * 2 * 2 / hbm)
              for op, d_sp, d_de in (("scores", LATENT, 96), ("context", 256, 64))}
    work = Workload(phase, context)
    coarse = coarse_of(make_row(tp=tp, batch=batch))[None]
    sp = build_tables(synthetic_sparse(topk), H100, work, coarse)
    de = build_tables(synthetic_mla(), H100, work, coarse)
    ctx = SLOT["context"]
    i_sp, i_de = io["context"]
    assert np.all(sp.memory_s[0, ctx, modes] - i_sp
                  <= (de.memory_s[0, ctx, modes] - i_de) * (1 + 1e-12) + 1e-18)
    sc = SLOT["scores"]
    i_sp, i_de = io["scores"]
    index_read = batch * context * INDEX_BYTES          # every sequence, every key, MODE_NONE
    assert (sp.memory_s[0, sc, MODE_NONE] - i_sp) * hbm - index_read <= \
        (de.memory_s[0, sc, MODE_NONE] - i_de) * hbm * (1 + 1e-9)
    assert kv.selected_tokens(synthetic_sparse(topk), float(context)) <= context


# ----------------------------------------------------------------------------------------------
# the scalar reference on a sparse model

@pytest.mark.parametrize("phase", WORKLOADS)
@pytest.mark.parametrize("topk", [K, 65536])      # contexts above, then below, index_topk
def test_sparse_model_matches_reference(phase, topk):
    model, work = synthetic_sparse(topk), WORKLOADS[phase]
    space = Space.for_model(model, H100.gpus)
    rows = [make_row(tp=tp, batch=b) for tp, b in ((1, 1), (2, 8), (8, 64))]
    rows = np.concatenate([np.stack(rows), space.decode(
        space.sample(np.random.default_rng(sum(map(ord, phase)) + topk), 60))])
    bad = compare(model, H100, work, rows)
    assert not bad, report(rows, bad)


# ----------------------------------------------------------------------------------------------
# the families: config.json, shipped files, published counts

V32 = {   # huggingface.co/deepseek-ai/DeepSeek-V3.2/blob/main/config.json: its shape keys
    "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "index_topk": 2048, "index_n_heads": 64,
    "index_head_dim": 128, "num_nextn_predict_layers": 1, "vocab_size": 129280,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    # and its context window, as models/deepseek-v3.2.toml's context_window gives it (YaRN 40 x
    # 4096: already scaled)
    "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}
GLM5 = {  # huggingface.co/zai-org/GLM-5 config.json's shape keys (models/glm-5.toml's sources)
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
    "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048,
    "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
    "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
    "v_head_dim": 256, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "index_topk": 2048, "index_n_heads": 32, "index_head_dim": 128,
    "num_nextn_predict_layers": 1, "vocab_size": 154880, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 202752}   # (NVIDIA NeMo AutoModel's GLM-5 page: 202,752)


def write(tmp_path, config, **changes):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**config, **changes}))
    return p


def strip(m):
    return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                               active_params_published=0.0)


@pytest.mark.parametrize("config, shipped", [(V32, "deepseek-v3.2"), (GLM5, "glm-5")])
def test_config_and_shipped_file_agree(tmp_path, config, shipped):
    m = load_model(str(write(tmp_path, config)))
    assert m.attention.sparse and m.mtp_layers == 1
    assert "1 multi-token-prediction layer (num_nextn_predict_layers) counted apart" in m.source
    assert strip(m) == strip(load_model(shipped))


def test_published_counts():
    # DeepSeek-V3.2's model page: 685B, the checkpoint's tensors with the MTP module (as
    # DeepSeek-V3's 685B = 671B + 14B MTP); GLM-5's model card: 744B, the main model
    v32 = param_counts(load_model("deepseek-v3.2"))
    assert abs((v32["params_total"] + v32["params_mtp"]) / 685e9 - 1) < 0.02
    assert v32["params_total"] == pytest.approx(
        param_counts(load_model("deepseek-v3"))["params_total"] + 61 * (
            1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64), rel=1e-12)   # + the indexers
    glm = param_counts(load_model("glm-5"))
    assert abs(glm["params_total"] / 744e9 - 1) < 0.02
    assert abs(glm["params_active"] / 40e9 - 1) < 0.05


def test_mtp_counted_apart():
    """DeepSeek-V3's MTP module as its checkpoint stores it: one MoE decoder layer, eh_proj,
    three norms and its own embedding and head (README_WEIGHTS.md: 11.5B unique, ~14B in all),
    outside params_total (the published 671B excludes it)."""
    m = load_model("deepseek-v3")
    c = param_counts(m)
    assert m.mtp_layers == 1 and abs(c["params_total"] / 671e9 - 1) < 0.002
    h, v = 7168, 129280
    unique = c["params_mtp"] - 2 * v * h
    assert abs(unique / 11.5e9 - 1) < 0.01            # 11.61B
    assert c["params_mtp"] == pytest.approx(
        sum(attention_params(m).values()) + 2 * h + 256 * 3 * h * 2048 + 3 * h * 2048 + h * 256
        + 2 * h * h + 3 * h + 2 * v * h, rel=1e-12)
    assert param_counts(synthetic_mla())["params_mtp"] == 0


def test_glm5_2_shared_indexers(tmp_path):
    """GLM-5.2's indexer_types (huggingface.co/zai-org/GLM-5.2 config.json, tests/data/hf/
    glm-5.2.json): the indexer on the 21 "full" layers (0-2 and every 4th from 6), none on the 57
    "shared" ones, which hold no indexer weights; all "full" reads as GLM-5."""
    m = load_model("tests/data/hf/glm-5.2.json")
    full = [0, 1, 2] + list(range(6, 78, 4))
    assert [i for i, ix in enumerate(m.layer_indexed) if ix] == full and len(full) == 21
    assert m.attention_kinds == (((None, True), 21), ((None, False), 57))
    glm5 = load_model(str(write(tmp_path, GLM5)))
    idx = attention_params(glm5)["indexer"]
    assert idx == 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32
    # GLM-5.2's shape keys are GLM-5's (max_position_embeddings aside): 57 indexers fewer
    assert param_counts(glm5)["params_total"] - param_counts(m)["params_total"] == 57 * idx
    # published: 744B total, 40B active (the GLM-5.2 model card, huggingface.co/zai-org/GLM-5.2,
    # as quoted by orbital.net.in's and api.treerouter.ai's GLM-5.2 write-ups); its page's 753B
    # counts the MTP layer too (here 743.4B + 9.95B without the embedding and head copies)
    c = param_counts(m)
    assert abs(c["params_total"] / 744e9 - 1) < 0.02
    assert abs(c["params_active"] / 40e9 - 1) < 0.05
    assert abs((c["params_total"] + c["params_mtp"] - 2 * 154880 * 6144) / 753e9 - 1) < 0.02
    # a KV cache of 131,072 tokens: the indexer keys of 21 layers, not 78
    tokens = 131072
    assert kv.request_bytes(glm5, tokens) - kv.request_bytes(m, tokens) == \
        57 * tokens * (128 + 4)
    all_full = load_model(str(write(tmp_path, GLM5, indexer_types=["full"] * 78)))
    assert all_full.attention == glm5.attention and all_full.layer_indexed == (True,) * 78


BAD_INDEXER_TYPES = [
    (["full", "shared"], "attention.indexer_types",
     "has 2 entries (expected one a layer: 8)"),
    (["shared"] + ["full"] * 7, "attention.indexer_types",
     "starts with a shared layer (expected \"full\" first: a shared layer reuses an earlier "
     "layer's top-k)"),
    (["full", "none"] * 4, "attention.indexer_types",
     "['full', 'none', 'full', 'none', 'full',... (64 characters) is not a list of "
     "\"full\" and \"shared\""),
]


@pytest.mark.parametrize("kinds, key, message", BAD_INDEXER_TYPES)
def test_bad_indexer_types_are_refused(kinds, key, message):
    data = mla(index_topk=2048, index_heads=64, index_head_dim=128, indexer_types=kinds)
    data["layers"] = 8
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "s.toml")
    assert str(e.value) == f"s.toml: {key}: {message}"
    data = mla(indexer_types=["full", "full"])
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "s.toml")
    assert str(e.value) == ("s.toml: attention.indexer_types: is only supported with sparse "
                            "attention (attention.index_topk)")


def test_shared_index_layers_cost_no_indexer():
    """The closed forms of one decode step's scores op (one sequence, tp 1): every layer reads
    min(context, topk) latents; the indexer's FLOPs and key reads over the whole context only in
    the 2 of 8 layers that run one; the KV cache holds 2 layers' indexer keys."""
    shared = synthetic_shared_index()
    every = dataclasses.replace(shared, attention=dataclasses.replace(shared.attention,
                                                                      indexer_types=()))
    assert sum(shared.layer_indexed) == 2 and sum(every.layer_indexed) == 8
    context = 4096
    fs, bs, cs = scores(shared, Workload("decode", context))
    fe, be, ce = scores(every, Workload("decode", context))
    idx_flops = 2 * IH * IHD * context               # one query against every key, per layer
    assert fe - fs == pytest.approx(6 / 8 * idx_flops, rel=1e-12)
    assert be - bs == pytest.approx(6 / 8 * context * INDEX_BYTES, rel=1e-12)
    assert ce - cs == pytest.approx(6 / 8 * context * INDEX_BYTES, rel=1e-12)
    assert kv.request_bytes(every, context) - kv.request_bytes(shared, context) == \
        6 * context * INDEX_BYTES
    # parameters: the indexer's projections in 2 layers only
    idx = attention_params(shared)["indexer"]
    assert idx == 384 * IH * IHD + 1024 * IHD + 2 * IHD + 1024 * IH
    assert param_counts(every)["params_total"] - param_counts(shared)["params_total"] == 6 * idx
    # a pipeline split must give every stage the same indexer layers
    assert list(kv.even_split(shared, [1, 2, 4, 8])) == [True, True, False, False]


@pytest.mark.parametrize("phase", WORKLOADS)
@pytest.mark.parametrize("topk", [K, 65536])
def test_shared_index_model_matches_reference(phase, topk):
    """The tables (a kind of layers without an indexer, weighted by its share) against the scalar
    reference walking each layer with or without its indexer."""
    model, work = synthetic_shared_index(topk), WORKLOADS[phase]
    space = Space.for_model(model, H100.gpus)
    rows = [make_row(tp=tp, pp=pp, batch=b) for tp, pp, b in ((1, 1, 1), (2, 2, 8), (8, 1, 64),
                                                          (2, 4, 8))]
    rows = np.concatenate([np.stack(rows), space.decode(
        space.sample(np.random.default_rng(sum(map(ord, phase)) + topk + 1), 60))])
    bad = compare(model, H100, work, rows)
    assert not bad, report(rows, bad)


def test_a_missing_index_key_names_the_config_key(tmp_path):
    config = {k: v for k, v in V32.items() if k != "index_n_heads"}
    p = write(tmp_path, config)
    with pytest.raises(SpecError) as e:
        load_model(str(p))
    assert str(e.value) == f"{p}: index_n_heads: missing (expected an integer)"


# ----------------------------------------------------------------------------------------------
# DeepSeek-V3.2 at 128k against dense MLA

def test_deepseek_v32_at_128k_against_dense_mla():
    m = load_model("deepseek-v3.2")
    dense = dataclasses.replace(m, attention=dataclasses.replace(
        m.attention, index_topk=0, index_heads=0, index_head_dim=0))
    ctx = 131072
    # held: the latent (576 bf16) and the indexer key (132 bytes) of every token, 61 layers
    assert kv.request_bytes(m, ctx) == 61 * ctx * (576 * 2 + 132)
    assert kv.request_bytes(dense, ctx) == 61 * ctx * 576 * 2
    h200 = load_topology("h200_dgx")
    work = Workload("decode", ctx)
    rows = np.array([make_row(tp=8, batch=b) for b in (1, 8, 16)])
    sp, de = evaluate(m, h200, work, rows), evaluate(dense, h200, work, rows)
    assert np.all(sp.valid == de.valid)
    # reads per token: 2048 latents + every indexer key against every latent
    assert np.all(sp.tpot_s[sp.valid] < de.tpot_s[de.valid])


def test_models_show_says_sparse_attention_and_mtp():
    r = CliRunner().invoke(cli, ["models", "--show", "deepseek-v3.2"], catch_exceptions=False,
                           terminal_width=200)
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "sparse (DSA): an indexer of 64 heads of 128 picks 2048 keys a query" in text
    assert ("MTP layers 1: 1.348e+10 parameters, counted apart (total with them 6.854e+11), "
            "not loaded or run") in text


@settings(max_examples=25, deadline=None)
@given(st.lists(st.booleans(), min_size=7, max_size=7), st.sampled_from([256, 65536]),
       st.sampled_from(["decode", "prefill"]), st.integers(64, 8192))
def test_fewer_indexers_never_cost_more(shared_flags, topk, phase, context):
    """Any indexer_types (the first layer full): the scores op's FLOPs, bytes and cache and the
    KV cache never exceed every layer running its indexer, and the parameters drop by exactly
    one indexer a shared layer."""
    base = synthetic_shared_index(topk)
    kinds = ["full"] + ["shared" if f else "full" for f in shared_flags]
    m = dataclasses.replace(base, attention=dataclasses.replace(
        base.attention, indexer_types=tuple(kinds) if any(shared_flags) else ()))
    every = dataclasses.replace(base, attention=dataclasses.replace(base.attention,
                                                                    indexer_types=()))
    work = Workload(phase, context)
    for a, b in zip(scores(m, work), scores(every, work)):
        assert a <= b * (1 + 1e-12)
    assert kv.request_bytes(m, context) <= kv.request_bytes(every, context)
    assert param_counts(every)["params_total"] - param_counts(m)["params_total"] == \
        sum(shared_flags) * attention_params(m)["indexer"]
