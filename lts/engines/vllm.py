"""vLLM: its scheduler profile per release, what it runs and its launch-flag data.

The profile's defaults were read from the release wheel of vLLM 0.12.0 from PyPI; the fitted
constants say so (``scripts/calibrate.py``; docs/validation.md). The launch flags
(``lts.launch``) were read from vLLM 0.33.0 (docs/engines.md "Launch flags").
"""
from __future__ import annotations

from dataclasses import replace

from ..specs.strategy import EXPERTS, EXPERT_CHOICES, OPS
from ..specs.units import MS, US
from .engine import Engine
from .profiles import EngineProfile, by_release

CUSTOM_AR_BYTES = 8 * 2**20   # see the profile's notes


def _gpu_defaults(gib: float, gpu: str) -> dict:
    """vllm 0.12.0 (and 0.19.0, unchanged) vllm/engine/arg_utils.py get_batch_defaults for
    ``vllm serve`` (UsageContext.OPENAI_API_SERVER): device_memory >= 70 GiB and not an A100
    ("Setting large max_num_batched_tokens for A100 reduces throughput, see PR #17885"): 8192
    tokens, 1024 sequences; otherwise 2048 and 256."""
    if gib >= 70 and "a100" not in gpu.lower():
        return {"step_tokens": 8192, "max_running": 1024}
    return {"step_tokens": 2048, "max_running": 256}


# scheduler profile per release
PROFILES = {
    "0.12": EngineProfile(
        name="vllm", title="vLLM 0.12 (vllm serve)",
        step_tokens=8192, mixed=True, max_running=1024, memory="utilization", memory_fraction=0.9,
        step_overhead_s=2000 * US, request_overhead_s=0.0 * MS, cohort_base=2.5, cohort_share=0.09,
        custom_allreduce_bytes=CUSTOM_AR_BYTES, gpu_rule=_gpu_defaults,
        notes=("custom all-reduce up to 8 MiB: vllm 0.19.0 vllm/distributed/device_communicators/"
               "custom_all_reduce.py CustomAllreduce max_size=8192 * 1024 (its per-GPU table "
               "all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES caps it lower at tp 8; lts runs "
               "the one-shot kernel only where it beats the ring, below 1 MiB at tp 8)",
               "max_num_batched_tokens 8192: vllm/engine/arg_utils.py get_batch_defaults, "
               "device_memory >= 70 GiB and not A100: UsageContext.OPENAI_API_SERVER: 8192 "
               "(2048 on smaller GPUs and A100s, with 256 sequences: _gpu_defaults)",
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
               "FITTED on serving_calibration.csv's training half (scripts/calibrate.py): 2.0 ms "
               "per step (grid 0-3 ms by 0.5, refitted once small all-reduces cost the one-shot "
               "kernel's 3-6 us instead of the ring's 20: the CPU schedules between steps without "
               "async scheduling) and cohort 2.5 + 0.09 n (grid 1.5-8 x 0.06-0.20, refitted for "
               "the mean request's TTFT); held-out vLLM rows: median |log2| 0.120, 95.5% within "
               "2x (docs/validation.md)")),
}

# 0.15 (measurements of 0.15.1-0.19 and nightlies): async scheduling on by default (vllm 0.15.1
# config/scheduler.py async_scheduling default None, config/vllm.py turns it on without
# speculative decoding and with the mp/uni executor; vllm 0.13.0 config/scheduler.py: default
# False, "we won't reach here until async scheduling is enabled by default"); the batch defaults
# as 0.12 (read again in vllm 0.19.0: arg_utils.py get_batch_defaults, cache.py
# gpu_memory_utilization 0.9). Time per request FITTED on serving_moe.csv split by model
# (scripts/calibrate.py --split model:gpt-oss-120b --fit vllm.request_overhead_ms=0,...,60):
# trained on gpt-oss-120b's 456 vLLM rows (0.15.1, 0.18.0) -> 30 ms; held out, MiniMax-M2.5's
# 1,046 vLLM rows (0.16-0.19, nightly): TTFT within 2x 60.2% -> 82.0%, median |log2| 0.866 ->
# 0.486 (the other way, trained on MiniMax-M2.5: 60 ms, gpt-oss TTFT 66.2% -> 81.1%). The time
# per step stays 0.12's 2.0 ms: the MoE rows want more (4 ms on MiniMax-M2.5) but that does not
# carry to gpt-oss (its held-out TPOT worsens), the sign of per-layer MoE kernels lts does not
# cost yet, not of the scheduler.
# Under the simulator (serving.simulate: a benchmark's burst, lengths spread, async scheduling;
# the time between a request's sending and the scheduler), the time per request FITTED the same
# way (scripts/calibrate.py ../shared/data/serving_moe.csv --split model:gpt-oss-120b --fit
# vllm.sim_request_overhead_ms=10,20,...,50, 2026-11-28, with the measured kernels read,
# docs/kernels.md): trained on gpt-oss-120b's vLLM rows -> 30 ms (train TTFT within 2x 95.0%);
# held out, MiniMax-M2.5's 806 vLLM rows: TTFT within 2x 98.8% (median |log2| 0.281), TPOT 100%
# (0.128). Under the roofline it was 40 ms (held-out TTFT 94.3%). The time per step, refitted
# the same way with the kernels read (0, 500, ..., 2000 us), wants 0.5 ms on gpt-oss-120b's rows
# (held-out MiniMax-M2.5 TPOT median |log2| 0.191) and is kept at 0.12's 2.0 ms, which
# serving_calibration.csv's vLLM training half still picks with the kernels read (1.75-2.0 ms):
# the two MoE models disagree (gpt-oss-120b's TPOT predicted high, MiniMax-M2.5's low at 0.5).
PROFILES["0.15"] = replace(
    PROFILES["0.12"], title="vLLM 0.15-0.19 (vllm serve, async scheduling)",
    request_overhead_s=30.0 * MS, overlap=True, sim_request_overhead_s=30.0 * MS,
    notes=PROFILES["0.12"].notes[:5] + (
        "async scheduling on by default: vllm 0.15.1 config/vllm.py (async_scheduling None -> "
        "True); 0.13.0 config/scheduler.py default False",) + PROFILES["0.12"].notes[6:7] + (
        "FITTED on serving_moe.csv's gpt-oss-120b vLLM rows (scripts/calibrate.py --split "
        "model:gpt-oss-120b): 30 ms per request (grid 0-60); held-out MiniMax-M2.5 vLLM TTFT "
        "within 2x 60.2% -> 82.0%; time per step and cohort as 0.12 (docs/validation.md)",))

# the release whose source the launch flags were read from (the accepted flags are listed in
# tests/data/engine_flags/, checked by tests/test_engine_flags.py)
FLAGS_VERSION = "0.33.0"
FLAGS_DOCS = ("vllm 0.33.0 wheel: vllm/engine/arg_utils.py (EngineArgs.add_cli_args: parallel, "
              "cache and scheduler flags, --nnodes/--node-rank/--master-addr, --data-parallel-*), "
              "vllm/entrypoints/common/cli_args.py (make_arg_parser: --headless, --port), "
              "vllm/model_executor/layers/fused_moe/config.py (MoE TP/EP over DP x TP)")
DISAGG_DOCS = ("vllm 0.33.0 wheel: vllm/envs.py (VLLM_NIXL_SIDE_CHANNEL_HOST/PORT), "
               "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py, "
               "vllm/engine/arg_utils.py (--kv-transfer-config)")
NIXL_PORT = 5600              # vLLM's VLLM_NIXL_SIDE_CHANNEL_PORT default


def _ep_reasons(tp: int, ep: int, choices: tuple) -> list:
    """vLLM's data-parallel ranks share one MoE group: ep > 1 runs only expert-parallel."""
    if ep > 1 and choices[OPS.index("ffn1")] != EXPERTS:
        return [f"vLLM runs ep={ep} (data-parallel attention) only with expert "
                f"parallelism over all tp*ep = {tp * ep} GPUs (--enable-expert-parallel, "
                "ffn1/ffn2 = experts); without it its MoE layers are tensor-parallel over "
                "all of them: lts writes that as tp=tp*ep, ep=1 with data-parallel "
                "attention"]
    return []


ENGINE = Engine(
    name="vllm", label="vLLM", profiles=by_release(PROFILES), version="0.15", source_keys=("vllm",),
    # ep > 1: expert parallelism only; its DP ranks' MoE is tensor-parallel over all of them
    # (no EP) otherwise, so Megatron and DP attention run at ep = 1 only
    ep_variants=(EXPERT_CHOICES,), more_reasons=_ep_reasons,
    # --prefill-context-parallel-size (vllm 0.33.0 wheel: config/parallel.py ParallelConfig,
    # world = pp x tp x pcp; v1/worker/gpu/pcp_manager.py PCPManager.validate_config: "MRV2 PCP
    # currently supports MLA models only"; the V2 model runner, 0.33.0's default)
    cp_kinds=("mla",),
    cp_why="vLLM 0.33.0 runs --prefill-context-parallel-size for MLA models only "
           "(v1/worker/gpu/pcp_manager.py PCPManager.validate_config)",
    # --decode-context-parallel-size (vllm 0.33.0 wheel: config/parallel.py ParallelConfig, "DCP
    # reuses TP ranks", tp % dcp == 0; backends with supports_dcp: FlashAttention and the MLA
    # ones); a gqa model only where its KV heads are duplicated (config/model.py
    # verify_with_parallel_config: tp > kv heads, dcp <= tp // kv heads, q per kv head % dcp)
    dcp_kinds=("mla", "gqa"), dcp_kv_rule=True,
    etp_why="vLLM 0.33.0's MoE layers are either tensor-parallel over all of a stage's DP x TP "
            "ranks or, with --enable-expert-parallel, expert-parallel over all of them with no "
            "tensor split (model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make: "
            "ep_size = tp_size, tp_size = 1), never both",
    flags_version=FLAGS_VERSION, flags_docs=FLAGS_DOCS, disagg_docs=DISAGG_DOCS,
    command="vllm serve",
    # --kv-offloading-size GiB (summed over one engine core's pp x tp x pcp ranks) with
    # --kv-offloading-backend native: the OffloadingConnector stores every computed block to
    # CPU (store_threshold 0) and loads prefix hits back asynchronously before the request is
    # scheduled (vllm 0.33.0 config/cache.py CacheConfig.kv_offloading_size, config/vllm.py
    # _post_init_kv_transfer_config, v1/kv_offload/cpu/spec.py world_size copies,
    # distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py get_num_new_matched_tokens)
    kv_offload="vllm 0.33.0 --kv-offloading-size (config/cache.py CacheConfig; native backend: "
               "the OffloadingConnector, v1/kv_offload/)",
    offload_inclusive=True,
    # the GPUs of one command: tensor x pipeline x data parallel sizes
    gpu_flags=("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size",
               "--prefill-context-parallel-size"),
    fp8_kv_dtype="fp8",         # vllm/config/cache.py CacheDType
    # CUDA and ROCm: docs.vllm.ai GPU installation, "compute capability 7.0 or higher"; ROCm
    # "MI300 (gfx942), MI350 (gfx950)", "MI350 requires ROCm 7.0" (shared/data/hardware.md §5.9 [E1])
    vendors=("nvidia", "amd"))
