"""The HuggingFace checkpoints an engine loads for each shipped model, one per weight format.

``CHECKPOINTS`` maps a shipped model's short name (its ``models/<name>.toml`` stem) to the
published checkpoints of that model: first the model's own repository, the one its TOML file's
``source`` names (the config.json lts read its shapes from), stored in the TOML's
``precision.weights`` format; then, where one was found, a published checkpoint of the same
weights (or, said in a comment, of a model with the very same shapes) stored in another format.
``weights`` is an ``lts.specs`` weight-format name (``units.WEIGHT_FORMATS``), mapped from what
the checkpoint stores:

- fp8 blocks of 128 x 128, one fp32 scale each (``"quant_method": "fp8"``,
  ``"weight_block_size": [128, 128]``: DeepSeek's and Qwen's own FP8 releases): ``fp8_block``;
- FP8 with one scale per tensor or per channel (NVIDIA ModelOpt ``quant_algo`` FP8, AutoFP8 /
  llm-compressor per-tensor, compressed-tensors channel-wise): ``fp8``;
- NVIDIA ModelOpt NVFP4 (e2m1 values, an fp8 scale per 16; NVIDIA's "-FP4" and "-NVFP4"
  repositories): ``nvfp4``;
- gpt-oss's MXFP4 experts: ``mxfp4``; Kimi-K2.5's compressed-tensors int4 groups of 32 with a
  bf16 scale and no zero: ``w4a16_g32``; AWQ int4 groups of 128 with zero points: ``w4a16_zp``.

A checkpoint stores the format named for its bulk (the experts of a MoE model); the modules it
keeps in bf16 are the checkpoint's own business (``lts.specs.hf`` reads them from its config).
Every repository below was seen published: ``source`` is the model card, config or document
that showed it (some model cards were read through a mirror of huggingface.co; the URL given is
the repository's own). Synthetic models (``moe1.6t``, ``moe1.2t``) have no checkpoint and no
entry. Several quantized checkpoints are of the Instruct model where lts ships the base model's
shapes (same shapes, other weights): their comments say so.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Checkpoint:
    repo: str        # HuggingFace repository id
    weights: str     # the lts weight format it stores (lts.specs.units.WEIGHT_FORMATS names)
    source: str      # URL of the model card / config / document seen
    # the weights it holds where they are not the shipped model's own (same shapes, other
    # weights: an Instruct release of a base model, a later revision); "" for the model's own
    other: str = ""


HF = "https://huggingface.co/"
# NVIDIA documents that list its ModelOpt checkpoints by repository id
TRTLLM_PERF = ("https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/performance/"
               "perf-overview.md")           # "FP4 Models" / "FP8 Models" lists
SPARK_TRTLLM = ("https://github.com/NVIDIA/dgx-spark-playbooks/blob/main/nvidia/trt-llm/"
                "README.md")                 # "Model Support Matrix": HF handles per format
MODELOPT_COLLECTION = HF + "collections/nvidia/model-optimizer-66aa84f7966b3150262481a4"
QWEN3_VLLM = "https://github.com/QwenLM/Qwen3/blob/main/docs/source/deployment/vllm.md"


def _own(repo: str, weights: str) -> Checkpoint:
    """The model's own repository: the one its TOML ``source`` names."""
    return Checkpoint(repo, weights, f"{HF}{repo}/blob/main/config.json")


CHECKPOINTS: dict[str, tuple[Checkpoint, ...]] = {
    "deepseek-v3": (
        # config.json: "quant_method": "fp8", "weight_block_size": [128, 128]
        _own("deepseek-ai/DeepSeek-V3", "fp8_block"),
        # ModelOpt NVFP4 of DeepSeek-V3-0324, the March 2025 weights of the same architecture
        # (same config shapes); NVIDIA published no NVFP4 of the December release
        Checkpoint("nvidia/DeepSeek-V3-0324-FP4", "nvfp4", HF + "nvidia/DeepSeek-V3-0324-FP4",
                   other="DeepSeek-V3-0324, the March 2025 revision"),
    ),
    "deepseek-v3.2": (
        _own("deepseek-ai/DeepSeek-V3.2", "fp8_block"),
        Checkpoint("nvidia/DeepSeek-V3.2-NVFP4", "nvfp4",
                   HF + "nvidia/DeepSeek-V3.2-NVFP4/discussions/1"),   # tags: ModelOpt, NVFP4
    ),
    "deepseek-v4-pro": (
        # config.json: "quant_method": "fp8", "weight_block_size": [128, 128] with "expert_dtype":
        # "fp4" (the model card: "FP4 + FP8 Mixed: MoE expert weights FP4, the rest FP8")
        _own("deepseek-ai/DeepSeek-V4-Pro", "fp8_block"),
        # ModelOpt NVFP4 of the routed experts (its hf_quant_config.json: MIXED_PRECISION,
        # layers.N.ffn.experts NVFP4; attention and shared experts kept as the source has them)
        Checkpoint("nvidia/DeepSeek-V4-Pro-NVFP4", "nvfp4",
                   HF + "nvidia/DeepSeek-V4-Pro-NVFP4/blob/main/hf_quant_config.json"),
    ),
    "glm-5": (
        _own("zai-org/GLM-5", "bf16"),
        # zai-org's FP8 release (github.com/zai-org/GLM-5 README: "GLM-5-FP8 ... FP8"): 128x128
        # blocks with weight_scale_inv, its modules_to_not_convert as tests/test_quant_lists.py
        # reads them; no NVIDIA NVFP4 of GLM-5 itself was found (only of GLM-5.1 and later)
        Checkpoint("zai-org/GLM-5-FP8", "fp8_block", HF + "zai-org/GLM-5-FP8/tree/main"),
    ),
    "gpt-oss-120b": (
        # "quant_method": "mxfp4" on the experts; released only in this format
        _own("openai/gpt-oss-120b", "mxfp4"),
    ),
    "kimi-k2.5": (
        # compressed-tensors int4 experts, groups of 32, symmetric (no zero), bf16 scales
        _own("moonshotai/Kimi-K2.5", "w4a16_g32"),
        # ModelOpt NVFP4 routed experts; NVIDIA Dynamo's TensorRT-LLM recipe serves it
        Checkpoint("nvidia/Kimi-K2.5-NVFP4", "nvfp4",
                   "https://github.com/ai-dynamo/dynamo/blob/main/recipes/kimi-k2.5/trtllm/agg/"
                   "nvidia/README.md"),
    ),
    "kimi-k3": (
        # compressed-tensors "mxfp4-pack-quantized" routed experts, the rest bf16 (config.json
        # quantization_config and its ignore list)
        _own("moonshotai/Kimi-K3", "mxfp4"),
    ),
    "llama3.1-405b": (
        _own("meta-llama/Llama-3.1-405B", "bf16"),
        # the quantized checkpoints below are of Llama-3.1-405B-Instruct (same shapes). Meta's own
        # FP8 of the base model (meta-llama/Llama-3.1-405B-FP8) is not listed: it quantizes the
        # FFN projections only, row-wise, and keeps attention bf16 (huggingface.co/blog/llama31),
        # which is not lts's fp8 (every linear layer); ModelOpt's FP8 is
        Checkpoint("nvidia/Llama-3.1-405B-Instruct-FP8", "fp8",
                   HF + "nvidia/Llama-3.1-405B-Instruct-FP8/blob/"
                   "539ac9ac949a4dfa7ad8b938c5751c42e6f34a02/README.md",
                   other="Llama-3.1-405B-Instruct"),
        Checkpoint("nvidia/Llama-3.1-405B-Instruct-FP4", "nvfp4", MODELOPT_COLLECTION,
                   other="Llama-3.1-405B-Instruct"),
        # Hugging Face's AutoAWQ export: int4, zero points, groups of 128 (blog, "Llama 3.1 405B
        # quantization with FP8, AWQ, and GPTQ")
        Checkpoint("hugging-quants/Meta-Llama-3.1-405B-Instruct-AWQ-INT4", "w4a16_zp",
                   HF + "blog/llama31",
                   other="Llama-3.1-405B-Instruct"),
    ),
    "llama3.1-70b": (
        _own("meta-llama/Llama-3.1-70B", "bf16"),
        Checkpoint("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8",     # the Instruct model
                   HF + "nvidia/Llama-3.1-70B-Instruct-FP8",
                   other="Llama-3.1-70B-Instruct"),
        # Llama-3.3-70B-Instruct: Llama 3.1 70B's architecture and shapes, other weights; NVIDIA
        # published no NVFP4 of Llama 3.1 70B
        Checkpoint("nvidia/Llama-3.3-70B-Instruct-FP4", "nvfp4", SPARK_TRTLLM,
                   other="Llama-3.3-70B-Instruct, another model of the same shapes"),
    ),
    "llama3.1-8b": (
        _own("meta-llama/Llama-3.1-8B", "bf16"),
        Checkpoint("nvidia/Llama-3.1-8B-Instruct-FP8", "fp8",      # the Instruct model
                   HF + "nvidia/Llama-3.1-8B-Instruct-FP8/tree/main",
                   other="Llama-3.1-8B-Instruct"),
        Checkpoint("nvidia/Llama-3.1-8B-Instruct-FP4", "nvfp4", SPARK_TRTLLM,
                   other="Llama-3.1-8B-Instruct"),
    ),
    "llama4-maverick": (
        _own("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "bf16"),
        # Meta's own FP8 (compressed-tensors FP8: sglang issue #5134 loads it so); NVIDIA's ModelOpt
        # nvidia/Llama-4-Maverick-17B-128E-Instruct-FP8 (TRTLLM_PERF) is the other fp8 release
        Checkpoint("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", "fp8", HF + "meta-llama"),
        Checkpoint("nvidia/Llama-4-Maverick-17B-128E-Instruct-NVFP4", "nvfp4", TRTLLM_PERF),
    ),
    "llama4-scout": (
        _own("meta-llama/Llama-4-Scout-17B-16E", "bf16"),
        # of Llama-4-Scout-17B-16E-Instruct (same shapes); Meta published no quantized Scout
        Checkpoint("nvidia/Llama-4-Scout-17B-16E-Instruct-FP8", "fp8",
                   "https://nvidia.github.io/TensorRT-LLM/deployment-guide/"
                   "deployment-guide-for-llama4-scout-on-trtllm.html",
                   other="Llama-4-Scout-17B-16E-Instruct"),
        Checkpoint("nvidia/Llama-4-Scout-17B-16E-Instruct-FP4", "nvfp4",
                   "https://nvidia.github.io/TensorRT-LLM/deployment-guide/"
                   "deployment-guide-for-llama4-scout-on-trtllm.html",
                   other="Llama-4-Scout-17B-16E-Instruct"),
    ),
    "minimax-m2.5": (
        # config.json: "quant_method": "fp8", "weight_block_size": [128, 128]
        _own("MiniMaxAI/MiniMax-M2.5", "fp8_block"),
        # ModelOpt NVFP4 experts (../shared/data/hf/minimax-m2.5-nvfp4 is its config)
        Checkpoint("nvidia/MiniMax-M2.5-NVFP4", "nvfp4",
                   HF + "nvidia/MiniMax-M2.5-NVFP4/blob/main/README.md"),
    ),
    "mixtral-8x22b": (
        _own("mistralai/Mixtral-8x22B-v0.1", "bf16"),
        # Neural Magic's (now Red Hat AI) AutoFP8 of Mixtral-8x22B-Instruct-v0.1 (same shapes):
        # per-tensor FP8 weights and activations; Mistral published no FP8
        Checkpoint("neuralmagic/Mixtral-8x22B-Instruct-v0.1-FP8", "fp8",
                   HF + "neuralmagic/Mixtral-8x22B-Instruct-v0.1-FP8/blob/main/README.md",
                   other="Mixtral-8x22B-Instruct-v0.1"),
    ),
    "mixtral-8x7b": (
        _own("mistralai/Mixtral-8x7B-v0.1", "bf16"),
        # the same of Mixtral-8x7B-Instruct-v0.1, the router (block_sparse_moe.gate) kept bf16
        Checkpoint("neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8", "fp8",
                   HF + "neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8",
                   other="Mixtral-8x7B-Instruct-v0.1"),
    ),
    "nemotron-3-super-120b-a12b": (
        # the TOML's source is NVIDIA's FP8 release (hf_quant_config.json "quant_algo": "FP8")
        _own("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "fp8"),
        Checkpoint("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "bf16",
                   "https://docs.nvidia.com/nemo/automodel/latest/model-coverage/"
                   "large-language-models/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.md"),
        # NVFP4 experts (the bulk); research.nvidia.com/labs/nemotron/Nemotron-3-Super lists
        # the NVFP4, FP8 and BF16 post-trained checkpoints
        Checkpoint("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "nvfp4", SPARK_TRTLLM),
    ),
    "qwen3-235b-a22b": (
        _own("Qwen/Qwen3-235B-A22B", "bf16"),
        # Qwen's FP8 releases are fine-grained, blocks of 128 (QWEN3_VLLM: "The FP8 models of
        # Qwen3 are block-wise quant")
        Checkpoint("Qwen/Qwen3-235B-A22B-FP8", "fp8_block", HF + "Qwen/Qwen3-235B-A22B-FP8"),
        # ModelOpt FP8, one scale per tensor: a different format from Qwen's own FP8
        Checkpoint("nvidia/Qwen3-235B-A22B-FP8", "fp8", TRTLLM_PERF),
        Checkpoint("nvidia/Qwen3-235B-A22B-FP4", "nvfp4", TRTLLM_PERF),
    ),
    "qwen3-32b": (
        _own("Qwen/Qwen3-32B", "bf16"),
        # Qwen's own FP8 (block-wise) and AWQ releases (QWEN3_VLLM: "Qwen3 comes with two types of
        # pre-quantized models, FP8 and AWQ"); the AWQ is int4 with zero points in groups of 128,
        # Qwen's documented AutoAWQ recipe (docs/source/quantization/awq.md: "zero_point": True,
        # "q_group_size": 128): its config.json was not read here
        Checkpoint("Qwen/Qwen3-32B-FP8", "fp8_block", QWEN3_VLLM),
        Checkpoint("Qwen/Qwen3-32B-AWQ", "w4a16_zp", QWEN3_VLLM),
        Checkpoint("nvidia/Qwen3-32B-FP4", "nvfp4", SPARK_TRTLLM),
    ),
    "qwen3.5-397b-a17b": (
        _own("Qwen/Qwen3.5-397B-A17B", "bf16"),
        # Qwen's official FP8 release (Feb 2026); fp8_block as Qwen's FP8 releases are (its own
        # config.json not read: Qwen3.6-35B-A3B-FP8's is "weight_block_size": [128, 128])
        Checkpoint("Qwen/Qwen3.5-397B-A17B-FP8", "fp8_block",
                   "https://awesomeagents.ai/news/qwen-3-5-fp8-weights-vllm-sglang"),
        # ModelOpt NVFP4 routed experts; attention, Gated DeltaNet and shared experts kept bf16
        # (tests/data/hf/qwen3.5-397b-a17b-nvfp4 is its config)
        Checkpoint("nvidia/Qwen3.5-397B-A17B-NVFP4", "nvfp4",
                   HF + "nvidia/Qwen3.5-397B-A17B-NVFP4"),
    ),
}


def checkpoint_for(key: str, weights: str | None) -> Checkpoint | None:
    """The checkpoint of shipped model ``key`` that stores weight format ``weights`` (an
    ``lts.specs`` weight-format name, aliases already resolved); ``weights`` None: the model's
    own (its TOML source's) repository. None when lts knows no such checkpoint, or no entry for
    ``key`` (a synthetic model, a file of the user's)."""
    entries = CHECKPOINTS.get(key, ())
    if weights is None:
        return entries[0] if entries else None
    return next((c for c in entries if c.weights == weights), None)
