"""Unit constants and data-type sizes: the only place numbers like 1e9 or 2**30 live."""

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
W4A16_GROUP = 128            # AWQ (arXiv 2306.00978) and GPTQ (arXiv 2210.17323) checkpoints'
#                              "group_size": 128; vLLM 0.11 awq.py / gptq.py create_weights: qweight
#                              int32 packing 8 int4, scales fp16 [k/group, n], qzeros int32 packing
#                              8 int4 zeros [k/group, n/8] (AWQ zero_point true, every GPTQ checkpoint)
W4A16_GROUP_32 = 32
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
}
# earlier names of two formats (--precision fp4 / int4, a model file's precision.weights)
FORMAT_ALIASES = {"fp4": "nvfp4", "int4": "w4a16"}
# the KV-cache types --kv-cache-dtype offers (a model file may name any of DTYPE_BYTES)
KV_DTYPES = ("bf16", "fp8")
