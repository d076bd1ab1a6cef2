"""What each serving engine runs, in lts's strategy encoding (docs/design.md §9; docs/engines.md).

An engine runs a few fixed per-op shardings, not the paper's whole per-op space, each only at the
degrees the engine can lay out (lts's ep > 1 is attention data parallelism over ep groups of tp
GPUs, the experts spread over the ep groups):

- Megatron's tensor parallelism (``strategy.MEGATRON``);
- for MoE models, its expert-parallel variant (whole experts over the tp group,
  ``strategy.EXPERT_CHOICES``);
- for MoE models, data-parallel attention with tensor-parallel experts
  (``strategy.DP_ATTENTION`` at tp > 1: every rank of the tp group runs whole attention on its
  own requests, the experts sharded over the tp group): vLLM ``--data-parallel-size tp``
  without expert parallelism (its MoE layers are tensor-parallel over the DP ranks), SGLang
  ``--tp-size tp*ep --attn-dp-size tp*ep --ep-size ep``, TensorRT-LLM ``enable_attention_dp``
  with ``--tp_size tp*ep --ep_size ep`` (moe_tp = tp).

| engine | dense | MoE, ep = 1 | MoE, ep > 1 |
|---|---|---|---|
| vLLM | Megatron | Megatron, experts, DP attention | experts only (EP = DP x TP) |
| SGLang | Megatron | Megatron, experts, DP attention | Megatron (--ep-size ep), experts, DP attention |
| TensorRT-LLM | Megatron | Megatron, experts, DP attention | tp = 1 (attention DP), or DP attention |

With tp = 1 every per-op choice acts on a group of one, so every choice is the engine's own
(the canonical form is Megatron's). ``project`` maps any strategy row onto the engine's
variant that it stands for (so a search over index rows visits only runnable rows),
``runnable`` says which rows the engine runs as written, ``runnable_on`` names the engines per
row, ``attention_dp`` marks the rows whose tp ranks are attention-DP ranks (each schedules its
own requests: ``lts.serving.serve``), and ``check`` says in words why an engine cannot run a row. Which
variants an engine runs at ep > 1 is its module's (``Engine.ep_variants``).
"""
from __future__ import annotations

import numpy as np

from ..specs import ModelSpec
from ..specs.strategy import (CHOICE_NAMES, CP, DCP, DIM0, DIM1, DP_ATTENTION, EP, ETP,
                               EXPERT_CHOICES, EXPERTS, MEGATRON, N_COARSE, NONE, OP_COL, OP_DIMS,
                               OPS, TP, coarse_of, make_row, with_experts)
from . import REAL_ENGINES, get


OP_WHAT = {"embedding": "embedding", "attn_norm": "pre-attention norm", "qkv": "QKV projection",
           "scores": "attention scores", "context": "attention context",
           "out_proj": "output projection", "ffn_norm": "pre-FFN norm", "router": "router",
           "ffn1": "up/gate projection", "ffn2": "down projection", "final_norm": "final norm",
           "lm_head": "LM head"}


# ----------------------------------------------------------------------------------------------
# what an engine runs

def variants(model: ModelSpec) -> tuple:
    """The per-op choice tuples some engine runs for this model (the engine spaces' variants)."""
    return (MEGATRON, EXPERT_CHOICES, DP_ATTENTION) if model.is_moe else (MEGATRON,)


def engine_variants(engine: str, model: ModelSpec, tp: int, ep: int) -> tuple:
    """Per-op choice tuples the engine runs at these degrees (empty: the degrees themselves are
    not runnable). tp = 1 has one: every choice costs the same over a group of one."""
    coarse = coarse_of(make_row(tp=tp, ep=ep))[None]
    return tuple(v for v in variants(model) if runnable_mask(engine, model, coarse, v)[0]
                 and (tp > 1 or v == MEGATRON))


def runnable_mask(engine: str, model: ModelSpec, coarse: np.ndarray, choices) -> np.ndarray:
    """Whether the engine runs the per-op ``choices`` at each coarse row [G, N_COARSE] -> [G]
    bool (at tp = 1 any variant: the choices shard nothing there). Every engine runs each
    variant at ep = 1, and at ep > 1 those of its ``ep_variants``."""
    coarse = np.asarray(coarse)
    tp1, ep1 = coarse[:, TP] == 1, coarse[:, EP] == 1
    cp_ok = ((coarse[:, CP] == 1) | runs_cp(engine, model)) & dcp_mask(engine, model, coarse)
    choices = tuple(int(c) for c in choices)
    if not model.is_moe:
        return ep1 & cp_ok & (coarse[:, ETP] == 1) if choices == MEGATRON \
            else np.zeros(len(coarse), bool)
    if choices not in (MEGATRON, EXPERT_CHOICES, DP_ATTENTION):
        return np.zeros(len(coarse), bool)
    if choices == DP_ATTENTION:       # attention data-parallel: no tp group of heads to split
        cp_ok = cp_ok & (coarse[:, DCP] == 1)
    # expert tensor parallelism: whole experts over the group split over etp ranks each, by an
    # engine that runs it (``Engine.runs_etp``)
    eng = get(engine)
    if not (choices == EXPERT_CHOICES and (eng.runs_etp or eng.whole_space)):
        cp_ok = cp_ok & (coarse[:, ETP] == 1)
    return cp_ok & (tp1 | (np.ones_like(ep1) if choices in get(engine).ep_variants else ep1))


def runs_cp(engine: str, model: ModelSpec) -> bool:
    """Whether the engine runs context parallelism (cp > 1) for this model's attention."""
    eng = get(engine)
    return eng.whole_space or model.attention.kind in eng.cp_kinds


def dcp_mask(engine: str, model: ModelSpec, coarse) -> np.ndarray:
    """Whether the engine runs each coarse row's decode context parallelism [G] bool (dcp = 1
    always): this model's attention kind among its ``dcp_kinds`` and, under vLLM's rule
    (``dcp_kv_rule``), a gqa model's dcp within its duplicated KV heads (vllm 0.33.0
    config/model.py verify_with_parallel_config: tp > kv heads, dcp <= tp // kv heads, and
    the query heads per KV head a multiple of dcp). A dcp that does not divide tp is the cost
    tables' (divisibility)."""
    coarse = np.asarray(coarse)
    dcp = coarse[:, DCP]
    eng, a = get(engine), model.attention
    if eng.whole_space:
        return np.ones(len(coarse), bool)
    if a.kind not in eng.dcp_kinds:
        return dcp == 1
    if not (eng.dcp_kv_rule and a.kind == "gqa"):
        return np.ones(len(coarse), bool)
    tp, kvh = coarse[:, TP], a.kv_heads
    return (dcp == 1) | ((tp > kvh) & (dcp <= tp // kvh) & ((a.heads // kvh) % dcp == 0))


# the ops whose choices make attention data-parallel over the tp ranks (all but the FFN's: the
# experts may be split by tensor, DP_ATTENTION's own, or whole over the group, EXPERTS)
_ATTENTION_OPS = np.array([op not in ("ffn1", "ffn2") for op in OPS])


def attention_dp(model: ModelSpec, rows) -> np.ndarray:
    """Rows [N, WIDTH] whose tp ranks are attention data-parallel ranks too: DP_ATTENTION's
    choices for every op but the FFN's, at tp > 1 of a MoE (each rank schedules its own
    requests in an engine) [N] bool. Attention DP 8 with the experts over the 8 (written tp=8
    with those choices, or tp=1,ep=8) is then scheduled as the same 8 ranks either way."""
    rows = np.atleast_2d(np.asarray(rows))
    if not model.is_moe:
        return np.zeros(len(rows), bool)
    att = rows[:, N_COARSE:][:, _ATTENTION_OPS] == np.asarray(DP_ATTENTION)[_ATTENTION_OPS]
    return (rows[:, TP] > 1) & att.all(axis=1)


def describe_choice(op: str, code: int) -> str:
    """``ffn2``, 1 -> "down projection sharded on hidden (column)"."""
    what = OP_WHAT[op]
    if code in (DIM0, DIM1):
        return f"{what} sharded on {OP_DIMS[op][code]}"
    if code == NONE:
        return f"{what} replicated"
    return f"{what} with whole experts split over the tp group"


def check(engine: str, model: ModelSpec, row) -> list:
    """Why the engine cannot run ``row`` as found: one sentence per reason; [] if it can."""
    row = [int(v) for v in row]
    tp, ep = row[TP], row[EP]
    eng = get(engine)
    name = eng.label
    if row[CP] > 1 and not runs_cp(engine, model):
        return [f"{name} cannot run cp={row[CP]} on {model.attention.kind} attention: "
                f"{eng.cp_why}"]
    if not dcp_mask(engine, model, coarse_of(np.asarray(row))[None])[0]:
        a = model.attention
        if a.kind not in eng.dcp_kinds:
            return [f"{name} cannot run dcp={row[DCP]} on {a.kind} attention: {eng.dcp_why}"]
        return [f"{name} cannot run dcp={row[DCP]} at tp={tp} with {a.kv_heads} KV heads of "
                f"{a.heads} query heads: it splits only duplicated KV heads (tp above the KV "
                "heads, dcp at most tp / KV heads, query heads per KV head a multiple of dcp: "
                "vllm 0.33.0 config/model.py verify_with_parallel_config)"]
    if row[ETP] > 1 and not eng.whole_space:
        if not model.is_moe:
            return [f"{name} cannot run etp={row[ETP]} on a dense model (no experts to split)"]
        if not eng.runs_etp:
            return [f"{name} cannot run etp={row[ETP]} (each expert split over {row[ETP]} of the "
                    f"tp ranks, the experts over the rest): {eng.etp_why}"]
        if tuple(row[N_COARSE:]) != EXPERT_CHOICES:
            return [f"{name} runs etp={row[ETP]} only with the experts split by expert over the "
                    "group (ffn1/ffn2 = experts, moe_tp = etp x moe_ep = tp x ep / etp); "
                    "under the other FFN choices etp means nothing"]
    variants = engine_variants(engine, model, tp, ep)
    if not variants:
        if not model.is_moe:
            return [f"{name} cannot run ep={ep} on a dense model (no experts to spread)"]
        return [f"{name} cannot run tp={tp} with ep={ep}: its attention is either tensor-"
                "parallel over every GPU of a stage or data-parallel with one GPU per rank "
                "(enable_attention_dp), never tensor-parallel inside data-parallel groups"]
    choices = list(row[N_COARSE:])
    if not model.is_moe:              # a dense model has no router: its choice means nothing
        choices[OPS.index("router")] = MEGATRON[OPS.index("router")]
    choices = tuple(choices)
    if tp == 1 or choices in variants:
        return []
    v = min(variants, key=lambda v: sum(a != b for a, b in zip(choices, v)))
    reasons = []
    for i, op in enumerate(OPS):
        if choices[i] != v[i]:
            reasons.append(f"{name} cannot run {op}={CHOICE_NAMES[choices[i]]} "
                           f"({describe_choice(op, choices[i])}); it runs "
                           f"{op}={CHOICE_NAMES[v[i]]} ({describe_choice(op, v[i])})")
    if eng.more_reasons is not None:
        reasons += eng.more_reasons(tp, ep, choices)
    return reasons


def _choices(model: ModelSpec, rows: np.ndarray) -> np.ndarray:
    """The per-op choices [N, 12] with what cannot matter set to Megatron's: the router of a
    dense model, and every choice where tp = 1 (a group of one shards nothing)."""
    ch = np.array(rows[:, N_COARSE:], copy=True)
    if not model.is_moe:
        ch[:, OP_COL["router"] - N_COARSE] = MEGATRON[OPS.index("router")]
    ch[rows[:, TP] == 1] = MEGATRON
    return ch


def runnable(engine: str, model: ModelSpec, rows) -> np.ndarray:
    """Which strategy rows [N, WIDTH] the engine runs as written [N] bool (``generic``: all)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    if get(engine).whole_space:
        return np.ones(len(rows), bool)
    ch = _choices(model, rows)
    out = np.zeros(len(rows), bool)
    for v in variants(model):
        out |= (ch == np.asarray(v)).all(axis=1) & runnable_mask(engine, model, coarse_of(rows), v)
    return out


def runnable_on(model: ModelSpec, rows) -> list:
    """The engines that run each strategy row as written: a list of tuples of engine names."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    ok = {e: runnable(e, model, rows) for e in REAL_ENGINES}
    return [tuple(e for e in REAL_ENGINES if ok[e][i]) for i in range(len(rows))]


def engine_form(model: ModelSpec, rows) -> np.ndarray:
    """The engine form of each strategy row [N, WIDTH]: data-parallel attention with whole experts
    over the tp group (``with_experts(DP_ATTENTION)`` at tp > 1, each rank its own attention
    and its own experts) is the deployment lts writes as tp = 1, ep = tp * ep (attention DP and
    expert parallelism over every GPU), which is how an engine runs it and costs it (one
    scheduler per rank); every other row as it is."""
    rows = np.array(np.atleast_2d(rows), dtype=np.int64, copy=True)
    if not model.is_moe:
        return rows
    # (experts split over etp > 1 ranks each: tp = 1 cannot say so, the row stays as it is)
    same = (rows[:, TP] > 1) & (rows[:, ETP] == 1) \
        & (rows[:, N_COARSE:] == np.asarray(with_experts(DP_ATTENTION))).all(1)
    rows[same, EP] *= rows[same, TP]
    rows[same, TP] = 1
    rows[same, N_COARSE:] = MEGATRON
    return rows


def project(engine: str, model: ModelSpec, rows: np.ndarray) -> np.ndarray:
    """Strategy (or index) rows [N, WIDTH] -> the engine's variant each stands for, in place: the
    coarse columns kept (so value and index rows project alike), the per-op choices of a MoE set
    to the expert-parallel variant where FFN1 or FFN2 splits the experts, else to data-parallel
    attention where the QKV projection is replicated, else to Megatron's (a dense model:
    Megatron's). The degrees are not changed: rows the engine cannot lay out stay what
    ``runnable`` rejects (at tp = 1 every variant is one deployment). ``generic``: the rows as
    they are."""
    if get(engine).whole_space:
        return rows
    out = np.broadcast_to(np.asarray(MEGATRON), (len(rows), len(MEGATRON)))
    if model.is_moe:
        experts = (rows[:, OP_COL["ffn1"]] == EXPERTS) | (rows[:, OP_COL["ffn2"]] == EXPERTS)
        dp = ~experts & (rows[:, OP_COL["qkv"]] == NONE)
        out = np.where(experts[:, None], np.asarray(EXPERT_CHOICES),
                       np.where(dp[:, None], np.asarray(DP_ATTENTION), out))
    rows[:, N_COARSE:] = out
    return rows


def from_layout(model: ModelSpec, attention_tp: int, attention_dp: int, moe_tp: int,
                moe_ep: int) -> tuple:
    """An engine's own layout (attention tensor- and data-parallel sizes, MoE tensor- and
    expert-parallel sizes: the columns benchmark records carry, e.g. shared/data/serving_moe.csv)
    -> lts's (tp, ep, per-op choices, etp); ValueError with the reason where lts has no such
    layout.

    attention_tp x attention_dp = moe_tp x moe_ep GPUs. lts's ep > 1 is attention DP over ep
    groups of tp GPUs with the experts spread over the groups, so:
    dp 1: tp = attention_tp with Megatron's experts (moe_ep 1) or whole experts over the group
    (moe_tp 1); dp > 1 and attention_tp 1: ep = dp (moe_ep = dp), or tp = dp with data-parallel
    attention (moe_tp = dp), or tp = moe_tp, ep = moe_ep with data-parallel attention; dp > 1
    and attention_tp > 1: tp = attention_tp, ep = dp, the experts Megatron's (moe_tp =
    attention_tp) or whole over the group (moe_tp 1). Attention tp > 1 with the experts split
    both ways (1 < moe_tp < attention_tp, a divisor of it): whole experts over the group, each
    over etp = moe_tp ranks (moe_ep = tp x ep / etp: SGLang --ep-size below --tp-size,
    TensorRT-LLM moe_tensor_parallel_size). etp is 1 everywhere else. A dense model:
    tp = attention_tp x attention_dp's Megatron only when dp is 1."""
    atp, adp, mtp, mep = (int(v) for v in (attention_tp, attention_dp, moe_tp, moe_ep))
    if min(atp, adp, mtp, mep) < 1:
        raise ValueError("every size must be at least 1")
    if atp * adp != mtp * mep:
        raise ValueError(f"attention_tp x attention_dp = {atp * adp} GPUs but moe_tp x moe_ep "
                         f"= {mtp * mep}")
    if not model.is_moe:
        if adp == 1:
            return atp, 1, MEGATRON, 1
        raise ValueError(f"attention_dp {adp} on a dense model: replicas are separate "
                         "instances (one row each)")
    if atp == 1 and adp > 1:
        if mtp == 1:
            return 1, adp, MEGATRON, 1
        if mep == 1:
            return adp, 1, DP_ATTENTION, 1
        return mtp, mep, DP_ATTENTION, 1
    if mtp == atp:        # (adp 1: moe_ep 1)
        return atp, adp, MEGATRON, 1
    if mtp == 1:
        return atp, adp, EXPERT_CHOICES, 1
    if atp % mtp == 0:    # whole experts over the group, each over moe_tp of its tp ranks
        return atp, adp, EXPERT_CHOICES, mtp
    raise ValueError(f"attention tp {atp} x dp {adp} with experts over moe tp {mtp} x ep {mep} "
                     f"is not a layout lts costs (each expert's tensor split, moe_tp {mtp}, "
                     f"must divide the attention tp {atp}: lts's etp)")
