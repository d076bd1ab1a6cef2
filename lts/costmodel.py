"""Vectorized roofline cost model: ``evaluate(model, topology, workload, strategies[N, 16])``.

How a strategy is costed (DESIGN.md §3; every formula below has its reason beside it):

1. **Coarse tables.** Strategies are grouped by their coarse part (tp, ep, pp, batch). For each
   distinct coarse row, every op is costed in every *mode* it can run in, a mode being
   (choice, input layout, output layout) over the tp group: ``R`` replicated, ``T`` split on
   tokens (whole sequences), ``F`` split on features, ``P`` partial sums (and ``ER``/``ET``, the
   expert-local state between FFN1 and FFN2 under the ``experts`` choice). Conversions between
   layouts are costed for each activation (hidden, qkv, scores, context, intermediate, router
   logits). All of this is a few NumPy expressions over [G] arrays, G = distinct coarse rows.
2. **Walk.** For N strategies at once, the 12 ops are walked in order (a loop over 12 ops, never
   over strategies): each op's mode follows from its choice and the incoming layout (an op that
   accepts R or T keeps an incoming R or T and gathers P or F to R), the conversion is inserted, and op, conversion and collective times are gathered from the tables.
3. **Assembly.** Stage time = the layers of the stage + embedding on the first stage + final norm
   and LM head on the last; TPOT = pp x (slowest stage + stage-to-stage send) (the batch runs as
   pp micro-batches, so one decode step of every sequence takes pp stage slots); prefill TTFT =
   (2pp-1) x (slowest stage + send) (pp micro-batches through pp stages). A ``mixed`` step (the
   serve phase's, ``compose_step``) is assembled like a decode step: its rows are the decode
   tokens plus a prefill chunk, whose queries and cache reads are added to the attention ops.

Roofline per op: time = max(FLOPs / (peak * eta_compute), HBM bytes / (HBM bw * eta_memory))
+ kernel overhead (Williams et al. 2009 roofline; overhead: a fixed launch cost per fused op).
With ``roofline_exponent`` p set in the topology, the max becomes the smooth (c^p + m^p)^(1/p)
(``roofline_time``; fitted to measured GEMMs near the ridge point).
Collectives are not overlapped with compute (PAPER.md §6 recommendation).

Imports: specs, strategy, collectives, units.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from . import collectives as coll
from .specs import ModelSpec, TopologySpec, attention_params
from .strategy import BATCH, DIM0, DIM1, EP, EXPERTS, N_COARSE, N_OPS, NONE, OPS, PP, TP

# layouts over the tp group
R, T, F, P, ER, ET = 0, 1, 2, 3, 4, 5
LAYOUT_NAMES = ("R", "T", "F", "P", "ER", "ET")
NORM_LAYOUT = {DIM0: T, DIM1: F, NONE: R}          # a norm's choice fixes the residual's layout

# validity reasons (bit flags) and their messages
REASONS = ("budget", "divisibility", "memory", "slo", "experts")
REASON_BIT = {r: 1 << i for i, r in enumerate(REASONS)}

PHASES = ("decode", "prefill")     # the phases a user names; "mixed" is lts.serve's step


@dataclass(frozen=True)
class Workload:
    """What is served. ``decode``: one token per sequence per step at ``context`` tokens of KV
    cache (the paper's case); ``prefill``: the whole prompt of ``context`` tokens per sequence in
    one pass; ``mixed``: one step of a continuous-batching engine (``compose_step``): the batch
    column counts the running requests, the step holds the decode tokens of those not being
    prefilled, at ``context``, and a prefill chunk of prompts of ``isl`` tokens under a budget of
    ``step_tokens`` per step (chunked prefill), all in one pass (weights read once)."""
    phase: str = "decode"
    context: int = 16384
    tpot_slo_ms: float = 50.0
    ttft_slo_ms: float = 0.0       # 0: no TTFT SLO
    gpus: int = 0                  # device budget; 0: the whole topology
    isl: int = 0                   # mixed: prompt length of the requests being prefilled
    osl: int = 0                   # mixed: output tokens per request
    step_tokens: int = 0           # mixed: the engine's token budget per step
    mixed: bool = True             # mixed: decodes share the step (False: a prefill-only step)
    cohort_base: float = 1.0       # mixed: requests prefilled together: base + share x running
    cohort_share: float = 0.0

    def budget(self, topo: TopologySpec) -> int:
        return self.gpus or topo.gpus


@dataclass
class StepMix:
    """What one step of a continuous-batching engine holds, for n running requests (arrays)."""
    decoders: np.ndarray     # requests decoding one token in the step
    chunk: np.ndarray        # prefill tokens in the step (mean over the cohort's prefill steps)
    cohort: np.ndarray       # requests admitted together: prefilled together, finishing together
    steps: np.ndarray        # steps that prefill one cohort (not mixed: a fraction counts the last)
    per_prompt: np.ndarray   # steps one prompt's prefill spans (1: whole prompts)


def compose_step(n, work: Workload) -> StepMix:
    """The scheduler's step for n running requests with prompts of ``work.isl`` tokens
    (DESIGN.md §8; ``lts.serve`` builds the closed loop on it).

    Mixed (vLLM, TensorRT-LLM): requests admitted together form a cohort of
    ``cohort_base + cohort_share * n`` requests (the two constants belong to the engine profile;
    at least n/osl, at most n); the running requests' decode tokens come first and count against the
    budget (vLLM v1/core/sched/scheduler.py: ``token_budget -= num_new_tokens`` for running
    requests; TRT-LLM microBatchScheduler.cpp), the cohort's prompts fill what is left, over as
    many steps as they need. Not mixed (SGLang's default, ``enable_mixed_chunk = False``: prefill
    batches run first and alone): the whole running batch is one cohort, prefilled in
    prefill-only steps of the whole budget (n * isl / budget of them, the last one counted in
    proportion), then it decodes together.
    """
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    isl, budget = float(work.isl), float(work.step_tokens)
    if work.mixed:
        # no fewer than n/osl: one cohort per decode step keeps the prefills in pace (prompts
        # that wait while a step runs are admitted together)
        law = work.cohort_base + work.cohort_share * n
        cohort = np.clip(np.maximum(law, n / max(work.osl, 1)), 1.0, n)
        decoders = n - cohort
        avail = np.maximum(budget - decoders, 1.0)           # budget left after the decode tokens
        steps = np.ceil(cohort * isl / avail)
        per_prompt = np.ceil(isl / avail)
    else:   # full chunks of the budget (the last one partial: steps counts it in proportion)
        cohort = n
        decoders = np.zeros_like(n)
        steps = n * isl / np.minimum(budget, n * isl)
        per_prompt = np.full_like(n, np.ceil(isl / budget))
    return StepMix(decoders, cohort * isl / steps, cohort, steps, per_prompt)


# ----------------------------------------------------------------------------------------------
# modes: (choice, input layout, output layout) per op kind. Row-parallel GEMMs need F and produce
# P, column-parallel need R and produce F, `none` works on R or on its own tokens T (DESIGN.md §3).

GEMM_MODES = ((DIM0, F, P), (DIM1, R, F), (NONE, R, R), (NONE, T, T))
FFN1_MODES = GEMM_MODES + ((EXPERTS, R, ER), (EXPERTS, T, ET))
FFN2_MODES = GEMM_MODES + ((EXPERTS, ER, P), (EXPERTS, ET, T))
SCORES_MODES = ((DIM0, F, F), (DIM1, F, P), (NONE, R, R), (NONE, T, T))   # dim1: head_dim partial sums
CONTEXT_MODES = ((DIM0, F, F), (DIM1, R, F), (NONE, R, R), (NONE, T, T))  # dim1: needs full probs
NORM_MODES = ((DIM0, T, T), (DIM1, F, F), (NONE, R, R))
EMBED_MODES = ((DIM0, R, P), (DIM1, R, F), (NONE, R, R))                  # input: token ids (R)
MAX_MODES = 6

# op slots: the 12 ops, then the FFN ops of the dense layers of a MoE model (DeepSeek's first 3)
SLOTS = OPS + ("router_dense", "ffn1_dense", "ffn2_dense")
SLOT = {name: i for i, name in enumerate(SLOTS)}
SLOT_MODES = {
    "embedding": EMBED_MODES, "attn_norm": NORM_MODES, "qkv": GEMM_MODES,
    "scores": SCORES_MODES, "context": CONTEXT_MODES, "out_proj": GEMM_MODES,
    "ffn_norm": NORM_MODES, "router": GEMM_MODES, "ffn1": FFN1_MODES, "ffn2": FFN2_MODES,
    "final_norm": NORM_MODES, "lm_head": GEMM_MODES,
    "router_dense": GEMM_MODES, "ffn1_dense": FFN1_MODES, "ffn2_dense": FFN2_MODES,
}

# activation points where conversions happen (bytes of the full activation per tp group)
POINTS = ("hidden", "qkv", "scores", "context", "inter", "inter_dense", "router", "logits")
PT = {name: i for i, name in enumerate(POINTS)}

# the collective each conversion inserts (DESIGN.md §3 table); None = free (a local slice)
CONVERSION = {
    (T, R): "all-gather", (F, R): "all-gather", (T, F): "all-to-all", (F, T): "all-to-all",
    (P, R): "all-reduce", (P, T): "reduce-scatter", (P, F): "reduce-scatter",
}


def _mode_lookup():
    """[slot, choice, input layout] -> mode index (-1 where the choice never takes that input)."""
    table = np.zeros((len(SLOTS), 4, MAX_MODES), dtype=np.int64)   # unreachable combos -> mode 0
    for s, name in enumerate(SLOTS):
        for m, (choice, lin, _) in enumerate(SLOT_MODES[name]):
            table[s, choice, lin] = m
    return table


MODE_OF = _mode_lookup()
# the layout a `none` (or `experts`) op works on: it keeps an incoming R or T and gathers anything
# else to R. The pick depends on layouts only, never on costs, so more bandwidth cannot flip it
# into a slower layout (DESIGN.md §7); the token split is reached through a norm on tokens
# (choice 0), which reduce-scatters P into T.
PICK = np.array([R, T, R, R, R, R])
MODE_IN = np.full((len(SLOTS), MAX_MODES), -1, dtype=np.int64)
MODE_OUT = np.full((len(SLOTS), MAX_MODES), -1, dtype=np.int64)
for _s, _name in enumerate(SLOTS):
    for _m, (_c, _lin, _lout) in enumerate(SLOT_MODES[_name]):
        MODE_IN[_s, _m], MODE_OUT[_s, _m] = _lin, _lout


def _frac(n, p):
    """Share of a dimension of size n on the busiest of p ranks: ceil(n/p)/n."""
    n = np.maximum(n, 1)    # an empty dimension (no dense layers, no shared expert) costs nothing
    return np.ceil(n / p) / n


# ----------------------------------------------------------------------------------------------
# per coarse row: op costs per mode and conversion costs

@dataclass
class Tables:
    """Costs for G distinct coarse rows. Arrays are [G, ...]; times in seconds, sizes in bytes."""
    coarse: np.ndarray                 # [G, 4] tp, ep, pp, batch
    compute_s: np.ndarray              # [G, slots, modes] FLOP-bound time of one op instance
    memory_s: np.ndarray               # [G, slots, modes] HBM-bound time
    time_s: np.ndarray                 # [G, slots, modes] roofline + kernel overhead
    intrinsic_s: np.ndarray            # [G, slots, modes] collectives the op itself needs
    intrinsic: dict                    # (slot, mode) -> list of (kind, group, bytes[G], time[G])
    weight_bytes: np.ndarray           # [G, slots, modes] resident weights per GPU
    kv_bytes: np.ndarray               # [G, slots, modes] resident KV cache per GPU per layer
    conv_s: np.ndarray                 # [G, points, 6 from, 6 to] (zero diagonal; ER/ET free)
    conv_bytes: np.ndarray             # [G, points] full activation bytes
    final_s: np.ndarray                # [G, 4] logits layout -> sampled ids everywhere
    send_s: np.ndarray                 # [G, 2] stage-to-stage send: [hidden split over tp, full]
    send_bytes: np.ndarray             # [G, 2]
    workspace_bytes: np.ndarray        # [G]
    fixed_invalid: np.ndarray          # [G] reason bits that depend only on the coarse row
    layers_per_stage: np.ndarray       # [G]
    pp: np.ndarray                     # [G] float: pipeline stages
    batch: np.ndarray                  # [G] float: sequences (decode, prefill) or requests (mixed)
    gpus: np.ndarray                   # [G] float: tp * ep * pp
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self.op_total_s = self.time_s + self.intrinsic_s   # [G, slots, modes]


class _Shape:
    """Model dimensions and workload sizes as arrays over G coarse rows."""

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload, coarse):
        self.m, self.topo, self.work = model, topo, work
        coarse = np.asarray(coarse, dtype=np.int64)
        self.p = coarse[:, TP].astype(np.float64)
        self.ep = coarse[:, EP].astype(np.float64)
        self.pp = coarse[:, PP].astype(np.float64)
        self.batch = coarse[:, BATCH].astype(np.float64)
        a, f = model.attention, model.ffn
        prec = model.precision
        self.wb, self.kvb, self.ab = prec.weight_bytes, prec.kv_bytes, prec.act_bytes
        self.peak = topo.peak_for(prec.weights) * topo.compute_efficiency_for(prec.weights)
        self.hbm = topo.hbm_bandwidth_bytes_s * topo.memory_efficiency
        # GEMM weight reads at their own efficiency (fp8 kernels read weights slower than bf16):
        # counted as wb * eta_memory / eta_weights effective bytes per weight element read
        self.wbr = self.wb * topo.memory_efficiency / topo.weight_memory_efficiency_for(prec.weights)
        self.overhead = topo.kernel_overhead_s
        decode = work.phase in ("decode", "mixed")
        seqs = self.batch
        if work.phase == "mixed":
            mix = compose_step(self.batch, work)
            seqs = mix.decoders
        # micro-batch: the batch runs as pp micro-batches; attention is data-parallel across the
        # ep groups (each takes whole sequences); the busiest group sets the pace (ceil)
        self.mb = np.ceil(seqs / self.pp)
        self.seqs = np.ceil(self.mb / self.ep)                       # sequences per tp group
        self.tps = 1.0 if decode else float(work.context)           # tokens per sequence per step
        self.rows = self.seqs * self.tps                            # tokens per tp group
        self.seqs_t = np.ceil(self.seqs / self.p)                   # sequences per rank under T
        self.rows_t = self.seqs_t * self.tps
        self.lm_rows = self.seqs                                    # one next token per sequence
        self.mb_tokens = self.mb * self.tps                         # tokens of one micro-batch
        ctx = float(work.context)
        self.ctx = ctx
        # average keys a query attends to: decode reads the whole context; causal prefill ~ half
        self.ctx_attn = ctx if decode else (ctx + 1) / 2
        self.score_rows = self.rows * self.ctx_attn                 # sum of keys over the queries
        self.chunk = None
        if work.phase == "mixed":
            # the prefill chunk, spread over the micro-batches and ep groups like sequences: a
            # prompt stays whole in one micro-batch of one ep group, so the busiest holds at
            # least one prompt's share of the step (min(chunk, isl) tokens)
            one = np.minimum(mix.chunk, float(work.isl))
            ch_mb = np.maximum(mix.chunk / self.pp, one)             # busiest micro-batch
            ch = np.maximum(ch_mb / self.ep, one)                    # its busiest ep group
            self.chunk = ch
            self.chunk_t = ch / self.p                               # per rank under T
            self.chunk_keys = (work.isl + 1) / 2                     # causal: mean keys per query
            # each chunk reads the cache of its prompt so far: (per_prompt + 1)/2 chunks on average
            self.chunk_read = (mix.per_prompt + 1) / 2
            self.rows = self.rows + ch
            self.rows_t = self.rows_t + self.chunk_t
            self.lm_rows = self.lm_rows + ch / work.isl              # prompts finishing per step
            self.mb_tokens = self.mb_tokens + ch_mb
            self.score_rows = self.score_rows + ch * self.chunk_keys
        h = model.hidden
        self.h = h
        if a.kind == "mla":
            # absorbed MLA (DeepSeek-V2 §2.1.2): scores over the latent + rope key, values from the
            # latent; the cache holds one latent (kv_lora + rope) per token, not split by heads
            self.qk_dim = a.kv_lora_rank + a.qk_rope_head_dim
            self.v_dim = a.kv_lora_rank
            self.k_tok = (a.kv_lora_rank + a.qk_rope_head_dim) * self.kvb
            self.v_tok = a.kv_lora_rank * self.kvb
            self.k_heads = 1.0                     # the latent is shared by all heads
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            self.qkv_out = a.heads * qk + a.kv_lora_rank + a.qk_rope_head_dim
        else:
            self.qk_dim = a.head_dim
            self.v_dim = a.head_dim
            self.k_tok = a.kv_heads * a.head_dim * self.kvb
            self.v_tok = self.k_tok
            self.k_heads = float(a.kv_heads)
            self.qkv_out = (a.heads + 2 * a.kv_heads) * a.head_dim
        self.ctx_out = a.heads * a.v_dim
        self.experts = float(f.experts)
        self.top_k = float(f.top_k)


def _roofline(s: _Shape, flops, nbytes):
    compute = flops / s.peak
    memory = nbytes / s.hbm
    return compute, memory


def roofline_time(compute, memory, p: float):
    """Time of a kernel with compute and memory times: max(c, m) (p = 0), or the smooth roofline
    (c^p + m^p)^(1/p): near the ridge a real kernel cannot overlap its loads and its math
    perfectly (microbenchmarks.csv GEMM n=k=8192: at m=256-1024 the hard max is 5-25% fast; p=3
    fits bf16 and fp8 m=1..4096 to 0.048 rms log2 against 0.088 for the max; topology files)."""
    hi = np.maximum(compute, memory)
    if not p:
        return hi
    lo = np.minimum(compute, memory)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * (1.0 + ratio ** p) ** (1.0 / p)        # = (c^p + m^p)^(1/p), without overflow


def _gemm(s, rows, k, n, w_total=None, k_frac=1.0, n_frac=1.0):
    """FLOPs, HBM bytes, resident weight bytes of rows x [k, n] with shares k_frac, n_frac.

    ``w_total`` overrides k*n*k_frac*n_frac as the per-rank weight element count (GQA/MLA).
    """
    w = k * n * k_frac * n_frac if w_total is None else w_total
    flops = 2.0 * rows * w                                     # one multiply-add per weight per row
    nbytes = w * s.wbr + rows * (k * k_frac + n * n_frac) * s.ab   # weights + activations in/out
    return flops, nbytes, w * s.wb


class _Builder:
    """Fills the [G, slots, modes] tables."""

    def __init__(self, s: _Shape):
        self.s = s
        G = len(s.p)
        shape = (G, len(SLOTS), MAX_MODES)
        self.compute = np.zeros(shape)
        self.memory = np.zeros(shape)
        self.time = np.full(shape, np.inf)
        self.intr = np.zeros(shape)
        self.intrinsic = {}
        self.weights = np.zeros(shape)
        self.kv = np.zeros(shape)

    def put(self, slot, mode, flops, nbytes, weights=0.0, kv=0.0, colls=(), launch=True):
        s = self.s
        sl = SLOT[slot]
        c, m = _roofline(s, np.broadcast_to(flops, s.p.shape), np.broadcast_to(nbytes, s.p.shape))
        self.compute[:, sl, mode] = c
        self.memory[:, sl, mode] = m
        self.time[:, sl, mode] = roofline_time(c, m, s.topo.roofline_exponent) + \
            (s.overhead if launch else 0.0)
        self.weights[:, sl, mode] = weights
        self.kv[:, sl, mode] = kv
        total = np.zeros_like(s.p)
        recs = []
        for kind, group, nb in colls:
            t = self._coll(kind, group, nb)
            total = total + t
            recs.append((kind, group, np.broadcast_to(nb, s.p.shape).astype(np.float64), t))
        self.intr[:, sl, mode] = total
        self.intrinsic[(sl, mode)] = recs

    def _coll(self, kind, group, nbytes):
        s = self.s
        p, stride = {"tp": (s.p, 1.0), "ep": (s.ep, s.p), "pp": (s.pp, s.p * s.ep)}[group]
        return np.broadcast_to(coll.COST[kind](s.topo.engine_links, nbytes, p, stride), s.p.shape)


def _fill_embedding(b: _Builder):
    s = b.s
    v, h = s.m.vocab, s.h
    lookup = s.rows * h * (s.wb + s.ab)        # read one table row and write it, per token
    b.put("embedding", 0, 0.0, s.rows * h * s.wb / s.p + s.rows * h * s.ab,
          v * h * _frac(v, s.p) * s.wb)        # vocab-parallel: each rank looks up its own ids
    b.put("embedding", 1, 0.0, lookup * _frac(h, s.p), v * h * _frac(h, s.p) * s.wb)
    b.put("embedding", 2, 0.0, lookup, v * h * s.wb)


def _fill_norm(b: _Builder, slot):
    s = b.s
    h, rows, rows_t = s.h, s.rows, s.rows_t
    # RMSNorm + residual add: read x and residual, write the sum and the normed output
    b.put(slot, 0, 8.0 * rows_t * h, 4.0 * rows_t * h * s.ab, h * s.wb)
    # hidden-split norm: the sum of squares of each token is all-reduced over tp (4 bytes each)
    b.put(slot, 1, 8.0 * rows * h * _frac(h, s.p), 4.0 * rows * h * _frac(h, s.p) * s.ab,
          h * _frac(h, s.p) * s.wb, colls=[("all-reduce", "tp", rows * 4.0)])
    b.put(slot, 2, 8.0 * rows * h, 4.0 * rows * h * s.ab, h * s.wb)


def _fill_gemm(b: _Builder, slot, k, n, col_weights=None, col_out=None, rows=None, rows_t=None,
               dim0_frac=None):
    """A dense GEMM op in its four modes (row, column, none-R, none-T)."""
    s = b.s
    rows = s.rows if rows is None else rows
    rows_t = s.rows_t if rows_t is None else rows_t
    fk = _frac(k, s.p) if dim0_frac is None else dim0_frac
    fl, by, w = _gemm(s, rows, k, n, k_frac=fk)
    b.put(slot, 0, fl, by, w)
    if col_weights is None:
        fl, by, w = _gemm(s, rows, k, n, n_frac=_frac(n, s.p))
    else:   # column split with replicated parts (GQA KV heads beyond kv_heads, MLA down-projections)
        w = col_weights
        fl = 2.0 * rows * w
        by = w * s.wbr + rows * (k + col_out) * s.ab
        w = w * s.wb
    b.put(slot, 1, fl, by, w)
    for mode, r in ((2, rows), (3, rows_t)):
        fl, by, w = _gemm(s, r, k, n)
        b.put(slot, mode, fl, by, w)


def _fill_attention(b: _Builder):
    s = b.s
    m, a = s.m, s.m.attention
    heads = float(a.heads)
    # --- QKV projection
    qkv_w = attention_params(m)["qkv"]
    if a.kind == "mla":
        # column split over heads: q_b and kv_b split by heads; q_a, kv_a replicated (vLLM MLA)
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        down = s.h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim)
        up = qkv_w - down
        col_w = down + up * _frac(heads, s.p)
        col_out = (heads * qk) * _frac(heads, s.p) + a.kv_lora_rank + a.qk_rope_head_dim
    else:
        q_w = s.h * a.heads * a.head_dim
        col_w = q_w * _frac(heads, s.p) + (qkv_w - q_w) * _frac(a.kv_heads, s.p)
        col_out = a.heads * a.head_dim * _frac(heads, s.p) \
            + 2 * a.kv_heads * a.head_dim * _frac(a.kv_heads, s.p)
    _fill_gemm(b, "qkv", s.h, qkv_w / s.h, col_weights=col_w, col_out=col_out)

    # --- scores Q.K^T (reads the K cache) and context P.V (reads the V cache)
    def attn(slot, dim, cache_tok, modes):
        per_seq_flops = 2.0 * heads * dim * s.ctx_attn * s.tps
        per_seq_read = s.ctx * cache_tok                       # the cache read once per step
        per_seq_io = s.tps * heads * dim * s.ab * 2            # query in, result out
        for mode, (seqs, ffl, fcache) in modes.items():
            fl = seqs * per_seq_flops * ffl
            by = seqs * (per_seq_read * fcache + per_seq_io * ffl)
            if s.chunk is not None:   # mixed step: the prefill chunk's queries and cache reads
                ch = s.chunk_t if mode == 3 else s.chunk
                fl = fl + ch * 2.0 * heads * dim * s.chunk_keys * ffl
                by = by + ch * (s.chunk_read * cache_tok * fcache + heads * dim * s.ab * 2 * ffl)
            # every stage holds the cache of all pp micro-batches in flight, not only one
            kv = s.pp * seqs * s.ctx * cache_tok * fcache
            b.put(slot, mode, fl, by, 0.0, kv)

    kh = s.k_heads
    fdim_k = _frac(s.qk_dim, s.p) if a.kind == "mla" else _frac(a.head_dim, s.p)
    attn("scores", s.qk_dim, s.k_tok, {
        0: (s.seqs, _frac(heads, s.p), _frac(kh, s.p) if kh > 1 else 1.0),
        1: (s.seqs, _frac(s.qk_dim, s.p), fdim_k),
        2: (s.seqs, 1.0, 1.0),
        3: (s.seqs_t, 1.0, 1.0)})
    fdim_v = _frac(s.v_dim, s.p)
    attn("context", s.v_dim, s.v_tok, {
        0: (s.seqs, _frac(heads, s.p), _frac(kh, s.p) if kh > 1 else 1.0),
        1: (s.seqs, fdim_v, fdim_v),
        2: (s.seqs, 1.0, 1.0),
        3: (s.seqs_t, 1.0, 1.0)})
    # --- output projection [heads*v_dim, hidden]: row split by heads
    _fill_gemm(b, "out_proj", s.ctx_out, s.h, dim0_frac=_frac(heads, s.p))


def _active(s, experts_rank, tokens):
    """Expected experts (of ``experts_rank``) that receive at least one of ``tokens`` tokens."""
    return experts_rank * (1.0 - (1.0 - s.top_k / s.experts) ** tokens)


def _fill_ffn(b: _Builder, moe: bool):
    """FFN1/FFN2 (and the router) of one layer type in their six modes each."""
    s, f = b.s, b.s.m.ffn
    h = s.h
    sfx = "" if moe else "_dense"
    if not moe and not s.m.is_moe:
        sfx = ""
    up_mats = f.n_mats - 1
    rows, rows_t = s.rows, s.rows_t
    if moe:
        inter, k = float(f.expert_intermediate), s.top_k
        e_loc = s.experts / s.ep                          # experts on each ep rank
        pairs = rows * k                                  # (token, expert) pairs per tp group
        shared = float(f.shared_intermediate)
        # router [hidden, experts] before FFN1
        _fill_gemm(b, "router", h, s.experts)
    else:
        inter, k, e_loc, pairs, shared = float(f.intermediate), 1.0, 1.0, rows, 0.0
        if s.m.is_moe:
            for mode in range(4):                          # dense layers of a MoE: no router
                b.put("router_dense", mode, 0.0, 0.0, launch=False)
        else:
            for mode in range(4):
                b.put("router", mode, 0.0, 0.0, launch=False)
    tokens = s.mb_tokens                                   # tokens routed per micro-batch step
    e_rank_x = np.ceil(e_loc / s.p)                        # experts per rank under `experts`

    def expert_part(which, mode):
        """FLOPs, bytes, weights of the routed part on the busiest rank."""
        mats = up_mats if which == 1 else 1
        w_exp = h * inter * mats                           # one expert's weights in this op
        if mode in (0, 1):
            fr = _frac(h, s.p) if (mode == 0) == (which == 1) else _frac(inter, s.p)
            npairs, ex, toks = pairs, e_loc, tokens
        elif mode == 2:
            fr, npairs, ex, toks = 1.0, pairs, e_loc, tokens
        elif mode == 3:     # none on T: each rank its own whole sequences (of every ep group)
            fr, npairs, ex, toks = 1.0, rows_t * k, e_loc, rows_t * s.ep
        elif moe:   # experts: whole experts per rank, tokens of those experts only
            fr, npairs, ex, toks = 1.0, pairs * e_rank_x / e_loc, e_rank_x, tokens
        else:   # `experts` on a dense FFN: replicated weights, each rank a share of whole sequences
            fr, npairs, ex, toks = 1.0, rows_t, 1.0, rows_t * s.ep
        if moe:
            act = _active(s, ex, toks)                      # weights of idle experts are not read
        else:
            act = 1.0
        flops = 2.0 * npairs * w_exp * fr
        in_w = h if which == 1 else inter
        out_w = inter * up_mats if which == 1 else h
        fin = fr if (which == 1 and mode == 0) or (which == 2 and mode == 0) else 1.0
        fout = fr if (which == 1 and mode == 1) or (which == 2 and mode == 1) else 1.0
        nbytes = act * w_exp * fr * s.wbr + npairs * (in_w * fin + out_w * fout) * s.ab
        return flops, nbytes, ex * w_exp * fr * s.wb

    def shared_part(which, mode):
        if shared == 0:
            return 0.0, 0.0, 0.0
        mats = up_mats if which == 1 else 1
        w = h * shared * mats
        if mode in (0, 1):
            fr = _frac(h, s.p) if (mode == 0) == (which == 1) else _frac(shared, s.p)
            r = rows
        elif mode in (2, 4):   # experts choice: the shared expert is replicated, tokens split
            fr, r = 1.0, rows if mode == 2 else rows / s.p
        else:
            fr, r = 1.0, rows_t
        return 2.0 * r * w * fr, w * fr * s.wbr + r * h * 2 * s.ab, w * fr * s.wb

    for which, slot, modes in ((1, "ffn1" + sfx, FFN1_MODES), (2, "ffn2" + sfx, FFN2_MODES)):
        for mode, (choice, lin, lout) in enumerate(modes):
            fl, by, w = expert_part(which, mode)
            fl2, by2, w2 = shared_part(which, mode)
            colls = []
            if moe and which == 1 and s.ep.max() > 1:
                # dispatch: each routed copy goes to its expert's ep rank (all-to-all over ep);
                # ranks holding a split (T, F) or an expert subset send only their share
                split = (lin != R) or choice == EXPERTS
                colls.append(("all-to-all", "ep", rows * k * h * s.ab / (s.p if split else 1.0)
                              * (s.ep > 1)))
            if moe and which == 2 and s.ep.max() > 1:
                split = lout in (T, F) or choice == EXPERTS
                colls.append(("all-to-all", "ep", rows * k * h * s.ab / (s.p if split else 1.0)
                              * (s.ep > 1)))
            if choice == EXPERTS and (lin == T or lout == T):
                # tokens held per rank (T) travel to the rank holding their expert and back
                colls.append(("all-to-all", "tp", rows_t * k * h * s.ab))
            b.put(slot, mode, fl + fl2, by + by2, w + w2, colls=colls)


def build_tables(model: ModelSpec, topo: TopologySpec, work: Workload, coarse) -> Tables:
    """Cost every op in every mode and every layout conversion for each coarse row."""
    s = _Shape(model, topo, work, coarse)
    b = _Builder(s)
    _fill_embedding(b)
    _fill_norm(b, "attn_norm")
    _fill_norm(b, "ffn_norm")
    _fill_norm(b, "final_norm")
    _fill_attention(b)
    _fill_ffn(b, moe=model.is_moe)
    if model.is_moe:
        _fill_ffn(b, moe=False)   # the dense layers
    else:
        for slot in ("router_dense", "ffn1_dense", "ffn2_dense"):
            for mode in range(MAX_MODES):
                b.put(slot, mode, 0.0, 0.0, launch=False)
    _fill_gemm(b, "lm_head", s.h, model.vocab, rows=s.lm_rows, rows_t=np.ceil(s.lm_rows / s.p))

    # ---- conversions between layouts, per activation point
    f = model.ffn
    inter_moe = (s.rows * s.top_k * f.expert_intermediate * (f.n_mats - 1 > 0)
                 + s.rows * f.shared_intermediate) if model.is_moe else s.rows * f.intermediate
    full = {  # elements of the whole activation held by one tp group
        "hidden": s.rows * s.h, "qkv": s.rows * s.qkv_out,
        "scores": s.score_rows * model.attention.heads, "context": s.rows * s.ctx_out,
        "inter": inter_moe, "inter_dense": s.rows * f.intermediate,
        "router": s.rows * s.experts, "logits": s.lm_rows * model.vocab,
    }
    G = len(s.p)
    conv = np.zeros((G, len(POINTS), 6, 6))
    conv_bytes = np.zeros((G, len(POINTS)))
    for name, elems in full.items():
        nb = np.broadcast_to(elems * s.ab, s.p.shape)
        conv_bytes[:, PT[name]] = nb
        for (src, dst), kind in CONVERSION.items():
            # all-to-all moves each rank's share (S/p); the others work on the whole tensor S
            size = nb / s.p if kind == "all-to-all" else nb
            conv[:, PT[name], src, dst] = coll.COST[kind](topo.engine_links, size, s.p, 1.0)
    # after the LM head every rank needs the sampled ids: R has them; T samples its own tokens and
    # all-gathers the ids (4 bytes each); F (vocab split) gathers the logits, P all-reduces them
    logits = conv_bytes[:, PT["logits"]]
    final = np.zeros((G, 4))
    ids_bytes = s.lm_rows * 4.0
    final[:, T] = coll.all_gather(topo.engine_links, ids_bytes, s.p, 1.0)
    final[:, F] = coll.all_gather(topo.engine_links, logits, s.p, 1.0)
    final[:, P] = coll.all_reduce(topo.engine_links, logits, s.p, 1.0)
    # stage-to-stage: the activation and the residual of the micro-batch (split over tp if the
    # layout is T or F, else whole on each rank)
    hid = conv_bytes[:, PT["hidden"]]
    send_bytes = np.stack([hid / s.p, hid], axis=1)
    send = np.stack([coll.send(topo.engine_links, send_bytes[:, i], s.pp, s.p * s.ep) for i in range(2)], 1)
    # workspace: activations of one layer in flight (hidden, qkv, context, FFN intermediate,
    # logits), double-buffered
    inter_w = (s.top_k * f.expert_intermediate + f.shared_intermediate) if model.is_moe \
        else f.intermediate
    workspace = 2.0 * s.ab * (s.rows * (3 * s.h + s.qkv_out + s.ctx_out + inter_w * (f.n_mats - 1))
                              + s.lm_rows * model.vocab)
    # coarse-only validity
    budget = work.budget(topo)
    bad = np.zeros(G, dtype=np.int64)
    bad |= np.where(s.p * s.ep * s.pp > budget, REASON_BIT["budget"], 0)
    bad |= np.where(model.layers % s.pp.astype(np.int64) != 0, REASON_BIT["divisibility"], 0)
    if model.is_moe:
        bad |= np.where(f.experts % s.ep.astype(np.int64) != 0, REASON_BIT["divisibility"], 0)
    else:
        bad |= np.where(s.ep > 1, REASON_BIT["experts"], 0)
    return Tables(np.asarray(coarse), b.compute, b.memory, b.time, b.intr, b.intrinsic,
                  b.weights, b.kv, conv, conv_bytes, final, send, send_bytes, workspace,
                  bad, np.floor(model.layers / s.pp), s.pp, s.batch, s.p * s.ep * s.pp,
                  extra={"ids_bytes": ids_bytes})


# ----------------------------------------------------------------------------------------------
# the walk over ops

def _fixed_inputs():
    """[slot, choice] -> the input layout a dim-0/dim-1 choice needs (-1: chosen per strategy)."""
    fixed = np.zeros((len(SLOTS), 4), dtype=np.int64)       # choices 2, 3: picked per strategy
    for s, name in enumerate(SLOTS):
        for choice, lin, _ in SLOT_MODES[name]:
            if choice in (DIM0, DIM1):
                fixed[s, choice] = lin
    return fixed


FIXED_IN = _fixed_inputs()


class Gather:
    """Table lookups for coarse indices ``g`` that broadcast against choice/layout arrays.

    The pieces below take choices and layouts of any broadcastable shape: ``walk`` calls them
    with [N] arrays (one per strategy), the exact search with factorized grids ([G, 1] coarse
    rows against [1, K] choice combinations). Both therefore cost a strategy identically.
    """

    def __init__(self, tab: Tables, g, record: list | None = None):
        self.tab, self.g, self.record = tab, np.asarray(g), record
        self.scope = "first"     # where a conversion sits: first/layer/ffn/ffn_dense/between/last
        self.modes = {}
        self.op_s = {}
        self._conv = tab.conv_s.reshape(-1)
        self._g_conv = self.g * (len(POINTS) * 36)
        self._op = tab.op_total_s.reshape(-1)
        self._w = tab.weight_bytes.reshape(-1)
        self._kv = tab.kv_bytes.reshape(-1)
        self._g_op = self.g * (len(SLOTS) * MAX_MODES)

    def conv(self, feeds, point, src, dst):
        """Time of converting activation `point` from layout src to dst (0 if equal)."""
        t = self._conv[self._g_conv + (PT[point] * 36 + src * 6 + dst)]
        if self.record is not None:
            self.record.append((feeds, point, src, dst, t, self.scope))
        return t

    def op(self, slot, mode):
        t = self._op[self._g_op + SLOT[slot] * MAX_MODES + mode]
        self.op_s[slot], self.modes[slot] = t, mode
        return t

    def weight(self, slot, mode):
        return self._w[self._g_op + SLOT[slot] * MAX_MODES + mode]

    def kv(self, slot, mode):
        return self._kv[self._g_op + SLOT[slot] * MAX_MODES + mode]

    def pick(self, point, incoming):
        """The layout a `none`/`experts` op works on: an incoming R or T stays, P or F go to R."""
        return PICK[incoming]

    def step(self, slot, choice, incoming, point):
        """Insert the conversion into `slot` and run it: (time, output layout, input layout)."""
        s = SLOT[slot]
        lin = np.where(choice >= NONE, self.pick(point, incoming), FIXED_IN[s, choice])
        mode = MODE_OF[s, choice, lin]
        t = self.conv(slot, point, incoming, lin) + self.op(slot, mode)
        return t, MODE_OUT[s, mode], lin


NORM_OF = np.array([T, F, R])           # norm choice -> the layout of its activation and residual


def piece_first(x: Gather, c1, l2):
    """Embedding (token ids are on every rank) into the first attn_norm: (time, weights)."""
    x.scope = "first"
    t = x.op("embedding", c1) + x.conv("attn_norm", "hidden", MODE_OUT[SLOT["embedding"], c1], l2)
    return t, x.weight("embedding", c1)


def piece_attn(x: Gather, model, c2, c3, c4, c5, c6, c7):
    """One layer from attn_norm through ffn_norm: (time, weights + KV cache per GPU, out layout)."""
    x.scope = "layer"
    l2, l7 = NORM_OF[c2], NORM_OF[c7]
    t = x.op("attn_norm", c2)
    cur = l2
    for slot, point, c in (("qkv", "hidden", c3), ("scores", "qkv", c4), ("context", "scores", c5),
                           ("out_proj", "context", c6)):
        dt, cur, _ = x.step(slot, c, cur, point)
        t = t + dt
    # the block's output and the residual both move into the layout of ffn_norm
    t = t + x.conv("ffn_norm", "hidden", cur, l7) + x.conv("ffn_norm", "hidden", l2, l7) \
        + x.op("ffn_norm", c7)
    m = x.modes
    w = (x.weight("attn_norm", c2) + x.weight("qkv", m["qkv"]) + x.weight("out_proj", m["out_proj"])
         + x.weight("ffn_norm", c7) + _kv_cache(model, x, m["scores"], m["context"]))
    return t, w, cur


def _kv_cache(model, x: Gather, mode4, mode5):
    """Resident KV cache per GPU per layer: K as the scores op splits it, V as the context op does.

    MLA keeps one latent for keys and values: when the context op splits it the same way as the
    scores op, the scores op's copy serves both."""
    k, v = x.kv("scores", mode4), x.kv("context", mode5)
    if model.attention.kind != "mla":
        return k + v
    # storage key of a split: heads and R both keep whole latents of all sequences (the latent is
    # not split by heads), dim splits the latent, T keeps whole latents of each rank's sequences
    key = np.array([0, 1, 0, 2])
    return k + np.where(key[mode4] == key[mode5], 0.0, v)


def piece_ffn(x: Gather, model, l7, c8, c9, c10, dense: bool = False):
    """One FFN block (router side branch, FFN1, FFN2): (time, weights, out layout, pair ok)."""
    t, w, out1 = piece_ffn_in(x, model, l7, c8, c9, dense)
    conv, op, w2, out, pair_ok = piece_ffn_out(x, out1, c9, c10, dense)
    return t + conv + op, w + w2, out, pair_ok


def piece_ffn_in(x: Gather, model, l7, c8, c9, dense: bool = False):
    """FFN1 and, for a MoE layer, the router beside it: (time, weights, FFN1's output layout)."""
    sfx = "_dense" if dense else ""
    x.scope = "ffn_dense" if dense else "ffn"
    t1, out1, lin1 = x.step("ffn1" + sfx, c9, l7, "hidden")
    t = t1
    w = x.weight("ffn1" + sfx, x.modes["ffn1" + sfx])
    if model.is_moe and not dense:
        tr, outr, _ = x.step("router", c8, l7, "hidden")
        # the routing decision must be where the tokens are: every rank, or each rank's own (T)
        t = t + tr + x.conv("router", "router", outr, np.where(lin1 == T, T, R))
        w = w + x.weight("router", x.modes["router"])
    return t, w, out1


def piece_ffn_out(x: Gather, out1, c9, c10, dense: bool = False):
    """FFN2 after FFN1's output layout out1: (conversion time, op time, weights, out layout,
    whether the pair of choices is allowed)."""
    sfx = "_dense" if dense else ""
    s2 = SLOT["ffn2" + sfx]
    pair_ok = (c9 == EXPERTS) == (c10 == EXPERTS)
    # `experts` on FFN2 continues FFN1's expert-local state; anything else converts the
    # intermediate activation (an unmatched experts pair is invalid: costed, then flagged)
    lin2 = np.where(c10 == EXPERTS, np.where(pair_ok, out1, ER),
                    np.where(c10 >= NONE, x.pick("inter" + sfx, out1), FIXED_IN[s2, c10]))
    mode2 = MODE_OF[s2, c10, lin2]
    conv = x.conv("ffn2" + sfx, "inter" + sfx, out1, lin2)
    return conv, x.op("ffn2" + sfx, mode2), x.weight("ffn2" + sfx, mode2), MODE_OUT[s2, mode2], \
        pair_ok


def piece_between(x: Gather, out, l7, l2):
    """Layer boundary: the FFN output and the residual move into the next attn_norm's layout."""
    x.scope = "between"
    return x.conv("attn_norm", "hidden", out, l2) + x.conv("attn_norm", "hidden", l7, l2)


def piece_last(x: Gather, out, l7, c11, c12):
    """Last FFN output -> final norm -> LM head -> sampled ids everywhere: (time, weights, logits)."""
    t = piece_final_norm(x, out, l7, c11)
    t12, final, w, out12 = piece_lm_head(x, c11, c12)
    return t + t12 + final, w, out12


def piece_final_norm(x: Gather, out, l7, c11):
    """The last FFN output and the residual into the final norm's layout, and the norm."""
    x.scope = "last"
    l11 = NORM_OF[c11]
    return x.conv("final_norm", "hidden", out, l11) + x.conv("final_norm", "hidden", l7, l11) \
        + x.op("final_norm", c11)


def piece_lm_head(x: Gather, c11, c12):
    """LM head after the final norm, then the sampled ids to every rank: (head time, ids time,
    weights of the norm and the head, logits layout)."""
    x.scope = "last"
    t12, out12, _ = x.step("lm_head", c12, NORM_OF[c11], "hidden")
    w = x.weight("final_norm", c11) + x.weight("lm_head", x.modes["lm_head"])
    return t12, x.tab.final_s[x.g, out12], w, out12


def piece_send(x: Gather, out, l7):
    """Stage-to-stage send of the activation and the residual (split over tp when T or F)."""
    s = x.tab.send_s
    return sum(np.where((lo == T) | (lo == F), s[x.g, 0], s[x.g, 1]) for lo in (out, l7))


@dataclass
class Walk:
    """Per strategy [N]: resolved modes and layouts, and the time and weights of each piece."""
    modes: dict          # slot name -> mode index
    layouts: dict        # activation name -> layout
    op_s: dict           # slot name -> op time (roofline + overhead + the op's own collectives)
    convs: list          # (slot it feeds, point, src, dst, time, scope) per inserted conversion
    attn_s: np.ndarray   # one layer from attn_norm to ffn_norm, conversions included
    ffn_s: np.ndarray    # one MoE (or dense-model) FFN block: router, FFN1, FFN2, conversions
    ffn_dense_s: np.ndarray   # one dense-layer FFN block of a MoE model (0 if none)
    between_s: np.ndarray     # layer boundary: FFN output and residual -> next attn_norm layout
    first_s: np.ndarray       # embedding and its conversion into the first attn_norm
    last_s: np.ndarray        # last FFN output -> final norm -> LM head -> sampled ids
    send_s: np.ndarray        # stage-to-stage send (activation + residual)
    layer_w: np.ndarray       # per GPU per layer: attention and norm weights + KV cache
    ffn_w: np.ndarray         # per GPU per MoE (or dense-model) layer: FFN weights
    ffn_dense_w: np.ndarray
    emb_w: np.ndarray
    tail_w: np.ndarray        # final norm + LM head
    bad: np.ndarray           # reason bits that come from the choices


def walk(tab: Tables, g: np.ndarray, choices: np.ndarray, model: ModelSpec,
         record: list | None = None) -> Walk:
    """Cost strategies with coarse index g [N] and choices [N, 12] piece by piece."""
    c = [choices[:, i] for i in range(len(OPS))]
    x = Gather(tab, g, record)
    l2, l7 = NORM_OF[c[1]], NORM_OF[c[6]]
    first, emb_w = piece_first(x, c[0], l2)
    attn, layer_w, attn_out = piece_attn(x, model, *c[1:7])
    ffn, ffn_w, out, pair_ok = piece_ffn(x, model, l7, c[7], c[8], c[9])
    zero = np.zeros(len(g))
    ffn_d, ffn_dw = zero, zero
    if model.is_moe and model.ffn.dense_layers:
        ffn_d, ffn_dw, _, _ = piece_ffn(x, model, l7, c[7], c[8], c[9], dense=True)
    bad = np.where(pair_ok, 0, REASON_BIT["experts"])
    if not model.is_moe:
        bad |= np.where((c[8] == EXPERTS) | (c[9] == EXPERTS), REASON_BIT["experts"], 0)
    between = piece_between(x, out, l7, l2)
    last, tail_w, logits = piece_last(x, out, l7, c[10], c[11])
    send = piece_send(x, out, l7)
    layouts = dict(attn_norm=l2, ffn_norm=l7, final_norm=NORM_OF[c[10]], attn_out=attn_out,
                   ffn_out=out, logits=logits)
    return Walk(x.modes, layouts, x.op_s, record if record is not None else [], attn, ffn, ffn_d,
                between, first, last, send, layer_w, ffn_w, ffn_dw, emb_w, tail_w, bad)


# ----------------------------------------------------------------------------------------------
# the fused walk: the same pieces, tabulated per coarse row over the choices they depend on
#
# Layouts follow from the choices alone (PICK, FIXED_IN, MODE_OF, MODE_OUT hold no costs), so a
# strategy's path through the layouts is known without its coarse row. Each piece's time is then
# one lookup in a table built once per coarse row, with the additions done in the same order as
# ``walk``: the fused walk is bit-identical to it (tests/test_costmodel_reference.py).

def _step_lut(slot):
    """[incoming layout, choice] -> (mode, output layout) of a step into ``slot``; flat [24]."""
    s = SLOT[slot]
    inc, ch = np.arange(6)[:, None], np.arange(4)[None, :]
    lin = np.where(ch >= NONE, PICK[inc], FIXED_IN[s, ch])
    mode = MODE_OF[s, ch, lin]
    return mode.ravel(), MODE_OUT[s, mode].ravel()


MODE_SC, NEXT_SC = _step_lut("scores")
MODE_CTX, NEXT_CTX = _step_lut("context")
_, NEXT_OP = _step_lut("out_proj")
QKV_OUT = _step_lut("qkv")[1].reshape(6, 4)[NORM_OF].ravel()     # [op2*4 + op3] (op2's norm in)
FFN1_OUT = _step_lut("ffn1")[1].reshape(6, 4)[NORM_OF]           # [op7, op9]


def _grid(*sizes):
    """Every combination of choices 0..size-1, flattened, last axis fastest."""
    return tuple(a.ravel() for a in np.meshgrid(*map(np.arange, sizes), indexing="ij"))


def _path_fields():
    """The layout path of the attention block as indices into the fused pieces, for every value
    of the bit field op2..op7 of ``pack`` (12 bits; op2 and op7 = 3 never occur: their entries
    point at entry 0). The layouts depend on the choices alone, so this holds no costs."""
    b = np.arange(4096)
    c2, c3, c4, c5, c6, c7 = ((b >> s) & 3 for s in (10, 8, 6, 4, 2, 0))
    c2, c7 = np.minimum(c2, 2), np.minimum(c7, 2)
    k23 = c2 * 4 + c3
    q = QKV_OUT[k23] * 4 + c4                    # scores: incoming layout*4 + choice
    k5 = NEXT_SC[q] * 4 + c5                     # context
    k6 = NEXT_CTX[k5] * 4 + c6                   # out_proj
    return dict(att1=k23, att1_w=k23, scores=q, context=k5, out_proj=k6, out_w=k6,
                kv=MODE_SC[q] * 4 + MODE_CTX[k5], to_norm=NEXT_OP[k6] * 3 + c7,
                to_norm_res=NORM_OF[c2] * 3 + c7, norm=c7, norm_w=c7)


PATH = _path_fields()


class Fused:
    """Per coarse row, each piece's time (and weights) over the choices it depends on, in one flat
    g-major array (row g = ``width`` values, piece ``name`` at ``offset[name]``), and the lookup
    tables from choice bit fields to positions in a row."""

    def __init__(self, parts: dict, ffn_out, ffn_bad):
        self.offset, at = {}, 0
        for name, a in parts.items():
            self.offset[name] = at
            at += a.shape[1]
        self.width = at
        self.flat = np.concatenate(list(parts.values()), axis=1).ravel()
        self.ffn_bad = ffn_bad                            # [op7..op10 bits] -> reason bits
        o = self.offset
        o["to_norm_res"] = o["to_norm"]
        self.path = {k: o[k] + v for k, v in PATH.items()}      # [op2..op7 bits] -> position
        c1, c2 = np.arange(16) >> 2, np.minimum(np.arange(16) & 3, 2)
        self.first = o["first"] + c1 * 3 + c2                   # [op1, op2 bits]
        self.emb_w = o["emb_w"] + c1
        r = ffn_out * 3 + np.minimum(np.arange(256) >> 6, 2)    # FFN output layout*3 + op7
        self.between = o["between"] + r * 3                     # [op7..op10 bits] (+ op2)
        self.last = o["last"] + r * 12                          # (+ op11*4 + op12)
        self.send = o["send"] + r

    def append(self, other: "Fused") -> "Fused":
        out = object.__new__(Fused)
        out.__dict__.update(self.__dict__)
        out.flat = np.concatenate([self.flat, other.flat])
        return out


def fuse(tab: Tables, model: ModelSpec) -> Fused:
    """Tabulate the pieces of ``walk`` per coarse row of ``tab``, computed by the same functions
    over grids of choices; a piece over many choices (FFN: 192, last stage: 216) is summed from
    its parts by broadcasting, in the order the piece itself adds them."""
    G = len(tab.coarse)
    x = Gather(tab, np.arange(G)[:, None])
    c1, c2 = _grid(3, 3)
    first, _ = piece_first(x, c1, NORM_OF[c2])                           # [G, op1*3 + op2]
    emb_w = x.weight("embedding", np.arange(3))                          # [G, op1]
    c2, c3 = _grid(3, 4)
    att1 = x.op("attn_norm", c2) + x.step("qkv", c3, NORM_OF[c2], "hidden")[0]   # [G, op2*4+op3]
    att1_w = x.weight("attn_norm", c2) + x.weight("qkv", x.modes["qkv"])
    inc, ch = _grid(6, 4)
    scores = x.step("scores", ch, inc, "qkv")[0]                         # [G, layout in*4+choice]
    context = x.step("context", ch, inc, "scores")[0]
    out_proj = x.step("out_proj", ch, inc, "context")[0]
    out_w = x.weight("out_proj", x.modes["out_proj"])
    m4, m5 = _grid(4, 4)
    kv = _kv_cache(model, x, m4, m5)                                     # [G, mode4*4 + mode5]
    src, c7 = _grid(6, 3)
    to_norm = x.conv("ffn_norm", "hidden", src, NORM_OF[c7])             # [G, layout*3 + op7]
    norm = x.op("ffn_norm", np.arange(3))
    norm_w = x.weight("ffn_norm", np.arange(3))
    parts = dict(first=first, emb_w=emb_w, att1=att1, att1_w=att1_w, scores=scores,
                 context=context, out_proj=out_proj, out_w=out_w, kv=kv, to_norm=to_norm,
                 norm=norm, norm_w=norm_w)
    # FFN block [G, op7, op8, op9, op10] = (in[op7, op8, op9] + conv[op7, op9, op10]) + op[...]
    a7, a8, a9 = _grid(3, 4, 4)
    b7, b9, b10 = _grid(3, 4, 4)
    for dense in ((False, True) if model.is_moe and model.ffn.dense_layers else (False,)):
        t_in, w_in, _ = piece_ffn_in(x, model, NORM_OF[a7], a8, a9, dense)
        conv, op, w2, out, pair_ok = piece_ffn_out(x, FFN1_OUT[b7, b9], b9, b10, dense)
        t_in, w_in = (a.reshape(G, 3, 4, 4, 1) for a in (t_in, w_in))
        conv, op, w2 = (np.broadcast_to(a, (G, 48)).reshape(G, 3, 1, 4, 4) for a in (conv, op, w2))
        key = "ffn_d" if dense else "ffn"
        parts[key] = (t_in + conv + op).reshape(G, 192)
        parts[key + "_w"] = (w_in + w2).reshape(G, 192)
    ffn_out = np.broadcast_to(out.reshape(3, 1, 16), (3, 4, 16)).ravel()  # [op7..op10 bits]
    bad = np.broadcast_to(np.where(pair_ok, 0, REASON_BIT["experts"]).reshape(3, 1, 16),
                          (3, 4, 16)).ravel()
    if not model.is_moe:
        c9, c10 = _grid(3, 4, 4, 4)[2:]
        bad = bad | np.where((c9 == EXPERTS) | (c10 == EXPERTS), REASON_BIT["experts"], 0)
    # layer boundary, last stage and send: by (FFN output layout, op7[, op2 | op11, op12])
    lo, c7, c2 = _grid(6, 3, 3)
    parts["between"] = piece_between(x, lo, NORM_OF[c7], NORM_OF[c2])    # [G, (lo*3+op7)*3+op2]
    lo, c7, c11 = _grid(6, 3, 3)
    fin = piece_final_norm(x, lo, NORM_OF[c7], c11).reshape(G, 18, 3, 1)
    c11, c12 = _grid(3, 4)
    head, ids, parts["tail_w"], _ = piece_lm_head(x, c11, c12)          # [G, op11*4 + op12]
    head, ids = (a.reshape(G, 1, 3, 4) for a in (head, ids))
    parts["last"] = (fin + head + ids).reshape(G, 216)                   # [G, (lo*3+op7)*12+..]
    lo, c7 = _grid(6, 3)
    parts["send"] = piece_send(x, lo, NORM_OF[c7])                       # [G, lo*3 + op7]
    parts = {k: np.broadcast_to(v, (G, np.shape(v)[-1])) for k, v in parts.items()}
    pad = (0, 64)                                  # op7 = 3 never occurs (a norm takes 0..2)
    return Fused(parts, np.pad(ffn_out, pad), np.pad(bad, pad))


def fused_walk(fz: Fused, g, code, model: ModelSpec):
    """``walk`` by lookups in ``fz`` for coarse rows g [N] and packed choices ``code`` [N]: the
    pieces ``stage_max`` and ``stage_memory`` take, and the reason bits of the choices."""
    f, p = fz.flat, fz.path
    base = g * fz.width
    b = (code >> 10) & 4095                         # op2..op7
    t = f[base + p["att1"][b]]                      # attention: additions in walk's order
    for piece in ("scores", "context", "out_proj", "to_norm", "to_norm_res"):
        t = t + f[base + p[piece][b]]
    attn = t + f[base + p["norm"][b]]
    layer_w = f[base + p["att1_w"][b]] + f[base + p["out_w"][b]] + f[base + p["norm_w"][b]] \
        + f[base + p["kv"][b]]
    b12 = code >> 20                                # op1, op2
    first = f[base + fz.first[b12]]
    kf = (code >> 4) & 255                          # op7..op10
    bf = base + kf
    o = fz.offset
    ffn, ffn_w = f[bf + o["ffn"]], f[bf + o["ffn_w"]]
    if "ffn_d" in o:
        ffn_d, ffn_dw = f[bf + o["ffn_d"]], f[bf + o["ffn_d_w"]]
    else:
        ffn_d = ffn_dw = np.zeros(len(g))
    between = f[base + fz.between[kf] + (b12 & 3)]
    k1112 = code & 15                               # op11, op12
    last = f[base + fz.last[kf] + k1112]
    send = f[base + fz.send[kf]]
    return (attn, between, ffn, ffn_d, first, last, send, layer_w, ffn_w, ffn_dw,
            f[base + fz.emb_w[b12]], f[base + (o["tail_w"] + k1112)], fz.ffn_bad[kf])


# ----------------------------------------------------------------------------------------------
# assembly: stages, pipeline, memory, validity

@dataclass
class Result:
    """Evaluation of N strategies; every array is [N]. Times in seconds, memory in bytes."""
    strategies: np.ndarray
    valid: np.ndarray
    reasons: np.ndarray             # bit flags, see REASONS
    tokens_per_s_per_gpu: np.ndarray
    tokens_per_s: np.ndarray
    tpot_s: np.ndarray              # decode: time per output token (one step); prefill: nan
    ttft_s: np.ndarray              # prefill: time to first token of the batch; decode: nan
    step_s: np.ndarray              # one pipeline round (decode) or the whole prefill pass
    memory_bytes: np.ndarray        # per GPU, the fullest stage
    gpus: np.ndarray
    running: np.ndarray | None = None   # serve phase: requests running of the concurrency

    def reason_list(self, i: int) -> list:
        return [r for r in REASONS if self.reasons[i] & REASON_BIT[r]]

    def __len__(self):
        return len(self.valid)


def stage_max(model, lp, pp, attn, between, ffn, ffn_dense, first, last, send):
    """Slowest pipeline stage plus the stage-to-stage send; arguments broadcast together.

    Stage s holds lp layers: the first stage adds the embedding (its first layer has no boundary
    before it), the last the final norm and LM head. Without dense layers all middle stages are
    equal; with them, see ``_candidates``.
    """
    head = first - between
    dense = model.ffn.dense_layers if model.is_moe else 0
    send = np.where(pp > 1, send, 0.0)
    if dense == 0:
        body = lp * (attn + between + ffn)
        extra = np.where(pp == 1, head + last,
                         np.maximum(np.maximum(head, last), np.where(pp >= 3, 0.0, -np.inf)))
        return body + extra + send
    worst = -np.inf
    for cand, n_dense in zip(*_candidates(pp, dense, model.layers)):
        stage = lp * (attn + between) + (lp - n_dense) * ffn + n_dense * ffn_dense \
            + (cand == 0) * head + (cand == pp - 1) * last
        worst = np.maximum(worst, stage)
    return worst + send


def stage_memory(model, lp, pp, layer_w, ffn_w, ffn_dense_w, emb_w, tail_w, workspace):
    """Memory per GPU of the fullest stage; arguments broadcast together."""
    dense = model.ffn.dense_layers if model.is_moe else 0
    if dense == 0:
        extra = np.where(pp == 1, emb_w + tail_w, np.maximum(emb_w, tail_w))
        return lp * (layer_w + ffn_w) + extra + workspace
    worst = -np.inf
    for cand, n_dense in zip(*_candidates(pp, dense, model.layers)):
        mem = lp * layer_w + (lp - n_dense) * ffn_w + n_dense * ffn_dense_w \
            + (cand == 0) * emb_w + (cand == pp - 1) * tail_w
        worst = np.maximum(worst, mem)
    return worst + workspace


def _candidates(pp, dense_layers, layers):
    """Stages that can be the slowest or fullest: first, second, second-to-last, last.

    Stage s holds layers [s*lp, (s+1)*lp); the first dense_layers are dense, so the dense count per
    stage is non-increasing in s and every per-stage sum is linear in it: over the middle stages
    the extremes sit at s=1 or s=pp-2.
    """
    pp = np.asarray(pp, dtype=np.float64)
    lp = layers / pp
    cands = (np.zeros_like(pp), np.minimum(1, pp - 1), np.maximum(pp - 2, 0), pp - 1)
    return cands, tuple(np.clip(dense_layers - c * lp, 0, lp) for c in cands)


def assemble(model, tab: Tables, g, w: Walk):
    """Slowest stage (plus the stage-to-stage send) and the fullest stage's memory per GPU."""
    lp = tab.layers_per_stage[g]
    pp = tab.coarse[g, PP].astype(np.float64)
    slowest = stage_max(model, lp, pp, w.attn_s, w.between_s, w.ffn_s, w.ffn_dense_s, w.first_s,
                        w.last_s, w.send_s)
    memory = stage_memory(model, lp, pp, w.layer_w, w.ffn_w, w.ffn_dense_w, w.emb_w, w.tail_w,
                          tab.workspace_bytes[g])
    return slowest, memory


CHUNK = 16384


def _times(model, tables, fz, g, code):
    """Slowest stage, fullest stage's memory and the choices' reason bits of strategies g, code."""
    (attn, between, ffn, ffn_d, first, last, send,
     layer_w, ffn_w, ffn_dw, emb_w, tail_w, bad) = fused_walk(fz, g, code, model)
    lp, pp = tables.layers_per_stage[g], tables.pp[g]
    slowest = stage_max(model, lp, pp, attn, between, ffn, ffn_d, first, last, send)
    memory = stage_memory(model, lp, pp, layer_w, ffn_w, ffn_dw, emb_w, tail_w,
                          tables.workspace_bytes[g])
    return slowest, memory, bad


def fused_tables(tables: Tables, model: ModelSpec) -> Fused:
    """``fuse(tables)``, built on first use and kept with the tables."""
    fz = tables.extra.get("fused")
    if fz is None:
        fz = tables.extra["fused"] = fuse(tables, model)
    return fz


KEY_BITS = (12, 12, 12, 24)      # tp, ep, pp, batch in one int64 key (exact when each fits)
_KEY_WEIGHTS = np.array([1 << 48, 1 << 36, 1 << 24, 1] + [0] * N_OPS, dtype=np.int64)
_CODE_WEIGHTS = np.array([0] * N_COARSE + [4 ** (N_OPS - 1 - i) for i in range(N_OPS)],
                         dtype=np.int64)


def coarse_key(strategies):
    """One int64 per strategy from its coarse part (tp, ep, pp < 2^12, batch < 2^24; a row beyond
    them is grouped by ``group_coarse``'s exact fallback): cheap to sort and compare."""
    s = np.asarray(strategies, dtype=np.int64)
    return s @ _KEY_WEIGHTS[:s.shape[1]]       # a matrix-vector product: one pass over the rows


def pack(strategies) -> np.ndarray:
    """The twelve choices of strategies [N, 16] as one integer each, 2 bits per op, op 1 highest:
    the fused tables' indices are then bit fields of it (op7..op10 = (code >> 4) & 255)."""
    return np.asarray(strategies, dtype=np.int64) @ _CODE_WEIGHTS


def _keys_exact(coarse) -> bool:
    """Whether ``coarse_key`` keeps every field of these rows (degrees >= 1 are assumed)."""
    return bool(len(coarse) == 0 or (coarse[:, :3].max() < 1 << KEY_BITS[0]
                                     and coarse[:, 3].max() < 1 << KEY_BITS[3]))


def tables_for(model, topo, work, strategies):
    """Tables for the distinct coarse rows of strategies [N, 16], and each row's index into them."""
    coarse, inverse = group_coarse(strategies)
    return build_tables(model, topo, work, coarse), inverse


def group_coarse(strategies):
    """Distinct coarse rows [G, 4] of strategies [N, 16] in ascending (tp, ep, pp, batch) order,
    and each strategy's index into them.

    Without a sort: the fields of each row's key are ranked through tables over their ranges and
    the ranks combine into one dense code per row (O(N); ``np.unique`` sorts, ~4x slower at 1 M)."""
    s = np.asarray(strategies, dtype=np.int64)
    coarse = s[:, :N_COARSE]
    if len(s) < CHUNK or not _keys_exact(coarse):
        _, first, inverse = np.unique(coarse, axis=0, return_index=True, return_inverse=True)
        return coarse[first], inverse.ravel()
    key = coarse_key(s)
    code, sizes, values, shift = 0, [], [], 60
    for bits in KEY_BITS:
        shift -= bits
        field = (key >> shift) & ((1 << bits) - 1)
        seen = np.zeros(int(field.max()) + 1, dtype=bool)
        seen[field] = True
        values.append(np.flatnonzero(seen))
        sizes.append(len(values[-1]))
        code = code * sizes[-1] + (np.cumsum(seen) - 1)[field]
    if np.prod(sizes, dtype=np.float64) > 1 << 26:     # sparse combinations: sort the keys
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return coarse[first], inverse.ravel()
    used = np.zeros(int(np.prod(sizes)), dtype=bool)     # at most N of them are true
    used[code] = True
    idx = np.unravel_index(np.flatnonzero(used), sizes)
    return np.stack([v[k] for v, k in zip(values, idx)], axis=1), (np.cumsum(used) - 1)[code]


class TableCache:
    """Coarse tables of one model, topology and workload for every coarse row seen so far.

    For callers that evaluate many small batches whose coarse rows are not known in advance
    (the serve phase's running batch depends on each strategy's memory): tables are built only
    for coarse rows not seen before and appended. The appended tables keep the arrays
    ``evaluate`` needs, not the per-collective records of ``breakdown``.
    """

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload):
        self.model, self.topo, self.work = model, topo, work
        self.keys = np.zeros(0, dtype=np.int64)     # sorted coarse keys
        self.rows = np.zeros(0, dtype=np.int64)     # their rows in self.tables
        self.tables = None

    def evaluate(self, strategies) -> Result:
        strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
        if not _keys_exact(strategies[:, :N_COARSE]):   # degrees beyond the key: no cache
            return evaluate(self.model, self.topo, self.work, strategies)
        keys = coarse_key(strategies)
        uniq, first = np.unique(keys, return_index=True)
        new = ~np.isin(uniq, self.keys)
        if new.any():
            built = build_tables(self.model, self.topo, self.work,
                                 strategies[first[new], :N_COARSE])
            start = 0 if self.tables is None else len(self.tables.coarse)
            if self.tables is None:
                self.tables = built
            else:   # the fused pieces of the rows seen so far are kept and extended
                fz = fused_tables(self.tables, self.model).append(fused_tables(built, self.model))
                self.tables = _append(self.tables, built)
                self.tables.extra["fused"] = fz
            keys_all = np.concatenate([self.keys, uniq[new]])
            rows_all = np.concatenate([self.rows, start + np.arange(int(new.sum()))])
            order = np.argsort(keys_all, kind="stable")
            self.keys, self.rows = keys_all[order], rows_all[order]
        g = self.rows[np.searchsorted(self.keys, keys)]
        return evaluate(self.model, self.topo, self.work, strategies, tables=self.tables,
                        coarse_index=g)


def _append(a: Tables, b: Tables) -> Tables:
    """Tables of a's coarse rows followed by b's (without breakdown records)."""
    arrays = {f.name: np.concatenate([getattr(a, f.name), getattr(b, f.name)])
              for f in fields(Tables) if isinstance(getattr(a, f.name), np.ndarray)}
    extra = {k: np.concatenate([a.extra[k], b.extra[k]]) for k in a.extra
             if isinstance(a.extra[k], np.ndarray)}
    return Tables(intrinsic={}, extra=extra, **arrays)


def evaluate(model: ModelSpec, topo: TopologySpec, work: Workload, strategies,
             tables: Tables | None = None, coarse_index=None, return_walk=False):
    """Evaluate strategies [N, 16] -> Result with arrays [N].

    Args:
        tables: precomputed coarse tables (with ``coarse_index`` [N] into them), to skip grouping.
        return_walk: also return the Walk (per-op pieces) for breakdowns.
    """
    strategies = np.atleast_2d(np.asarray(strategies, dtype=np.int64))
    if tables is None:
        tables, coarse_index = tables_for(model, topo, work, strategies)
    g = np.asarray(coarse_index)
    if return_walk:
        w = walk(tables, g, strategies[:, N_COARSE:], model, record=[])
        slowest, memory = assemble(model, tables, g, w)
        fields_ = finish(topo, work, tables, g, slowest, memory, w.bad)
        return Result(strategies, *fields_), w, tables
    slowest, memory, bad = _stages(model, tables, g, strategies)
    out = [np.empty(len(g), dtype=d) for d in (bool, np.int64) + (np.float64,) * 7]
    for i in range(0, len(g), CHUNK):     # chunks that stay in cache
        j = slice(i, i + CHUNK)
        for o, v in zip(out, finish(topo, work, tables, g[j], slowest[j], memory[j], bad[j])):
            o[j] = v
    return Result(strategies, *out)


def _stages(model, tables: Tables, g, strategies):
    """Slowest stage, fullest stage's memory and the choices' reason bits, by the fused walk in
    chunks. A large batch is walked in the order of its coarse rows, so that the tables of a row
    stay in cache while its strategies are costed (about 2x faster over many coarse rows)."""
    fz = fused_tables(tables, model)
    n, G = len(g), len(tables.coarse)
    code = pack(strategies)
    order = None
    if n > CHUNK and G > 1:
        order = np.argsort(g.astype(np.uint16) if G <= 1 << 16 else g, kind="stable")
        g = np.repeat(np.arange(G), np.bincount(g, minlength=G))
        code = code[order]
    out = [np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)]
    for i in range(0, n, CHUNK):
        for o, v in zip(out, _times(model, tables, fz, g[i:i + CHUNK], code[i:i + CHUNK])):
            o[i:i + CHUNK] = v
    if order is not None:
        for k, v in enumerate(out):
            out[k] = np.empty_like(v)
            out[k][order] = v
    return out


def finish(topo: TopologySpec, work: Workload, tables: Tables, g, slowest, memory, bad):
    """Step time, throughput, SLO and memory checks from the slowest stage and the fullest
    stage's memory: the Result fields after ``strategies``, in order."""
    pp, batch, gpus = tables.pp[g], tables.batch[g], tables.gpus[g]
    reasons = tables.fixed_invalid[g] | bad
    if work.phase in ("decode", "mixed"):
        # pp micro-batches each pass every stage once, plus the engine's fixed time per step
        step = pp * slowest + topo.step_overhead_s
        tpot, ttft = step, np.full(len(g), np.nan)
        tokens = batch / step
        reasons |= np.where(tpot > work.tpot_slo_ms * 1e-3, REASON_BIT["slo"], 0)
    else:
        # pp micro-batches through pp stages (fill + drain), plus the engine's time per pass
        step = (2 * pp - 1) * slowest + topo.step_overhead_s
        tpot, ttft = np.full(len(g), np.nan), step
        tokens = batch * work.context / step
        if work.ttft_slo_ms:
            reasons |= np.where(ttft > work.ttft_slo_ms * 1e-3, REASON_BIT["slo"], 0)
    usable = topo.hbm_bytes - topo.hbm_reserve_bytes
    reasons |= np.where(memory > usable, REASON_BIT["memory"], 0)
    return reasons == 0, reasons, tokens / gpus, tokens, tpot, ttft, step, memory, gpus


# ----------------------------------------------------------------------------------------------
# per-op breakdown of one strategy (for `lts estimate`)

def breakdown(model: ModelSpec, topo: TopologySpec, work: Workload, strategy) -> tuple:
    """(Result of one strategy, list of per-op dicts) with times per op instance and counts.

    Each op dict: name, count (instances per step on one GPU's pipeline), compute_us, memory_us,
    time_us (roofline + overhead), collectives (kind, group, bytes, time_us, count) -- the
    collectives the op needs itself and the layout conversions inserted in front of it.
    """
    res, w, tab = evaluate(model, topo, work, np.asarray(strategy)[None], return_walk=True)
    g = 0
    layers = model.layers
    moe_layers = model.moe_layers if model.is_moe else layers
    dense_layers = model.ffn.dense_layers if model.is_moe else 0
    count = {"first": 1, "last": 1, "layer": layers, "between": layers - 1,
             "ffn": moe_layers, "ffn_dense": dense_layers}
    slot_count = {op: layers for op in OPS}
    slot_count.update(embedding=1, final_norm=1, lm_head=1, router=moe_layers, ffn1=moe_layers,
                      ffn2=moe_layers, router_dense=0, ffn1_dense=dense_layers,
                      ffn2_dense=dense_layers)
    ops = []
    for slot in SLOTS:
        if slot not in w.modes or slot_count[slot] == 0:
            continue
        if slot == "router" and not model.is_moe:
            continue
        s, mode = SLOT[slot], int(w.modes[slot][0])
        colls = [{"kind": kind, "group": group, "bytes": float(nb[g]), "time_us": float(t[g]) * 1e6,
                  "count": slot_count[slot]}
                 for kind, group, nb, t in tab.intrinsic.get((s, mode), []) if t[g] > 0]
        for feeds, point, src, dst, t, scope in w.convs:
            if feeds == slot and t[0] > 0:
                kind = CONVERSION.get((int(src[0]), int(dst[0])))
                nb = tab.conv_bytes[g, PT[point]]
                colls.append({"kind": kind, "group": "tp",
                              "bytes": float(nb / tab.coarse[g, TP] if kind == "all-to-all" else nb),
                              "time_us": float(t[0]) * 1e6, "count": count[scope],
                              "layout": f"{LAYOUT_NAMES[int(src[0])]}->{LAYOUT_NAMES[int(dst[0])]}"})
        if slot == "lm_head":
            out = int(w.layouts["logits"][0])
            t = float(tab.final_s[g, out])
            if t > 0:
                kind = "all-gather" if out in (T, F) else "all-reduce"
                nb = tab.extra["ids_bytes"][g] if out == T else tab.conv_bytes[g, PT["logits"]]
                colls.append({"kind": kind, "group": "tp", "bytes": float(nb), "time_us": t * 1e6,
                              "count": 1, "layout": f"{LAYOUT_NAMES[out]}->ids"})
        ops.append({"name": slot, "choice": int(SLOT_MODES[slot][mode][0]),
                    "layout_in": LAYOUT_NAMES[MODE_IN[s, mode]],
                    "layout_out": LAYOUT_NAMES[MODE_OUT[s, mode]],
                    "count": slot_count[slot],
                    "compute_us": float(tab.compute_s[g, s, mode]) * 1e6,
                    "memory_us": float(tab.memory_s[g, s, mode]) * 1e6,
                    "time_us": float(tab.time_s[g, s, mode]) * 1e6,
                    "weight_bytes": float(tab.weight_bytes[g, s, mode]),
                    "collectives": colls})
    pp = int(tab.coarse[g, PP])
    if pp > 1 and w.send_s[0] > 0:
        ops.append({"name": "stage_send", "choice": -1, "layout_in": "", "layout_out": "",
                    "count": pp, "compute_us": 0.0, "memory_us": 0.0, "time_us": 0.0,
                    "weight_bytes": 0.0,
                    "collectives": [{"kind": "send", "group": "pp",
                                     "bytes": float(tab.send_bytes[g, 1]),
                                     "time_us": float(w.send_s[0]) * 1e6, "count": pp}]})
    return res, ops
