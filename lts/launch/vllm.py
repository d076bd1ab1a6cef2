"""vLLM's command lines (``vllm serve``): one instance from a strategy row, and the flags,
router and transport of a two-pool deployment (``emit``, ``emit_disagg``; docs/engines.md).
"""
from __future__ import annotations

import json
import math
import shlex

from ..engines.space import attention_dp
from ..engines.vllm import ENGINE, NIXL_PORT
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import BATCH, CP, DCP, EP, EXPERTS, OP_COL, PP, TP, instance_gpus
from ..specs.workload import Workload
from .launcher import (HEAD_IP, NODE_RANK, ROUTER_PORT, Launcher, eplb_placement, join, nodes,
                       plain, quote, workers)

DP_RPC_PORT, RAY_PORT = 13345, 6379


class VLLM(Launcher):
    """vLLM: tensor x pipeline parallel, lts's ep as data-parallel ranks (docs/engines.md)."""
    name = ENGINE.name
    # vllm 0.33.0 distributed/kv_transfer/kv_connector/v1/nixl/metadata.py: the NIXL
    # compatibility hash covers the speculative config (method, draft model, aux layers), and
    # nixl/base_worker.py refuses a peer whose hash differs (enforce_handshake_compat defaults
    # to True): prefill and decode instances take the same --speculative-config
    spec_on_prefill = True

    def spec_flags(self, method: str, k: int, draft) -> tuple:
        # vllm 0.33.0 arg_utils.py --speculative-config (a JSON SpeculativeConfig); method
        # "mtp" for every MTP model type and "eagle3": vllm 0.19.0 vllm/config/speculative.py
        # (MTPModelTypes, EagleModelTypes; a "model" alone is a draft model)
        cfg = {"method": "mtp"} if method == "mtp" else \
            {"method": "eagle3", "model": draft} if method == "eagle" else {"model": draft}
        cfg["num_speculative_tokens"] = k
        return [f"--speculative-config {quote(json.dumps(cfg))}"], [], []

    def policy_flags(self, profile) -> tuple:
        # vllm 0.33.0 vllm/engine/arg_utils.py: --max-num-batched-tokens (the step's token
        # budget), --enable-chunked-prefill, --gpu-memory-utilization
        return ([f"--max-num-batched-tokens {profile.step_tokens}", "--enable-chunked-prefill",
                 f"--gpu-memory-utilization {profile.memory_fraction:g}"],
                f"scheduling as lts costs it ({profile.title}): steps of at most "
                f"{profile.step_tokens} tokens, decodes and prompt chunks in the same step, "
                f"{profile.memory_fraction:g} of GPU memory for weights and KV cache")

    def prefix_flags(self) -> tuple:
        return (["--enable-prefix-caching"],
                "prefix caching: on by default (vllm 0.19.0 vllm/config/cache.py CacheConfig."
                "enable_prefix_caching = True); --enable-prefix-caching says so for older "
                "releases")

    def offload_flags(self, host_bytes: float, model, row) -> tuple:
        # vllm 0.33.0 config/cache.py CacheConfig.kv_offloading_size: "Size of the KV cache
        # offloading buffer in GiB. When TP > 1, this is the total buffer size summed across all
        # TP ranks"; v1/kv_offload/cpu/spec.py splits it over one engine core's world
        # (config/parallel.py world_size = pp x tp x pcp); each data-parallel rank is its own
        # engine core with the same flag. --kv-offloading-backend native: the
        # OffloadingConnector (config/vllm.py _post_init_kv_transfer_config)
        tp, pp, cp = (int(row[c]) for c in (TP, PP, CP))
        if attention_dp(model, row)[0]:        # DP ranks of one GPU each (``command``)
            tp = 1
        world = tp * pp * cp
        gib = host_bytes / 2**30
        return ([f"--kv-offloading-size {plain(gib * world)}", "--kv-offloading-backend native"],
                [], f"KV offload: {plain(gib)} GiB of host memory per GPU for the cached prefixes, "
                    f"--kv-offloading-size summed over an engine core's {world} GPU"
                    f"{'s' if world != 1 else ''} (vllm 0.33.0 config/cache.py CacheConfig."
                    "kv_offloading_size; native: the OffloadingConnector)")

    def command(self, model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str,
                extra: list, max_len: int, key=None, serve=None, yaml=()) -> tuple:
        tp, ep, pp, cp, dcp, batch = (int(row[c]) for c in (TP, EP, PP, CP, DCP, BATCH))
        gpn = topo.gpus_per_host
        dp_attention = bool(attention_dp(model, row)[0])
        if dp_attention:   # vLLM's DP ranks of one GPU each; its MoE is then TP over all of them
            tp, ep = 1, tp
        seqs = math.ceil(batch / ep)
        expert_parallel = model.is_moe and not dp_attention and (
            ep > 1 or (tp > 1 and row[OP_COL["ffn1"]] == EXPERTS))
        # the load balancer over vLLM's EP group, DP x TP: --enable-eplb, and the redundant
        # experts in --eplb-config (vllm/config/parallel.py EPLBConfig.num_redundant_experts;
        # both flags in tests/data/engine_flags/vllm-0.33.0.txt)
        eplb, notes = eplb_placement(model, tp * ep if expert_parallel else 1, "vLLM")
        redundant = model.ffn.redundant_experts if eplb else 0
        cfg = json.dumps({"num_redundant_experts": redundant}, separators=(",", ":"))
        # every flag below: vllm 0.33.0 vllm/engine/arg_utils.py EngineArgs.add_cli_args, or
        # vllm/entrypoints/common/cli_args.py make_arg_parser (--headless)
        base = join("vllm serve", ref, f"--tensor-parallel-size {tp}",
                    f"--pipeline-parallel-size {pp}" if pp > 1 else "",
                    # context parallelism: vllm 0.33.0 config/parallel.py ParallelConfig
                    # prefill_context_parallel_size (world pp x tp x pcp; MLA models only,
                    # engines.space.runs_cp)
                    f"--prefill-context-parallel-size {cp}" if cp > 1 else "",
                    # decode context parallelism: ParallelConfig decode_context_parallel_size
                    # ("DCP reuses TP ranks"; engines.space.dcp_mask)
                    f"--decode-context-parallel-size {dcp}" if dcp > 1 else "",
                    "--enable-expert-parallel" if expert_parallel else "",
                    "--enable-eplb" if eplb else "",
                    f"--eplb-config {quote(cfg)}" if redundant else "")
        tail = join(f"--max-num-seqs {seqs}", f"--max-model-len {max_len}", *extra)
        if dp_attention:
            notes.append(f"lts's tp={ep} with data-parallel attention: vLLM's "
                         f"--data-parallel-size {ep} of one GPU each, whose MoE layers are "
                         f"tensor-parallel over all {ep} GPUs without --enable-expert-parallel "
                         "(vllm 0.33.0 model_executor/layers/fused_moe/config.py "
                         "FusedMoEParallelConfig.make)")
        elif ep > 1:
            notes.append(f"lts's ep={ep} attention groups are vLLM's data-parallel ranks, and "
                         f"--enable-expert-parallel spreads whole experts over all DP x TP = "
                         f"{tp * ep} GPUs, as lts does with ffn1/ffn2 = experts")
        if ep > 1:
            notes.append(f"--max-num-seqs applies per DP rank: lts's batch {batch} over {ep} "
                         f"ranks = {seqs} each" + (" (rounded up)" if batch % ep else ""))
        elif expert_parallel:
            notes.append(f"--enable-expert-parallel: whole experts over the {tp} tensor-parallel "
                         "GPUs (lts: ffn1/ffn2 = experts); attention stays tensor-parallel")
        gpus = int(instance_gpus(row))
        if gpus <= gpn:
            cmd = join(base, f"--data-parallel-size {ep}" if ep > 1 else "", tail)
            return [(f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", cmd)], notes
        rank = tp * pp * cp                             # GPUs of one DP rank
        if ep == 1:
            n = nodes(gpus, gpn)
            multi = f"--nnodes {n} --node-rank"
            cmds = [(f"head node (node rank 0 of {n})",
                     join(base, tail, f"{multi} 0 --master-addr {HEAD_IP}")),
                    (workers(n),
                     join(base, tail, f"{multi} {NODE_RANK} --master-addr {HEAD_IP} --headless"))]
            notes.append(f"multi-node: {n} nodes x {gpus // n} GPUs, vLLM's multiprocessing "
                         "backend (--nnodes, documented from v0.13.0); older vLLM: start Ray "
                         f"(ray start --head on the head, ray start --address=HEAD_IP:{RAY_PORT} "
                         "on the others) and run the head command alone without --nnodes/"
                         "--node-rank/--master-addr, adding --distributed-executor-backend ray")
            return cmds, notes
        if rank <= gpn:
            local = max(d for d in range(1, gpn // rank + 1) if ep % d == 0)
            n = ep // local
            dp = (f"--data-parallel-size {ep} --data-parallel-size-local {local} "
                  f"--data-parallel-address {HEAD_IP} --data-parallel-rpc-port {DP_RPC_PORT}")
            cmds = [(f"head node (DP ranks 0..{local - 1}; {n} nodes)", join(base, dp, tail)),
                    (workers(n),
                     join(base, dp, f"--data-parallel-start-rank $(({NODE_RANK}*{local}))",
                          "--headless", tail))]
            notes.append(f"multi-node data parallel: {n} nodes with {local} DP rank"
                         f"{'s' if local > 1 else ''} of {rank} GPU{'s' if rank > 1 else ''} each; "
                         "the API server runs on the head node only")
            return cmds, notes
        cmds = [("head node: start Ray", f"ray start --head --port={RAY_PORT}"),
                ("each worker node: join Ray", f"ray start --address={HEAD_IP}:{RAY_PORT}"),
                ("head node: launch (after every node joined)",
                 join("VLLM_RAY_DP_PACK_STRATEGY=span", base, f"--data-parallel-size {ep}",
                      "--data-parallel-backend ray", tail))]
        notes.append(f"one DP rank ({rank} GPUs) spans nodes: vLLM's Ray data-parallel backend "
                     "with VLLM_RAY_DP_PACK_STRATEGY=span places the ranks "
                     "(data_parallel_deployment.md)")
        return cmds, notes

    def node_commands(self, roles: list, node: int, span: int, host) -> list:
        """vLLM's NIXL side channel binds the address of the node the scheduler runs on
        (VLLM_NIXL_SIDE_CHANNEL_HOST, vllm 0.33.0 nixl/base_scheduler.py), so a command written
        for every worker node ($NODE_RANK) becomes one command per node, each with its own
        address; under Ray the variable goes on each node's ``ray start`` (vllm 0.33.0
        vllm/v1/executor/ray_utils.py WORKER_SPECIFIC_ENV_VARS: Ray does not copy it from the
        head)."""
        out = []
        for role, cmd in roles:
            cmd = cmd.replace(HEAD_IP, f"$NODE{node}_IP")
            ray = cmd.startswith("ray start")
            per_node = span > 1 and "worker" in role and (NODE_RANK in cmd or ray)
            for r in range(1, span) if per_node else (0,):
                own = host(node + r)
                role_r = f"worker node {r} of {span - 1} (node {node + r})" if per_node else role
                cmd_r = cmd.replace(NODE_RANK, str(r)) if per_node else cmd
                if ray:
                    cmd_r = f"VLLM_NIXL_SIDE_CHANNEL_HOST={own} {cmd_r}"
                elif "--data-parallel-backend ray" in cmd_r:
                    own = "localhost"          # set on each node's ray start instead
                out.append((role_r, cmd_r, own))
        return out

    def disagg_command(self, pool: str, cmd: str, first: int, size: int, port: int, k: int,
                       host: str, one_node: bool) -> str:
        devices = ",".join(str(first + j) for j in range(size))
        kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                        separators=(",", ":"))
        env = [f"VLLM_NIXL_SIDE_CHANNEL_PORT={NIXL_PORT + first}"]
        if host != "localhost":
            env.append(f"VLLM_NIXL_SIDE_CHANNEL_HOST={host}")
        if one_node:
            env.insert(0, f"CUDA_VISIBLE_DEVICES={devices}")
        return " ".join(env + [cmd, f"--port {port}", f"--kv-transfer-config {shlex.quote(kv)}"])

    def router(self, endpoints: dict, head: str) -> str:
        pre, dec = endpoints["prefill"], endpoints["decode"]
        return " ".join(["python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py",
                         f"--host 0.0.0.0 --port {ROUTER_PORT}",
                         "--prefiller-hosts", *(h for h, _, _ in pre),
                         "--prefiller-ports", *(str(p) for _, p, _ in pre),
                         "--decoder-hosts", *(h for h, _, _ in dec),
                         "--decoder-ports", *(str(p) for _, p, _ in dec)])

    def transport_note(self) -> str:
        return ("the KV cache moves with NIXL (pip install nixl; UCX_NET_DEVICES picks the "
                "NICs); the proxy script is in vLLM's source tree, run it from a checkout")


LAUNCHER = VLLM()
