"""TensorRT-LLM: its scheduler profile per release, what it runs and its launch-flag data.

The profile's defaults were read from ``trtllm-serve`` and ``llm_args.py`` as of 1.0; the fitted
constants say so (``scripts/calibrate.py``; docs/validation.md). The launch flags
(``lts.launch``) from TensorRT-LLM 1.2.1 (docs/engines.md "Launch flags").
"""
from __future__ import annotations

from ..specs.strategy import DP_ATTENTION
from ..specs.units import MS, US
from .engine import Engine
from .profiles import EngineProfile, by_release

# scheduler profile per release
PROFILES = {
    "1.0": EngineProfile(
        name="trtllm", title="TensorRT-LLM 1.0 (trtllm-serve, PyTorch backend)",
        step_tokens=8192, mixed=True, max_running=2048, memory="free", memory_fraction=0.9,
        step_overhead_s=1000 * US, request_overhead_s=0.0 * MS, cohort_base=3.5, cohort_share=0.14,
        custom_allreduce_bytes=8 * 2**20, handoff_s=450 * MS, overlap=True,
        # FITTED under the simulator (scripts/calibrate.py ../shared/data/serving_moe.csv --fit
        # trtllm.sim_request_overhead_ms=0,15,30,45,60, 2026-11-28, the measured kernels read:
        # docs/kernels.md) on the TensorRT-LLM rows of half the (isl, osl) shapes (gpt-oss-120b
        # is the file's only TensorRT-LLM model, so the held-out half is other request shapes,
        # not another model): 45 ms; held out, TTFT within 2x 96.7% (median |log2| 0.237), TPOT
        # 100% (0.207). Under the roofline it was 60 ms: the kernels explain 15 ms of it (the
        # MoE layer's fixed kernels, the small all-reduces); the rest is larger than any server's
        # HTTP and tokenization and is not explained here: measured and named, not a kernel
        sim_request_overhead_s=45 * MS,
        notes=("custom all-reduce: AllReduceStrategy AUTO runs one-shot on small messages "
               "(microbenchmarks.csv custom_allreduce rows, trtllm 1.3.0rc20); its 8 MiB limit "
               "is vLLM's, assumed",
               "max_num_tokens 8192, max_batch_size 2048: tensorrt_llm/builder.py BuildConfig, the "
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
               "3.5 + 0.14 n (grid 2.5-8 x 0.06-0.20, refitted for the mean request's TTFT; "
               "was 0.07 n for the cohort's last); time per step 1.0 ms (grid 0-3 ms by "
               "0.5, refitted with the one-shot all-reduce); held-out TensorRT-LLM rows: median "
               "|log2| 0.158, 97.6% within 2x (docs/validation.md)",
               "FITTED on shared/data/serving_disagg.csv (scripts/calibrate.py --split alternate --max-concurrency 16): two pools' time per request between the pools, 450 ms (bootstrap, the decode side's admission, the router; grid 0-800 ms; the 8 rows, 4 TTFT, at concurrency <= 16 of the alternate half); training half TTFT 13% within 2x (median |log2| 1.33); held-out half TTFT 47% (1.32), TPOT 100% (0.46) (serving/two_pool.py; docs/validation.md)")),
}

# the release whose source the launch flags were read from (the accepted flags are listed in
# tests/data/engine_flags/, checked by tests/test_engine_flags.py)
FLAGS_VERSION = "1.2.1"
FLAGS_DOCS = ("NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py (serve's click options: "
              "--tp_size, --pp_size, --ep_size, --max_batch_size, --max_num_tokens, "
              "--max_seq_len, --extra_llm_api_options, alias --config), "
              "tensorrt_llm/llmapi/llm_args.py (enable_attention_dp), read from source "
              "snapshots: PyPI's tensorrt-llm 1.2.1 is a stub that fetches NVIDIA's wheel")
DISAGG_DOCS = ("NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (CacheTransceiverConfig: "
               "backend, max_tokens_in_buffer), tensorrt_llm/llmapi/disagg_utils.py, "
               "tensorrt_llm/commands/serve.py (disaggregated -c)")

ENGINE = Engine(
    name="trtllm", label="TensorRT-LLM", profiles=by_release(PROFILES), version="1.0",
    source_keys=("trtllm", "tensorrt-llm", "tensorrt_llm"),
    # ep > 1: attention is tensor-parallel over every GPU or data-parallel with one GPU per
    # rank (enable_attention_dp), so only tp = 1 or data-parallel attention
    ep_variants=(DP_ATTENTION,),
    cp_why="TensorRT-LLM 1.2's PyTorch backend has no prefill context parallelism for MLA or "
           "GQA: context_parallel_size runs Ulysses (heads over tp x cp), star attention "
           "(FLASHINFER_STAR_ATTENTION only) or helix (decode, disaggregated generation servers) "
           "(tensorrt_llm/mapping.py, llmapi/llm_args.py CpConfig; 1.2.1 itself not read)",
    dcp_why="TensorRT-LLM's decode context parallelism is helix (cp_config cp_type HELIX), a "
            "prototype on the generation servers of disaggregated serving, for MLA on Blackwell, "
            "its cp ranks more GPUs (docs/source/features/helix.md, tensorrt_llm/mapping.py; "
            "1.2.1 itself not read), which lts's dcp, tp ranks reused, is not",
    # expert tensor parallelism: moe_tensor_parallel_size x moe_expert_parallel_size = tp_size
    # (tensorrt_llm/llmapi/llm_args.py BaseLlmArgs, tensorrt_llm/mapping.py; serve's --ep_size,
    # alias --moe_expert_parallel_size: tests/data/engine_flags/trtllm-1.2.1*.txt)
    runs_etp=True,
    flags_version=FLAGS_VERSION, flags_docs=FLAGS_DOCS, disagg_docs=DISAGG_DOCS,
    command="trtllm-serve",
    # kv_cache_config.host_cache_size (bytes, each rank's KV cache manager): a block the GPU
    # evicts is copied to host memory and stays reusable; reused, it is copied back to the GPU
    # first (tensorrt_llm/llmapi/llm_args.py KvCacheConfig; docs/source/features/kvcache.md
    # "Enable Offloading to Host Memory", read from the stored NVIDIA/TensorRT-LLM main branch:
    # not verified in 1.2.1, whose wheel was not at hand)
    kv_offload="TensorRT-LLM kv_cache_config.host_cache_size (llmapi/llm_args.py KvCacheConfig; "
               "docs/source/features/kvcache.md; read from main, not verified in 1.2.1)",
    offload_inclusive=False,
    # the GPUs of one command: --tp_size (attention DP ranks inside it) x --pp_size
    gpu_flags=("--tp_size", "--pp_size"),
    chunked_prefill=False,      # enable_chunked_prefill False (llm_args.py; the profile's notes)
    # NVIDIA GPUs only: nvidia.github.io/TensorRT-LLM/supported-hardware.html lists NVIDIA GPUs
    # alone (shared/data/hardware.md §5.9 [E3]: MI300X/MI325X/MI355X "no (NVIDIA only)")
    vendors=("nvidia",))
