"""Unit constants, data-type sizes and the weight formats (with their other names): the only place
numbers like 1e9 or 2**30 live."""
from .errors import cut_quoted, suggestion

GIB = 2**30          # bytes
GB = 1e9             # bytes (decimal, as link and HBM bandwidths are quoted)
TB = 1e12
TFLOPS = 1e12        # FLOP/s
US = 1e-6            # seconds
MS = 1e-3

# bytes per element of each supported storage type
DTYPE_BYTES = {
    "fp32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0, "int8": 1.0,
    "fp4": 0.5, "int4": 0.5,
}


# ----------------------------------------------------------------------------------------------
# weight formats: bytes per weight with their scales, and the tensor cores their GEMMs run on
#
# A format is (bytes per weight including its scales, the compute classes its GEMMs run at, in
# order of preference: the first the GPU has). Scales one per tensor (fp8's, NVFP4's second
# level) are a few bytes per matrix of millions of weights and are not counted. The legacy names
# bf16 fp16 fp32 fp8 int8 keep the sizes above (fp8: per-tensor scale; int8: W8A8 on fp8 cores).
FP8_BLOCK = 128              # DeepSeek-V3 tech report (arXiv 2412.19437) §3.3.1: weights scaled
#                              per 128x128 block, one fp32 scale each; its config.json
#                              "weight_block_size": [128, 128]
NVFP4_GROUP = 16             # NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
#                              Inference" (developer blog, 2025) and ModelOpt's hf_quant_config
#                              "group_size": 16: e2m1 values (4 bits), one fp8 e4m3 scale per 16
#                              values, one fp32 scale per tensor
MXFP4_GROUP = 32             # OCP Microscaling Formats (MX) Specification v1.0 (2023) §5.2,
#                              MXFP4: block size k = 32 e2m1 elements sharing one e8m0 (8-bit) scale
MXFP8_GROUP = 32             # OCP Microscaling Formats (MX) Specification v1.0 (2023) §5.2,
#                              MXFP8: block size k = 32 fp8 (e4m3 or e5m2) elements sharing one e8m0
#                              (8-bit) scale
W4A16_GROUP = 128            # AWQ (arXiv 2306.00978) and GPTQ (arXiv 2210.17323) checkpoints'
#                              "group_size": 128; vLLM 0.11 awq.py / gptq.py create_weights: qweight
#                              int32 packing 8 int4, scales fp16 [k/group, n], qzeros int32 packing
#                              8 int4 zeros [k/group, n/8] (AWQ zero_point true, every GPTQ checkpoint)
W4A16_GROUP_32 = 32
W4A8_GROUP = 128             # TensorRT-LLM's and SGLang's W4A8 (w4a8 below)
WEIGHT_FORMATS = {
    "fp32": (4.0, ("bf16",)),
    "bf16": (2.0, ("bf16",)),
    "fp16": (2.0, ("bf16",)),
    "fp8": (1.0, ("fp8", "bf16")),                              # e4m3, one fp32 scale per tensor
    "int8": (1.0, ("fp8", "bf16")),                             # W8A8 (int8 cores ~ fp8 rate)
    "fp8_block": (1.0 + 4.0 / (FP8_BLOCK * FP8_BLOCK), ("fp8", "bf16")),       # 1.000244
    # fp4 without fp4 tensor cores: dequantized into bf16 math (vLLM 0.11's Marlin fp4 kernels on
    # Hopper, marlin_utils_fp4.py), not fp8
    "nvfp4": (0.5 + 1.0 / NVFP4_GROUP, ("fp4", "bf16")),                        # 0.5625
    "mxfp4": (0.5 + 1.0 / MXFP4_GROUP, ("fp4", "bf16")),                        # 0.53125
    # fp8 weights with an e8m0 scale per 32 (ModelOpt's quant_algo "MXFP8", a MIXED_PRECISION
    # checkpoint's attention and dense layers: nvidia/MiniMax-M3-NVFP4 hf_quant_config.json);
    # fp8 math, bf16 without fp8 cores, as fp8's
    "mxfp8": (1.0 + 1.0 / MXFP8_GROUP, ("fp8", "bf16")),                        # 1.03125
    # int4 weight-only: the GEMM dequantizes to bf16 and multiplies in bf16 (W4A16)
    "w4a16": (0.5 + 2.0 / W4A16_GROUP, ("bf16",)),              # fp16 scale: 0.515625
    "w4a16_zp": (0.5 + (2.0 + 0.5) / W4A16_GROUP, ("bf16",)),   # + int4 zero: 0.51953125
    # groups of 32, a bf16 scale each, no zero: Kimi-K2-Thinking / K2.5's int4 experts
    # (huggingface.co/moonshotai/Kimi-K2.5: compressed-tensors "group_size": 32, "symmetric":
    # true; its safetensors hold weight_scale bf16 [n, k/32] beside weight_packed int32)
    "w4a16_g32": (0.5 + 2.0 / W4A16_GROUP_32, ("bf16",)),        # 0.5625
    # NVFP4 weights with bf16 activations (weight-only): ModelOpt's quant_algo "W4A16_NVFP4"
    # (modelopt/torch/export/model_config.py QUANTIZATION_W4A16_NVFP4; a MIXED_PRECISION
    # checkpoint's quantized_layers, huggingface.co/nvidia/Qwen3.6-35B-A3B-NVFP4
    # hf_quant_config.json); vLLM runs it as FP4 Marlin into bf16 math
    # (vllm/model_executor/layers/quantization/modelopt.py ModelOptNvFp4W4A16LinearMethod, under
    # ModelOptMixedPrecisionConfig): NVFP4's bytes, bf16 math on every GPU
    "w4a16_nvfp4": (0.5 + 1.0 / NVFP4_GROUP, ("bf16",)),         # 0.5625
    # int4 weights in groups of 128 with an fp16 scale each, fp8 (e4m3) activations: the GEMM
    # turns the weights into fp8 and multiplies on fp8 cores. TensorRT-LLM's W4A8_AWQ
    # (tensorrt_llm/_torch/modules/linear.py W4A8_AWQ_LinearMethod.create_weights: weight_scale
    # float16 [in / group_size, out], "for FP8 activation, scales needs to be float16"; ModelOpt
    # modelopt/torch/quantization/config.py W4A8_AWQ_BETA_CFG: int4 "block_sizes" {-1: 128}, then
    # one fp8 scale per tensor; "*input_quantizer" fp8) and SGLang's w4afp8 (python/sglang/srt/
    # layers/quantization/w4afp8.py W4AFp8Config group_size 128, the experts' scales one per 128
    # weights, bf16 once loaded). Without fp8 cores: bf16 math, as fp8's
    "w4a8": (0.5 + 2.0 / W4A8_GROUP, ("fp8", "bf16")),          # 0.515625
}


# the KV-cache types --kv-cache-dtype offers (a model file may name any of DTYPE_BYTES)
KV_DTYPES = ("bf16", "fp8")


# Other names of the formats above, as tools, checkpoints and kernel tables write them. Every
# reader of a format takes them (a model file's precision.weights and precision.formats,
# --precision, a measurement row's precision, gemm_quant and moe_quant: ``weight_format``), in
# any case and with "-" for "_". The measured-kernel tables (shared/data/kernels/*/gemm and moe,
# columns gemm_dtype and moe_dtype) write bfloat16, fp8, fp8_block, nvfp4, int4_wo, int8_wo, sq,
# w4a16_mxfp4, w4a8_mxfp4_mxfp8 and w4afp8: each is a format above, a name here or one of
# REFUSED_FORMATS.
FORMAT_ALIASES = {
    # lts's own earlier names (--precision fp4 / int4, model files; int4 stays AWQ's groups of
    # 128 without a zero, as before)
    "fp4": "nvfp4", "int4": "w4a16",
    # torch dtype names (config.json "torch_dtype"); the kernel tables' "bfloat16"
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32",
    # e4m3 with one scale per tensor: vLLM 0.33.0's --quantization fp8_per_tensor
    # (model_executor/layers/quantization/__init__.py), torch's float8_e4m3fn, the OCP FP8
    # encoding's name
    "fp8_per_tensor": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8", "e4m3": "fp8",
    "fp8_e4m3": "fp8",
    # DeepSeek-V3's 128 x 128 block scales under the names in use for them
    "fp8_blockwise": "fp8_block", "block_fp8": "fp8_block",
    # int8 weights and activations: W8A8; SmoothQuant, the kernel tables' "sq" (lts.cost.kernels
    # reads it for int8) and ModelOpt's "int8_sq" (modelopt/torch/export/model_config.py
    # QUANTIZATION_INT8_SQ)
    "w8a8": "int8", "sq": "int8", "int8_sq": "int8",
    # MXFP4 weights (gpt-oss): the kernel tables' MoE dtypes w4a16_mxfp4 (bf16 activations,
    # Hopper) and w4a8_mxfp4_mxfp8 (MXFP8 activations, Blackwell), ModelOpt's "w4a8_mxfp4_fp8"
    # (model_config.py QUANTIZATION_W4A8_MXFP4_FP8): lts's mxfp4 runs on fp4 cores where the GPU
    # has them, else in bf16 math, the two kernels those names say
    "w4a16_mxfp4": "mxfp4", "w4a8_mxfp4_mxfp8": "mxfp4", "mxfp4_mxfp8": "mxfp4",
    "w4a8_mxfp4_fp8": "mxfp4",
    # int4 weight-only. "int4_wo" is the kernel tables' name for Kimi-K2's experts (its MoE rows
    # are hidden 7168, 384 experts, top-8, e.g. h200_sxm/moe/vllm/0.24.0/moe_perf.parquet) and
    # Kimi-K2.5's checkpoint scales groups of 32 (w4a16_g32 above): groups of 32
    "int4_wo": "w4a16_g32",
    # AWQ and GPTQ checkpoints: groups of 128 with a 4-bit zero each (AWQ's zero_point defaults
    # to true; GPTQ checkpoints store qzeros even when sym is true: vLLM 0.11 awq.py / gptq.py
    # create_weights; lts.specs.hf reads their config.json the same way)
    "awq": "w4a16_zp", "gptq": "w4a16_zp",
    # ModelOpt's INT4 AWQ: groups of 128, no zero (modelopt/torch/quantization/config.py
    # INT4_AWQ_CFG "block_sizes" {-1: 128}; model_config.py QUANTIZATION_INT4_AWQ "int4_awq")
    "int4_awq": "w4a16",
    # int4 weights, fp8 activations: ModelOpt's and TensorRT-LLM's W4A8_AWQ
    # (model_config.py QUANTIZATION_W4A8_AWQ "w4a8_awq"), SGLang's and the kernel tables' w4afp8
    "w4a8_awq": "w4a8", "w4afp8": "w4a8",
}
# names of formats lts does not cost, with what they are: a reader refuses them saying so
REFUSED_FORMATS = {
    # the kernel tables' gemm "int8_wo" (a100_sxm/trtllm, h100_sxm/sglang) and TensorRT-LLM's
    # QuantAlgo W8A16 (tensorrt_llm/quantization/mode.py): int8 weights, 16-bit math
    "int8_wo": "int8 weights with bf16 activations (W8A16)",
    "w8a16": "int8 weights with bf16 activations (W8A16)",
    # ModelOpt's fp8_pb_wo (model_config.py QUANTIZATION_FP8_PB_WO): 128 x 128 fp8 blocks
    # quantizing the weights only; lts's fp8_block costs fp8 math, and which math an engine runs
    # such a checkpoint in is not known here
    "fp8_pb_wo": "fp8 weights in 128 x 128 blocks, weight-only (ModelOpt's FP8_PB_WO)",
}


def _accepted() -> str:
    """What a format reader accepts, as its error lists it: each format, and where its other
    names are listed (a list of all, 477 characters, was too long a line)."""
    return ", ".join(WEIGHT_FORMATS) + " or another name of one (docs/design.md, Weight formats)"


ACCEPTED_FORMATS = _accepted()


def weight_format(text: str) -> str:
    """The ``WEIGHT_FORMATS`` name a spelling of a format means (any case, "-" for "_";
    ``FORMAT_ALIASES``); ValueError, its message one line listing what is accepted, for a name
    lts does not know or does not cost (``REFUSED_FORMATS``)."""
    name = text.strip().lower().replace("-", "_") if isinstance(text, str) else ""
    if name in WEIGHT_FORMATS:
        return name
    if name in FORMAT_ALIASES:
        return FORMAT_ALIASES[name]
    if name in REFUSED_FORMATS:
        what, hint = f" is {REFUSED_FORMATS[name]}, not a format lts costs", ""
    else:
        what = " is not a weight format lts knows"
        hint = suggestion(name, [*WEIGHT_FORMATS, *FORMAT_ALIASES], 0.65)
    raise ValueError(f"{cut_quoted(text)}{what} (expected one of {ACCEPTED_FORMATS}; any case, "
                     f"- or _){'; ' + hint if hint else ''}")
