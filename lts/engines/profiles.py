"""Engine profiles: the scheduler knobs of a serving engine and its cost per step (DESIGN.md §8).

The closed-loop serving model (``lts.serve``) runs an engine's scheduler: a token budget per step
(chunked prefill), whether decode tokens share a step with a prefill chunk, a cap on running
requests, how much GPU memory the KV cache gets, and what the engine adds to every step and to
every request. Each default below names the engine version and the file it was read from (the
release wheels of vLLM 0.12.0 and SGLang 0.5.1 from PyPI; TensorRT-LLM's ``trtllm-serve`` and
``llm_args.py`` as of 1.0). The constants fitted on ``shared/data/serving_calibration.csv`` say so
(``scripts/calibrate.py``; README "Validation").

Imports: specs, units.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..specs import TopologySpec
from ..specs.units import MS, US

MIB = 2**20


@dataclass(frozen=True)
class EngineProfile:
    """One engine's scheduler defaults and per-step cost."""
    name: str                   # the --engine value
    title: str                  # display name with the version the defaults were read from
    step_tokens: int            # tokens per step: decode tokens plus the prefill chunk
    mixed: bool                 # decodes share a step with prefill (False: prefill-only steps first)
    max_running: int            # running requests at most (0: only memory limits them)
    memory: str                 # how the KV pool is sized (kv_pool_bytes)
    memory_fraction: float      # the fraction that rule applies (unused by "reserve", "static")
    step_overhead_s: float      # engine time per step outside the kernels (scheduling, sampling)
    request_overhead_s: float   # per request, on its TTFT (HTTP, tokenization, first detokenize)
    cohort_base: float = 1.0    # mixed engines: requests prefilled together = base + share x
    cohort_share: float = 0.0   #   running requests (costmodel.compose_step)
    collective_efficiency: float = 0.0   # in-engine share of each link's rate (0: the topology's)
    budget_per_rank: bool = True   # attention DP: each rank's steps get step_tokens (False: the
                                   # ranks share them; workload.compose_step)
    notes: tuple = ()           # the source of every value above, one line each

    def holds(self, kv_capacity):
        """Requests the engine runs at once: what the KV cache holds, capped by max_running."""
        return np.minimum(kv_capacity, self.max_running) if self.max_running else kv_capacity

    def topology(self, topo: TopologySpec) -> TopologySpec:
        """The topology as this engine's collectives see it."""
        if not self.collective_efficiency:
            return topo
        return replace(topo, collective_efficiency=self.collective_efficiency)

    def kv_pool_bytes(self, topo: TopologySpec, fixed_bytes, parallel=1):
        """KV-cache bytes per GPU once ``fixed_bytes`` (weights and lts's workspace) are held;
        ``parallel`` = tp * pp (SGLang's rule depends on it).

        - ``reserve`` (lts's generic engine): HBM less the topology's runtime reserve.
        - ``utilization`` (vLLM ``gpu_memory_utilization``): a fraction of the GPU holds weights,
          buffers and KV cache; the runtime reserve counts inside it (vLLM's non-torch memory).
        - ``static`` (SGLang ``mem_fraction_static``): weights and KV cache get a fraction of the
          GPU that ``sglang_mem_fraction`` derives from the GPU's memory and tp * pp; buffers and
          the runtime live in the rest.
        - ``free`` (TensorRT-LLM ``kv_cache_free_gpu_memory_fraction``): a fraction of what is
          free after the runtime, weights and buffers.
        """
        hbm, reserve = topo.hbm_bytes, topo.hbm_reserve_bytes
        if self.memory == "reserve":
            return hbm - reserve - fixed_bytes
        if self.memory == "utilization":
            return self.memory_fraction * hbm - reserve - fixed_bytes
        if self.memory == "static":
            return sglang_mem_fraction(hbm, parallel) * hbm - fixed_bytes
        return self.memory_fraction * (hbm - reserve - fixed_bytes)


def sglang_mem_fraction(hbm_bytes: float, parallel: int) -> float:
    """SGLang 0.5.1 ``mem_fraction_static`` (server_args.py, ``__post_init__``): for GPUs of 60 to
    90 GiB (H100, A100) ``reserved_mem = (9.5 + parallel_size / 2) * 1024`` MiB and the fraction
    ``round((gpu_mem - reserved_mem) / gpu_mem, 3)``, parallel_size = tp_size * pp_size. The same
    rule is used for larger GPUs (their branches were not read; an assumption)."""
    gpu_mib = hbm_bytes / MIB
    reserved = (9.5 + parallel / 2) * 1024
    return np.round((gpu_mib - reserved) / gpu_mib, 3)


GENERIC = EngineProfile(
    name="generic", title="generic continuous-batching engine",
    step_tokens=8192, mixed=True, max_running=0, memory="reserve", memory_fraction=1.0,
    step_overhead_s=0.0, request_overhead_s=0.0, cohort_base=3.0, cohort_share=0.065,
    notes=("8192 tokens per step: the default of all three engines on 80 GB GPUs (below)",
           "decodes and prefill chunks share steps, as vLLM and TensorRT-LLM do",
           "no cap on running requests but memory; KV cache = HBM less the topology's "
           "hbm_reserve_gib, weights and workspace",
           "no engine time per step or per request; the topology's collective_efficiency",
           "attention data parallelism (ep > 1): each rank schedules its own steps of 8192 "
           "tokens, as vLLM and TensorRT-LLM do (below)",
           "cohort 3.0 + 0.065 n: the mean of the vLLM and TensorRT-LLM fits (below)"))

VLLM = EngineProfile(
    name="vllm", title="vLLM 0.12 (vllm serve)",
    step_tokens=8192, mixed=True, max_running=1024, memory="utilization", memory_fraction=0.9,
    step_overhead_s=1000 * US, request_overhead_s=0.0 * MS, cohort_base=2.5, cohort_share=0.06,
    notes=("max_num_batched_tokens 8192: vllm/engine/arg_utils.py get_batch_defaults, "
           "device_memory >= 70 GiB and not A100: UsageContext.OPENAI_API_SERVER: 8192 "
           "(2048 on smaller GPUs)",
           "max_num_seqs 1024: same place, default_max_num_seqs OPENAI_API_SERVER: 1024",
           "mixed steps: v1/core/sched/scheduler.py 'There's no \"decoding phase\" nor "
           "\"prefill phase\" in the scheduler'; running requests first, each decode token "
           "taken from token_budget; chunked prefill on by default",
           "gpu_memory_utilization 0.9 of the GPU for weights, activations and KV cache: "
           "vllm/config/cache.py",
           "custom all-reduce on for tp 2/4/6/8 (config/parallel.py disable_custom_all_reduce "
           "= False); async_scheduling off (config/scheduler.py)",
           "data parallelism (lts ep > 1): one engine core, with its own scheduler and "
           "max_num_batched_tokens, per DP rank (vllm 0.33.0 vllm/v1/engine/core.py "
           "DPEngineCoreProc; docs/serving/data_parallel_deployment.md)",
           "FITTED on serving_calibration.csv's training half (scripts/calibrate.py): 1.0 ms "
           "per step (grid 0-2 ms; the CPU schedules between steps without async scheduling) "
           "and cohort 2.5 + 0.06 n (grid 1.5-3.5 x 0.03-0.07); held-out vLLM rows: median "
           "|log2| 0.117, 95.5% within 2x (README Validation)"))

SGLANG = EngineProfile(
    name="sglang", title="SGLang 0.5.1 (sglang.launch_server)",
    step_tokens=8192, mixed=False, max_running=0, memory="static", memory_fraction=0.0,
    step_overhead_s=0.0 * US, request_overhead_s=0.0 * MS, budget_per_rank=False,
    notes=("chunked_prefill_size 8192 on 35-160 GB GPUs (H100, H200, A100): "
           "python/sglang/srt/server_args.py",
           "prefill first, not mixed: enable_mixed_chunk = False; managers/scheduler.py "
           "get_next_batch_to_run 'Run prefill first if possible' else decode",
           "max_running_requests: derived from the KV pool (tp_worker.py), so memory decides",
           "mem_fraction_static = (gpu_mem - (9.5 + tp*pp/2) GiB) / gpu_mem for 60-90 GB GPUs "
           "(server_args.py), holding weights and KV cache",
           "overlap scheduler on (disable_overlap_schedule = False); custom all-reduce on",
           "DP attention (lts ep > 1): chunked_prefill_size //= dp_size, the ranks share the "
           "budget (server_args.py __post_init__, 'DP attention is enabled. The chunked prefill "
           "size is adjusted')",
           "time per step 0: the fit on serving_calibration.csv's training half is flat over "
           "0-750 us; the cohort is the whole running batch (no constant)"))

TRTLLM = EngineProfile(
    name="trtllm", title="TensorRT-LLM 1.0 (trtllm-serve, PyTorch backend)",
    step_tokens=8192, mixed=True, max_running=2048, memory="free", memory_fraction=0.9,
    step_overhead_s=0.0 * US, request_overhead_s=0.0 * MS, cohort_base=3.5, cohort_share=0.07,
    notes=("max_num_tokens 8192, max_batch_size 2048: tensorrt_llm/builder.py BuildConfig, the "
           "defaults of tensorrt_llm/commands/serve.py",
           "kv_cache_free_gpu_memory_fraction 0.9 'after allocating model weights and buffers': "
           "commands/serve.py",
           "context and generation requests in one step (inflight batching), generation tokens "
           "counted against max_num_tokens: batch_manager/microBatchScheduler.cpp",
           "enable_chunked_prefill False: a prompt must fit the budget; lts chunks longer ones",
           "GUARANTEED_NO_EVICT: a request is admitted with KV room for isl + osl; overlap "
           "scheduler on (llm_args.py)",
           "attention DP (enable_attention_dp, lts ep > 1): max_num_tokens and max_batch_size "
           "apply per rank, each rank scheduling its own requests (docs/source/features/"
           "parallel-strategy.md; an assumption where the docs are silent on the token budget)",
           "FITTED on serving_calibration.csv's training half (scripts/calibrate.py): cohort "
           "3.5 + 0.07 n (grid 2.5-4.5 x 0.03-0.10); time per step 0 (grid 0-1 ms); held-out "
           "TensorRT-LLM rows: median |log2| 0.151, 96.8% within 2x (README Validation)"))

ENGINES = {p.name: p for p in (GENERIC, VLLM, SGLANG, TRTLLM)}
ENGINE_NAMES = tuple(ENGINES)


def engine_for_source(text: str) -> str:
    """The engine a measurement's ``source`` names (``trtllm``/TensorRT-LLM, ``vllm``,
    ``sglang``), or "" when it names none or several."""
    t = text.lower()
    found = [name for name, keys in (("trtllm", ("trtllm", "tensorrt-llm", "tensorrt_llm")),
                                     ("vllm", ("vllm",)), ("sglang", ("sglang",)))
             if any(k in t for k in keys)]
    return found[0] if len(found) == 1 else ""


