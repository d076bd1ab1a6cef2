"""SGLang: its scheduler profile per release, what it runs and its launch-flag data.

The profile's defaults were read from the release wheel of SGLang 0.5.1 from PyPI (its KV pool:
``profiles.sglang_mem_fraction``); the launch flags (``lts.launch``) from SGLang 0.5.23
(docs/engines.md "Launch flags").
"""
from __future__ import annotations

from ..specs.strategy import DP_ATTENTION, EXPERT_CHOICES, MEGATRON
from ..specs.units import MS, US
from .engine import Engine
from .profiles import EngineProfile, by_release

def _gpu_defaults(gib: float, gpu: str) -> dict:
    """sglang 0.5.1 python/sglang/srt/server_args.py __post_init__: chunked_prefill_size 2048
    below 35 GiB ("A10, L40, 4090"), 8192 below 160 GiB ("H100, H200, A100, H20"), else 16384
    ("B200, MI300"); gpu_mem is the device's total memory (get_device_memory_capacity)."""
    return {"step_tokens": 2048 if gib < 35 else 8192 if gib < 160 else 16384}


# scheduler profile per release
PROFILES = {
    "0.5.1": EngineProfile(
        name="sglang", title="SGLang 0.5.1 (sglang.launch_server)",
        step_tokens=8192, mixed=False, max_running=0, memory="static", memory_fraction=0.0,
        step_overhead_s=1000 * US, request_overhead_s=0.0 * MS, budget_per_rank=False,
        custom_allreduce_bytes=8 * 2**20, gpu_rule=_gpu_defaults, handoff_s=275 * MS,
        overlap=True,
        notes=("custom all-reduce up to 8 MiB: python/sglang/srt/distributed/"
               "device_communicators/custom_all_reduce.py (vLLM's kernel, max_size 8192 * 1024)",
               "chunked_prefill_size 8192 on 35-160 GiB GPUs (H100, H200, A100, H20), 2048 below, "
               "16384 above: python/sglang/srt/server_args.py (_gpu_defaults)",
               "prefill first, not mixed: enable_mixed_chunk = False; managers/scheduler.py "
               "get_next_batch_to_run 'Run prefill first if possible' else decode",
               "max_running_requests: derived from the KV pool (tp_worker.py), so memory decides",
               "mem_fraction_static = (gpu_mem - reserved) / gpu_mem, reserved by GPU memory "
               "(9.5 + tp*pp/2 GiB for 35-90 GiB GPUs, 12 + tp*pp/2 below 160, 32 above; "
               "server_args.py; profiles.sglang_mem_fraction), holding weights and KV cache",
               "overlap scheduler on (disable_overlap_schedule = False); custom all-reduce on",
               "DP attention (lts ep > 1): chunked_prefill_size //= dp_size, the ranks share the "
               "budget (server_args.py __post_init__, 'DP attention is enabled. The chunked prefill "
               "size is adjusted')",
               "FITTED on serving_calibration.csv's training half (scripts/calibrate.py): time "
               "per step 1.0 ms (grid 0-3 ms by 0.5, with the one-shot all-reduce; it was flat "
               "at 0-750 us with the ring's); held-out SGLang rows: median |log2| 0.140, 96.4% "
               "within 2x; the cohort is the whole running batch (no constant)",
               "FITTED on shared/data/serving_disagg.csv (scripts/calibrate.py --split alternate --max-concurrency 16): two pools' time per request between the pools, 275 ms (bootstrap, the decode side's admission, the router; grid 0-800 ms; the 10 rows, 5 TTFT, at concurrency <= 16 of the alternate half); training half TTFT 53% within 2x (median |log2| 0.67); held-out half TTFT 50% (0.998), TPOT 100% (0.40) (serving/two_pool.py; docs/validation.md)")),
}

# the release whose source the launch flags were read from (the accepted flags are listed in
# tests/data/engine_flags/, checked by tests/test_engine_flags.py)
FLAGS_VERSION = "0.5.23"
FLAGS_DOCS = ("sglang 0.5.23 wheel: sglang/srt/server_args.py (ServerArgs.add_cli_args; "
              "--enable-dp-attention deprecated for --attn-dp-size), "
              "sglang/srt/arg_groups/fields/parallel.py (--tp-size, --attn-dp-size, --ep-size, "
              "--pp-size, --enable-dp-lm-head, --nnodes, --node-rank, --dist-init-addr), "
              "sglang/srt/runtime_context.py (attention TP = tp / attn_dp, MoE TP = tp / ep)")
DISAGG_DOCS = ("sglang 0.5.23 wheel: sglang/srt/arg_groups/fields/disagg.py "
               "(--disaggregation-mode, -transfer-backend, -bootstrap-port), fields/device.py "
               "(--base-gpu-id)")
BOOTSTRAP_PORT = 8998         # SGLang's --disaggregation-bootstrap-port default
# SGLang 0.5's docs/advanced_features/server_arguments.md: DP attention "Currently DeepSeek-V2 and
# Qwen 2/3 MoE models"; 0.5.23's server_args.py checks no model list, so this only adds a caution
DP_ATTENTION_MODELS = ("deepseek-v3", "qwen3-235b-a22b")

ENGINE = Engine(
    name="sglang", label="SGLang", profiles=by_release(PROFILES), version="0.5.1", source_keys=("sglang",),
    # ep > 1: --ep-size ep with Megatron's experts, --ep-size tp*ep with whole experts, or
    # --attn-dp-size: every variant
    ep_variants=(MEGATRON, EXPERT_CHOICES, DP_ATTENTION),
    cp_why="SGLang 0.5.23's prefill context parallelism (--attn-cp-size with --enable-prefill-cp) "
           "takes its ranks from the tp group, the attention alone split over the sequence "
           "(srt/runtime_context.py derive_attn_tp_size: attn_tp = tp / (dp x cp); world tp x "
           "pp), which lts's cp, more GPUs each running every op on its tokens, is not",
    # --dcp-size (sglang 0.5.23 wheel: arg_groups/fields/parallel.py; arg_groups/attention_hook.py
    # "--dcp-size must divide --tp-size"; configs/model_config.py get_num_kv_heads: KV heads
    # over tp // dcp groups, at least one each; layers/dcp/comm.py: MHA/GQA and MLA)
    dcp_kinds=("mla", "gqa"),
    # expert tensor parallelism: --ep-size below --tp-size (sglang 0.5.23 wheel:
    # srt/runtime_context.py derive_parallel_widths: moe_tp_size = tp_size // moe_ep_size //
    # moe_dp_size, so --tp-size 8 --ep-size 4 is moe_tp 2 x moe_ep 4)
    runs_etp=True,
    flags_version=FLAGS_VERSION, flags_docs=FLAGS_DOCS, disagg_docs=DISAGG_DOCS,
    command="sglang.launch_server",
    # --enable-hierarchical-cache: an L2 host tier of the radix cache, --hicache-size GB
    # (decimal, an integer, per rank; overrides --hicache-ratio, default 2.0 x the device
    # pool); write_through by default, so the host pool holds what the GPU holds too; evicted
    # nodes are loaded back host -> device before use (sglang 0.5.23
    # srt/arg_groups/fields/memory.py, srt/mem_cache/pool_host/base.py "host_size * 1e9")
    kv_offload="sglang 0.5.23 --enable-hierarchical-cache --hicache-size "
               "(srt/arg_groups/fields/memory.py; srt/mem_cache/pool_host/base.py)",
    offload_inclusive=True,
    # the GPUs of one command: --tp-size (its attention-DP ranks are inside it) x --pp-size
    gpu_flags=("--tp-size", "--pp-size"),
    fp8_kv_dtype="fp8_e4m3",    # sglang/srt/arg_groups/fields/model.py kv_cache_dtype choices
    # CUDA and ROCm: docs.sglang.io/platforms/amd_gpu.html, rocm.docs.amd.com inference/sglang.html
    # (ROCm builds for MI300X/MI325X/MI355X; shared/data/hardware.md §5.9 [E2])
    vendors=("nvidia", "amd"))
