"""Checkpoint quantization lists (lts/specs/hf.py ``_module_group``, ``_unquantized``,
``_mixed_formats``): whole layers named by index, the MTP layer's modules, Gated DeltaNet mixers,
and ModelOpt's MIXED_PRECISION per-module formats (issue 22).

The folders in tests/data/hf/ are whole copies of the published files (config.json and
hf_quant_config.json, nothing trimmed):

- glm-5.1-nvfp4/: huggingface.co/nvidia/GLM-5.1-NVFP4 (ModelOpt 0.45): layers 0-2 (the dense
  layers) and 78 (the MTP layer) excluded whole (``model.layers.0*``, ``model.layers.1.*``,
  ``model.layers.2.*``, ``model.layers.78*``), every other layer's self_attn and shared experts.
- qwen3.5-397b-a17b-nvfp4/: huggingface.co/nvidia/Qwen3.5-397B-A17B-NVFP4: each Gated DeltaNet
  layer's ``linear_attn*``, each full layer's ``self_attn*``, ``*.mlp.shared_expert.*``,
  ``mtp.layers.0*`` and the vision tower excluded.
- qwen3.6-35b-a3b-nvfp4/: huggingface.co/nvidia/Qwen3.6-35B-A3B-NVFP4 (ModelOpt 0.44):
  quant_algo MIXED_PRECISION, quantized_layers FP8 attention (self_attn and linear_attn
  projections), W4A16_NVFP4 experts, shared experts and LM head; the rest bf16.
"""
import json
from pathlib import Path

import pytest

from lts.specs import load_model, param_counts, weight_bytes, weight_params, with_precision
from lts.specs.errors import SpecError
from lts.specs.hf import _layer_set, _module_group
from lts.specs.units import WEIGHT_FORMATS

from test_hf import DATA, one_error_line, run, write

GIB = 2**30


def test_module_group_patterns():
    assert _module_group("model.layers.0*") == ("layer", "0*")
    assert _module_group("model.layers.1.*") == ("layer", "1")
    assert _module_group("language_model.model.layers.0*") == ("layer", "0*")
    assert _module_group("model.layers.61") == ("layer", "61")
    assert _module_group("model.language_model.layers.0.linear_attn*") == ("attention", "0")
    assert _module_group("*.mlp.shared_expert.*") == ("shared_experts", None)
    assert _module_group("model.layers.3.self_attn.indexer*") == ("attention", "3")
    # the MTP layer's own modules, the indexer's per-head weights, a bias: skipped
    for name in ("model.layers.78.eh_proj", "model.layers.78.enorm", "model.layers.78.hnorm",
                 "model.layers.78.shared_head.norm", "model.layers.5.self_attn.indexers_proj",
                 "model.layers.5.self_attn.indexer.k_norm.bias", "mtp.layers.0*", "mtp*"):
        assert _module_group(name)[0] is None, name


def test_layer_index_globs_read_as_fnmatch():
    assert _layer_set("0*", 78) == {0}
    assert _layer_set("1*", 78) == {1} | set(range(10, 20))
    assert _layer_set("1", 78) == {1}
    assert _layer_set("78*", 78) == set()          # the MTP layer: not costed
    assert _layer_set("61", 61) == set()
    assert _layer_set("*", 78) is None and _layer_set(None, 78) is None


def test_glm_5_1_whole_dense_layers_and_the_mtp_layer():
    """Layers 0-2 whole are exactly GLM-5.1's dense layers (first_k_dense_replace 3): dense_ffn is
    all bf16; self_attn in layers 3-77 plus the three whole layers: attention all bf16; layer 78
    (the MTP layer) is not costed. Only the routed experts are NVFP4."""
    m = load_model(DATA / "glm-5.1-nvfp4")
    p = m.precision
    assert (p.weights, p.kv_cache, p.activations) == ("nvfp4", "fp8", "bf16")
    assert p.unquantized == ("embedding", "attention", "router", "shared_experts", "dense_ffn",
                             "lm_head", "norm")
    groups = weight_params(m)
    rest = sum(groups.values()) - groups["experts"]
    assert weight_bytes(m)["total"] == pytest.approx(groups["experts"] * 0.5625 + rest * 2)
    assert weight_bytes(m)["total"] / GIB == pytest.approx(415.33, abs=0.01)
    # NVIDIA's GLM-5.1 model card (docs.api.nvidia.com/nim/reference/z-ai-glm5.1): "Number of
    # model parameters: 754B", the MTP layer included (GLM-5's card: 744B without it)
    c = param_counts(m)
    assert (c["params_total"] + c["params_mtp"]) / 754e9 == pytest.approx(1, abs=0.02)


def _deepseek(tmp_path, exclude, name="config.json"):
    """DeepSeek-V3's config (61 layers, 3 dense) with a ModelOpt NVFP4 hf_quant_config.json."""
    p = write(tmp_path, "deepseek-v3", name=name, drop=("quantization_config",))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {
        "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
        "exclude_modules": exclude}}))
    return p


ATTN = [f"model.layers.{i}.self_attn*" for i in range(61)]


def test_whole_layer_at_num_hidden_layers_is_the_mtp_layer(tmp_path):
    """nvidia/DeepSeek-V3.1-NVFP4 and V3.2-NVFP4: ``model.layers.61*`` with 61 layers names the
    MTP layer only (counted apart, not costed): nothing changes."""
    base = load_model(_deepseek(tmp_path, ["lm_head"] + ATTN)).precision
    assert load_model(_deepseek(tmp_path, ["lm_head", "model.layers.61*"] + ATTN)).precision \
        == base
    assert base.unquantized == ("embedding", "attention", "router", "lm_head", "norm")


def test_whole_leading_dense_layers(tmp_path):
    """Kimi-K2.6-NVFP4's ``language_model.model.layers.0*`` with first_k_dense_replace 1; here
    DeepSeek-V3's three dense layers, whole, with every layer's attention named."""
    exclude = ["model.layers.0*", "model.layers.1.*", "model.layers.2.*"] + ATTN[3:]
    p = load_model(_deepseek(tmp_path, exclude)).precision
    assert p.unquantized == ("embedding", "attention", "router", "dense_ffn", "norm")


def test_a_whole_moe_layer_leaves_its_groups_partial(tmp_path):
    """``model.layers.6*`` is layers 6 and 60 (fnmatch): their experts, gate and shared experts in
    2 of the 58 MoE layers: refused, as the routed experts run one format (another group
    excluded in some of its layers only is quantized in the others: tests/test_nemotron_h.py)."""
    p = _deepseek(tmp_path, ["model.layers.6*"] + ATTN)
    line = one_error_line(run("models", "--show", p), tmp_path / "hf_quant_config.json",
                          "quantization.exclude_modules")
    assert line.endswith("quantization.exclude_modules: leaves experts unquantized in 2 of their "
                         "58 layers; lts costs the routed experts in one format (expected all of "
                         "them or none)")


def test_mtp_modules_and_indexer_scales_in_modules_to_not_convert(tmp_path):
    """zai-org/GLM-5-FP8's modules_to_not_convert: norms, the gate and its bias, the indexer's
    k_norm (and bias) and per-head weights (indexers_proj) in every layer, and the MTP layer's
    eh_proj / enorm / hnorm / shared_head: attention stays fp8_block."""
    skip = ["lm_head", "model.embed_tokens", "model.norm"]
    for i in range(62):
        skip += [f"model.layers.{i}.{s}" for s in (
            "input_layernorm", "post_attention_layernorm", "self_attn.indexer.k_norm",
            "self_attn.indexer.k_norm.bias", "self_attn.indexers_proj",
            "self_attn.kv_a_layernorm", "self_attn.q_a_layernorm")]
        if i >= 3:
            skip += [f"model.layers.{i}.mlp.gate", f"model.layers.{i}.mlp.gate.e_score_correction_bias"]
    skip += [f"model.layers.61.{s}" for s in ("eh_proj", "enorm", "hnorm", "shared_head.norm")]
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": skip}
    p = load_model(write(tmp_path, "deepseek-v3", quantization_config=q)).precision
    assert p.weights == "fp8_block"
    assert p.unquantized == ("embedding", "router", "lm_head", "norm")


def test_qwen3_5_linear_attn_is_the_attention_group():
    """Gated DeltaNet layers' ``linear_attn*`` (45 layers) and the full layers' ``self_attn*``
    (15) make attention bf16 in all 60 layers; ``*.mlp.shared_expert.*`` the shared experts;
    ``mtp.layers.0*`` and the vision tower are not costed."""
    m = load_model(DATA / "qwen3.5-397b-a17b-nvfp4")
    p = m.precision
    assert (p.weights, p.kv_cache) == ("nvfp4", "fp8")
    # the router (not listed) is bf16 as vLLM loads it (qwen3_next.py: quant_config=None)
    assert p.unquantized == ("embedding", "attention", "router", "shared_experts", "lm_head",
                             "norm")
    assert weight_bytes(m)["total"] / GIB == pytest.approx(220.75, abs=0.01)


def test_qwen3_5_one_linear_layer_left_out_is_quantized_in_that_share(tmp_path):
    """The exclude list without layer 0's linear attention: the attention group (its 45 linear
    and 15 full layers) NVFP4 in that one layer, bf16 in the other 59 (issue 36: a format per
    layer)."""
    src = DATA / "qwen3.5-397b-a17b-nvfp4"
    (tmp_path / "config.json").write_text((src / "config.json").read_text())
    h = json.loads((src / "hf_quant_config.json").read_text())
    h["quantization"]["exclude_modules"].remove("model.language_model.layers.0.linear_attn*")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(h))
    p = load_model(tmp_path).precision
    assert (p.format_of("attention"), p.share_of("attention")) == ("nvfp4", 1 / 60)


# ----------------------------------------------------------------------------------------------
# ModelOpt MIXED_PRECISION

def test_w4a16_nvfp4_format():
    """NVFP4's bytes (an fp8 scale per 16 e2m1 values), bf16 math (weight-only)."""
    assert WEIGHT_FORMATS["w4a16_nvfp4"] == (0.5 + 1 / 16, ("bf16",))
    assert WEIGHT_FORMATS["w4a16_nvfp4"][0] == WEIGHT_FORMATS["nvfp4"][0]


def test_qwen3_6_mixed_precision_maps_each_module_to_its_group():
    m = load_model(DATA / "qwen3.6-35b-a3b-nvfp4")
    p = m.precision
    assert (p.weights, p.kv_cache, p.activations) == ("w4a16_nvfp4", "fp8", "bf16")
    assert p.unquantized == ("embedding", "router", "dense_ffn", "norm")
    assert p.formats == (("attention", "fp8"),)
    assert {g: p.format_of(g) for g in ("attention", "experts", "shared_experts", "lm_head",
                                        "router", "embedding")} == {
        "attention": "fp8", "experts": "w4a16_nvfp4", "shared_experts": "w4a16_nvfp4",
        "lm_head": "w4a16_nvfp4", "router": "bf16", "embedding": "bf16"}
    g = weight_params(m)
    four = g["experts"] + g["shared_experts"] + g["lm_head"]
    assert weight_bytes(m)["total"] == pytest.approx(
        g["attention"] * 1 + four * 0.5625 + (sum(g.values()) - g["attention"] - four) * 2)
    assert weight_bytes(m)["total"] / GIB == pytest.approx(19.39, abs=0.01)
    # "35B total parameters with about 3B activated" (vLLM Ascend's Qwen3.6-35B-A3B tutorial,
    # docs.vllm.ai/projects/ascend/en/v0.18.0/tutorials/models/Qwen3.6-35B-A3B.html)
    assert param_counts(m)["params_total"] / 35e9 == pytest.approx(1, abs=0.02)
    # --precision puts every quantized group in the one format asked for
    q = with_precision(m, "nvfp4").precision
    assert (q.weights, q.formats, q.format_of("attention")) == ("nvfp4", (), "nvfp4")
    assert with_precision(m, "w4a16_nvfp4").precision == p


def _mixed(tmp_path, layers, base="mixtral-8x7b"):
    p = write(tmp_path, base)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {
        "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8", "quantized_layers": layers,
        "exclude_modules": ["lm_head"]}}))
    return p


def _every(fmt, *names, n=32, **extra):
    return {f"model.layers.{i}.{s}": {"quant_algo": fmt, **extra} for i in range(n) for s in names}


def test_mixed_precision_dense_and_moe_groups(tmp_path):
    layers = {**_every("FP8", "self_attn.q_proj", "self_attn.o_proj"),
              **_every("NVFP4", "block_sparse_moe.experts", group_size=16)}
    p = load_model(_mixed(tmp_path, layers)).precision
    assert (p.weights, p.formats) == ("nvfp4", (("attention", "fp8"),))
    assert p.unquantized == ("embedding", "router", "shared_experts", "dense_ffn", "lm_head",
                             "norm")


BAD_MIXED = [
    ({**_every("FP8", "self_attn.q_proj"), **_every("NVFP4", "self_attn.o_proj")},
     "quantization.quantized_layers",
     "quantizes attention to both fp8 and nvfp4; lts costs one format per op group"),
    (_every("W4A16_NVFP4", "block_sparse_moe.experts", n=31),
     "quantization.quantized_layers",
     "quantizes experts (w4a16_nvfp4) in 31 of its 32 layers, the others unquantized; lts costs "
     "one format per op group (expected all of them or none)"),
    ({"model.layers.0.self_attn.q_proj": {"quant_algo": "W4A8_AWQ"}},
     "quantization.quantized_layers.model.layers.0.self_attn.q_proj.quant_algo",
     "'W4A8_AWQ' is not supported (supported: FP8, NVFP4, W4A16_NVFP4, MXFP8)"),
    ({"model.layers.0.self_attn.q_proj": {"quant_algo": "NVFP4", "group_size": 32}},
     "quantization.quantized_layers.model.layers.0.self_attn.q_proj.group_size",
     "32 is not supported (NVFP4 scales groups of 16)"),
    ({"model.layers.0.self_attn.q_proj": "FP8"},
     "quantization.quantized_layers.model.layers.0.self_attn.q_proj",
     "'FP8' is not an object"),
]


@pytest.mark.parametrize("layers, key, message", BAD_MIXED, ids=[b[2][:30] for b in BAD_MIXED])
def test_mixed_precision_refusals_one_exact_line(tmp_path, layers, key, message):
    _mixed(tmp_path, layers)
    hq = tmp_path / "hf_quant_config.json"
    assert one_error_line(run("models", "--show", tmp_path), hq, key) == \
        f"Error: {hq}: {key}: {message}"


def test_mixed_precision_group_both_quantized_and_excluded(tmp_path):
    _mixed(tmp_path, {**_every("FP8", "self_attn.q_proj"), "lm_head": {"quant_algo": "FP8"}})
    with pytest.raises(SpecError) as e:
        load_model(tmp_path)
    assert str(e.value).endswith("quantization.exclude_modules: excludes lm_head, which "
                                 "quantization.quantized_layers quantizes (fp8)")


# ----------------------------------------------------------------------------------------------
# precision.formats in a model TOML file

def _toml(tmp_path, precision: str) -> Path:
    src = (Path(__file__).parents[1] / "models" / "mixtral-8x7b.toml").read_text()
    p = tmp_path / "m.toml"
    p.write_text(src.replace("[precision]", "[precision]\n" + precision, 1)
                 if "[precision]" in src else src + "\n[precision]\n" + precision)
    return p


def test_toml_precision_formats(tmp_path):
    p = load_model(_toml(tmp_path, 'formats = {attention = "fp8", lm_head = "fp4"}\n')).precision
    assert p.formats == (("attention", "fp8"), ("lm_head", "nvfp4"))
    assert p.format_of("attention") == "fp8" and p.format_of("lm_head") == "nvfp4"


@pytest.mark.parametrize("line, key, message", [
    ('formats = {attn = "fp8"}\n', "precision.formats.attn", "is not one of 'embedding'"),
    ('formats = {attention = "fp9"}\n', "precision.formats.attention",
     "'fp9' is not a weight format lts knows (expected one of fp32, bf16, "),
    ('formats = "fp8"\n', "precision.formats", "'fp8' is not a table"),
])
def test_toml_precision_formats_errors(tmp_path, line, key, message):
    with pytest.raises(SpecError) as e:
        load_model(_toml(tmp_path, line))
    assert f": {key}: {message}" in str(e.value)


def test_attention_kept_without_o_proj_says_so_in_the_source_line(tmp_path):
    """nvidia/DeepSeek-V3.1-NVFP4 names q_a, q_b, kv_a and kv_b in every layer, not o_proj: lts
    costs the attention group in bf16 (one format per group), o_proj included, and says so."""
    proj = [f"model.layers.{i}.self_attn.{s}" for i in range(61)
            for s in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")]
    m = load_model(_deepseek(tmp_path, ["lm_head", "model.layers.61*"] + proj))
    assert "attention" in m.precision.unquantized
    assert m.source.endswith("; attention costed in bf16 as its exclude list names its other "
                             "projections: o_proj is nvfp4 in the checkpoint (an upper bound); 1 "
                             "multi-token-prediction layer (num_nextn_predict_layers) counted "
                             "apart (params_mtp), not run")
    assert "attention costed" not in load_model(_deepseek(tmp_path, ATTN)).source
    assert "attention costed" not in load_model(
        _deepseek(tmp_path, proj + [f"model.layers.{i}.self_attn.o_proj" for i in range(61)])).source


# ----------------------------------------------------------------------------------------------
# a group quantized in some of its layers only ([precision] quantized_share)

@pytest.mark.parametrize("share, key, message", [
    ({"ssm": 1.5}, "precision.quantized_share.ssm",
     "1.5 is not a share between 0 and 1 (exclusive)"),
    ({"experts": 0.5}, "precision.quantized_share.experts",
     "is not supported for the routed experts (their grouped GEMM runs one format)"),
    ({"attention": 0.5}, "precision.quantized_share.attention",
     "is set for a group precision.unquantized keeps whole"),
    ({"mixer": 0.5}, "precision.quantized_share.mixer",
     "is not one of 'embedding', 'attention', 'ssm', 'router', 'experts', 'shared_experts', "
     "'dense_ffn', 'lm_head', 'norm'"),
])
def test_bad_quantized_share_is_refused(share, key, message):
    from generators import synthetic_mamba
    with pytest.raises(SpecError) as e:
        synthetic_mamba(weights="fp8", unquantized=["attention"], quantized_share=share)
    assert str(e.value) == f"synthetic:mamba-small: {key}: {message}"


def test_a_partly_quantized_group_costs_between_its_two_formats():
    """The Mamba mixers in fp8 in half their layers: the weights a GPU holds and the decode
    step lie strictly between all-bf16 and all-fp8 mixers (the mean layer's share of each)."""
    import numpy as np
    from generators import synthetic_mamba
    from lts.cost.model import evaluate
    from lts.specs import load_topology
    from lts.specs.strategy import make_row
    from lts.specs.workload import Workload
    half, fp8, bf16 = (synthetic_mamba(weights="fp8", unquantized=u, **q) for u, q in (
        (["attention"], {"quantized_share": {"ssm": 0.5}}), (["attention"], {}),
        (["attention", "ssm"], {})))
    rows = np.stack([make_row(tp=tp, batch=b) for tp in (1, 2) for b in (1, 64)])
    topo, work = load_topology("h100_dgx"), Workload("decode", context=2048)
    r = {k: evaluate(m, topo, work, rows) for k, m in (("half", half), ("fp8", fp8),
                                                       ("bf16", bf16))}
    for f in ("memory_bytes", "step_s"):
        assert np.all(getattr(r["fp8"], f) < getattr(r["half"], f))
        assert np.all(getattr(r["half"], f) < getattr(r["bf16"], f))
    assert np.allclose(r["half"].memory_bytes, (r["fp8"].memory_bytes + r["bf16"].memory_bytes)
                       / 2, rtol=1e-12)
