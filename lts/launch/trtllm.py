"""TensorRT-LLM's command lines (``trtllm-serve``): one instance from a strategy row, and the
config files, router and transport of a two-pool deployment (``emit``, ``emit_disagg``;
docs/engines.md).
"""
from __future__ import annotations

import math

from ..engines.space import attention_dp
from ..engines.trtllm import ENGINE
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import BATCH, EP, ETP, EXPERTS, OP_COL, PP, TP, instance_gpus
from ..specs.workload import Workload
from .launcher import ROUTER_PORT, Launcher, eplb_placement, join, nodes, plain, printf

INSTANCE_YAML = "lts-trtllm.yaml"      # one instance's --extra_llm_api_options (attention DP)
DISAGG_YAML = "lts-disagg.yaml"
POOL_YAML = {"prefill": "lts-ctx.yaml", "decode": "lts-gen.yaml"}
TRANSCEIVER_BACKEND = "UCX"   # CacheTransceiverConfig.backend: DEFAULT, UCX, NIXL, (MOONCAKE,) MPI


class TRTLLM(Launcher):
    """TensorRT-LLM: tp x pp with experts in ep_size groups, attention DP in a YAML file
    (docs/engines.md)."""
    name = ENGINE.name
    # the generation server takes its first draft tokens from the context server
    # (_torch/pyexecutor/py_executor.py: req.py_draft_tokens = context_phase_params.draft_tokens),
    # and NVIDIA's disaggregated configs set the same speculative_config on both
    # (examples/disaggregated/slurm/benchmark/config.yaml worker_config.ctx and .gen)
    spec_on_prefill = True
    instance_file = INSTANCE_YAML

    def spec_flags(self, method: str, k: int, draft) -> tuple:
        # the LLM API's speculative_config (tensorrt_llm/llmapi/llm_args.py, stored NVIDIA/
        # TensorRT-LLM: MTPDecodingConfig decoding_type "MTP", num_nextn_predict_layers "N
        # modules produce N draft tokens"; Eagle3DecodingConfig "Eagle3" and
        # DraftTargetDecodingConfig "Draft_Target" with max_draft_len and speculative_model)
        if method == "mtp":
            lines = ["speculative_config:", "  decoding_type: MTP",
                     f"  num_nextn_predict_layers: {k}"]
        else:
            lines = ["speculative_config:",
                     f"  decoding_type: {'Eagle3' if method == 'eagle' else 'Draft_Target'}",
                     f"  max_draft_len: {k}", f"  speculative_model: {draft}"]
        return [], lines, []

    def policy_flags(self, profile) -> tuple:
        # tensorrt_llm/commands/serve.py: --kv_cache_free_gpu_memory_fraction; the token budget
        # per step is --max_num_tokens, which ``command`` sets from the same profile
        return ([f"--kv_cache_free_gpu_memory_fraction {profile.memory_fraction:g}"],
                f"scheduling as lts costs it ({profile.title}): --max_num_tokens tokens a step, "
                f"decodes and context chunks together, {profile.memory_fraction:g} of the memory "
                "free after loading for the KV cache")

    def prefix_flags(self) -> tuple:
        return ([], "prefix caching: KV block reuse is on by default (tensorrt_llm/llmapi/"
                    "llm_args.py KvCacheConfig.enable_block_reuse = True)")

    def offload_flags(self, host_bytes: float, model, row) -> tuple:
        # tensorrt_llm/llmapi/llm_args.py KvCacheConfig.host_cache_size "Size of the host cache
        # in bytes", each rank's KV cache manager; docs/source/features/kvcache.md "Enable
        # Offloading to Host Memory" (read from the stored main branch: 1.2.1 not verified)
        size = int(host_bytes)
        return ([], ["kv_cache_config:", f"  host_cache_size: {size}"],
                f"KV offload: kv_cache_config.host_cache_size {size} bytes per rank "
                f"({plain(host_bytes / 2**30)} GiB of host memory per GPU) for the cached "
                "prefixes (tensorrt_llm/llmapi/llm_args.py KvCacheConfig, read from the "
                "TensorRT-LLM main branch: not verified in 1.2.1)")

    def command(self, model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str,
                extra: list, max_len: int, key=None, serve=None, yaml=()) -> tuple:
        tp, ep, pp, etp, batch = (int(row[c]) for c in (TP, EP, PP, ETP, BATCH))
        size = tp * ep                # ep > 1 only with tp = 1 or data-parallel attention
        experts = tp > 1 and row[OP_COL["ffn1"]] == EXPERTS
        dp_attention = bool(attention_dp(model, row)[0])
        adp = ep > 1 or dp_attention                      # every GPU its own attention rank
        per_rank = math.ceil(batch / (size if adp else 1))
        tokens = max(per_rank, work.context) if work.phase == "decode" else per_rank * work.context
        if serve is not None:   # the serve phase: the token budget per step its profile assumed
            tokens = serve.engine.step_tokens
            if serve.isl > tokens:
                extra = ["--enable_chunked_prefill"] + list(extra)
        # flags: tensorrt_llm/commands/serve.py's serve command (--tp_size, --pp_size, --ep_size,
        # --max_batch_size, --max_num_tokens, --max_seq_len, --extra_llm_api_options,
        # --enable_chunked_prefill); enable_attention_dp: tensorrt_llm/llmapi/llm_args.py
        # BaseLlmArgs
        ep_flag, moe_ep = "", 1
        if model.is_moe:   # moe_ep x moe_tp = tp_size: data-parallel attention keeps moe_tp = tp
            # (experts each over etp ranks: moe_ep = size / etp, moe_tp = etp)
            moe_ep = ep if dp_attention else size // etp if (experts or ep > 1) else 1
            ep_flag = f"--ep_size {moe_ep}"
        # the online load balancer over the moe_ep ranks: moe_config.load_balancer, num_slots
        # expert copies, one layer rebalanced each iteration (llm_args.py MoeConfig.load_balancer,
        # MoeLoadBalancerConfig num_slots and layer_updates_per_iter, "0 = offline, > 0 = online":
        # examples/wide_ep/README.md; keys in tests/data/engine_flags/trtllm-1.2.1-yaml.txt)
        eplb, eplb_notes = eplb_placement(model, moe_ep, "TensorRT-LLM")
        balancer = ["moe_config:", "  load_balancer:", f"    num_slots: {model.ffn.slots}",
                    "    layer_updates_per_iter: 1"] if eplb else []
        # each expert over etp ranks: moe_tensor_parallel_size (llm_args.py BaseLlmArgs; with
        # moe_expert_parallel_size, serve's --ep_size, their product is tp_size: mapping.py)
        moe_tp = [f"moe_tensor_parallel_size: {etp}"] if etp > 1 else []
        lines = (["enable_attention_dp: true"] if adp else []) + moe_tp + balancer + list(yaml)
        base = join("trtllm-serve", ref, f"--tp_size {size}", f"--pp_size {pp}" if pp > 1 else "",
                    ep_flag, f"--max_batch_size {per_rank}", f"--max_num_tokens {tokens}",
                    f"--max_seq_len {max_len}",
                    f"--extra_llm_api_options {INSTANCE_YAML}" if lines else "", *extra)
        cmds, notes = [], list(eplb_notes)
        if lines:
            cmds.append(("config file (every node, before launching)",
                         printf(lines, INSTANCE_YAML)))
        if adp:
            what = (f"--ep_size {ep}: experts in {ep} group{'s' if ep > 1 else ''}, each "
                    f"tensor-parallel over {tp} GPUs (lts tp={tp}, ep={ep} with data-parallel "
                    "attention)" if dp_attention else
                    f"--ep_size {size} puts whole experts on each GPU (lts tp=1, ep={ep})")
            notes.append(f"enable_attention_dp: every GPU is its own attention rank; {what}; "
                         f"--max_batch_size is per rank: lts's batch {batch} over {size} ranks")
        elif experts and etp > 1:
            notes.append(f"--ep_size {moe_ep} with moe_tensor_parallel_size {etp}: whole experts "
                         f"over {moe_ep} groups of {etp} GPUs, each expert split over its group "
                         f"(lts: ffn1/ffn2 = experts, etp={etp}); attention stays "
                         "tensor-parallel")
        elif experts:
            notes.append(f"--ep_size {size}: whole experts over the {size} GPUs (lts: ffn1/ffn2 = "
                         "experts); attention stays tensor-parallel")
        notes.append(f"--max_num_tokens {tokens}: " +
                     ("the tokens per step (decode tokens and prompt chunks) the serve phase "
                      f"assumed ({serve.engine.title})" if serve is not None else
                      f"one decode step of the batch, or one whole prompt of {work.context} tokens"
                      if work.phase == "decode" else "lts costs the whole prompts in one pass"))
        gpus = int(instance_gpus(row))
        if gpus <= topo.gpus_per_host:
            cmds.append((f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", base))
            return cmds, notes
        n = nodes(gpus, topo.gpus_per_host)
        cmds.append((f"all {n} nodes: one Slurm job step",
                     f"srun -N {n} --ntasks {gpus} --ntasks-per-node {gpus // n} --mpi=pmix "
                     f"--gres=gpu:{gpus // n} trtllm-llmapi-launch {base}"))
        notes.append(f"multi-node: TensorRT-LLM starts all {gpus} ranks as one MPI job "
                     "(trtllm-llmapi-launch under srun or mpirun), not one command per node; add "
                     "your cluster's container and mount flags to srun")
        return cmds, notes

    def pool_files(self, problem, launches: dict, own: dict) -> list:
        """Each pool's LLM API options: the KV cache transceiver (its buffer holds one prompt),
        the context servers without the overlap scheduler, and the options of the pool's own
        instance file (``own``: attention DP, speculative decoding), which this file replaces."""
        out = []
        for pool, yaml in POOL_YAML.items():
            lines = ["cache_transceiver_config:", f"  backend: {TRANSCEIVER_BACKEND}",
                     f"  max_tokens_in_buffer: {problem.isl}"]
            if pool == "prefill":
                lines.insert(0, "disable_overlap_scheduler: True")
            lines += own.get(pool, [])
            out.append((f"{pool} config file (every node)", printf(lines, yaml)))
        return out

    def disagg_command(self, pool: str, cmd: str, first: int, size: int, port: int, k: int,
                       host: str, one_node: bool) -> str:
        devices = ",".join(str(first + j) for j in range(size))
        cmd = " ".join(cmd.replace(f"--extra_llm_api_options {INSTANCE_YAML}", "").split())
        # the transport is cache_transceiver_config.backend in the pool's YAML
        served = [cmd, f"--host {host} --port {port}", "--backend pytorch",
                  f"--extra_llm_api_options {POOL_YAML[pool]}"]
        if cmd.startswith("srun"):
            return " ".join(served)
        return " ".join(([f"CUDA_VISIBLE_DEVICES={devices}"] if one_node else []) + served)

    def router(self, endpoints: dict, head: str) -> str:
        pre, dec = endpoints["prefill"], endpoints["decode"]
        # hostname: the address the router binds; every address, so clients off its node reach it
        lines = ["hostname: 0.0.0.0", f"port: {ROUTER_PORT}", "backend: pytorch"]
        for key, eps in (("context_servers", pre), ("generation_servers", dec)):
            lines += [f"{key}:", f"  num_instances: {len(eps)}", "  urls:"]
            lines += [f"    - {h}:{p}" for h, p, _ in eps]
        return [("router config file", printf(lines, DISAGG_YAML)),
                ("router", f"trtllm-serve disaggregated -c {DISAGG_YAML}")]

    def transport_note(self) -> str:
        return (f"the KV cache moves with {TRANSCEIVER_BACKEND} (cache_transceiver_config.backend; "
                "NIXL and MPI are the other choices); its max_tokens_in_buffer holds one prompt")


LAUNCHER = TRTLLM()
