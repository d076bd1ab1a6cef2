"""Launch commands for vLLM, SGLang and TensorRT-LLM from a strategy row (``lts search --emit``).

An engine runs a few fixed per-op shardings (``lts.enginespace``): Megatron's tensor parallelism
(lts's MEGATRON row), plus its own expert-parallel and attention-data-parallel options. This module maps an lts strategy
(tp, ep, pp, batch, per-op choices) onto an engine's flags when the engine can run it, says so
when it cannot, and then emits the nearest strategy the engine does run, costed with the same
model: never a silently different command.

How lts's degrees map (one instance = tp*ep*pp GPUs; DESIGN.md §2: attention and dense parts are
tensor-sharded in each tp group and data-parallel across the ep groups, experts spread over ep
and each expert sharded over its tp group, or with ffn1/ffn2 = ``experts`` whole experts split
over the tp group too):

- vLLM (``vllm serve``): ``--tensor-parallel-size tp --pipeline-parallel-size pp``; ep > 1 is
  ``--data-parallel-size ep`` (attention data parallel, one engine per DP rank). vLLM's MoE layers
  form one group of DP x TP GPUs: tensor-parallel by default, expert-parallel (whole experts) with
  ``--enable-expert-parallel`` (vllm 0.33.0 vllm/model_executor/layers/fused_moe/config.py,
  FusedMoEParallelConfig.make: the MoE TP group is flattened across DP, and EP takes it whole).
  So ep > 1 runs only as ffn1/ffn2 = experts (or tp = 1), and ep = 1 with ffn1/ffn2 = experts is
  ``--tensor-parallel-size tp --enable-expert-parallel``. ``--max-num-seqs`` applies per DP rank.
- SGLang (``python -m sglang.launch_server``): its TP group is every GPU of a pipeline stage, so
  ``--tp-size tp*ep``. ep > 1 is DP attention: ``--attn-dp-size ep``, which gives attention TP of
  tp_size / attn_dp_size = tp per DP group (sglang 0.5.23 sglang/srt/runtime_context.py
  derive_parallel_widths; the older ``--dp-size ep --enable-dp-attention`` is deprecated and
  resolved to the same layout, sglang/srt/arg_groups/parallel_hook.py), with
  ``--enable-dp-lm-head`` so the LM head is vocab-sharded inside each attention TP group as lts
  shards it in each tp group. Experts: ``--ep-size E`` splits the experts into E groups and
  tensor-shards each expert over tp_size / E GPUs (moe_tp_size = tp_size / ep_size, same file).
  lts's Megatron FFN (experts over ep, each sharded over tp) is E = ep; ffn1/ffn2 = experts (whole
  experts over all tp*ep GPUs) is E = tp*ep; no ``--ep-size`` is MoE TP over the whole stage,
  which is lts's ep = 1 Megatron. ``--max-running-requests`` is the total over DP ranks.
- TensorRT-LLM (``trtllm-serve``): ``--tp_size T --pp_size pp --ep_size E``, the MoE layer split
  into E expert groups of T / E tensor-parallel GPUs (parallel-strategy.md: moe_tp x moe_ep =
  tp_size). Attention is tensor-parallel over all T GPUs, or data-parallel with every GPU its own
  rank (``enable_attention_dp: true`` in the ``--extra_llm_api_options`` YAML). lts's ep > 1 runs
  only with tp = 1 (``--tp_size ep --ep_size ep`` + attention DP) or as data-parallel attention
  (below); tp > 1 with ep > 1 and attention TP inside DP groups has no TensorRT-LLM equivalent.
  ``--max_batch_size`` is per rank, so per attention-DP rank under attention DP.

Data-parallel attention with tensor-parallel experts (``strategy.DP_ATTENTION`` at tp > 1, a MoE:
every rank of the tp group runs whole attention on its own requests, experts sharded over tp,
``enginespace.attention_dp``): vLLM ``--tensor-parallel-size 1 --data-parallel-size tp`` without
expert parallelism (ep = 1 only); SGLang ``--tp-size tp*ep --attn-dp-size tp*ep [--ep-size ep]``;
TensorRT-LLM ``--tp_size tp*ep --ep_size ep`` + ``enable_attention_dp``.

With tp = 1 the per-op choices have nothing to shard (a group of one), so every choice is the
engine's own sharding. The engine versions and the files the flags were read from are each
engine's (``Engine.flags_version``, ``Engine.flags_docs`` in ``lts.engines``); every flag emitted
is checked against the flag lists in tests/data/engine_flags/ (tests/test_engine_flags.py;
docs/engines.md "Launch flags").


Imports: strategy, specs, costmodel (Result), engines (the registry, space), exact_engine (the
engine's optimum), workload, problems (Problem, ServeProblem).
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cost.model import Result
from ..engines import REAL_ENGINES, get, sglang
from ..engines.space import attention_dp, check, engine_variants
from ..search.exact_engine import search_engine_exact
from ..search.problems import Problem, ServeProblem
from ..specs import ModelSpec, TopologySpec, shipped_names
from ..specs.strategy import (EP, EXPERTS, MEGATRON, N_COARSE, OP_COL, PP, TP,
                       format_strategy)
from ..specs.workload import Workload


# shipped short names -> the HuggingFace repository their config.json (and shape) comes from
HF_NAMES = {
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "llama3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama3.1-70b": "meta-llama/Llama-3.1-70B",
    "llama3.1-405b": "meta-llama/Llama-3.1-405B",
}
NO_CHECKPOINT = ("moe1.6t", "moe1.2t")    # the paper's synthetic models: no weights exist
PLACEHOLDER = "PATH/TO/CHECKPOINT"
NATIVE_WEIGHTS = {"deepseek-v3": "fp8"}    # shipped checkpoints not stored in bf16

HEAD_IP, NODE_RANK = "$HEAD_IP", "$NODE_RANK"        # shell variables the user sets per node
SGLANG_PORT, VLLM_DP_RPC_PORT, RAY_PORT = 50000, 13345, 6379
TRTLLM_YAML = "lts-trtllm.yaml"


@dataclass
class Launch:
    """What ``--emit ENGINE`` prints: the commands, and how they relate to the best strategy.

    ``strategy`` is the row the commands run: the best itself when ``faithful``, else the nearest
    runnable one (``chosen`` says which); ``result`` is its estimate (one-row Result).
    """
    engine: str
    version_checked: str
    docs: str
    faithful: bool
    best: np.ndarray                      # the strategy the search found
    best_result: Result | None            # its estimate
    strategy: np.ndarray | None           # what the commands run (None: nothing runnable)
    result: Result | None
    chosen: str                           # best | same_degrees | best_runnable | none
    commands: list = field(default_factory=list)   # (role, command) pairs
    notes: list = field(default_factory=list)
    reasons: list = field(default_factory=list)    # why the engine cannot run the best
    same_degrees: Result | None = None    # the engine's sharding at the best's tp/ep/pp/batch
    best_runnable: Result | None = None   # the best strategy the engine runs, over the space
    replicas: int = 1                     # copies of the launched instance the budget holds

    @property
    def name(self) -> str:
        return get(self.engine).label


# ----------------------------------------------------------------------------------------------
# the engine's runnable alternatives to a strategy

def _pick(res: Result) -> int:
    """Index of the best row of a Result: valid first, then tokens/s/GPU."""
    score = np.where(res.valid, res.tokens_per_s_per_gpu, -np.inf)
    if np.isfinite(score).any():
        return int(np.argmax(score))
    return int(np.argmax(np.nan_to_num(res.tokens_per_s_per_gpu, nan=-np.inf)))


def same_degrees(engine: str, problem: Problem, row) -> Result | None:
    """The engine's best per-op sharding at ``row``'s tp/ep/pp/batch (None: not runnable)."""
    row = np.asarray(row, dtype=np.int64)
    variants = engine_variants(engine, problem.model, int(row[TP]), int(row[EP]))
    if not variants:
        return None
    rows = np.array([[*row[:N_COARSE], *v] for v in variants], dtype=np.int64)
    res = problem.evaluate_rows(rows)
    i = _pick(res)
    return problem.evaluate_rows(rows[i:i + 1])


def best_runnable(engine: str, problem: Problem) -> Result | None:
    """The best valid strategy the engine runs: the exact optimum of its space
    (``exact_engine.search_engine_exact``) on the same problem. No evaluator call is counted."""
    with problem.in_space(engine):
        return search_engine_exact(problem, top=1).evaluated


# ----------------------------------------------------------------------------------------------
# the model argument -> what the engine loads

def _model_key(model_arg: str) -> str | None:
    """The shipped short name behind a model argument (a name or a shipped file's path)."""
    names = set(shipped_names("models")) | set(HF_NAMES) | set(NO_CHECKPOINT)
    if model_arg in names:
        return model_arg
    p = Path(model_arg)
    if p.suffix == ".toml" and p.stem in names:
        return p.stem
    return None


def model_reference(model_arg: str) -> tuple:
    """(what to pass the engine, a note or None): the HuggingFace repository of a shipped model,
    the folder of a ``.json`` config file (any name: engines load a folder or a HuggingFace id,
    never a config file's path), a placeholder where no checkpoint is known."""
    key = _model_key(model_arg)
    if key in HF_NAMES:
        return HF_NAMES[key], None
    if key in NO_CHECKPOINT:
        return PLACEHOLDER, (f"{key} is the paper's synthetic model: no checkpoint is "
                             f"published; replace {PLACEHOLDER} with your weights")
    p = Path(model_arg)
    if p.suffix.lower() == ".json":
        folder = str(p.parent)
        if p.name == "config.json":
            return folder, None
        return folder, (f"the engine loads the folder {folder} (its config.json and weights), "
                        f"not {p.name}: lts read the shape from that file only")
    if p.suffix == ".toml":
        return PLACEHOLDER, (f"{model_arg} describes the model's shape only; replace "
                             f"{PLACEHOLDER} with the checkpoint (a HuggingFace repository "
                             "or folder)")
    return model_arg, None


# ----------------------------------------------------------------------------------------------
# commands

def _nodes(gpus: int, per_node: int) -> int:
    """Nodes for one instance: the fewest that split it evenly with at most per_node each."""
    n = max(1, math.ceil(gpus / per_node))
    while gpus % n:
        n += 1
    return n


def _workers(n: int) -> str:
    """The role of the nodes other than the head."""
    return "the worker node (NODE_RANK=1)" if n == 2 else f"each worker node (NODE_RANK=1..{n - 1})"


def _join(*parts) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


def _precision_flags(engine: str, model: ModelSpec, key, precision) -> tuple:
    """(flags, notes) for an lts --precision override."""
    if not precision:
        return [], []
    native = NATIVE_WEIGHTS.get(key, "bf16")
    # --quantization fp8: vllm 0.33.0 vllm/model_executor/layers/quantization/__init__.py,
    # sglang 0.5.23 sglang/srt/arg_groups/choices.py; --kv-cache-dtype fp8 (vllm/config/cache.py
    # CacheDType) and fp8_e4m3 (sglang/srt/arg_groups/fields/model.py kv_cache_dtype choices):
    # the engines with an fp8_kv_dtype
    kv_dtype = get(engine).fp8_kv_dtype
    if precision == "fp8" and kv_dtype:
        flags = [] if native == "fp8" else ["--quantization fp8"]
        flags.append("--kv-cache-dtype " + kv_dtype)
        return flags, [f"lts costed {precision} weights and KV cache (--precision): the command "
                       "quantizes " + ("the KV cache" if native == "fp8" else
                                       "the weights on load and the KV cache")]
    return [], [f"lts costed {precision} weights and KV cache (--precision): the command does "
                f"not set that; serve a checkpoint stored in {precision}"]


def _vllm(model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str, extra: list,
          max_len: int):
    tp, ep, pp, batch = (int(v) for v in row[:N_COARSE])
    gpn = topo.gpus_per_node
    dp_attention = bool(attention_dp(model, row)[0])
    if dp_attention:   # vLLM's DP ranks of one GPU each; its MoE is then TP over all of them
        tp, ep = 1, tp
    seqs = math.ceil(batch / ep)
    expert_parallel = model.is_moe and not dp_attention and (
        ep > 1 or (tp > 1 and row[OP_COL["ffn1"]] == EXPERTS))
    # every flag below: vllm 0.33.0 vllm/engine/arg_utils.py EngineArgs.add_cli_args, or
    # vllm/entrypoints/common/cli_args.py make_arg_parser (--headless)
    base = _join("vllm serve", ref, f"--tensor-parallel-size {tp}",
                 f"--pipeline-parallel-size {pp}" if pp > 1 else "",
                 "--enable-expert-parallel" if expert_parallel else "")
    tail = _join(f"--max-num-seqs {seqs}", f"--max-model-len {max_len}", *extra)
    notes = []
    if dp_attention:
        notes.append(f"lts's tp={ep} with data-parallel attention: vLLM's --data-parallel-size "
                     f"{ep} of one GPU each, whose MoE layers are tensor-parallel over all {ep} "
                     "GPUs without --enable-expert-parallel (vllm 0.33.0 model_executor/layers/"
                     "fused_moe/config.py FusedMoEParallelConfig.make)")
    elif ep > 1:
        notes.append(f"lts's ep={ep} attention groups are vLLM's data-parallel ranks, and "
                     f"--enable-expert-parallel spreads whole experts over all DP x TP = "
                     f"{tp * ep} GPUs, as lts does with ffn1/ffn2 = experts")
    if ep > 1:
        notes.append(f"--max-num-seqs applies per DP rank: lts's batch {batch} over {ep} ranks = "
                     f"{seqs} each" + (" (rounded up)" if batch % ep else ""))
    elif expert_parallel:
        notes.append(f"--enable-expert-parallel: whole experts over the {tp} tensor-parallel GPUs "
                     "(lts: ffn1/ffn2 = experts); attention stays tensor-parallel")
    gpus = tp * ep * pp
    if gpus <= gpn:
        cmd = _join(base, f"--data-parallel-size {ep}" if ep > 1 else "", tail)
        return [(f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", cmd)], notes
    rank = tp * pp                                  # GPUs of one DP rank
    if ep == 1:
        n = _nodes(gpus, gpn)
        multi = f"--nnodes {n} --node-rank"
        cmds = [(f"head node (node rank 0 of {n})",
                 _join(base, tail, f"{multi} 0 --master-addr {HEAD_IP}")),
                (_workers(n),
                 _join(base, tail, f"{multi} {NODE_RANK} --master-addr {HEAD_IP} --headless"))]
        notes.append(f"multi-node: {n} nodes x {gpus // n} GPUs, vLLM's multiprocessing backend "
                     "(--nnodes, documented from v0.13.0); older vLLM: start Ray (ray start "
                     f"--head on the head, ray start --address=HEAD_IP:{RAY_PORT} on the "
                     "others) and run the head command alone without --nnodes/--node-rank/"
                     "--master-addr, adding --distributed-executor-backend ray")
        return cmds, notes
    if rank <= gpn:
        local = max(d for d in range(1, gpn // rank + 1) if ep % d == 0)
        n = ep // local
        dp = (f"--data-parallel-size {ep} --data-parallel-size-local {local} "
              f"--data-parallel-address {HEAD_IP} --data-parallel-rpc-port {VLLM_DP_RPC_PORT}")
        cmds = [(f"head node (DP ranks 0..{local - 1}; {n} nodes)", _join(base, dp, tail)),
                (_workers(n),
                 _join(base, dp, f"--data-parallel-start-rank $(({NODE_RANK} * {local}))",
                       "--headless", tail))]
        notes.append(f"multi-node data parallel: {n} nodes with {local} DP rank"
                     f"{'s' if local > 1 else ''} of {rank} GPU{'s' if rank > 1 else ''} each; "
                     "the API server runs on the head node only")
        return cmds, notes
    cmds = [("head node: start Ray", f"ray start --head --port={RAY_PORT}"),
            ("each worker node: join Ray", f"ray start --address={HEAD_IP}:{RAY_PORT}"),
            ("head node: launch (after every node joined)",
             _join("VLLM_RAY_DP_PACK_STRATEGY=span", base, f"--data-parallel-size {ep}",
                   "--data-parallel-backend ray", tail))]
    notes.append(f"one DP rank ({rank} GPUs) spans nodes: vLLM's Ray data-parallel backend with "
                 "VLLM_RAY_DP_PACK_STRATEGY=span places the ranks (data_parallel_deployment.md)")
    return cmds, notes


def _sglang(model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str, extra: list,
            key, max_len: int):
    tp, ep, pp, batch = (int(v) for v in row[:N_COARSE])
    stage = tp * ep                                   # SGLang's tp size: a whole stage
    experts = tp > 1 and row[OP_COL["ffn1"]] == EXPERTS
    ep_size = 1
    if model.is_moe and stage > 1:
        ep_size = stage if (experts or tp == 1) else ep
    dp_attention = bool(attention_dp(model, row)[0])
    attn_dp = stage if dp_attention else ep           # attention-DP ranks (attention TP 1 or tp)
    # sglang 0.5.23 sglang/srt/arg_groups/fields/parallel.py: --tp-size, --attn-dp-size,
    # --ep-size, --pp-size, --enable-dp-lm-head (full names: argparse abbreviations like --tp
    # break as soon as a new flag shares the prefix)
    base = _join("python -m sglang.launch_server", f"--model-path {ref}", f"--tp-size {stage}",
                 f"--attn-dp-size {attn_dp} --enable-dp-lm-head" if attn_dp > 1 else "",
                 f"--ep-size {ep_size}" if ep_size > 1 else "",
                 f"--pp-size {pp}" if pp > 1 else "")
    tail = _join(f"--max-running-requests {batch}", f"--context-length {max_len}", *extra)
    notes = []
    if attn_dp > 1:
        attn = (f"tensor-parallel over {tp} GPUs in each of {ep} data-parallel groups"
                if tp > 1 and not dp_attention else
                f"data-parallel over {attn_dp} GPUs, one per group")
        notes.append(f"--tp-size {stage} --attn-dp-size {attn_dp}: attention {attn} (SGLang: "
                     "attention TP = tp-size / attn-dp-size); --max-running-requests is the total "
                     "over the DP ranks; SGLang before --attn-dp-size (0.5.23 deprecates the old "
                     f"form): --dp-size {attn_dp} --enable-dp-attention")
        if key not in sglang.DP_ATTENTION_MODELS:
            notes.append("SGLang's docs name DP attention for DeepSeek-V2/V3 and Qwen2/3-MoE "
                         "models; check that this model's SGLang implementation supports it")
        if pp > 1:
            notes.append("SGLang's docs do not say whether --pp-size combines with attention "
                         "data parallelism; check before relying on it")
    if ep_size > 1:
        notes.append(f"--ep-size {ep_size}: experts in {ep_size} groups, " +
                     (f"each expert tensor-parallel over {stage // ep_size} GPUs"
                      if stage > ep_size else "whole experts on every GPU") +
                     ("; keep the default --moe-a2a-backend none: the all-to-all backends "
                      "reset --ep-size to --tp-size"
                      if ep_size < stage else ""))   # sglang 0.5.23 arg_groups/overrides.py
    gpus = stage * pp
    if gpus <= topo.gpus_per_node:
        return [(f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", _join(base, tail))], notes
    n = _nodes(gpus, topo.gpus_per_node)
    multi = f"--nnodes {n} --dist-init-addr {HEAD_IP}:{SGLANG_PORT} --node-rank"
    notes.append(f"multi-node: {n} nodes x {gpus // n} GPUs; every node runs the same command "
                 "with its own --node-rank")
    return [(f"head node (node rank 0 of {n})", _join(base, tail, f"{multi} 0")),
            (_workers(n), _join(base, tail, f"{multi} {NODE_RANK}"))], notes


def _trtllm(model: ModelSpec, topo: TopologySpec, work: Workload, row, ref: str, extra: list,
            max_len: int, serve=None):
    tp, ep, pp, batch = (int(v) for v in row[:N_COARSE])
    size = tp * ep                # ep > 1 only with tp = 1 or data-parallel attention
    experts = tp > 1 and row[OP_COL["ffn1"]] == EXPERTS
    dp_attention = bool(attention_dp(model, row)[0])
    adp = ep > 1 or dp_attention                      # every GPU its own attention rank
    per_rank = math.ceil(batch / (size if adp else 1))
    tokens = max(per_rank, work.context) if work.phase == "decode" else per_rank * work.context
    if serve is not None:        # the serve phase: the token budget per step its profile assumed
        tokens = serve.engine.step_tokens
        if serve.isl > tokens:
            extra = ["--enable_chunked_prefill"] + list(extra)
    # flags: tensorrt_llm/commands/serve.py's serve command (--tp_size, --pp_size, --ep_size,
    # --max_batch_size, --max_num_tokens, --max_seq_len, --extra_llm_api_options,
    # --enable_chunked_prefill); enable_attention_dp: tensorrt_llm/llmapi/llm_args.py BaseLlmArgs
    ep_flag = ""
    if model.is_moe:   # moe_ep x moe_tp = tp_size: data-parallel attention keeps moe_tp = tp
        ep_flag = f"--ep_size {ep if dp_attention else size if (experts or ep > 1) else 1}"
    base = _join("trtllm-serve", ref, f"--tp_size {size}", f"--pp_size {pp}" if pp > 1 else "",
                 ep_flag, f"--max_batch_size {per_rank}", f"--max_num_tokens {tokens}",
                 f"--max_seq_len {max_len}",
                 f"--extra_llm_api_options {TRTLLM_YAML}" if adp else "", *extra)
    cmds, notes = [], []
    if adp:
        cmds.append(("config file (every node, before launching)",
                     f"printf 'enable_attention_dp: true\\n' > {TRTLLM_YAML}"))
        what = (f"--ep_size {ep}: experts in {ep} group{'s' if ep > 1 else ''}, each "
                f"tensor-parallel over {tp} GPUs (lts tp={tp}, ep={ep} with data-parallel "
                "attention)" if dp_attention else
                f"--ep_size {size} puts whole experts on each GPU (lts tp=1, ep={ep})")
        notes.append(f"enable_attention_dp: every GPU is its own attention rank; {what}; "
                     f"--max_batch_size is per rank: lts's batch {batch} over {size} ranks")
    elif experts:
        notes.append(f"--ep_size {size}: whole experts over the {size} GPUs (lts: ffn1/ffn2 = "
                     "experts); attention stays tensor-parallel")
    notes.append(f"--max_num_tokens {tokens}: " +
                 ("the tokens per step (decode tokens and prompt chunks) the serve phase "
                  f"assumed ({serve.engine.title})" if serve is not None else
                  f"one decode step of the batch, or one whole prompt of {work.context} tokens"
                  if work.phase == "decode" else "lts costs the whole prompts in one pass"))
    gpus = size * pp
    if gpus <= topo.gpus_per_node:
        cmds.append((f"single node ({gpus} GPU{'s' if gpus > 1 else ''})", base))
        return cmds, notes
    n = _nodes(gpus, topo.gpus_per_node)
    cmds.append((f"all {n} nodes: one Slurm job step",
                 f"srun -N {n} --ntasks {gpus} --ntasks-per-node {gpus // n} --mpi=pmix "
                 f"--gres=gpu:{gpus // n} trtllm-llmapi-launch {base}"))
    notes.append(f"multi-node: TensorRT-LLM starts all {gpus} ranks as one MPI job "
                 "(trtllm-llmapi-launch under srun or mpirun), not one command per node; add your "
                 "cluster's container and mount flags to srun")
    return cmds, notes


def commands(engine: str, model: ModelSpec, topo: TopologySpec, work: Workload, row,
             model_arg: str, precision: str | None = None, serve=None,
             max_len: int | None = None) -> tuple:
    """(list of (role, command), notes) that run ``row`` on the engine (which must run it);
    ``serve``: the ServeProblem when the row was found for the serve phase; ``max_len``: the
    engine's limit on a request's tokens (default: the workload's context)."""
    ref, ref_note = model_reference(model_arg)
    key = _model_key(model_arg)
    ref = shlex.quote(ref)
    extra, notes = _precision_flags(engine, model, key, precision)
    max_len = max_len or work.context
    if engine == "vllm":
        cmds, more = _vllm(model, topo, work, row, ref, extra, max_len)
    elif engine == "sglang":
        cmds, more = _sglang(model, topo, work, row, ref, extra, key, max_len)
    else:
        cmds, more = _trtllm(model, topo, work, row, ref, extra, max_len, serve)
    notes = ([ref_note] if ref_note else []) + more + notes
    if any(HEAD_IP in c for _, c in cmds):
        notes.append("set HEAD_IP to the head node's address on every node"
                     + (" and NODE_RANK to the node's index on each worker"
                        if any(NODE_RANK in c for _, c in cmds) else ""))
    if int(row[PP]) > 1:
        notes.append(f"lts costs the batch as {int(row[PP])} pipeline micro-batches; the engine "
                     "schedules its own")
    if work.phase == "prefill" and get(engine).chunked_prefill:
        notes.append("lts costs each prompt in one pass; the engine's chunked prefill may split it")
    return cmds, notes


# ----------------------------------------------------------------------------------------------
# the whole answer

def launch(engine: str, problem: Problem, best, model_arg: str,
           precision: str | None = None, best_result: Result | None = None) -> Launch:
    """Commands that run ``best`` on the engine, or, when the engine cannot run it, the nearest
    runnable strategy: the same tp/ep/pp/batch with the engine's per-op sharding, or the best
    runnable strategy overall when that is faster (or the degrees themselves are not runnable).
    ``best_result``: ``best`` already evaluated (one row; by default it is evaluated here).
    """
    if engine not in REAL_ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    model, topo, work = problem.model, problem.topo, problem.work
    best = np.asarray(best, dtype=np.int64)
    reasons = check(engine, model, best)
    if best_result is None:
        best_result = problem.evaluate_rows(best[None])
    eng = get(engine)
    out = Launch(engine, eng.flags_version, eng.flags_docs, not reasons, best, best_result, None,
                 None, "none", reasons=reasons)
    if not reasons:
        out.strategy, out.chosen, out.result = best, "best", out.best_result
        if int(best[TP]) == 1 and tuple(int(c) for c in best[N_COARSE:]) != MEGATRON:
            out.notes.append("tp=1: the per-op choices have nothing to shard, so the engine's own "
                             "sharding is this strategy")
        out.best_runnable = best_runnable(engine, problem)
        better = out.best_runnable
        if better is not None and out.result.valid[0] and \
                better.tokens_per_s_per_gpu[0] > 1.005 * out.result.tokens_per_s_per_gpu[0]:
            out.notes.append(
                f"{out.name} runs a faster strategy than this one: "
                f"{format_strategy(better.strategies[0], only_changed=True)} at "
                f"{better.tokens_per_s_per_gpu[0]:,.1f} tokens/s/GPU against "
                f"{out.result.tokens_per_s_per_gpu[0]:,.1f} (a larger --budget or --method "
                "exact may find it)")
    else:
        out.same_degrees = same_degrees(engine, problem, best)
        out.best_runnable = best_runnable(engine, problem)
        same, overall = out.same_degrees, out.best_runnable
        if same is not None and same.valid[0] and (
                overall is None or same.tokens_per_s_per_gpu[0] >= overall.tokens_per_s_per_gpu[0]):
            out.result, out.chosen = same, "same_degrees"
        elif overall is not None:
            out.result, out.chosen = overall, "best_runnable"
        elif same is not None:
            out.result, out.chosen = same, "same_degrees"
        if out.result is not None:
            out.strategy = out.result.strategies[0]
    if out.strategy is None:
        out.notes.append(f"no strategy {out.name} runs is feasible here (memory, SLO or budget); "
                         "nothing to launch")
        return out
    if not out.result.valid[0]:
        out.notes.append("the launched strategy is invalid in lts's estimate: "
                         + ", ".join(out.result.reason_list(0)))
    cmds, notes = commands(engine, model, topo, work, out.strategy, model_arg, precision,
                           problem if isinstance(problem, ServeProblem) else None)
    out.commands = cmds
    out.notes += notes
    budget, size = work.budget(topo), int(out.result.gpus[0])
    out.replicas = budget // size
    if out.replicas > 1:
        out.notes.append(
            f"the budget of {budget:,} GPUs holds {out.replicas:,} copies of this {size}-GPU "
            "instance (the figures lts ranks by: tokens/s per GPU of the budget): launch each "
            "copy on its own GPUs (its own CUDA_VISIBLE_DEVICES or nodes, its own port) and put "
            "one load balancer in front of them (any HTTP balancer: the copies share nothing)"
            + (f"; {budget - out.replicas * size} GPU{'s' if budget - out.replicas * size > 1 else ''} "
               "stay idle" if budget % size else ""))
    return out
