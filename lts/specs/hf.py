"""HuggingFace ``config.json`` -> ``ModelSpec``: read a local model config, no network.

Families, chosen by ``model_type``:

=================  ============================================================================
llama, mistral     dense: GQA attention, SwiGLU MLP of ``intermediate_size``
qwen2, qwen3       dense, as above (Qwen3: explicit ``head_dim``)
mimo               MiMo-7B: Qwen2's shape plus ``num_nextn_predict_layers`` MTP layers (each a
                   Qwen2 decoder layer, norms and an input projection, sharing the model's
                   embedding and LM head), counted apart
mixtral            MoE in every layer: ``num_local_experts`` experts of ``intermediate_size``
qwen2_moe          MoE: ``num_experts`` of ``moe_intermediate_size`` + ONE shared expert of
                   ``shared_expert_intermediate_size``; dense layers from ``mlp_only_layers`` /
                   ``decoder_sparse_step`` (only a leading block of dense layers is representable)
qwen3_moe          MoE as qwen2_moe, without a shared expert
gpt_oss            MoE in every layer as mixtral (``num_local_experts`` of ``intermediate_size``),
                   a sliding window on every other layer (``layer_types``), attention biases
                   and sinks; MXFP4 experts (expert and router biases, 0.03% of the
                   parameters, are not counted)
minimax_m2         as mixtral (``num_local_experts`` of ``intermediate_size``), full GQA attention
                   on every layer (``attn_type_list`` all 1), no shared expert; its q/k norms and
                   multi-token-prediction modules are not counted
minimax_m3,        MiniMax-M3 (``minimax_m3_vl``: the text model from ``text_config``, which
minimax_m3_vl      names no model_type; its vision tower's parameters said in the source line,
                   not costed): GQA on every layer, block-sparse attention on the layers of
                   ``sparse_attention_config.sparse_attention_freq`` (``_minimax_m3``); dense
                   FFNs of ``dense_intermediate_size`` on the leading layers of
                   ``moe_layer_freq``, then ``num_local_experts`` of ``intermediate_size`` and
                   ``n_shared_experts`` of ``shared_intermediate_size``; its q/k norms and MTP
                   modules are not counted
kimi_k2            DeepSeek-V3's shape under its own model_type
kimi_k25           multimodal: the text model from ``text_config`` (kimi_k2 / deepseek_v3); the
                   vision tower's parameters (``vision_params``) said in the source line, not costed
deepseek_v2/v3     MLA attention; MoE of ``n_routed_experts`` of ``moe_intermediate_size`` plus
                   ``n_shared_experts`` shared experts (width ``n_shared_experts *
                   moe_intermediate_size``) from layer ``first_k_dense_replace`` on, the first
                   layers dense of ``intermediate_size``
deepseek_v32       DeepSeek-V3's shape with DeepSeek Sparse Attention on every layer: an indexer
                   of ``index_n_heads`` heads of ``index_head_dim`` picks ``index_topk`` keys
glm_moe_dsa        GLM-5: the same keys and shape (MLA, DeepSeek's MoE, sparse attention on every
                   layer); GLM-5.2's ``indexer_types``: the indexer only on the "full" layers,
                   the "shared" ones attending over the top-k of the full layer before them
qwen3_next         hybrid: Gated DeltaNet layers (``linear_num_key_heads``,
                   ``linear_num_value_heads``, ``linear_key_head_dim``, ``linear_value_head_dim``,
                   ``linear_conv_kernel_dim``) and every ``full_attention_interval``-th layer full
                   GQA attention with an output gate (``layer_types`` where given); MoE as
                   qwen2_moe with one shared expert; ``mtp_num_hidden_layers`` counted apart
qwen3_vl,          multimodal (Qwen3-VL): the text model from ``text_config`` (qwen3_vl_text:
qwen3_vl_moe       Qwen3's shape; qwen3_vl_moe_text: Qwen3-MoE's), the vision tower's parameters
                   (``qwen3_vl_vision_params``) said in the source line, not costed
qwen3_5_moe,       multimodal (Qwen3.5 / 3.6): the text model from ``text_config``
qwen3_5            (qwen3_5_moe_text: qwen3_next's shape; qwen3_5_text: the same layers with a
                   dense FFN of ``intermediate_size``); the vision tower is not counted
llama4,            Llama 4 (``llama4``: the text model from ``text_config``, its vision tower's
llama4_text        parameters said in the source line, not costed): chunked local attention of
                   ``attention_chunk_size`` on the RoPE layers of ``no_rope_layers``, full
                   attention on the others; MoE (``num_local_experts`` of ``intermediate_size``,
                   top ``num_experts_per_tok``, one shared expert of ``intermediate_size``) on
                   every ``interleave_moe_layer_step``-th layer, dense FFNs of
                   ``intermediate_size_mlp`` between (``_llama4_layers``, ``_llama4_ffn``)
nemotron_h         Nemotron-H / Nemotron 3: single-op blocks (``hybrid_override_pattern`` or
                   ``layers_block_type``), each FFN block paired with the mixer block before
                   it, a mixer before a mixer an lts layer without an FFN (``_nemotron_h``);
                   Mamba-2 and GQA mixers, relu2 (non-gated) MLP or MoE with a shared expert;
                   latent MoE (``moe_latent_size``: experts at the latent width, FFNSpec.latent)
=================  ============================================================================

Every family's FFN is gated (SwiGLU: gate, up and down projections), except nemotron_h's.

Rules (docs/design.md §1, "nothing is guessed"):

- A key that sets a shape is required; a missing one is an error. The only defaults are those the
  family's HuggingFace code itself applies, each marked ``HF default`` below:
  ``num_key_value_heads`` (= ``num_attention_heads``), ``head_dim``
  (= ``hidden_size // num_attention_heads``), ``tie_word_embeddings`` (false),
  ``decoder_sparse_step`` (1), ``mlp_only_layers`` ([]), ``moe_layer_freq`` (1), ``q_lora_rank``
  / ``n_shared_experts`` null (no low-rank query / no shared expert).
- Keys that do not change the cost (rope, norms' eps, token ids, ...) are ignored.
- Sliding windows (``_sliding``): ``layer_types`` where the config lists it; else Mistral's
  ``sliding_window`` on every layer (HF default 4096 when absent; null: none) and Mixtral's
  (HF default none); Qwen's only with ``use_sliding_window`` true (HF default false), on the
  layers from ``max_window_layers`` on (HF default 28).
- Biases (Qwen2's q/k/v bias), Qwen3's per-head q/k norms and Qwen2-MoE's 1-wide
  ``shared_expert_gate`` are not modelled, as in the shipped TOML files. DeepSeek's
  multi-token-prediction layers (``num_nextn_predict_layers``, absent: none; DeepSeek families)
  are counted apart (``params_mtp``, said in the source line), not in the totals, and not run.
- Precision: ``torch_dtype`` (or ``dtype``, its name since transformers 4.56) sets weights, KV
  cache and activations (bfloat16 -> bf16, float16 -> fp16, float32 -> fp32). A quantized
  checkpoint (``_quantization``) sets the weight format (``units.WEIGHT_FORMATS``), the KV type
  (``kv_cache_quant_algo`` / ``kv_cache_scheme``; else the activation type) and the op groups
  left unquantized (``modules_to_not_convert``, ``ignore``, ``exclude_modules``; embeddings and
  norms always): ModelOpt's ``hf_quant_config.json`` beside config.json, else
  ``quantization_config`` with ``quant_method`` (any case; a one-element list) ``fp8`` (with
  ``weight_block_size`` [128, 128]: fp8_block), ``fbgemm_fp8``, ``mxfp4``, ``awq``, ``gptq``
  (4 bits, groups of 128: w4a16), ``compressed-tensors`` (its config groups' weights scheme) or
  ``modelopt`` (``quant_algo`` NVFP4 or FP8, or MIXED_PRECISION: each module's format from
  ``quantized_layers``, ``_mixed_formats``). Anything else is one error line listing these.
  Exclude-list names (``_module_group``): module paths, globs, ``re:`` regexes and whole layers
  (``model.layers.0*``); the MTP layer's names are skipped.
- ``name``: the config's ``_name_or_path`` if set, else the folder name for a file called
  ``config.json``, else the file name without ``.json``. ``params_published`` is unknown (0).

Every bad input raises one ``SpecError`` naming the file, the config.json key, the value and what
was expected. The ModelSpec is built by ``specs.model.model_from_dict`` (the model TOML reader) so
that all of its checks apply (kv heads divide heads, top_k <= experts, ...); its errors are
re-labelled with config.json keys. ``specs.load_model`` dispatches a config.json here.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

from .errors import SpecError, cut_quoted, suggestion
from .model import (MAX_WINDOW, WEIGHT_GROUPS, ModelSpec, check_json_containers,
                    model_from_dict, parse_json, read_text)
from .units import FP8_BLOCK, MXFP4_GROUP, NVFP4_GROUP, W4A16_GROUP, W4A16_GROUP_32

FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe",
            "deepseek_v2", "deepseek_v3", "gpt_oss", "deepseek_v32", "glm_moe_dsa",
            "qwen3_next", "qwen3_5_moe_text", "qwen3_5_text", "llama4_text", "mimo",
            "gemma4_text", "mimo_v2_flash", "step3p7")
# mimo: huggingface.co/XiaomiMiMo/MiMo-7B-Base config.json and modeling_mimo.py (MiMoModel is
# Qwen2Model with mtp_layers; MiMoConfig is Qwen2Config with num_nextn_predict_layers)
DENSE = ("llama", "mistral", "qwen2", "qwen3", "mimo")
QWEN_MOE = ("qwen2_moe", "qwen3_moe")
DEEPSEEK = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa")
# DeepSeek Sparse Attention (config keys index_topk, index_n_heads, index_head_dim):
# huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp config.json, huggingface.co/zai-org/GLM-5
SPARSE = ("deepseek_v32", "glm_moe_dsa")
# families read as another one's shape (_family_view): Kimi-K2 is DeepSeek-V3's architecture under
# its own model_type (huggingface.co/moonshotai/Kimi-K2-Instruct config.json: "model_type":
# "kimi_k2", DeepseekV3ForCausalLM keys); MiniMax-M2's keys are Mixtral's (num_local_experts of
# intermediate_size) with full GQA attention and per-layer q/k norms (not modelled, as Qwen3's)
ALIASES = {"kimi_k2": "deepseek_v3", "minimax_m2": "mixtral",
           # Qwen3-VL's text models: transformers 4.57 modeling_qwen3_vl.py Qwen3VLTextDecoderLayer
           # is Qwen3's (GQA with q/k norms, SwiGLU of intermediate_size); modeling_qwen3_vl_moe.py
           # Qwen3VLMoeTextSparseMoeBlock is Qwen3-MoE's (num_experts of moe_intermediate_size,
           # no shared expert, decoder_sparse_step / mlp_only_layers); their rope (mrope) and
           # deepstack additions of visual features do not change the text model's cost
           "qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe"}
# multimodal configs whose text model is text_config (its model_type one of these)
MULTIMODAL = {"kimi_k25": ("kimi_k2", "deepseek_v3"), "qwen3_5_moe": ("qwen3_5_moe_text",),
              "qwen3_5": ("qwen3_5_text",), "llama4": ("llama4_text",),
              # huggingface.co/Qwen/Qwen3-VL-8B-Instruct, Qwen3-VL-30B-A3B-Instruct config.json
              "qwen3_vl": ("qwen3_vl_text",), "qwen3_vl_moe": ("qwen3_vl_moe_text",),
              # huggingface.co/google/gemma-4-26B-A4B, nvidia/Gemma-4-31B-IT-NVFP4 config.json
              "gemma4": ("gemma4_text",),
              # huggingface.co/moonshotai/Kimi-K3 config.json (its text model "kimi_linear")
              "kimi_k3": ("kimi_linear",),
              # nvidia/MiniMax-M3-NVFP4 config.json (MiniMaxM3SparseForConditionalGeneration):
              # its text_config names no model_type (architectures MiniMaxM3SparseForCausalLM)
              "minimax_m3_vl": ("minimax_m3",)}
# the text model of a multimodal config whose text_config names no model_type
UNNAMED_TEXT = {"minimax_m3_vl": "minimax_m3"}
# layer kinds with their own attention shapes ([attention.sliding] / [attention.full]):
# Gemma 4 (transformers modeling_gemma4.py, huggingface/transformers commit 0246b4f3,
# Gemma4TextAttention: full-attention layers of global_head_dim with num_global_key_value_heads
# and V made by k_proj when attention_k_eq_v; sliding ones of head_dim, num_key_value_heads) and
# MiMo-V2-Flash (vLLM mimo_v2_flash.py, vllm-project/vllm commit 01ed47b4, MiMoV2FlashDecoderLayer:
# hybrid_layer_pattern 1 the sliding layers, of swa_num_attention_heads, swa_num_key_value_heads,
# swa_head_dim, swa_v_head_dim and a sink logit per head; the others of num_attention_heads,
# num_key_value_heads, head_dim, v_head_dim)
KIND_SHAPED = ("gemma4_text", "mimo_v2_flash", "step3p7")
# hybrid linear / full attention (Gated DeltaNet): huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct
# config.json, huggingface.co/Qwen/Qwen3.5-397B-A17B config.json (text_config)
HYBRID = ("qwen3_next", "qwen3_5_moe_text", "qwen3_5_text")
LINEAR_KEYS = {"key_heads": "linear_num_key_heads", "value_heads": "linear_num_value_heads",
               "key_head_dim": "linear_key_head_dim", "value_head_dim": "linear_value_head_dim",
               "conv_kernel": "linear_conv_kernel_dim"}

TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}

_TYPE_NAMES = {int: "an integer", str: "a string", bool: "true or false", list: "a list",
               dict: "an object"}


def _name_of(typ) -> str:
    return _TYPE_NAMES[typ]


def _show(value) -> str:
    """A config value as the user wrote it: JSON spelling for true/false/null, else repr (a
    long one cut, ``cut_quoted``)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return cut_quoted(value)


# an integer key's largest value read: the window (MAX_WINDOW, 2^30) and every count and width
# are far below; past it a config's layer count made a list of that many entries (OverflowError)
MAX_INT = 2**40


class _Config:
    """Typed, range-checked reads of config.json keys; errors name the file and the key."""

    def __init__(self, data: dict, path: Path, prefix: str = ""):
        self.data, self.path, self.prefix = data, path, prefix   # prefix: "text_config."
        self.note = ""            # what the source line says beyond the file (a vision tower)

    def error(self, key: str, message: str) -> SpecError:
        return SpecError(self.path, self.prefix + key, message)

    def get(self, key: str, typ, *, default=None, positive=False, minimum=None, nullable=False):
        """The value of ``key``; ``default`` (when not None) is the family's HF default."""
        if key not in self.data or (nullable and self.data[key] is None):
            if default is not None:
                return default
            if nullable and key in self.data:
                return None
            raise self.error(key, f"missing (expected {_name_of(typ)})")
        value = self.data[key]
        ok = isinstance(value, typ) and not (typ is int and isinstance(value, bool))
        if not ok:
            raise self.error(key, f"{_show(value)} is not {_name_of(typ)}")
        if typ is int and abs(value) > MAX_INT:     # (before a list of that many is made)
            raise self.error(key, f"{cut_quoted(value)} is above the maximum {MAX_INT:,} (the "
                                  "model file's limits then apply: docs/limits.md)")
        if positive and value <= 0:
            raise self.error(key, f"{cut_quoted(value)} must be > 0")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{cut_quoted(value)} must be >= {minimum}")
        return value


def _read_json(path: Path) -> dict:
    text = read_text(path, "a config.json file")
    check_json_containers(path, "", text)
    try:
        data = parse_json(path, "", text, "a config.json needs a few")
    except json.JSONDecodeError as e:
        raise SpecError(path, "", f"invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") \
            from None
    if not isinstance(data, dict):
        raise SpecError(path, "", f"invalid config.json: the top level is {type(data).__name__}, "
                                  "expected a JSON object")
    return data


def _display_name(c: _Config, path: Path) -> str:
    name = c.data.get("_name_or_path")
    if isinstance(name, str) and name.strip() not in ("", ".", "./"):
        return name.strip()
    if path.name == "config.json" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def _precision(c: _Config, layers: int, ffn: dict) -> tuple[dict, dict]:
    """The [precision] table and the lts-key -> config-key map for its errors: the activation
    type from ``torch_dtype`` (or ``dtype``), the weight format, the groups left unquantized and
    the KV-cache type from the checkpoint's quantization (``_quantization``)."""
    key = "torch_dtype" if "torch_dtype" in c.data or "dtype" not in c.data else "dtype"
    if key not in c.data:
        raise c.error(key, f"missing (expected one of {', '.join(map(repr, TORCH_DTYPES))})")
    dtype = c.get(key, str)
    if dtype not in TORCH_DTYPES:
        raise c.error(key, f"{cut_quoted(dtype)} is not one of "
                           f"{', '.join(map(repr, TORCH_DTYPES))}")
    act = TORCH_DTYPES[dtype]
    table = {"weights": act, "kv_cache": act, "activations": act}
    q = _quantization(c)
    if q is not None:
        qc, fmt, kv, exclude, exclude_key, linear_only = q
        table["kv_cache"] = kv or act
        if c.data.get("model_type") == "gemma4_text" and ffn["kind"] == "moe":
            # Gemma 4's MLP runs beside the routed experts in every layer: lts's shared expert
            # (_gemma4_ffn), so an excluded model.language_model.layers.N.mlp is that group
            exclude = [re.sub(r"\.mlp\b", ".shared_expert", n) if isinstance(n, str) else n
                       for n in exclude]
        kept, partly = _unquantized(qc, exclude, exclude_key, layers, ffn, linear_only)
        if partly:
            table["quantized_share"] = partly
        if isinstance(fmt, tuple):     # ModelOpt MIXED_PRECISION: (its key, quantized_layers)
            groups = _mixed_formats(qc, *fmt, layers, ffn)
            both = [g for g in groups if g in kept and g not in ("embedding", "norm")]
            if both:
                raise qc.error(exclude_key, f"excludes {both[0]}, which {fmt[0]} quantizes "
                                            f"({groups[both[0]]})")
            fmt = _main_format(groups, act)
            # (ssm, the Mamba-2 mixers, a group of Nemotron-H's blocks only)
            kept = [g for g in WEIGHT_GROUPS if g in kept or g not in groups
                    and (g != "ssm" or "blocks" in ffn)]
            table["formats"] = {g: f for g, f in groups.items() if f != fmt and g not in kept}
        table["weights"] = fmt
        if "attention" in kept and "attention" not in table.get("formats", {}):
            c.note += _attention_note(exclude, act, fmt)
        # nor Nemotron-H's: vLLM nemotron_h.py NemotronHMoE.gate is a GateLinear without a
        # quant_config (fp32 compute; at commit 00b08dc44519a82cbdd9061d92d1226985094622)
        if c.data.get("model_type") in DEEPSEEK + ("kimi_k2", "nemotron_h") + HYBRID \
                and "router" not in kept:
            # DeepSeek's router is never quantized: vLLM 0.11 deepseek_v2.py DeepseekV2MoE.gate
            # is ReplicatedLinear(..., quant_config=None) (the checkpoints keep it in bf16); nor
            # Qwen3-Next / Qwen3.5's (vLLM qwen3_next.py Qwen3NextSparseMoeBlock.gate, the same;
            # nvidia/Qwen3.5-397B-A17B-NVFP4's exclude list names its shared_expert_gate only)
            kept = [g for g in WEIGHT_GROUPS if g in kept or g == "router"]
        table["unquantized"] = kept
    return (table, {"precision.weights": key, "precision.kv_cache": key,
                    "precision.activations": key, "precision.formats": key})


def _attention_note(names: list, act: str, fmt: str) -> str:
    """The source line's note when an exclude list keeps attention unquantized by naming its
    projections but not o_proj (nvidia/DeepSeek-V3.1-NVFP4: q_a, q_b, kv_a, kv_b in every layer):
    lts costs the whole group, o_proj included, in the activation type (an upper bound)."""
    leaves = set()
    for n in names:
        group = _module_group(n)[0] if isinstance(n, str) else None
        if group == "attention":
            leaf = n.lower().strip("*").rstrip(".*").split(".")[-1]
            if leaf in _MIXER:
                return ""                  # the whole mixer is named
            leaves.add(leaf)
    if not leaves & set(_ATTN_PROJ) or "o_proj" in leaves:
        return ""
    return (f"; attention costed in {act} as its exclude list names its other projections: "
            f"o_proj is {fmt} in the checkpoint (an upper bound)")


# ModelOpt MIXED_PRECISION: quantized_layers' per-module quant_algo -> a WEIGHT_FORMATS name
# (vllm/model_executor/layers/quantization/modelopt.py ModelOptMixedPrecisionConfig: FP8,
# NVFP4, W4A16_NVFP4 and MXFP8 sub-configs; MXFP8: nvidia/MiniMax-M3-NVFP4's attention, dense
# and shared-expert layers, units.WEIGHT_FORMATS mxfp8)
MIXED_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4", "W4A16_NVFP4": "w4a16_nvfp4", "MXFP8": "mxfp8"}


def _mixed_formats(c: _Config, key: str, modules: dict, layers: int, ffn: dict) -> dict:
    """{group: format} of a ModelOpt MIXED_PRECISION checkpoint's ``quantized_layers`` ({module:
    {quant_algo, group_size}}; a module not listed stays in the checkpoint's dtype): each module
    mapped to its op group (``_module_group``). A group quantized in some of its layers only, or
    to two formats, is refused (lts costs one format per op group)."""
    by_format = {}
    for name, spec in modules.items():
        mk = f"{key}.{name}"
        if not isinstance(spec, dict):
            raise c.error(mk, f"{_show(spec)} is not {_name_of(dict)}")
        algo = _q(c, spec, mk, "quant_algo", str)
        if algo.upper() not in MIXED_ALGOS:
            raise c.error(f"{mk}.quant_algo", f"{cut_quoted(algo)} is not supported (supported: "
                                              f"{', '.join(MIXED_ALGOS)})")
        fmt = MIXED_ALGOS[algo.upper()]
        if "nvfp4" in fmt and spec.get("group_size", NVFP4_GROUP) != NVFP4_GROUP:
            raise c.error(f"{mk}.group_size", f"{_show(spec['group_size'])} is not supported "
                                              f"(NVFP4 scales groups of {NVFP4_GROUP})")
        by_format.setdefault(fmt, []).append(name)
    where = _group_layers(layers, ffn)
    formats, covered = {}, {}
    for fmt, names in by_format.items():
        for g, idxs in _module_layers(c, key, names, layers, ffn).items():
            if g in formats and formats[g] != fmt:
                raise c.error(key, f"quantizes {g} to both {formats[g]} and {fmt}; lts costs "
                                   "one format per op group")
            formats[g] = fmt
            covered[g] = None if idxs is None or covered.get(g, set()) is None \
                else covered.get(g, set()) | idxs
    for g, idxs in covered.items():
        every = where.get(g)
        if idxs is not None and every and not every <= idxs:
            raise c.error(key, f"quantizes {g} ({formats[g]}) in {len(idxs & every)} of its "
                               f"{len(every)} {'blocks' if 'blocks' in ffn else 'layers'}, the "
                               "others unquantized; lts costs one format per op group (expected "
                               "all of them or none)")
    return formats


def _main_format(formats: dict, act: str) -> str:
    """The format of a mixed checkpoint's FFN weights, the bulk of its parameters (the first of
    experts, dense_ffn, shared_experts, attention, lm_head it quantizes): precision.weights."""
    return next((formats[g] for g in ("experts", "dense_ffn", "shared_experts", "attention",
                                      "lm_head", "router") if g in formats), act)


# quantization_config.quant_method values lts reads (lower case, as HF's QuantizationMethod), and
# ModelOpt's quant_algo values (upper case, as ModelOpt writes them)
QUANT_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "compressed-tensors", "awq", "gptq", "modelopt")
MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}
UNSUPPORTED_QUANT = (f"is not supported (supported: {', '.join(QUANT_METHODS)}, and ModelOpt's "
                     "hf_quant_config.json); write a TOML model file with precision.weights set "
                     "instead")


def _q(c: _Config, d: dict, prefix: str, key: str, typ, default=None):
    """``d[key]`` of a nested quantization table (errors name ``prefix.key``); ``default`` (not
    None) when absent or null, else absent is an error."""
    full = f"{prefix}.{key}" if prefix else key
    if d.get(key) is None:
        if default is None:
            raise c.error(full, f"missing (expected {_name_of(typ)})")
        return default
    v = d[key]
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise c.error(full, f"{_show(v)} is not {_name_of(typ)}")
    return v


def _quantization(c: _Config):
    """The checkpoint's quantization: (the _Config its keys are in, weight format, KV type or
    None for the activation type, the list of modules left unquantized, its key, whether the
    quantizer touches Linear layers only so that the LM head stays as it is), or None.

    ModelOpt's ``hf_quant_config.json`` beside config.json wins (ModelOpt writes its format
    there; config.json's copy, when present, says the same); else ``quantization_config``."""
    hq = c.path.parent / "hf_quant_config.json"
    if hq.is_file():
        h = _Config(_read_json(hq), hq)
        return _modelopt(h, _q(h, h.data, "", "quantization", dict), "quantization",
                         "quant_algo", "kv_cache_quant_algo", "exclude_modules")
    q = c.data.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise c.error("quantization_config", f"{_show(q)} is not {_name_of(dict)}")
    p = "quantization_config"
    method = q.get("quant_method")
    if method is None:
        raise c.error(f"{p}.quant_method", "missing (expected a string)")
    if isinstance(method, list) and len(method) == 1 and isinstance(method[0], str):
        method = method[0]             # one method written as a list
    elif isinstance(method, list) and len(method) != 1:
        raise c.error(f"{p}.quant_method", f"{_show(method)} lists {len(method)} methods; lts "
                      f"costs one format per checkpoint (supported: {', '.join(QUANT_METHODS)})")
    if not isinstance(method, str) or method.lower() not in QUANT_METHODS:
        raise c.error(f"{p}.quant_method", f"{_show(method)} {UNSUPPORTED_QUANT}")
    method = method.lower()
    skip_key = next((k for k in ("modules_to_not_convert", "ignored_layers") if q.get(k)),
                    "modules_to_not_convert")
    skip = _q(c, q, p, skip_key, list, default=[])
    if method == "fp8":
        # HF FineGrainedFP8Config / DeepSeek-V3: weight_block_size [128, 128]; absent: per tensor
        block = q.get("weight_block_size")
        if block is None:
            return c, "fp8", None, skip, f"{p}.{skip_key}", True
        if block != [FP8_BLOCK, FP8_BLOCK]:
            raise c.error(f"{p}.weight_block_size", f"{_show(block)} is not supported (expected "
                          f"[{FP8_BLOCK}, {FP8_BLOCK}], the fp8_block format)")
        return c, "fp8_block", None, skip, f"{p}.{skip_key}", True
    if method == "fbgemm_fp8":         # fp8 weights, one scale per output channel
        return c, "fp8", None, skip, f"{p}.{skip_key}", True
    if method == "mxfp4":              # gpt-oss: the experts in MXFP4
        return c, "mxfp4", None, skip, f"{p}.{skip_key}", True
    if method in ("awq", "gptq"):
        return c, _w4a16(c, q, p, method), None, skip, f"{p}.{skip_key}", True
    if method == "modelopt":
        return _modelopt(c, q, p, "quant_algo", "kv_cache_quant_algo", "ignore")
    return _compressed_tensors(c, q, p)


def _w4a16(c: _Config, q: dict, p: str, method: str) -> str:
    """AWQ / GPTQ: 4-bit weights in groups of 128, an fp16 scale (and a 4-bit zero) per group."""
    bits = _q(c, q, p, "bits", int, default=_q(c, q, p, "w_bit", int, default=0))
    if bits != 4:
        raise c.error(f"{p}.bits", f"{cut_quoted(bits)} is not supported (expected 4: the w4a16 format)")
    group = _q(c, q, p, "group_size", int, default=_q(c, q, p, "q_group_size", int, default=0))
    if group != W4A16_GROUP:
        raise c.error(f"{p}.group_size", f"{cut_quoted(group)} is not supported (expected {W4A16_GROUP})")
    # AWQ stores zeros when zero_point is true (its default); GPTQ checkpoints store qzeros even
    # when sym is true (vLLM 0.11 gptq.py create_weights)
    zero = q.get("zero_point", True) if method == "awq" else True
    return "w4a16_zp" if zero else "w4a16"


def _modelopt(c: _Config, q: dict, p: str, algo_key: str, kv_key: str, skip_key: str):
    """ModelOpt: quant_algo NVFP4 (group_size 16) or FP8; the KV type from kv_cache_quant_algo
    (or compressed-tensors' kv_cache_scheme in config.json's copy); exclude_modules / ignore."""
    pre = f"{p}." if p else ""
    algo = _q(c, q, p, algo_key, str)
    mixed = algo.upper() == "MIXED_PRECISION"
    if not mixed and algo.upper() not in MODELOPT_ALGOS:
        raise c.error(f"{pre}{algo_key}", f"{cut_quoted(algo)} is not supported (supported: "
                                          f"{', '.join(MODELOPT_ALGOS)}, MIXED_PRECISION)")
    # MIXED_PRECISION: each module's own quant_algo in quantized_layers (_mixed_formats)
    fmt = (f"{pre}quantized_layers", _q(c, q, p, "quantized_layers", dict)) if mixed \
        else MODELOPT_ALGOS[algo.upper()]
    if fmt == "nvfp4" and q.get("group_size", NVFP4_GROUP) != NVFP4_GROUP:
        raise c.error(f"{pre}group_size", f"{_show(q['group_size'])} is not supported (NVFP4 "
                                          f"scales groups of {NVFP4_GROUP})")
    kv = None
    if q.get(kv_key) is not None:
        kv_algo = _q(c, q, p, kv_key, str)
        if kv_algo.upper() != "FP8":
            raise c.error(f"{pre}{kv_key}", f"{cut_quoted(kv_algo)} is not supported (supported: FP8)")
        kv = "fp8"
    elif q.get("kv_cache_scheme") is not None:
        kv = _kv_scheme(c, q, p)
    skip_key = skip_key if skip_key in q or "exclude_modules" not in q else "exclude_modules"
    return c, fmt, kv, _q(c, q, p, skip_key, list, default=[]), f"{pre}{skip_key}", False


def _kv_scheme(c: _Config, q: dict, p: str):
    """compressed-tensors' kv_cache_scheme: 8-bit float -> fp8 (the only KV type it sets here)."""
    s = _q(c, q, p, "kv_cache_scheme", dict)
    if (s.get("num_bits"), s.get("type")) != (8, "float"):
        raise c.error(f"{p}.kv_cache_scheme", f"{_show(s)} is not supported (expected num_bits "
                                               "8, type float: an fp8 KV cache)")
    return "fp8"


# compressed-tensors schemes: (weights type, bits, strategy, activations quantized) -> format
CT_SCHEMES = {("float", 8, "tensor", True): "fp8", ("float", 8, "channel", True): "fp8",
              ("float", 8, "block", True): "fp8_block", ("float", 4, "tensor_group", True): "nvfp4",
              ("float", 4, "group", True): "nvfp4", ("int", 8, "channel", True): "int8",
              ("int", 8, "tensor", True): "int8", ("int", 4, "group", False): "w4a16"}


def _compressed_tensors(c: _Config, q: dict, p: str):
    """compressed-tensors: every config group's weights scheme must name one format."""
    groups = _q(c, q, p, "config_groups", dict)
    formats = set()
    for name, g in groups.items():
        gp = f"{p}.config_groups.{name}"
        if not isinstance(g, dict):
            raise c.error(gp, f"{_show(g)} is not {_name_of(dict)}")
        w = _q(c, g, gp, "weights", dict)
        typ, bits = _q(c, w, f"{gp}.weights", "type", str), _q(c, w, f"{gp}.weights", "num_bits", int)
        strategy = _q(c, w, f"{gp}.weights", "strategy", str, default="tensor")
        scheme = (typ, bits, strategy, g.get("input_activations") is not None)
        fmt = CT_SCHEMES.get(scheme)
        group = w.get("group_size")
        if fmt == "nvfp4" and group != NVFP4_GROUP or fmt == "w4a16" and group not in \
                (W4A16_GROUP, W4A16_GROUP_32):
            fmt = None
        if fmt == "fp8_block" and w.get("block_structure") != [FP8_BLOCK, FP8_BLOCK]:
            fmt = None
        if fmt == "w4a16" and not w.get("symmetric", True):
            fmt = "w4a16_zp"
        if scheme == ("int", 4, "group", False) and group == W4A16_GROUP_32 and \
                w.get("symmetric", True):
            fmt = "w4a16_g32"          # Kimi-K2.5's experts
        if scheme == ("float", 4, "group", False) and group == MXFP4_GROUP and \
                q.get("format") == "mxfp4-pack-quantized":
            # Kimi-K3's experts (huggingface.co/moonshotai/Kimi-K3 config.json: compressed-
            # tensors "mxfp4-pack-quantized", float 4-bit groups of 32, uint8 (e8m0) scales)
            fmt = "mxfp4"
        if fmt is None:
            raise c.error(f"{gp}.weights", f"{typ} {bits}-bit {strategy} weights (group "
                          f"{_show(group)}, activations "
                          f"{'quantized' if scheme[3] else 'not quantized'}) are not supported "
                          "(supported: fp8 per tensor or channel, fp8 blocks of 128x128, NVFP4 "
                          "groups of 16, int8 W8A8, int4 W4A16 groups of 128 or 32)")
        formats.add(fmt)
    if len(formats) != 1:
        raise c.error(f"{p}.config_groups", f"{', '.join(sorted(formats)) or 'no group'}: lts "
                                            "costs one weight format per checkpoint")
    kv = _kv_scheme(c, q, p) if q.get("kv_cache_scheme") is not None else None
    return c, formats.pop(), kv, _q(c, q, p, "ignore", list, default=[]), f"{p}.ignore", False


# module names of a checkpoint's exclude lists -> WEIGHT_GROUPS (HF module names of the
# supported families: model.layers.N.self_attn.q_proj, .mlp.gate, .block_sparse_moe.experts, ...)
# (patch_merge: MiniMax-M3 VL's patch_merge_mlp, its vision tokens' merger)
_NOT_TEXT = ("vision", "visual", "mm_projector", "multi_modal", "audio", "image", "patch_merge")
_ATTN_PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj",
              "kv_a_proj_with_mqa", "kv_b_proj")
# the token mixer's module: softmax attention, or a Gated DeltaNet layer's (Qwen3-Next / Qwen3.5:
# transformers Qwen3NextDecoderLayer.linear_attn, costed in the attention group)
_MIXER = ("self_attn", "attn", "attention", "linear_attn")
_FFN_PROJ = ("mlp", "gate_proj", "up_proj", "down_proj", "gate_up_proj", "w1", "w2", "w3")
# modules of the multi-token-prediction layer only (DeepSeek-V3 / GLM-5 model.layers.<layers>:
# eh_proj, enorm, hnorm, shared_head; HF DeepseekV3 checkpoints, vLLM deepseek_mtp.py), which
# lts counts apart and does not run
_MTP_ONLY = ("eh_proj", "enorm", "hnorm", "shared_head")
# the sparse-attention indexer's per-head weights (DeepSeek-V3.2 indexer.weights_proj, GLM-5's
# self_attn.indexers_proj: [hidden -> index_n_heads], 6144 x 32 = 0.2M of GLM-5's ~0.2B attention
# weights a layer, 0.1%): kept bf16 by zai-org/GLM-5-FP8 and costed in attention's format
_INDEX_SCALES = ("indexers_proj", "weights_proj")


def _module_group(name: str):
    """(group or None to skip, layers) of one name: a module path, a glob
    (``model.layers.*.self_attn``) or compressed-tensors' ``re:`` regex. group "layer": the
    name is a whole decoder layer (``model.layers.0*``, ``model.layers.1.*``). layers: None for
    every layer (no index), "*" (any index), or the index as written, digits with a trailing "*"
    when a glob (``0*``: the layers whose number starts 0; ``_layer_set``)."""
    if name.startswith("re:"):         # re:.*mlp.gate$ -> *mlp.gate
        name = name[3:].replace(".*", "*").replace("\\.", ".").strip("^$")
    raw = name.lower().split(".")
    parts = [s.strip("*") for s in raw]
    idx, at = None, len(parts)
    for i, s in enumerate(parts[:-1]):
        if s == "layers":
            idx, at = (raw[i + 1] if re.fullmatch(r"\d+\*?", raw[i + 1]) else "*"), i + 1
    if any(w in name.lower() for w in _NOT_TEXT) or "mtp" in parts or "e_score_correction_bias" \
            in parts or parts[-1] == "bias" or any(s in _MTP_ONLY for s in parts) or \
            parts[-1] in _INDEX_SCALES:
        return None, idx                   # not the text model's weights, or not a matrix
    if idx not in (None, "*") and not any(parts[at + 1:]):
        return "layer", idx
    # DeepSeek-V4 names its LM head "head" (inference/model.py Transformer.head)
    if "lm_head" in parts or parts == ["head"]:
        return "lm_head", idx
    if any("embed" in s for s in parts):
        return "embedding", idx
    if "norm" in parts[-1]:
        return "norm", idx
    # a latent MoE's fc1/fc2_latent_proj are costed in the shared experts' group (FFNSpec.latent)
    if any(s.startswith("shared_expert") or s.endswith("latent_proj") for s in parts):
        return "shared_experts", idx
    # Nemotron-H's blocks name every op "mixer" (backbone.layers.N.mixer.*: N a block index):
    # a Mamba-2 mixer's in_proj / out_proj are the ssm group; its conv1d, a depthwise
    # convolution no quantizer converts, is skipped (ModelOpt lists it in every Mamba block)
    if "mixer" in parts and parts[-1] in ("in_proj", "out_proj"):
        return "ssm", idx
    if "mixer" in parts and parts[-1] == "conv1d":
        return None, idx
    if any(s in _MIXER for s in parts) or parts[-1] in _ATTN_PROJ:
        return "attention", idx
    if any(s in ("gate", "router") for s in parts):
        return "router", idx
    if "experts" in parts:
        return "experts", idx
    if any(s in _FFN_PROJ for s in parts):
        return "dense_ffn", idx
    return "?", idx


def _layer_set(idx, layers: int):
    """The layers (a set of indices < layers) a name's index covers, or None for every layer: an
    index as written ("12"), or a glob on it ("1*": 1, 10-19, 100-...; fnmatch's reading of
    ``model.layers.1*``). Indices from ``layers`` on are the MTP layers (not costed)."""
    if idx is None or idx == "*":
        return None
    if idx.endswith("*"):
        return {i for i in range(layers) if str(i).startswith(idx[:-1])}
    return {int(idx)} & set(range(layers))


def _group_layers(layers: int, ffn: dict) -> dict:
    """The layers each WEIGHT_GROUPS group of a decoder layer is in (router, experts and shared
    experts the MoE layers, dense_ffn the dense ones). Nemotron-H (``ffn["blocks"]``: each
    single-op block's kind, the indices its checkpoint names): attention the attention blocks,
    ssm the Mamba-2 blocks, router, experts and shared experts the MoE blocks, dense_ffn the MLP
    blocks."""
    if "blocks" in ffn:
        at = {k: {i for i, b in enumerate(ffn["blocks"]) if b == k}
              for k in ("attention", "mamba", "moe", "mlp")}
        return {"attention": at["attention"], "ssm": at["mamba"], "router": at["moe"],
                "experts": at["moe"], "shared_experts": at["moe"], "dense_ffn": at["mlp"]}
    moe = ffn["kind"] == "moe"
    dense = ffn.get("dense_layers", 0) if moe else layers
    every = ffn.get("moe_every", 1) if moe else 1
    moe_layers = {i for i in range(dense, layers) if i % every == every - 1} if moe else set()
    return {"attention": set(range(layers)), "router": moe_layers, "experts": moe_layers,
            "shared_experts": moe_layers if ffn.get("shared_experts") or ffn.get("latent")
            else set(),
            "dense_ffn": set(range(layers)) - moe_layers}


def _module_layers(c: _Config, key: str, names, layers: int, ffn: dict) -> dict:
    """{group: the layers (None: every one) the names place it in}: each name of ``names``
    mapped by ``_module_group``; a whole layer names each group in it; names of the MTP layers
    (indices from ``layers`` on), of the vision tower and biases are skipped; a name lts cannot
    place is refused."""
    where = _group_layers(layers, ffn)
    seen = {}
    for n in names:
        if not isinstance(n, str):
            raise c.error(key, f"{_show(n)} is not a string (expected module names)")
        group, idx = _module_group(n)
        covered = _layer_set(idx, layers)
        if group is None or covered == set():
            continue                       # not costed (vision tower, MTP layers beyond layers)
        if group == "?":
            raise c.error(key, f"{cut_quoted(n)} is not a module lts can place (expected a whole "
                               "layer, "
                               "attention, router/gate, experts, shared experts, MLP, lm_head, "
                               "embeddings)")
        if group == "dense_ffn" and covered is not None and covered & where["router"]:
            raise c.error(key, f"{cut_quoted(n)} excludes a whole MoE block; lts costs one "
                               "format per op "
                               "group (expected its experts, gate or shared experts by name)")
        groups = [g for g in where if covered is None or where[g] & covered] \
            if group == "layer" else [group]
        for g in groups:
            if covered is None or seen.get(g, set()) is None:
                seen[g] = None
            else:
                seen[g] = seen.get(g, set()) | (covered & where[g] if g in where else covered)
    return seen


_BY_SIZE = ("experts", "shared_experts", "dense_ffn", "attention", "router")


def _unquantized(c: _Config, names: list, key: str, layers: int, ffn: dict,
                 linear_only: bool) -> list:
    """The WEIGHT_GROUPS a checkpoint leaves unquantized: embeddings and norms always (quantizers
    touch Linear layers only), the LM head too for HF's own quantizers (``linear_only``:
    transformers' get_keys_to_not_convert keeps the output embedding), and each group its
    exclude list names in every layer that has it (by name, or as part of a whole layer:
    ``model.layers.0*``), and {group: share} of the groups it names in some of their layers only
    (quantized in the others: ``PrecisionSpec.quantized_share``; the routed experts refused:
    their grouped GEMM runs one format). A name lts cannot place is refused."""
    where = _group_layers(layers, ffn)
    kept = {"embedding", "norm"} | ({"lm_head"} if linear_only else set())
    seen = _module_layers(c, key, names, layers, ffn)
    partly = {}
    # the largest groups first: a whole MoE layer's refusal names its experts
    for group in sorted(seen, key=lambda g: _BY_SIZE.index(g) if g in _BY_SIZE else 9):
        idxs, every = seen[group], where.get(group)
        if idxs is None or every is None or every and every <= idxs:
            kept.add(group)
        elif every and (idxs & every):
            if group == "experts":
                unit = "blocks" if "blocks" in ffn else "layers"     # Nemotron-H: block indices
                raise c.error(key, f"leaves experts unquantized in {len(idxs & every)} of their "
                                   f"{len(every)} {unit}; lts costs the routed experts in one "
                                   "format (expected all of them or none)")
            partly[group] = len(every - idxs) / len(every)
    return [g for g in WEIGHT_GROUPS if g in kept], partly


def _attention(c: _Config, family: str, hidden: int) -> tuple[dict, dict]:
    heads = c.get("num_attention_heads", int, positive=True)
    if family in DEEPSEEK:
        nope = c.get("qk_nope_head_dim", int, positive=True)
        rope = c.get("qk_rope_head_dim", int, positive=True)
        # HF default: q_lora_rank null means a full-rank query projection (DeepSeek-V2-Lite).
        q_lora = c.get("q_lora_rank", int, positive=True, nullable=True) or 0
        table = {"kind": "mla", "heads": heads, "kv_heads": heads, "head_dim": nope + rope,
                 "q_lora_rank": q_lora,
                 "kv_lora_rank": c.get("kv_lora_rank", int, positive=True),
                 "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
                 "v_head_dim": c.get("v_head_dim", int, positive=True)}
        keys = {"attention.heads": "num_attention_heads", "attention.kv_heads":
                "num_attention_heads", "attention.head_dim": "qk_nope_head_dim",
                "attention.q_lora_rank": "q_lora_rank", "attention.kv_lora_rank": "kv_lora_rank",
                "attention.qk_nope_head_dim": "qk_nope_head_dim",
                "attention.qk_rope_head_dim": "qk_rope_head_dim",
                "attention.v_head_dim": "v_head_dim"}
        if family in SPARSE:
            # GLM-5.2 (huggingface.co/zai-org/GLM-5.2 config.json, transformers 5.12): indexer_types
            # one a layer, "full" (the layer runs its indexer) or "shared" (it attends over the
            # top-k of the last full layer before it and holds no indexer weights or keys: 21
            # full layers, 0-2 and every 4th from 6, of 78); absent or all "full": every layer
            kinds = c.get("indexer_types", list, default=[], nullable=True)
            if "shared" in kinds:
                table["indexer_types"] = kinds
                keys["attention.indexer_types"] = "indexer_types"
            for lts_key, hf_key in (("index_topk", "index_topk"), ("index_heads", "index_n_heads"),
                                    ("index_head_dim", "index_head_dim")):
                table[lts_key] = c.get(hf_key, int, positive=True)
                keys[f"attention.{lts_key}"] = hf_key
        return table, keys
    # HF default (LlamaConfig & co.): num_key_value_heads None -> num_attention_heads (MHA).
    kv_heads = c.get("num_key_value_heads", int, default=heads, positive=True, nullable=True)
    if c.data.get("head_dim") is not None:
        head_dim = c.get("head_dim", int, positive=True)
    else:
        # HF default: head_dim = hidden_size // num_attention_heads
        if hidden % heads:
            raise c.error("num_attention_heads",
                          f"{heads} does not divide hidden_size = {hidden} and there is no "
                          "head_dim key (expected head_dim, or heads dividing hidden_size)")
        head_dim = hidden // heads
    table = {"kind": "gqa", "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}
    if family in HYBRID:
        # HF default: attn_output_gate true (transformers Qwen3NextAttention: q_proj of 2 x heads
        # x head_dim, the query and its output gate; Qwen3.5 configs say "attn_output_gate": true)
        table["output_gate"] = c.get("attn_output_gate", bool, default=True, nullable=True)
    if family == "llama4_text" and c.get("attention_bias", bool, default=False, nullable=True):
        # HF default: attention_bias false (Llama4TextConfig); Llama 4's checkpoints have none
        raise c.error("attention_bias", "true is not supported (expected false: Llama 4's q/k/v/o "
                                        "projections have no biases)")
    if family == "gpt_oss":
        # GptOssAttention: q/k/v/o biases when attention_bias (HF default true) and a learned
        # sink logit per head ("sinks", one per head in every layer)
        table["bias"] = c.get("attention_bias", bool, default=True)
        table["sinks"] = True
    keys = {"attention.heads": "num_attention_heads", "attention.kv_heads": "num_key_value_heads",
            "attention.head_dim": "head_dim"}
    if family in KIND_SHAPED:
        if c.get("attention_bias", bool, default=False, nullable=True):
            raise c.error("attention_bias", "true is not supported (expected false: the "
                                            "checkpoints' q/k/v/o projections have no biases)")
        kind_table, kind_keys = {"gemma4_text": _gemma4_attention,
                                 "mimo_v2_flash": _mimo_v2_attention,
                                 "step3p7": _step3p7_attention}[family](c, table)
        table.update(kind_table)
        keys.update(kind_keys)
    return table, keys


def _gemma4_attention(c: _Config, table: dict) -> tuple[dict, dict]:
    """Gemma 4's full-attention layers ([attention.full]; the model's shape, [attention], is the
    sliding layers'): global_head_dim (null: head_dim) wide heads; with attention_k_eq_v,
    num_global_key_value_heads KV heads whose V is made by k_proj (no v_proj; the cache keeps V
    apart from K: cost.kv); without it, num_key_value_heads as the sliding layers. Refused: KV
    shared across layers (num_kv_shared_layers, Gemma-3n/E2B/E4B style), per-layer input
    embeddings (hidden_size_per_layer_input), use_double_wide_mlp."""
    for key, typ in (("num_kv_shared_layers", int), ("hidden_size_per_layer_input", int),
                     ("use_double_wide_mlp", bool)):
        value = c.get(key, typ, default=0 if typ is int else False, nullable=True)
        if value:
            what = {"num_kv_shared_layers": "layers that reuse an earlier layer's keys and values",
                    "hidden_size_per_layer_input": "per-layer input embeddings",
                    "use_double_wide_mlp": "double-wide MLPs"}[key]
            raise c.error(key, f"{_show(value)} is not supported (expected "
                               f"{'0' if typ is int else 'false'}: {what} are not costed by lts)")
    k_eq_v = c.get("attention_k_eq_v", bool, default=False, nullable=True)
    head_dim = c.get("global_head_dim", int, positive=True, nullable=True) or table["head_dim"]
    full = {"head_dim": head_dim, "k_eq_v": k_eq_v}
    keys = {"attention.full.head_dim": "global_head_dim", "attention.full.k_eq_v":
            "attention_k_eq_v", "attention.full.kv_heads": "num_global_key_value_heads",
            "attention.full.heads": "num_attention_heads", "attention.full": "layer_types"}
    if k_eq_v:
        full["kv_heads"] = c.get("num_global_key_value_heads", int, positive=True)
    return {"full": full}, keys


def _mimo_v2_attention(c: _Config, table: dict) -> tuple[dict, dict]:
    """MiMo-V2-Flash's attention: full layers Q/K of head_dim, V of v_head_dim (HF default:
    head_dim); sliding layers ([attention.sliding]) of their own swa_ heads, KV heads and widths,
    and a sink logit per head where add_swa_attention_sink_bias (full layers:
    add_full_attention_sink_bias)."""
    table["v_head_dim"] = c.get("v_head_dim", int, positive=True, nullable=True) \
        or table["head_dim"]
    table["sinks"] = c.get("add_full_attention_sink_bias", bool, default=False, nullable=True)
    sliding = {"heads": c.get("swa_num_attention_heads", int, positive=True),
               "kv_heads": c.get("swa_num_key_value_heads", int, positive=True),
               "head_dim": c.get("swa_head_dim", int, positive=True)}
    sliding["v_head_dim"] = c.get("swa_v_head_dim", int, positive=True, nullable=True) \
        or sliding["head_dim"]
    sliding["sinks"] = c.get("add_swa_attention_sink_bias", bool, default=False, nullable=True)
    keys = {"attention.v_head_dim": "v_head_dim", "attention.sliding.heads":
            "swa_num_attention_heads", "attention.sliding.kv_heads": "swa_num_key_value_heads",
            "attention.sliding.head_dim": "swa_head_dim",
            "attention.sliding.v_head_dim": "swa_v_head_dim",
            "attention.sliding.sinks": "add_swa_attention_sink_bias",
            "attention.sinks": "add_full_attention_sink_bias",
            "attention.sliding": "hybrid_layer_pattern"}
    return {"sliding": sliding}, keys


def _step3p7_attention(c: _Config, table: dict) -> tuple[dict, dict]:
    """Step-3.7-Flash's attention (transformers src/transformers/models/step3p7,
    huggingface/transformers commit 0cf66185, Step3p7Attention and Step3p7TextConfig): GQA of
    head_dim with q/k norms and a sigmoid gate on each head's output from its own projection
    g_proj [hidden, heads] (``head_gate``; vLLM's key use_head_wise_attn_gate, whose false
    makes the gate query-wide, [hidden, heads x head_dim]: ``output_gate``). The sliding
    layers have their own query heads: attention_other_setting's num_attention_heads (96 in
    Step-3.7-Flash), else num_sliding_attention_heads, else the full layers' (the config class's
    rule); their KV heads attention_other_setting's num_attention_groups, else the model's."""
    gate = c.get("use_head_wise_attn_gate", bool, default=True, nullable=True)
    gate = True if gate is None else gate
    table["head_gate" if gate else "output_gate"] = True
    other = c.get("attention_other_setting", dict, default={}, nullable=True) or {}
    keys = {"attention.sliding.heads": "attention_other_setting",
            "attention.sliding.kv_heads": "attention_other_setting",
            "attention.sliding": "layer_types"}
    heads = other.get("num_attention_heads")
    if heads is None and c.data.get("num_sliding_attention_heads") is not None:
        heads = c.get("num_sliding_attention_heads", int, positive=True)
        keys["attention.sliding.heads"] = "num_sliding_attention_heads"
    if heads is None:
        c.note += ("; no attention_other_setting: the sliding layers costed with "
                   f"num_attention_heads ({table['heads']}) query heads (Step-3.7-Flash's own "
                   "config gives them 96)")
        heads = table["heads"]
    sliding = {"heads": heads}
    if "num_attention_groups" in other:
        sliding["kv_heads"] = other["num_attention_groups"]
    return {"sliding": sliding}, keys


def _sliding(c: _Config, family: str, layers: int) -> tuple[dict, dict]:
    """The sliding window and which layers use it, as [attention] keys (module docstring):
    ``layer_types`` where the config lists it, else mistral/mixtral's ``sliding_window`` on
    every layer, else Qwen's ``use_sliding_window`` on the layers from ``max_window_layers`` on
    (Qwen2Config's rule); DeepSeek and Llama configs have none."""
    keys = {"attention.sliding_window": "sliding_window", "attention.layer_types": "layer_types"}
    if family == "llama4_text":
        return _llama4_layers(c, layers)
    if family in HYBRID:
        if c.data.get("sliding_window") is not None:
            raise c.error("sliding_window", f"{_show(c.data['sliding_window'])} is not supported "
                          "(expected null: the full-attention layers attend to the whole context)")
        # HF default: full_attention_interval 4 (Qwen3NextConfig); layer i is full attention
        # when (i + 1) % interval == 0, linear attention otherwise
        every = c.get("full_attention_interval", int, default=4, positive=True, nullable=True)
        kinds = c.get("layer_types", list, nullable=True, default=[
            "full_attention" if (i + 1) % every == 0 else "linear_attention"
            for i in range(layers)])
        return {"layer_types": kinds}, keys
    if family in ("gemma4_text", "step3p7"):
        # Gemma4TextConfig, Step3p7TextConfig: layer_types (sliding_attention / full_attention)
        # and sliding_window
        return {"sliding_window": c.get("sliding_window", int, positive=True),
                "layer_types": c.get("layer_types", list)}, keys
    if family == "mimo_v2_flash":
        # vLLM MiMoV2FlashDecoderLayer.is_compressed_softmax_layer: hybrid_layer_pattern[i] == 1
        # is a sliding layer of sliding_window_size tokens (the config's sliding_window agrees)
        pattern = c.get("hybrid_layer_pattern", list)
        if len(pattern) != layers or any(p not in (0, 1) for p in pattern):
            raise c.error("hybrid_layer_pattern", f"{_show(pattern)} is not {layers} entries of "
                                                  "0 (full attention) or 1 (sliding window)")
        keys.update({"attention.sliding_window": "sliding_window_size",
                     "attention.layer_types": "hybrid_layer_pattern"})
        return {"sliding_window": c.get("sliding_window_size", int, positive=True),
                "layer_types": ["sliding_attention" if p else "full_attention"
                                for p in pattern]}, keys
    if family == "gpt_oss":
        # HF default (GptOssConfig, transformers 4.55): sliding_window 128, layer_types
        # alternating sliding_attention, full_attention from the first layer
        window = c.get("sliding_window", int, positive=True, default=128)
        kinds = c.get("layer_types", list, default=["sliding_attention", "full_attention"]
                      * (layers // 2) + ["sliding_attention"] * (layers % 2), nullable=True)
        return {"sliding_window": window, "layer_types": kinds}, keys
    if family in DEEPSEEK or family == "llama" or (
            family == "mixtral" and "sliding_window" not in c.data):
        return {}, keys
    qwen = family not in ("mistral", "mixtral")
    # HF default: use_sliding_window false (Qwen2Config, Qwen3Config, their MoE variants).
    if qwen and not c.get("use_sliding_window", bool, default=False, nullable=True):
        return {}, keys
    # HF default: a missing sliding_window is 4096 in MistralConfig, None in MixtralConfig (a
    # null one is None everywhere).
    window = c.get("sliding_window", int, positive=True, nullable=True,
                   default=4096 if family == "mistral" and "sliding_window" not in c.data else None)
    if window is None and qwen:
        raise c.error("sliding_window", "missing (expected an integer: use_sliding_window is true)")
    if "layer_types" in c.data and c.data["layer_types"] is not None:
        kinds = c.get("layer_types", list)
        if window is None and "sliding_attention" in kinds:
            raise c.error("sliding_window", "null, but layer_types has sliding_attention layers "
                                            "(expected the window's size)")
        if "chunked_attention" in kinds:   # only Llama 4 has the chunk size (attention_chunk_size)
            raise c.error("layer_types", f"chunked_attention is not supported in a {family} "
                                         "config (lts reads chunked attention from llama4 only)")
        return ({"layer_types": kinds} if window is None else
                {"sliding_window": window, "layer_types": kinds}), keys
    if window is None:
        return {}, keys
    if not qwen:
        return {"sliding_window": window}, keys
    # HF default: max_window_layers 28 (Qwen2Config): layers i >= max_window_layers slide.
    first = c.get("max_window_layers", int, default=28, minimum=0, nullable=True)
    kinds = ["full_attention" if i < first else "sliding_attention" for i in range(layers)]
    keys["attention.layer_types"] = "max_window_layers"
    return {"sliding_window": window, "layer_types": kinds}, keys


def _llama4_layers(c: _Config, layers: int) -> tuple[dict, dict]:
    """Llama 4's layer kinds: chunked local attention of attention_chunk_size tokens on the RoPE
    layers, full attention on the NoPE ones. transformers' Llama4TextConfig: no_rope_layers[i] 1
    means layer i uses RoPE (HF default when absent or empty: 1 unless (i + 1) is a multiple of
    no_rope_layer_interval, HF default 4), and layer_types is "chunked_attention" where
    no_rope_layers is 1, else "full_attention"; attention_chunk_size HF default 8192."""
    keys = {"attention.chunk_size": "attention_chunk_size", "attention.layer_types": "no_rope_layers"}
    if c.data.get("sliding_window") is not None:
        raise c.error("sliding_window", f"{_show(c.data['sliding_window'])} is not supported "
                                        "(expected null: Llama 4 chunks its local attention)")
    flags = c.get("no_rope_layers", list, default=[], nullable=True)
    if not flags:
        every = c.get("no_rope_layer_interval", int, default=4, positive=True)
        flags = [int((i + 1) % every != 0) for i in range(layers)]
        keys["attention.layer_types"] = "no_rope_layer_interval"
    elif len(flags) != layers or any(f not in (0, 1) for f in flags):
        raise c.error("no_rope_layers", f"{_show(flags)} is not one 0 or 1 a layer "
                                        f"(expected {layers} entries)")
    kinds = ["chunked_attention" if f else "full_attention" for f in flags]
    if "chunked_attention" not in kinds:
        return {"layer_types": kinds}, keys
    chunk = c.get("attention_chunk_size", int, default=8192, positive=True, nullable=True)
    if "attention_chunk_size" in c.data and c.data["attention_chunk_size"] is None:
        raise c.error("attention_chunk_size", "null is not supported (expected an integer: "
                                              "no_rope_layers has RoPE layers, which chunk)")
    return {"chunk_size": chunk, "layer_types": kinds}, keys


def _qwen_dense_prefix(c: _Config, layers: int, experts: int) -> int:
    """Number of leading dense layers of a Qwen MoE model (Qwen2MoeDecoderLayer's rule)."""
    # HF default: decoder_sparse_step 1 and mlp_only_layers [] -> every layer is MoE.
    step = c.get("decoder_sparse_step", int, default=1, positive=True, nullable=True)
    only = c.get("mlp_only_layers", list, default=[], nullable=True)
    for v in only:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < layers:
            raise c.error("mlp_only_layers", f"{cut_quoted(only)} is not a list of layer indices "
                                             f"(integers 0..{layers - 1})")
    dense = {i for i in range(layers) if i in only or (i + 1) % step != 0}
    k = len(dense)
    if dense != set(range(k)):
        key = "decoder_sparse_step" if step != 1 else "mlp_only_layers"
        value = step if step != 1 else only
        raise c.error(key, f"{cut_quoted(value)} interleaves dense and MoE layers, which lts "
                           "cannot represent (expected decoder_sparse_step 1 and mlp_only_layers a "
                           "leading block [0, 1, ..., k-1])")
    return k


def _ffn(c: _Config, family: str, layers: int) -> tuple[dict, dict]:
    if family == "gemma4_text":
        return _gemma4_ffn(c)
    if family == "mimo_v2_flash":
        return _mimo_v2_ffn(c, layers)
    if family == "step3p7":
        return _step3p7_ffn(c, layers)
    if family in DENSE or family == "qwen3_5_text":
        return ({"kind": "dense", "gated": True,
                 "intermediate": c.get("intermediate_size", int, positive=True)},
                {"ffn.intermediate": "intermediate_size"})
    top_k = c.get("num_experts_per_tok", int, positive=True)
    if family == "llama4_text":
        return _llama4_ffn(c, layers, top_k)
    if family in ("mixtral", "gpt_oss"):
        experts_key = "num_local_experts"
        experts = c.get(experts_key, int, positive=True)
        table = {"kind": "moe", "gated": True, "experts": experts, "top_k": top_k,
                 # Mixtral's intermediate_size is the width of each expert
                 "expert_intermediate": c.get("intermediate_size", int, positive=True),
                 "shared_experts": 0, "dense_layers": 0}
        keys = {"ffn.expert_intermediate": "intermediate_size"}
    elif family in QWEN_MOE or family in HYBRID:
        experts_key = "num_experts"
        experts = c.get(experts_key, int, positive=True)
        table = {"kind": "moe", "gated": True, "experts": experts, "top_k": top_k,
                 "expert_intermediate": c.get("moe_intermediate_size", int, positive=True),
                 "shared_experts": 0}
        keys = {"ffn.expert_intermediate": "moe_intermediate_size",
                "ffn.dense_layers": "mlp_only_layers", "ffn.intermediate": "intermediate_size"}
        if family != "qwen3_moe":
            # Qwen2MoeSparseMoeBlock (and Qwen3-Next's, Qwen3.5's): one shared expert of
            # shared_expert_intermediate_size
            table["shared_experts"] = 1
            table["shared_intermediate"] = c.get("shared_expert_intermediate_size", int,
                                                 positive=True)
            keys["ffn.shared_intermediate"] = "shared_expert_intermediate_size"
        dense = _qwen_dense_prefix(c, layers, experts)
        if dense == layers:          # no MoE layer at all: a dense model
            return ({"kind": "dense", "gated": True,
                     "intermediate": c.get("intermediate_size", int, positive=True)},
                    {"ffn.intermediate": "intermediate_size"})
        table["dense_layers"] = dense
        if dense:
            table["intermediate"] = c.get("intermediate_size", int, positive=True)
    else:                            # deepseek_v2 / deepseek_v3
        experts_key = "n_routed_experts"
        experts = c.get(experts_key, int, positive=True)
        # HF default: moe_layer_freq 1 (DeepseekV3Config); other values interleave dense layers.
        freq = c.get("moe_layer_freq", int, default=1, positive=True)
        if freq != 1:
            raise c.error("moe_layer_freq", f"{cut_quoted(freq)} interleaves dense and MoE "
                                            "layers, which "
                                            "lts cannot represent (expected 1)")
        expert_inter = c.get("moe_intermediate_size", int, positive=True)
        # HF default: n_shared_experts null -> no shared expert (DeepseekV3MoE checks for None).
        shared = c.get("n_shared_experts", int, minimum=0, nullable=True) or 0
        dense = c.get("first_k_dense_replace", int, minimum=0)
        table = {"kind": "moe", "gated": True, "experts": experts, "top_k": top_k,
                 "expert_intermediate": expert_inter, "shared_experts": shared,
                 "shared_intermediate": shared * expert_inter, "dense_layers": dense}
        if dense:
            table["intermediate"] = c.get("intermediate_size", int, positive=True)
        keys = {"ffn.expert_intermediate": "moe_intermediate_size",
                "ffn.shared_experts": "n_shared_experts",
                "ffn.shared_intermediate": "n_shared_experts",
                "ffn.dense_layers": "first_k_dense_replace",
                "ffn.intermediate": "intermediate_size"}
    keys.update({"ffn.experts": experts_key, "ffn.top_k": "num_experts_per_tok"})
    return table, keys


def _step3p7_ffn(c: _Config, layers: int) -> tuple[dict, dict]:
    """Step-3.7-Flash's FFN (transformers modeling_step3p7.py, commit 0cf66185:
    Step3p7SparseMoeBlock, Step3p7MLP, Step3p7TextConfig): the layers moe_layers_enum lists
    (the config class's default: layer 3 on) a MoE of n_routed_experts (its aliases
    moe_num_experts, num_local_experts; the bundled copy says num_experts) of
    moe_intermediate_size, num_experts_per_tok (moe_top_k) a token, and one shared expert of
    share_expert_dim; the others gated MLPs of intermediate_size. lts costs a leading block of
    dense layers (``ffn.dense_layers``)."""
    key = next((k for k in ("n_routed_experts", "moe_num_experts", "num_local_experts",
                            "num_experts") if k in c.data), "n_routed_experts")
    top = "num_experts_per_tok" if "num_experts_per_tok" in c.data or "moe_top_k" not in c.data \
        else "moe_top_k"
    enum = c.data.get("moe_layers_enum")
    if enum is None:
        moe = set(range(min(3, layers), layers))
    else:
        items = enum.split(",") if isinstance(enum, str) else enum
        try:
            moe = {int(str(i).strip()) for i in items if str(i).strip()}
        except (TypeError, ValueError):
            raise c.error("moe_layers_enum", f"{_show(enum)} is not a list of layer "
                                             "indices") from None
    dense = layers - len(moe)
    if moe != set(range(dense, layers)):
        raise c.error("moe_layers_enum", f"{_show(enum)} interleaves dense and MoE layers, "
                                         "which lts cannot represent (expected the layers from "
                                         "some k on)")
    share = c.get("share_expert_dim", int, positive=True)
    table = {"kind": "moe", "gated": True, "experts": c.get(key, int, positive=True),
             "top_k": c.get(top, int, positive=True),
             "expert_intermediate": c.get("moe_intermediate_size", int, positive=True),
             "shared_experts": 1, "shared_intermediate": share, "dense_layers": dense}
    if dense:
        table["intermediate"] = c.get("intermediate_size", int, positive=True)
    return table, {"ffn.experts": key, "ffn.top_k": top,
                   "ffn.expert_intermediate": "moe_intermediate_size",
                   "ffn.shared_intermediate": "share_expert_dim",
                   "ffn.dense_layers": "moe_layers_enum", "ffn.intermediate": "intermediate_size"}


def _gemma4_ffn(c: _Config) -> tuple[dict, dict]:
    """Gemma 4's FFN (transformers modeling_gemma4.py Gemma4TextDecoderLayer): every layer runs
    its gated MLP (Gemma4TextMLP, gate/up/down of intermediate_size) and, with enable_moe_block,
    beside it a routed MoE (Gemma4TextRouter, Gemma4TextExperts: num_experts of
    moe_intermediate_size, top_k_experts a token), the two outputs summed: costed as a MoE whose
    one shared expert is the MLP (the model cards' "1 shared expert"); the router's scale and
    per-expert scale vectors and the extra norms are not counted (hidden + num_experts + 3 hidden
    a layer)."""
    inter = c.get("intermediate_size", int, positive=True)
    if not c.get("enable_moe_block", bool, default=False, nullable=True):
        return {"kind": "dense", "gated": True, "intermediate": inter}, \
            {"ffn.intermediate": "intermediate_size"}
    return ({"kind": "moe", "gated": True, "experts": c.get("num_experts", int, positive=True),
             "top_k": c.get("top_k_experts", int, positive=True),
             "expert_intermediate": c.get("moe_intermediate_size", int, positive=True),
             "shared_experts": 1, "shared_intermediate": inter},
            {"ffn.experts": "num_experts", "ffn.top_k": "top_k_experts",
             "ffn.expert_intermediate": "moe_intermediate_size",
             "ffn.shared_intermediate": "intermediate_size"})


def _mimo_v2_ffn(c: _Config, layers: int) -> tuple[dict, dict]:
    """MiMo-V2-Flash's FFNs (vLLM mimo_v2_flash.py MiMoV2FlashDecoderLayer.is_moe_layer):
    moe_layer_freq[i] 1 is a MoE layer (n_routed_experts of moe_intermediate_size, top
    num_experts_per_tok, no shared expert unless n_shared_experts), 0 a dense MLP of
    intermediate_size; lts reads the dense layers as a leading block (dense_layers)."""
    freq = c.get("moe_layer_freq", list)
    dense = next((i for i, f in enumerate(freq) if f), len(freq))
    if len(freq) != layers or any(f not in (0, 1) for f in freq) or not all(freq[dense:]):
        raise c.error("moe_layer_freq", f"{_show(freq)} is not supported (expected {layers} "
                                        "entries: 0 for the leading dense layers, then 1)")
    expert_inter = c.get("moe_intermediate_size", int, positive=True)
    shared = c.get("n_shared_experts", int, minimum=0, nullable=True) or 0
    table = {"kind": "moe", "gated": True, "experts": c.get("n_routed_experts", int, positive=True),
             "top_k": c.get("num_experts_per_tok", int, positive=True),
             "expert_intermediate": expert_inter, "shared_experts": shared,
             "shared_intermediate": shared * expert_inter, "dense_layers": dense}
    if dense:
        table["intermediate"] = c.get("intermediate_size", int, positive=True)
    return table, {"ffn.experts": "n_routed_experts", "ffn.top_k": "num_experts_per_tok",
                   "ffn.expert_intermediate": "moe_intermediate_size",
                   "ffn.dense_layers": "moe_layer_freq", "ffn.intermediate": "intermediate_size",
                   "ffn.shared_experts": "n_shared_experts"}


def _llama4_ffn(c: _Config, layers: int, top_k: int) -> tuple[dict, dict]:
    """Llama 4's FFNs (transformers Llama4TextDecoderLayer): a Llama4TextMoe (num_local_experts
    experts of intermediate_size, a router, and one shared expert, a Llama4TextMLP of
    intermediate_size) on the layers of moe_layers, HF default every interleave_moe_layer_step-th
    (HF default 1) from interleave_moe_layer_step - 1 on; the others a Llama4TextMLP of
    intermediate_size_mlp."""
    experts = c.get("num_local_experts", int, positive=True)
    inter = c.get("intermediate_size", int, positive=True)
    step = c.get("interleave_moe_layer_step", int, default=1, positive=True, nullable=True) or 1
    if layers % step:
        raise c.error("interleave_moe_layer_step", f"{step} does not divide num_hidden_layers = "
                                                   f"{layers}")
    pattern = list(range(step - 1, layers, step))
    given = c.get("moe_layers", list) if c.data.get("moe_layers") is not None else None
    if given is not None and list(given) != pattern:
        raise c.error("moe_layers", f"{_show(given)} is not every interleave_moe_layer_step-th "
                                    f"layer ({step}); lts costs MoE on a regular pattern only")
    table = {"kind": "moe", "gated": True, "experts": experts, "top_k": top_k,
             "expert_intermediate": inter, "shared_experts": 1, "shared_intermediate": inter,
             "moe_every": step}
    keys = {"ffn.expert_intermediate": "intermediate_size", "ffn.moe_every":
            "interleave_moe_layer_step", "ffn.intermediate": "intermediate_size_mlp",
            "ffn.experts": "num_local_experts", "ffn.top_k": "num_experts_per_tok"}
    if step > 1:
        table["intermediate"] = c.get("intermediate_size_mlp", int, positive=True)
    return table, keys


# Nemotron-H (model_type nemotron_h: Nemotron-H, Nemotron Nano 2, Nemotron 3): a sequence of
# single-op blocks, each a residual block of its own with one RMSNorm before its op
# (github.com/huggingface/transformers src/transformers/models/nemotron_h/modeling_nemotron_h.py
# at 008d9e9577b0eb0149aa6bb0c44da582b10e0b6e: NemotronHBlock, MIXER_TYPES): "M" a
# Mamba-2 mixer (NemotronHMamba2Mixer), "*" GQA attention (NemotronHAttention, no biases), "-" a
# non-gated MLP (NemotronHMLP: up_proj, down_proj, mlp_hidden_act relu2), "E" a MoE
# (NemotronHMoE: a sigmoid router [n_routed_experts, hidden] with e_score_correction_bias, not
# counted, n_routed_experts NemotronHMLP-shaped experts of moe_intermediate_size, top
# num_experts_per_tok, and one shared NemotronHMLP of moe_shared_expert_intermediate_size).
# The blocks are given as hybrid_override_pattern (a string of M * - E) or, since transformers
# 5, layers_block_type (a list of mamba, attention, mlp, moe). lts pairs each FFN block with the
# mixer block before it (one lts layer: attn_norm, mixer, all-reduce, ffn_norm, FFN, all-reduce:
# exactly the two blocks' norms, ops and tp collectives), and a mixer block followed by another
# mixer block is an lts layer without an FFN (ffn.no_ffn_layers: its norm, its op, one
# all-reduce). docs/design.md §1.
NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
NEMOTRON_MAMBA = {"heads": "mamba_num_heads", "head_dim": "mamba_head_dim",
                  "state_size": "ssm_state_size", "groups": "n_groups",
                  "conv_kernel": "conv_kernel", "chunk_size": "chunk_size"}


def _nemotron_blocks(c: _Config) -> tuple[list, str]:
    """The block kinds (mamba, attention, mlp, moe) and the key that gave them."""
    if c.data.get("layers_block_type") is not None:
        key = "layers_block_type"
        blocks = c.get(key, list)
        bad = [b for b in blocks if b not in NEMOTRON_BLOCKS.values()]
        if bad or not blocks:
            raise c.error(key, f"{_show(bad[0]) if bad else '[]'} is not a block kind (expected "
                               "a list of 'mamba', 'attention', 'mlp', 'moe')")
    else:
        key = "hybrid_override_pattern"
        pattern = c.get(key, str)
        bad = [ch for ch in pattern if ch not in NEMOTRON_BLOCKS]
        if bad or not pattern:
            raise c.error(key, f"{cut_quoted(bad[0])} is not a block (expected a string of M "
                               "Mamba-2, "
                               "* attention, - MLP, E MoE)" if bad else "is empty")
        blocks = [NEMOTRON_BLOCKS[ch] for ch in pattern]
    if c.data.get("num_hidden_layers") is not None:
        n = c.get("num_hidden_layers", int, positive=True)
        if n != len(blocks):
            raise c.error("num_hidden_layers", f"{n} is not the {len(blocks)} blocks of {key}")
    return blocks, key


def _nemotron_layers(c: _Config, blocks: list, key: str) -> tuple[list, list, str]:
    """(each lts layer's mixer: mamba or full_attention, the lts layers without an FFN, the FFN
    blocks' kind: mlp or moe): an FFN block joins the mixer block before it; a mixer followed by
    a mixer is a layer alone. Refused: an FFN block after an FFN block or first, MLP and MoE
    blocks in one model, a last block that is a mixer (lts needs an FFN on its last layer)."""
    mixers, alone, ffns = [], [], set()
    for i, b in enumerate(blocks):
        if b in ("mamba", "attention"):
            mixers.append("mamba" if b == "mamba" else "full_attention")
            alone.append(len(mixers) - 1)          # until an FFN block joins it
        elif not mixers or not alone or alone[-1] != len(mixers) - 1:
            raise c.error(key, f"block {i} ({b}) follows {'no block' if not i else blocks[i - 1]}"
                               "; lts pairs each MLP or MoE block with the mixer block before it")
        else:
            alone.pop()
            ffns.add(b)
    if len(ffns) > 1:
        raise c.error(key, "has both MLP and MoE blocks; lts costs one FFN kind in a Nemotron-H "
                           "model")
    if not ffns:
        raise c.error(key, "has no MLP or MoE block")
    if alone and alone[-1] == len(mixers) - 1:
        raise c.error(key, f"ends with a {blocks[-1]} block; lts needs an FFN block last (the "
                           "final norm takes an FFN's output)")
    return mixers, alone, ffns.pop()


# DeepSeek-V4 (huggingface.co/deepseek-ai/DeepSeek-V4-Pro, -Flash config.json and
# inference/model.py at 60d8d707; nvidia/*-NVFP4 the same keys; sgl-project's FP8 copies say
# "deepseek_ref": both read by _deepseek_v4, OWN_READERS)
# the layers of this compress ratio run the indexer (deepseek-ai/DeepSeek-V4-Flash
# inference/model.py Attention.__init__: an Indexer when compress_ratio == 4, their Compressor
# overlapping: Compressor.overlap)
DSV4_INDEX_RATIO = 4


def _deepseek_v4(c: _Config, path: Path) -> ModelSpec:
    """DeepSeek-V4 (module docstring of cost.kv, "Compressed attention"; docs/design.md §1):
    compressed attention of num_attention_heads heads over one head_dim entry (num_key_value_heads
    1), q through q_lora_rank, the output through o_groups low-rank projections of o_lora_rank,
    a sliding_window on every layer and each layer's compress_ratios entry (the list's entries
    past num_hidden_layers are the MTP layers'), the indexer (index_topk of index_n_heads x
    index_head_dim) on the ratio-4 layers; hc_mult residual copies; every layer a MoE of
    n_routed_experts of moe_intermediate_size, num_experts_per_tok a token, n_shared_experts
    shared (its first num_hash_layers route by token id through a table, costed as the others'
    router: the GEMM they skip is [hidden, experts] a token); expert_dtype "fp4": MXFP4 experts
    (inference/model.py Linear: float4_e2m1 with a ue8m0 scale per 32) beside the fp8 block
    weights; the MTP layers counted apart, sharing the embedding and head (MTPBlock)."""
    layers = c.get("num_hidden_layers", int, positive=True)
    hidden = c.get("hidden_size", int, positive=True)
    ratios = c.get("compress_ratios", list)
    if len(ratios) < layers:
        raise c.error("compress_ratios", f"has {len(ratios)} entries (expected one a layer: "
                                         f"{layers}, then the MTP layers')")
    attention = {"kind": "compressed", "heads": c.get("num_attention_heads", int, positive=True),
                 "kv_heads": c.get("num_key_value_heads", int, default=1, positive=True),
                 "head_dim": c.get("head_dim", int, positive=True),
                 "q_lora_rank": c.get("q_lora_rank", int, positive=True),
                 "qk_rope_head_dim": c.get("qk_rope_head_dim", int, positive=True),
                 "o_lora_rank": c.get("o_lora_rank", int, positive=True),
                 "o_groups": c.get("o_groups", int, positive=True),
                 "sliding_window": c.get("sliding_window", int, positive=True),
                 "compress_ratios": ratios[:layers], "sinks": True}
    akeys = {f"attention.{k}": hf for k, hf in (
        ("heads", "num_attention_heads"), ("kv_heads", "num_key_value_heads"),
        ("head_dim", "head_dim"), ("q_lora_rank", "q_lora_rank"),
        ("qk_rope_head_dim", "qk_rope_head_dim"), ("o_lora_rank", "o_lora_rank"),
        ("o_groups", "o_groups"), ("sliding_window", "sliding_window"),
        ("compress_ratios", "compress_ratios"), ("index_topk", "index_topk"),
        ("index_heads", "index_n_heads"), ("index_head_dim", "index_head_dim"),
        ("index_ratio", "compress_ratios"))}
    if DSV4_INDEX_RATIO in ratios[:layers]:
        attention.update(index_topk=c.get("index_topk", int, positive=True),
                         index_heads=c.get("index_n_heads", int, positive=True),
                         index_head_dim=c.get("index_head_dim", int, positive=True),
                         index_ratio=DSV4_INDEX_RATIO)
    experts = c.get("n_routed_experts", int, positive=True)
    inter = c.get("moe_intermediate_size", int, positive=True)
    shared = c.get("n_shared_experts", int, default=0, minimum=0, nullable=True) or 0
    ffn = {"kind": "moe", "gated": True, "experts": experts,
           "top_k": c.get("num_experts_per_tok", int, positive=True),
           "expert_intermediate": inter, "shared_experts": shared,
           "shared_intermediate": shared * inter}
    fkeys = {"ffn.experts": "n_routed_experts", "ffn.top_k": "num_experts_per_tok",
             "ffn.expert_intermediate": "moe_intermediate_size",
             "ffn.shared_experts": "n_shared_experts", "ffn.shared_intermediate":
             "n_shared_experts"}
    if "torch_dtype" not in c.data and "dtype" not in c.data:
        # sgl-project's FP8 copies name no dtype: DeepSeek-V4's unquantized tensors are bf16
        # (the base configs' "torch_dtype": "bfloat16")
        c = _Config({**c.data, "torch_dtype": "bfloat16"}, c.path, c.prefix)
    precision, pkeys = _precision(c, layers, ffn)
    # DeepSeek's router is never quantized (as DeepSeek-V3's: the DEEPSEEK families in
    # ``_precision``)
    kept = list(precision.get("unquantized", []))
    if precision["weights"] != precision["activations"] and "router" not in kept:
        precision["unquantized"] = [g for g in WEIGHT_GROUPS if g in kept or g == "router"]
    qc = c.data.get("quantization_config")
    if "nvfp4" in (precision["weights"], *precision.get("formats", {}).values()) and \
            isinstance(qc, dict) and qc.get("quant_method") == "fp8":
        # nvidia/DeepSeek-V4-*-NVFP4: ModelOpt converts the experts only ("producer":
        # "dsv4-nvfp4-experts"); the modules its exclude list keeps out (attention, shared
        # experts) stay as the source checkpoint has them, fp8 in 128 x 128 blocks
        # (deepseek-ai/DeepSeek-V4-Pro inference/model.py Linear: "the rest FP8")
        formats = precision.setdefault("formats", {})
        for g in ("attention", "shared_experts"):
            if g in precision.get("unquantized", []):
                precision["unquantized"] = [x for x in precision["unquantized"] if x != g]
                formats[g] = "fp8_block"
    expert_dtype = c.get("expert_dtype", str, default="", nullable=True) or ""
    if expert_dtype:
        if expert_dtype != "fp4":
            raise c.error("expert_dtype", f"{cut_quoted(expert_dtype)} is not supported "
                                          "(expected \"fp4\": "
                                          "MXFP4 experts)")
        if precision.get("weights") == "fp8_block" and "experts" not in \
                precision.get("unquantized", ()):
            precision.setdefault("formats", {})["experts"] = "mxfp4"
            pkeys["precision.formats"] = "expert_dtype"
    mtp = c.get("num_nextn_predict_layers", int, default=0, minimum=0, nullable=True) or 0
    hash_layers = c.get("num_hash_layers", int, default=0, minimum=0, nullable=True) or 0
    counts = {r: ratios[:layers].count(r) for r in sorted(set(ratios[:layers]))}
    c.note += ("; compressed attention: " + ", ".join(
        f"{n} {'window-only' if not r else 'CSA' if r == DSV4_INDEX_RATIO else 'HCA'} "
        f"(ratio {r})" for r, n in counts.items())
        + (f"; the first {hash_layers} layers route by token id (costed with a router)"
           if hash_layers else "")
        + (f"; {mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} "
           "(num_nextn_predict_layers) counted apart (params_mtp), not run" if mtp else ""))
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": c.get("vocab_size", int, positive=True),
            "tie_embeddings": c.get("tie_word_embeddings", bool, default=False, nullable=True),
            "hc_mult": c.get("hc_mult", int, default=1, positive=True, nullable=True) or 1,
            "attention": attention, "ffn": ffn, "precision": precision, "mtp_layers": mtp,
            "mtp_shared_embeddings": True}
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "vocab": "vocab_size",
            "hc_mult": "hc_mult", **akeys, **fkeys, **pkeys}
    return _checked(data, path, keys)


def _kimi_linear(c: _Config, path: Path) -> ModelSpec:
    """Kimi-K3's text model (model_type kimi_linear; sgl-project/sglang
    python/sglang/srt/models/kimi_k3.py at 0000e9b4, configs/kimi_linear.py at 008b79d2):
    num_hidden_layers layers, linear_attn_config's kda_layers (1-based: KimiLinearConfig.
    is_kda_layer tests layer_idx + 1) Kimi Delta Attention of num_heads heads of head_dim (q, k,
    v and, with use_full_rank_gate, a full-rank output gate; the decay per key channel through
    f_a [hidden, head_dim] and f_b; short_conv_kernel_size taps), the others MLA (q_lora_rank,
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; mla_use_output_gate: g_proj
    [hidden, heads v_head_dim]; mla_use_nope: no rotary, the rope dims still cached); attention
    residuals over blocks of attn_res_block_size layers in place of the norms; the first
    first_k_dense_replace layers a dense MLP of intermediate_size, the others a latent MoE
    (num_experts of moe_intermediate_size in routed_expert_hidden_size, down and up projections
    [hidden <-> latent] once a token, num_experts_per_token a token) with num_shared_experts of
    moe_intermediate_size; SiTU's gate and up, as a gated FFN."""
    layers = c.get("num_hidden_layers", int, positive=True)
    hidden = c.get("hidden_size", int, positive=True)
    lin = c.get("linear_attn_config", dict)
    lc = _Config(lin, c.path, f"{c.prefix}linear_attn_config.")
    kda = lc.get("kda_layers", list)
    if any(not isinstance(i, int) or isinstance(i, bool) or not 1 <= i <= layers for i in kda):
        raise lc.error("kda_layers", f"{_show(kda)} is not a list of 1-based layer numbers "
                                     f"(1 to {layers})")
    kinds = ["linear_attention" if i + 1 in set(kda) else "full_attention"
             for i in range(layers)]
    heads, hd = lc.get("num_heads", int, positive=True), lc.get("head_dim", int, positive=True)
    linear = {"kind": "kda", "key_heads": heads, "value_heads": heads, "key_head_dim": hd,
              "value_head_dim": c.get("v_head_dim", int, positive=True),
              "conv_kernel": lc.get("short_conv_kernel_size", int, positive=True),
              # f_a_proj [hidden -> head_dim] (KimiK3DeltaAttention), g_a likewise when the
              # output gate is low rank
              "decay_rank": hd,
              "gate_rank": 0 if lc.get("use_full_rank_gate", bool, default=True) else hd}
    nope, rope = c.get("qk_nope_head_dim", int, positive=True), \
        c.get("qk_rope_head_dim", int, positive=True)
    mla_heads = c.get("num_attention_heads", int, positive=True)
    attention = {"kind": "mla", "heads": mla_heads, "kv_heads": mla_heads,
                 "head_dim": nope + rope, "q_lora_rank": c.get("q_lora_rank", int, positive=True),
                 "kv_lora_rank": c.get("kv_lora_rank", int, positive=True),
                 "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
                 "v_head_dim": c.get("v_head_dim", int, positive=True),
                 "output_gate": c.get("mla_use_output_gate", bool, default=False),
                 "layer_types": kinds}
    inter = c.get("moe_intermediate_size", int, positive=True)
    shared = c.get("num_shared_experts", int, default=0, minimum=0, nullable=True) or 0
    dense = c.get("first_k_dense_replace", int, default=0, minimum=0)
    if c.get("moe_layer_freq", int, default=1, positive=True) != 1:
        raise c.error("moe_layer_freq", f"{cut_quoted(c.data['moe_layer_freq'])} interleaves "
                                        "dense and "
                                        "MoE layers, which lts cannot represent (expected 1)")
    ffn = {"kind": "moe", "gated": True, "experts": c.get("num_experts", int, positive=True),
           "top_k": c.get("num_experts_per_token", int, positive=True),
           "expert_intermediate": inter, "shared_experts": shared,
           "shared_intermediate": shared * inter, "dense_layers": dense,
           "latent": c.get("routed_expert_hidden_size", int, default=0, minimum=0,
                           nullable=True) or 0}
    if dense:
        ffn["intermediate"] = c.get("intermediate_size", int, positive=True)
    precision, pkeys = _precision(c, layers, ffn)
    # the router and the latent projections stay bf16 (SGLang kimi_k3.py KimiK3MoE: gate and
    # routed_expert_down/up_proj built with quant_config=None: "the checkpoint quantizes only
    # the MoE experts"); the latent projections count in the shared experts' group
    if precision["weights"] != precision["activations"]:
        kept = set(precision.get("unquantized", [])) | {"router", "shared_experts"}
        precision["unquantized"] = [g for g in WEIGHT_GROUPS if g in kept]
    res = c.get("attn_res_block_size", int, default=0, minimum=0, nullable=True) or 0
    c.note += (f"; {len(kda)} Kimi Delta Attention and {layers - len(kda)} MLA layers"
               + (f"; attention residuals over blocks of {res} layers" if res else ""))
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": c.get("vocab_size", int, positive=True),
            "tie_embeddings": c.get("tie_word_embeddings", bool, default=False, nullable=True),
            "attn_res_block": res, "attention": attention, "linear_attention": linear,
            "ffn": ffn, "precision": precision,
            "mtp_layers": c.get("num_nextn_predict_layers", int, default=0, minimum=0,
                                nullable=True) or 0}
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "vocab": "vocab_size",
            "attn_res_block": "attn_res_block_size", "attention.layer_types": "linear_attn_config",
            "attention.heads": "num_attention_heads", "attention.kv_heads": "num_attention_heads",
            "linear_attention.key_heads": "linear_attn_config",
            "linear_attention.value_heads": "linear_attn_config",
            "ffn.experts": "num_experts", "ffn.top_k": "num_experts_per_token",
            "ffn.expert_intermediate": "moe_intermediate_size",
            "ffn.shared_intermediate": "num_shared_experts",
            "ffn.dense_layers": "first_k_dense_replace", "ffn.intermediate": "intermediate_size",
            "ffn.latent": "routed_expert_hidden_size", **pkeys}
    return _checked(data, path, keys)


# MiniMax-M3 (huggingface.co/MiniMaxAI/MiniMax-M3 config.json as ai-dynamo/aiconfigurator at
# 095f58a5 bundles it, aic-core/src/aiconfigurator_core/model_configs/; nvidia/MiniMax-M3-NVFP4's
# text_config the same keys; sgl-project/sglang commit 01b5f572 python/sglang/srt/models/
# minimax_m3.py MiniMaxM3Attention, MiniMaxM3MoE read them)
M3_SPARSE = "sparse_attention_config"


def _minimax_m3(c: _Config, path: Path) -> ModelSpec:
    """MiniMax-M3 (cost.kv module docstring, "Block-sparse attention"; docs/design.md §1): GQA of
    num_attention_heads over num_key_value_heads of head_dim on every layer, block-sparse on the
    layers sparse_attention_config.sparse_attention_freq marks 1 (when use_sparse_attention):
    blocks of sparse_block_size, sparse_topk_blocks of them a KV head, picked by an indexer of
    sparse_num_index_heads heads of sparse_index_dim. Refused: an index value on a sparse layer
    (sparse_disable_index_value 0: index_v / index_o weights lts does not cost), forced initial
    blocks (sparse_init_block), a forced local window other than the current block
    (sparse_local_block), an output gate. The FFN: dense SwiGLU of dense_intermediate_size on
    the leading layers moe_layer_freq marks 0 (else first_k_dense_replace of them), then
    num_local_experts of intermediate_size (moe_intermediate_size where given, the same), top
    num_experts_per_tok, and n_shared_experts of shared_intermediate_size. Its per-head q/k
    norms and multi-token-prediction modules are not counted, as MiniMax-M2's."""
    layers = c.get("num_hidden_layers", int, positive=True)
    hidden = c.get("hidden_size", int, positive=True)
    if c.get("attention_output_gate", bool, default=False, nullable=True):
        raise c.error("attention_output_gate", "true is not supported (expected false: lts reads "
                                               "MiniMax-M3 without an output gate)")
    attention = {"kind": "gqa", "heads": c.get("num_attention_heads", int, positive=True),
                 "kv_heads": c.get("num_key_value_heads", int, positive=True),
                 "head_dim": c.get("head_dim", int, positive=True)}
    sp = c.get(M3_SPARSE, dict)
    sc = _Config(sp, c.path, f"{c.prefix}{M3_SPARSE}.")
    akeys = {"attention.heads": "num_attention_heads", "attention.kv_heads": "num_key_value_heads",
             "attention.head_dim": "head_dim",
             **{f"attention.{k}": f"{M3_SPARSE}.{hf}" for k, hf in (
                 ("layer_types", "sparse_attention_freq"),
                 ("sparse_block_size", "sparse_block_size"),
                 ("sparse_topk_blocks", "sparse_topk_blocks"),
                 ("index_heads", "sparse_num_index_heads"), ("index_head_dim", "sparse_index_dim"))}}
    sparse = 0
    if sc.get("use_sparse_attention", bool):
        freq = sc.get("sparse_attention_freq", list)
        if len(freq) != layers or any(f not in (0, 1) or isinstance(f, bool) for f in freq):
            raise sc.error("sparse_attention_freq", f"{_show(freq)} is not {layers} entries of 0 "
                                                    "(full attention) or 1 (block-sparse)")
        no_value = sc.get("sparse_disable_index_value", list)
        valued = [i for i, f in enumerate(freq) if f and (i >= len(no_value) or not no_value[i])]
        if valued:
            raise sc.error("sparse_disable_index_value",
                           f"layer {valued[0]} is block-sparse with an index value (not 1); lts "
                           "costs MiniMax-M3's indexer without one (no index_v / index_o)")
        if sc.get("sparse_init_block", int, minimum=0):
            raise sc.error("sparse_init_block", f"{cut_quoted(sp['sparse_init_block'])} is not "
                                                "supported "
                                                "(expected 0: lts costs the top-k blocks with no "
                                                "forced initial block)")
        if sc.get("sparse_local_block", int, minimum=0) != 1:
            raise sc.error("sparse_local_block", f"{cut_quoted(sp['sparse_local_block'])} is not "
                                                 "supported "
                                                 "(expected 1: the current block, one of the "
                                                 "top-k)")
        attention.update(
            layer_types=["block_sparse_attention" if f else "full_attention" for f in freq],
            sparse_block_size=sc.get("sparse_block_size", int, positive=True),
            sparse_topk_blocks=sc.get("sparse_topk_blocks", int, positive=True),
            index_heads=sc.get("sparse_num_index_heads", int, positive=True),
            index_head_dim=sc.get("sparse_index_dim", int, positive=True))
        sparse = sum(freq)
    ffn, fkeys = _minimax_m3_ffn(c, layers)
    precision, pkeys = _precision(c, layers, ffn)
    mtp = c.get("num_nextn_predict_layers", int, default=0, minimum=0, nullable=True) or 0
    c.note += (f"; block-sparse attention on {sparse} of {layers} layers ({M3_SPARSE})"
               + (f"; {mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} "
                  "(num_nextn_predict_layers) not counted" if mtp else ""))
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": c.get("vocab_size", int, positive=True),
            "tie_embeddings": c.get("tie_word_embeddings", bool, default=False, nullable=True),
            "attention": attention, "ffn": ffn, "precision": precision}
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "vocab": "vocab_size",
            "tie_embeddings": "tie_word_embeddings", **akeys, **fkeys, **pkeys}
    return _checked(data, path, keys)


def _minimax_m3_ffn(c: _Config, layers: int) -> tuple[dict, dict]:
    """MiniMax-M3's FFN table (``_minimax_m3``): the dense layers a leading block."""
    keys = {"ffn.experts": "num_local_experts", "ffn.top_k": "num_experts_per_tok",
            "ffn.expert_intermediate": "intermediate_size",
            "ffn.shared_experts": "n_shared_experts",
            "ffn.shared_intermediate": "shared_intermediate_size",
            "ffn.intermediate": "dense_intermediate_size", "ffn.dense_layers": "moe_layer_freq"}
    inter = c.get("intermediate_size", int, positive=True)
    if c.data.get("moe_intermediate_size") not in (None, inter):
        raise c.error("moe_intermediate_size", f"{_show(c.data['moe_intermediate_size'])} is not "
                                               f"intermediate_size ({inter}): lts reads one "
                                               "expert width")
    if "moe_layer_freq" in c.data:
        freq = c.get("moe_layer_freq", list)
        dense = next((i for i, f in enumerate(freq) if f == 1), len(freq))
        if freq != [0] * dense + [1] * (layers - dense):
            raise c.error("moe_layer_freq", f"{_show(freq)} is not {layers} entries, dense layers "
                                            "(0) then MoE layers (1) (lts costs a leading block "
                                            "of dense layers)")
    else:
        dense = c.get("first_k_dense_replace", int, minimum=0)
        keys["ffn.dense_layers"] = "first_k_dense_replace"
    shared = c.get("n_shared_experts", int, default=0, minimum=0, nullable=True) or 0
    ffn = {"kind": "moe", "gated": True, "experts": c.get("num_local_experts", int, positive=True),
           "top_k": c.get("num_experts_per_tok", int, positive=True),
           "expert_intermediate": inter, "shared_experts": shared,
           "shared_intermediate": shared * c.get("shared_intermediate_size", int, positive=True)
           if shared else 0, "dense_layers": dense}
    if dense:
        ffn["intermediate"] = c.get("dense_intermediate_size", int, positive=True)
    return ffn, keys


def _checked(data: dict, path: Path, keys: dict) -> ModelSpec:
    """``model_from_dict`` of the table a config maps onto, its errors naming the config's keys
    (``keys``: lts key -> config.json key)."""
    try:
        return model_from_dict(data, path)
    except SpecError as e:
        raise _relabel(e, path, keys) from None


def _nemotron_h(c: _Config, path: Path) -> ModelSpec:
    """A nemotron_h config.json (the comment above NEMOTRON_BLOCKS) -> ModelSpec."""
    blocks, bkey = _nemotron_blocks(c)
    mixers, alone, fkind = _nemotron_layers(c, blocks, bkey)
    layers = len(mixers)
    hidden = c.get("hidden_size", int, positive=True)
    vocab = c.get("vocab_size", int, positive=True)
    tie = c.get("tie_word_embeddings", bool, default=False, nullable=True)
    for k in ("attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias"):
        if c.get(k, bool, default=False, nullable=True):
            raise c.error(k, "true is not supported (lts costs Nemotron-H without biases on its "
                             "projections)")
    # HF default: use_conv_bias true (NemotronHConfig); the conv1d's bias is counted
    if not c.get("use_conv_bias", bool, default=True, nullable=True):
        raise c.error("use_conv_bias", "false is not supported (lts counts the conv1d's bias)")
    act = c.get("mlp_hidden_act", str)
    if act != "relu2":
        raise c.error("mlp_hidden_act", f"{cut_quoted(act)} is not supported (expected 'relu2': a "
                                        "non-gated MLP of two matrices)")
    heads = c.get("num_attention_heads", int, positive=True)
    # HF default: NemotronHAttention's head_dim = getattr(config, "head_dim", hidden / heads);
    # Nemotron-H-56B's config names it attention_head_dim
    hd_key = "head_dim" if c.data.get("head_dim") is not None else "attention_head_dim"
    head_dim = c.get(hd_key, int, positive=True) if c.data.get(hd_key) is not None \
        else hidden // heads
    attention = {"kind": "gqa", "heads": heads,
                 "kv_heads": c.get("num_key_value_heads", int, positive=True),
                 "head_dim": head_dim, "layer_types": mixers}
    if c.data.get("sliding_window") is not None:
        raise c.error("sliding_window", f"{_show(c.data['sliding_window'])} is not supported "
                                        "(expected null)")
    mamba = {k: c.get(hf, int, positive=True) for k, hf in NEMOTRON_MAMBA.items()}
    if fkind == "mlp":
        ffn = {"kind": "dense", "gated": False,
               "intermediate": c.get("intermediate_size", int, positive=True)}
    else:
        # HF default: moe_latent_size null -> experts at hidden width (NemotronHMoE's
        # fc1/fc2_latent_proj are nn.Identity); else a latent MoE (FFNSpec.latent)
        latent = c.get("moe_latent_size", int, default=0, positive=True, nullable=True) or 0
        shared = c.get("n_shared_experts", int, default=0, minimum=0, nullable=True) or 0
        if shared > 1:
            raise c.error("n_shared_experts", f"{shared} is not supported (NemotronHMoE has one "
                                              "shared expert)")
        ffn = {"kind": "moe", "gated": False,
               "experts": c.get("n_routed_experts", int, positive=True),
               "top_k": c.get("num_experts_per_tok", int, positive=True),
               "expert_intermediate": c.get("moe_intermediate_size", int, positive=True),
               "shared_experts": shared,
               "shared_intermediate": c.get("moe_shared_expert_intermediate_size", int,
                                            positive=True) if shared else 0}
        if latent:
            ffn["latent"] = latent
    if alone:
        ffn["no_ffn_layers"] = alone
    # exclude lists name block indices: checked against the blocks of each group's kind (a
    # group left unquantized in some of its blocks only is refused, as for every family; the
    # Mamba-2 mixers are a group of their own, "ssm")
    # (each group's blocks: _group_layers)
    precision, pkeys = _precision(c, len(blocks), {"kind": ffn["kind"], "blocks": blocks})
    mtp = c.get("num_nextn_predict_layers", int, default=0, minimum=0, nullable=True) or 0
    c.note += (f"; {len(blocks)} single-op blocks ({bkey}) as {layers} lts layers, "
               f"{len(alone)} without an FFN")
    if mtp:
        c.note += (f"; {mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} "
                   "(num_nextn_predict_layers) counted apart (params_mtp), not run")
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": vocab, "tie_embeddings": tie,
            "attention": attention, "mamba": mamba, "ffn": ffn, "precision": precision,
            "mtp_layers": mtp}
    keys = {"layers": bkey, "hidden": "hidden_size", "vocab": "vocab_size",
            "attention.heads": "num_attention_heads", "attention.kv_heads": "num_key_value_heads",
            "attention.head_dim": hd_key, "attention.layer_types": bkey, "ffn.no_ffn_layers": bkey,
            "ffn.experts": "n_routed_experts", "ffn.top_k": "num_experts_per_tok",
            "ffn.expert_intermediate": "moe_intermediate_size",
            "ffn.shared_intermediate": "moe_shared_expert_intermediate_size",
            "ffn.intermediate": "intermediate_size", "ffn.latent": "moe_latent_size",
            **{f"mamba.{k}": hf for k, hf in NEMOTRON_MAMBA.items()}, **pkeys}
    return _checked(data, path, keys)


def _nemotron_nas(c: _Config, path: Path) -> ModelSpec:
    """Llama-Nemotron NAS models (model_type nemotron-nas, DeciLMForCausalLM: nvidia
    Llama-3_3-Nemotron-Super-49B-v1, Llama-3_1-Nemotron-Ultra-253B-v1): Llama layers whose
    ``block_configs`` entry sets each layer's own attention and FFN (vLLM
    vllm/model_executor/models/nemotron_nas.py DeciLMDecoderLayer; huggingface.co/nvidia/
    Llama-3_3-Nemotron-Super-49B-v1 modeling_decilm.py): ``attention.no_op`` a layer without
    attention (nor its input_layernorm: ``no_attention``), else GQA of num_attention_heads
    with num_attention_heads / n_heads_in_group KV heads; ``ffn.no_op`` a layer without an FFN,
    else a gated MLP of _ffn_mult_to_intermediate_size(ffn_mult, hidden) = round_up(int(2
    ffn_mult hidden / 3), 256) (``ffn.intermediate_by_layer``). Refused with the key named:
    attention replaced by a linear layer (replace_with_linear), sliding windows or sinks, KV
    groupings that differ between layers, a layer with neither attention nor FFN."""
    blocks = c.get("block_configs", list)
    layers = c.get("num_hidden_layers", int, positive=True)
    hidden = c.get("hidden_size", int, positive=True)
    heads = c.get("num_attention_heads", int, positive=True)
    if len(blocks) != layers:
        raise c.error("block_configs", f"has {len(blocks)} entries (expected one a layer: "
                                       f"{layers})")
    kinds, widths, no_ffn, groups = [], [], [], set()
    for i, b in enumerate(blocks):
        key = f"block_configs.{i}"
        if not isinstance(b, dict) or not isinstance(b.get("attention"), dict) \
                or not isinstance(b.get("ffn"), dict):
            raise c.error(key, f"{_show(b)} is not an object with attention and ffn objects")
        att, ffn = b["attention"], b["ffn"]
        for k, what in (("replace_with_linear", "attention replaced by a linear layer"),
                        ("window_length", "a sliding window"), ("sparsify", "sparsity"),
                        ("num_sink_tokens", "sink tokens")):
            if att.get(k):
                raise c.error(f"{key}.attention.{k}", f"{_show(att[k])} is not supported "
                                                      f"({what} is not costed by lts)")
        if ffn.get("replace_with_linear") or ffn.get("sparsify"):
            raise c.error(f"{key}.ffn", f"{_show(ffn)} is not supported (an FFN replaced by a "
                                        "linear layer or sparsified is not costed by lts)")
        if att.get("no_op"):
            kinds.append("no_attention")
        else:
            kinds.append("full_attention")
            g = att.get("n_heads_in_group")
            if not isinstance(g, int) or isinstance(g, bool) or g <= 0 or heads % g:
                raise c.error(f"{key}.attention.n_heads_in_group",
                              f"{_show(g)} is not a positive integer dividing "
                              f"num_attention_heads = {heads}")
            groups.add(g)
        if ffn.get("no_op"):
            if att.get("no_op"):
                raise c.error(key, "has neither attention nor an FFN (an empty layer is not "
                                   "costed by lts)")
            no_ffn.append(i)
            continue
        mult = ffn.get("ffn_mult")
        if not isinstance(mult, (int, float)) or isinstance(mult, bool) or mult <= 0:
            raise c.error(f"{key}.ffn.ffn_mult", f"{_show(mult)} is not a positive number")
        widths.append(-(-int(2 * mult * hidden / 3) // 256) * 256)
    if len(groups) > 1:
        raise c.error("block_configs", f"{len(groups)} KV-head groupings (n_heads_in_group "
                                       f"{sorted(groups)}): lts costs one attention shape a "
                                       "model")
    head_dim = c.get("head_dim", int, positive=True, nullable=True, default=0) \
        or hidden // heads
    attention = {"kind": "gqa", "heads": heads, "kv_heads": heads // groups.pop(),
                 "head_dim": head_dim, "layer_types": kinds}
    ffn = {"kind": "dense", "gated": True}
    if no_ffn:
        ffn["no_ffn_layers"] = no_ffn
    if len(set(widths)) > 1 and not no_ffn:
        ffn["intermediate_by_layer"] = widths
    elif len(set(widths)) == 1:
        ffn["intermediate"] = widths[0]
    else:
        raise c.error("block_configs", "has FFNs of several widths beside layers without an FFN "
                                       "(lts costs one of the two patterns a model)")
    precision, pkeys = _precision(c, layers, ffn)
    c.note += (f"; {kinds.count('no_attention')} of {layers} layers without attention, "
               f"{len(set(widths))} FFN widths (block_configs)")
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": c.get("vocab_size", int, positive=True),
            "tie_embeddings": c.get("tie_word_embeddings", bool, default=False, nullable=True),
            "attention": attention, "ffn": ffn, "precision": precision}
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "vocab": "vocab_size",
            "attention.heads": "num_attention_heads", "attention.kv_heads": "block_configs",
            "attention.layer_types": "block_configs", "ffn.intermediate_by_layer":
            "block_configs", "ffn.intermediate": "block_configs", "ffn.no_ffn_layers":
            "block_configs", **pkeys}
    return _checked(data, path, keys)


def _family_view(c: _Config) -> tuple[_Config, str]:
    """(the config to read, the family whose shape rules apply): a multimodal config's
    text_config (its vision tower counted in the source line, not costed), and the ALIASES.
    MiniMax-M2 is read only with full attention on every layer (``attn_type_list`` all 1;
    MiniMax-01's 0 is lightning attention, a linear layer lts lacks) and no shared expert."""
    family = c.get("model_type", str)
    if family in MULTIMODAL:
        text = c.get("text_config", dict)
        top = c.data
        # the checkpoint's quantization and dtype may sit at the top level only (Kimi-K2.5), and
        # so may tie_word_embeddings (Qwen3-VL-8B: top level only; transformers 4.57
        # Qwen3VLConfig takes it at the top level)
        inherited = {k: top[k] for k in ("quantization_config", "torch_dtype", "dtype",
                                         "tie_word_embeddings")
                     if k in top and k not in text}
        if family in UNNAMED_TEXT and "model_type" not in text:
            inherited["model_type"] = UNNAMED_TEXT[family]
        view = _Config({**text, **inherited}, c.path, "text_config.")
        view.note = _vision_note(c)
        sub = view.get("model_type", str)
        if sub not in MULTIMODAL[family]:
            raise view.error("model_type", f"{cut_quoted(sub)} is not the text model of a "
                                           f"{family} config "
                                           f"(expected {', '.join(MULTIMODAL[family])})")
        c, family = view, sub
    if family == "minimax_m2":
        kinds = c.get("attn_type_list", list, default=[], nullable=True)
        if any(k != 1 for k in kinds):
            raise c.error("attn_type_list", f"has {sum(k != 1 for k in kinds)} layers of type "
                          "other than 1 (full attention); lts reads MiniMax-M2 with full "
                          "attention on every layer (lightning attention is not a layer kind "
                          "lts has)")
        # HF default (MiniMaxM2Config): shared_intermediate_size 0, sliding_window None
        if c.get("shared_intermediate_size", int, default=0, minimum=0, nullable=True):
            raise c.error("shared_intermediate_size", f"{cut_quoted(c.data['shared_intermediate_size'])} "
                          "is not supported (expected 0: MiniMax-M2 has no shared expert)")
        if c.data.get("sliding_window") is not None:
            raise c.error("sliding_window", f"{_show(c.data['sliding_window'])} is not supported "
                          "(expected null: MiniMax-M2 attends to the whole context)")
        if "torch_dtype" not in c.data and "dtype" not in c.data:
            # MiniMax-M2.5's fp8 config.json names no dtype; its unquantized tensors are bf16:
            # the ModelOpt NVFP4 export of the same weights says "dtype": "bfloat16"
            # (../shared/data/hf/minimax-m2.5-nvfp4/config.json)
            c = _Config({**c.data, "torch_dtype": "bfloat16"}, c.path, c.prefix)
    return c, ALIASES.get(family, family)


def vision_params(v: dict):
    """Parameters of a MoonViT vision tower and its patch-merger projector from ``vision_config``
    (Kimi-K2.5), or None when it does not give the shape. Per block (the checkpoint's tensors,
    huggingface.co/moonshotai/Kimi-K2.5 safetensors: wqkv [3h, h], wo [h, h], fc0 [I, h],
    fc1 [h, I], all with biases, and two LayerNorms): 4h^2 + 2hI + 9h + I; plus the patch
    embedding (h x 3 x p x p + h), the position table (height x width x h), the final LayerNorm,
    and the projector (a LayerNorm of h, [hm, hm] and [text, hm] with biases, m the merge
    kernel's area)."""
    if v.get("model_type") == "llama4_vision_model":
        return llama4_vision_params(v)
    if v.get("model_type") == "gemma4_vision":
        return gemma4_vision_params(v)
    if v.get("model_type") in ("qwen3_vl", "qwen3_vl_moe"):
        return qwen3_vl_vision_params(v)
    keys = ("vt_hidden_size", "vt_intermediate_size", "vt_num_hidden_layers", "patch_size",
            "merge_kernel_size", "text_hidden_size", "init_pos_emb_height", "init_pos_emb_width")
    if not all(isinstance(v.get(k), (int, list)) for k in keys):
        return None
    h, i, n, p = (v[k] for k in keys[:4])
    m = math.prod(v["merge_kernel_size"])
    t = v["text_hidden_size"]
    if isinstance(v.get("qkv_hidden_size"), int):
        # Kimi-K3's MoonViT3d (sgl-project/sglang models/kimi_k3_vl.py at 0c829834): wqkv
        # [3 q, h], wo [h, q], fc0 [I, h], fc1 [h, I], no biases, two RMSNorms a block; the
        # patch embedding without bias, the position table, the projector [h m, h m] and
        # [text, h m] (patchmergerv2) with its post RMSNorm of text
        q = v["qkv_hidden_size"]
        block = 4 * q * h + 2 * h * i + 2 * h
        embed = h * 3 * p * p + v["init_pos_emb_height"] * v["init_pos_emb_width"] * h
        return n * block + embed + h + (h * m) ** 2 + t * h * m + t
    block = 4 * h * h + 2 * h * i + 9 * h + i
    embed = h * 3 * p * p + h + v["init_pos_emb_height"] * v["init_pos_emb_width"] * h
    projector = 2 * h + (h * m) ** 2 + h * m + t * h * m + t
    return n * block + embed + 2 * h + projector


def gemma4_vision_params(v: dict, text_hidden: int | None = None):
    """Parameters of Gemma 4's vision tower (transformers modeling_gemma4.py, commit 0246b4f3:
    Gemma4VisionPatchEmbedder input_proj [3 p^2 -> h] and position_embedding_table [2,
    position_embedding_size, h]; per Gemma4VisionEncoderLayer q/k/v/o of num_attention_heads /
    num_key_value_heads x head_dim, q_norm and k_norm of head_dim, a gated MLP [h, I] x 3, four
    RMSNorms of h; std_bias and std_scale of h when standardize), plus its projection to the
    text model's hidden size where given ([h -> text_hidden]; its norm not counted), or None
    when ``vision_config`` does not give the shape."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "patch_size", "position_embedding_size")
    if not all(isinstance(v.get(k), int) for k in keys):
        return None
    h, i, n, heads, p, pos = (v[k] for k in keys)
    kv = v.get("num_key_value_heads") if isinstance(v.get("num_key_value_heads"), int) else heads
    hd = v.get("head_dim") if isinstance(v.get("head_dim"), int) else h // heads
    block = 2 * h * heads * hd + 2 * h * kv * hd + 3 * h * i + 2 * hd + 4 * h
    embed = 3 * p * p * h + 2 * pos * h
    return n * block + embed + 2 * h * bool(v.get("standardize")) + h * (text_hidden or 0)


def llama4_vision_params(v: dict, text_hidden: int | None = None):
    """Parameters of Llama 4's vision tower (transformers Llama4VisionModel) and its projector,
    or None when ``vision_config`` does not give the shape. Per block (Llama4VisionEncoderLayer:
    q/k/v/o [h, h] with biases, fc1 [I, h] and fc2 [h, I] with biases, two LayerNorms):
    4h^2 + 2hI + 9h + I; plus the class embedding (h), the position table ((image/patch)^2 + 1
    rows of h), the patch embedding (3 p^2 h, no bias), the pre and post LayerNorms (4h), the
    vision adapter after the pixel shuffle (fc1 [projector_input_dim, h / ratio^2], fc2
    [projector_output_dim, projector_input_dim], no biases) and the multi-modal projector
    [text hidden, vision_output_dim] (no bias). Scout's 109,676,279,296 parameters list these
    tensors (the per-tensor table of huggingface.co/meta-llama/Llama-4-Scout-17B-16E)."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "patch_size", "image_size",
            "pixel_shuffle_ratio", "projector_input_dim", "projector_output_dim",
            "vision_output_dim")
    if not all(isinstance(v.get(k), (int, float)) for k in keys):
        return None
    h, i, n, p, image = (int(v[k]) for k in keys[:5])
    shuffled = round(h / v["pixel_shuffle_ratio"] ** 2)
    block = 4 * h * h + 2 * h * i + 9 * h + i
    embed = h + ((image // p) ** 2 + 1) * h + 3 * p * p * h + 4 * h
    adapter = v["projector_input_dim"] * shuffled \
        + v["projector_output_dim"] * v["projector_input_dim"]
    projector = (text_hidden or 0) * v["vision_output_dim"]
    return n * block + embed + adapter + projector


def qwen3_vl_vision_params(v: dict):
    """Parameters of Qwen3-VL's vision tower (transformers 4.57
    src/transformers/models/qwen3_vl/modeling_qwen3_vl.py Qwen3VLVisionModel; the MoE models'
    Qwen3VLMoeVisionModel is the same), or None when ``vision_config`` does not give the shape.
    Patch embedding (Qwen3VLVisionPatchEmbed: Conv3d of in_channels x temporal_patch_size x
    patch_size^2 -> h, with bias), position table (nn.Embedding num_position_embeddings x h),
    ``depth`` blocks (Qwen3VLVisionBlock: qkv [3h, h] and proj [h, h] with biases, linear_fc1
    [I, h] and linear_fc2 [h, I] with biases, two LayerNorms: 4h^2 + 2hI + 9h + I), the merger
    (Qwen3VLVisionPatchMerger: a LayerNorm of h, linear_fc1 [hm, hm] and linear_fc2 [out, hm]
    with biases, m = spatial_merge_size^2, out = out_hidden_size) and one deepstack merger per
    ``deepstack_visual_indexes`` entry (the same with its LayerNorm of hm, use_postshuffle_norm).
    The rotary embedding holds no parameters."""
    keys = ("hidden_size", "intermediate_size", "depth", "patch_size", "temporal_patch_size",
            "in_channels", "num_position_embeddings", "spatial_merge_size", "out_hidden_size")
    if not all(isinstance(v.get(k), int) for k in keys) or \
            not isinstance(v.get("deepstack_visual_indexes", []), list):
        return None
    h, i, n, p, t, ch, pos, merge, out = (v[k] for k in keys)
    hm = h * merge * merge
    block = 4 * h * h + 2 * h * i + 9 * h + i
    embed = ch * t * p * p * h + h + pos * h
    merger = hm * hm + hm + out * hm + out
    deepstack = len(v.get("deepstack_visual_indexes", []))
    return embed + n * block + (2 * h + merger) + deepstack * (2 * hm + merger)


def minimax_m3_vision_params(top: dict):
    """Parameters of MiniMax-M3 VL's vision tower and projectors from its config.json's top
    level, or None when it does not give the shape. Read from the MiniMax-M3 VL modeling ports
    (MiniMaxM3VLVisionModel, MiniMaxM3VLMultiModalProjector / MiniMaxM3VLPatchMerger; NVIDIA's
    is TensorRT-LLM tensorrt_llm/_torch/models/modeling_minimaxm3_vl.py) and the checkpoint's
    tensors (vision_tower.vision_model.embeddings.patch_embedding, encoder.layers.*,
    multi_modal_projector.linear_1/2, patch_merge_mlp.linear_1/2): a Conv3d patch embedding of
    3 x temporal_patch_size x patch_size^2 -> h without bias, a pre-LayerNorm (2h), the CLIP
    encoder layers (q, k, v, out_proj [h, h] with biases, fc1 [I, h] and fc2 [h, I] with
    biases, two LayerNorms: 4h^2 + 2hI + 9h + I; its 3D RoPE holds no parameters), the
    projector [h -> p] and [p -> text] with biases, the patch merger [text m^2 -> p] and
    [p -> text] with biases (p projector_hidden_size, m spatial_merge_size)."""
    v, text = top.get("vision_config"), top.get("text_config")
    comp = v.get("img_token_compression_config") if isinstance(v, dict) else None
    if not isinstance(comp, dict) or not isinstance(text, dict):
        return None
    sizes = [v.get(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                "patch_size")] + [comp.get("temporal_patch_size"),
                                                  comp.get("spatial_merge_size"),
                                                  top.get("projector_hidden_size"),
                                                  text.get("hidden_size")]
    if not all(isinstance(x, int) for x in sizes):
        return None
    h, i, n, p, t, m, proj, th = sizes
    block = 4 * h * h + 2 * h * i + 9 * h + i
    return 3 * t * p * p * h + 2 * h + n * block + (h * proj + proj + proj * th + th) \
        + (th * m * m * proj + proj + proj * th + th)


def _vision_note(c: _Config) -> str:
    v = c.data.get("vision_config")
    if not isinstance(v, dict):
        return "; text model from text_config"
    n = minimax_m3_vision_params(c.data) if c.data.get("model_type") == "minimax_m3_vl" \
        else vision_params(v)
    if n is not None and v.get("model_type") in ("llama4_vision_model", "gemma4_vision"):
        text = c.data.get("text_config")       # + the projector to the text model
        hidden = text.get("hidden_size") if isinstance(text, dict) else None
        fn = llama4_vision_params if v["model_type"] == "llama4_vision_model" \
            else gemma4_vision_params
        n = fn(v, hidden if isinstance(hidden, int) else None)
    if n is None:
        return ("; text model from text_config; its vision tower (vision_config) is not counted "
                "(no shape given) and not costed")
    return (f"; text model from text_config; its vision tower (vision_config) has {n / 1e9:.2f}B "
            "parameters, outside the totals and not costed")


def _relabel(e: SpecError, path: Path, keys: dict) -> SpecError:
    """model_from_dict's error about an lts key -> the same error about the config.json key."""
    prefix = f"{e.file}: {e.key}: " if e.key else f"{e.file}: "
    message = str(e)[len(prefix):] if str(e).startswith(prefix) else str(e)
    # whole keys only, in one pass: a replacement is never replaced again, and "layers" inside
    # "num_hidden_layers" or "layer_types" stays as it is
    names = sorted(keys, key=len, reverse=True)
    if names:
        pattern = r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?![\w])"
        message = re.sub(pattern, lambda m: keys[m.group(1)], message)
    return SpecError(path, keys.get(e.key, e.key), message)


# the families whose layers the generic reader below cannot map, each read by its own function:
# Nemotron-H (and Nano 2, Nemotron 3), DeepSeek-V4, Kimi-K3's text model, Llama-Nemotron NAS,
# MiniMax-M3
OWN_READERS = {"nemotron_h": _nemotron_h, "deepseek_v4": _deepseek_v4,
               "deepseek_ref": _deepseek_v4, "kimi_linear": _kimi_linear,
               "nemotron-nas": _nemotron_nas, "minimax_m3": _minimax_m3}


def model_from_hf_config(path) -> ModelSpec:
    """Read a HuggingFace ``config.json`` (or a folder holding one) into a validated ModelSpec.

    Raises:
        SpecError: one line naming the file, the config.json key, the value and what was expected.
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SpecError(path, "", "folder holds no config.json")
        path = path / "config.json"
    c = _Config(_read_json(path), path)

    c, family = _family_view(c)
    window = _context_window(c)
    return dataclasses.replace(_family_model(c, family, path), context_window=window)


# vllm 0.33.0 vllm/transformers_utils/model_arch_config_convertor.py
# derive_max_model_len_and_key: the least of these keys the (text) config sets, model_max_length
# where set
WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
# vllm 0.33.0 vllm/config/model.py _get_and_verify_max_len: the rope types whose config already
# counts the scaled length ("YaRN variants leave max_position_embeddings already scaled");
# any other rope type's factor multiplies it (linear, dynamic)
SCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def _context_window(c: _Config) -> int:
    """The context window vLLM serves the model at by default, its max_model_len
    (vllm 0.33.0 vllm/config/model.py _get_and_verify_max_len): the least of ``WINDOW_KEYS``
    (``model_max_length`` where set), times the rope scaling ``factor`` unless the rope type is
    one of ``SCALED_ROPE`` (YaRN's max_position_embeddings is already original x factor:
    DeepSeek-V3's 163,840 = 4,096 x 40); ``rope_parameters`` or ``rope_scaling``, one or one
    per layer type (Gemma 4). 0 where the config sets none of the keys (vLLM then assumes
    2,048; lts refuses nothing)."""
    found = [v for k in WINDOW_KEYS if isinstance(v := c.data.get(k), int)
             and not isinstance(v, bool) and v > 0]
    if not found:
        return 0
    length = c.data["model_max_length"] if isinstance(c.data.get("model_max_length"), int) \
        and not isinstance(c.data.get("model_max_length"), bool) else min(found)
    rope = c.data.get("rope_parameters") or c.data.get("rope_scaling")
    ropes = [] if not isinstance(rope, dict) else \
        [r for r in rope.values() if isinstance(r, dict)] or [rope]
    factor = 1.0
    for r in ropes:
        kind = r.get("rope_type", r.get("type", "default"))
        f = r.get("factor")
        if kind not in SCALED_ROPE and isinstance(f, (int, float)) and not isinstance(f, bool):
            factor = float(f)
    window = int(length * factor)
    if window > MAX_WINDOW:
        key = next(k for k in WINDOW_KEYS if c.data.get(k) == length)
        raise c.error(key, f"{cut_quoted(length)} (times the rope factor {factor:g}) must be <= "
                           f"{MAX_WINDOW:,} tokens")
    return window


def _family_model(c: _Config, family: str, path: Path) -> ModelSpec:
    """The ModelSpec of a config (``_family_view``'s text config and family)."""
    if family in OWN_READERS:
        return OWN_READERS[family](c, path)
    if family not in FAMILIES:
        names = FAMILIES + tuple(ALIASES) + tuple(MULTIMODAL) + tuple(OWN_READERS)
        hint = suggestion(family, names)
        raise c.error("model_type", f"{cut_quoted(family)} is not a supported family ("
                                    f"{hint + ' ' if hint else ''}the {len(names)} lts reads: "
                                    "docs/design.md, HuggingFace config.json)")
    layers = c.get("num_hidden_layers", int, positive=True)
    hidden = c.get("hidden_size", int, positive=True)
    vocab = c.get("vocab_size", int, positive=True)
    # HF default: tie_word_embeddings false in every supported family's config class.
    tie = c.get("tie_word_embeddings", bool, default=False, nullable=True)

    attention, akeys = _attention(c, family, hidden)
    window, wkeys = _sliding(c, family, layers)
    attention.update(window)
    akeys.update(wkeys)
    ffn, fkeys = _ffn(c, family, layers)
    if family == "gpt_oss" and "torch_dtype" not in c.data and "dtype" not in c.data:
        # gpt-oss's config.json names no dtype: its tensors other than the MXFP4 experts are
        # bf16 (model card, huggingface.co/openai/gpt-oss-120b: "MXFP4 quantization ... of the
        # MoE weights"; the checkpoint's safetensors hold BF16 attention, router, embeddings)
        c = _Config({**c.data, "torch_dtype": "bfloat16"}, c.path)
    precision, pkeys = _precision(c, layers, ffn)

    mtp_key = "mtp_num_hidden_layers" if family in HYBRID else "num_nextn_predict_layers"
    mtp = c.get(mtp_key, int, default=0, minimum=0, nullable=True) \
        if family in DEEPSEEK + HYBRID + ("mimo",) else 0
    if family == "step3p7" and c.data.get("num_nextn_predict_layers"):
        # Step-3.7-Flash's MTP layers (45-47) hold a dense MLP, not the model's MoE (its
        # checkpoint's 17 tensors a layer); their shape is not in config.json: not counted
        c.note += (f"; {c.data['num_nextn_predict_layers']} multi-token-prediction layers "
                   "(num_nextn_predict_layers) not counted (their shape is not in config.json)")
    if mtp:
        c.note += (f"; {mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} "
                   f"({mtp_key}) counted apart (params_mtp), not run")
    linear = {}
    if "linear_attention" in (attention.get("layer_types") or ()):
        linear = {k: c.get(hf, int, positive=True) for k, hf in LINEAR_KEYS.items()}
        akeys.update({f"linear_attention.{k}": hf for k, hf in LINEAR_KEYS.items()})
    data = {"name": _display_name(c, path), "source": f"HuggingFace config.json: {path}{c.note}",
            "layers": layers, "hidden": hidden, "vocab": vocab, "tie_embeddings": tie,
            "attention": attention, "ffn": ffn, "precision": precision, "mtp_layers": mtp,
            **({"linear_attention": linear} if linear else {}),
            **({"mtp_shared_embeddings": True} if mtp and family == "mimo" else {})}
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "vocab": "vocab_size",
            "tie_embeddings": "tie_word_embeddings", **akeys, **fkeys, **pkeys}
    return _checked(data, path, keys)
