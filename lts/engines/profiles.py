"""Engine profiles: the scheduler knobs of a serving engine and its cost per step (docs/design.md §8).

The closed-loop serving model (``lts.serving.serve``) runs an engine's scheduler: a token budget per step
(chunked prefill), whether decode tokens share a step with a prefill chunk, a cap on running
requests, how much GPU memory the KV cache gets, and what the engine adds to every step and to
every request. Each engine's module (``generic``, ``vllm``, ``sglang``, ``trtllm``) holds its
profiles by release, each default naming the engine version and the file it was read from (the
release wheels of vLLM 0.12.0 and SGLang 0.5.1 from PyPI; TensorRT-LLM's ``trtllm-serve`` and
``llm_args.py`` as of 1.0). The constants fitted on ``shared/data/serving_calibration.csv`` say so
(``scripts/calibrate.py``; docs/validation.md).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..cost import kernels
from ..specs import TopologySpec
from ..specs.limits import MAX_CONCURRENCY
from ..specs.units import GIB

MIB = 2**20
# the engines the kernel tables were measured in (cost.kernels; the generic engine has none)
MEASURED_ENGINES = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class EngineProfile:
    """One engine's scheduler defaults and per-step cost."""
    name: str                   # the --engine value
    title: str                  # display name with the version the defaults were read from
    step_tokens: int            # tokens per step: decode tokens plus the prefill chunk
    mixed: bool                 # decodes share a step with prefill (False: prefill-only steps first)
    max_running: int            # running requests at most (0: only memory limits them)
    memory: str                 # how the KV pool is sized (kv_pool_bytes)
    memory_fraction: float      # the fraction that rule applies (unused by "reserve"; "static":
                                # 0 for SGLang's own rule, sglang_mem_fraction)
    step_overhead_s: float      # engine time per step outside the kernels (scheduling, sampling)
    request_overhead_s: float   # per request, on its TTFT (HTTP, tokenization, first detokenize)
    cohort_base: float = 1.0    # mixed engines: requests prefilled together = base + share x
    cohort_share: float = 0.0   #   running requests (specs.workload.compose_step)
    collective_efficiency: float = 0.0   # in-engine share of each link's rate (0: the topology's)
    custom_allreduce_bytes: float = 0.0  # one-shot custom all-reduce up to this message size (0: NCCL only)
    budget_per_rank: bool = True   # attention DP: each rank's steps get step_tokens (False: the
                                   # ranks share them; workload.compose_step)
    sim_request_overhead_s: float | None = None   # the time per request as the simulator
                                # fits it (serving.simulate; None: request_overhead_s)
    overlap: bool = False       # the scheduler plans a step while the one before runs (vLLM's
                                # async scheduling, SGLang's and TensorRT-LLM's overlap
                                # schedulers): a request that arrives during a step waits for
                                # the one after it (serving.simulate)
    handoff_s: float = 0.0      # two pools: per request, between the prefill and the decode pool
                                # (bootstrap, the decode side's admission, the router; two_pool.py)
    # the engine's own defaults by GPU: (GPU memory GiB, GPU name) -> {field: value} replacing
    # the profile's (for_gpu); None: the same on every GPU
    gpu_rule: Callable | None = None
    notes: tuple = ()           # the source of every value above, one line each
    # the engine release whose measured kernels the cost model reads (cost.kernels: the newest
    # table not newer than it); "" with kernels on: the profile's own release
    kernel_version: str = ""
    kernels: bool = True        # read measured kernels where the GPU has tables (--no-kernels)
    kernel_dir: str = ""        # the tables' folder ("" : lts's own; --kernels DIR)

    def for_gpu(self, topo: TopologySpec) -> "EngineProfile":
        """The profile as the engine sets itself up on the topology's GPU (its defaults by GPU
        memory and name: ``gpu_rule``)."""
        if self.gpu_rule is None:
            return self
        return replace(self, **self.gpu_rule(topo.hbm_bytes / GIB, topo.gpu_name))

    @property
    def simulated_request_s(self) -> float:
        """The time per request the simulator takes (``sim_request_overhead_s``, fitted under
        it, else the analytic loop's ``request_overhead_s``)."""
        return float(self.request_overhead_s if self.sim_request_overhead_s is None
                     else self.sim_request_overhead_s)

    def with_request_time(self, seconds: float) -> "EngineProfile":
        """The profile with one cluster's fitted time per request (``lts calibrate``, an
        overlay): the analytic loop and the simulator both take it."""
        return replace(self, request_overhead_s=float(seconds), sim_request_overhead_s=None)

    def with_memory_fraction(self, fraction: float) -> "EngineProfile":
        """The profile with a run's own memory fraction (vLLM --gpu-memory-utilization,
        TensorRT-LLM kv_cache_free_gpu_memory_fraction, SGLang --mem-fraction-static; 0: as
        it is); the generic engine's rule has none."""
        if not fraction or self.memory not in ("static", "utilization", "free"):
            return self
        return replace(self, memory_fraction=float(fraction))

    def with_kernels(self, version: str | None = None, on: bool = True,
                     data_dir: str | None = None) -> "EngineProfile":
        """The profile reading the measured kernels of engine ``version`` (None or "": its
        own release's), or none (``on`` False), from ``data_dir`` (None: as it was)."""
        return replace(self, kernel_version=version or self.kernel_version, kernels=on,
                       kernel_dir=self.kernel_dir if data_dir is None else data_dir)

    def holds(self, kv_capacity):
        """Requests the engine runs at once: what the KV cache holds, capped by max_running,
        and never more than MAX_CONCURRENCY (a GPU of unbounded memory, a request of a few
        bytes: the count stays one lts's integers and answers hold)."""
        cap = np.minimum(kv_capacity, self.max_running) if self.max_running else kv_capacity
        return np.minimum(cap, MAX_CONCURRENCY)

    def topology(self, topo: TopologySpec) -> TopologySpec:
        """The topology as this engine's collectives see it."""
        if self.collective_efficiency:
            topo = replace(topo, collective_efficiency=self.collective_efficiency)
        if self.custom_allreduce_bytes:
            topo = replace(topo, custom_allreduce_bytes=self.custom_allreduce_bytes)
        if self.kernels and topo.kernel_gpu and self.name in MEASURED_ENGINES:
            topo = replace(topo, kernels=kernels.for_engine(topo.kernel_gpu, self.name,
                                                            self.kernel_version, self.kernel_dir))
        return topo

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
        if self.memory == "static":      # a given fraction (a measured run's), else SGLang's rule
            return (self.memory_fraction or sglang_mem_fraction(hbm, parallel)) * hbm - fixed_bytes
        return self.memory_fraction * (hbm - reserve - fixed_bytes)


def sglang_mem_fraction(hbm_bytes: float, parallel) -> float:
    """SGLang 0.5.1 ``mem_fraction_static`` (python/sglang/srt/server_args.py ``__post_init__``):
    ``round((gpu_mem - reserved_mem) / gpu_mem, 3)`` with gpu_mem in MiB, parallel_size =
    tp_size * pp_size and reserved_mem (MiB) by the GPU's memory: below 35 GiB (A10, L40, 4090)
    ``(2.8 + parallel_size / 10) * 1024``; below 90 GiB (H100, A100) ``(9.5 + parallel_size / 2)
    * 1024``; below 160 GiB (H20, H200) ``(12 + parallel_size / 2) * 1024``; else (B200, MI300)
    ``32 * 1024``. (Its + 4 GiB with enable_dp_attention and + 2 GiB with speculative decoding
    are not modelled.)"""
    gpu_mib = hbm_bytes / MIB
    p = np.asarray(parallel, dtype=np.float64)
    if gpu_mib < 35 * 1024:
        reserved = (2.8 + p / 10) * 1024
    elif gpu_mib < 90 * 1024:
        reserved = (9.5 + p / 2) * 1024
    elif gpu_mib < 160 * 1024:
        reserved = (12 + p / 2) * 1024
    else:
        reserved = 32 * 1024 + 0.0 * p
    return np.round((gpu_mib - reserved) / gpu_mib, 3)



def by_release(profiles: dict) -> dict:
    """An engine's profiles by release, each reading the measured kernels of its own release
    unless told another (``EngineProfile.with_kernels``)."""
    return {r: replace(p, kernel_version=p.kernel_version or r) for r, p in profiles.items()}
