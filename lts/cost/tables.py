"""Op tables: the roofline cost of every op in every mode, and of every layout conversion, for
each distinct coarse row (tp, ep, pp, batch) at once (docs/design.md §3).

Roofline per op: time = max(FLOPs / (peak * eta_compute), HBM bytes / (HBM bw * eta_memory))
+ kernel overhead (Williams et al. 2009 roofline; overhead: a fixed launch cost per fused op).
With ``roofline_exponent`` k set in the topology, the max becomes the smooth (c^k + m^k)^(1/k)
(``roofline_time``; fitted to measured GEMMs near the ridge point). An op's own collectives (a
hidden-split norm's all-reduce, MoE dispatch and combine) are costed with it; collectives are
not overlapped with compute (docs/paper.md §6 recommendation). Everything is a few NumPy expressions
over [G] arrays, G = distinct coarse rows; times in seconds, sizes in bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from . import collectives as coll
from . import kv
from .expert_load import busiest
from .layouts import (CONVERSION, F, FFN1_MODES, FFN2_MODES, MAX_MODES, MODE_DIM0, MODE_DIM1,
                      MODE_EXPERTS, MODE_EXPERTS_T, MODE_NONE, MODE_NONE_T, N_LAYOUTS, P, POINTS, PT, SLOT,
                      SLOT_MODES, SLOTS, T)
from ..specs import WEIGHT_GROUPS, ModelSpec, TopologySpec, attention_params, compressor_params
from ..specs.model import BlockSparse, Compressed, Mamba2Spec
from ..specs.units import WEIGHT_FORMATS
from ..specs.strategy import (BATCH, COL, CP, DCP, DEGREES, EP, ETP, EXPERTS, PP, TP,
                               instance_gpus, placement)
from ..specs.workload import Workload, compose_step, prefill_steps

# validity reasons (bit flags) and their messages
# (context-parallel: cp > 1 where lts does not cost it: a decode step, linear-attention layers;
# dcp > 1 in a prefill pass, with cp, or over a token mixer ``dcp_costed`` does not name)
REASONS = ("budget", "divisibility", "memory", "slo", "experts", "engine", "context-parallel")
REASON_BIT = {r: 1 << i for i, r in enumerate(REASONS)}


def _frac(n, ranks):
    """Share of a dimension of size n on the busiest of ``ranks`` ranks: ceil(n/ranks)/n."""
    n = np.maximum(n, 1)    # an empty dimension (no dense layers, no shared expert) costs nothing
    return np.ceil(n / ranks) / n


# ----------------------------------------------------------------------------------------------
# per coarse row: op costs per mode and conversion costs

@dataclass
class Tables:
    """Costs for G distinct coarse rows. Arrays are [G, ...]; times in seconds, sizes in bytes."""
    coarse: np.ndarray                 # [G, N_COARSE] the coarse rows (specs.strategy.AXES)
    compute_s: np.ndarray              # [G, slots, modes] FLOP-bound time of one op instance
    memory_s: np.ndarray               # [G, slots, modes] HBM-bound time
    time_s: np.ndarray                 # [G, slots, modes] roofline + kernel overhead
    intrinsic_s: np.ndarray            # [G, slots, modes] collectives the op itself needs
    intrinsic: dict                    # (slot, mode) -> list of (kind, group, bytes[G], time[G])
    weight_bytes: np.ndarray           # [G, slots, modes] resident weights per GPU
    kv_bytes: np.ndarray               # [G, slots, modes] resident KV cache per GPU per layer
    kv_layer_bytes: np.ndarray         # [G, scores mode, context mode]: K and V together
    conv_s: np.ndarray                 # [G, points, 6 from, 6 to] (zero diagonal; ER/ET free)
    conv_bytes: np.ndarray             # [G, points] full activation bytes
    final_s: np.ndarray                # [G, 4] logits layout -> sampled ids everywhere
    send_s: np.ndarray                 # [G, 4] stage-to-stage send: [hidden split over tp, full,
    #                                    the residual split, full]
    send_bytes: np.ndarray             # [G, 4]
    workspace_bytes: np.ndarray        # [G]
    fixed_invalid: np.ndarray          # [G] reason bits that depend only on the coarse row
    layers_per_stage: np.ndarray       # [G]
    pp: np.ndarray                     # [G] float: pipeline stages
    batch: np.ndarray                  # [G] float: sequences (decode, prefill) or requests (mixed)
    gpus: np.ndarray                   # [G] float: GPUs of one instance (instance_gpus)
    steps: np.ndarray                  # [G] float: steps of one pass (a prefill chunked to the
    #                                    engine's budget: ``prefill_steps``; else 1)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        self.op_total_s = self.time_s + self.intrinsic_s   # [G, slots, modes]


class _Kind:
    """One layer kind's attention sizes: its ``share`` of the layers, its sliding ``window``
    (None: full attention), the tokens each sequence's cache holds and a step reads (``ctx``),
    the mean keys a query attends to (``ctx_attn``); a mixed step's chunk sizes are set later."""

    def __init__(self, share, window, work: Workload, decode: bool, index: bool = False):
        # index: these layers run the sparse-attention indexer (not GLM-5.2's "shared" ones)
        self.share, self.window, self.index = share, window, index
        self.ctx_full = float(work.context)
        self.ctx = kv.held_tokens(window, float(work.context), decode)
        # a block-sparse layer's indexer scores every earlier key, as full attention attends
        # (the keys the layer attends to: ``_Shape``'s sel_attn)
        self.dense = None if isinstance(window, BlockSparse) else window
        # average keys a query attends to: decode reads the held context; causal prefill ~ half,
        # its queries after a cached prefix (prefix caching: Workload.cached) more
        # (a prefill's length in tokens: ``ctx_full``; ``ctx`` counts compressed attention's
        # entries)
        self.ctx_attn = self.ctx if decode else kv.mean_keys(self.dense, self.ctx_full) \
            if not work.cached else kv.mean_keys_after(self.dense, float(work.cached),
                                                       self.ctx_full - work.cached)
        self.score_rows = self.chunk_keys = self.chunk_read = None
        self.sel = self.sel_attn = self.chunk_sel = None     # sparse attention's (``_Shape``)
        # the prompt so far a step sees (its indexer keys read), the keys before its queries
        # (a cached prefix: MLA up-projects them again); a chunked prefill's: ``_chunked``
        self.prefix, self.earlier = self.ctx_full, float(work.cached)


class _Shape:
    """Model dimensions and workload sizes as arrays over G coarse rows."""

    def __init__(self, model: ModelSpec, topo: TopologySpec, work: Workload, coarse):
        self.m, self.topo, self.work = model, topo, work
        coarse = np.asarray(coarse, dtype=np.int64)
        self.tp = coarse[:, TP].astype(np.float64)
        self.ep = coarse[:, EP].astype(np.float64)
        self.pp = coarse[:, PP].astype(np.float64)
        self.batch = coarse[:, BATCH].astype(np.float64)
        self.gpus = instance_gpus(coarse).astype(np.float64)      # GPUs of one instance
        self.degrees = {n: coarse[:, COL[n]].astype(np.float64) for n in DEGREES}
        a, f = model.attention, model.ffn
        prec = model.precision
        self.wb, self.kvb, self.ab = prec.weight_bytes, prec.kv_bytes, prec.act_bytes
        self.peak = topo.peak_for(prec.weights) * topo.compute_efficiency_for(prec.weights)
        # attention math at its own type's rate (PrecisionSpec.attention_dtype)
        att = prec.attention_dtype
        self.attn_peak = topo.peak_for(att) * topo.compute_efficiency_for(att)
        self.hbm = topo.hbm_bandwidth_bytes_s * topo.memory_efficiency
        # GEMM weight reads at their own efficiency (fp8 kernels read weights slower than bf16):
        # counted as wb * eta_memory / eta_weights effective bytes per weight element read
        self.wbr = (self.wb * topo.memory_efficiency
                    / topo.weight_memory_efficiency_for(prec.weights))
        # each op group's weights in its own format (a checkpoint leaves some unquantized:
        # PrecisionSpec.unquantized): (bytes per weight, effective bytes read, achievable FLOP/s)
        self.fmt = {g: self._format(prec.format_of(g), prec.share_of(g)) for g in WEIGHT_GROUPS}
        # the routed experts' grouped GEMMs (``grouped_compute``): effective bytes per weight
        # read, the format's peak, log tokens per expert and the compute efficiency at each
        fmt = prec.format_of("experts")
        points, compute, memory = topo.grouped_efficiency(fmt)
        self.grouped = (WEIGHT_FORMATS[fmt][0] * topo.memory_efficiency / memory,
                        topo.peak_for(fmt), np.log(np.asarray(points, dtype=np.float64)),
                        np.asarray(compute, dtype=np.float64))
        self.overhead = topo.kernel_overhead_s
        self.kernels = topo.kernels      # measured kernels (cost.kernels.KernelSet) or None
        decode = work.phase in ("decode", "mixed")
        seqs = self.batch
        if work.phase == "mixed":
            # each ep group its scheduler; each rank of it too under data-parallel attention
            mix = compose_step(self.batch, work, self.ep * (self.tp if work.attn_dp_tp else 1.0))
            seqs = mix.decoders
        # micro-batch: the batch runs as pp micro-batches; attention is data-parallel across the
        # ep groups (each takes whole sequences); the busiest group sets the pace (ceil)
        self.mb = np.ceil(seqs / self.pp)
        self.seqs = np.ceil(self.mb / self.ep)                       # sequences per tp group
        # tokens per sequence per step: decode one, or the query tokens speculative decoding
        # verifies (Workload.query_tokens); prefill the whole prompt but a cached prefix
        self.tps = float(work.query_tokens) if decode else float(work.context - work.cached)
        # a prefill chunked to the engine's token budget (Workload.step_tokens): ``steps`` steps
        # of new / steps tokens a prompt (each ep group an attention-DP rank), each reading its
        # prompt so far (``_chunked``); the pass is ``steps`` such steps (cost.model.finish)
        self.steps = np.ones_like(self.tp)
        if work.phase == "prefill" and work.step_tokens:
            self.steps = prefill_steps(work, self.ep)
            self.tps = self.tps / self.steps
        # context parallelism (the ``cp`` axis): a prefill's new tokens split over the cp ranks
        # in 2*cp zigzag chunks, chunks r and 2cp-1-r on rank r, so every rank does the same
        # causal attention work (vLLM 0.33.0 v1/worker/gpu/pcp_manager.py _iter_rank_chunks;
        # SGLang 0.5.23 layers/cp/zigzag.py): each rank runs every op on its tokens, its queries
        # attending the whole prompt (``_fill_context_parallel``); weights and the prompt's
        # cache whole on every rank (vLLM: "every PCP rank retains a complete cache replica")
        self.cp = coarse[:, CP].astype(np.float64)
        if not decode and (self.cp > 1).any():
            self.tps = self.tps / self.cp
        # decode context parallelism (the ``dcp`` axis, no more GPUs): under the heads split
        # the tp group's attention becomes heads over tp/dcp rank groups and the cache's tokens
        # over dcp ranks (``_dcp_modes``, ``_fill_decode_context_parallel``)
        self.dcp = coarse[:, DCP].astype(np.float64)
        # expert tensor parallelism (the ``etp`` axis, no more GPUs): under ffn1/ffn2 = experts
        # each routed expert split by its intermediate width over etp consecutive tp ranks, the
        # experts over the stage's tp x ep / etp expert groups (``_ffn_layer``, ``_routed``,
        # ``_ffn_collectives``); the other FFN choices are as at etp = 1
        self.etp = coarse[:, ETP].astype(np.float64)
        self.rows = self.seqs * self.tps                            # tokens per tp group
        self.seqs_t = np.ceil(self.seqs / self.tp)                   # sequences per rank under T
        self.rows_t = self.seqs_t * self.tps
        # next-token logits per sequence: one, or one per verified position
        self.lm_rows = self.seqs * (self.tps if decode else 1.0)
        self.mb_tokens = self.mb * self.tps                         # tokens of one micro-batch
        # one _Kind per layer kind (full attention, a sliding window), each with its share of
        # the layers: the attention ops are costed per kind and weighted (``kv`` module docstring)
        # (the softmax-attention kinds only, their shares of those layers; the linear-attention
        # layers are a kind of their own, ``lin_share`` of the layers: ``_fill_attention``)
        n_attn = model.attention_layers
        self.kinds = [_Kind(count / n_attn, w, work, decode, ix) for (w, ix), count in
                      model.attention_kinds]
        self.lin_share = model.linear_layers / model.layers
        # the layers without a token mixer (NO_ATTENTION): the mixer's ops, its attn_norm and
        # its conversions are the other layers' share of the mean layer (``_fill_attention``,
        # ``build_tables``)
        self.bare_share = model.bare_layers / model.layers
        topk = a.index_topk if a.sparse and not a.compressed else None
        for k in self.kinds:
            # sparse attention (kv module docstring): the latents a step reads (``sel``) and the
            # keys a query attends to (``sel_attn``) of the held ones; dense: all of them
            k.sel = kv.selected_tokens(model, k.ctx, decode)
            k.sel_attn = k.ctx_attn if topk is None else \
                (k.sel if decode else kv.mean_keys(topk, k.ctx) if not work.cached else
                 kv.mean_keys_after(topk, float(work.cached), k.ctx - work.cached))
            if a.compressed:
                # compressed attention (kv module docstring): the entries a decode step reads,
                # the keys a query attends to (CSA: at most topk compressed ones), the entries
                # its indexer scores per query (CSA only)
                k.sel = kv.read_tokens(k.window, k.ctx_full) if decode else k.ctx
                k.sel_attn = k.sel if decode else k.ctx_attn
                k.idx = kv.index_keys(k.window, k.ctx_full) if decode else \
                    kv.index_keys_after(k.window, float(work.cached),
                                        float(work.context - work.cached))
            if isinstance(k.window, BlockSparse):
                # block-sparse attention (kv module docstring): a decode step reads the keys
                # each KV head attends to, a prefill its whole prompt; a prefill query i
                # attends to block_keys(i) of them (its indexer scores every one: ctx_attn)
                k.sel = kv.read_tokens(k.window, k.ctx_full) if decode else k.ctx
                k.sel_attn = k.sel if decode else kv.mean_keys_after(
                    k.window, float(work.cached), k.ctx_full - work.cached)
            if work.phase == "prefill" and work.step_tokens:
                _chunked(k, work, self.steps)
            k.score_rows = self.rows * k.sel_attn                   # sum of keys over the queries
        self.chunk = None
        if work.phase == "mixed":
            # the prefill chunk, spread over the micro-batches and ep groups like sequences: a
            # prompt's chunk stays whole in one micro-batch of one ep group, so the busiest
            # holds at least one chunk: min(chunk, isl, what one rank's step holds) tokens (a
            # prompt longer than a rank's budget is chunked to it: SGLang's DP ranks share 8192
            # tokens, 256 each on 32 ranks, where a whole 4000-token prompt was costed before)
            new = float(work.isl - work.cached)      # a prompt's tokens to prefill
            one = np.minimum(np.minimum(mix.chunk, new), mix.rank_cap)
            ch_mb = np.maximum(mix.chunk / self.pp, one)             # busiest micro-batch
            ch = np.maximum(ch_mb / self.ep, one)                    # its busiest ep group
            self.chunk = ch
            self.chunk_t = ch / self.tp                               # per rank under T
            for k in self.kinds:
                # causal: mean keys per query of a prompt (full attention: (isl + 1)/2)
                # (block-sparse: the keys its indexer scores)
                k.chunk_keys = kv.mean_keys_after(k.dense, float(work.cached), new)
                # each chunk reads the cache of its prompt so far: (per_prompt + 1)/2 chunks on
                # average under full attention
                k.chunk_read = kv.chunk_reads(k.window, mix.per_prompt, new, work.cached)
                # sparse: each chunk query attends to min(i, index_topk) keys; the chunk reads
                # its prompt's latents so far (the union of its queries' choices)
                # (block-sparse: each chunk query attends to block_keys(i) keys)
                k.chunk_sel = kv.mean_keys_after(k.window, float(work.cached), new) \
                    if isinstance(k.window, BlockSparse) else k.chunk_keys if topk is None else \
                    kv.mean_keys_after(topk, float(work.cached), new)
                if a.compressed:      # the chunk's queries' indexer scores
                    k.chunk_idx = kv.index_keys_after(k.window, float(work.cached), new)
                k.score_rows = k.score_rows + ch * k.chunk_sel
            self.rows = self.rows + ch
            self.rows_t = self.rows_t + self.chunk_t
            self.lm_rows = self.lm_rows + ch / new                   # prompts finishing per step
            self.mb_tokens = self.mb_tokens + ch_mb
        h = model.hidden
        self.h = h
        # gqa whose layer kinds differ in shape, or with a V of its own width or none
        # (AttentionSpec.kinds, v_head_dim, k_eq_v): each kind costed in its own shape
        # (``_kind_shape``, ``_fill_softmax_kinds``); the others as before, one shape
        self.general = a.kind == "gqa" and bool(a.kinds or a.v_head_dim or a.k_eq_v)
        # one token in one layer's cache (each kind's own: _Kind.k_tok, v_tok)
        self.k_tok, self.v_tok = kv.token_bytes(model) if kv.uniform(model) else (None, None)
        self.idx_tok = kv.index_token_bytes(model)              # its indexer key (sparse only)
        # indexer FLOPs per query per key: index_heads dot products of index_head_dim
        self.idx_flops = 2.0 * a.index_heads * a.index_head_dim
        if a.kind == "mla":
            # absorbed MLA (DeepSeek-V2 §2.1.2): scores over the latent + rope key, values from the
            # latent; the cache holds one latent (kv_lora + rope) per token, not split by heads
            self.qk_dim = a.kv_lora_rank + a.qk_rope_head_dim
            self.v_dim = a.kv_lora_rank
            self.k_heads = 1.0                     # the latent is shared by all heads
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            # (Kimi-K3's output gate: heads v_head_dim more)
            self.qkv_out = a.heads * (qk + a.output_gate * a.v_head_dim) + a.kv_lora_rank \
                + a.qk_rope_head_dim
        else:
            self.qk_dim = a.head_dim
            self.v_dim = a.head_dim
            self.k_heads = float(a.kv_heads)
            # q_proj also makes the output gates (AttentionSpec.q_out); compressed attention
            # its queries and the one entry (``_fill_compressed``)
            self.qkv_out = a.q_out + (1 if a.compressed else 2) * a.kv_heads * a.head_dim
        # the prefill tokens' attention (mla_prefill_shape): MLA un-absorbed, the others as above
        self.pre_qk_dim, self.pre_v_dim, self.up_k, self.up_v = \
            mla_prefill_shape(a) or (self.qk_dim, self.v_dim, 0.0, 0.0)
        self.ctx_out = a.heads * a.v_dim
        for k in self.kinds:
            _kind_shape(self, k, model)
        if isinstance(model.linear, Mamba2Spec):    # Mamba-2: in_proj, the SSM's output
            self.lin_qkv_out = model.linear.in_proj_out
            self.lin_ctx_out = model.linear.intermediate
        elif model.linear is not None:   # Gated DeltaNet: in_proj_qkvz + in_proj_ba (KDA its
            # projections: LinearAttentionSpec.in_proj), its output
            g = model.linear
            self.lin_qkv_out = sum(out for _, out in g.in_proj(h).values())
            self.lin_ctx_out = g.value_dim
        self.experts = float(f.experts)
        self.slots = float(f.slots)            # expert copies over the ep group (+ redundant)
        self.top_k = float(f.top_k)

    def _format(self, fmt: str, share: float = 1.0) -> tuple:
        """(wb, wbr, peak) of weights in ``fmt``, as ``wb``/``wbr``/``peak`` are for the model's;
        a group quantized in ``share`` of its layers only (``PrecisionSpec.quantized_share``):
        the mean layer's, its bytes and reads the shares' mean, its FLOPs at the rate that takes
        the shares' mean time."""
        topo, wb = self.topo, WEIGHT_FORMATS[fmt][0]
        one = (wb, wb * topo.memory_efficiency / topo.weight_memory_efficiency_for(fmt),
               topo.peak_for(fmt) * topo.compute_efficiency_for(fmt))
        if share == 1.0:
            return one
        rest = self._format(self.m.precision.activations)
        return (share * one[0] + (1 - share) * rest[0], share * one[1] + (1 - share) * rest[1],
                1.0 / (share / one[2] + (1 - share) / rest[2]))


def _chunked(k: _Kind, work: Workload, steps):
    """A prefill pass in ``steps`` [G] chunks of a prompt's new tokens (``prefill_steps``) on
    kind ``k``, as a mixed step's chunk (``_Shape``'s mixed branch): each step's mean over the
    chunks of the cache it reads (``kv.chunk_reads``: chunk j its prompt so far, the cached
    prefix and j chunks, a window's at most), of the prompt so far (``prefix``: its indexer
    keys) and of the keys before its queries (``earlier``: MLA up-projects them again). The
    queries attend to the keys they did unchunked (``sel_attn``); rows of one step (steps 1)
    keep the one pass's figures exactly."""
    new, cached = float(work.context - work.cached), float(work.cached)
    size = new / steps                                  # a prompt's tokens a step
    many = steps > 1
    k.sel = np.where(many, size * kv.chunk_reads(k.window, steps, new, cached), k.sel)
    k.prefix = np.where(many, size * kv.chunk_reads(None, steps, new, cached), k.prefix)
    k.earlier = np.where(many, k.sel - size, k.earlier)


def mla_prefill_shape(a):
    """(qk dim, v dim, kv_b FLOPs of K per key, of V per key) of the attention of a step's
    prefill tokens. Dense MLA runs them un-absorbed (vLLM vllm/v1/attention/backends/mla/common.py
    at 00a817ad, module docstring, "_forward_prefill" and "Chunked Prefill"; SGLang
    python/sglang/srt/models/deepseek_common/attention_backend_handler.py, MHA / MHA_CHUNKED_KV):
    kv_b_proj up-projects each key's latent into K_nope (qk_nope) and V (v_head_dim) per head and
    attention is multi-head with qk dim qk_nope + qk_rope and v dim v_head_dim. The step's own
    tokens' up-projection is kv_b in the qkv GEMM (absorbed decode spends the same FLOPs on W_UK
    and W_UV per query); a chunk's earlier context, read from the latent cache, is up-projected
    again each chunk (``_compute_prefill_context``): 2 kv_lora heads qk_nope FLOPs a key for K,
    2 kv_lora heads v_head_dim for V, its weights already read. Decode stays absorbed (MQA over
    the latent: ``_Shape``). Not costed: SGLang runs a chunk whose batch has under 8,192 prefix
    tokens absorbed (SGLANG_CHUNKED_PREFIX_CACHE_THRESHOLD). Sparse MLA (index_topk) runs prefill
    absorbed over its top-k latents (vLLM flashmla_sparse.py, flash_mla_sparse_fwd): None, as
    for GQA, whose prefill and decode shapes are one (the caller keeps its decode shape)."""
    if a.kind != "mla" or a.sparse:
        return None
    up = 2.0 * a.kv_lora_rank * a.heads
    return (a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim,
            up * a.qk_nope_head_dim, up * a.v_head_dim)


def _kind_shape(s: _Shape, k: _Kind, model: ModelSpec):
    """A layer kind's attention shape on ``k``: heads, KV heads (``k_heads``), Q/K and V head
    widths, bytes per token of its K and V caches, the widths out of its qkv projection and
    into its output projection: the model's (``_Shape``) unless ``s.general``, else its own
    (``ModelSpec.kind_attention``: Q of heads x head_dim, K of kv_heads x head_dim, V of
    kv_heads x v_dim unless k_eq_v; o_proj [heads x v_dim, hidden])."""
    if not s.general:
        k.heads, k.k_heads, k.qk_dim, k.v_dim = model.attention.heads, s.k_heads, s.qk_dim, s.v_dim
        k.k_tok, k.v_tok, k.qkv_out, k.ctx_out = s.k_tok, s.v_tok, s.qkv_out, s.ctx_out
        return
    a = model.kind_attention(k.window)
    k.attention = a
    k.heads, k.k_heads, k.qk_dim, k.v_dim = a.heads, float(a.kv_heads), a.head_dim, a.v_dim
    k.k_tok, k.v_tok = kv.kind_token_bytes(model, k.window)
    k.q_out = a.q_out                                                  # with the output gates
    k.qkv_out = k.q_out + a.kv_heads * a.head_dim + (0 if a.k_eq_v else a.kv_heads * a.v_dim)
    k.ctx_out = a.heads * a.v_dim


def grouped_compute(s: _Shape, tokens_per_expert):
    """Achievable FLOP/s of the routed experts' grouped GEMM when each expert's GEMM gets
    ``tokens_per_expert`` rows: the format's peak times the topology's compute efficiency at that
    size, linear in log(tokens per expert) between the measured points and constant outside them
    (``[gpu.grouped_gemm]``: microbenchmarks.csv moe_grouped_gemm rows at 4/64/256/1024 tokens per
    expert, topologies/h100_dgx.toml). A format without a grouped table: its dense rate."""
    _, peak, log_points, compute = s.grouped
    tpe = np.maximum(tokens_per_expert, 1.0)
    return peak * np.interp(np.log(tpe), log_points, compute)


def measured_allreduce(s: _Shape, ranks, nbytes, modelled):
    """An all-reduce over ``ranks`` consecutive GPUs of one node: the measured kernel's time
    (``cost.kernels``: the engine's custom all-reduce, else NCCL's, by GPUs and message bytes)
    where the tables hold it, else ``modelled`` (the alpha-beta cost, ``cost.collectives``);
    one rank: nothing to reduce."""
    if s.kernels is None:
        return modelled
    ranks = np.broadcast_to(np.asarray(ranks, dtype=np.float64), np.shape(modelled))
    inside = (ranks > 1) & (ranks <= s.topo.gpus_per_node)
    if not inside.any():
        return modelled
    t = s.kernels.allreduce(np.maximum(ranks, 2.0), np.maximum(nbytes, 1.0))
    if t is None:
        return modelled
    t = np.broadcast_to(t, np.shape(modelled))
    return np.where(inside & np.isfinite(t), t, modelled)


def _roofline(s: _Shape, flops, nbytes, peak=None):
    compute = flops / (s.peak if peak is None else peak)
    memory = nbytes / s.hbm
    return compute, memory


def roofline_time(compute, memory, exponent: float):
    """Time of a kernel with compute and memory times: max(c, m) (exponent k = 0), or the smooth
    roofline (c^k + m^k)^(1/k): near the ridge a real kernel cannot overlap its loads and its math
    perfectly (microbenchmarks.csv GEMM n=k=8192: at m=256-1024 the hard max is 5-25% fast; k=3
    fits bf16 and fp8 m=1..4096 to 0.048 rms log2 against 0.088 for the max; topology files)."""
    hi = np.maximum(compute, memory)
    if not exponent:
        return hi
    lo = np.minimum(compute, memory)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * (1.0 + ratio ** exponent) ** (1.0 / exponent)   # (c^k + m^k)^(1/k), no overflow


def _gemm(s, rows, k, n, w_total=None, k_frac=1.0, n_frac=1.0, group="attention"):
    """FLOPs, HBM bytes, resident weight bytes of rows x [k, n] with shares k_frac, n_frac, the
    weights in op ``group``'s format (``_Shape.fmt``).

    ``w_total`` overrides k*n*k_frac*n_frac as the per-rank weight element count (GQA/MLA).
    """
    wb, wbr, _ = s.fmt[group]
    w = k * n * k_frac * n_frac if w_total is None else w_total
    flops = 2.0 * rows * w                                     # one multiply-add per weight per row
    nbytes = w * wbr + rows * (k * k_frac + n * n_frac) * s.ab   # weights + activations in/out
    return flops, nbytes, w * wb


def _full(x, shape):
    """x broadcast to ``shape`` (as is when it has that shape: most do, and np.broadcast_to
    costs ~7 us a call, a third of a small build's time)."""
    return x if getattr(x, "shape", None) == shape else np.broadcast_to(x, shape)


class _Builder:
    """Fills the [G, slots, modes] tables."""

    def __init__(self, s: _Shape):
        self.s = s
        G = len(s.tp)
        shape = (G, len(SLOTS), MAX_MODES)
        self.compute = np.zeros(shape)
        self.memory = np.zeros(shape)
        self.time = np.full(shape, np.inf)
        self.intr = np.zeros(shape)
        self.intrinsic = {}
        self.weights = np.zeros(shape)
        self.kv = np.zeros(shape)
        # each group's (ranks, stride) and its link levels, computed once for all collectives
        links = s.topo.engine_links
        self.groups = placement(s.degrees)
        # decode context parallelism's ranks: dcp consecutive ranks of the tp group
        self.groups["dcp"] = (s.dcp, 1.0)
        self.levels = {g: coll.levels(links, *rs) for g, rs in self.groups.items()}
        self.measured_ops = set()      # slots whose time was read from measured kernels
        # what of the context op's held cache is a copy of the scores op's latent (MLA,
        # compressed attention): all of it but where linear layers share the slots
        # (``_fill_attention``); None: the context op's whole held cache
        self.latent_copy = None
        self.expert_load = None        # [G, FFN modes] the MoE FFN's busiest-rank load (I)
        self.moe_read = None           # what the MoE layer's time was read from
        #                                (KernelSet.moe_source)

    def measured(self, slot, mode, t, extra=0.0):
        """Set the op's time to the measured kernel time ``t`` [G] (plus ``extra``: a part the
        tables do not hold, at the roofline) where the tables hold its shape (finite t); the
        roofline stays elsewhere. ``t`` None: no table for this op."""
        if t is None:
            return
        sl = SLOT[slot]
        t = _full(t, self.s.tp.shape)
        ok = np.isfinite(t)
        if ok.any():
            self.time[:, sl, mode] = np.where(ok, t + extra, self.time[:, sl, mode])
            self.measured_ops.add(slot)

    def put(self, slot, mode, flops, nbytes, weights=0.0, cache=0.0, colls=(), launch=True,
            group=None, peak=None):
        """``group``: the op group whose weight format sets the FLOP rate (None: the model's);
        ``peak``: the achievable FLOP/s itself ([G] or a number), in place of the group's."""
        s = self.s
        sl = SLOT[slot]
        if peak is None and group is not None:
            peak = s.fmt[group][2]
        c, m = _roofline(s, _full(flops, s.tp.shape), _full(nbytes, s.tp.shape), peak)
        self.compute[:, sl, mode] = c
        self.memory[:, sl, mode] = m
        self.time[:, sl, mode] = roofline_time(c, m, s.topo.roofline_exponent) + \
            (s.overhead if launch else 0.0)
        self.weights[:, sl, mode] = weights
        self.kv[:, sl, mode] = cache
        total = np.zeros_like(s.tp)
        recs = []
        for kind, group, nb in colls:
            t = self._coll(kind, group, nb)
            total = total + t
            recs.append((kind, group, _full(nb, s.tp.shape).astype(np.float64), t))
        self.intr[:, sl, mode] = total
        self.intrinsic[(sl, mode)] = recs

    def put_kinds(self, slot, mode, parts, cache):
        """An attention op whose cost differs by layer kind, ``parts`` [(share, flops, bytes)]:
        each kind's roofline weighted by its share of the layers (the mean layer of a stage;
        ``kv``), its FLOPs at the attention rate (``_Shape.attn_peak``)."""
        if len(parts) == 1:
            (_, flops, nbytes), = parts
            self.put(slot, mode, flops, nbytes, 0.0, cache, peak=self.s.attn_peak)
            return
        s, sl = self.s, SLOT[slot]
        c = m = t = 0.0
        for share, flops, nbytes in parts:
            ck, mk = _roofline(s, _full(flops, s.tp.shape), _full(nbytes, s.tp.shape),
                               s.attn_peak)
            c, m = c + share * ck, m + share * mk
            t = t + share * roofline_time(ck, mk, s.topo.roofline_exponent)
        self.compute[:, sl, mode], self.memory[:, sl, mode] = c, m
        self.time[:, sl, mode] = t + s.overhead
        self.weights[:, sl, mode] = 0.0
        self.kv[:, sl, mode] = cache
        self.intr[:, sl, mode] = 0.0
        self.intrinsic[(sl, mode)] = []

    def _coll(self, kind, group, nbytes):
        s = self.s
        ranks, stride = self.groups[group]
        # MoE dispatch / combine: every peer at once, at the links' own rates, over ep or, under
        # the `experts` choice, over the tp group (one deployment costed alike however written:
        # tests/test_scheduler.py)
        if kind == "all-to-all" and group in ("ep", "tp"):
            return _full(coll.dispatch(s.topo.links, nbytes, ranks, stride, self.levels[group]),
                         s.tp.shape)
        t = coll.COST[kind](s.topo.engine_links, nbytes, ranks, stride, self.levels[group])
        if kind == "all-reduce" and group == "tp":
            t = measured_allreduce(s, ranks, nbytes, t)
        return _full(t, s.tp.shape)


def _fill_embedding(b: _Builder):
    s = b.s
    v, h = s.m.vocab, s.h
    wb = s.fmt["embedding"][0]
    lookup = s.rows * h * (wb + s.ab)          # read one table row and write it, per token
    b.put("embedding", MODE_DIM0, 0.0, s.rows * h * wb / s.tp + s.rows * h * s.ab,
          v * h * _frac(v, s.tp) * wb)          # vocab-parallel: each rank looks up its own ids
    b.put("embedding", MODE_DIM1, 0.0, lookup * _frac(h, s.tp), v * h * _frac(h, s.tp) * wb)
    b.put("embedding", MODE_NONE, 0.0, lookup, v * h * wb)


def hc_costs(n: int, h: int, final: bool = False) -> tuple:
    """(FLOPs, elements moved, fp32 weights, floats all-reduced under a hidden split) per token
    of one site's hyper-connections (``ModelSpec.hc_mult`` = n > 1; deepseek-ai/DeepSeek-V4-Flash
    inference/model.py Block.hc_pre / hc_post, hc_split_sinkhorn): the pre mixing, [n h] ->
    (2 + n) n mixes (a GEMM), their sigmoids and Sinkhorn (not costed), the n copies summed into
    the sublayer's input (reading the stream twice, writing h); the post mixing, n x n over the
    copies plus the sublayer's output (reading n h + h, writing n h). ``final``: the head's
    collapse of the copies (hc_head: n mixes, the sum). (0, 0, 0, 0) at n = 1."""
    if n == 1:
        return 0.0, 0.0, 0.0, 0.0
    mixes = n if final else (2 + n) * n
    pre_fl, pre_io = 2.0 * mixes * n * h + 3.0 * n * h, 2.0 * n * h + h
    if final:
        return pre_fl, pre_io, float(mixes * n * h), float(mixes)
    return (pre_fl + 2.0 * n * n * h + 2.0 * n * h, pre_io + 2.0 * n * h + h,
            float(mixes * n * h), float(mixes))


def _fill_norm(b: _Builder, slot):
    s = b.s
    h, rows, rows_t, wb = s.h, s.rows, s.rows_t, s.fmt["norm"][0]
    # hyper-connections (hc_costs): each site's mixing beside its norm, replicated on every tp
    # rank (the sublayers see one copy; vLLM and SGLang run mHC unsplit: the research note in
    # docs/design.md §1); on T each rank its own tokens, on F a share of the features with the
    # mixes all-reduced
    hfl, hio, hw, hred = hc_costs(s.m.hc_mult, h, final=slot == "final_norm")
    hw = hw * 4.0                                            # fp32 (hc_fn)
    # attention residuals (ModelSpec.res_rows): each row scored (its RMSNorm and a dot with the
    # point's [hidden] weight) and mixed, ~6 hidden FLOPs and one hidden read a row; under a
    # hidden split each row's score all-reduced
    rows_res = s.m.res_rows(final=slot == "final_norm")
    hfl, hio, hred = hfl + 6.0 * rows_res * h, hio + rows_res * h, hred + rows_res
    # RMSNorm + residual add: read x and residual, write the sum and the normed output
    b.put(slot, MODE_DIM0, (8.0 * h + hfl) * rows_t, (4.0 * h + hio) * rows_t * s.ab,
          h * wb + hw)
    # hidden-split norm: the sum of squares of each token is all-reduced over tp (4 bytes each)
    fh = _frac(h, s.tp)
    b.put(slot, MODE_DIM1, (8.0 * h + hfl) * rows * fh, (4.0 * h + hio) * rows * fh * s.ab,
          (h * wb + hw) * fh, colls=[("all-reduce", "tp", rows * 4.0 * (1.0 + hred))])
    b.put(slot, MODE_NONE, (8.0 * h + hfl) * rows, (4.0 * h + hio) * rows * s.ab, h * wb + hw)


def _fill_gemm(b: _Builder, slot, k, n, col_weights=None, col_out=None, rows=None, rows_t=None,
               dim0_frac=None, group="attention"):
    """A dense GEMM op in its four modes (row, column, none-R, none-T), its weights in op
    ``group``'s format."""
    s = b.s
    rows = s.rows if rows is None else rows
    rows_t = s.rows_t if rows_t is None else rows_t
    fk = _frac(k, s.tp) if dim0_frac is None else dim0_frac
    fl, by, w = _gemm(s, rows, k, n, k_frac=fk, group=group)
    b.put(slot, MODE_DIM0, fl, by, w, group=group)
    if col_weights is None:
        fl, by, w = _gemm(s, rows, k, n, n_frac=_frac(n, s.tp), group=group)
        n_col = n * _frac(n, s.tp)
    else:   # column split with replicated parts (GQA KV heads beyond kv_heads, MLA down-proj.)
        wb, wbr, _ = s.fmt[group]
        w = col_weights
        fl = 2.0 * rows * w
        by = w * wbr + rows * (k + col_out) * s.ab
        w = w * wb
        n_col = col_weights / k
    b.put(slot, MODE_DIM1, fl, by, w, group=group)
    for mode, r in ((MODE_NONE, rows), (MODE_NONE_T, rows_t)):
        fl, by, w = _gemm(s, r, k, n, group=group)
        b.put(slot, mode, fl, by, w, group=group)
    if s.kernels is not None and k * n > 0 and s.m.precision.share_of(group) == 1.0:
        # measured: each mode's GEMM, busiest rank (a partly quantized group: the roofline)
        shape = s.tp.shape
        modes = (MODE_DIM0, MODE_DIM1, MODE_NONE, MODE_NONE_T)
        m_, n_, k_ = (np.stack([_full(x, shape) for x in xs]) for xs in (
            (rows, rows, rows, rows_t), (n, n_col, n, n), (k * fk, k, k, k)))
        t = s.kernels.gemm(s.m.precision.format_of(group), np.maximum(m_, 1.0), n_, k_)
        for i, mode in enumerate(modes):       # one lookup for the four modes
            b.measured(slot, mode, None if t is None else t[i])


def _fill_gemm_kinds(b: _Builder, slot, parts):
    """A GEMM op whose weights differ by layer kind (the sparse-attention indexer's projections
    in the layers that run one), ``parts`` [(share, _fill_gemm's keywords)]: in each mode the
    kinds' times, FLOP and byte rooflines and resident weights weighted by their shares (the mean
    layer of a stage, as ``_Builder.put_kinds``)."""
    sl, modes = SLOT[slot], [MODE_DIM0, MODE_DIM1, MODE_NONE, MODE_NONE_T]
    arrays = (b.compute, b.memory, b.time, b.weights)
    total = None
    for share, kw in parts:
        _fill_gemm(b, slot, **kw)
        cur = [share * x[:, sl, modes] for x in arrays]
        total = cur if total is None else [t + c for t, c in zip(total, cur)]
    for x, t in zip(arrays, total):
        x[:, sl, modes] = t


def _fill_context_parallel(b: _Builder):
    """Context parallelism's exchange (``cp`` > 1, a prefill pass): before attention each layer
    all-gathers the step's new cache entries over the cp group, so every rank attends its
    queries over the whole prompt and holds its cache (vLLM 0.33.0 v1/attention/ops/pcp.py
    ``_gather_prefill_cache_inputs``: the new K/V, MLA's latent and rope key, all-gathered before
    the cache write; SGLang 0.5.23 layers/cp/zigzag.py ``materialize_full_kv``; neither engine
    passes KV around a ring). The gathered bytes: cp times a rank's own tokens' entries, in the
    layout the scores op reads them (K and V split by KV heads under the heads split, by head
    dim under the head-dim split, whole otherwise; a latent, a compressed entry and an indexer
    key whole), charged with the scores op in each of its modes (the breakdown names it:
    all-gather over cp)."""
    s = b.s
    if not (s.cp > 1).any():
        return
    sl = SLOT["scores"]
    shared = s.m.attention.kind == "mla" or s.m.attention.compressed     # one entry, K = V
    for mode in range(len(SLOT_MODES["scores"])):
        if (sl, mode) not in b.intrinsic:
            continue
        per_tok = 0.0
        for k in s.kinds:
            kh = float(k.k_heads)
            split = {MODE_DIM0: _frac(kh, s.tp) if kh > 1 else 1.0,
                     MODE_DIM1: _frac(float(k.qk_dim), s.tp)}.get(mode, 1.0)
            per_tok = per_tok + k.share * (split * (k.k_tok + (0.0 if shared else k.v_tok))
                                           + s.idx_tok * k.index)
        rows = s.rows_t if mode == MODE_NONE_T else s.rows
        nb = np.where(s.cp > 1, rows * per_tok * s.cp, 0.0)
        t = b._coll("all-gather", "cp", nb)
        b.intr[:, sl, mode] = b.intr[:, sl, mode] + t
        b.intrinsic[(sl, mode)] = b.intrinsic[(sl, mode)] + [
            ("all-gather", "cp", _full(nb, s.tp.shape).astype(np.float64), t)]


def _fill_softmax_kinds(b: _Builder):
    """The softmax-attention ops of a gqa model whose layer kinds have their own shapes
    (``_Shape.general``): each kind's qkv and output projections (``_fill_gemm_kinds``), scores
    and context (``put_kinds``) in its own shape, weighted by its share of the layers, split as
    ``_fill_softmax`` splits one shape (Q by heads, K and V by KV heads, replicated beyond them;
    o_proj rows by heads)."""
    s = b.s
    m, h = s.m, s.h
    parts = []
    for k in s.kinds:
        qkv_w = attention_params(m, k.attention)["qkv"]
        q_w = h * k.q_out
        heads = float(k.heads)
        col_w = q_w * _frac(heads, s.tp) + (qkv_w - q_w) * _frac(k.k_heads, s.tp)
        col_out = k.q_out * _frac(heads, s.tp) + (k.qkv_out - k.q_out) * _frac(k.k_heads, s.tp)
        parts.append((k.share, dict(k=h, n=qkv_w / h, col_weights=col_w, col_out=col_out)))
    _fill_gemm_kinds(b, "qkv", parts)

    def attn(slot, dim_of, tok_of):
        for mode in (MODE_DIM0, MODE_DIM1, MODE_NONE, MODE_NONE_T):
            parts, held = [], 0.0
            for k in s.kinds:
                heads, dim, cache_tok, kh = float(k.heads), dim_of(k), tok_of(k), k.k_heads
                seqs, ffl, fcache = {
                    MODE_DIM0: (s.seqs, _frac(heads, s.tp), _frac(kh, s.tp) if kh > 1 else 1.0),
                    MODE_DIM1: (s.seqs, _frac(dim, s.tp), _frac(dim, s.tp)),
                    MODE_NONE: (s.seqs, 1.0, 1.0),
                    MODE_NONE_T: (s.seqs_t, 1.0, 1.0)}[mode]
                per_seq_io = s.tps * heads * dim * s.ab * 2            # query in, result out
                fl = seqs * 2.0 * heads * dim * k.sel_attn * s.tps * ffl
                by = seqs * (k.sel * cache_tok * fcache + per_seq_io * ffl)
                if s.chunk is not None:   # mixed step: the prefill chunk's queries, cache reads
                    ch = s.chunk_t if mode == MODE_NONE_T else s.chunk
                    fl = fl + ch * 2.0 * heads * dim * k.chunk_sel * ffl
                    by = by + ch * (k.chunk_read * cache_tok * fcache + heads * dim * s.ab * 2 * ffl)
                parts.append((k.share, fl, by))
                # every stage holds the cache of all pp micro-batches in flight
                held = held + k.share * s.pp * seqs * k.ctx * cache_tok * fcache
            b.put_kinds(slot, mode, parts, held)

    attn("scores", lambda k: k.qk_dim, lambda k: k.k_tok)
    attn("context", lambda k: k.v_dim, lambda k: k.v_tok)
    _fill_gemm_kinds(b, "out_proj", [(k.share, dict(k=k.ctx_out, n=h,
                                                    dim0_frac=_frac(float(k.heads), s.tp)))
                                     for k in s.kinds])


def _dcp_shares(s: _Shape, heads: float, kh: float) -> tuple:
    """(share of the attention FLOPs, of the cache) on the busiest rank under the heads split
    with decode context parallelism: heads over the tp/dcp rank groups, each group's cache split
    by tokens over its dcp ranks, each rank attending the gathered queries of its group's heads
    over its tokens (vLLM 0.33.0 v1/attention/backends/flash_attn.py ``_forward_with_dcp``, the
    MLA backends alike; SGLang 0.5.23 configs/model_config.py ``get_num_kv_heads``: "heads shard
    across tp // dcp groups"). At dcp = 1 the plain heads split's shares."""
    g = np.maximum(s.tp / s.dcp, 1.0)          # a dcp that does not divide tp: refused
    fkv = _frac(kh, g) if kh > 1 else 1.0
    return _frac(heads, g) / s.dcp, fkv / s.dcp


def _fill_decode_context_parallel(b: _Builder):
    """Decode context parallelism's exchange (``dcp`` > 1, a decode or mixed step, the heads
    split): each layer all-gathers the queries of the group's heads over the dcp ranks and their
    log-sum-exp (fp32), and reduce-scatters the partial outputs back to each rank's heads (vLLM
    0.33.0 ``--dcp-comm-backend ag_rs``, its default: v1/attention/ops/dcp.py
    ``cp_lse_ag_out_rs``; SGLang 0.5.23 layers/dcp/comm.py the same three calls); the queries
    and the LSE charged with the scores op, the outputs with the context op. A mixed step's
    prefill chunk attends its prompt's earlier cache all-gathered over the dcp ranks (vLLM
    model_executor/layers/attention/mla_attention.py ``MLADCPManager.kv_gather``; SGLang
    ``all_gather_kv_cache_for_mla_extend``), charged with the scores op too."""
    s = b.s
    if not (s.dcp > 1).any() or s.work.phase == "prefill":
        return
    a = s.m.attention
    heads, kh = float(a.heads), float(s.k_heads)
    g = np.maximum(s.tp / s.dcp, 1.0)
    on = s.dcp > 1
    hq = heads * _frac(heads, g)                       # a rank's heads after the gather
    rows = s.seqs * s.tps                              # the decoding queries
    parts = {"scores": [("all-gather", rows * hq * s.qk_dim * s.ab),
                        ("all-gather", rows * hq * 4.0)],
             "context": [("reduce-scatter", rows * hq * s.v_dim * s.ab)]}
    if s.chunk is not None:
        fkv = _frac(kh, g) if kh > 1 else 1.0
        earlier = sum(k.share * np.maximum(k.chunk_read - 1.0, 0.0) for k in s.kinds)
        parts["scores"].append(("all-gather", s.chunk * earlier * s.k_tok * fkv))
    for slot, colls in parts.items():
        sl = SLOT[slot]
        for kind, nb in colls:
            nb = np.where(on, nb, 0.0)
            t = b._coll(kind, "dcp", nb)
            b.intr[:, sl, MODE_DIM0] = b.intr[:, sl, MODE_DIM0] + t
            b.intrinsic[(sl, MODE_DIM0)] = b.intrinsic[(sl, MODE_DIM0)] + [
                (kind, "dcp", _full(nb, s.tp.shape).astype(np.float64), t)]


def dcp_costed(model: ModelSpec) -> bool:
    """Whether lts costs decode context parallelism for this model's token mixer: softmax
    attention of one shape in every layer, full (no window), MLA or gqa, neither compressed nor
    block-sparse, no linear-attention layers (the engines' DCP backends: vLLM 0.33.0 FlashAttention
    and the MLA backends; a window's or a recurrent state's split is not costed)."""
    a = model.attention
    return (not a.compressed and not a.block_sparse and model.linear_layers == 0
            and model.bare_layers == 0
            and not (a.kind == "gqa" and bool(a.kinds or a.v_head_dim or a.k_eq_v))
            and all(w is None for (w, _), _ in model.attention_kinds))


def _fill_softmax(b: _Builder):
    """The softmax-attention layers' ops (``_fill_attention``)."""
    s = b.s
    if s.general:
        _fill_softmax_kinds(b)
        return
    m, a = s.m, s.m.attention
    heads = float(a.heads)
    # --- QKV projection
    qkv_w = attention_params(m)["qkv"]
    # the indexer's projections in the layers that run one: (weights, the weights a rank of the
    # column split holds, its outputs there); each kind its own GEMM, weighted by its share
    idx = None
    if a.kind == "mla":
        # column split over heads: q_b and kv_b split by heads; q_a, kv_a replicated (vLLM MLA)
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        down = s.h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim)
        up = qkv_w - down
        col_w = down + up * _frac(heads, s.tp)
        col_out = (heads * (qk + a.output_gate * a.v_head_dim)) * _frac(heads, s.tp) \
            + a.kv_lora_rank + a.qk_rope_head_dim
        if a.sparse:   # replicated (vLLM 0.11 deepseek_v2.py Indexer: ReplicatedLinear wq_b,
            # wk, weights_proj): its queries, its key and head weights
            w = attention_params(m)["indexer"]
            idx = (w, w, a.index_heads * a.index_head_dim + a.index_head_dim + a.index_heads)
    else:
        q_w = s.h * a.q_out                                               # with the gates
        col_w = q_w * _frac(heads, s.tp) + (qkv_w - q_w) * _frac(a.kv_heads, s.tp)
        col_out = a.q_out * _frac(heads, s.tp) \
            + 2 * a.kv_heads * a.head_dim * _frac(a.kv_heads, s.tp)
        if a.block_sparse:   # MiniMax-M3's index_q split by index heads, index_head_dim each, as
            # the KV heads (max(1, index_heads / tp) a rank: SGLang v0.5.16 minimax_m3.py, as
            # ai-dynamo/aiconfigurator 095f58a5 collector/sglang/collect_msa_module.py quotes
            # it), its one index key replicated
            d, fi = a.index_head_dim, _frac(float(a.index_heads), s.tp)
            w = attention_params(m)["indexer"]
            q = s.h * a.index_heads * d
            idx = (w, q * fi + (w - q), a.index_heads * d * fi + d)
    if idx is None:
        _fill_gemm(b, "qkv", s.h, qkv_w / s.h, col_weights=col_w, col_out=col_out)
    else:
        w, w_col, out = idx
        _fill_gemm_kinds(b, "qkv", [(k.share, dict(
            k=s.h, n=(qkv_w + w * k.index) / s.h, col_weights=col_w + w_col * k.index,
            col_out=col_out + out * k.index)) for k in s.kinds])

    # --- scores Q.K^T (reads the K cache) and context P.V (reads the V cache)
    prefill = s.work.phase == "prefill"

    def attn(slot, dim, cache_tok, modes, pre_dim, up, index=False):
        # index: the sparse-attention indexer runs with this op (scores), replicated over the
        # tp ranks (vLLM's Indexer; a block-sparse one split by its heads when the heads are,
        # its one key whole on every rank): its FLOPs over every held key, its key cache read
        # and held.
        # The prefill tokens (a prefill step's, a mixed step's chunk) attend with head dim
        # pre_dim; a chunk's earlier keys are up-projected again at ``up`` FLOPs a key, their
        # K or V written and read once (mla_prefill_shape: MLA un-absorbed; else dim and 0)
        up_io = up / (2.0 * max(a.kv_lora_rank, 1)) * s.ab * 2
        for mode, (seqs, ffl, fpre, fcache) in modes.items():
            sdim, sfl = (pre_dim, fpre) if prefill else (dim, ffl)
            per_seq_io = s.tps * heads * sdim * s.ab * 2           # query in, result out
            fidx = _frac(float(a.index_heads), s.tp) if a.block_sparse and mode == MODE_DIM0 \
                else 1.0
            parts, held = [], 0.0
            for k in s.kinds:        # each layer kind (full, a window), weighted by its share
                idx_tok = s.idx_tok if index and k.index else 0.0
                idx_fl = s.idx_flops * fidx if index and k.index else 0.0
                per_seq_flops = 2.0 * heads * sdim * k.sel_attn * s.tps
                per_seq_read = k.sel * cache_tok                   # the cache read once per step
                fl = seqs * per_seq_flops * sfl + seqs * idx_fl * k.ctx_attn * s.tps
                by = seqs * (per_seq_read * fcache + per_seq_io * sfl) + seqs * k.prefix * idx_tok
                if prefill and (s.work.cached or s.work.step_tokens):
                    # the keys before the step's queries (a cached prefix, earlier chunks),
                    # up-projected again
                    fl = fl + seqs * k.earlier * up * fpre
                    by = by + seqs * k.earlier * up_io * fpre
                if s.chunk is not None:   # mixed step: the prefill chunk's queries, cache reads
                    ch = s.chunk_t if mode == MODE_NONE_T else s.chunk
                    earlier = ch * np.maximum(k.chunk_read - 1.0, 0.0)   # keys before the chunk
                    fl = fl + ch * 2.0 * heads * pre_dim * k.chunk_sel * fpre \
                        + ch * idx_fl * k.chunk_keys + earlier * up * fpre
                    # (under dcp the chunk reads its prompt's cache gathered whole over the
                    # dcp ranks: ``_fill_decode_context_parallel``)
                    fch = fcache * s.dcp if mode == MODE_DIM0 else fcache
                    by = by + ch * (k.chunk_read * cache_tok * fch
                                    + heads * pre_dim * s.ab * 2 * fpre) \
                        + ch * k.chunk_read * idx_tok + earlier * up_io * fpre
                parts.append((k.share, fl, by))
                # every stage holds the cache of all pp micro-batches in flight, not only one
                one = s.pp * seqs * k.ctx * cache_tok * fcache + s.pp * seqs * k.ctx * idx_tok
                held = one if len(s.kinds) == 1 else held + k.share * one
            b.put_kinds(slot, mode, parts, held)

    kh = s.k_heads
    fdim_k = _frac(s.qk_dim, s.tp) if a.kind == "mla" else _frac(a.head_dim, s.tp)
    fh = _frac(heads, s.tp)
    # per mode: (sequences, share of the FLOPs, of the prefill tokens' FLOPs, of the cache) on
    # the busiest rank; under the heads split with dcp > 1 the decode share and the cache's
    # are ``_dcp_modes``'s
    fkv = _frac(kh, s.tp) if kh > 1 else 1.0
    fh_d, fkv_d = _dcp_shares(s, heads, kh)
    attn("scores", s.qk_dim, s.k_tok, {
        MODE_DIM0: (s.seqs, fh_d, fh, fkv_d),                                          # heads
        MODE_DIM1: (s.seqs, _frac(s.qk_dim, s.tp), _frac(s.pre_qk_dim, s.tp), fdim_k),  # head dim
        MODE_NONE: (s.seqs, 1.0, 1.0, 1.0),
        MODE_NONE_T: (s.seqs_t, 1.0, 1.0, 1.0)}, s.pre_qk_dim, s.up_k,
         index=a.sparse or a.block_sparse)
    fdim_v = _frac(s.v_dim, s.tp)
    attn("context", s.v_dim, s.v_tok, {
        MODE_DIM0: (s.seqs, fh_d, fh, fkv_d),
        MODE_DIM1: (s.seqs, fdim_v, _frac(s.pre_v_dim, s.tp), fdim_v),
        MODE_NONE: (s.seqs, 1.0, 1.0, 1.0),
        MODE_NONE_T: (s.seqs_t, 1.0, 1.0, 1.0)}, s.pre_v_dim, s.up_v)
    if s.kernels is not None and a.kind == "gqa" and not a.block_sparse:
        _attention_measured(b)
    # --- output projection [heads*v_dim, hidden]: row split by heads
    _fill_gemm(b, "out_proj", s.ctx_out, s.h, dim0_frac=_frac(heads, s.tp))


def _attention_measured(b: _Builder):
    """Softmax attention (scores and context together: one kernel) from the measured decode
    and prefill attention tables, in the modes an engine runs: heads split over tp (each rank
    its heads and KV heads; a KV head of fewer than tp ranks replicated), and the `none` modes
    (all heads; on T each rank its own sequences). Each layer kind (full, a window) by its own
    row, weighted by its share. Decode reads the ``gen`` table at the held context; a prefill
    the ``ctx`` table at the prompt's length; a mixed step's chunk is its share (chunk / prompt)
    of its prompt's whole prefill attention (with a cached prefix, of its new tokens' share).
    The head-dim split (not an engine's) keeps the roofline, as do shapes for which no table
    of the KV dtype, head dim and window exists; the time is split between the two slots as
    their rooflines split it."""
    s = b.s
    a, ks, w = s.m.attention, s.kernels, s.work
    if any(k.window is not None and not isinstance(k.window, (int, float)) for k in s.kinds):
        return                # chunked local attention: not in the tables
    # a prompt of T tokens whose first P are cached (prefix caching): its new queries' share of
    # the whole prompt's prefill attention, (T^2 - P^2) / T^2 under full attention (query i
    # attends to i keys), (T - P) / T under a window (each to about the window)
    whole = float(max(w.context if w.phase == "prefill" else w.isl, 1))
    cached = float(min(w.cached, whole - 1.0))
    kv_dtype = s.m.precision.kv_cache
    heads, kvh = float(a.heads), float(a.kv_heads)
    decode = w.phase in ("decode", "mixed")
    # the heads split with dcp > 1 (``_dcp_shares``): a rank's group's heads and KV heads over
    # its share of the cache (decode: the gen table at context / dcp); its chunk as without
    one = np.ones_like(s.tp)
    g = np.maximum(s.tp / s.dcp, 1.0)
    for mode, (hr, kr, seqs, chunk, d) in {
            MODE_DIM0: (np.ceil(heads / g), np.ceil(kvh / g), s.seqs, s.chunk, s.dcp),
            MODE_NONE: (np.full_like(s.tp, heads), np.full_like(s.tp, kvh), s.seqs, s.chunk,
                        one),
            MODE_NONE_T: (np.full_like(s.tp, heads), np.full_like(s.tp, kvh), s.seqs_t,
                          s.chunk_t if s.chunk is not None else None, one)}.items():
        hc, kc = (np.ceil(heads / s.tp), np.ceil(kvh / s.tp)) if mode == MODE_DIM0 else (hr, kr)
        total = np.zeros_like(s.tp)
        ok = np.ones(s.tp.shape, dtype=bool)
        for k in s.kinds:
            win = 0 if k.window is None else int(k.window)
            new_share = (1.0 - (cached / whole) ** 2) if not win else 1.0 - cached / whole
            t = np.zeros_like(s.tp)
            for h_, k_, d_, hc_, kc_ in {tuple(map(float, x)) for x in zip(hr, kr, d, hc, kc)}:
                sel = (hr == h_) & (kr == k_) & (d == d_) & (hc == hc_) & (kc == kc_)
                if decode:
                    r = ks.attention("gen", kv_dtype, h_, k_, a.head_dim, win,
                                     np.maximum(seqs[sel], 1.0), k.ctx / d_)
                else:
                    r = ks.attention("ctx", kv_dtype, h_, k_, a.head_dim, win,
                                     np.maximum(seqs[sel], 1.0), whole)
                    # (a chunked pass: each step its share, ``_Shape.steps``)
                    r = None if r is None else r * new_share / s.steps[sel]
                if r is None:
                    return
                part = np.where(seqs[sel] > 0, r, 0.0)
                if chunk is not None:   # the chunk's share of its prompt's new tokens
                    c = ks.attention("ctx", kv_dtype, hc_, kc_, a.head_dim, win, 1.0, whole)
                    if c is None:
                        return
                    part = part + c * new_share * chunk[sel] / (whole - cached)
                t[sel] = part
            ok &= np.isfinite(t)
            total = total + k.share * t
        sc, cx = b.time[:, SLOT["scores"], mode], b.time[:, SLOT["context"], mode]
        share = sc / np.maximum(sc + cx, 1e-30)
        total = np.where(ok, total, np.nan)
        b.measured("scores", mode, total * share)
        b.measured("context", mode, total * (1.0 - share))


# Gated DeltaNet (Yang, Kautz, Hatamizadeh, arXiv 2412.06464; the fla kernels vLLM and SGLang
# run: fla/ops/gated_delta_rule chunk.py and fused_recurrent.py). Per token and value head, with
# state S [key_head_dim dk, value_head_dim dv]:
# - decode, the recurrent form: decay S (dk dv), S^T k (2 dk dv), the rank-one update
#   k (beta (v - S^T k))^T (2 dk dv), the output S^T q (2 dk dv): 7 dk dv FLOPs; the state read
#   and written once per step;
# - prefill, the chunkwise form over chunks of C = 64 tokens (chunk_gated_delta_rule, BT = 64):
#   the three products with a chunk's state (W S, Q S, K^T U: 6 dk dv) and within the chunk
#   K K^T, Q K^T (2 C dk each), W = T K, U = T V (2 C (dk + dv)), the masked scores times U
#   (2 C dv) and the triangular solve for T (C^2 / 3): 6 dk dv + C (6 dk + 4 dv) + C^2 / 3, linear
#   in the prompt's length; each chunk's state written and read once (2 state / C per token).
DELTA_CHUNK = 64


def delta_rule_flops(g, prefill: bool) -> float:
    """FLOPs of the delta rule per token and value head (above) for a ``LinearAttentionSpec``."""
    dk, dv = float(g.key_head_dim), float(g.value_head_dim)
    if not prefill:
        return 7.0 * dk * dv
    c = float(DELTA_CHUNK)
    return 6.0 * dk * dv + c * (6.0 * dk + 4.0 * dv) + c * c / 3.0


# Mamba-2 (Dao and Gu, arXiv 2405.21060, SSD; the mamba_ssm Triton kernels vLLM and SGLang run:
# mamba_ssm/ops/triton/selective_state_update.py and ssd_combined.py). Per token and head, with
# state h [head_dim P, state_size N]:
# - decode, the recurrent form (selective_state_update): decay h (P N), add dt x B^T (2 P N),
#   the output h C (2 P N): 5 P N FLOPs; the state read and written once per step;
# - prefill, the chunked SSD algorithm (§6, "SSD algorithm", and ssd_combined: _bmm_chunk,
#   _chunk_state, _state_passing, _chunk_scan) over chunks of Q = chunk_size tokens: within a
#   chunk C B^T (2 Q N a token and group), the masked scores times X (2 Q P a token and head),
#   each chunk's state B^T X (2 P N) and the output from the previous states C h (2 P N): linear
#   in the prompt's length; each chunk's state written and read once (2 state / Q per token).


def ssd_flops(g, prefill: bool) -> float:
    """FLOPs of the Mamba-2 SSM per token over all heads (above) for a ``Mamba2Spec``."""
    p, n, nh = float(g.head_dim), float(g.state_size), float(g.heads)
    if not prefill:
        return nh * 5.0 * p * n
    q = float(g.chunk_size)
    return nh * (4.0 * p * n + 2.0 * q * p) + g.groups * 2.0 * q * n


def _fill_linear(b: _Builder):
    """The linear-attention (Gated DeltaNet) or Mamba-2 layers' ops in the attention slots: qkv
    the input projections (in_proj_qkvz + in_proj_ba; Mamba-2's in_proj), scores the delta rule
    or the SSM (holding the recurrent state), context the causal conv1d and the gated norm
    (holding the conv state), out_proj. Under tp the heads split like qkv/out_proj's (vLLM's
    ColumnParallelLinear in_proj_qkvz / in_proj_ba, RowParallelLinear out_proj): the key heads'
    q, k, the value heads' v, z, b, a; Mamba-2's heads their z, x, dt and the groups their B, C
    (MambaMixer2: a single group replicated on every rank)."""
    s = b.s
    g, h = s.m.linear, s.h
    ab = s.ab
    if isinstance(g, Mamba2Spec):
        fv = _frac(float(g.heads), s.tp)
        fg = _frac(float(g.groups), s.tp)
        col_out = (2 * g.intermediate + g.heads) * fv + g.group_dim * fg
        nv, dv, width = float(g.heads), float(g.head_dim), float(g.intermediate)
        fl_tok, pf_tok = ssd_flops(g, False), ssd_flops(g, True)
        io_tok = (2 * g.intermediate + g.group_dim + g.heads) * ab   # x, B, C, dt in; y out
        chunk_len = float(g.chunk_size)
    else:
        # the input projections by key heads, by value heads and replicated (in_proj); KDA's
        # chunked recurrence costs Gated DeltaNet's (delta_rule_flops: the same products a head;
        # its decay per key channel is a scale of them, not costed)
        fk, fv = _frac(float(g.key_heads), s.tp), _frac(float(g.value_heads), s.tp)
        ins = g.in_proj(h)
        col_out = ins["key"][1] * fk + ins["value"][1] * fv + ins["repl"][1]
        col_w = ins["key"][0] * fk + ins["value"][0] * fv + ins["repl"][0]
        nv, dv, width = float(g.value_heads), float(g.value_head_dim), float(g.value_dim)
        fl_tok = nv * delta_rule_flops(g, prefill=False)                 # a decoding token
        pf_tok = nv * delta_rule_flops(g, prefill=True)                  # a prompt token
        # q, k, v, the gate, beta and the decay in (the low-rank intermediates not); o out
        io_tok = (s.lin_qkv_out - ins["repl"][1]) * ab
        chunk_len = float(DELTA_CHUNK)
    # Mamba-2's projections in the "ssm" group's format, Gated DeltaNet's in attention's
    group = "ssm" if isinstance(g, Mamba2Spec) else "attention"
    if isinstance(g, Mamba2Spec):
        col_w, n = h * col_out, s.lin_qkv_out
    else:
        n = sum(w for w, _ in ins.values()) / h
    _fill_gemm(b, "qkv", h, n, col_weights=col_w, col_out=col_out, group=group)
    rec, conv = kv.state_bytes(s.m)
    decode = s.work.phase in ("decode", "mixed")
    conv_fl = 2.0 * g.conv_kernel * g.conv_channels                  # depthwise taps per token
    # conv1d in and out, the gated norm's o and z in, its output out
    conv_io = (2 * g.conv_channels + 3 * width) * ab

    def per_seq(tok_fl, state, tok_io, tok_extra_fl, chunked):
        """(FLOPs, bytes) of one sequence's step: s.tps tokens; a decode step reads and writes
        ``state``, a prefill writes its final state (and, ``chunked``, each chunk's state: 2
        state / C a token)."""
        fl = s.tps * (tok_fl + tok_extra_fl)
        if decode:
            return fl, 2.0 * state + s.tps * tok_io
        # (a prefill in several steps reads and writes it in each: ``_Shape.steps``)
        return fl, state * np.where(s.steps > 1, 2.0, 1.0) \
            + s.tps * (tok_io + chunked * 2.0 * state / chunk_len)

    fdv = _frac(dv, s.tp)
    modes = {MODE_DIM0: (s.seqs, fv), MODE_DIM1: (s.seqs, fdv), MODE_NONE: (s.seqs, 1.0),
             MODE_NONE_T: (s.seqs_t, 1.0)}     # heads; value head dim; whole; own sequences
    for slot, tok_fl, state, tok_io, extra in (
            ("scores", fl_tok if decode else pf_tok, rec, io_tok, 0.0),
            ("context", 0.0, conv, conv_io, conv_fl)):
        for mode, (seqs, fr) in modes.items():
            chunked = slot == "scores"
            fl, by = per_seq(tok_fl, state, tok_io, extra, chunked)
            fl, by = seqs * fl * fr, seqs * by * fr
            if s.chunk is not None:   # mixed step: the prefill chunk's tokens, its prompt's state
                ch = s.chunk_t if mode == MODE_NONE_T else s.chunk    # read and written once
                fl = fl + ch * ((pf_tok if slot == "scores" else 0.0) + extra) * fr
                by = by + (ch * (tok_io + chunked * 2.0 * state / chunk_len)
                           + 2.0 * state) * fr
            # every stage holds the state of all pp micro-batches in flight
            b.put(slot, mode, fl, by, 0.0, s.pp * seqs * state * fr, peak=s.attn_peak)
    _fill_gemm(b, "out_proj", s.lin_ctx_out, h, dim0_frac=fv, group=group)


def _fill_compressed(b: _Builder):
    """DeepSeek-V4's compressed attention (kv module docstring), each layer kind (the window
    alone, CSA, HCA) in its own share of the layers (deepseek-ai/DeepSeek-V4-Flash
    inference/model.py Attention, Compressor, Indexer; vllm-project/vllm commit 0484480b
    vllm/models/deepseek_v4/attention.py for what the engines split):
    - qkv: wq_a, wkv, the compressor's wkv/wgate and the indexer's wq_b, weights_proj and
      compressor replicated on every tp rank (vLLM fused_wqa_wkv disable_tp, the indexer
      "replicated"), wq_b split by heads;
    - scores and context: MQA of every head over the one entry per key (the window's and the
      compressed entries a query attends to, ``_Kind.sel_attn``), 2 heads head_dim FLOPs a key
      each; the step reads its entries once (the scores op; the context op reuses them: one
      sparse kernel), and a CSA layer's indexer scores every compressed entry (2 index_heads
      index_head_dim FLOPs each, its key cache read and held) beside the scores;
    - out_proj: the grouped low-rank output, wo_a (one [heads head_dim / o_groups, o_lora_rank]
      a group) then wo_b [o_groups o_lora_rank, hidden], both split by groups under the heads'
      split (row: partial sums, all-reduced as Megatron's o_proj), whole otherwise.
    The compression's pooling (a softmax over r c tokens a compressed entry) is not costed."""
    s = b.s
    m, a, h = s.m, s.m.attention, s.h
    heads, hd = float(a.heads), float(a.head_dim)
    fh = _frac(heads, s.tp)
    core = attention_params(m)
    down = h * (a.q_lora_rank + a.head_dim)                  # wq_a, wkv: replicated
    up = a.q_lora_rank * a.heads * a.head_dim                 # wq_b: by heads
    parts = []
    for k in s.kinds:
        extra = sum(compressor_params(m, k.window.ratio).values()) \
            if isinstance(k.window, Compressed) else 0
        qkv_w = core["qkv"] + extra
        col_w = qkv_w - up + up * fh          # wq_b by heads, the rest (norms too) replicated
        parts.append((k.share, dict(k=h, n=qkv_w / h, col_weights=col_w,
                                    col_out=heads * hd * fh + hd)))
    _fill_gemm_kinds(b, "qkv", parts)
    prefill = s.work.phase == "prefill"
    fkv = {MODE_DIM0: 1.0, MODE_DIM1: _frac(hd, s.tp), MODE_NONE: 1.0, MODE_NONE_T: 1.0}
    frs = {MODE_DIM0: (s.seqs, fh), MODE_DIM1: (s.seqs, _frac(hd, s.tp)),
           MODE_NONE: (s.seqs, 1.0), MODE_NONE_T: (s.seqs_t, 1.0)}
    for slot in ("scores", "context"):
        reads = slot == "scores"
        for mode, (seqs, fr) in frs.items():
            parts, held = [], 0.0
            for k in s.kinds:
                idx = reads and isinstance(k.window, Compressed) and bool(k.window.topk)
                fl = seqs * s.tps * 2.0 * heads * hd * k.sel_attn * fr
                by = seqs * s.tps * heads * hd * s.ab * 2 * fr            # query in, result out
                if reads:
                    by = by + seqs * k.sel * s.k_tok * fkv[mode]
                if idx:       # the indexer: its scores of every compressed entry, its keys
                    fl = fl + seqs * s.tps * s.idx_flops * k.idx
                    by = by + seqs * np.floor(k.prefix / k.window.ratio) * s.idx_tok
                if s.chunk is not None:   # mixed step: the prefill chunk's queries and reads
                    ch = s.chunk_t if mode == MODE_NONE_T else s.chunk
                    fl = fl + ch * 2.0 * heads * hd * k.chunk_sel * fr
                    by = by + ch * heads * hd * s.ab * 2 * fr
                    if reads:
                        by = by + ch * k.chunk_read * s.k_tok * fkv[mode]
                    if idx:
                        fl = fl + ch * s.idx_flops * k.chunk_idx
                parts.append((k.share, fl, by))
                # every stage holds the entries (a CSA layer's index keys, the compressor's
                # state) of all pp micro-batches in flight: the scores op holds them, the
                # context op shares them
                state = kv.compressor_state_bytes(m, k.window.ratio) \
                    if isinstance(k.window, Compressed) else 0.0
                one = s.pp * seqs * (k.ctx * s.k_tok + state) * fkv[mode]
                if idx:
                    one = one + s.pp * seqs * np.floor(k.ctx_full / k.window.ratio) * s.idx_tok
                held = held + k.share * one
            b.put_kinds(slot, mode, parts, held)
    # --- the grouped low-rank output projection
    g, r = float(a.o_groups), float(a.o_lora_rank)
    w_a, w_b = heads * hd * r, g * r * h
    fg = _frac(g, s.tp)
    wb, wbr, _ = s.fmt["attention"]
    for mode, (rows, fr, fin, fout) in {
            MODE_DIM0: (s.rows, fg, fh, 1.0),          # by groups: partial sums of hidden
            MODE_DIM1: (s.rows, None, 1.0, None),      # hidden split: wo_b's columns
            MODE_NONE: (s.rows, 1.0, 1.0, 1.0), MODE_NONE_T: (s.rows_t, 1.0, 1.0, 1.0)}.items():
        if fr is None:
            fh_ = _frac(float(h), s.tp)
            w = w_a + w_b * fh_
            io = rows * (heads * hd + h * fh_) * s.ab
        else:
            w = (w_a + w_b) * fr
            io = rows * (heads * hd * fin + h * fout) * s.ab
        b.put("out_proj", mode, 2.0 * rows * w, w * wbr + io + rows * g * r * s.ab, w * wb,
              group="attention")


_MIXER_SLOTS = ("qkv", "scores", "context", "out_proj")
_MIXER_ARRAYS = ("compute", "memory", "time", "weights", "kv", "intr")


def _fill_attention(b: _Builder):
    """Each layer's token mixer: softmax attention, or, in a model with linear-attention layers,
    the mean of the two kinds weighted by their shares of the layers (each op's roofline time,
    weights and held state; the mean layer of a stage, as ``put_kinds``)."""
    s = b.s
    if s.m.attention.compressed:
        _fill_compressed(b)
        return
    if not s.lin_share and not s.bare_share:
        _fill_softmax(b)
        return
    sl = [SLOT[x] for x in _MIXER_SLOTS]
    acc = {}
    for share, fill in ((1.0 - s.lin_share - s.bare_share, _fill_softmax),
                        (s.lin_share, _fill_linear)):
        if not share:
            continue
        fill(b)
        if fill is _fill_softmax:
            # the attention layers' copy of a latent in the context op (``kv_layer``): the
            # linear layers' conv state there is no copy
            b.latent_copy = share * b.kv[:, SLOT["context"], :4]
        for name in _MIXER_ARRAYS:
            part = share * getattr(b, name)[:, sl]
            acc[name] = part if name not in acc else acc[name] + part
    for name in _MIXER_ARRAYS:
        getattr(b, name)[:, sl] = acc[name]
    if s.bare_share:     # no attn_norm in a layer without a mixer (DeciLM's no_op attention)
        _scale_slot(b, "attn_norm", 1.0 - s.bare_share)


def _scale_slot(b: _Builder, slot, share):
    """An op that ``share`` of the layers run: its costs, weights and collectives (and their
    records) that share of the mean layer's."""
    sl = SLOT[slot]
    for name in _MIXER_ARRAYS:
        getattr(b, name)[:, sl] *= share
    for key in [k for k in b.intrinsic if k[0] == sl]:
        b.intrinsic[key] = [(kind, group, nb, t * share) for kind, group, nb, t in b.intrinsic[key]]


def _fill_empty(b: _Builder, slot, modes):
    """An op the model does not have: no time, no launch."""
    for mode in range(modes):
        b.put(slot, mode, 0.0, 0.0, launch=False)


def dispatch_bytes(s: _Shape, split, load=1.0, etp=1.0):
    """Bytes the busiest rank moves in a MoE dispatch (or combine) all-to-all: every routed copy
    of a token's hidden state (tokens x top_k x hidden; a latent MoE's latent, FFNSpec.latent),
    a 1/tp share when the tokens are split over the tp group, times ``load``, the busiest ep
    group's share of the routed copies over the mean (``cost.expert_load``: it receives that
    many, the others wait for it); nothing without expert parallelism. ``etp``: the experts'
    tensor-parallel ranks under `experts` (each copy reaches all etp ranks of its expert's
    group, and each sends its partial sums back: a 1/(tp/etp) share)."""
    lw = s.m.ffn.expert_width(s.h)
    return s.rows * s.top_k * lw * s.ab / (s.tp / etp if split else 1.0) * load * (s.ep > 1)


def _active(s, experts_rank, tokens):
    """Expected expert copies (of ``experts_rank``) that receive at least one of ``tokens``
    tokens: each of the ``slots`` copies gets a token's pick with chance top_k / slots (the
    redundant copies of an expert share its tokens)."""
    return experts_rank * (1.0 - (1.0 - s.top_k / s.slots) ** tokens)


def expert_load(s: _Shape, x, experts_rank, tokens):
    """The busiest rank's routed pairs over the mean (``cost.expert_load.busiest``) for ranks
    holding ``experts_rank`` expert copies with ``tokens`` tokens routed; 1 for a dense FFN."""
    return busiest(s.m.ffn, experts_rank, tokens) if x.moe else 1.0


@dataclass
class _FFN:
    """One layer type's FFN on the busiest rank of each coarse row ([G] arrays or scalars)."""
    moe: bool          # routed experts (else one dense FFN)
    inter: float       # intermediate width of one expert (dense: of the FFN)
    k: float           # copies of each token: top-k (dense: 1)
    e_loc: object      # experts on each ep rank (dense: 1)
    pairs: object      # (token, expert) pairs per tp group
    shared: float      # shared-expert width (0: none)
    tokens: object     # tokens routed per micro-batch step
    e_rank_x: object   # experts per rank under the `experts` choice (per expert group of etp
    #                    ranks, each rank 1/etp of each)

    @property
    def group(self) -> str:
        """The op group of its weights' format (``_Shape.fmt``)."""
        return "experts" if self.moe else "dense_ffn"


def _ffn_layer(s: _Shape, moe: bool, width=None) -> _FFN:
    """``width``: a dense FFN's own (``FFNSpec.widths``), else ``intermediate``."""
    f = s.m.ffn
    if moe:
        k, e_loc = s.top_k, s.slots / s.ep                # expert copies on each ep rank
        # `experts`: the ep group's copies over its tp / etp expert groups (an etp that does not
        # divide tp is refused: ``build_tables``)
        return _FFN(True, float(f.expert_intermediate), k, e_loc, s.rows * k,
                    float(f.shared_intermediate), s.mb_tokens,
                    np.ceil(e_loc / np.maximum(s.tp / s.etp, 1.0)))
    return _FFN(False, float(width or f.intermediate), 1.0, 1.0, s.rows, 0.0, s.mb_tokens,
                np.ceil(1.0 / s.tp))


def _tp_share(s: _Shape, h, inter, which: int, mode: int):
    """The busiest rank's share of an FFN matrix split over tp in a tp mode: FFN1's row split
    (MODE_DIM0) and FFN2's column split (MODE_DIM1) split the hidden width, the others the
    intermediate one."""
    return _frac(h, s.tp) if (mode == MODE_DIM0) == (which == 1) else _frac(inter, s.tp)


def _routed(s: _Shape, x: _FFN, which: int, mode: int):
    """FLOPs, HBM bytes and weights of FFN1 (which = 1) or FFN2 (2) in ``mode``, routed part."""
    # a latent MoE's experts read and write the latent (FFNSpec.latent)
    h = s.m.ffn.expert_width(s.h) if x.moe else s.h
    inter, up_mats = x.inter, s.m.ffn.n_mats - 1
    mats = up_mats if which == 1 else 1
    w_exp = h * inter * mats                               # one expert's weights in this op
    if mode in (MODE_DIM0, MODE_DIM1):    # FFN1 row / FFN2 column split hidden, else inter
        fr = _tp_share(s, h, inter, which, mode)
        npairs, ex, toks = x.pairs, x.e_loc, x.tokens
    elif mode == MODE_NONE:
        fr, npairs, ex, toks = 1.0, x.pairs, x.e_loc, x.tokens
    elif mode == MODE_NONE_T:   # none on T: each rank its own whole sequences (every ep group;
        # no more than the micro-batch holds: at tp = 1 this is the R mode, one deployment)
        fr, npairs, ex, toks = 1.0, s.rows_t * x.k, x.e_loc, np.minimum(s.rows_t * s.ep, x.tokens)
    elif x.moe:   # experts: whole experts per expert group (a 1/etp share of each expert's
        # intermediate width on each of its etp ranks), tokens of those experts only
        fr, npairs, ex, toks = (_frac(inter, s.etp), x.pairs * x.e_rank_x / x.e_loc, x.e_rank_x,
                                x.tokens)
    else:   # `experts` on a dense FFN: replicated weights, each rank a share of whole sequences
        fr, npairs, ex, toks = 1.0, s.rows_t, 1.0, np.minimum(s.rows_t * s.ep, x.tokens)
    act = _active(s, ex, toks) if x.moe else 1.0     # weights of idle experts are not read
    # the busiest rank's pairs: its ``ex`` experts' share of the routed pairs under the routed
    # load (cost.expert_load; uniform routing's mean share, ``npairs``, times I >= 1)
    npairs = npairs * expert_load(s, x, ex, toks)
    flops = 2.0 * npairs * w_exp * fr
    in_w = h if which == 1 else inter
    out_w = inter * up_mats if which == 1 else h
    # row split: the input is split; column split: the output is (an expert split over etp
    # ranks under `experts`: FFN1 by columns, FFN2 by rows, its output partial sums)
    etp_split = x.moe and mode in (MODE_EXPERTS, MODE_EXPERTS_T)
    fin = fr if mode == MODE_DIM0 or (etp_split and which == 2) else 1.0
    fout = fr if mode == MODE_DIM1 or (etp_split and which == 1) else 1.0
    wb, wbr, peak = s.fmt[x.group]
    if x.moe:   # a grouped GEMM: its own weight-read rate; compute by tokens per active expert
        wbr = s.grouped[0]
        peak = grouped_compute(s, npairs / np.maximum(act, 1e-30))
    nbytes = act * w_exp * fr * wbr + npairs * (in_w * fin + out_w * fout) * s.ab
    return flops, nbytes, ex * w_exp * fr * wb, peak


def _shared(s: _Shape, x: _FFN, which: int, mode: int):
    """FLOPs, HBM bytes and weights of the shared expert (every token) in ``mode``."""
    if x.shared == 0:
        return 0.0, 0.0, 0.0
    h = s.h
    mats = s.m.ffn.n_mats - 1 if which == 1 else 1
    w = h * x.shared * mats
    if mode in (MODE_DIM0, MODE_DIM1):
        fr = _tp_share(s, h, x.shared, which, mode)
        r = s.rows
    elif mode in (MODE_NONE, MODE_EXPERTS):   # experts: the shared expert replicated, tokens split
        fr, r = 1.0, s.rows if mode == MODE_NONE else s.rows / s.tp
    else:
        fr, r = 1.0, s.rows_t
    wb, wbr, _ = s.fmt["shared_experts"]
    return 2.0 * r * w * fr, w * fr * wbr + r * h * 2 * s.ab, w * fr * wb


def _latent_proj(s: _Shape, x: _FFN, which: int, mode: int):
    """FLOPs, HBM bytes and weights of a latent MoE's fc1_latent_proj [hidden -> latent] (FFN1,
    before dispatch) or fc2_latent_proj [latent -> hidden] (FFN2, after combine): a dense GEMM of
    every token, in the shared experts' format, replicated on every tp rank: vLLM builds both as
    ReplicatedLinear (vllm/model_executor/models/nemotron_h.py NemotronHMoE, at commit
    00b08dc44519a82cbdd9061d92d1226985094622), so under a tp split of the FFN (dim 0, dim 1)
    each rank runs the whole GEMM on all the tokens; `experts` on R a 1/tp share of the tokens,
    the `none` modes the tokens they hold."""
    lat = float(s.m.ffn.latent) if x.moe else 0.0
    if lat == 0:
        return 0.0, 0.0, 0.0
    h = s.h
    w = h * lat
    if mode in (MODE_DIM0, MODE_DIM1, MODE_NONE):
        r = s.rows
    elif mode == MODE_EXPERTS:
        r = s.rows / s.tp
    else:
        r = s.rows_t
    wb, wbr, _ = s.fmt["shared_experts"]
    return 2.0 * r * w, w * wbr + r * (h + lat) * s.ab, w * wb


def _ffn_collectives(s: _Shape, x: _FFN, which: int, choice, lin, lout) -> list:
    """The all-to-alls FFN1 (which = 1) or FFN2 (2) needs in the mode (choice, lin, lout)."""
    colls = []
    if x.moe and (s.ep > 1).any():
        # dispatch (before FFN1) and combine (after FFN2): each routed copy goes to its expert's
        # ep rank and back (all-to-all over ep); ranks holding a split (T, F) of the tokens or
        # an expert subset send only their share
        split = (lin if which == 1 else lout) in (T, F) or choice == EXPERTS
        colls.append(("all-to-all", "ep",
                      dispatch_bytes(s, split, expert_load(s, x, x.e_loc, x.tokens),
                                     s.etp if choice == EXPERTS else 1.0)))
    if choice == EXPERTS and (lin == T or lout == T):
        # tokens held per rank (T) travel to the rank holding their expert and back (a latent
        # MoE's at its latent width; a dense layer's at hidden)
        # MoE's at its latent width; a dense layer's at hidden), the busiest rank receiving its
        # experts' share of them (the routed load: as the ep all-to-all's ``dispatch_bytes``)
        width = s.m.ffn.expert_width(s.h) if x.moe else s.h
        load = expert_load(s, x, x.e_rank_x, x.tokens)
        # (a MoE's experts split over etp ranks: each copy goes to its expert group's etp ranks
        # and their partial sums come back to be added, etp times the bytes)
        etp = s.etp if x.moe else 1.0
        colls.append(("all-to-all", "tp", s.rows_t * x.k * width * s.ab * load * etp))
    return colls


def _fill_ffn(b: _Builder, moe: bool):
    """FFN1/FFN2 (and the router) of one layer type in their six modes each: the routed experts
    (or the dense FFN) plus the shared expert, and their collectives. A dense model whose layers
    have their own widths (``FFNSpec.widths``): each width filled in turn and weighted by its
    share of the layers (the mean layer, as ``_fill_attention`` weights the mixers)."""
    groups = b.s.m.ffn.width_groups
    if moe or len(groups) == 1:
        _fill_ffn_one(b, moe)
        return
    sl = [SLOT[x] for x in ("router", "ffn1", "ffn2")]
    acc, records = {}, {}
    for width, count in groups:
        share = count / b.s.m.layers
        _fill_ffn_one(b, moe, width)
        for name in _MIXER_ARRAYS:
            part = share * getattr(b, name)[:, sl]
            acc[name] = part if name not in acc else acc[name] + part
        for key, recs in b.intrinsic.items():
            if key[0] in sl:
                records.setdefault(key, []).extend(
                    (kind, group, share * nb, share * t) for kind, group, nb, t in recs)
    for name in _MIXER_ARRAYS:
        getattr(b, name)[:, sl] = acc[name]
    b.intrinsic.update(records)


def _fill_ffn_one(b: _Builder, moe: bool, width=None):
    """``_fill_ffn`` of one FFN width (``width``: a dense layer's own)."""
    s = b.s
    sfx = "_dense" if s.m.is_moe and not moe else ""
    if moe:
        _fill_gemm(b, "router", s.h, s.experts, group="router")   # [hidden, experts] before FFN1
    else:   # a dense FFN has no router
        _fill_empty(b, "router_dense" if s.m.is_moe else "router", 4)
    x = _ffn_layer(s, moe, width)
    parts = {}               # (FFN1 or FFN2, mode) -> its routed and its other FLOPs and bytes
    for which, slot, modes in ((1, "ffn1" + sfx, FFN1_MODES), (2, "ffn2" + sfx, FFN2_MODES)):
        for mode, (choice, lin, lout) in enumerate(modes):
            fl, by, w, peak = _routed(s, x, which, mode)
            fl2, by2, w2 = (a + b for a, b in zip(_shared(s, x, which, mode),
                                                   _latent_proj(s, x, which, mode)))
            peak2 = s.fmt["shared_experts"][2]
            if x.shared or s.m.ffn.latent:   # the shared expert and the latent projections
                fl2 = fl2 * (peak / peak2)   # (dense GEMMs, maybe in another format): their
                #                              FLOPs at their own rate
            b.put(slot, mode, fl + fl2, by + by2, w + w2,
                  colls=_ffn_collectives(s, x, which, choice, lin, lout), peak=peak)
            parts[which, mode] = (slot, fl, by, peak, fl2, by2)
    if moe:     # the busiest rank's load in each mode, for reports (cost.model.breakdown)
        b.expert_load = np.stack([_full(expert_load(s, x, s.slots / ep, toks), s.tp.shape)
                                  for _, ep, toks in (_ffn_mode_shape(s, x, mode)
                                                      for mode in range(len(FFN1_MODES)))], 1)
    if s.kernels is not None:
        _ffn_measured(b, x, parts)


def _ffn_mode_shape(s: _Shape, x: _FFN, mode: int) -> tuple:
    """(tp, ep, tokens) of the MoE layer one rank runs in ``mode`` (``KernelSet.moe``): each
    expert split over tp ranks, the experts over ep, ``tokens`` distinct tokens entering the
    layer. The tp modes split each expert over the tp group; `none` runs whole experts on every
    tp rank (tp 1), on T its own sequences' tokens; `experts` spreads whole experts over the
    tp x ep ranks, each expert over etp of them (moe_tp = etp, moe_ep = tp x ep / etp)."""
    if mode in (MODE_DIM0, MODE_DIM1):
        return s.tp, s.ep, x.tokens
    if mode == MODE_NONE:
        return 1.0, s.ep, x.tokens
    if mode == MODE_NONE_T:
        return 1.0, s.ep, np.minimum(s.rows_t * s.ep, x.tokens)
    return s.etp, s.ep * s.tp / s.etp, x.tokens


def _dense_ffn_measured(s: _Shape, x: _FFN, which: int):
    """A dense FFN's FFN1 [hidden -> up_mats x inter] or FFN2 [inter -> hidden] from the GEMM
    table in each of its six modes ([modes, G]; None without a table): the split as
    ``_routed`` splits it (row: k, column: n), `none` on T and `experts` each rank's own
    sequences."""
    h, up = s.h, s.m.ffn.n_mats - 1
    kk, nn = (h, x.inter * up) if which == 1 else (x.inter, h)
    shape = s.tp.shape
    ms, ns, ks_ = [], [], []
    for mode in range(len(FFN1_MODES)):
        fr = _tp_share(s, h, x.inter, which, mode)
        ms.append(_full(s.rows if mode in (MODE_DIM0, MODE_DIM1, MODE_NONE) else s.rows_t,
                        shape))
        ns.append(_full(nn * fr if mode == MODE_DIM1 else nn, shape))
        ks_.append(_full(kk * fr if mode == MODE_DIM0 else kk, shape))
    if s.m.precision.share_of("dense_ffn") < 1.0:     # partly quantized: the roofline
        return None
    return s.kernels.gemm(s.m.precision.format_of("dense_ffn"), np.maximum(np.stack(ms), 1.0),
                          np.stack(ns), np.stack(ks_))


def _ffn_measured(b: _Builder, x: _FFN, parts: dict):
    """An FFN's measured times (``_fill_ffn``; ``parts``: (FFN1 or FFN2, mode) -> (slot, routed
    FLOPs, bytes, FLOP rate, the shared expert's and latent projections' FLOPs, bytes)): routed
    experts from the fused-MoE table (the whole layer, split between FFN1 and FFN2 as their
    rooflines split it; the shared expert and a latent MoE's projections at the roofline beside
    it); a dense FFN from the GEMM table (``_dense_ffn_measured``)."""
    s = b.s
    if not x.moe:
        if x.inter == 0 or not s.m.dense_ffn_layers and s.m.is_moe:   # no dense FFN
            return
        for which in (1, 2):
            t = _dense_ffn_measured(s, x, which)
            for mode in range(len(FFN1_MODES)):
                b.measured(parts[which, mode][0], mode, None if t is None else t[mode])
        return
    if s.m.ffn.latent:      # the tables hold no latent MoE
        return
    exp, shape = s.topo.roofline_exponent, s.tp.shape

    def rt(fl, by, peak):
        return roofline_time(*_roofline(s, _full(fl, shape), _full(by, shape), peak), exp)
    for mode in range(len(FFN1_MODES)):
        tp, ep, toks = _ffn_mode_shape(s, x, mode)
        # the busiest rank: the table's rank at its tokens times the routed load over the mean
        # (cost.expert_load; the layer's time at I x the tokens, as its GEMMs' is), its expert
        # copies (with redundant ones, slots / ep of them) read as the table's experts / ep'
        load = expert_load(s, x, s.slots / ep, toks)
        whole = s.kernels.moe(s.m.precision.format_of("experts"), s.h, int(x.inter), int(x.k),
                              int(s.experts), tp, ep * s.experts / s.slots,
                              np.maximum(toks * load, 1.0))
        if whole is None:
            return
        if b.moe_read is None:
            b.moe_read = s.kernels.moe_source(s.m.precision.format_of("experts"), s.h,
                                              int(x.inter), int(x.k), int(s.experts))
        routed = {which: rt(*parts[which, mode][1:4]) for which in (1, 2)}
        for which in (1, 2):
            slot, _, _, peak, fl2, by2 = parts[which, mode]
            share = routed[which] / np.maximum(routed[1] + routed[2], 1e-30)
            extra = rt(fl2, by2, peak) + s.overhead if x.shared or s.m.ffn.latent else 0.0
            b.measured(slot, mode, whole * share, extra)


# how a mode of the scores or context op stores the KV cache of MLA's one latent: heads and R
# both keep whole latents of all sequences (the latent is not split by heads), head_dim splits the
# latent, T keeps whole latents of each rank's sequences
_LATENT_STORAGE = np.array([{MODE_DIM0: 0, MODE_DIM1: 1, MODE_NONE: 0, MODE_NONE_T: 2}[m]
                            for m in range(4)])


def kv_layer(model: ModelSpec, held, copy=None):
    """Resident KV cache per GPU per layer for every (scores mode, context mode), from each op's
    ``held`` [G, slots, modes]: K as the scores op splits it, V as the context op does. MLA keeps
    one latent for keys and values (``kv.latent``): when the context op splits it the same way as
    the scores op, the scores op's copy serves both (``copy`` [G, 4]: the part of the context
    op's held cache that is that copy, where linear layers' states share the op; None: all)."""
    k = held[:, SLOT["scores"], :4, None]
    v = held[:, SLOT["context"], None, :4]
    if not kv.latent(model):
        return k + v
    same = _LATENT_STORAGE[:, None] == _LATENT_STORAGE[None, :]
    if copy is None:
        return k + np.where(same, 0.0, v)
    return k + np.where(same, v - copy[:, None, :], v)


def _linear_points(s: _Shape) -> dict:
    """The activations at qkv, scores and context in a model with linear-attention layers: each
    kind's weighted by its share of the layers (the delta rule's and the gated norm's output:
    value_dim wide)."""
    a, la = 1.0 - s.lin_share, s.lin_share
    if s.general:    # each softmax kind's own widths
        return {"qkv": [(a * k.share, s.rows * k.qkv_out) for k in s.kinds]
                + [(la, s.rows * s.lin_qkv_out)],
                "scores": [(a * k.share, k.score_rows * k.heads) for k in s.kinds]
                + [(la, s.rows * s.lin_ctx_out)],
                "context": [(a * k.share, s.rows * k.ctx_out) for k in s.kinds]
                + [(la, s.rows * s.lin_ctx_out)]}
    return {"qkv": [(a, s.rows * s.qkv_out), (la, s.rows * s.lin_qkv_out)],
            "scores": [(a * k.share, k.score_rows * s.m.attention.heads) for k in s.kinds]
            + [(la, s.rows * s.lin_ctx_out)],
            "context": [(a, s.rows * s.ctx_out), (la, s.rows * s.lin_ctx_out)]}


def _kind_points(s: _Shape) -> dict:
    """The activations at qkv, scores and context when the layer kinds have their own shapes
    (``_Shape.general``): each kind's, weighted by its share of the layers."""
    return {"qkv": [(k.share, s.rows * k.qkv_out) for k in s.kinds],
            "scores": [(k.share, k.score_rows * k.heads) for k in s.kinds],
            "context": [(k.share, s.rows * k.ctx_out) for k in s.kinds]}


def build_tables(model: ModelSpec, topo: TopologySpec, work: Workload, coarse) -> Tables:
    """Cost every op in every mode and every layout conversion for each coarse row."""
    s = _Shape(model, topo, work, coarse)
    b = _Builder(s)
    _fill_embedding(b)
    _fill_norm(b, "attn_norm")
    _fill_norm(b, "ffn_norm")
    _fill_norm(b, "final_norm")
    _fill_attention(b)
    _fill_context_parallel(b)
    _fill_decode_context_parallel(b)
    _fill_ffn(b, moe=model.is_moe)
    if model.is_moe:
        _fill_ffn(b, moe=False)   # the dense layers
    else:
        for slot in ("router_dense", "ffn1_dense", "ffn2_dense"):
            _fill_empty(b, slot, MAX_MODES)
    _fill_gemm(b, "lm_head", s.h, model.vocab, rows=s.lm_rows, rows_t=np.ceil(s.lm_rows / s.tp),
               group="lm_head")

    # ---- conversions between layouts, per activation point
    f = model.ffn
    inter_moe = (s.rows * s.top_k * f.expert_intermediate * (f.n_mats - 1 > 0)
                 + s.rows * f.shared_intermediate) if model.is_moe else s.rows * f.intermediate
    full = {  # elements of the whole activation held by one tp group
        "hidden": s.rows * s.h, "qkv": s.rows * s.qkv_out,
        "scores": [(k.share, k.score_rows * model.attention.heads) for k in s.kinds],
        "context": s.rows * s.ctx_out,
        **(_kind_points(s) if s.general else {}),
        **(_linear_points(s) if s.lin_share else {}),
        # (a dense model's layers of their own widths: each width's share)
        "inter": inter_moe if model.is_moe or not f.widths else
        [(n / model.layers, s.rows * w) for w, n in f.width_groups],
        "inter_dense": s.rows * f.intermediate,
        "router": s.rows * s.experts, "logits": s.lm_rows * model.vocab,
        "residual": s.rows * s.h * model.hc_mult, "mixed": s.rows * s.h,
    }
    G = len(s.tp)
    conv = np.zeros((G, len(POINTS), N_LAYOUTS, N_LAYOUTS))
    conv_bytes = np.zeros((G, len(POINTS)))
    for name, elems in full.items():
        # the scores differ by layer kind: each kind's conversion weighted by its share
        parts = elems if isinstance(elems, list) else [(1.0, elems)]
        for share, el in parts:
            nb = np.broadcast_to(el * s.ab, s.tp.shape)
            conv_bytes[:, PT[name]] += nb if len(parts) == 1 else share * nb
            by_kind = {}          # one collective of a kind costs the same for every pair
            for (src, dst), kind in CONVERSION.items():
                if kind not in by_kind:
                    # all-to-all moves each rank's share (S/p); the others the whole tensor S
                    size = nb / s.tp if kind == "all-to-all" else nb
                    t = coll.COST[kind](topo.engine_links, size, s.tp, 1.0, b.levels["tp"])
                    by_kind[kind] = measured_allreduce(s, s.tp, size, t) \
                        if kind == "all-reduce" else t
                t = by_kind[kind]
                conv[:, PT[name], src, dst] += t if len(parts) == 1 else share * t
    if s.bare_share:     # the mixer's conversions: the layers that have one
        for name in ("qkv", "scores", "context", "mixed"):
            conv[:, PT[name]] *= 1.0 - s.bare_share
    # after the LM head every rank needs the sampled ids: R has them; T samples its own tokens and
    # all-gathers the ids (4 bytes each); F (vocab split) gathers the logits, P all-reduces them
    logits = conv_bytes[:, PT["logits"]]
    final = np.zeros((G, 4))
    ids_bytes = s.lm_rows * 4.0
    final[:, T] = coll.all_gather(topo.engine_links, ids_bytes, s.tp, 1.0, b.levels["tp"])
    final[:, F] = coll.all_gather(topo.engine_links, logits, s.tp, 1.0, b.levels["tp"])
    final[:, P] = measured_allreduce(
        s, s.tp, logits, coll.all_reduce(topo.engine_links, logits, s.tp, 1.0, b.levels["tp"]))
    # stage-to-stage: the activation and the residual of the micro-batch (split over tp if the
    # layout is T or F, else whole on each rank; the residual hc_mult hidden states wide)
    hid, res = conv_bytes[:, PT["hidden"]], conv_bytes[:, PT["residual"]]
    send_bytes = np.stack([hid / s.tp, hid, res / s.tp, res], axis=1)
    send = np.stack([coll.send(topo.engine_links, send_bytes[:, i], *b.groups["pp"],
                               b.levels["pp"]) for i in range(4)], 1)
    # workspace: activations of one layer in flight (hidden, qkv, context, FFN intermediate,
    # logits), double-buffered
    inter_w = (s.top_k * f.expert_intermediate + f.shared_intermediate) if model.is_moe \
        else f.intermediate
    mixer = s.qkv_out + s.ctx_out if not s.general else \
        max(k.qkv_out + k.ctx_out for k in s.kinds)                  # the widest kind's
    if s.lin_share:
        mixer = max(mixer, s.lin_qkv_out + s.lin_ctx_out)
    workspace = 2.0 * s.ab * (s.rows * (3 * s.h + mixer + inter_w * (f.n_mats - 1))
                              + s.lm_rows * model.vocab)
    # coarse-only validity
    budget = work.budget(topo)
    bad = np.zeros(G, dtype=np.int64)
    bad |= np.where(s.gpus > budget, REASON_BIT["budget"], 0)
    bad |= np.where(model.layers % s.pp.astype(np.int64) != 0, REASON_BIT["divisibility"], 0)
    # every stage must hold the layer kinds in the same numbers (the tables cost their mean)
    bad |= np.where(kv.even_split(model, s.pp), 0, REASON_BIT["divisibility"])
    # context parallelism is costed for a prefill pass over softmax attention: a decode step's
    # (vLLM's decode context parallel, TensorRT-LLM's helix) and a recurrent state split over a
    # sequence are not
    cp_off = work.phase != "prefill" or model.linear_layers > 0
    bad |= np.where((s.cp > 1) & cp_off, REASON_BIT["context-parallel"], 0)
    # decode context parallelism: a decode or mixed step over the token mixers ``dcp_costed``
    # names, its ranks dcp of the tp group's (vLLM 0.33.0 config/parallel.py: "tp % dcp == 0";
    # SGLang 0.5.23: a divisor of tp_size); not with cp (vLLM: dcp in {1, pcp, tp*pcp} and
    # sparse MLA only; SGLang: "--dcp-size > 1 does not support --enable-prefill-cp")
    dcp_off = work.phase == "prefill" or not dcp_costed(model)
    bad |= np.where((s.dcp > 1) & (dcp_off | (s.cp > 1)), REASON_BIT["context-parallel"], 0)
    bad |= np.where(s.tp.astype(np.int64) % s.dcp.astype(np.int64) != 0,
                    REASON_BIT["divisibility"], 0)
    # expert tensor parallelism: etp of each expert group's ranks, a divisor of tp (SGLang 0.5.23
    # srt/runtime_context.py derive_parallel_widths: moe_tp = tp // ep // moe_dp; TensorRT-LLM
    # 1.2.1 moe_tensor_parallel_size x moe_expert_parallel_size = tp_size)
    bad |= np.where(s.tp.astype(np.int64) % s.etp.astype(np.int64) != 0,
                    REASON_BIT["divisibility"], 0)
    if model.is_moe:
        # the expert copies (experts + redundant) divide over the ep groups
        bad |= np.where(f.slots % s.ep.astype(np.int64) != 0, REASON_BIT["divisibility"], 0)
    else:
        bad |= np.where((s.ep > 1) | (s.etp > 1), REASON_BIT["experts"], 0)
    return Tables(np.asarray(coarse), b.compute, b.memory, b.time, b.intr, b.intrinsic,
                  b.weights, b.kv, kv_layer(model, b.kv, b.latent_copy), conv, conv_bytes, final,
                  send, send_bytes,
                  workspace,
                  bad, np.floor(model.layers / s.pp), s.pp, s.batch, s.gpus, s.steps,
                  extra={"ids_bytes": ids_bytes, "measured": sorted(b.measured_ops),
                         "moe_read": b.moe_read,
                         **({} if b.expert_load is None else {"expert_load": b.expert_load})})


def append_tables(a: Tables, used: int, b: Tables) -> Tables:
    """Tables of a's first ``used`` coarse rows followed by b's (without breakdown records): b
    written into a's spare rows, or, where they are too few, new tables of twice the rows (a
    cache that grows by one call's rows at a time then copies O(rows) in all, not per call).
    Rows past ``used + len(b)`` are spare: zeros, never indexed."""
    k = len(b.coarse)
    names = [f.name for f in fields(Tables) if isinstance(getattr(a, f.name), np.ndarray)]
    extras = [n for n in a.extra if isinstance(a.extra[n], np.ndarray)]
    if used + k > len(a.coarse):
        cap = max(2 * len(a.coarse), used + k)

        def grown(x):
            out = np.zeros((cap,) + x.shape[1:], dtype=x.dtype)
            out[:used] = x[:used]
            return out
        a = Tables(intrinsic={}, extra={n: grown(a.extra[n]) for n in extras},
                   **{n: grown(getattr(a, n)) for n in names})
    for n in names + ["op_total_s"]:
        getattr(a, n)[used:used + k] = getattr(b, n)
    for n in extras:
        a.extra[n][used:used + k] = b.extra[n]
    return a
