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
# which tensor-core peak a GEMM with weights of this type runs at (weight-only int4/int8 run at fp8/bf16 peak)
COMPUTE_CLASS = {"fp32": "bf16", "bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int8": "fp8",
                 "fp4": "fp4", "int4": "fp8"}
