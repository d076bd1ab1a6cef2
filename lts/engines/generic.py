"""The generic engine: lts's own continuous-batching engine, no release behind it.

It serves with one profile whose defaults are those the three engines share (their modules
``vllm``, ``sglang``, ``trtllm``), runs the paper's whole per-op space (no engine space) and has
no launch flags.
"""
from __future__ import annotations

from .engine import Engine
from .profiles import EngineProfile

# scheduler profile per release; "": no release, lts's own engine
PROFILES = {
    "": EngineProfile(
        name="generic", title="generic continuous-batching engine",
        step_tokens=8192, mixed=True, max_running=0, memory="reserve", memory_fraction=1.0,
        step_overhead_s=0.0, request_overhead_s=0.0, cohort_base=3.0, cohort_share=0.115,
        notes=("8192 tokens per step: the default of all three engines on 80 GB GPUs (below)",
               "decodes and prefill chunks share steps, as vLLM and TensorRT-LLM do",
               "no cap on running requests but memory; KV cache = HBM less the topology's "
               "hbm_reserve_gib, weights and workspace",
               "no engine time per step or per request; the topology's collective_efficiency",
               "attention data parallelism (ep > 1): each rank schedules its own steps of 8192 "
               "tokens, as vLLM and TensorRT-LLM do (below)",
               "cohort 3.0 + 0.115 n: the mean of the vLLM and TensorRT-LLM fits (their modules)")),
}

ENGINE = Engine(name="generic", label="generic", profiles=PROFILES, version="")
