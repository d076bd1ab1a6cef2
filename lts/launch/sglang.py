"""SGLang's command lines (``python -m sglang.launch_server``): one instance from a strategy
row, and the flags, router and transport of a two-pool deployment (``emit``, ``emit_disagg``;
docs/engines.md).
"""
from __future__ import annotations

from ..engines.sglang import BOOTSTRAP_PORT, DP_ATTENTION_MODELS, ENGINE
from ..engines.profiles import sglang_mem_fraction
from ..engines.space import attention_dp
from ..specs import ModelSpec, TopologySpec
from ..specs.strategy import BATCH, DCP, EP, ETP, EXPERTS, OP_COL, PP, TP, instance_gpus
from ..specs.workload import Workload
from .launcher import (HEAD_IP, NODE_RANK, ROUTER_PORT, Launcher, eplb_placement, join, nodes,
                       plain, quote, workers)

DIST_INIT_PORT = 50000        # --dist-init-addr HEAD_IP:PORT of a multi-node instance


class SGLang(Launcher):
    """SGLang: a stage's GPUs as its tp size, lts's ep as attention-DP ranks (docs/engines.md)."""
    name = ENGINE.name
    # sglang 0.5.23 sglang/srt/disaggregation/prefill.py: with EAGLE/NEXTN the prefill server
    # runs the draft and sends its hidden states, top-k and draft KV cache with the target's;
    # decode.py reads them (output_topk_p, output_topk_index, hidden_states_tensor) to seed its
    # first draft step (speculative/eagle_disaggregation.py). A prefill without it is tolerated
    # (nixl/conn.py: "If prefill does not run speculative decoding ...") but sends a stand-in,
    # and acceptance drops; so both pools take the speculative flags (Dynamo's SGLang guide:
    # "Pass the same speculative decoding flags to the prefill and decode workers")
    spec_on_prefill = True

    def spec_flags(self, method: str, k: int, draft) -> tuple:
        # sglang 0.5.23 sglang/srt/arg_groups/fields/spec.py: --speculative-algorithm (builtins
        # EAGLE, EAGLE3, NEXTN, STANDALONE, ...), --speculative-num-steps (draft steps),
        # --speculative-eagle-topk (1: one chain), --speculative-num-draft-tokens (k + 1 with
        # topk 1), --speculative-draft-model-path
        algo = {"mtp": "NEXTN", "eagle": "EAGLE3", "draft": "STANDALONE"}[method]
        flags = [f"--speculative-algorithm {algo}", f"--speculative-num-steps {k}",
                 "--speculative-eagle-topk 1", f"--speculative-num-draft-tokens {k + 1}"]
        if draft is not None:
            flags.append(f"--speculative-draft-model-path {quote(draft)}")
        return flags, [], []

    def policy_flags(self, profile) -> tuple:
        # sglang 0.5.23 sglang/srt/arg_groups (--chunked-prefill-size, --enable-mixed-chunk)
        flags = [f"--chunked-prefill-size {profile.step_tokens}"]
        if profile.mixed:
            flags.append("--enable-mixed-chunk")
        return (flags, f"scheduling as lts costs it ({profile.title}): prompt chunks of at most "
                       f"{profile.step_tokens} tokens (SGLang divides them among attention-DP "
                       "ranks), " + ("mixed with decodes (--enable-mixed-chunk)" if profile.mixed
                                     else "in prefill batches apart from decode: SGLang's "
                                          "default, so no --enable-mixed-chunk"))

    def prefix_flags(self) -> tuple:
        return ([], "prefix caching: RadixAttention is on by default (sglang 0.5.23 "
                    "sglang/srt/arg_groups/fields/memory.py disable_radix_cache = False)")

    def offload_flags(self, host_bytes: float, model, row) -> tuple:
        # sglang 0.5.23 srt/arg_groups/fields/memory.py: --enable-hierarchical-cache, and
        # hicache_size: int "The size of host KV cache memory pool in gigabytes. Overrides
        # --hicache-ratio"; per rank (one GPU): srt/mem_cache/pool_host/base.py host_size * 1e9
        gb = max(int(host_bytes // 1e9), 1)
        return (["--enable-hierarchical-cache", f"--hicache-size {gb}"], [],
                f"KV offload: {plain(host_bytes / 2**30)} GiB of host memory per GPU for the "
                f"cached prefixes, --hicache-size {gb} GB per rank (whole decimal GB: sglang "
                "0.5.23 srt/arg_groups/fields/memory.py hicache_size: int; the host pool "
                "writes through, so only what exceeds the GPU pool adds prefixes)")

    def command(self, model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str,
                extra: list, max_len: int, key=None, serve=None, yaml=()) -> tuple:
        tp, ep, pp, dcp, etp, batch = (int(row[c]) for c in (TP, EP, PP, DCP, ETP, BATCH))
        stage = tp * ep                                   # SGLang's tp size: a whole stage
        experts = tp > 1 and row[OP_COL["ffn1"]] == EXPERTS
        ep_size = 1
        if model.is_moe and stage > 1:
            # whole experts over the stage, each over etp ranks: --ep-size stage / etp, SGLang's
            # moe_tp = --tp-size // --ep-size = etp (sglang 0.5.23 srt/runtime_context.py
            # derive_parallel_widths)
            ep_size = stage // etp if (experts or tp == 1) else ep
        dp_attention = bool(attention_dp(model, row)[0])
        attn_dp = stage if dp_attention else ep      # attention-DP ranks (attention TP 1 or tp)
        # the load balancer over --ep-size ranks: --enable-eplb, --ep-num-redundant-experts
        # (sglang 0.5.23 server_args.py; both in tests/data/engine_flags/sglang-0.5.23.txt)
        eplb, eplb_notes = eplb_placement(model, ep_size, "SGLang")
        redundant = model.ffn.redundant_experts if eplb else 0
        # sglang 0.5.23 sglang/srt/arg_groups/fields/parallel.py: --tp-size, --attn-dp-size,
        # --ep-size, --pp-size, --enable-dp-lm-head (full names: argparse abbreviations like --tp
        # break as soon as a new flag shares the prefix)
        base = join("python -m sglang.launch_server", f"--model-path {ref}", f"--tp-size {stage}",
                    f"--attn-dp-size {attn_dp} --enable-dp-lm-head" if attn_dp > 1 else "",
                    f"--ep-size {ep_size}" if ep_size > 1 else "",
                    "--enable-eplb" if eplb else "",
                    f"--ep-num-redundant-experts {redundant}" if redundant else "",
                    f"--pp-size {pp}" if pp > 1 else "",
                    # decode context parallelism over dcp of each attention TP group's ranks
                    # (fields/parallel.py --dcp-size; attention_hook.py: it divides --tp-size)
                    f"--dcp-size {dcp}" if dcp > 1 else "")
        if serve is not None and serve.engine.name == self.name:
            # the KV pool the serve phase costed: SGLang 0.5.1's rule at lts's tp x pp
            # (profiles.sglang_mem_fraction); 0.5.23 computes its own differently
            # (srt/arg_groups/memory_hook.py), so the command pins the costed fraction
            frac = serve.engine.memory_fraction or float(
                sglang_mem_fraction(topo.hbm_bytes, tp * pp))
            extra = list(extra) + [f"--mem-fraction-static {frac:g}"]
        tail = join(f"--max-running-requests {batch}", f"--context-length {max_len}", *extra)
        notes = list(eplb_notes)
        if attn_dp > 1:
            attn = (f"tensor-parallel over {tp} GPUs in each of {ep} data-parallel groups"
                    if tp > 1 and not dp_attention else
                    f"data-parallel over {attn_dp} GPUs, one per group")
            notes.append(f"--tp-size {stage} --attn-dp-size {attn_dp}: attention {attn} "
                         "(SGLang: attention TP = tp-size / attn-dp-size); --max-running-requests "
                         "is the total over the DP ranks; SGLang before --attn-dp-size (0.5.23 "
                         f"deprecates the old form): --dp-size {attn_dp} --enable-dp-attention")
            if key not in DP_ATTENTION_MODELS:
                notes.append("SGLang's docs name DP attention for DeepSeek-V2/V3 and Qwen2/3-MoE "
                             "models; check that this model's SGLang implementation supports it")
            if pp > 1:
                notes.append("SGLang's docs do not say whether --pp-size combines with attention "
                             "data parallelism; check before relying on it")
        if attn_dp > 1 and any("--speculative-algorithm STANDALONE" in f for f in extra):
            # sglang 0.5.23 srt/arg_groups/speculative_hook.py refuses STANDALONE with DP attention
            notes.append("SGLang 0.5.23 refuses a draft model (--speculative-algorithm "
                         "STANDALONE) with DP attention (--attn-dp-size): this command will not "
                         "start; search without --spec draft:MODEL, or with tp-only strategies")
        if ep_size > 1:
            notes.append(f"--ep-size {ep_size}: experts in {ep_size} groups, " +
                         (f"each expert tensor-parallel over {stage // ep_size} GPUs"
                          if stage > ep_size else "whole experts on every GPU") +
                         ("; keep the default --moe-a2a-backend none: the all-to-all backends "
                          "reset --ep-size to --tp-size"
                          if ep_size < stage else ""))   # sglang 0.5.23 arg_groups/overrides.py
        gpus = int(instance_gpus(row))
        if gpus <= topo.gpus_per_host:
            return [(f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", join(base, tail))], notes
        n = nodes(gpus, topo.gpus_per_host)
        multi = f"--nnodes {n} --dist-init-addr {HEAD_IP}:{DIST_INIT_PORT} --node-rank"
        notes.append(f"multi-node: {n} nodes x {gpus // n} GPUs; every node runs the same command "
                     "with its own --node-rank")
        return [(f"head node (node rank 0 of {n})", join(base, tail, f"{multi} 0")),
                (workers(n), join(base, tail, f"{multi} {NODE_RANK}"))], notes

    def disagg_command(self, pool: str, cmd: str, first: int, size: int, port: int, k: int,
                       host: str, one_node: bool) -> str:
        # --host: SGLang binds 127.0.0.1 by default (sglang 0.5.23 server_args.py host), which a
        # router on another node cannot reach
        extra = [f"--disaggregation-mode {pool}", "--disaggregation-transfer-backend nixl",
                 f"--host 0.0.0.0 --port {port}"]
        if one_node and first:
            extra.append(f"--base-gpu-id {first}")
        if pool == "prefill":
            extra.append(f"--disaggregation-bootstrap-port {BOOTSTRAP_PORT + k}")
        return " ".join([cmd] + extra)

    def router(self, endpoints: dict, head: str) -> str:
        pre, dec = endpoints["prefill"], endpoints["decode"]
        return " ".join(["python -m sglang_router.launch_router --pd-disaggregation",
                         *(f"--prefill http://{h}:{p} {b}" for h, p, b in pre),
                         *(f"--decode http://{h}:{p}" for h, p, _ in dec),
                         f"--host 0.0.0.0 --port {ROUTER_PORT}"])

    def transport_note(self) -> str:
        return ("the KV cache moves with NIXL (pip install nixl); for Mooncake, the default, use "
                "--disaggregation-transfer-backend mooncake --disaggregation-ib-device DEVICE; "
                "the router is pip install sglang-router")


LAUNCHER = SGLang()
