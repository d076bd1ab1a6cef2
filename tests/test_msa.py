"""MiniMax-M3 (issue 36, item 1): block-sparse attention (MSA; ``[attention] layer_types``
"block_sparse_attention" with sparse_block_size, sparse_topk_blocks, index_heads and
index_head_dim), read and refused with exact messages, in a model file and a config.json; the
keys a query attends to by brute force against the closed forms; one layer's FLOPs, bytes and
held cache in closed form; weights and KV bytes in closed form; fewer top blocks never cost more;
the exact solver equals brute force. (The scalar reference walks each layer one query at a time:
tests/test_costmodel_reference.py, ``block-sparse-small``.) MiniMax-M3 and its NVFP4 export from
their config.json files against the published count; the mxfp8 format."""
import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_block_sparse
from lts.cost import kv
from lts.cost.layouts import MODE_DIM0, SLOT
from lts.cost.tables import build_tables
from lts.search.exact import _Exact
from lts.specs import (SpecError, attention_params, load_model, load_topology, model_from_dict,
                       param_counts, weight_params)
from lts.specs.model import BlockSparse, PrecisionSpec
from lts.specs.units import WEIGHT_FORMATS, weight_format
from lts.specs.strategy import coarse_of, make_row
from lts.specs.workload import Workload
from test_layer_kinds import EXACT_WORKLOADS, exact_equals_brute_force, never_costs_more, scores

H100 = load_topology("h100_dgx")
B, TOPK, HEADS, KVH, HD, IH, IHD = 64, 4, 16, 4, 64, 8, 64    # synthetic_block_sparse's
KV_TOKEN = 2 * KVH * HD * 2                # one token's K and V in one layer, bf16
INDEX_TOKEN = IHD * 2                      # its indexer key, in the model dtype (bf16)


def all_sparse():
    """synthetic_block_sparse with every layer block-sparse."""
    return synthetic_block_sparse(layer_types=["block_sparse_attention"])


def brute_keys(i, block, topk):
    """Keys a KV head attends to for the query at position i, block by block: its blocks
    ceil(i / block), each whole but its own; the current one and the topk - 1 others kept."""
    blocks = [min(block, i - j * block) for j in range(-(-i // block))]
    return sum(blocks) if len(blocks) <= topk else (topk - 1) * block + blocks[-1]


# ----------------------------------------------------------------------------------------------
# reading

def test_layer_kinds_from_a_model_file():
    m = synthetic_block_sparse()
    marker = BlockSparse(B, TOPK)
    assert m.layer_windows == (None, marker, marker) * 2
    assert m.layer_indexed == (False, True, True) * 2
    assert dict(m.kind_groups) == {None: 2, marker: 4}
    assert m.attention_kinds == (((None, False), 2), ((marker, True), 4))
    assert str(marker) == "block-sparse top-4 of 64"
    assert m.attention.block_sparse and not m.attention.sparse
    # every layer block-sparse stays a pattern (not "every layer alike: full")
    assert all_sparse().layer_windows == (marker,) * 6


def block_sparse(**att):
    a = dict(kind="gqa", heads=16, kv_heads=4, head_dim=64,
             layer_types=["full_attention", "block_sparse_attention"], sparse_block_size=64,
             sparse_topk_blocks=4, index_heads=4, index_head_dim=64)
    a.update(att)
    return dict(name="b", source="test", layers=2, hidden=1024, vocab=1000, attention=a,
                ffn=dict(kind="dense", gated=True, intermediate=2048))


NEEDS = ("missing (expected an integer: attention.layer_types has block_sparse_attention "
         "layers, which need sparse_block_size, sparse_topk_blocks, index_heads and "
         "index_head_dim)")
ONE_SHAPE = ("is not supported with block_sparse_attention layers (lts costs block-sparse "
             "attention in the model's one attention shape)")


@pytest.mark.parametrize("att, key, message", [
    (dict(sparse_topk_blocks=None), "attention.sparse_topk_blocks", NEEDS),
    (dict(index_head_dim=None), "attention.index_head_dim", NEEDS),
    (dict(sparse_block_size=0), "attention.sparse_block_size", "0 must be > 0"),
    (dict(index_heads=6), "attention.index_heads",
     "6 is not a multiple of attention.kv_heads = 4 (each KV head picks its blocks with its own "
     "index heads)"),
    (dict(layer_types=["full_attention"]), "attention.sparse_block_size",
     "is set but attention.layer_types has no block_sparse_attention layers"),
    (dict(index_topk=2048), "attention.index_topk",
     "is only supported with mla attention (DeepSeek Sparse Attention)"),
    (dict(kind="mla", kv_heads=16, head_dim=96, kv_lora_rank=256, qk_nope_head_dim=64,
          qk_rope_head_dim=32, v_head_dim=64), "attention.layer_types",
     "block_sparse_attention layers with mla attention are not supported (gqa only)"),
    (dict(v_head_dim=128), "attention.v_head_dim", ONE_SHAPE),
    (dict(full=dict(kv_heads=2)), "attention.full", ONE_SHAPE),
])
def test_bad_block_sparse_attention_is_refused(att, key, message):
    data = block_sparse(**{k: v for k, v in att.items() if v is not None})
    for k in [k for k, v in att.items() if v is None]:
        del data["attention"][k]
    with pytest.raises(SpecError) as e:
        model_from_dict(data, "b.toml")
    assert str(e.value) == f"b.toml: {key}: {message}"


M3 = "tests/data/hf/minimax-m3.json"
M3_NVFP4 = "tests/data/hf/minimax-m3-nvfp4"
SPARSE = "sparse_attention_config"


def m3_with(tmp_path, changes=(), sparse=()):
    cfg = json.load(open(M3))
    cfg.update(dict(changes))
    cfg[SPARSE].update(dict(sparse))
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


@pytest.mark.parametrize("changes, sparse, key, message", [
    ({}, {"sparse_init_block": 1}, f"{SPARSE}.sparse_init_block",
     "1 is not supported (expected 0: lts costs the top-k blocks with no forced initial block)"),
    ({}, {"sparse_local_block": 2}, f"{SPARSE}.sparse_local_block",
     "2 is not supported (expected 1: the current block, one of the top-k)"),
    ({}, {"sparse_disable_index_value": [0] * 60}, f"{SPARSE}.sparse_disable_index_value",
     "layer 3 is block-sparse with an index value (not 1); lts costs MiniMax-M3's indexer "
     "without one (no index_v / index_o)"),
    ({}, {"sparse_attention_freq": [0, 1]}, f"{SPARSE}.sparse_attention_freq",
     "[0, 1] is not 60 entries of 0 (full attention) or 1 (block-sparse)"),
    ({}, {"sparse_topk_blocks": 0}, f"{SPARSE}.sparse_topk_blocks", "0 must be > 0"),
    ({}, {"sparse_num_index_heads": 6}, f"{SPARSE}.sparse_num_index_heads",
     "6 is not a multiple of num_key_value_heads = 4 (each KV head picks its blocks with its "
     "own index heads)"),
    ({"attention_output_gate": True}, {}, "attention_output_gate",
     "true is not supported (expected false: lts reads MiniMax-M3 without an output gate)"),
    ({"moe_layer_freq": [0, 1] * 30}, {}, "moe_layer_freq",
     f"{str([0, 1] * 30)[:40]}... (180 characters) is not 60 entries, dense layers (0) then MoE layers (1) (lts costs a "
     "leading block of dense layers)"),
    ({"moe_intermediate_size": 2048}, {}, "moe_intermediate_size",
     "2048 is not intermediate_size (3072): lts reads one expert width"),
])
def test_bad_minimax_m3_config_names_its_key(tmp_path, changes, sparse, key, message):
    p = m3_with(tmp_path, changes, sparse)
    with pytest.raises(SpecError) as e:
        load_model(p)
    assert str(e.value) == f"{p}: {key}: {message}"


def test_minimax_m3_without_sparse_attention_is_full_gqa(tmp_path):
    m = load_model(m3_with(tmp_path, sparse={"use_sparse_attention": False}))
    assert m.layer_windows == (None,) * 60 and not m.attention.block_sparse
    assert "block-sparse attention on 0 of 60 layers" in m.source


# ----------------------------------------------------------------------------------------------
# keys attended, held and scored: closed forms against one query at a time

@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.integers(1, 3000), st.integers(0, 700), st.integers(1, 160), st.integers(1, 24))
def test_keys_are_one_query_at_a_time(length, start, block, topk):
    marker = BlockSparse(block, topk)
    # decode: each KV head reads the keys of its blocks; the cache holds every token
    assert float(kv.read_tokens(marker, float(length))) == brute_keys(length, block, topk)
    assert float(kv.block_keys(marker, float(length))) <= min(length, block * topk)
    assert float(kv.held_tokens(marker, float(length))) == length
    # prefill: query i attends to brute_keys(i), from the start and after a cached prefix
    want = sum(brute_keys(i, block, topk) for i in range(1, length + 1)) / length
    assert float(kv.mean_keys(marker, float(length))) == pytest.approx(want, rel=1e-12)
    after = sum(brute_keys(i, block, topk)
                for i in range(start + 1, start + length + 1)) / length
    assert float(kv.mean_keys_after(marker, float(start), float(length))) == \
        pytest.approx(after, rel=1e-12)
    # a mixed step's chunk reads its prompt so far, as under full attention (a bound)
    assert float(kv.chunk_reads(marker, 4, float(length), float(start))) == \
        float(kv.chunk_reads(None, 4, float(length), float(start)))


def test_at_most_topk_blocks_is_full_attention():
    marker = BlockSparse(B, TOPK)
    for L in (1, 100, B * TOPK):
        assert float(kv.mean_keys(marker, float(L))) == pytest.approx((L + 1) / 2, rel=1e-12)
        assert float(kv.read_tokens(marker, float(L))) == L
    # one past: its own block's one key and three whole blocks
    assert float(kv.read_tokens(marker, float(B * TOPK + 1))) == (TOPK - 1) * B + 1


# ----------------------------------------------------------------------------------------------
# one layer's scores op (every layer block-sparse), one sequence on one GPU

@pytest.mark.parametrize("context", [100, B * TOPK, 4096, 131072])
def test_decode_reads_the_chosen_keys_and_every_index_key(context):
    sel = brute_keys(context, B, TOPK)
    fl, by, cache = scores(all_sparse(), Workload("decode", context))
    # every head over its KV head's chosen keys; the indexer's heads over every key
    assert fl == pytest.approx(2 * HEADS * HD * sel + 2 * IH * IHD * context, rel=1e-12)
    # the chosen keys' K (half of KV_TOKEN), every indexer key, the query in and the scores out
    assert by == pytest.approx(sel * KV_TOKEN / 2 + context * INDEX_TOKEN + HEADS * HD * 2 * 2,
                               rel=1e-12)
    # every token's K and V and indexer key held
    assert cache == pytest.approx(context * (KV_TOKEN + INDEX_TOKEN), rel=1e-12)


@pytest.mark.parametrize("context", [100, 2048])
def test_prefill_attends_block_keys_and_scores_every_key(context):
    L = context
    mean = sum(brute_keys(i, B, TOPK) for i in range(1, L + 1)) / L
    fl, by, cache = scores(all_sparse(), Workload("prefill", context))
    assert fl == pytest.approx(2 * HEADS * HD * L * mean + 2 * IH * IHD * L * (L + 1) / 2,
                               rel=1e-12)
    # the whole prompt's K (each key is some query's choice) and indexer keys; queries, scores
    assert by == pytest.approx(L * (KV_TOKEN / 2 + INDEX_TOKEN) + L * HEADS * HD * 2 * 2,
                               rel=1e-12)
    assert cache == pytest.approx(L * (KV_TOKEN + INDEX_TOKEN), rel=1e-12)


def test_the_indexer_splits_with_the_heads():
    """Heads split over tp = 4: each rank scores with 8 / 4 index heads, reads every index key;
    at tp = 16 a rank keeps one index head (SGLang's max(1, index_heads / tp))."""
    work = Workload("decode", 8192)
    one = build_tables(all_sparse(), H100, work, coarse_of(make_row())[None])
    split = build_tables(all_sparse(), H100, work, coarse_of(np.stack([make_row(tp=4), make_row(tp=16)])))
    peak = H100.peak_for("bf16") * H100.compute_efficiency_for("bf16")
    sl, sel = SLOT["scores"], brute_keys(8192, B, TOPK)
    assert one.compute_s[0, sl, MODE_DIM0] * peak == \
        pytest.approx(2 * HEADS * HD * sel + 2 * IH * IHD * 8192, rel=1e-12)
    for g, heads, index_heads in ((0, 4, 2), (1, 1, 1)):
        assert split.compute_s[g, sl, MODE_DIM0] * peak == pytest.approx(
            2 * heads * HD * sel + 2 * index_heads * IHD * 8192, rel=1e-12)


# ----------------------------------------------------------------------------------------------
# weights and bytes

def test_weights_params_and_request_bytes_in_closed_form():
    m, h = synthetic_block_sparse(), 1024
    # q [h, 16 x 64], k and v [h, 4 x 64], o; the indexer's q [h, 8 x 64], k [h, 64], 2 norms
    assert attention_params(m) == {"qkv": h * (16 + 8) * 64, "o": 16 * 64 * h,
                                   "indexer": h * 8 * 64 + h * 64 + 2 * 64}
    # the indexer on the 4 block-sparse layers only
    core = h * 24 * 64 + 16 * 64 * h
    assert weight_params(m)["attention"] == 6 * core + 4 * (h * 8 * 64 + h * 64 + 2 * 64)
    dense = dataclasses.replace(m, layer_types=("full_attention",) * 6)
    assert param_counts(m)["params_total"] - param_counts(dense)["params_total"] == \
        4 * attention_params(m)["indexer"]
    assert kv.index_token_bytes(m) == INDEX_TOKEN
    for L in (100, 5000):
        assert kv.request_bytes(m, L) == 6 * L * KV_TOKEN + 4 * L * INDEX_TOKEN
    # the index key stays in the model dtype under an fp8 KV cache
    fp8 = dataclasses.replace(m, precision=PrecisionSpec(kv_cache="fp8"))
    assert kv.request_bytes(fp8, 100) == 6 * 100 * KV_TOKEN / 2 + 4 * 100 * INDEX_TOKEN


# ----------------------------------------------------------------------------------------------
# invariants and the exact solver

@settings(max_examples=15, deadline=None)
@given(st.data())
def test_fewer_top_blocks_never_cost_more(data):
    m = synthetic_block_sparse()
    fewer = data.draw(st.integers(1, TOPK - 1))
    never_costs_more(data, m, synthetic_block_sparse(sparse_topk_blocks=fewer))


@pytest.mark.parametrize("work", EXACT_WORKLOADS)
def test_exact_equals_brute_force_on_block_sparse_attention(work):
    _Exact(synthetic_block_sparse(), [1] * 12)
    exact_equals_brute_force(synthetic_block_sparse(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# MiniMax-M3's config.json files
#
# tests/data/hf/minimax-m3.json: huggingface.co/MiniMaxAI/MiniMax-M3 config.json; minimax-m3-
# nvfp4/: nvidia/MiniMax-M3-NVFP4 config.json and hf_quant_config.json (MIXED_PRECISION: NVFP4
# experts, MXFP8 attention, dense and shared-expert layers); both as a public serving tool
# bundles them (ai-dynamo/aiconfigurator at 095f58a5, aic-core/src/aiconfigurator_core/
# model_configs/). Published: "~428B total parameters, ~23B activated" (the model card,
# huggingface.co/MiniMaxAI/MiniMax-M3, as its mirror huggingface.co/unsloth/MiniMax-M3 shows it).

PUBLISHED_TOTAL, PUBLISHED_ACTIVE = 428e9, 23e9


@pytest.mark.parametrize("name", ["minimax-m3.json", "minimax-m3-nvfp4"])
def test_minimax_m3_against_its_published_count(name):
    m = load_model(f"tests/data/hf/{name}")
    counts = param_counts(m)
    assert abs(counts["params_total"] / PUBLISHED_TOTAL - 1) < 0.03, counts
    assert counts["params_total"] == pytest.approx(426.17e9, rel=1e-4)
    # active without the embedding and the LM head (23.5B)
    assert abs((counts["params_active"] - 2 * m.vocab * m.hidden) / PUBLISHED_ACTIVE - 1) < 0.03
    assert dict(m.kind_groups) == {None: 3, BlockSparse(128, 16): 57}
    assert (m.ffn.dense_layers, m.ffn.experts, m.ffn.top_k, m.ffn.shared_intermediate) == \
        (3, 128, 4, 3072)
    # 60 layers' K and V (4 heads of 128, bf16) and 57 indexer keys of 128 bf16: 137,472 bytes
    assert kv.request_bytes(m, 1) == 60 * 2048 + 57 * 256


def test_minimax_m3_formats():
    assert load_model(M3).precision == PrecisionSpec()
    nv = load_model(M3_NVFP4)
    assert {g: nv.precision.format_of(g) for g in ("experts", "attention", "dense_ffn",
                                                    "shared_experts", "router", "lm_head",
                                                    "embedding")} == {
        "experts": "nvfp4", "attention": "mxfp8", "dense_ffn": "mxfp8",
        "shared_experts": "mxfp8", "router": "bf16", "lm_head": "bf16", "embedding": "bf16"}
    assert nv.precision.kv_cache == "bf16"
    # the vision tower: 32 CLIP layers of 1280 (629.7M), the patch embedding, the projector and
    # the patch merger (0.87B), outside the totals
    assert "vision tower (vision_config) has 0.87B parameters" in nv.source


def test_mxfp8_format():
    # fp8 with one e8m0 (1-byte) scale per 32 (OCP MX v1.0): ModelOpt's MXFP8
    assert WEIGHT_FORMATS["mxfp8"] == (1 + 1 / 32, ("fp8", "bf16"))
    assert weight_format("MXFP8") == "mxfp8"
    assert load_topology("h100_dgx").peak_class("mxfp8") == "fp8"
    assert load_topology("a100_dgx").peak_class("mxfp8") == "bf16"
