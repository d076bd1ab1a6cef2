"""Scalar reference of ``lts.cost.model.evaluate`` for ONE strategy: slow and obvious, for tests.

What it checks: the walk and the vectorization, i.e. that lts's layout flow, its conversions,
pieces, stages and pipeline assembly, batched over N strategies and fused per coarse row, give
what a literal walk of one strategy's layers gives. It re-derives the per-op formulas too, so a
formula that changes in ``lts.cost.tables`` must change here; each formula's value is pinned on its
own, by a closed form, in ``tests/test_formulas.py``.

Plain Python floats and ``math.ceil``; no NumPy, and nothing from cost.model's tables, walk or
mode tables. It walks the model literally (docs/design.md §3):

    embedding -> for every layer: attn_norm, qkv, scores, context, out_proj, ffn_norm,
                 [router], ffn1, ffn2 (dense or MoE per ``ffn.dense_layers``)
              -> final_norm, lm_head, sampling

assigns layers to pipeline stages explicitly (stage s holds layers s*Lp .. (s+1)*Lp - 1, Lp =
layers // pp; the embedding sits on stage 0, final norm, LM head and sampling on the last), sums
each stage, takes the slowest, and builds TPOT (decode) = pp * (slowest + send) or TTFT (prefill)
= (2pp - 1) * (slowest + send). Memory is summed per stage, per layer.

Layout rules (docs/design.md §3, layouts R/T/F/P over the tp group, plus the expert-local ER/ET):
- a row-parallel GEMM (dim 0) needs F and produces P; a column GEMM (dim 1) needs R, produces F;
- ``none`` on a GEMM keeps an incoming R or T and converts P or F to R
  and works on that layout;
- scores dim 0 (heads) F -> F, dim 1 (head_dim partial sums) F -> P; context dim 0 F -> F,
  dim 1 R -> F (it needs whole probabilities);
- norms fix the residual stream's layout: dim 0 -> T, dim 1 -> F, none -> R;
- ``experts`` on FFN1 takes R or T -> ER/ET (expert-local); ``experts`` on FFN2 continues it:
  ER -> P, ET -> T; an unmatched ``experts`` pair is invalid (reason ``experts``).

Every collective inserted is listed with the op it feeds, kind, group, bytes, seconds and count
(how many times one pass of one micro-batch through the whole pipeline runs it); groups of one
rank are no collective and are not listed.

**Known deviations of lts.cost.model from docs/design.md.** ``evaluate(..., compat=...)`` can
reproduce them one by one, so that the rest of the comparison still bites; by default (no
compat) this module implements what docs/design.md says:

- ``"kv_per_microbatch"``: lts counts the resident KV cache of ONE micro-batch (batch/pp
  sequences) per stage. Every stage serves all pp micro-batches, so it holds the KV cache of the
  whole batch share: docs/design.md §3 "KV cache (batch share x context x layers per stage x ...)".
  The reference (default) counts pp micro-batches.
- ``"moe_layout_everywhere"``: lts uses the FFN-output layout of a *MoE* layer for the boundary
  after *every* layer (conversion into the next attn_norm, stage-to-stage send), including the
  ``dense_layers`` of a MoE model, whose FFN2 (``none``) may pick a different R/T layout because
  its intermediate activation has a different size. The literal walk uses each layer's own.
- ``"ffn_fractional_t_rows"``: under ``none`` on T (and ``experts`` on a dense FFN) lts costs
  FFN1/FFN2 with rows/tp tokens per rank (and tokens/tp for the expected active experts), while
  every other op on T, and the shared expert of the same op, uses whole sequences:
  ceil(seqs/tp) x tokens per sequence on the busiest rank. The reference (default) uses whole
  sequences for the FFN too.

Matched on purpose (docs/design.md is silent; listed for review, not reproduced by a flag):
- the router and FFN1 both convert the normed activation from the ffn_norm layout, each paying
  its own conversion even when they need the same layout (e.g. two F -> R all-gathers);
- ``experts`` on the dense layers of a MoE model (replicated weights) still pays the tp
  all-to-all of the token-split (T) mode in FFN1 and FFN2;
- with tied embeddings the embedding and LM head weights are both counted;
- in prefill the final norm and the conversions into the LM head are costed on all
  batch x context tokens although only the last token of each sequence reaches the LM head.

Imports: lts.specs (attention_params), lts.specs.strategy (column and choice constants), and
lts.cost.expert_load.busiest, the busiest expert-parallel rank's share of the routed pairs: a
function of the model, the experts a rank holds and the tokens routed, pinned on its own by
tests/test_expert_load.py (closed forms and invariants), here only applied.
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace

from lts.cost.expert_load import busiest
from lts.specs import attention_params
from lts.specs.model import WEIGHT_GROUPS
from lts.specs.units import WEIGHT_FORMATS
from lts.specs.model import BlockSparse, Chunk, Compressed
from lts.specs.strategy import (BATCH, CP, DCP, DIM0, DIM1, EP, ETP, EXPERTS, N_COARSE, NONE, OPS,
                                PP, TP)

COMPAT = ("kv_per_microbatch", "moe_layout_everywhere", "ffn_fractional_t_rows")
# "engine" is set by a search problem restricted to an engine's space (lts.search.problems), never by the
# cost model itself
REASONS = ("budget", "divisibility", "memory", "slo", "experts", "engine", "context-parallel")

R, T, F, P, ER, ET = "R", "T", "F", "P", "ER", "ET"
NORM_LAYOUT = {DIM0: T, DIM1: F, NONE: R}

# the collective each layout conversion inserts (docs/design.md §3 table); missing pairs are free
CONVERSION = {
    (T, R): "all-gather", (F, R): "all-gather",
    (T, F): "all-to-all", (F, T): "all-to-all",
    (P, R): "all-reduce", (P, T): "reduce-scatter", (P, F): "reduce-scatter",
}


# ----------------------------------------------------------------------------------------------
# alpha-beta collectives, written from the lts/collectives.py docstring

def levels(links, p, stride):
    """Per tier i: (q_i - 1, m_i - m_{i-1}, m_i); m_i = members of the group inside one domain."""
    out, prev = [], 1.0
    for i, link in enumerate(links):
        if i == len(links) - 1:
            m = float(p)                                    # the outermost tier holds them all
        else:
            m = min(float(p), max(1.0, float(math.floor(link.span_gpus / stride))))
            m = max(m, prev)
        out.append((m / prev - 1.0, m - prev, m))
        prev = m
    return out


def _bw(link):
    return link.bandwidth_bytes_s * link.efficiency


def steps(q1):
    """Latency steps of a level of q = q1 + 1 ranks: a ring's q - 1 up to 8 ranks; beyond, NCCL's
    log-depth algorithms (tree, NVLS, PAT): 7 log2(q) / 3, equal to the ring's at 8."""
    q = q1 + 1.0
    return q - 1.0 if q <= 8 else 7.0 * math.log2(q) / 3.0


def all_gather(links, nbytes, p, stride):
    """Each rank ends with nbytes: level i moves (q_i-1)/m_i * S over tier i."""
    return sum(steps(q1) * link.latency_s + q1 / m * nbytes / _bw(link)
               for link, (q1, _, m) in zip(links, levels(links, p, stride)))


def reduce_scatter(links, nbytes, p, stride):
    """nbytes in on every rank, nbytes/p out: the all-gather walked backwards, same cost."""
    return sum(steps(q1) * link.latency_s + q1 / m * nbytes / _bw(link)
               for link, (q1, _, m) in zip(links, levels(links, p, stride)))


def all_reduce(links, nbytes, p, stride):
    return reduce_scatter(links, nbytes, p, stride) + all_gather(links, nbytes, p, stride)


def all_to_all(links, nbytes, p, stride):
    """Each rank holds nbytes, nbytes/p to each peer; peers first reached through tier i use it."""
    return sum(dm * link.latency_s + dm / p * nbytes / _bw(link)
               for link, (_, dm, _) in zip(links, levels(links, p, stride)))


def dispatch(links, nbytes, p, stride):
    """A MoE dispatch or combine: the all-to-all's bytes per tier, every peer at once (at most
    the log-depth steps of a level), at the links' own efficiency (the caller's links)."""
    return sum(min(dm, steps(q1)) * link.latency_s + dm / p * nbytes / _bw(link)
               for link, (q1, dm, _) in zip(links, levels(links, p, stride)))


def send(links, nbytes, p, stride):
    """Point to point over the outermost tier the group spans: S/B + alpha (0 for one rank)."""
    if p <= 1:
        return 0.0
    t = 0.0
    for link, (_, dm, _) in zip(links, levels(links, p, stride)):
        if dm > 0:
            t = nbytes / _bw(link) + link.latency_s
    return t


COLLECTIVE = {"all-reduce": all_reduce, "all-gather": all_gather,
              "reduce-scatter": reduce_scatter, "all-to-all": all_to_all, "send": send}


# ----------------------------------------------------------------------------------------------
# one strategy's sizes

def q_cols(a):
    """Columns of a gqa query projection, split by heads: each head's queries, Qwen3.5's
    query-wide output gate, Step-3.7's one gate a head."""
    return a.heads * (a.head_dim * (2 if a.output_gate else 1) + (1 if a.head_gate else 0))


def frac(n, p):
    """Share of a dimension of n on the busiest of p ranks (an empty dimension counts as 1)."""
    n = max(float(n), 1.0)
    return math.ceil(n / p) / n


@functools.lru_cache(maxsize=None)
def _mean_keys(length, window):
    """Mean over the queries of a causal prompt of ``length`` tokens of the keys each attends
    to, min(i, window) for query i = 1..length (summed one query at a time)."""
    return sum(min(i, window) for i in range(1, length + 1)) / length


@functools.lru_cache(maxsize=None)
def _mean_chunk_keys(length, chunk, start=0):
    """The same under chunked local attention of ``chunk`` tokens: query i attends to the keys
    from its chunk's start, ((i - 1) mod chunk) + 1 (summed one query at a time); queries
    start + 1 .. start + length (after a cached prefix of ``start``)."""
    return sum((i - 1) % chunk + 1 for i in range(start + 1, start + length + 1)) / length


@functools.lru_cache(maxsize=None)
def _mean_keys_after(length, window, start):
    """``_mean_keys`` over the queries start + 1 .. start + length (a prompt's tokens after a
    cached prefix of ``start``: prefix caching), one query at a time."""
    return sum(min(i, window) for i in range(start + 1, start + length + 1)) / length


def _block_keys(i, block, topk):
    """Keys a KV head of a block-sparse layer attends to for the query at position i: its
    ceil(i / block) blocks whole but its own (i - (blocks - 1) block tokens) while at most
    topk, else topk - 1 whole blocks and its own."""
    blocks = -(-i // block)
    return i if blocks <= topk else (topk - 1) * block + (i - (blocks - 1) * block)


@functools.lru_cache(maxsize=None)
def _mean_block_keys(start, end, block, topk):
    """``_block_keys`` over the queries start + 1 .. end, one query at a time: their mean."""
    return sum(_block_keys(i, block, topk) for i in range(start + 1, end + 1)) / (end - start)


class _Ctx:
    """Sizes of one strategy (floats), the workload and the hardware rates."""

    def __init__(self, model, topo, work, row, compat):
        self.m, self.topo, self.work, self.compat = model, topo, work, frozenset(compat)
        # in-engine link rates (topology [gpu] collective_efficiency), once per strategy
        self.coll_links = tuple(replace(link, efficiency=link.efficiency *
                                        topo.collective_efficiency) for link in topo.links)
        unknown = self.compat - set(COMPAT)
        assert not unknown, unknown
        self.tp, self.ep, self.pp, self.batch = (int(row[i]) for i in (TP, EP, PP, BATCH))
        self.cp = int(row[CP])          # context parallelism: a prefill's tokens over cp ranks
        self.dcp = int(row[DCP])        # decode context parallelism: the cache's tokens over
        #                                 dcp ranks of the tp group, heads over tp / dcp groups
        self.etp = int(row[ETP])        # expert tensor parallelism: under `experts` each expert
        #                                 split over etp ranks of the tp group
        self.p = float(self.tp)
        a, f, prec = model.attention, model.ffn, model.precision
        self.wb, self.kvb, self.ab = prec.weight_bytes, prec.kv_bytes, prec.act_bytes
        self.peak = topo.peak_for(prec.weights) * topo.compute_efficiency_for(prec.weights)
        self.hbm = topo.hbm_bandwidth_bytes_s * topo.memory_efficiency
        # attention math in its own type (the activations', or fp8 over an fp8 KV cache)
        att = prec.attention_dtype
        self.attn_peak = topo.peak_for(att) * topo.compute_efficiency_for(att)
        # weight reads of GEMMs at the weight dtype's own HBM efficiency, as effective bytes
        self.wbr = self.wb * topo.memory_efficiency / topo.weight_memory_efficiency_for(prec.weights)
        # routed experts run a grouped GEMM: its own weight-read rate and a compute rate by the
        # tokens each expert gets (topology [gpu.grouped_gemm]; grouped_peak)
        # (the model's one format, as every other op here)
        fx = prec.format_of("experts")
        self.grouped_points, self.grouped_compute, g_mem = topo.grouped_efficiency(fx)
        self.grouped_wbr = WEIGHT_FORMATS[fx][0] * topo.memory_efficiency / g_mem
        self.grouped_format_peak = topo.peak_for(fx)
        # each op group's weights in the checkpoint's format for it (PrecisionSpec.format_of):
        # (bytes per weight, effective bytes read at its HBM efficiency, achievable FLOP/s)
        self.fmts = {}
        def rates(gf):
            b = WEIGHT_FORMATS[gf][0]
            return (b, b * topo.memory_efficiency / topo.weight_memory_efficiency_for(gf),
                    topo.peak_for(gf) * topo.compute_efficiency_for(gf))
        for g in WEIGHT_GROUPS:
            q, whole = prec.share_of(g), rates(prec.format_of(g))
            # a group quantized in a share q of its layers: the mean layer's bytes, reads and
            # the FLOP rate of the mean time (the other layers in the activation type)
            part = rates(prec.activations)
            self.fmts[g] = whole if q == 1.0 else (
                q * whole[0] + (1 - q) * part[0], q * whole[1] + (1 - q) * part[1],
                1.0 / (q / whole[2] + (1 - q) / part[2]))
        self.overhead = topo.kernel_overhead_s
        decode = work.phase in ("decode", "mixed")
        self.decode = decode
        seqs = self.batch
        self.chunk = self.chunk_t = self.chunk_keys = self.chunk_read = self.chunk_sel = 0.0
        if work.phase == "mixed":
            # docs/design.md §8: a step of a continuous-batching engine with `batch` running requests:
            # a cohort of base + share x n requests (no fewer than n/osl, at least 1, at most n)
            # is prefilled, the others decode; the budget left after their decode tokens takes the
            # cohort's prompts, over as many steps as needed (chunk = the mean per step). Not
            # mixed: the whole batch is the cohort, prefilled in prefill-only steps of the budget.
            # under attention DP each of the ep ranks schedules its own n / ep requests, with a
            # budget of its own (budget_per_rank) or its share of one; the totals sum the ranks
            dp = self.ep * (self.p if work.attn_dp_tp else 1)   # DP attention: every rank
            # a prompt prefills its tokens after the cached prefix (prefix caching); a request
            # takes osl / tokens_per_step decode steps (speculative decoding); each decoder puts
            # query_tokens through the step
            n, isl = max(float(self.batch), 1.0) / dp, float(work.isl - work.cached)
            budget = float(work.step_tokens) / (1.0 if work.budget_per_rank else dp)
            if work.mixed:
                cohort = min(max(work.cohort_base + work.cohort_share * n,
                                 n / max(work.osl / work.tokens_per_step, 1.0), 1.0), n)
                seqs = n - cohort
                avail = max(budget - seqs * work.query_tokens, 1.0)
                steps, per_prompt = math.ceil(cohort * isl / avail), math.ceil(isl / avail)
            else:
                cohort, seqs = n, 0.0        # full chunks of the budget, the last in proportion
                steps, per_prompt = n * isl / min(budget, n * isl), math.ceil(isl / budget)
                avail = budget
            chunk, cohort, seqs = dp * cohort * isl / steps, dp * cohort, dp * seqs
            # a prompt's chunk is never split over micro-batches or ep groups: the busiest
            # micro-batch and group hold an even share of the step's prompt tokens, or one
            # prompt's chunk if larger (a prompt, or what one rank's step holds of it: avail)
            piece = min(chunk, isl, avail)
            self.chunk_mb = max(chunk / self.pp, piece)
            self.chunk = max(self.chunk_mb / self.ep, piece)   # per tp group
            self.chunk_t = self.chunk / self.p                   # per rank under T
            self.isl, self.per_prompt = isl, per_prompt       # chunk keys and reads: layer()
            self.chunk_done = self.chunk / isl                    # prompts finishing per step
        # the batch runs as pp micro-batches; each is split over the ep groups (whole sequences)
        self.mb = float(math.ceil(seqs / self.pp))
        self.seqs = float(math.ceil(self.mb / self.ep))          # sequences per tp group
        # tokens per sequence per step (decode: the query tokens speculative decoding verifies)
        self.tps = float(work.query_tokens) if decode else float(work.context - work.cached)
        if not decode:      # zigzag chunks: each cp rank a cp-th of every prompt's new tokens
            self.tps /= self.cp
        self.rows = self.seqs * self.tps
        self.seqs_t = float(math.ceil(self.seqs / self.p))        # sequences per rank under T
        self.rows_t = self.seqs_t * self.tps
        self.lm_rows = self.seqs * (self.tps if decode else 1.0)   # logits per verified token
        self.seq_rows = self.rows                                # the decoders' or prompts' rows
        if work.phase == "mixed":
            self.rows += self.chunk
            self.rows_t += self.chunk_t
            self.lm_rows += self.chunk_done
        self.h = model.hidden
        self.idx_tok = self.idx_fl = 0.0   # no sparse-attention indexer (set below for MLA)
        self.indexed = True                # the layer being walked runs its indexer: walk
        if a.kind == "compressed":    # DeepSeek-V4: MQA over one 512-wide entry, key and value
            self.qk_dim = self.v_dim = a.head_dim
            nope = a.head_dim - a.qk_rope_head_dim
            # vLLM's fp8_ds_mla row: fp8 non-rotary dims, a ue8m0 scale per 64 and a pad byte,
            # bf16 rotary dims; bf16 whole
            self.k_tok = self.v_tok = a.head_dim * self.kvb if self.kvb >= 2 else \
                nope + 2 * a.qk_rope_head_dim + math.ceil(nope / 64) + 1
            self.k_heads = 1.0
            self.idx_tok = (a.index_head_dim + 4 * math.ceil(a.index_head_dim / 128)) \
                if a.index_topk else 0.0
            self.idx_fl = 2.0 * a.index_heads * a.index_head_dim
            self.qkv_out = a.heads * a.head_dim + a.head_dim
        elif a.kind == "mla":     # absorbed MLA: scores/context over the shared latent
            self.qk_dim = a.kv_lora_rank + a.qk_rope_head_dim
            self.v_dim = a.kv_lora_rank
            self.k_tok = (a.kv_lora_rank + a.qk_rope_head_dim) * self.kvb
            self.v_tok = a.kv_lora_rank * self.kvb
            self.k_heads = 1.0
            # DeepSeek Sparse Attention's indexer (DeepSeek-V3.2-Exp inference/model.py Indexer):
            # a key of index_head_dim fp8 bytes + one fp32 scale per 128 of them, each token;
            # index_heads dot products of index_head_dim per query per key, replicated over tp
            self.idx_tok = (a.index_head_dim + 4 * math.ceil(a.index_head_dim / 128)) \
                if a.index_topk else 0.0
            self.idx_fl = 2.0 * a.index_heads * a.index_head_dim
            self.qkv_out = a.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim
                                      + (a.v_head_dim if a.output_gate else 0)) \
                + a.kv_lora_rank + a.qk_rope_head_dim
        else:
            self.qk_dim = a.head_dim
            self.v_dim = a.head_dim
            self.k_tok = a.kv_heads * a.head_dim * self.kvb
            self.v_tok = self.k_tok
            self.k_heads = float(a.kv_heads)
            self.qkv_out = q_cols(a) + 2 * a.kv_heads * a.head_dim
            if a.sparse_block_size:   # MiniMax-M3's block-sparse layers: an indexer key of
                # index_head_dim in the model dtype a token; index_heads dot products of it per
                # query per key
                self.idx_tok = a.index_head_dim * self.ab
                self.idx_fl = 2.0 * a.index_heads * a.index_head_dim
        # prefill tokens (a prefill step's, a mixed step's chunk): dense MLA un-absorbed, as
        # multi-head attention over keys and values kv_b_proj up-projects from the latent (vLLM
        # mla/common.py _forward_prefill): qk dim qk_nope + qk_rope, v dim v_head_dim; a chunk's
        # earlier context up-projected again, 2 kv_lora_rank heads qk_nope (K) and v_head_dim
        # (V) FLOPs a key, its K or V written and read. Sparse MLA, GQA: as decode (None)
        self.pre_qk_dim = self.pre_v_dim = None
        self.up_k = self.up_v = 0.0           # FLOPs a chunk's earlier key costs to up-project
        self.up_k_el = self.up_v_el = 0.0     # elements a key it makes: K_nope, V of all heads
        if a.kind == "mla" and not a.index_topk:
            self.pre_qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
            self.pre_v_dim = a.v_head_dim
            self.up_k_el, self.up_v_el = a.heads * a.qk_nope_head_dim, a.heads * a.v_head_dim
            self.up_k, self.up_v = (2.0 * a.kv_lora_rank * n for n in (self.up_k_el, self.up_v_el))
        self.ctx_out = a.heads * a.v_dim
        self.linear = False          # the layer being walked is linear attention: layer()
        self.dense_width = 0         # the dense FFN's width of the layer being walked (0: all
        #                              alike, ffn.intermediate)
        self.attn_widths = (self.qkv_out, self.ctx_out)
        # the shape of the layer being walked (layer()): the model's, or, where the layer kinds
        # have their own (gqa attention.kinds, a V of its own width or none), its kind's
        self.a, self.heads = a, a.heads
        self.general = a.kind == "gqa" and bool(a.kinds or a.v_head_dim or a.k_eq_v)
        if self.general:   # the workspace holds the widest kind's activations
            widths = []
            for w in set(model.layer_windows) - {"linear_attention", "no_attention"}:
                self._shape(w)
                widths.append((self.qkv_out, self.ctx_out))
            self.attn_widths = max(widths, key=sum)
        self.experts, self.top_k = float(f.experts), float(f.top_k)
        self.slots = float(f.slots)          # expert copies: the experts and the redundant ones
        # full activation bytes per tp group at each conversion point
        inter_moe = self.rows * self.top_k * f.expert_intermediate + self.rows * f.shared_intermediate
        self.point_bytes = {
            "hidden": self.rows * self.h * self.ab,
            # the residual stream: hc_mult hidden states under hyper-connections
            "residual": self.rows * self.h * model.hc_mult * self.ab,
            # the hidden-wide activation into the token mixer and out of it into ffn_norm
            "mixed": self.rows * self.h * self.ab,
            "qkv": self.rows * self.qkv_out * self.ab,
            "scores": None,              # per layer: layer()
            "context": self.rows * self.ctx_out * self.ab,
            "inter": (inter_moe if model.is_moe else self.rows * f.intermediate) * self.ab,
            "inter_dense": self.rows * f.intermediate * self.ab,
            "router": self.rows * self.experts * self.ab,
            "logits": self.lm_rows * model.vocab * self.ab,
        }

    def _shape(self, window):
        """Set the attention shape of a layer of ``window``'s kind (``ModelSpec.kind_attention``):
        Q heads x head_dim, K kv_heads x head_dim, V kv_heads x v_dim (none: k_eq_v), o_proj
        [heads x v_dim, hidden]."""
        a = self.a = self.m.kind_attention(window)
        self.heads, self.k_heads = a.heads, float(a.kv_heads)
        self.qk_dim, self.v_dim = a.head_dim, a.v_dim
        self.k_tok = a.kv_heads * a.head_dim * self.kvb
        self.v_tok = a.kv_heads * a.v_dim * self.kvb
        self.qkv_out = q_cols(a) \
            + a.kv_heads * a.head_dim + (0 if a.k_eq_v else a.kv_heads * a.v_dim)
        self.ctx_out = a.heads * a.v_dim

    def layer(self, window):
        """Set the attention sizes of a layer with sliding ``window`` (None: full attention): a
        query at position i of a prompt attends to keys max(1, i - window + 1) .. i; a decode
        step holds and reads the last min(context, window) tokens; a prefill writes and reads
        the whole prompt; a mixed step's prefill chunk j of a prompt reads its own chunk and at
        most the window before it."""
        work = self.work
        self.linear = window == "linear_attention"
        g = self.m.linear
        if self.linear and hasattr(g, "state_size"):   # Mamba-2: z, x, B, C, dt; intermediate
            self.qkv_out = 2 * g.heads * g.head_dim + 2 * g.groups * g.state_size + g.heads
            self.ctx_out = g.heads * g.head_dim
        elif self.linear and g.kda:   # KDA: q, k, v, g, beta, the decay per key channel and
            # the low-rank intermediates (f_a's, a low-rank gate's) out of qkv
            kd = g.key_heads * g.key_head_dim
            self.qkv_out = 3 * kd + 2 * g.value_heads * g.value_head_dim + g.value_heads \
                + g.decay_rank + g.gate_rank
            self.ctx_out = g.value_heads * g.value_head_dim
        elif self.linear:   # Gated DeltaNet: q, k, v, z, b, a out of qkv; value_dim at the others
            self.qkv_out = 2 * g.key_heads * g.key_head_dim \
                + 2 * g.value_heads * g.value_head_dim + 2 * g.value_heads
            self.ctx_out = g.value_heads * g.value_head_dim
        if self.linear:
            for point, width in (("qkv", self.qkv_out), ("scores", self.ctx_out),
                                 ("context", self.ctx_out)):
                self.point_bytes[point] = self.rows * width * self.ab
            return
        self.qkv_out, self.ctx_out = self.attn_widths
        if self.m.attention.kind == "compressed":
            self._compressed(window)
            return
        if self.general:
            self._shape(window)
        self.point_bytes["qkv"] = self.rows * self.qkv_out * self.ab
        self.point_bytes["context"] = self.rows * self.ctx_out * self.ab
        if isinstance(window, BlockSparse):
            self._block_sparse(window)
            return
        chunked = isinstance(window, Chunk)     # chunked local attention: its chunk's keys
        w = math.inf if window is None else window.size if chunked else window
        ctx = float(work.context)
        pc = int(work.cached) if work.phase == "prefill" else 0    # a prefill's cached prefix
        if chunked:
            # decode: the token at context c holds and reads its chunk so far; a mixed step's
            # prefill chunk is costed as under a window of the chunk (cost.kv: a bound)
            self.ctx = float((int(ctx) - 1) % w + 1) if self.decode else ctx
            self.ctx_attn = self.ctx if self.decode else _mean_chunk_keys(int(ctx) - pc, w, pc)
        else:
            self.ctx = min(ctx, w) if self.decode else ctx
            self.ctx_attn = self.ctx if self.decode else _mean_keys_after(int(ctx) - pc, w, pc)
        # sparse attention: query i attends to min(i, index_topk) of the keys the indexer scores;
        # a decode step reads min(context, index_topk) latents, a prefill its whole prompt's
        topk = self.m.attention.index_topk or math.inf
        self.sel = min(self.ctx, topk) if self.decode else self.ctx
        self.sel_attn = self.sel if self.decode else self.ctx_attn if chunked else \
            _mean_keys_after(int(ctx) - pc, min(w, topk), pc)   # (no chunked sparse layers)
        score_rows = self.seq_rows * self.sel_attn
        if work.phase == "mixed":
            c = int(work.cached)                                  # the cached prefix
            self.chunk_keys = _mean_chunk_keys(int(self.isl), w, c) if chunked else \
                _mean_keys_after(int(self.isl), w, c)
            self.chunk_sel = self.chunk_keys if chunked else \
                _mean_keys_after(int(self.isl), min(w, topk), c)
            n = int(self.per_prompt)
            size = self.isl / n                                   # one chunk of one prompt
            self.chunk_read = sum(min(c + j * size, size + w) for j in range(1, n + 1)) / n / size
            score_rows += self.chunk * self.chunk_sel
        self.point_bytes["scores"] = score_rows * self.heads * self.ab

    def _block_sparse(self, window):
        """A block-sparse layer (MiniMax-M3) of blocks of B tokens, counted one query at a time:
        it holds every token; the query at position i (1-based) has ceil(i / B) blocks before
        it and its own, and each KV head attends to all i keys while they are at most topk
        blocks, else to topk - 1 whole earlier blocks and its own block's tokens; its indexer
        scores all i keys. A decode step reads the chosen keys, a prefill its whole prompt, a
        mixed step's prefill chunk its prompt so far."""
        work, b, topk = self.work, window.block, window.topk
        ctx = int(work.context)
        pc = int(work.cached) if work.phase == "prefill" else 0
        queries = range(pc + 1, ctx + 1)
        self.ctx = float(ctx)
        self.ctx_attn = float(ctx) if self.decode else sum(queries) / len(queries)   # indexer
        self.sel = float(_block_keys(ctx, b, topk)) if self.decode else float(ctx)
        self.sel_attn = self.sel if self.decode else _mean_block_keys(pc, ctx, b, topk)
        score_rows = self.seq_rows * self.sel_attn
        if work.phase == "mixed":
            c, isl = int(work.cached), int(self.isl)
            chunk_q = range(c + 1, c + isl + 1)
            self.chunk_keys = sum(chunk_q) / isl
            self.chunk_sel = _mean_block_keys(c, c + isl, b, topk)
            n = int(self.per_prompt)
            size = self.isl / n
            self.chunk_read = sum(c + j * size for j in range(1, n + 1)) / n / size
            score_rows += self.chunk * self.chunk_sel
        self.point_bytes["scores"] = score_rows * self.heads * self.ab

    def _compressed(self, window):
        """A compressed-attention layer (DeepSeek-V4) of ``window`` (a ``Compressed`` marker, or
        the plain window of a ratio-0 layer), counted one query at a time: it holds the last w
        tokens' entries and one compressed entry per r tokens; query i attends to min(i, w) and
        floor(i / r) entries (at most topk: CSA); a CSA indexer scores the floor(i / r)."""
        work = self.work
        comp = isinstance(window, Compressed)
        w, r = (window.window, window.ratio) if comp else (window, 0)
        topk = window.topk if comp else 0
        self.csa, self.ratio = comp and bool(topk), r
        # the compressor's decode state: fp32 kv and score states of its window of c r tokens,
        # c head_dim wide (c = 2 under CSA), and the CSA indexer compressor's of index_head_dim
        a, cf = self.m.attention, 2 if self.csa else 1
        self.state = 0.0 if not r else 2 * (cf * r) * (cf * a.head_dim) * 4.0 \
            + (2 * (2 * r) * (2 * a.index_head_dim) * 4.0 if self.csa else 0.0)

        def entries(i):       # compressed entries at context i
            return i // r if r else 0

        def keys(i):          # entries query i attends to
            e = entries(i)
            return min(i, w) + (min(e, topk) if topk else e)
        ctx = int(work.context)
        pc = int(work.cached) if work.phase == "prefill" else 0
        # (a ratio-0 layer's window in a prefill: its whole prompt, as every window's)
        self.ctx = float(min(ctx, w) + entries(ctx)) if comp or self.decode else float(ctx)
        queries = range(pc + 1, ctx + 1)
        self.sel = float(keys(ctx)) if self.decode else self.ctx
        self.sel_attn = self.sel if self.decode else sum(keys(i) for i in queries) / len(queries)
        self.idx_keys = float(entries(ctx)) if self.decode else \
            sum(entries(i) for i in queries) / len(queries)
        self.idx_held = float(entries(ctx))
        score_rows = self.seq_rows * self.sel_attn
        if work.phase == "mixed":
            c, isl = int(work.cached), int(self.isl)
            chunk_q = range(c + 1, c + isl + 1)
            self.chunk_sel = sum(keys(i) for i in chunk_q) / isl
            self.chunk_idx = sum(entries(i) for i in chunk_q) / isl
            n = int(self.per_prompt)
            size = self.isl / n
            # chunk j reads the window before it, its own tokens and its prompt's compressed
            # entries so far (all: an upper bound under CSA)
            self.chunk_read = sum(size + w + (c + j * size) / r if r else
                                  min(c + j * size, size + w) for j in range(1, n + 1)) / n / size
            score_rows += self.chunk * self.chunk_sel
        self.point_bytes["scores"] = score_rows * self.heads * self.ab

    def group(self, name):
        """(size, stride) of the tp, cp, ep or pp group of one rank (tp innermost, then cp, ep,
        pp)."""
        return {"tp": (self.p, 1.0), "dcp": (float(self.dcp), 1.0), "cp": (float(self.cp), self.p),
                "ep": (float(self.ep), self.p * self.cp),
                "pp": (float(self.pp), self.p * self.cp * self.ep)}[name]

    def coll_time(self, kind, group, nbytes, shuffle=False):
        p, stride = self.group(group)
        # MoE dispatch/combine over ep, or the `experts` choice's token shuffle over tp
        # (``shuffle``): every peer at once, at the links' own rates
        if kind == "all-to-all" and (group == "ep" or shuffle):
            return dispatch(self.topo.links, nbytes, p, stride)
        return COLLECTIVE[kind](self.coll_links, nbytes, p, stride)


def grouped_peak(c, tokens_per_expert):
    """FLOP/s of a grouped expert GEMM whose experts get ``tokens_per_expert`` rows each: the
    format's peak times the compute efficiency read off the topology's points, linearly in
    log(tokens) between the two points around it, the end point's beyond them."""
    pts, eff = c.grouped_points, c.grouped_compute
    t = max(tokens_per_expert, 1.0)
    if t <= pts[0]:
        e = eff[0]
    elif t >= pts[-1]:
        e = eff[-1]
    else:
        i = next(j for j in range(1, len(pts)) if t <= pts[j])
        u = (math.log(t) - math.log(pts[i - 1])) / (math.log(pts[i]) - math.log(pts[i - 1]))
        e = eff[i - 1] + u * (eff[i] - eff[i - 1])
    return c.grouped_format_peak * e


class _Op:
    """The cost of one op instance in one mode (``compute_s``: its FLOP-bound time when its
    FLOPs do not all run at the model's rate)."""

    def __init__(self, c, flops, nbytes, weights=0.0, kv=0.0, colls=(), launch=True,
                 compute_s=None):
        self.compute_s = flops / c.peak if compute_s is None else compute_s
        self.memory_s = nbytes / c.hbm
        p = c.topo.roofline_exponent          # DESIGN: max(c, m); with p, the p-norm of the two
        both = (self.compute_s ** p + self.memory_s ** p) ** (1.0 / p) if p else None
        self.roofline_s = (both if p else max(self.compute_s, self.memory_s)) + \
            (c.overhead if launch else 0.0)
        self.weight_bytes, self.kv_bytes = weights, kv
        # (a 4th entry: the `experts` choice's token shuffle, costed as a dispatch)
        self.colls = [(kind, group, nb, c.coll_time(kind, group, nb, *rest))
                      for kind, group, nb, *rest in colls]
        self.time_s = self.roofline_s + sum(t for *_, t in self.colls)


# ----------------------------------------------------------------------------------------------
# op costs: (choice, input layout) -> (_Op, output layout)

def _gemm(c, rows, k, n, k_frac=1.0, n_frac=1.0, w_total=None, group="attention"):
    """rows x [k, n] with shares k_frac, n_frac: FLOPs, HBM bytes (weights + act in/out), weights,
    the weights in op ``group``'s format."""
    wb, wbr, _ = c.fmts[group]
    w = k * n * k_frac * n_frac if w_total is None else w_total
    return 2.0 * rows * w, w * wbr + rows * (k * k_frac + n * n_frac) * c.ab, w * wb


def embedding(c, choice):
    v, h, rows, wb = c.m.vocab, c.h, c.rows, c.fmts["embedding"][0]
    if choice == DIM0:     # vocab-parallel: each rank looks up its own ids, writes partial rows
        return _Op(c, 0.0, rows * h * wb / c.p + rows * h * c.ab, v * h * frac(v, c.p) * wb), P
    if choice == DIM1:
        return _Op(c, 0.0, rows * h * (wb + c.ab) * frac(h, c.p), v * h * frac(h, c.p) * wb), F
    return _Op(c, 0.0, rows * h * (wb + c.ab), v * h * wb), R


def norm(c, choice, final=False):
    """RMSNorm + residual add; its choice fixes the layout (T, F or R). Under hyper-connections
    (hc_mult n > 1, DeepSeek-V4's mHC) a norm also carries its site's mixing, per token: the pre
    mixes ([n h] -> (2 + n) n, a GEMM; their sums) reading the n copies twice and writing the
    sublayer's input, the post mixing (n x n over the copies plus the output) reading n h + h and
    writing n h; the final norm the head's collapse (n mixes, no post); fp32 mixing weights; on
    a hidden split the mixes all-reduced with the sums of squares."""
    h, wb, n = c.h, c.fmts["norm"][0], c.m.hc_mult
    fl, io, w, red = 8.0 * h, 4.0 * h, h * wb, 0.0
    if n > 1:
        mixes = n if final else (2 + n) * n
        fl += 2.0 * mixes * n * h + 3.0 * n * h
        io += 2.0 * n * h + h
        if not final:
            fl += 2.0 * n * n * h + 2.0 * n * h
            io += n * h + h + n * h
        w += mixes * n * h * 4.0
        red = float(mixes)
    b = c.m.attn_res_block
    if b:      # attention residuals: each snapshot row scored and mixed (6 h FLOPs, h read)
        rows = float(c.m.layers // b + 1) if final else \
            sum(i // b + 1 for i in range(c.m.layers)) / c.m.layers
        fl += 6.0 * rows * h
        io += rows * h
        red += rows
    if choice == DIM0:
        return _Op(c, fl * c.rows_t, io * c.rows_t * c.ab, w), T
    if choice == DIM1:     # hidden split: per-token sums of squares all-reduced in fp32
        fh = frac(h, c.p)
        return _Op(c, fl * c.rows * fh, io * c.rows * fh * c.ab, w * fh,
                   colls=[("all-reduce", "tp", c.rows * 4.0 * (1.0 + red))]), F
    return _Op(c, fl * c.rows, io * c.rows * c.ab, w), R


def plain_gemm(c, choice, lin, k, n, rows, rows_t, k_frac=None, col=None, group="attention"):
    """A GEMM rows x [k, n]: dim 0 row-parallel (F -> P), dim 1 column (R -> F), none (R/T),
    its weights in op ``group``'s format and its FLOPs at that format's rate.

    ``col`` = (weights, output width) per rank of a column split that replicates some parts."""
    wb, wbr, peak = c.fmts[group]
    if choice == DIM0:
        fl, by, w = _gemm(c, rows, k, n, k_frac=frac(k, c.p) if k_frac is None else k_frac,
                          group=group)
        return _Op(c, fl, by, w, compute_s=fl / peak), P
    if choice == DIM1:
        if col is None:
            fl, by, w = _gemm(c, rows, k, n, n_frac=frac(n, c.p), group=group)
        else:
            wc, out = col
            fl, by, w = 2.0 * rows * wc, wc * wbr + rows * (k + out) * c.ab, wc * wb
        return _Op(c, fl, by, w, compute_s=fl / peak), F
    r = rows_t if lin == T else rows
    fl, by, w = _gemm(c, r, k, n, group=group)
    return _Op(c, fl, by, w, compute_s=fl / peak), lin


def _delta_flops(g, prefill):
    """Gated DeltaNet FLOPs per token and value head: recurrent (decode) 7 dk dv; chunkwise
    (prefill, chunks of 64): the chunk state's three products 6 dk dv, K K^T and Q K^T 2 C dk
    each, T K and T V 2 C (dk + dv), masked scores x U 2 C dv, the solve C^2 / 3."""
    dk, dv, C = g.key_head_dim, g.value_head_dim, 64
    if not prefill:
        return 7.0 * dk * dv
    return 6 * dk * dv + 2 * C * dk + 2 * C * dk + 2 * C * (dk + dv) + 2 * C * dv + C * C / 3


def _ssd_flops(g, prefill):
    """Mamba-2 FLOPs per token over all heads: recurrent (decode) decay P N, dt x B^T 2 P N,
    h C 2 P N; chunked SSD (prefill, chunks of Q): C B^T 2 Q N per group, masked scores x X
    2 Q P, B^T X 2 P N and C h 2 P N per head."""
    p, n, q = g.head_dim, g.state_size, g.chunk_size
    if not prefill:
        return g.heads * (p * n + 2 * p * n + 2 * p * n)
    return g.heads * (2 * q * p + 2 * p * n + 2 * p * n) + g.groups * 2 * q * n


def _linear_op(c, choice, lin, which):
    """The delta rule (which = "rule": holds the recurrent state) or the conv1d + gated norm
    ("conv": holds the conv state) of a linear-attention layer, one sequence at a time; for a
    Mamba-2 layer the SSM ("rule") or its conv1d + gated norm."""
    g = c.m.linear
    if hasattr(g, "state_size"):
        nv, dv, state, tok_io, dec_fl, pre_fl, per_chunk = _mamba_shape(c, g, which)
    else:
        nv, dk, dv = g.value_heads, g.key_head_dim, g.value_head_dim
        kd, vd = g.key_heads * dk, nv * dv
        channels = 2 * kd + vd
        if which == "rule":
            state = nv * dk * dv * {"fp32": 4.0, "bf16": 2.0}[g.state_dtype]
            # q, k, v, g, beta (and a, or KDA's decay a key channel) in, o out
            tok_io = ((3 * kd + 2 * vd + nv) if g.kda else (2 * kd + 2 * vd + 2 * nv)) * c.ab
            dec_fl, pre_fl = nv * _delta_flops(g, False), nv * _delta_flops(g, True)
            per_chunk = 2 * state / 64                         # each 64-token chunk's state
        else:
            state = (g.conv_kernel - 1) * channels * c.kvb
            tok_io = (2 * channels + 3 * vd) * c.ab            # conv in/out; o, z in, norm out
            dec_fl = pre_fl = 2.0 * g.conv_kernel * channels
            per_chunk = 0.0
    if choice == DIM0:
        seqs, fr = c.seqs, frac(nv, c.p)
    elif choice == DIM1:
        seqs, fr = c.seqs, frac(dv, c.p)
    else:
        seqs, fr = (c.seqs_t if lin == T else c.seqs), 1.0
    if c.decode:
        fl, by = seqs * c.tps * dec_fl, seqs * (2 * state + c.tps * tok_io)
    else:
        fl, by = seqs * c.tps * pre_fl, seqs * (state + c.tps * (tok_io + per_chunk))
    chunk = c.chunk_t if (choice not in (DIM0, DIM1) and lin == T) else c.chunk
    if chunk:   # a mixed step's prefill chunk: its tokens, its prompt's state read and written
        fl += chunk * pre_fl
        by += chunk * (tok_io + per_chunk) + 2 * state
    return _Op(c, fl * fr, by * fr, 0.0, seqs * state * fr, compute_s=fl * fr / c.attn_peak)


def _mamba_shape(c, g, which):
    """A Mamba-2 layer's SSM ("rule") or conv1d + gated norm ("conv"): (heads, head_dim, state
    bytes, io bytes a token, decode and prefill FLOPs a token, chunk states' bytes a token)."""
    nh, p, n = g.heads, g.head_dim, g.state_size
    inter, bc = nh * p, 2 * g.groups * n
    channels = inter + bc
    if which == "rule":
        state = nh * p * n * {"fp32": 4.0, "bf16": 2.0}[g.state_dtype]
        return (nh, p, state, (2 * inter + bc + nh) * c.ab,     # x, B, C, dt in, y out
                _ssd_flops(g, False), _ssd_flops(g, True), 2 * state / g.chunk_size)
    state = (g.conv_kernel - 1) * channels * c.kvb
    conv_fl = 2.0 * g.conv_kernel * channels
    return nh, p, state, (2 * channels + 3 * inter) * c.ab, conv_fl, conv_fl, 0.0


def _linear_qkv(c, choice, lin):
    g, h = c.m.linear, c.h
    if hasattr(g, "state_size"):    # Mamba-2: z, x, dt by heads; B, C by groups
        inter, bc = g.heads * g.head_dim, 2 * g.groups * g.state_size
        col_out = (2 * inter + g.heads) * frac(g.heads, c.p) + bc * frac(g.groups, c.p)
        return plain_gemm(c, choice, lin, h, 2 * inter + bc + g.heads, c.rows, c.rows_t,
                          col=(h * col_out, col_out), group="ssm")
    kd, vd, nv = g.key_heads * g.key_head_dim, g.value_heads * g.value_head_dim, g.value_heads
    fk, fv = frac(g.key_heads, c.p), frac(nv, c.p)
    if g.kda:   # Kimi Delta Attention: q, k, f_b by key heads; v, g, b by value heads; f_a (and
        # a low-rank gate's g_a) replicated
        dr, gr = g.decay_rank, g.gate_rank
        key_w, val_w = h * 2 * kd + dr * kd, h * vd + (gr * vd if gr else h * vd) + h * nv
        rep_w = h * (dr + gr)
        col_out = 3 * kd * fk + (2 * vd + nv) * fv + dr + gr
        w = key_w + val_w + rep_w
        return plain_gemm(c, choice, lin, h, w / h, c.rows, c.rows_t,
                          col=(key_w * fk + val_w * fv + rep_w, col_out))
    n = 2 * kd + 2 * vd + 2 * nv
    col_out = 2 * kd * fk + (2 * vd + 2 * nv) * fv        # q, k by key heads; v, z, b, a value
    return plain_gemm(c, choice, lin, h, n, c.rows, c.rows_t, col=(h * col_out, col_out))


def qkv(c, choice, lin):
    if c.linear:
        return _linear_qkv(c, choice, lin)
    a, h = c.a, c.h
    qkv_w = attention_params(c.m, a)["qkv"]
    heads = float(a.heads)
    if a.kind == "compressed":    # wq_b by heads; wq_a, wkv, compressor, indexer replicated
        comp = _compressor_weights(c)
        up = a.q_lora_rank * a.heads * a.head_dim
        qkv_w += comp
        col_w = qkv_w - up + up * frac(heads, c.p)
        col_out = heads * a.head_dim * frac(heads, c.p) + a.head_dim
        return plain_gemm(c, choice, lin, h, qkv_w / h, c.rows, c.rows_t, col=(col_w, col_out))
    if a.kind == "mla":    # column: q_b, kv_b split by heads; q_a, kv_a replicated
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        down = h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim)
        col_w = down + (qkv_w - down) * frac(heads, c.p)
        col_out = heads * (qk + (a.v_head_dim if a.output_gate else 0)) * frac(heads, c.p) \
            + a.kv_lora_rank + a.qk_rope_head_dim
        if a.index_topk and c.indexed:   # the indexer's wq_b, wk, k_norm, weights_proj:
            # replicated, in the layers that run one (not GLM-5.2's "shared" ones)
            idx = (a.q_lora_rank or h) * a.index_heads * a.index_head_dim \
                + h * a.index_head_dim + 2 * a.index_head_dim + h * a.index_heads
            qkv_w, col_w = qkv_w + idx, col_w + idx
            col_out += a.index_heads * a.index_head_dim + a.index_head_dim + a.index_heads
    else:                  # column: Q by heads, K and V by KV heads (replicated beyond kv_heads)
        q_w = h * q_cols(a)                                            # + the output gates
        col_w = q_w * frac(heads, c.p) + (qkv_w - q_w) * frac(a.kv_heads, c.p)
        col_out = q_w / h * frac(heads, c.p) + (c.qkv_out - q_w / h) * frac(a.kv_heads, c.p)
        if a.sparse_block_size and c.indexed:   # a block-sparse layer's index_q (by index
            # heads), index_k (one key, replicated) and their norms
            d, fi = a.index_head_dim, frac(a.index_heads, c.p)
            qkv_w += h * a.index_heads * d + h * d + 2 * d
            col_w += h * a.index_heads * d * fi + h * d + 2 * d
            col_out += a.index_heads * d * fi + d
    return plain_gemm(c, choice, lin, h, qkv_w / h, c.rows, c.rows_t, col=(col_w, col_out))


def _compressor_weights(c):
    """The compressor's (and a CSA layer's indexer's) weights of the layer being walked: ape
    [r x c, head], wkv and wgate [hidden, c x head], norm [head], c 2 under CSA (overlapping
    windows); the indexer's wq_b [q_lora, heads x dim], weights_proj [hidden, heads] and its own
    compressor at index_head_dim."""
    a, h = c.m.attention, c.h
    r = c.ratio
    if not r:
        return 0.0
    cf = 2 if c.csa else 1

    def comp(d):
        return r * cf * d + 2 * h * cf * d + d
    out = comp(a.head_dim)
    if c.csa:
        out += a.q_lora_rank * a.index_heads * a.index_head_dim + h * a.index_heads \
            + comp(a.index_head_dim)
    return out


def _compressed_attention(c, choice, lin, reads):
    """Scores (``reads``: the entries read once, and a CSA layer's indexer) or context of a
    compressed-attention layer: every head over the keys its query attends to."""
    heads, hd = float(c.heads), float(c.qk_dim)
    if choice == DIM0:     # heads; the one KV head's entries whole on every rank
        seqs, f, fc = c.seqs, frac(heads, c.p), 1.0
    elif choice == DIM1:   # the head dim
        seqs, f, fc = c.seqs, frac(hd, c.p), frac(hd, c.p)
    else:
        seqs, f, fc = (c.seqs_t if lin == T else c.seqs), 1.0, 1.0
    fl = seqs * c.tps * 2.0 * heads * hd * c.sel_attn * f
    by = seqs * c.tps * heads * hd * c.ab * 2 * f
    held = seqs * (c.ctx * c.k_tok + c.state) * fc
    if reads:
        by += seqs * c.sel * c.k_tok * fc
    if reads and c.csa:
        fl += seqs * c.tps * c.idx_fl * c.idx_keys
        by += seqs * c.idx_held * c.idx_tok
        held += seqs * c.idx_held * c.idx_tok
    chunk = c.chunk_t if (choice not in (DIM0, DIM1) and lin == T) else c.chunk
    if chunk:
        fl += chunk * 2.0 * heads * hd * c.chunk_sel * f
        by += chunk * heads * hd * c.ab * 2 * f
        if reads:
            by += chunk * c.chunk_read * c.k_tok * fc
        if reads and c.csa:
            fl += chunk * c.idx_fl * c.chunk_idx
    return _Op(c, fl, by, 0.0, held, compute_s=fl / c.attn_peak)


def _compressed_out(c, choice, lin):
    """The grouped low-rank output: wo_a [heads head_dim / groups, o_lora] a group, wo_b
    [groups o_lora, hidden]; row: by groups (partial sums), column: wo_b's hidden columns."""
    a, h = c.m.attention, c.h
    heads, hd, g, r = float(a.heads), float(a.head_dim), float(a.o_groups), float(a.o_lora_rank)
    wb, wbr, peak = c.fmts["attention"]
    w_a, w_b = heads * hd * r, g * r * h
    rows = c.rows_t if (choice not in (DIM0, DIM1) and lin == T) else c.rows
    if choice == DIM0:
        w = (w_a + w_b) * frac(g, c.p)
        io = rows * (heads * hd * frac(heads, c.p) + h) * c.ab
        out = P
    elif choice == DIM1:
        w = w_a + w_b * frac(h, c.p)
        io = rows * (heads * hd + h * frac(h, c.p)) * c.ab
        out = F
    else:
        w, io, out = w_a + w_b, rows * (heads * hd + h) * c.ab, lin
    fl = 2.0 * rows * w
    return _Op(c, fl, w * wbr + io + rows * g * r * c.ab, w * wb, compute_s=fl / peak), out


def _attention(c, choice, lin, dims, cache_tok, index=False):
    """dims: (head dim, of the prefill tokens, FLOPs and elements up-projecting one of a chunk's
    earlier keys). index: the sparse-attention indexer runs in this op (scores): its FLOPs over
    every key, its key cache read and held, on every rank of the tp group alike."""
    dim, pre, up, up_el = dims
    pre = dim if pre is None else pre
    heads = float(c.heads)
    idx_tok, idx_fl = (c.idx_tok, c.idx_fl) if index else (0.0, 0.0)
    own = dim if c.decode else pre                       # the decoders' or the prompts' queries
    per_seq_flops = 2.0 * heads * own * c.sel_attn * c.tps
    per_seq_read = c.sel * cache_tok                     # the cache is read once per step
    per_seq_io = c.tps * heads * own * c.ab * 2          # query in, result out
    if choice == DIM0:     # heads; the cache splits by KV heads (MLA: one latent, not split)
        # under dcp the decoders' queries of a group's heads (tp / dcp groups) over a dcp-th of
        # its cache's tokens; the prefill tokens' heads over the tp ranks
        g = max(c.p / c.dcp, 1.0)
        seqs, ffl = c.seqs, frac(heads, g) / c.dcp
        fpre = frac(heads, c.p)
        fcache = (frac(c.k_heads, g) if c.k_heads > 1 else 1.0) / c.dcp
        if c.a.sparse_block_size:   # a block-sparse indexer's heads split with the heads
            idx_fl *= frac(c.a.index_heads, c.p)
    elif choice == DIM1:   # the head dim: the cache as the decode shape's
        seqs, ffl, fpre, fcache = c.seqs, frac(dim, c.p), frac(pre, c.p), frac(dim, c.p)
    else:
        seqs, ffl, fpre, fcache = (c.seqs_t if lin == T else c.seqs), 1.0, 1.0, 1.0
    fown = ffl if c.decode else fpre
    fl = seqs * per_seq_flops * fown + seqs * idx_fl * c.ctx_attn * c.tps
    by = seqs * (per_seq_read * fcache + per_seq_io * fown) + seqs * c.ctx * idx_tok
    if not c.decode and c.work.cached:    # a prefill's cached prefix, its keys up-projected
        fl += seqs * c.work.cached * up * fpre
        by += seqs * c.work.cached * up_el * c.ab * 2 * fpre
    # a mixed step's prefill chunk: its queries, and the cache its prompts have so far, whose
    # keys before the chunk are up-projected again (dense MLA)
    chunk = c.chunk_t if (choice not in (DIM0, DIM1) and lin == T) else c.chunk
    if chunk:
        before = chunk * max(c.chunk_read - 1.0, 0.0)
        fl += chunk * 2.0 * heads * pre * c.chunk_sel * fpre + chunk * idx_fl * c.chunk_keys \
            + before * up * fpre
        gathered = fcache * c.dcp if choice == DIM0 else fcache   # dcp: the prompt's cache whole
        by += chunk * (c.chunk_read * cache_tok * gathered + heads * pre * c.ab * 2 * fpre) \
            + chunk * c.chunk_read * idx_tok + before * up_el * c.ab * 2 * fpre
    return _Op(c, fl, by, 0.0, seqs * c.ctx * cache_tok * fcache + seqs * c.ctx * idx_tok,
               compute_s=fl / c.attn_peak)


def scores(c, choice, lin):
    if c.linear:
        return _linear_op(c, choice, lin, "rule"), {DIM0: F, DIM1: P}.get(choice, lin)
    if c.m.attention.kind == "compressed":
        op = _compressed_attention(c, choice, lin, True)
    else:
        op = _attention(c, choice, lin, (c.qk_dim, c.pre_qk_dim, c.up_k, c.up_k_el), c.k_tok,
                        index=c.indexed)
    if c.cp > 1:
        _cp_gather(c, op, choice, lin)
    if c.dcp > 1 and choice == DIM0 and c.decode:
        _dcp_exchange(c, op, True)
    return op, {DIM0: F, DIM1: P}.get(choice, lin)


def _dcp_exchange(c, op, scores_op):
    """Decode context parallelism under the heads split: the scores op all-gathers the
    decoders' queries of the group's heads and their log-sum-exp (fp32) over the dcp ranks (and
    a mixed step's chunk its prompt's earlier cache, whole over the group's KV heads); the
    context op reduce-scatters the partial outputs."""
    g = max(c.p / c.dcp, 1.0)
    hq = c.heads * frac(float(c.heads), g)
    rows = c.seqs * c.tps
    if scores_op:
        parts = [rows * hq * c.qk_dim * c.ab, rows * hq * 4.0]
        if c.chunk:
            f = frac(c.k_heads, g) if c.k_heads > 1 else 1.0
            parts.append(c.chunk * max(c.chunk_read - 1.0, 0.0) * c.k_tok * f)
        kinds = ["all-gather"] * len(parts)
    else:
        parts, kinds = [rows * hq * c.v_dim * c.ab], ["reduce-scatter"]
    for kind, nb in zip(kinds, parts):
        t = c.coll_time(kind, "dcp", nb)
        op.colls.append((kind, "dcp", nb, t))
        op.time_s += t


def _cp_gather(c, op, choice, lin):
    """Context parallelism: the step's new cache entries of this layer all-gathered over the
    cp ranks before attention (each rank then holds and attends the whole prompt's): cp times a
    rank's own tokens' K and V (MLA's latent, a compressed entry: one, K = V; an indexer key
    whole), split as the scores op reads them (by KV heads, or by head dim)."""
    shared = c.m.attention.kind in ("mla", "compressed")
    if choice == DIM0:
        f = frac(c.k_heads, c.p) if c.k_heads > 1 else 1.0
    elif choice == DIM1:
        f = frac(c.qk_dim, c.p)
    else:
        f = 1.0
    rows = c.rows_t if (choice not in (DIM0, DIM1) and lin == T) else c.rows
    per_tok = f * (c.k_tok + (0.0 if shared else c.v_tok)) + (c.idx_tok if c.indexed else 0.0)
    nb = rows * per_tok * c.cp
    t = c.coll_time("all-gather", "cp", nb)
    op.colls.append(("all-gather", "cp", nb, t))
    op.time_s += t


def context(c, choice, lin):
    if c.linear:
        return _linear_op(c, choice, lin, "conv"), {DIM0: F, DIM1: F}.get(choice, lin)
    if c.m.attention.kind == "compressed":
        return _compressed_attention(c, choice, lin, False), {DIM0: F, DIM1: F}.get(choice, lin)
    op = _attention(c, choice, lin, (c.v_dim, c.pre_v_dim, c.up_v, c.up_v_el), c.v_tok)
    if c.dcp > 1 and choice == DIM0 and c.decode:
        _dcp_exchange(c, op, False)
    return op, {DIM0: F, DIM1: F}.get(choice, lin)


def out_proj(c, choice, lin):
    if c.m.attention.kind == "compressed":
        return _compressed_out(c, choice, lin)
    g = c.m.linear
    heads = (g.heads if hasattr(g, "state_size") else g.value_heads) if c.linear \
        else c.heads
    group = "ssm" if c.linear and hasattr(g, "state_size") else "attention"
    return plain_gemm(c, choice, lin, c.ctx_out, c.h, c.rows, c.rows_t, k_frac=frac(heads, c.p),
                      group=group)


def router(c, choice, lin):
    return plain_gemm(c, choice, lin, c.h, c.experts, c.rows, c.rows_t, group="router")


def lm_head(c, choice, lin):
    return plain_gemm(c, choice, lin, c.h, c.m.vocab, c.lm_rows, math.ceil(c.lm_rows / c.p),
                      group="lm_head")


def ffn(c, which, choice, lin, moe):
    """FFN1 (which=1: up [+gate]) or FFN2 (which=2: down) of a MoE or a dense layer."""
    f, h, p = c.m.ffn, c.h, c.p
    up_mats = f.n_mats - 1
    if moe:
        inter, k, shared = float(f.expert_intermediate), c.top_k, float(f.shared_intermediate)
        e_loc = c.slots / c.ep                     # expert copies on each ep rank
    else:       # (a layer of its own width: FFNSpec.widths, set by the walk)
        inter, k, shared, e_loc = float(c.dense_width or f.intermediate), 1.0, 0.0, 1.0
    pairs = c.rows * k                             # (token, expert) pairs per tp group
    tokens = c.mb * c.tps                          # tokens routed per micro-batch step
    if c.work.phase == "mixed":
        tokens += c.chunk_mb
    # experts per expert group of etp ranks under `experts` (tp / etp groups per tp group)
    etp = float(c.etp) if moe else 1.0
    e_rank_x = math.ceil(e_loc / max(p / etp, 1.0))
    frac_t = "ffn_fractional_t_rows" in c.compat
    t_pairs = pairs / p if frac_t else c.rows_t * k
    # whole sequences: this rank's ceil(seqs/tp) of its own tp group, in every ep group
    # (at most the micro-batch's tokens: ceil over the ep groups can count more)
    t_tokens = tokens / p if frac_t else min((c.seqs_t * c.tps + c.chunk_t) * c.ep, tokens)
    # output layout
    if choice == DIM0:
        lout = P
    elif choice == DIM1:
        lout = F
    elif choice == NONE:
        lout = lin
    elif which == 1:
        lout = ER if lin == R else ET
    else:
        lout = P if lin == ER else T
    on_t = lin in (T, ET) if choice == EXPERTS else lin == T    # mode "own tokens"
    # routed (or dense) part on the busiest rank; a latent MoE's experts read and write the
    # latent (moe_latent_size), not the hidden state
    h = f.latent if moe and f.latent else c.h
    mats = up_mats if which == 1 else 1
    w_exp = h * inter * mats
    if choice in (DIM0, DIM1):
        fr = frac(h, p) if (choice == DIM0) == (which == 1) else frac(inter, p)
        npairs, ex, toks = pairs, e_loc, tokens
    elif choice == NONE and not on_t:
        fr, npairs, ex, toks = 1.0, pairs, e_loc, tokens
    elif choice == NONE:
        fr, npairs, ex, toks = 1.0, t_pairs, e_loc, t_tokens
    elif moe:              # experts: whole experts per expert group, the tokens routed to
        # them, each of its etp ranks a 1/etp share of each expert's intermediate width
        fr, npairs, ex, toks = frac(inter, etp), pairs * e_rank_x / e_loc, e_rank_x, tokens
    else:                  # `experts` on a dense FFN: replicated weights, a share of the tokens
        fr, npairs, ex, toks = 1.0, t_pairs, 1.0, t_tokens
    # expected expert copies that receive a token: only their weights are read (docs/design.md
    # §3); each of the slots gets a token's pick with chance top_k / slots
    act = ex * (1.0 - (1.0 - c.top_k / c.slots) ** toks) if moe else 1.0
    # the busiest rank of those holding ``ex`` copies: I x its uniform share of the pairs
    if moe:
        npairs *= float(busiest(f, ex, toks))
    in_w = h if which == 1 else inter
    out_w = inter * up_mats if which == 1 else h
    # (an expert over etp ranks: FFN1 split by columns, FFN2 by rows into partial sums)
    fin = fr if choice == DIM0 or (moe and choice == EXPERTS and which == 2) else 1.0
    fout = fr if choice == DIM1 or (moe and choice == EXPERTS and which == 1) else 1.0
    flops = 2.0 * npairs * w_exp * fr
    wb, wbr, peak = c.fmts["experts" if moe else "dense_ffn"]
    if moe:   # routed experts: a grouped GEMM, compute by tokens per active expert
        compute_s = flops / grouped_peak(c, npairs / act) if flops else 0.0
        nbytes = act * w_exp * fr * c.grouped_wbr + npairs * (in_w * fin + out_w * fout) * c.ab
    else:
        compute_s = flops / peak
        nbytes = act * w_exp * fr * wbr + npairs * (in_w * fin + out_w * fout) * c.ab
    weights = ex * w_exp * fr * wb
    # the shared expert and a latent MoE's projections: dense, in the shared experts' format
    swb, swbr, speak = c.fmts["shared_experts"]
    h = c.h
    # shared expert(s): dense, in the same op
    if shared:
        w = h * shared * mats
        if choice in (DIM0, DIM1):
            sfr = frac(h, p) if (choice == DIM0) == (which == 1) else frac(shared, p)
            r = c.rows
        elif choice == EXPERTS and not on_t:     # replicated, the tokens split over tp
            sfr, r = 1.0, c.rows / p
        elif choice == NONE and not on_t:
            sfr, r = 1.0, c.rows
        else:
            sfr, r = 1.0, c.rows_t
        flops += 2.0 * r * w * sfr
        compute_s += 2.0 * r * w * sfr / speak
        nbytes += w * sfr * swbr + r * h * 2 * c.ab
        weights += w * sfr * swb
    # a latent MoE's fc1_latent_proj (FFN1: hidden -> latent) or fc2_latent_proj (FFN2: latent
    # -> hidden): dense, every token, whole on every tp rank (vLLM's ReplicatedLinear)
    lat = float(f.latent) if moe else 0.0
    if lat:
        w = h * lat
        if choice in (DIM0, DIM1) or (choice == NONE and not on_t):
            r = c.rows
        elif choice == EXPERTS and not on_t:
            r = c.rows / p
        else:
            r = c.rows_t
        flops += 2.0 * r * w
        compute_s += 2.0 * r * w / speak
        nbytes += w * swbr + r * (h + lat) * c.ab
        weights += w * swb
    # collectives the op needs itself: dispatch (FFN1) / combine (FFN2) over ep, and under
    # `experts` on T the tokens travel to the rank of their expert and back (tp all-to-all)
    colls = []
    if moe and c.ep > 1:
        split = (lin != R if which == 1 else lout in (T, F)) or choice == EXPERTS
        # the routed copies travel at the experts' width (a latent MoE's latent)
        lw = f.latent or h
        # the busiest ep group receives I times the mean of the routed copies
        # (`experts` over etp ranks: each copy to, and partial sums from, the etp ranks of
        # its expert's group)
        share = p / etp if choice == EXPERTS else p
        colls.append(("all-to-all", "ep", c.rows * k * lw * c.ab / (share if split else 1.0)
                      * float(busiest(f, e_loc, tokens))))
    if choice == EXPERTS and (lin == T or lout == T):
        # the busiest rank receives I times its experts' mean share of the copies
        colls.append(("all-to-all", "tp", c.rows_t * k * (f.latent if moe and f.latent else h)
                      * c.ab * (float(busiest(f, e_rank_x, tokens)) if moe else 1.0) * etp,
                      True))
    return _Op(c, flops, nbytes, weights, colls=colls, compute_s=compute_s), lout


# ----------------------------------------------------------------------------------------------
# conversions

def conversion(c, point, src, dst):
    """(kind or None, bytes passed to the collective, seconds) of src -> dst at an activation."""
    kind = CONVERSION.get((src, dst))
    if kind is None:
        return None, 0.0, 0.0
    nb = c.point_bytes[point]
    size = nb / c.p if kind == "all-to-all" else nb      # all-to-all: each rank's share
    return kind, size, c.coll_time(kind, "tp", size)


def pick_r_or_t(c, point, incoming):
    """The input layout of a `none` (or FFN1 `experts`) op: an incoming R or T stays; anything
    else is gathered to R (README: the pick follows layouts, never costs)."""
    return incoming if incoming in (R, T) else R


FIXED_INPUT = {   # op -> {choice: input layout} for dim 0 / dim 1
    "gemm": {DIM0: F, DIM1: R}, "scores": {DIM0: F, DIM1: F}, "context": {DIM0: F, DIM1: R},
}


def input_layout(c, kind, choice, incoming, point):
    if choice in (DIM0, DIM1):
        return FIXED_INPUT[kind][choice]
    return pick_r_or_t(c, point, incoming)


# ----------------------------------------------------------------------------------------------
# the walk

class _Walker:
    def __init__(self, c, ch):
        self.c, self.ch = c, ch
        self.time = [0.0] * c.pp
        self.mem = [0.0] * c.pp
        self.colls = {}               # (op, kind, group, bytes, time) -> count
        self.stage = 0
        self.ops = {}                 # op name -> its _Op, as last run
        self.lin = {}                 # op name -> its input layout, as last run

    def record(self, op, kind, group, nbytes, t):
        if self.c.group(group)[0] <= 1:
            return
        key = (op, kind, group, float(nbytes), float(t))
        self.colls[key] = self.colls.get(key, 0) + 1

    def convert(self, feeds, point, src, dst):
        kind, nb, t = conversion(self.c, point, src, dst)
        if kind is not None:
            self.record(feeds, kind, "tp", nb, t)
        self.time[self.stage] += t

    def run(self, name, op, memory=True):
        self.time[self.stage] += op.time_s
        if memory:
            self.mem[self.stage] += op.weight_bytes
        for kind, group, nb, t in op.colls:
            self.record(name, kind, group, nb, t)
        self.ops[name] = op

    def gemm_step(self, name, fn, kind, incoming, point):
        """Convert the incoming activation to what the op needs, run it; returns its output."""
        choice = self.ch[name]
        lin = input_layout(self.c, kind, choice, incoming, point)
        self.convert(name, point, incoming, lin)
        op, lout = fn(self.c, choice, lin)
        self.run(name, op)
        return op, lin, lout

    def ffn_block(self, moe, l7):
        """FFN1 (+ router) + FFN2 of one layer (``moe``: a MoE layer, else a dense FFN); returns
        the output layout and whether the FFN1/FFN2 pair is valid."""
        c, ch = self.c, self.ch
        sfx = "_dense" if c.m.is_moe and not moe else ""
        c1, c2 = ch["ffn1"], ch["ffn2"]
        lin1 = input_layout(c, "gemm", c1, l7, "hidden")           # experts: R or T as `none`
        self.convert("ffn1" + sfx, "hidden", l7, lin1)
        op1, out1 = ffn(c, 1, c1, lin1, moe)
        self.run("ffn1" + sfx, op1)
        if moe:            # the router: a side branch off the normed activation
            _, _, outr = self.gemm_step("router", router, "gemm", l7, "hidden")
            # the routing decision must be where the tokens are: every rank, or its own (T)
            self.convert("router", "router", outr, T if lin1 == T else R)
        pair_ok = (c1 == EXPERTS) == (c2 == EXPERTS)
        point = "inter" + sfx
        if c2 == EXPERTS:
            lin2 = out1 if pair_ok else ER
        else:
            lin2 = input_layout(c, "gemm", c2, out1, point)
        self.convert("ffn2" + sfx, point, out1, lin2)
        op2, out2 = ffn(c, 2, c2, lin2, moe)
        self.run("ffn2" + sfx, op2)
        return out2, pair_ok

    def kv(self):
        """Resident KV cache of one layer: K as scores splits it, V as context does (MLA: one
        latent; when both ops store it alike, the scores copy serves both)."""
        c, ch = self.c, self.ch
        ks, vs = self.ops["scores"], self.ops["context"]
        if c.m.attention.kind in ("mla", "compressed") and not c.linear:
            def store(choice, op_lin):    # heads and R keep whole latents; dim splits; T own seqs
                return {DIM0: "whole", DIM1: "dim"}.get(choice, "own" if op_lin == T else "whole")
            same = store(ch["scores"], self.lin["scores"]) == store(ch["context"], self.lin["context"])
            kv = ks.kv_bytes + (0.0 if same else vs.kv_bytes)
        else:
            kv = ks.kv_bytes + vs.kv_bytes
        return kv * (1.0 if "kv_per_microbatch" in c.compat else c.pp)


def evaluate(model, topo, work, row, compat=()):
    """Evaluate one strategy row (16 ints) -> dict (see the module docstring)."""
    c = _Ctx(model, topo, work, row, compat)
    ch = {op: int(row[N_COARSE + i]) for i, op in enumerate(OPS)}
    reasons = set()
    tp, ep, pp, batch = c.tp, c.ep, c.pp, c.batch
    if tp * ep * pp * c.cp > work.budget(topo):
        reasons.add("budget")
    if model.layers % pp:
        reasons.add("divisibility")
    else:   # every stage must hold the same layer kinds in the same numbers
        lw = model.layer_windows
        # ... and MoE FFNs in the same numbers on every moe_every-th layer (the leading dense
        # layers are costed stage by stage)
        lm = model.layer_moe if model.ffn.moe_every > 1 else (False,) * model.layers
        li = model.layer_indexed          # ... and layers running an indexer in the same numbers
        # ... and layers without an FFN in the same numbers, none of them a stage's last
        hf = model.layer_has_ffn
        fw = model.ffn.widths or (0,) * model.layers    # ... and the FFN widths alike
        n = model.layers // pp
        per = {(tuple(sorted(map(str, lw[s * n:(s + 1) * n]))), sum(lm[s * n:(s + 1) * n]),
                sum(li[s * n:(s + 1) * n]), sum(hf[s * n:(s + 1) * n]),
                tuple(sorted(fw[s * n:(s + 1) * n]))) for s in range(pp)}
        if len(per) > 1 or not all(hf[(s + 1) * n - 1] for s in range(pp)):
            reasons.add("divisibility")
    uneven = bool(model.layers % pp == 0 and "divisibility" in reasons and len(per) > 1)
    if model.is_moe and model.ffn.slots % ep:
        reasons.add("divisibility")
    if not model.is_moe and (ep > 1 or EXPERTS in (ch["ffn1"], ch["ffn2"])):
        reasons.add("experts")
    if c.cp > 1 and (work.phase != "prefill" or model.linear_layers > 0):
        reasons.add("context-parallel")
    a = model.attention
    one_shape = not (a.kind == "gqa" and (a.kinds or a.v_head_dim or a.k_eq_v))
    if c.dcp > 1 and (work.phase == "prefill" or c.cp > 1 or a.compressed or a.block_sparse
                      or model.linear_layers or model.bare_layers or not one_shape
                      or any(w is not None for w in model.layer_windows)):
        reasons.add("context-parallel")
    if tp % c.dcp:
        reasons.add("divisibility")
    if tp % c.etp:
        reasons.add("divisibility")
    if c.etp > 1 and (not model.is_moe or ch["ffn1"] != EXPERTS):   # etp: `experts` only
        reasons.add("experts")

    L = model.layers
    lp = L // pp
    l2, l7, l11 = NORM_LAYOUT[ch["attn_norm"]], NORM_LAYOUT[ch["ffn_norm"]], NORM_LAYOUT[ch["final_norm"]]
    w = _Walker(c, ch)

    moe_out = None
    if "moe_layout_everywhere" in c.compat and model.is_moe:
        probe = _Walker(c, ch)
        moe_out = probe.ffn_block(True, l7)[0]

    x = None               # layout of the activation leaving the previous layer
    res = l7               # ... and of the residual (attn_norm's after a layer without an FFN)
    boundary_sends = []
    for s in range(pp):
        w.stage = s
        if s == 0:         # embedding: token ids are on every rank
            op, out = embedding(c, ch["embedding"])
            w.run("embedding", op)
            w.convert("attn_norm", "hidden", out, l2)      # activation and residual at once
        for layer in range(s * lp, (s + 1) * lp):
            if layer > 0:  # layer boundary: FFN output and residual into this attn_norm's layout
                w.convert("attn_norm", "hidden", x, l2)
                w.convert("attn_norm", "residual", res, l2)
            # a layer without a token mixer (no_attention: DeciLM's no_op attention) runs
            # neither attn_norm nor a mixer: its residual goes to its FFN
            bare = model.layer_windows[layer] == "no_attention"
            cur = l2
            if not bare:
                op, _ = norm(c, ch["attn_norm"])
                w.run("attn_norm", op)
                c.layer(model.layer_windows[layer])          # this layer's attention kind
                c.indexed = model.layer_indexed[layer]       # and whether it runs an indexer
                for name, fn, kind, point in (("qkv", qkv, "gemm", "mixed"),
                                              ("scores", scores, "scores", "qkv"),
                                              ("context", context, "context", "scores"),
                                              ("out_proj", out_proj, "gemm", "context")):
                    _, lin, cur = w.gemm_step(name, fn, kind, cur, point)
                    w.lin[name] = lin
                w.mem[s] += w.kv()
            if not model.layer_has_ffn[layer]:
                # a token mixer alone (Nemotron-H's mixer block before another mixer block): its
                # output and the residual (still in attn_norm's layout) go to the next layer
                x, res = cur, l2
                continue
            res = l7
            if not bare:
                w.convert("ffn_norm", "mixed", cur, l7)   # attention output
            w.convert("ffn_norm", "residual", l2, l7)     # residual
            op, _ = norm(c, ch["ffn_norm"])
            w.run("ffn_norm", op)
            if model.ffn.widths:      # this layer's own FFN width (Llama-Nemotron NAS)
                c.dense_width = model.ffn.widths[layer]
                c.point_bytes["inter"] = c.rows * c.dense_width * c.ab
            x, pair_ok = w.ffn_block(model.layer_moe[layer], l7)   # this layer's FFN kind
            if not pair_ok:
                reasons.add("experts")
            if moe_out is not None:
                x = moe_out
        if s < pp - 1:
            boundary_sends.append(sum(
                c.coll_time("send", "pp", nb / c.p if lo in (T, F) else nb)
                for lo, nb in ((x, c.point_bytes["hidden"]), (res, c.point_bytes["residual"]))))
    # last stage: final norm, LM head, sampled ids on every rank
    w.convert("final_norm", "hidden", x, l11)
    w.convert("final_norm", "residual", res, l11)
    op, _ = norm(c, ch["final_norm"], final=True)
    w.run("final_norm", op)
    _, _, out12 = w.gemm_step("lm_head", lm_head, "gemm", l11, "hidden")
    logits = c.point_bytes["logits"]
    final = {R: None, T: ("all-gather", c.lm_rows * 4.0), F: ("all-gather", logits),
             P: ("all-reduce", logits)}[out12]
    if final is not None:  # T samples its own tokens and gathers the ids (4 bytes each)
        t = c.coll_time(final[0], "tp", final[1])
        w.record("lm_head", final[0], "tp", final[1], t)
        w.time[pp - 1] += t
    # pipeline
    send_s = max(boundary_sends) if boundary_sends else 0.0
    slowest = max(w.time) + send_s
    mixer = sum(c.attn_widths)
    if model.linear is not None:      # the wider kind's activations
        c.layer("linear_attention")
        mixer = max(mixer, c.qkv_out + c.ctx_out)
    workspace = 2.0 * c.ab * (c.rows * (3 * c.h + mixer + _inter_w(model)
                                         * (model.ffn.n_mats - 1)) + c.lm_rows * model.vocab)
    memory = max(w.mem) + workspace
    if work.phase in ("decode", "mixed"):
        step = pp * slowest + topo.step_overhead_s
        tpot, ttft = step, math.nan
        tokens = batch / step
        if tpot > work.tpot_slo_ms * 1e-3:
            reasons.add("slo")
    else:
        step = (2 * pp - 1) * slowest + topo.step_overhead_s
        tpot, ttft = math.nan, step
        tokens = batch * work.context / step
        if work.ttft_slo_ms and ttft > work.ttft_slo_ms * 1e-3:
            reasons.add("slo")
    if memory > topo.hbm_bytes - topo.hbm_reserve_bytes:
        reasons.add("memory")
    gpus = tp * ep * pp * c.cp
    collectives = [dict(op=k[0], kind=k[1], group=k[2], bytes=k[3], time_s=k[4], count=n)
                   for k, n in w.colls.items()]
    if pp > 1 and send_s > 0:
        collectives.append(dict(op="stage_send", kind="send", group="pp",
                                bytes=c.point_bytes["hidden"], time_s=send_s, count=pp - 1))
    return {
        "valid": not reasons,
        "reasons": [r for r in REASONS if r in reasons],
        "tokens_per_s_per_gpu": tokens / gpus,
        "tokens_per_s": tokens,
        "tpot_s": tpot,
        "ttft_s": ttft,
        "step_s": step,
        "slowest_stage_s": slowest,
        "stage_s": list(w.time),
        "stage_memory_bytes": [m + workspace for m in w.mem],
        "memory_bytes": memory,
        "gpus": gpus,
        "collectives": collectives,
        # stages holding different layer kinds: lts refuses the strategy without costing each
        # stage apart (its tables cost a stage's mean layer), so only the verdict compares
        "uneven_kinds": uneven,
    }


def _inter_w(model):
    f = model.ffn
    return (f.top_k * f.expert_intermediate + f.shared_intermediate) if model.is_moe \
        else f.intermediate
