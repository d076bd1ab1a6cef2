"""DeepSeek-V4 (issue 36): compressed attention (``[attention] kind = "compressed"``: a sliding
window on every layer, one compressed entry per r tokens, the indexer's top-k on the CSA layers)
and hyper-connections (``hc_mult``), read and refused with exact messages; the entries a layer
holds and a query attends to by brute force against the closed forms; entry, state and weight
sizes in closed form; hyper-connections never make a step cheaper; the exact solver equals
brute force. (The scalar reference walks each layer of its kind, one query at a time:
tests/test_costmodel_reference.py, ``compressed-small``.) DeepSeek-V4-Pro and -Flash from their
config.json files against their published counts."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generators import synthetic_compressed
from lts.cost import kv
from lts.search.exact import _Exact
from lts.specs import (SpecError, attention_params, compressor_params, hc_params, load_model,
                       model_from_dict, param_counts)
from lts.specs.model import Compressed
from lts.specs.workload import Workload
from test_layer_kinds import EXACT_WORKS, exact_equals_brute_force, never_costs_more


def compressed(**att):
    base = dict(kind="compressed", heads=16, kv_heads=1, head_dim=128, q_lora_rank=256,
                qk_rope_head_dim=32, o_lora_rank=128, o_groups=4, sliding_window=64,
                compress_ratios=[4, 16])
    base.update(att)
    return model_from_dict(dict(name="c", source="test", layers=2, hidden=1024, vocab=1000,
                                attention=base,
                                ffn=dict(kind="dense", gated=True, intermediate=4096)), "c.toml")


# ----------------------------------------------------------------------------------------------
# reading

def test_layer_kinds_from_the_ratios():
    m = synthetic_compressed()
    assert m.layer_windows[:3] == (64, Compressed(4, 64, 32), Compressed(16, 64, 0))
    assert m.layer_indexed == (False, True, False) * 2
    assert dict(m.kind_groups) == {64: 2, Compressed(4, 64, 32): 2, Compressed(16, 64, 0): 2}
    assert str(Compressed(4, 64, 32)) == "compressed 4 top-32" and m.hc_mult == 4
    # no indexer keys: every compressed layer attends to all its entries
    assert compressed().layer_windows == (Compressed(4, 64, 0), Compressed(16, 64, 0))


@pytest.mark.parametrize("att, key, message", [
    (dict(kv_heads=2, heads=16), "attention.kv_heads",
     "2 is not supported with compressed attention (expected 1: one KV head that all query "
     "heads share)"),
    (dict(compress_ratios=[4]), "attention.compress_ratios",
     "has 1 entries (expected one a layer: 2)"),
    (dict(compress_ratios=[4, -1]), "attention.compress_ratios",
     "[4, -1] is not a list of integers from 0 (a sliding window alone) to 16,777,216 "
     "(expected one a layer)"),
    (dict(o_groups=3), "attention.o_groups", "3 does not divide attention.heads = 16"),
    (dict(index_topk=8), "attention.index_heads",
     "missing (expected an integer: attention.index_topk is set, and the indexer needs "
     "index_topk, index_heads, index_head_dim and index_ratio)"),
    (dict(index_topk=8, index_heads=2, index_head_dim=32, index_ratio=8), "attention.index_ratio",
     "8 is not a ratio of compress_ratios (no layer would run the indexer)"),
    (dict(output_gate=True), "attention.output_gate",
     "is not supported with compressed attention (its layers are set by compress_ratios)"),
])
def test_bad_compressed_attention_is_refused(att, key, message):
    with pytest.raises(SpecError) as e:
        compressed(**att)
    assert str(e.value) == f"c.toml: {key}: {message}"


def test_the_window_is_required():
    base = dict(kind="compressed", heads=16, kv_heads=1, head_dim=128, q_lora_rank=256,
                o_lora_rank=128, o_groups=4, compress_ratios=[4, 16])
    with pytest.raises(SpecError) as e:
        model_from_dict(dict(name="c", source="t", layers=2, hidden=1024, vocab=1000,
                             attention=base, ffn=dict(kind="dense", gated=True,
                                                      intermediate=4096)), "c.toml")
    assert str(e.value) == "c.toml: attention.sliding_window: missing (expected an integer: " \
                           "compressed attention keeps a sliding window on every layer)"


# ----------------------------------------------------------------------------------------------
# entries held and attended: closed forms against one query at a time

def _brute_keys(length, w, r, topk):
    return sum(min(i, w) + (min(i // r, topk) if topk else i // r)
               for i in range(1, length + 1)) / length


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 3000), st.integers(1, 300), st.integers(1, 200), st.integers(0, 80))
def test_mean_keys_is_one_query_at_a_time(length, w, r, topk):
    marker = Compressed(r, w, topk)
    assert float(kv.mean_keys(marker, float(length))) == \
        pytest.approx(_brute_keys(length, w, r, topk), rel=1e-12)
    assert float(kv.floor_sum(length, r)) == sum(i // r for i in range(1, length + 1))
    # decode: the window's and the compressed entries, CSA at most topk of the latter
    assert float(kv.held_tokens(marker, float(length))) == min(length, w) + length // r
    assert float(kv.read_tokens(marker, float(length))) == \
        min(length, w) + (min(length // r, topk) if topk else length // r)


def test_entry_state_and_weight_sizes():
    pro = dataclasses.replace(synthetic_compressed().attention, head_dim=512, qk_rope_head_dim=64)
    # vLLM's fp8_ds_mla row (448 fp8 + 128 bf16 rotary + 8 scale bytes); bf16: head_dim x 2
    assert kv.compressed_entry_bytes(pro, 1.0) == 584
    assert kv.compressed_entry_bytes(pro, 2.0) == 1024
    m = dataclasses.replace(synthetic_compressed(), attention=dataclasses.replace(
        pro, index_head_dim=128))
    # fp32 kv and score state of the compressor's window: CSA 2 (2 x 4)(2 x 512) x 4 = 64 KiB
    # plus its indexer's 2 (2 x 4)(2 x 128) x 4 = 16 KiB; HCA at 16: 2 (16)(512) x 4
    assert kv.compressor_state_bytes(m, 4) == 64 * 1024 + 16 * 1024
    assert kv.compressor_state_bytes(m, 16) == 2 * 16 * 512 * 4
    assert kv.compressor_state_bytes(m, 0) == 0
    c = synthetic_compressed()
    h, d, r = 1024, 128, 4
    assert compressor_params(c, 4) == {
        "compressor": r * 2 * d + 2 * h * 2 * d + d,
        "indexer": 256 * 4 * 64 + h * 4 + (r * 2 * 64 + 2 * h * 2 * 64 + 64)}
    assert compressor_params(c, 16) == {"compressor": 16 * d + 2 * h * d + d}
    assert attention_params(c) == {"qkv": h * 256 + 256 + 256 * 16 * d + h * d + d,
                                   "o": 16 * d * 128 + 4 * 128 * h, "bias": 16}
    # two hyper-connection sites a layer, (2 + 4) 4 mixes of the 4 h copies, and the head's
    assert hc_params(c) == 6 * 2 * (24 * 4 * h + 24 + 3) + 4 * 4 * h + 4 + 1


def test_request_bytes_in_closed_form():
    m = synthetic_compressed()
    e = 128 * 2                                   # bf16 entries of head_dim 128
    idx = 64 + 4                                  # the indexer key: 64 fp8 bytes and a scale
    L = 1000
    want = 2 * (min(L, 64) * e) + 2 * ((64 + L // 4) * e + (L // 4) * idx) \
        + 2 * ((64 + L // 16) * e) + 2 * (kv.compressor_state_bytes(m, 4)
                                           + kv.compressor_state_bytes(m, 16))
    assert kv.request_bytes(m, L) == want


# ----------------------------------------------------------------------------------------------
# invariants and the exact solver

@settings(max_examples=15, deadline=None)
@given(st.data())
def test_hyper_connections_never_make_a_step_cheaper(data):
    m = synthetic_compressed()
    never_costs_more(data, m, dataclasses.replace(m, hc_mult=1))


def test_a_larger_ratio_reads_less_and_holds_less_at_long_contexts():
    """HCA at 16 against the same layers compressed every 4 tokens and attending to all of them:
    fewer entries read, a step no slower; less memory at 65,536 tokens, but more at 300, where
    the compressor's window state (2 r head_dim fp32 values, growing with the ratio) outweighs
    the entries saved."""
    from lts.cost.model import evaluate
    from lts.specs import load_topology
    from lts.specs.strategy import make_row
    m = synthetic_compressed()
    four = dataclasses.replace(m, attention=dataclasses.replace(
        m.attention, compress_ratios=(0, 4, 4) * 2, index_ratio=0, index_topk=0, index_heads=0,
        index_head_dim=0))
    sixteen = dataclasses.replace(four, attention=dataclasses.replace(
        four.attention, compress_ratios=(0, 16, 16) * 2))
    topo = load_topology("h100_dgx")
    rows = np.stack([make_row(tp=tp, batch=b) for tp in (1, 2, 4) for b in (1, 16, 64)])
    for ctx, less in ((65536, True), (300, False)):
        a, b = (evaluate(x, topo, Workload("decode", context=ctx), rows) for x in (four, sixteen))
        assert np.all(b.step_s <= a.step_s)
        assert np.all(b.memory_bytes < a.memory_bytes) == less


def test_exact_solver_takes_compressed_attention():
    _Exact(synthetic_compressed(), [1] * 12)


@pytest.mark.parametrize("work", EXACT_WORKS)
def test_exact_equals_brute_force_on_compressed_attention(work):
    exact_equals_brute_force(synthetic_compressed(), work, pp=(1, 2))


# ----------------------------------------------------------------------------------------------
# DeepSeek-V4's config.json files
#
# tests/data/hf/deepseek-v4-pro.json, deepseek-v4-flash.json: huggingface.co/deepseek-ai/
# DeepSeek-V4-Pro and -Flash config.json as a public serving tool bundles them (ai-dynamo/
# aiconfigurator at 095f58a5, aic-core/src/aiconfigurator_core/model_configs/); deepseek-v4-pro-
# nvfp4/: nvidia/DeepSeek-V4-Pro-NVFP4 config.json and hf_quant_config.json; deepseek-v4-flash-
# fp8.json: sgl-project/DeepSeek-V4-Flash-FP8 ("deepseek_ref"). Published: "DeepSeek-V4-Pro with
# 1.6T parameters (49B activated) and DeepSeek-V4-Flash with 284B parameters (13B activated)"
# (the model cards, huggingface.co/deepseek-ai/DeepSeek-V4-Pro; arXiv 2606.19348 abstract), the
# MTP layer apart (as DeepSeek-V3's 671B); 1.6T is 1,573B rounded (the tensors listed by
# deepseek-ai/DeepSeek-V4-Flash inference/model.py count 1,573.0B).

DATA = "tests/data/hf"
PUBLISHED = {"deepseek-v4-pro.json": (1.6e12, 49e9), "deepseek-v4-flash.json": (284e9, 13e9),
             "deepseek-v4-pro-nvfp4": (1.6e12, 49e9), "deepseek-v4-flash-fp8.json": (284e9, 13e9)}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_deepseek_v4_against_its_published_counts(name):
    m = load_model(f"{DATA}/{name}")
    total, active = PUBLISHED[name]
    counts = param_counts(m)
    assert abs(counts["params_total"] / total - 1) < 0.03, counts
    # active counts the embedding here (the card's 49B / 13B leave it out: 48.85B, 13.27B)
    assert abs((counts["params_active"] - m.vocab * m.hidden) / active - 1) < 0.03, counts
    assert m.attention.compressed and m.hc_mult == 4 and m.mtp_layers == 1
    assert m.precision.format_of("router") == "bf16"


def test_the_shipped_file_is_its_config():
    """models/deepseek-v4-pro.toml and the config.json import: the same model."""
    def strip(m):
        return dataclasses.replace(m, name="", source="", path="", params_published=0.0,
                                   active_params_published=0.0)
    assert strip(load_model("deepseek-v4-pro")) == strip(load_model(f"{DATA}/deepseek-v4-pro.json"))


def test_deepseek_v4_pro_layers_and_formats():
    m = load_model(f"{DATA}/deepseek-v4-pro.json")
    assert dict(m.kind_groups) == {Compressed(128, 128, 0): 31, Compressed(4, 128, 1024): 30}
    assert param_counts(m)["params_total"] == pytest.approx(1573.0e9, rel=1e-3)
    assert param_counts(m)["params_mtp"] == pytest.approx(25.84e9, rel=1e-3)
    p = m.precision
    assert (p.weights, p.format_of("experts"), p.format_of("attention")) == \
        ("fp8_block", "mxfp4", "fp8_block")
    nv = load_model(f"{DATA}/deepseek-v4-pro-nvfp4")
    assert (nv.precision.format_of("experts"), nv.precision.format_of("attention"),
            nv.precision.format_of("shared_experts"), nv.precision.format_of("lm_head")) == \
        ("nvfp4", "fp8_block", "fp8_block", "bf16")
    flash = load_model(f"{DATA}/deepseek-v4-flash.json")
    assert dict(flash.kind_groups) == {128: 2, Compressed(4, 128, 512): 21,
                                       Compressed(128, 128, 0): 20}
    assert load_model(f"{DATA}/deepseek-v4-flash-fp8.json").precision.format_of("experts") == \
        "fp8_block"
