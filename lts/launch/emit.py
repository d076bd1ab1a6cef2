"""Launch commands for vLLM, SGLang and TensorRT-LLM from a strategy row (``lts search --emit``).

An engine runs a few fixed per-op shardings (``lts.engines.space``): Megatron's tensor
parallelism (lts's MEGATRON row), plus its own expert-parallel and attention-data-parallel
options. This module maps an lts strategy (tp, ep, pp, batch, per-op choices) onto an engine's
flags when the engine can run it, says so when it cannot, and then emits the nearest strategy the
engine does run, costed with the same model: never a silently different command. Each engine's
command lines are written by its launcher (``LAUNCHERS``: lts/launch/vllm.py, sglang.py,
trtllm.py).

How lts's degrees map (one instance = tp*ep*pp GPUs; docs/design.md §2: attention and dense parts are
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
``engines.space.attention_dp``): vLLM ``--tensor-parallel-size 1 --data-parallel-size tp`` without
expert parallelism (ep = 1 only); SGLang ``--tp-size tp*ep --attn-dp-size tp*ep [--ep-size ep]``;
TensorRT-LLM ``--tp_size tp*ep --ep_size ep`` + ``enable_attention_dp``.

With tp = 1 the per-op choices have nothing to shard (a group of one), so every choice is the
engine's own sharding. The engine versions and the files the flags were read from are each
engine's (``Engine.flags_version``, ``Engine.flags_docs`` in ``lts.engines``); every flag emitted
is checked against the flag lists in tests/data/engine_flags/ (tests/test_engine_flags.py;
docs/engines.md "Launch flags").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cost.model import Result
from ..engines import REAL_ENGINES, get
from ..engines.space import check, engine_variants
from ..search.exact_engine import search_engine_exact
from ..search.problems import Problem, ServeProblem
from ..specs import ModelSpec, TopologySpec, shipped_names
from ..specs.strategy import (EP, MEGATRON, PP, TP, choices_of, coarse_of, coarse_rows,
                              format_strategy)
from ..specs.workload import Workload
from . import sglang, trtllm, vllm
from ..specs.units import FORMAT_ALIASES
from .checkpoints import CHECKPOINTS, checkpoint_for
from .launcher import HEAD_IP, NODE_RANK, quote, spec_notes, speculation


NO_CHECKPOINT = ("moe1.6t", "moe1.2t")    # the paper's synthetic models: no weights exist
# where lts knows no checkpoint, the commands load $CHECKPOINT, which the user sets (a note says so)
PLACEHOLDER = "$CHECKPOINT"
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.gguf")     # what makes a folder a checkpoint

# each engine's launcher (its module in lts/launch/), by the engine's name
LAUNCHERS = {x.name: x for x in (vllm.LAUNCHER, sglang.LAUNCHER, trtllm.LAUNCHER)}


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
    """The engine's best per-op sharding at ``row``'s coarse values (degrees and batch; None:
    not runnable)."""
    row = np.asarray(row, dtype=np.int64)
    variants = engine_variants(engine, problem.model, int(row[TP]), int(row[EP]))
    if not variants:
        return None
    rows = np.concatenate([coarse_rows(coarse_of(row), v) for v in variants])
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

def model_key(model_arg: str) -> str | None:
    """The shipped short name behind a model argument (a name or a shipped file's path)."""
    names = set(shipped_names("models")) | set(NO_CHECKPOINT)
    if model_arg in names:
        return model_arg
    p = Path(model_arg)
    if p.suffix == ".toml" and p.stem in names:
        return p.stem
    return None


def model_reference(model_arg: str, weights: str | None = None) -> tuple:
    """(what to pass the engine, a note or None) for a model argument: ``checkpoint``'s first
    two."""
    return checkpoint(model_arg, weights)[:2]


def checkpoint(model_arg: str, weights: str | None = None) -> tuple:
    """(what the engine loads, a note or None, the weight format it stores or None when lts
    cannot tell): a shipped model's HuggingFace repository (``checkpoints``), the one storing
    ``weights`` where one is published, else the model's own; the folder of a ``.json`` config
    file when it holds weights (engines load a folder or a HuggingFace id, never a config
    file's path); else ``$CHECKPOINT``, with a note saying why and to set it."""
    key = model_key(model_arg)
    if key in CHECKPOINTS:
        own = CHECKPOINTS[key][0]
        found = checkpoint_for(key, FORMAT_ALIASES.get(weights, weights)) if weights else None
        if found is None or found == own:
            return own.repo, None, own.weights
        held = (f"holds {found.other}'s weights (the shapes lts costed, not {key}'s own "
                "weights)" if found.other else f"is {key}'s published {found.weights} checkpoint")
        return found.repo, (f"{found.repo} {held}: lts costed {found.weights} weights, and "
                            f"the model's own repository, {own.repo}, stores {own.weights}"), \
            found.weights
    if key in NO_CHECKPOINT:
        return PLACEHOLDER, (f"{key} is the paper's synthetic model: no checkpoint is "
                             "published; set CHECKPOINT to your weights (a folder or a "
                             "HuggingFace repository) before running the commands"), None
    p = Path(model_arg)
    if p.suffix.lower() == ".json" or p.is_dir():
        folder = str(p.parent if p.suffix.lower() == ".json" else p)
        if not any(any(Path(folder).glob(g)) for g in WEIGHT_FILES):
            return PLACEHOLDER, (f"{folder} holds a config but no weights "
                                 f"({', '.join(WEIGHT_FILES)}), so no engine can load it: set "
                                 "CHECKPOINT to the checkpoint (its folder or HuggingFace "
                                 "repository) before running the commands"), None
        if p.suffix.lower() == ".json" and p.name != "config.json":
            return folder, (f"the engine loads the folder {folder} (its config.json and "
                            f"weights), not {p.name}: lts read the shape from that file "
                            "only"), None
        return folder, None, None
    if p.suffix == ".toml":
        return PLACEHOLDER, (f"{model_arg} describes the model's shape only and names no "
                             "checkpoint: set CHECKPOINT to one (a HuggingFace repository or "
                             "folder) before running the commands"), None
    return model_arg, None, None


# ----------------------------------------------------------------------------------------------
# commands

def _precision_flags(engine: str, model: ModelSpec, stored, precision) -> tuple:
    """(flags, notes) that make the engine run the weights lts costed (``model.precision``):
    nothing when the checkpoint stores them (``stored``); vLLM's and SGLang's ``--quantization
    fp8`` (quantized on load) for fp8 from a higher precision; else a note that the command
    serves another format. ``stored`` None (a folder of the user's): only an explicit
    ``--precision`` is acted on. The KV cache's flag is ``_kv_cache_flags``'s."""
    costed = model.precision.weights
    if stored is None and not precision or stored == costed:
        return [], []
    kv = model.precision.kv_cache
    what = "weights and KV cache" if kv == costed else f"weights and a {kv} KV cache"
    # online fp8 (per tensor): vllm 0.33.0 --quantization fp8_per_tensor (model_executor/layers/
    # quantization/__init__.py; plain "fp8" on a bf16 checkpoint is deprecated there,
    # model_loader/weight_utils.py, and runs as fp8_per_tensor), sglang 0.5.23 --quantization
    # fp8 (srt/arg_groups/choices.py): the engines with an fp8_kv_dtype
    if costed == "fp8" and get(engine).fp8_kv_dtype and stored in (None, "bf16", "fp16",
                                                                   "fp32"):
        flag = f"--quantization {'fp8_per_tensor' if engine == 'vllm' else 'fp8'}"
        return [flag], [
            f"lts costed fp8 {what}: no fp8 checkpoint of this model is known to lts, so the "
            f"command quantizes the {stored or 'given'} weights on load ({flag})"]
    return [], [f"lts costed {costed} {what}, but no {costed} checkpoint of this model is known "
                f"to lts and {get(engine).label} does not quantize to it on load: the command "
                f"serves the {stored or 'given'} checkpoint; give it one stored in {costed}"]


def _kv_cache_flags(engine: str, model: ModelSpec, precision) -> tuple:
    """(flags, notes) for an fp8 KV cache that lts costed (``--precision fp8``,
    ``--kv-cache-dtype fp8`` or the checkpoint's ``kv_cache_quant_algo``/``kv_cache_scheme``):
    the engine's own flag (--kv-cache-dtype: vLLM ``fp8``, vllm/config/cache.py CacheDType;
    SGLang ``fp8_e4m3``, sglang/srt/arg_groups/fields/model.py kv_cache_dtype choices), else a
    note (TensorRT-LLM: its kv_cache_config reads the checkpoint's own KV quantization)."""
    if model.precision.kv_cache != "fp8":
        return [], []
    kv_dtype = get(engine).fp8_kv_dtype
    if kv_dtype:
        return ["--kv-cache-dtype " + kv_dtype], []
    return [], [f"lts costed an fp8 KV cache: the command does not set it; give "
                f"{get(engine).label} a checkpoint whose quantization config declares it, or "
                "set kv_cache_config: {dtype: fp8} in its options YAML"]


def commands(engine: str, model: ModelSpec, topo: TopologySpec, work: Workload, row,
             model_arg: str, precision: str | None = None, serve=None,
             max_len: int | None = None, flags_from=None, speculate: bool = True) -> tuple:
    """(list of (role, command), notes) that run ``row`` on the engine (which must run it);
    ``serve``: the ServeProblem when the row was found for the serve phase; ``max_len``: the
    engine's limit on a request's tokens (default: a serve problem's isl + osl, else the
    workload's context); ``flags_from``: the ServeProblem whose speculative decoding and prefix
    caching the command runs (default ``serve``; a two-pool instance's phase has none),
    ``speculate``: whether this instance runs the drafts (a decode pool's, not a prefill
    pool's)."""
    ref, ref_note, stored = checkpoint(model_arg, model.precision.weights)
    ref = quote(ref)
    key = model_key(model_arg)
    extra, notes = _precision_flags(engine, model, stored, precision)
    kv_flags, kv_notes = _kv_cache_flags(engine, model, precision)
    extra, notes = extra + kv_flags, notes + kv_notes
    # a request's whole context (a serve problem's memory workload counts only a request's own
    # tokens when a prefix cache holds the rest)
    max_len = max_len or (serve.isl + serve.osl if serve is not None else work.context)
    launcher, yaml = LAUNCHERS[engine], []
    extras = serve if flags_from is None else flags_from
    info = speculation(extras, lambda k: model_reference(k)[0]) \
        if speculate else None
    if info is not None:      # speculative decoding (serving.spec): the engine's own flags
        flags, yaml, more = launcher.spec_flags(*info)
        extra, notes = extra + flags, notes + more + spec_notes(extras)
    if serve is not None and serve.engine.name == engine:   # the scheduling its cost assumed
        flags, note = launcher.policy_flags(serve.engine)
        extra, notes = extra + flags, notes + [note]
    elif serve is not None:
        notes.append(f"lts costed the {serve.engine.title} scheduling, not {get(engine).label}'s: "
                     "the command leaves the engine's own defaults (--engine or --emit costs "
                     "the engine's)")
    if extras is not None and getattr(extras, "prefix", None) is not None:
        flags, note = launcher.prefix_flags()
        extra, notes = extra + flags, notes + [note]
        if getattr(extras, "offloads", False):     # a host tier (--kv-offload)
            flags, lines, note = launcher.offload_flags(extras.prefix.offload_bytes, model, row)
            extra, yaml, notes = extra + flags, list(yaml) + lines, notes + [note]
    cmds, more = launcher.command(model, topo, work, row, ref, extra, max_len, key, serve,
                                  yaml=yaml)
    notes = ([ref_note] if ref_note else []) + more + notes
    if any(HEAD_IP in c for _, c in cmds):
        notes.append("set HEAD_IP to the head node's address on every node"
                     + (" and NODE_RANK to the node's index on each worker"
                        if any(NODE_RANK in c for _, c in cmds) else ""))
    if int(row[PP]) > 1:
        notes.append(f"lts costs the batch as {int(row[PP])} pipeline micro-batches; the engine "
                     "schedules its own")
    if work.phase == "prefill" and get(engine).chunked_prefill:
        notes.append(f"lts costs a prompt over {work.step_tokens:,} tokens in steps of that many, "
                     "as the engine's chunked prefill splits it" if work.step_tokens else
                     "lts costs each prompt in one pass; the engine's chunked prefill may split it")
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
        if int(best[TP]) == 1 and choices_of(best) != MEGATRON:
            out.notes.append("tp=1: the per-op choices have nothing to shard, so the engine's own "
                             "sharding is this strategy")
        out.best_runnable = best_runnable(engine, problem)
        better = out.best_runnable
        if better is not None and out.result.valid[0] and \
                better.tokens_per_s_per_gpu[0] > 1.005 * out.result.tokens_per_s_per_gpu[0]:
            out.notes.append(
                f"{out.name} runs a faster strategy than this one: "
                f"{format_strategy(better.strategies[0], only_changed=True, sep=', ')} at "
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
